#include "node/download/hotfix_report.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "common/file_lock.h"
#include "common/file_util.h"
#include "common/text.h"
#include "node/host/hotfix_pointer.h"

namespace hotfix::node {
namespace {

namespace pb = ::akslivepatching::v1;
using Clock = std::chrono::steady_clock;

// A marker is three short strings; anything larger is not ours.
constexpr size_t kMaxMarkerBytes = 4096;
constexpr std::string_view kCut = "...";

contract::Outcome FromFailure(BinaryFailure failure) {
  switch (failure) {
    case BinaryFailure::kPlatformUnsupported:
      return contract::HOTFIX_OUTCOME_PLATFORM_UNSUPPORTED;
    case BinaryFailure::kInstallFailed:
    // The contract has no integrity outcome of its own: for the rollout it is an install that
    // failed, and the report's detail says why ("repository integrity check failed ...").
    case BinaryFailure::kIntegrity:
      return contract::HOTFIX_OUTCOME_INSTALL_FAILED;
    case BinaryFailure::kVersionMismatch:
      return contract::HOTFIX_OUTCOME_VERSION_MISMATCH;
    case BinaryFailure::kStageFailed:
      return contract::HOTFIX_OUTCOME_STAGE_FAILED;
    case BinaryFailure::kNone:  // a failure nobody classified is still a failure
    case BinaryFailure::kOther:
      return contract::HOTFIX_OUTCOME_FAILED_OTHER;
  }
  return contract::HOTFIX_OUTCOME_FAILED_OTHER;
}

// What the marker remembers: the last report the service accepted.
struct MarkerKey {
  std::string base, version, outcome;
  bool operator==(const MarkerKey&) const = default;
};

// nullopt when the marker is absent, unreadable or not a marker: then nothing is known to have
// been reported, and sending again is the safe side.
std::optional<MarkerKey> ReadMarker(const std::string& path, Logger& log) {
  StatusOr<std::string> text = ReadFileToString(path, kMaxMarkerBytes);
  if (!text.ok()) {
    if (text.status().code() != Status::Code::kNotFound) {
      log.Warn("ignoring unreadable hotfix report marker",
               {{"path", path}, {"error", text.status()}});
    }
    return std::nullopt;
  }
  auto doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  auto field = [&doc](const char* key) -> const nlohmann::json* {
    if (!doc.is_object()) return nullptr;
    auto it = doc.find(key);
    return it != doc.end() && it->is_string() ? &*it : nullptr;
  };
  const nlohmann::json* base = field("base");
  const nlohmann::json* version = field("version");
  const nlohmann::json* outcome = field("outcome");
  if (base == nullptr || version == nullptr || outcome == nullptr) {
    log.Warn("ignoring invalid hotfix report marker", {{"path", path}});
    return std::nullopt;
  }
  return MarkerKey{base->get<std::string>(), version->get<std::string>(),
                   outcome->get<std::string>()};
}

// Under the folder's lock (as every writer of the pointer's folder), so that the stale temp
// files it removes are a killed writer's.
Status WriteMarker(const std::string& path, const MarkerKey& key, Deadline deadline) {
  const std::string dir = DirName(path);
  StatusOr<FileLock> lock = FileLock::OnFolder(dir, deadline);
  if (!lock.ok()) return lock.status();
  RemoveStaleTempFiles(dir, kReportMarkerTempPrefix);
  const nlohmann::ordered_json doc = {
      {"base", key.base}, {"version", key.version}, {"outcome", key.outcome}};
  AtomicWriteOptions write;
  write.mode = 0644;
  write.temp_prefix = kReportMarkerTempPrefix;
  return WriteFileAtomically(path, doc.dump() + "\n", write);
}

int64_t MillisSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

class GrpcHotfixReportSender : public HotfixReportSender {
 public:
  GrpcHotfixReportSender(LpsEndpoint endpoint, AttestedTokenSource& tokens, Logger& log)
      : endpoint_(std::move(endpoint)), tokens_(tokens), log_(log) {}

  Status Send(const HotfixReport& report, Deadline deadline) override {
    pb::ReportHotfixOutcomeRequest request;
    request.set_component_name(report.component);
    request.set_base_version(report.base_version);
    request.set_hotfix_version(report.hotfix_version);
    request.set_outcome(report.outcome);
    request.set_detail(report.detail);
    // One deadline for IMDS, the dial and the call: the report's whole budget.
    const LpsUnaryCall call{.method = contract::kReportHotfixOutcomePath,
                            .message = request.SerializeAsString(),
                            .dial_log = "download-hotfix LPS gRPC dial",
                            .component = report.component,
                            .dial_deadline = deadline,
                            .call_deadline = deadline};
    LpsUnaryResult called = CallLpsUnary(endpoint_, call, tokens_, log_);
    if (!called.ok()) return Status::Unavailable(called.ErrorText());
    pb::ReportHotfixOutcomeResponse reply;
    if (!reply.ParseFromString(called.message)) {
      return Status::Internal("grpc: failed to unmarshal the received ReportHotfixOutcomeResponse");
    }
    return Status::Ok();
  }

