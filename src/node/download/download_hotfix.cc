#include "node/download/download_hotfix.h"

#include <errno.h>
#include <unistd.h>

#include <exception>
#include <memory>
#include <optional>

#include "common/file_lock.h"
#include "common/file_util.h"
#include "node/download/binary_staging.h"
#include "node/download/package_manager.h"
#include "node/download/version_gate.h"
#include "node/go/go_strings.h"
#include "node/host/guest_agent_event.h"
#include "node/host/hotfix_pointer.h"
#include "node/host/node_custom_data.h"
#include "node/repository/fast_path.h"
#include "node/repository/source_files.h"

namespace hotfix::node {
namespace {

constexpr char kNotAnUpgrade[] = "needs the same YYYYMM.DD base and a higher patch than ";

void Fail(DownloadHotfixResult& result, Status error, BinaryFailure failure, int exit_code = 1) {
  result.binary = BinaryOutcome::kFailed;
  result.binary_failure = failure;
  result.error = std::move(error);
  result.exit_code = exit_code > 0 ? exit_code : 1;
}

// Best effort: whatever happens here is a WARN and does not stop the binary hotfix.
void ApplyScriptsIfTargeted(const DownloadHotfixOptions& options, const HotfixPointer& pointer,
                            DownloadHotfixResult& result, Logger& log) {
  const std::string target(TrimSpaceLikeGo(pointer.scripts_version));
  result.scripts_target = target;
  if (target.empty()) {
    result.scripts = ScriptsOutcome::kNone;
    result.scripts_reason = "the pointer has no scripts_version";
    log.Info("no scripts hotfix in hotfix config, skipping node custom data");
    return;
  }
  StatusOr<bool> gate = ShouldUpgradeToHotfix(options.current_version, target);
  if (!gate.ok()) {
    result.scripts = ScriptsOutcome::kNotTargeted;
    result.scripts_reason = gate.status().message();
    log.Warn("cannot compare scripts hotfix version, skipping node custom data",
             {{"current", options.current_version},
              {"scripts_version", target},
              {"error", gate.status()}});
    return;
  }
  if (!*gate) {
    result.scripts = ScriptsOutcome::kNotTargeted;
    result.scripts_reason = kNotAnUpgrade + options.current_version;
    log.Info("scripts hotfix does not target this version, skipping node custom data",
             {{"current", options.current_version}, {"scripts_version", target}});
    return;
  }
  result.scripts_reason = "targeted: " + target + " upgrades " + options.current_version;
  log.Info("applying node custom data",
           {{"path", options.node_custom_data}, {"scripts_version", target}});
  StatusOr<ApplyNodeCustomDataResult> applied =
      ApplyNodeCustomData(options.node_custom_data, options.dry_run, log);
  if (!applied.ok()) {
    result.scripts = ScriptsOutcome::kFailed;
    result.scripts_error = applied.status();
    log.Warn("failed to apply node custom data", {{"error", applied.status()}});
    return;
  }
  result.scripts = ScriptsOutcome::kApplied;
  result.files = applied->paths;
}

// Confirms that the package manager installed what was asked, so that a repository serving another
// version (or apt's glob matching 202604.01.10 for 202604.01.1) is not staged. On failure *failure
// tells a query that could not run (kOther: the install itself reported success, and nothing was
// learnt about the package) from one that shows another version or none (kVersionMismatch).
Status ConfirmInstalledVersion(const DownloadHotfixOptions& options, PackageManager pm,
                               const std::string& version, CommandRunner& runner,
                               BinaryFailure* failure) {
  const Argv query = InstalledVersionQuery(pm);
  RunOptions run;
  run.timeout = options.command_timeout;
  run.capture_output = true;
  run.cancelled = options.cancelled;
  CommandResult queried = runner.Run(query, run);
  if (!queried.status.ok()) {
    *failure = BinaryFailure::kOther;
    return queried.status.Annotate("confirming the installed version: " + JoinArgv(query));
  }
  std::string installed;
  if (InstalledVersionMatches(pm, queried.output, version, &installed)) return Status::Ok();
  *failure = BinaryFailure::kVersionMismatch;
  return Status::InvalidArgument(
      std::string(kAgentPackage) + " " +
      (installed.empty() ? std::string("is not installed") : installed + " is installed") +
      " after installing " + version + "; not staging it");
}

// The binary hotfix decided, without side effects: whether this node is targeted and, if it
// is, the install commands and the version query that confirms them. Reading os-release and
// the apt sources is part of deciding (they choose the commands).
struct BinaryPlan {
  BinaryOutcome outcome = BinaryOutcome::kNoHotfix;  // kInstalled: install it
  std::string target;
  std::string reason;
  Status error;  // why planning failed (outcome kFailed)
  BinaryFailure failure = BinaryFailure::kNone;
  PackageManager pm = PackageManager::kApt;
  std::string package_manager;  // PackageManagerName(pm) once it is known
  std::vector<Argv> install;    // in order
  Argv query;                   // InstalledVersionQuery(pm)
};

BinaryPlan PlanBinaryHotfix(const DownloadHotfixOptions& options, const HotfixPointer& pointer,
                            Logger& log) {
  BinaryPlan plan;
  plan.target = ResolveVersion(pointer, options.current_version, log);
  if (plan.target.empty()) {
    plan.outcome = BinaryOutcome::kNoHotfix;
    plan.reason = pointer.hotfixes.empty() ? "the pointer has neither hotfixes nor version"
                                           : "hotfixes has no entry for the base of " +
                                                 options.current_version + " (default deny)";
    log.Info("no hotfix version for this node, skipping hotfix download",
             {{"current", options.current_version}});
    return plan;
  }
  StatusOr<bool> gate = ShouldUpgradeToHotfix(options.current_version, plan.target);
  if (!gate.ok() || !*gate) {
    plan.outcome = BinaryOutcome::kNotTargeted;
    if (!gate.ok()) {
      plan.reason = gate.status().message();
      log.Warn("cannot compare hotfix version, skipping hotfix download",
               {{"current", options.current_version},
                {"hotfix", plan.target},
                {"error", gate.status()}});
    } else {
      plan.reason = kNotAnUpgrade + options.current_version;
      log.Info("hotfix version does not target this node, skipping hotfix download",
               {{"current", options.current_version}, {"hotfix", plan.target}});
    }
    return plan;
  }
  plan.outcome = BinaryOutcome::kInstalled;
  plan.reason = "targeted: " + plan.target + " upgrades " + options.current_version;
  log.Info("downloading ANC hotfix",
           {{"version", plan.target}, {"current", options.current_version}});

  const auto unsupported = [&](const Status& error) {
    plan.outcome = BinaryOutcome::kFailed;
    plan.error = error.Annotate("install hotfix version " + plan.target);
    plan.failure = BinaryFailure::kPlatformUnsupported;
    return plan;
  };
  StatusOr<PackageManager> pm = DetectPackageManager(options.os_release_path);
  if (!pm.ok()) return unsupported(pm.status());
  plan.pm = *pm;
  plan.package_manager = PackageManagerName(plan.pm);
  std::string sources;
  if (plan.pm == PackageManager::kApt) {
    StatusOr<std::string> resolved =
        repository::ResolveMicrosoftProdSources(options.apt_sources_dir);
    if (!resolved.ok()) return unsupported(resolved.status());
    sources = *resolved;
  }
  plan.install = InstallCommands(plan.pm, plan.target, sources);
  plan.query = InstalledVersionQuery(plan.pm);
  return plan;
}

// AgentBaker's removeStaleHotfix: after an integrity failure the launcher must not find a hotfix
// binary an earlier run staged, and falls back to the VHD binary. An unlink failure is logged.
void RemoveStaleHotfix(const std::string& hotfix_binary, Logger& log) {
  if (::unlink(hotfix_binary.c_str()) == 0 || errno == ENOENT) return;
  log.Warn("could not remove the staged hotfix binary",
           {{"path", hotfix_binary}, {"error", Status::FromErrno("unlink", errno)}});
}

// The repository fast path. True when it settled the binary hotfix: staged it (kInstalled), or
// failed an integrity check (kFailed, exit 1, the staged hotfix deleted). False: fall back to
// the package manager (result.fast_path_error says why).
bool TryFastPath(const BinaryPlan& plan, const DownloadHotfixOptions& options,
                 DownloadHotfixResult& result, Logger& log) {
  repository::FastPathOptions fast;
  fast.os_release_path = options.os_release_path;
  fast.apt_sources_dir = options.apt_sources_dir;
  fast.apt_trusted_dir = options.apt_trusted_dir;
  fast.yum_repos_dir = options.yum_repos_dir;
  fast.staging_dir = DirName(options.hotfix_binary);
  fast.rpm_dbpath = options.rpm_dbpath;
  fast.tool_timeout = options.command_timeout;
  fast.cancelled = options.cancelled;
  std::unique_ptr<repository::RepoFetcher> own_fetcher;
  repository::RepoFetcher* fetcher = options.repo_fetcher;
  if (fetcher == nullptr) {
    repository::HttpRepoFetcherOptions http;
    http.user_agent = options.user_agent;
    own_fetcher = repository::NewHttpRepoFetcher(http);
    fetcher = own_fetcher.get();
  }
  const auto start = std::chrono::steady_clock::now();
  StatusOr<repository::VerifiedBinary> verified =
      repository::TryRepositoryDownload(fast, plan.target, *fetcher, log);
  Status failed = verified.status();
  if (verified.ok()) {
    Status staged = StageHotfixBinary(verified->path(), options.vhd_binary, options.hotfix_binary);
    if (staged.ok()) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
      log.Info("downloaded ANC hotfix through authenticated repository fast path",
               {{"target", plan.target},
                {"format", repository::PackageFormatName(verified->format())},
                {"path", options.hotfix_binary},
                {"durationMs", static_cast<int64_t>(ms.count())}});
      result.route = "fastPath";
      result.staged_from = verified->package_url();
      result.staged_to = options.hotfix_binary;
      result.binary = BinaryOutcome::kInstalled;
      return true;
    }
    failed = Status::Unavailable(staged.Annotate("stage extracted ANC binary").message());
  }
  if (failed.code() == Status::Code::kDataLoss) {
    result.route = "fastPath";
    RemoveStaleHotfix(options.hotfix_binary, log);
    Fail(result,
         failed.Annotate("repository integrity check failed for hotfix version " + plan.target),
         BinaryFailure::kIntegrity);
    return true;
  }
  result.fast_path_error = failed.message();
  log.Warn("repository fast path did not apply, falling back to package manager",
           {{"target", plan.target}, {"error", failed}});
  return false;
}

// Carries out a plan whose outcome is kInstalled: the repository fast path, else the install
// commands with retries, the version confirmed and the binary staged. result.commands records
// what was run.
void InstallBinary(const BinaryPlan& plan, const DownloadHotfixOptions& options,
                   CommandRunner& runner, DownloadHotfixResult& result, Logger& log) {
  if (options.repository_fast_path && TryFastPath(plan, options, result, log)) return;
  result.route = "packageManager";
  const std::string step = "install hotfix version " + plan.target;
  const RetryPolicy retry{.max_attempts = options.max_attempts,
                          .backoff = options.retry_backoff,
                          .timeout = options.command_timeout,
                          .cancelled = options.cancelled};
  for (const Argv& command : plan.install) {
    result.commands.push_back(command);
    CommandResult ran = RunWithRetries(runner, command, retry, log);
    if (!ran.status.ok()) {
      return Fail(result, ran.status.Annotate(step), BinaryFailure::kInstallFailed, ran.exit_code);
    }
  }
  result.commands.push_back(plan.query);
  result.staged_from = options.package_binary;
  result.staged_to = options.hotfix_binary;
  BinaryFailure confirm_failure = BinaryFailure::kOther;
  if (Status st = ConfirmInstalledVersion(options, plan.pm, plan.target, runner, &confirm_failure);
      !st.ok()) {
    return Fail(result, st.Annotate(step), confirm_failure);
  }
  Status staged =
      StageHotfixBinary(options.package_binary, options.vhd_binary, options.hotfix_binary);
  if (!staged.ok()) {
    return Fail(result, staged.Annotate("stage hotfix binary"), BinaryFailure::kStageFailed);
  }
  log.Info("installed hotfix binary alongside VHD binary",
           {{"source", options.package_binary}, {"destination", options.hotfix_binary}});
  log.Info("downloaded ANC hotfix", {{"version", plan.target}});
  result.binary = BinaryOutcome::kInstalled;
}

// The decision, then (unless this is a dry run, which reports the plan instead) the install.
void HandleBinaryHotfix(const DownloadHotfixOptions& options, const HotfixPointer& pointer,
                        CommandRunner& runner, DownloadHotfixResult& result, Logger& log) {
  const BinaryPlan plan = PlanBinaryHotfix(options, pointer, log);
  result.binary = plan.outcome;
  result.binary_targeted =
      plan.outcome == BinaryOutcome::kInstalled || plan.outcome == BinaryOutcome::kFailed;
  result.binary_target = plan.target;
  result.binary_reason = plan.reason;
  result.package_manager = plan.package_manager;
  if (plan.outcome == BinaryOutcome::kFailed) return Fail(result, plan.error, plan.failure);
  if (plan.outcome != BinaryOutcome::kInstalled) return;
  if (options.dry_run) {
    result.commands = plan.install;
    result.commands.push_back(plan.query);
    result.staged_from = options.package_binary;
    result.staged_to = options.hotfix_binary;
    return;  // outcome kInstalled: would be
  }
  result.binary = BinaryOutcome::kNoHotfix;  // until InstallBinary has done it
  InstallBinary(plan, options, runner, result, log);
}

// The workflow into `result`, so that what it learnt before an exception (the target, for the
// outcome report) survives the exception.
void DownloadHotfixInto(const DownloadHotfixOptions& options, CommandRunner& runner, Logger& log,
                        DownloadHotfixResult& result) {
  StatusOr<HotfixPointer> pointer = ReadHotfixPointer(options.pointer_path);
  if (!pointer.ok()) {
    log.Warn("failed to read hotfix config, skipping hotfix download",
             {{"path", options.pointer_path}, {"error", pointer.status()}});
    result.binary = BinaryOutcome::kPointerUnreadable;
    result.scripts = ScriptsOutcome::kSkipped;
    result.error = pointer.status();
    return;  // fail-open: exit 0
  }
  ApplyScriptsIfTargeted(options, *pointer, result, log);
  HandleBinaryHotfix(options, *pointer, runner, result, log);
}

// Fail-open: the reporter's own failures are its business, never the run's.
void CallReporter(const DownloadHotfixReporter& reporter, const DownloadHotfixResult& result,
                  Logger& log) {
  try {
    reporter(result);
  } catch (const std::exception& e) {
    log.Warn("hotfix outcome report failed (fail-open)",
             {{"error", std::string("unexpected exception: ") + e.what()}});
  } catch (...) {
    log.Warn("hotfix outcome report failed (fail-open)", {{"error", "unexpected exception"}});
  }
}

void ReportEvent(const std::string& events_dir, const DownloadHotfixResult& result,
                 std::chrono::system_clock::time_point start, Logger& log) {
  const bool error = result.exit_code != 0 || result.binary == BinaryOutcome::kPointerUnreadable ||
                     result.scripts == ScriptsOutcome::kFailed;
  ReportRunEvent(events_dir, "DownloadHotfix", error, DownloadHotfixEventMessage(result), start,
                 log);
}

}  // namespace

