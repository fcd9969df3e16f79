#include "node/agent_commands.h"

#include <signal.h>

#include <exception>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "node/download/command_runner.h"
#include "node/download/hotfix_report.h"
#include "node/download/provision_report.h"

namespace hotfix::node {
namespace {

// The log on stderr, and appended to `log_file` unless empty. Fail-open: a node whose log
// folder is broken still runs the command, and says so.
void OpenLog(Logger& log, LogLevel min_level, const std::string& log_file) {
  log.set_min_level(min_level);
  if (log_file.empty()) return;
  Status st = log.OpenFile(log_file);
  if (!st.ok()) log.Warn("could not open log file; logging to stderr only", {{"error", st}});
}

// IMDS and the report sender over it, which borrows it: built together, alive together.
struct ReportSenderOverImds {
  ReportSenderOverImds(const ReportRoute& route, const std::string& user_agent, Logger& log)
      : imds(route.imds_url, log) {
    LpsEndpoint lps = route.lps;
    lps.user_agent = user_agent;
    sender = NewGrpcHotfixReportSender(lps, imds, log);
  }
  ImdsTokenSource imds;
  std::unique_ptr<HotfixReportSender> sender;
};

std::string Dump(const nlohmann::ordered_json& json) {
  return json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

int CheckHotfixUnguarded(const CheckHotfixCommandOptions& options, std::ostream& out) {
  Logger log;
  OpenLog(log, options.min_level, options.check.dry_run ? "" : options.log_file);
  if (!options.ignored_args.empty()) {
    std::string joined;
    for (const auto& arg : options.ignored_args)
      joined.append(joined.empty() ? "" : " ").append(arg);
    log.Warn("ignoring unexpected check-hotfix arguments", {{"args", joined}});
  }
  ImdsTokenSource imds(options.imds_url, log);
  GrpcLpsFetcherOptions fetch = options.fetch;
  fetch.node_config_path = options.check.node_config_path;
  fetch.user_agent = options.user_agent;
  auto fetcher = NewGrpcLpsFetcher(fetch, imds, log);
  CheckHotfixResult result =
      RunCheckHotfixCommand(options.check, *fetcher, options.events_dir, log);
  if (options.check.dry_run)
    out << CheckHotfixDryRunJson(result, options.check.pointer_path) << std::endl;
  return kExitOk;
}

std::atomic<bool> g_cancelled{false};
extern "C" void OnTerminate(int) { g_cancelled.store(true); }

// SIGTERM or SIGINT kills the running command and stops the retries (Go's context cancel); no
// SA_RESTART, so that waits wake up.
void CancelOnTerminate() {
  struct sigaction sa {};
  sa.sa_handler = OnTerminate;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

int DownloadHotfixUnguarded(const DownloadHotfixCommandOptions& options, std::ostream& out) {
  Logger log;
  OpenLog(log, options.min_level, options.download.dry_run ? "" : options.log_file);
  CancelOnTerminate();
  DownloadHotfixOptions download = options.download;
  download.cancelled = &g_cancelled;
  download.user_agent = options.user_agent;
  const std::string lock =
      !options.lock_file.empty()
          ? options.lock_file
          : DirName(download.hotfix_binary) + "/.aks-node-controller-download-hotfix.lock";
  auto runner = NewProcessRunner();

  // Fail-open and bounded (3 s, IMDS included): the report never changes the result.
  ReportSenderOverImds route(options.route, options.user_agent, log);
  ReportHotfixOptions report;
  report.marker_path = HotfixReportMarkerPath(download.pointer_path);
  report.component = options.route.component;
  report.enabled = options.report;
  report.cancelled = &g_cancelled;
  auto reporter = [&](const DownloadHotfixResult& r) {
    ReportHotfixOutcome(r, download.current_version, report, *route.sender, log);
  };
  DownloadHotfixResult result =
      RunDownloadHotfixCommand(download, *runner, lock, options.events_dir, log, reporter);
  if (download.dry_run) out << DownloadHotfixDryRunJson(result, download) << std::endl;
  return result.exit_code;
}

}  // namespace

int CheckHotfixMain(const CheckHotfixCommandOptions& options, std::ostream& out) {
  try {
    return CheckHotfixUnguarded(options, out);
  } catch (...) {
    return kExitOk;  // fail-open even if setting up the run threw
  }
}

int DownloadHotfixMain(const DownloadHotfixCommandOptions& options, std::ostream& out,
                       std::ostream& err) {
  try {
    return DownloadHotfixUnguarded(options, out);
  } catch (const std::exception& e) {
    err << "download-hotfix: " << e.what() << "\n";
    return kExitFailed;
  }
}

int ReportMain(const ReportCommandOptions& options) {
  try {
    Logger log;
    OpenLog(log, options.min_level, options.log_file);
    ReportSenderOverImds route(options.route, options.user_agent, log);
    ReportHotfixOptions report;
    report.marker_path = ProvisionReportMarkerPath(options.pointer_path);
    report.component = options.route.component;
    ProvisionReportInput input;
    input.pointer_path = options.pointer_path;
    input.current_version = options.current_version;
    input.hotfix_binary = options.hotfix_binary;
    input.succeeded = options.outcome == "succeeded";
    input.detail = options.detail;
    RunReportCommand(input, report, *route.sender, log);
  } catch (...) {
    // fail-open: the report's log line, if it got that far, says what happened
  }
  return kExitOk;
}

std::string CheckHotfixDryRunJson(const CheckHotfixResult& result,
                                  const std::string& pointer_path) {
  nlohmann::ordered_json out;
  out["outcome"] = OutcomeName(result.outcome);
  out["error"] =
      result.error.ok() ? nlohmann::json(nullptr) : nlohmann::json(result.error.message());
  out["pointer_path"] = pointer_path;
  out["would_write"] = result.staged ? nlohmann::json::parse(SerializeHotfixPointer(*result.staged))
                                     : nlohmann::json(nullptr);
  return Dump(out);
}

std::string DownloadHotfixDryRunJson(const DownloadHotfixResult& r,
                                     const DownloadHotfixOptions& o) {
  nlohmann::ordered_json out;
  out["pointer_path"] = o.pointer_path;
  out["current_version"] = o.current_version;
  out["error"] = r.error.ok() ? nlohmann::json(nullptr) : nlohmann::json(r.error.message());
  nlohmann::ordered_json scripts;
  // A dry run did nothing: say "would" where a real run would have acted.
  scripts["outcome"] =
      r.scripts == ScriptsOutcome::kApplied ? "wouldApply" : ScriptsOutcomeName(r.scripts);
  scripts["version"] = r.scripts_target;
  scripts["reason"] = r.scripts_reason;
  scripts["node_custom_data"] = o.node_custom_data;
  scripts["would_write"] = r.files;
  if (!r.scripts_error.ok()) scripts["error"] = r.scripts_error.message();
  out["scripts"] = scripts;
  nlohmann::ordered_json binary;
  binary["outcome"] =
      r.binary == BinaryOutcome::kInstalled ? "wouldInstall" : BinaryOutcomeName(r.binary);
  binary["targeted"] = r.binary == BinaryOutcome::kInstalled;
  binary["version"] = r.binary_target;
  binary["reason"] = r.binary_reason;
  // The fast path's downloads are what a dry run must not do: it says it would try them first.
  binary["repository_fast_path"] = o.repository_fast_path ? "tried first; on an integrity "
                                                            "failure nothing below runs"
                                                          : "off";
  binary["package_manager"] = r.package_manager;
  binary["would_run"] = r.commands;
  if (!r.staged_to.empty()) {
    binary["would_stage"] = {
        {"from", r.staged_from}, {"to", r.staged_to}, {"mode_of", o.vhd_binary}};
  }
  out["binary"] = binary;
  return Dump(out);
}

}  // namespace hotfix::node
