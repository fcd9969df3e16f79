#include "node/check/check_hotfix.h"

#include <chrono>
#include <exception>

#include "node/call/lps_target.h"
#include "node/check/pointer_staging.h"
#include "node/host/guest_agent_event.h"

namespace hotfix::node {
namespace {

using wire::GrpcCode;

CheckHotfixResult Failed(Status error) {
  return {.outcome = Outcome::kFailed, .error = std::move(error), .staged = std::nullopt};
}

CheckHotfixResult Succeeded(Outcome outcome, std::optional<HotfixPointer> staged = std::nullopt) {
  return {.outcome = outcome, .error = Status::Ok(), .staged = std::move(staged)};
}

// Writes (or in a dry run only plans) the pointer; the outcome says whether this node's base
// has an entry. Strictly-higher gating is download-hotfix's job, not ours (AgentBaker:
// aks-node-controller/checkhotfix.go checkHotfix).
CheckHotfixResult Stage(const CheckHotfixOptions& options, const HotfixMap& hotfixes,
                        Outcome on_hit, Outcome on_miss, const char* write_error_prefix,
                        Logger& log) {
  auto staged =
      options.dry_run
          ? PlanStagedPointer(options.pointer_path, hotfixes, log)
          : StageHotfixes(options.pointer_path, hotfixes,
                          Deadline::After(std::chrono::milliseconds(options.lock_timeout_ms)), log);
  if (!staged.ok()) return Failed(staged.status().Annotate(write_error_prefix));
  Outcome outcome =
      ResolveVersion(*staged, options.current_version, log).empty() ? on_miss : on_hit;
  return Succeeded(outcome, std::move(*staged));
}

CheckHotfixResult FallBackToColdStart(const CheckHotfixOptions& options,
                                      const std::string& fetch_error, Logger& log) {
  log.Warn("failed to reach LPS, attempting cold-start fallback", {{"error", fetch_error}});
  auto cold = ReadColdStartHotfixes(options.node_config_path);
  if (!cold.ok()) {
    return Failed(
        Status::Unavailable("LPS fetch failed (" + fetch_error +
                            ") and cold-start fallback failed: " + cold.status().message()));
  }
  if (!cold->has_value()) {
    return Failed(
        Status::Unavailable("LPS fetch failed and no cold-start pointer present: " + fetch_error));
  }
  // A cold-start map is reported as customDataFallback whether or not it covers our base.
  return Stage(options, **cold, Outcome::kCustomDataFallback, Outcome::kCustomDataFallback,
               "writing cold-start hotfix config", log);
}

CheckHotfixResult HandleFetchFailure(const CheckHotfixOptions& options, const FetchResult& fetched,
                                     Logger& log) {
  switch (ClassifyFetchFailure(fetched)) {
    case FetchClass::kBenign: {
      std::string reason = "LPS has no hotfix available for this node (code " +
                           std::string(wire::GrpcCodeName(fetched.status.code)) + ")";
      log.Info("LPS reports no hotfix available for this node (fail-open)", {{"reason", reason}});
      return Succeeded(Outcome::kNoHotfixAvailable);
    }
    case FetchClass::kAuthoritativeRejection:
      log.Warn("LPS returned a client error; not falling back to cold-start pointer (fail-open)",
               {{"error", fetched.ErrorText()}});
      return Failed(Status::InvalidArgument(
          "LPS fetch failed with a client error, not falling back: " + fetched.ErrorText()));
    case FetchClass::kFallbackEligible:
      break;
  }
  return FallBackToColdStart(options, fetched.ErrorText(), log);
}

std::string EventMessage(const CheckHotfixResult& result) {
  std::string msg = std::string("check-hotfix outcome=") + OutcomeName(result.outcome);
  if (!result.error.ok()) msg += " error=" + result.error.message();
  return msg;
}

}  // namespace

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kLpsRead:
      return "lpsRead";
    case Outcome::kNoHotfixForBase:
      return "noHotfixForBase";
    case Outcome::kNoHotfixAvailable:
      return "noHotfixAvailable";
    case Outcome::kCustomDataFallback:
      return "customDataFallback";
    case Outcome::kFailed:
      return "failed";
  }
  return "failed";
}

FetchClass ClassifyFetchFailure(const FetchResult& result) {
  if (result.local_error) return FetchClass::kFallbackEligible;
  switch (result.status.code) {
    case GrpcCode::kUnauthenticated:
    case GrpcCode::kPermissionDenied:
    case GrpcCode::kNotFound:
      return FetchClass::kBenign;
    case GrpcCode::kInvalidArgument:
    case GrpcCode::kResourceExhausted:
      return FetchClass::kAuthoritativeRejection;
    default:
      return FetchClass::kFallbackEligible;
  }
}

CheckHotfixResult CheckHotfix(const CheckHotfixOptions& options, LpsFetcher& fetcher, Logger& log) {
  FetchResult fetched = fetcher.Fetch();
  if (!fetched.ok()) return HandleFetchFailure(options, fetched, log);

  auto served = ParseHotfixPointer(fetched.config);
  if (!served.ok()) return Failed(served.status().Annotate("parsing LPS hotfix pointer"));
  // Only the served map is used; a served version or scripts_version is dropped.
  if (served->hotfixes.empty()) {
    log.Info("LPS returned no hotfixes for this node; leaving existing pointer intact (fail-open)",
             {{"path", options.pointer_path}});
    return Succeeded(Outcome::kNoHotfixAvailable);
  }
  return Stage(options, served->hotfixes, Outcome::kLpsRead, Outcome::kNoHotfixForBase,
               "writing hotfix config", log);
}

CheckHotfixResult RunCheckHotfixCommand(const CheckHotfixOptions& options, LpsFetcher& fetcher,
                                        const std::string& events_dir, Logger& log) {
  log.Info("aks-node-controller check-hotfix started");
  const auto start = std::chrono::system_clock::now();
  CheckHotfixResult result;
  std::string panic;
  try {
    result = CheckHotfix(options, fetcher, log);
  } catch (const std::exception& e) {
    panic = e.what();
  } catch (...) {
    panic = "unknown exception";
  }

  if (!panic.empty()) {
    log.Error("check-hotfix panicked (fail-open)", {{"panic", panic}});
    if (!options.dry_run) {
      ReportRunEvent(events_dir, "CheckHotfix", true, "check-hotfix outcome=failed panic=" + panic,
                     start, log);
    }
    return Failed(Status::Internal("panic=" + panic));
  }
  if (!options.dry_run) {
    ReportRunEvent(events_dir, "CheckHotfix", result.outcome == Outcome::kFailed,
                   EventMessage(result), start, log);
  }
  if (result.error.ok()) {
    log.Info("check-hotfix completed", {{"outcome", OutcomeName(result.outcome)}});
  } else {
    log.Warn("check-hotfix completed with error (fail-open)",
             {{"outcome", OutcomeName(result.outcome)}, {"error", result.error}});
  }
  return result;
}

}  // namespace hotfix::node