const char* BinaryOutcomeName(BinaryOutcome outcome) {
  switch (outcome) {
    case BinaryOutcome::kNoHotfix:
      return "noHotfix";
    case BinaryOutcome::kNotTargeted:
      return "notTargeted";
    case BinaryOutcome::kInstalled:
      return "installed";
    case BinaryOutcome::kPointerUnreadable:
      return "pointerUnreadable";
    case BinaryOutcome::kBusy:
      return "busy";
    case BinaryOutcome::kFailed:
      return "failed";
  }
  return "failed";
}

const char* BinaryFailureName(BinaryFailure failure) {
  switch (failure) {
    case BinaryFailure::kNone:
      return "none";
    case BinaryFailure::kPlatformUnsupported:
      return "platformUnsupported";
    case BinaryFailure::kInstallFailed:
      return "installFailed";
    case BinaryFailure::kVersionMismatch:
      return "versionMismatch";
    case BinaryFailure::kStageFailed:
      return "stageFailed";
    case BinaryFailure::kOther:
      return "other";
    case BinaryFailure::kIntegrity:
      return "integrityFailed";
  }
  return "other";
}

const char* ScriptsOutcomeName(ScriptsOutcome outcome) {
  switch (outcome) {
    case ScriptsOutcome::kNone:
      return "none";
    case ScriptsOutcome::kNotTargeted:
      return "notTargeted";
    case ScriptsOutcome::kApplied:
      return "applied";
    case ScriptsOutcome::kFailed:
      return "failed";
    case ScriptsOutcome::kSkipped:
      return "skipped";
  }
  return "skipped";
}