 private:
  LpsEndpoint endpoint_;
  AttestedTokenSource& tokens_;
  Logger& log_;
};

}  // namespace

std::string ReportDetail(std::string_view message) {
  // EscapeForMessage bounds its input, not its output (an escape is 4 bytes). Escaped a byte at
  // a time, a message that does not fit is cut at a whole escape with room left for the mark.
  std::string whole = EscapeForMessage(message, message.size());
  if (whole.size() <= kMaxReportDetailBytes) return whole;
  std::string out;
  for (char c : message) {
    const std::string piece = EscapeForMessage(std::string_view(&c, 1), 1);
    if (out.size() + piece.size() + kCut.size() > kMaxReportDetailBytes) break;
    out += piece;
  }
  return out.append(kCut);
}

std::optional<HotfixReport> DecideHotfixReport(const DownloadHotfixResult& result,
                                               std::string_view current_version,
                                               const std::string& component) {
  if (result.binary_target.empty()) return std::nullopt;
  HotfixReport report;
  if (result.binary == BinaryOutcome::kInstalled) {
    report.outcome = contract::HOTFIX_OUTCOME_INSTALLED;
  } else if (result.binary == BinaryOutcome::kFailed && result.binary_targeted) {
    report.outcome = FromFailure(result.binary_failure);
    report.detail = ReportDetail(result.error.message());
  } else {
    return std::nullopt;  // noHotfix, notTargeted, pointerUnreadable, busy
  }
  // The gate passed, so both share major and minor; the node's own spelling comes first.
  StatusOr<std::string> base = HotfixBaseFromVersion(current_version);
  if (!base.ok()) base = HotfixBaseFromVersion(result.binary_target);
  if (!base.ok()) return std::nullopt;
  report.component = component;
  report.base_version = *base;
  report.hotfix_version = result.binary_target;
  return report;
}

std::unique_ptr<HotfixReportSender> NewGrpcHotfixReportSender(LpsEndpoint endpoint,
                                                              AttestedTokenSource& tokens,
                                                              Logger& log) {
  return std::make_unique<GrpcHotfixReportSender>(std::move(endpoint), tokens, log);
}

std::string HotfixReportMarkerPath(const std::string& pointer_path) {
  return DirName(pointer_path) + "/" + kHotfixReportMarkerName;
}

ReportStatus ReportHotfixOutcome(const DownloadHotfixResult& result,
                                 std::string_view current_version,
                                 const ReportHotfixOptions& options, HotfixReportSender& sender,
                                 Logger& log) {
  std::optional<HotfixReport> report =
      DecideHotfixReport(result, current_version, options.component);
  if (!report) return ReportStatus::kNothingToReport;
  return SendHotfixReport(*report, options, sender, log);
}

ReportStatus SendHotfixReport(const HotfixReport& report, const ReportHotfixOptions& options,
                              HotfixReportSender& sender, Logger& log) {
  const Clock::time_point start = Clock::now();
  const Deadline deadline = Deadline::After(options.budget);
  const MarkerKey key{report.base_version, report.hotfix_version,
                      contract::OutcomeName(report.outcome)};
  if (!options.enabled) {
    log.Info("hotfix outcome not reported to LPS (--no-report)",
             {{"version", key.version}, {"outcome", key.outcome}});
    return ReportStatus::kDisabled;
  }
  if (options.cancelled != nullptr && options.cancelled->load()) {
    log.Info("hotfix outcome not reported to LPS: the run was cancelled",
             {{"version", key.version}, {"outcome", key.outcome}});
    return ReportStatus::kCancelled;
  }

  if (std::optional<MarkerKey> last = ReadMarker(options.marker_path, log); last && *last == key) {
    log.Info("hotfix outcome already reported to LPS; not sending it again",
             {{"base", key.base},
              {"version", key.version},
              {"outcome", key.outcome},
              {"marker", options.marker_path}});
    return ReportStatus::kAlreadyReported;
  }

  Status sent = sender.Send(report, deadline);
  if (!sent.ok()) {
    // The marker stays as it was: the next run sends again.
    log.Warn("failed to report hotfix outcome to LPS (fail-open)",
             {{"component", report.component},
              {"base", key.base},
              {"version", key.version},
              {"outcome", key.outcome},
              {"error", sent},
              {"durationMs", MillisSince(start)}});
    return ReportStatus::kFailed;
  }
  Status recorded = WriteMarker(options.marker_path, key, deadline);
  if (!recorded.ok()) {
    log.Warn(
        "reported hotfix outcome to LPS but could not record it; the next run reports it again",
        {{"component", report.component},
         {"base", key.base},
         {"version", key.version},
         {"outcome", key.outcome},
         {"marker", options.marker_path},
         {"error", recorded},
         {"durationMs", MillisSince(start)}});
    return ReportStatus::kSent;
  }
  log.Info("reported hotfix outcome to LPS", {{"component", report.component},
                                              {"base", key.base},
                                              {"version", key.version},
                                              {"outcome", key.outcome},
                                              {"marker", options.marker_path},
                                              {"durationMs", MillisSince(start)}});
  return ReportStatus::kSent;
}

}  // namespace hotfix::node
