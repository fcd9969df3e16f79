// hotfix-agent: the node side of AKS live patching. A thin main: flags in, workflow out.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "build_info.h"
#include "common/duration.h"
#include "common/file_util.h"
#include "common/log.h"
#include "node/check_hotfix.h"
#include "node/command_runner.h"
#include "node/default_paths.h"
#include "node/download_hotfix.h"
#include "node/hotfix_report.h"
#include "node/imds.h"
#include "node/lps_fetcher.h"
#include "node/provision_report.h"

namespace {

namespace paths = hotfix::node::paths;
using std::chrono::milliseconds;

constexpr char kVersion[] = HOTFIX_AGENT_VERSION;
// `hotfix-agent --version`: the version and the tree it was built from.
constexpr char kVersionLine[] =
    "hotfix-agent " HOTFIX_AGENT_VERSION " (revision " HOTFIX_GIT_REVISION ")";

void AddLogLevelFlag(CLI::App& cmd, std::string& level) {
  cmd.add_option("--log-level", level, "debug, info, warn or error")->capture_default_str();
}

// A duration flag within [least, most], or its usage error on stderr.
std::optional<milliseconds> DurationFlag(const char* command, const std::string& flag,
                                         const std::string& text, milliseconds least,
                                         milliseconds most) {
  auto d = hotfix::ParseDurationWithin(text, least, most);
  if (d.ok()) return *d;
  std::cerr << command << ": " << d.status().Annotate(flag).message() << "\n";
  return std::nullopt;
}

std::optional<hotfix::LogLevel> LogLevelFlag(const char* command, const std::string& text) {
  auto level = hotfix::ParseLogLevel(text);
  if (level.ok()) return *level;
  std::cerr << command << ": " << level.status().Annotate("--log-level").message() << "\n";
  return std::nullopt;
}

// A flag given under its name and its old "-ms" name: a usage error.
int BothNames(const char* command, const std::string& flag) {
  std::cerr << command << ": give " << flag << " or " << flag << "-ms, not both\n";
  return 2;
}

struct CheckHotfixFlags {
  std::string node_config = paths::kNodeConfig;
  std::string nbc_cmd = paths::kNbcCmd;
  std::string pointer = paths::kHotfixPointer;
  std::string imds_url = hotfix::node::kDefaultImdsUrl;
  // --connect-to, --server-name, --component, --lps-timeout-ms (defaults: the fetcher's).
  hotfix::node::GrpcLpsFetcherOptions fetch;
  std::string events_dir = paths::kEventsDir;
  std::string log_file = paths::kLogFile;
  std::string current_version = kVersion;
  bool dry_run = false;
  std::string lps_timeout = "3s";  // into fetch.timeout_ms
  int old_lps_timeout_ms = -1;     // --lps-timeout-ms, the name before one duration style
  std::string log_level = "info";
  hotfix::LogLevel min_level = hotfix::LogLevel::kInfo;  // from log_level
};

// How a command reaches the service, the same five flags wherever it calls it (check-hotfix's
// fetch, the outcome reports); `purpose` ends the first two's help.
struct LpsRouteFlagTargets {
  std::string* node_config;
  std::string* nbc_cmd;
  std::string* imds_url;
  std::string* connect_to;
  std::string* server_name;
};

void AddLpsRouteFlags(CLI::App& cmd, const LpsRouteFlagTargets& to, const std::string& purpose) {
  cmd.add_option("--node-config", *to.node_config,
                 "AKSNodeConfig JSON: apiserver FQDN and CA" + purpose)
      ->capture_default_str();
  cmd.add_option("--nbc-cmd", *to.nbc_cmd,
                 "CSE command read when the node config is absent" + purpose)
      ->capture_default_str();
  cmd.add_option("--imds-url", *to.imds_url, "IMDS attested-document URL (never proxied)")
      ->capture_default_str();
  cmd.add_option("--connect-to", *to.connect_to,
                 "HOST:PORT TCP destination override; SNI and :authority stay the apiserver's");
  cmd.add_option("--server-name", *to.server_name,
                 "Name the service certificate must carry, verified against the cluster CA "
                 "(default: the apiserver host; before AgentBaker #9351 nodes pinned "
                 "aks-security-patch.data.mcr.microsoft.com)");
}

void AddCheckHotfixFlags(CLI::App& cmd, CheckHotfixFlags& f) {
  AddLpsRouteFlags(
      cmd, {&f.node_config, &f.nbc_cmd, &f.imds_url, &f.fetch.connect_to, &f.fetch.server_name},
      "");
  cmd.add_option("--hotfix-pointer", f.pointer, "Pointer file staged for download-hotfix")
      ->capture_default_str();
  cmd.add_option("--component", f.fetch.component, "Component whose config is requested")
      ->capture_default_str();
  cmd.add_option("--lps-timeout", f.lps_timeout,
                 "Budget for connect, TLS and the call (1ms to 10m); the call may wait up to 2 s "
                 "more for an IMDS retry")
      ->capture_default_str();
  cmd.add_option("--lps-timeout-ms", f.old_lps_timeout_ms)->check(CLI::Range(1, 600000))->group("");
  cmd.add_option("--events-dir", f.events_dir, "Guest-agent events folder")->capture_default_str();
  cmd.add_option("--log-file", f.log_file, "JSON log lines are appended here and to stderr")
      ->capture_default_str();
  cmd.add_option("--current-version", f.current_version,
                 "This node's agent version (YYYYMM.DD.PATCH)")
      ->capture_default_str();
  cmd.add_flag("--dry-run", f.dry_run,
               "Report the outcome and the pointer it would write on stdout; write nothing");
  AddLogLevelFlag(cmd, f.log_level);
}

// Only the outcome on stdout, so that scripts can read a dry run.
void PrintDryRun(const hotfix::node::CheckHotfixResult& result, const std::string& pointer_path) {
  nlohmann::ordered_json out;
  out["outcome"] = hotfix::node::OutcomeName(result.outcome);
  out["error"] =
      result.error.ok() ? nlohmann::json(nullptr) : nlohmann::json(result.error.message());
  out["pointer_path"] = pointer_path;
  out["would_write"] =
      result.staged ? nlohmann::json::parse(hotfix::node::SerializeHotfixPointer(*result.staged))
                    : nlohmann::json(nullptr);
  std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

int RunCheckHotfix(const CheckHotfixFlags& f, const std::vector<std::string>& extras) {
  hotfix::Logger log;
  log.set_min_level(f.min_level);
  if (!f.dry_run) {
    hotfix::Status st = log.OpenFile(f.log_file);
    // Fail-open: a node whose log folder is broken still gets its hotfix checked.
    if (!st.ok()) log.Warn("could not open log file; logging to stderr only", {{"error", st}});
  }
  if (!extras.empty()) {
    std::string joined;
    for (const auto& a : extras) joined += (joined.empty() ? "" : " ") + a;
    log.Warn("ignoring unexpected check-hotfix arguments", {{"args", joined}});
  }
  hotfix::node::ImdsTokenSource imds(f.imds_url, log);
  hotfix::node::GrpcLpsFetcherOptions fetch = f.fetch;
  fetch.node_config_path = f.node_config;
  fetch.nbc_cmd_path = f.nbc_cmd;
  fetch.user_agent = std::string("hotfix-agent/") + kVersion;
  auto fetcher = hotfix::node::NewGrpcLpsFetcher(fetch, imds, log);

  hotfix::node::CheckHotfixOptions options;
  options.pointer_path = f.pointer;
  options.node_config_path = f.node_config;
  options.current_version = f.current_version;
  options.dry_run = f.dry_run;
  auto result = hotfix::node::RunCheckHotfixCommand(options, *fetcher, f.events_dir, log);
  if (f.dry_run) PrintDryRun(result, f.pointer);
  return 0;
}

// The route a report takes, check-hotfix's: download-hotfix's outcome report and `report`.
struct ReportRouteFlags {
  hotfix::node::LpsEndpoint lps = [] {
    hotfix::node::LpsEndpoint e;
    e.node_config_path = paths::kNodeConfig;
    e.nbc_cmd_path = paths::kNbcCmd;
    return e;
  }();
  std::string imds_url = hotfix::node::kDefaultImdsUrl;
  std::string component = "aksNodeController";
};

void AddReportRouteFlags(CLI::App& cmd, ReportRouteFlags& f) {
  AddLpsRouteFlags(cmd,
                   {&f.lps.node_config_path, &f.lps.nbc_cmd_path, &f.imds_url, &f.lps.connect_to,
                    &f.lps.server_name},
                   " (for the outcome report)");
  cmd.add_option("--component", f.component, "Component whose hotfix outcome is reported")
      ->capture_default_str();
}

// IMDS and the report sender over it, which borrows it: built together, alive together.
struct ReportRoute {
  ReportRoute(const ReportRouteFlags& f, hotfix::Logger& log) : imds(f.imds_url, log) {
    hotfix::node::LpsEndpoint lps = f.lps;
    lps.user_agent = std::string("hotfix-agent/") + kVersion;
    sender = hotfix::node::NewGrpcHotfixReportSender(lps, imds, log);
  }
  hotfix::node::ImdsTokenSource imds;
  std::unique_ptr<hotfix::node::HotfixReportSender> sender;
};

struct DownloadHotfixFlags {
  hotfix::node::DownloadHotfixOptions options;
  std::string current_version = kVersion;
  std::string retry_backoff = "3s";
  std::string command_timeout = "1m";
  int old_retry_backoff_ms = -1;  // the names before one duration style
  int old_command_timeout_ms = -1;
  std::string log_level = "info";
  hotfix::LogLevel min_level = hotfix::LogLevel::kInfo;  // from log_level
  std::string lock_file;                                 // default: next to the hotfix binary
  std::string events_dir = paths::kEventsDir;
  std::string log_file = paths::kLogFile;
  bool dry_run = false;
  ReportRouteFlags route;  // the outcome report reaches the service as check-hotfix does
  bool no_report = false;
};

void AddDownloadHotfixFlags(CLI::App& cmd, DownloadHotfixFlags& f) {
  auto& o = f.options;
  cmd.add_option("--hotfix-pointer", o.pointer_path, "Pointer file staged by check-hotfix")
      ->capture_default_str();
  cmd.add_option("--current-version", f.current_version,
                 "This node's agent version (YYYYMM.DD.PATCH)")
      ->capture_default_str();
  cmd.add_option("--os-release", o.os_release_path, "os-release file naming the distribution")
      ->capture_default_str();
  cmd.add_option("--apt-sources-dir", o.apt_sources_dir,
                 "Folder holding microsoft-prod.list or microsoft-prod.sources")
      ->capture_default_str();
  cmd.add_option("--apt-trusted-dir", o.apt_trusted_dir,
                 "Folder whose microsoft*.gpg keyrings verify the apt repository when its source "
                 "names no Signed-By")
      ->capture_default_str();
  cmd.add_option("--yum-repos-dir", o.yum_repos_dir,
                 "Folder of .repo files naming the Microsoft yum repository and its gpgkey")
      ->capture_default_str();
  cmd.add_option("--rpm-dbpath", o.rpm_dbpath,
                 "rpm database whose imported keys rpmkeys checks the package with (a test hook; "
                 "default: the system's)");
  cmd.add_option("--package-binary", o.package_binary, "Where the package installs the agent")
      ->capture_default_str();
  cmd.add_option("--vhd-binary", o.vhd_binary,
                 "The image's agent binary: its mode is copied, it is never modified")
      ->capture_default_str();
  cmd.add_option("--hotfix-binary", o.hotfix_binary, "Where the hotfix binary is staged")
      ->capture_default_str();
  cmd.add_option("--node-custom-data", o.node_custom_data,
                 "cloud-init YAML whose write_files are the scripts hotfix")
      ->capture_default_str();
  cmd.add_option("--retry-backoff", f.retry_backoff,
                 "Pause between attempts of a command (0 to 10m)")
      ->capture_default_str();
  cmd.add_option("--command-timeout", f.command_timeout,
                 "Each attempt is killed (SIGKILL, with its process group) after this (1ms to 1h)")
      ->capture_default_str();
  cmd.add_option("--retry-backoff-ms", f.old_retry_backoff_ms)
      ->check(CLI::Range(0, 600000))
      ->group("");
  cmd.add_option("--command-timeout-ms", f.old_command_timeout_ms)
      ->check(CLI::Range(1, 3600000))
      ->group("");
  cmd.add_option("--lock-file", f.lock_file,
                 "Lock held for the whole run (default: .aks-node-controller-download-hotfix.lock "
                 "next to the hotfix binary)");
  cmd.add_option("--events-dir", f.events_dir, "Guest-agent events folder")->capture_default_str();
  cmd.add_option("--log-file", f.log_file, "JSON log lines are appended here and to stderr")
      ->capture_default_str();
  cmd.add_flag("--dry-run", f.dry_run,
               "Print the decision and the commands it would run on stdout; run and write nothing");
  AddLogLevelFlag(cmd, f.log_level);
  AddReportRouteFlags(cmd, f.route);
  cmd.add_flag("--no-report", f.no_report,
               "Do not report the binary hotfix's outcome to the live-patching service");
}

void PrintDownloadDryRun(const hotfix::node::DownloadHotfixResult& r,
                         const hotfix::node::DownloadHotfixOptions& o) {
  using hotfix::node::BinaryOutcome;
  nlohmann::ordered_json out;
  out["pointer_path"] = o.pointer_path;
  out["current_version"] = o.current_version;
  out["error"] = r.error.ok() ? nlohmann::json(nullptr) : nlohmann::json(r.error.message());
  nlohmann::ordered_json scripts;
  // A dry run did nothing: say "would" where a real run would have acted.
  scripts["outcome"] = r.scripts == hotfix::node::ScriptsOutcome::kApplied
                           ? "wouldApply"
                           : hotfix::node::ScriptsOutcomeName(r.scripts);
  scripts["version"] = r.scripts_target;
  scripts["reason"] = r.scripts_reason;
  scripts["node_custom_data"] = o.node_custom_data;
  scripts["would_write"] = r.files;
  if (!r.scripts_error.ok()) scripts["error"] = r.scripts_error.message();
  out["scripts"] = scripts;
  nlohmann::ordered_json binary;
  binary["outcome"] = r.binary == BinaryOutcome::kInstalled
                          ? "wouldInstall"
                          : hotfix::node::BinaryOutcomeName(r.binary);
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
  std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

std::atomic<bool> g_cancelled{false};
extern "C" void OnTerminate(int) { g_cancelled.store(true); }

int RunDownloadHotfix(DownloadHotfixFlags& f) {
  hotfix::Logger log;
  log.set_min_level(f.min_level);
  if (!f.dry_run) {
    hotfix::Status st = log.OpenFile(f.log_file);
    if (!st.ok()) log.Warn("could not open log file; logging to stderr only", {{"error", st}});
  }
  // SIGTERM or SIGINT kills the running command and stops the retries (Go's context cancel);
  // no SA_RESTART, so that waits wake up.
  struct sigaction sa {};
  sa.sa_handler = OnTerminate;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  auto& o = f.options;
  o.current_version = f.current_version;
  o.dry_run = f.dry_run;
  o.cancelled = &g_cancelled;
  o.user_agent = std::string("hotfix-agent/") + kVersion;
  const std::string lock = !f.lock_file.empty() ? f.lock_file
                                                : hotfix::DirName(o.hotfix_binary) +
                                                      "/.aks-node-controller-download-hotfix.lock";
  auto runner = hotfix::node::NewProcessRunner();

  // Fail-open and bounded (3 s, IMDS included): the report never changes the result.
  ReportRoute route(f.route, log);
  hotfix::node::ReportHotfixOptions report;
  report.marker_path = hotfix::node::HotfixReportMarkerPath(o.pointer_path);
  report.component = f.route.component;
  report.enabled = !f.no_report;
  report.cancelled = &g_cancelled;
  auto reporter = [&](const hotfix::node::DownloadHotfixResult& r) {
    hotfix::node::ReportHotfixOutcome(r, o.current_version, report, *route.sender, log);
  };
  auto result =
      hotfix::node::RunDownloadHotfixCommand(o, *runner, lock, f.events_dir, log, reporter);
  if (f.dry_run) PrintDownloadDryRun(result, o);
  return result.exit_code;
}

struct ReportFlags {
  std::string outcome;  // succeeded | failed
  std::string detail;
  std::string pointer = paths::kHotfixPointer;
  std::string current_version = kVersion;
  std::string hotfix_binary = paths::kHotfixBinary;
  std::string log_file = paths::kLogFile;
  std::string log_level = "info";
  hotfix::LogLevel min_level = hotfix::LogLevel::kInfo;
  ReportRouteFlags route;
};

void AddReportFlags(CLI::App& cmd, ReportFlags& f) {
  cmd.add_option("--outcome", f.outcome,
                 "How provisioning with the hotfix binary ended: succeeded or failed")
      ->required()
      ->check(CLI::IsMember({"succeeded", "failed"}));
  cmd.add_option("--detail", f.detail, "Why it failed (at most 256 bytes are sent)");
  cmd.add_option("--hotfix-pointer", f.pointer, "Pointer file staged by check-hotfix")
      ->capture_default_str();
  cmd.add_option("--current-version", f.current_version,
                 "This node's agent version (YYYYMM.DD.PATCH)")
      ->capture_default_str();
  cmd.add_option("--hotfix-binary", f.hotfix_binary,
                 "The staged hotfix binary: nothing is reported unless it is executable (the "
                 "node then provisioned with it)")
      ->capture_default_str();
  cmd.add_option("--log-file", f.log_file, "JSON log lines are appended here and to stderr")
      ->capture_default_str();
  AddLogLevelFlag(cmd, f.log_level);
  AddReportRouteFlags(cmd, f.route);
}

// Fail-open: 0 whatever happens to the report (its log line says), 2 only for a usage error.
int RunReport(const ReportFlags& f) {
  hotfix::Logger log;
  log.set_min_level(f.min_level);
  hotfix::Status st = log.OpenFile(f.log_file);
  if (!st.ok()) log.Warn("could not open log file; logging to stderr only", {{"error", st}});
  ReportRoute route(f.route, log);
  hotfix::node::ReportHotfixOptions options;
  options.marker_path = hotfix::node::ProvisionReportMarkerPath(f.pointer);
  options.component = f.route.component;
  hotfix::node::ProvisionReportInput input;
  input.pointer_path = f.pointer;
  input.current_version = f.current_version;
  input.hotfix_binary = f.hotfix_binary;
  input.succeeded = f.outcome == "succeeded";
  input.detail = f.detail;
  hotfix::node::RunReportCommand(input, options, *route.sender, log);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A write to a reset socket must be an error, not the end of the process.
  signal(SIGPIPE, SIG_IGN);

  CLI::App app{
      "hotfix-agent: the node side of AKS live patching.\n"
      "check-hotfix asks the live-patching service (through the apiserver's ALPN route) "
      "which hotfix applies to this node and stages it for download-hotfix, which installs it."};
  app.set_version_flag("--version", kVersionLine);
  app.require_subcommand(1);

  CheckHotfixFlags check;
  CLI::App* check_cmd =
      app.add_subcommand("check-hotfix",
                         "Read the hotfix pointer from the live-patching service and stage it "
                         "(fail-open: exits 0 whatever the check finds; a command line it "
                         "cannot parse exits non-zero, 2 for an unknown flag)");
  AddCheckHotfixFlags(*check_cmd, check);
  check_cmd->allow_extras();

  DownloadHotfixFlags download;
  CLI::App* download_cmd = app.add_subcommand(
      "download-hotfix",
      "Install the hotfix the staged pointer targets at this node's version and stage its "
      "binary next to the VHD one (exit 0 unless an install was attempted and failed)");
  AddDownloadHotfixFlags(*download_cmd, download);
  download_cmd->allow_extras();

  ReportFlags report;
  CLI::App* report_cmd = app.add_subcommand(
      "report",
      "Tell the live-patching service how provisioning with the staged hotfix binary ended "
      "(fail-open: exits 0 whatever the report meets; 2 for a usage error)");
  AddReportFlags(*report_cmd, report);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, as the service's do.
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (check_cmd->parsed()) {
    std::vector<std::string> extras = check_cmd->remaining();
    for (const auto& a : extras) {
      if (!a.empty() && a[0] == '-') {
        std::cerr << "check-hotfix: unknown flag " << a << " (see --help)\n";
        return 2;
      }
    }
    if (check.old_lps_timeout_ms >= 0) {
      if (check_cmd->count("--lps-timeout") > 0) return BothNames("check-hotfix", "--lps-timeout");
      check.lps_timeout = std::to_string(check.old_lps_timeout_ms) + "ms";
    }
    auto timeout = DurationFlag("check-hotfix", "--lps-timeout", check.lps_timeout, milliseconds(1),
                                std::chrono::minutes(10));
    auto level = LogLevelFlag("check-hotfix", check.log_level);
    if (!timeout || !level) return 2;
    check.fetch.timeout_ms = static_cast<int>(timeout->count());
    check.min_level = *level;
    try {
      return RunCheckHotfix(check, extras);
    } catch (...) {
      return 0;  // Fail-open even if setting up the run threw.
    }
  }
  if (download_cmd->parsed()) {
    std::vector<std::string> extras = download_cmd->remaining();
    std::string joined;
    for (const auto& a : extras) {
      if (!a.empty() && a[0] == '-') {
        std::cerr << "download-hotfix: unknown flag " << a << " (see --help)\n";
        return 2;
      }
      joined += (joined.empty() ? "" : " ") + a;
    }
    if (!extras.empty()) {
      // Exit 1, not 2: the reference's answer to this one usage error, which the node's
      // scripts see (docs/DOWNLOAD-HOTFIX.md, "Command line").
      std::cerr << "unexpected download-hotfix arguments: " << joined << "\n";
      return 1;
    }
    if (download.old_retry_backoff_ms >= 0) {
      if (download_cmd->count("--retry-backoff") > 0) {
        return BothNames("download-hotfix", "--retry-backoff");
      }
      download.retry_backoff = std::to_string(download.old_retry_backoff_ms) + "ms";
    }
    if (download.old_command_timeout_ms >= 0) {
      if (download_cmd->count("--command-timeout") > 0) {
        return BothNames("download-hotfix", "--command-timeout");
      }
      download.command_timeout = std::to_string(download.old_command_timeout_ms) + "ms";
    }
    auto backoff = DurationFlag("download-hotfix", "--retry-backoff", download.retry_backoff,
                                milliseconds(0), std::chrono::minutes(10));
    auto timeout = DurationFlag("download-hotfix", "--command-timeout", download.command_timeout,
                                milliseconds(1), std::chrono::hours(1));
    auto level = LogLevelFlag("download-hotfix", download.log_level);
    if (!backoff || !timeout || !level) return 2;
    download.options.retry_backoff = *backoff;
    download.options.command_timeout = *timeout;
    download.min_level = *level;
    try {
      return RunDownloadHotfix(download);
    } catch (const std::exception& e) {
      std::cerr << "download-hotfix: " << e.what() << "\n";
      return 1;
    }
  }
  if (report_cmd->parsed()) {
    auto level = LogLevelFlag("report", report.log_level);
    if (!level) return 2;
    report.min_level = *level;
    try {
      return RunReport(report);
    } catch (...) {
      return 0;  // fail-open
    }
  }
  return 0;
}