std::string DownloadHotfixEventMessage(const DownloadHotfixResult& result) {
  std::string msg = std::string("download-hotfix outcome=") + BinaryOutcomeName(result.binary);
  if (!result.binary_target.empty()) msg += " version=" + result.binary_target;
  if (!result.route.empty()) msg += " route=" + result.route;
  msg += std::string(" scripts=") + ScriptsOutcomeName(result.scripts);
  if (!result.files.empty()) msg += " files=" + std::to_string(result.files.size());
  if (!result.error.ok()) msg += " error=" + result.error.message();
  if (!result.scripts_error.ok()) msg += " scriptsError=" + result.scripts_error.message();
  return msg;
}

DownloadHotfixResult DownloadHotfix(const DownloadHotfixOptions& options, CommandRunner& runner,
                                    Logger& log) {
  DownloadHotfixResult result;
  DownloadHotfixInto(options, runner, log, result);
  return result;
}

DownloadHotfixResult RunDownloadHotfixCommand(const DownloadHotfixOptions& options,
                                              CommandRunner& runner, const std::string& lock_path,
                                              const std::string& events_dir, Logger& log,
                                              const DownloadHotfixReporter& reporter) {
  log.Info("aks-node-controller hotfix download started");
  const auto start = std::chrono::system_clock::now();
  DownloadHotfixResult result;
  std::optional<FileLock> lock;
  if (!options.dry_run) {
    StatusOr<FileLock> acquired = FileLock::OnFile(lock_path, Deadline::After({}));
    if (acquired.ok()) {
      lock.emplace(std::move(acquired).value());
    } else if (acquired.status().code() == Status::Code::kDeadlineExceeded) {
      // The running one does the work; a second install would only race it.
      log.Warn("another download-hotfix run holds the lock; not starting a second one",
               {{"lock", lock_path}});
      result.binary = BinaryOutcome::kBusy;
      result.scripts = ScriptsOutcome::kSkipped;
      ReportEvent(events_dir, result, start, log);
      return result;
    } else {
      // A broken folder fails the staging later with its own error; the lock alone must not
      // stop a hotfix.
      log.Warn("could not take the download-hotfix lock; continuing without it",
               {{"lock", lock_path}, {"error", acquired.status()}});
    }
  }
  try {
    DownloadHotfixInto(options, runner, log, result);
  } catch (const std::exception& e) {
    Fail(result, Status::Internal(std::string("unexpected exception: ") + e.what()),
         BinaryFailure::kOther);
  } catch (...) {
    Fail(result, Status::Internal("unexpected exception"), BinaryFailure::kOther);
  }
  if (!options.dry_run) {
    ReportEvent(events_dir, result, start, log);
    // Still under the lock (when it could be taken): a concurrent run is "busy" and reports
    // nothing, so the report's marker has one writer.
    if (reporter) CallReporter(reporter, result, log);
  }
  if (result.exit_code == 0) {
    log.Info("aks-node-controller hotfix download finished",
             {{"outcome", BinaryOutcomeName(result.binary)},
              {"scripts", ScriptsOutcomeName(result.scripts)}});
  } else {
    log.Error("aks-node-controller hotfix download failed",
              {{"error", result.error}, {"exitCode", result.exit_code}});
  }
  return result;
}

}  // namespace hotfix::node
