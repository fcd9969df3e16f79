// hotfix-agent: the node side of AKS live patching. A thin main: flags in, one call per command
// (src/node/agent_commands.h), whose answer is the exit status.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "build_info.h"
#include "common/duration.h"
#include "common/log.h"
#include "node/agent_commands.h"
#include "node/host/default_paths.h"

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

// A duration flag within [least, most], or nullopt and its usage error on stderr.
std::optional<milliseconds> DurationFlag(const char* command, std::string_view flag,
                                         const std::string& text, milliseconds least,
                                         milliseconds most) {
  auto d = hotfix::ParseDurationFlag(flag, text, least, most);
  if (d.ok()) return *d;
  std::cerr << command << ": " << d.status().message() << "\n";
  return std::nullopt;
}

// A flag's old "-ms" name, when given, into the flag's text; false and the usage error on
// stderr when both names were given.
bool OldMillisecondsFlag(const char* command, const CLI::App& cmd, std::string_view flag,
                         int old_value, std::string* text) {
  const std::string old_flag = std::string(flag) + "-ms";
  hotfix::Status st = hotfix::ApplyOldDurationFlag(flag, cmd.count(std::string(flag)) > 0, old_flag,
                                                   old_value, "ms", text);
  if (!st.ok()) std::cerr << command << ": " << st.message() << "\n";
  return st.ok();
}

std::optional<hotfix::LogLevel> LogLevelFlag(const char* command, const std::string& text) {
  auto level = hotfix::ParseLogLevel(text);
  if (level.ok()) return *level;
  std::cerr << command << ": " << level.status().Annotate("--log-level").message() << "\n";
  return std::nullopt;
}

struct CheckHotfixFlags {
  hotfix::node::CheckHotfixCommandOptions o = [] {
    hotfix::node::CheckHotfixCommandOptions d;
    d.check.pointer_path = paths::kHotfixPointer;
    d.check.node_config_path = paths::kNodeConfig;
    d.check.current_version = kVersion;
    d.fetch.nbc_cmd_path = paths::kNbcCmd;
    d.events_dir = paths::kEventsDir;
    d.log_file = paths::kLogFile;
    return d;
  }();
  std::string lps_timeout = "3s";  // into o.fetch.timeout_ms
  int old_lps_timeout_ms = -1;     // --lps-timeout-ms, the name before one duration style
  std::string log_level = "info";
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
  auto& o = f.o;
  AddLpsRouteFlags(cmd,
                   {&o.check.node_config_path, &o.fetch.nbc_cmd_path, &o.imds_url,
                    &o.fetch.connect_to, &o.fetch.server_name},
                   "");
  cmd.add_option("--hotfix-pointer", o.check.pointer_path,
                 "Pointer file staged for download-hotfix")
      ->capture_default_str();
  cmd.add_option("--component", o.fetch.component, "Component whose config is requested")
      ->capture_default_str();
  cmd.add_option("--lps-timeout", f.lps_timeout,
                 "Budget for connect, TLS and the call (1ms to 10m); the call may wait up to 2 s "
                 "more for an IMDS retry")
      ->capture_default_str();
  cmd.add_option("--lps-timeout-ms", f.old_lps_timeout_ms)->check(CLI::Range(1, 600000))->group("");
  cmd.add_option("--events-dir", o.events_dir, "Guest-agent events folder")->capture_default_str();
  cmd.add_option("--log-file", o.log_file, "JSON log lines are appended here and to stderr")
      ->capture_default_str();
  cmd.add_option("--current-version", o.check.current_version,
                 "This node's agent version (YYYYMM.DD.PATCH)")
      ->capture_default_str();
  cmd.add_flag("--dry-run", o.check.dry_run,
               "Report the outcome and the pointer it would write on stdout; write nothing");
  AddLogLevelFlag(cmd, f.log_level);
}

hotfix::node::ReportRoute DefaultReportRoute() {
  hotfix::node::ReportRoute route;
  route.lps.node_config_path = paths::kNodeConfig;
  route.lps.nbc_cmd_path = paths::kNbcCmd;
  return route;
}

// The route a report takes, check-hotfix's: download-hotfix's outcome report and `report`.
void AddReportRouteFlags(CLI::App& cmd, hotfix::node::ReportRoute& route) {
  AddLpsRouteFlags(cmd,
                   {&route.lps.node_config_path, &route.lps.nbc_cmd_path, &route.imds_url,
                    &route.lps.connect_to, &route.lps.server_name},
                   " (for the outcome report)");
  cmd.add_option("--component", route.component, "Component whose hotfix outcome is reported")
      ->capture_default_str();
}

struct DownloadHotfixFlags {
  hotfix::node::DownloadHotfixCommandOptions o = [] {
    hotfix::node::DownloadHotfixCommandOptions d;
    d.download.current_version = kVersion;
    d.events_dir = paths::kEventsDir;
    d.log_file = paths::kLogFile;
    d.route = DefaultReportRoute();
    return d;
  }();
  std::string retry_backoff = "3s";
  std::string command_timeout = "1m";
  int old_retry_backoff_ms = -1;  // the names before one duration style
  int old_command_timeout_ms = -1;
  std::string log_level = "info";
  bool no_report = false;
};

void AddDownloadHotfixFlags(CLI::App& cmd, DownloadHotfixFlags& f) {
  auto& o = f.o.download;
  cmd.add_option("--hotfix-pointer", o.pointer_path, "Pointer file staged by check-hotfix")
      ->capture_default_str();
  cmd.add_option("--current-version", o.current_version,
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
  cmd.add_option("--lock-file", f.o.lock_file,
                 "Lock held for the whole run (default: .aks-node-controller-download-hotfix.lock "
                 "next to the hotfix binary)");
  cmd.add_option("--events-dir", f.o.events_dir, "Guest-agent events folder")
      ->capture_default_str();
  cmd.add_option("--log-file", f.o.log_file, "JSON log lines are appended here and to stderr")
      ->capture_default_str();
  cmd.add_flag("--dry-run", o.dry_run,
               "Print the decision and the commands it would run on stdout; run and write nothing");
  AddLogLevelFlag(cmd, f.log_level);
  AddReportRouteFlags(cmd, f.o.route);
  cmd.add_flag("--no-report", f.no_report,
               "Do not report the binary hotfix's outcome to the live-patching service");
}

struct ReportFlags {
  hotfix::node::ReportCommandOptions o = [] {
    hotfix::node::ReportCommandOptions d;
    d.pointer_path = paths::kHotfixPointer;
    d.current_version = kVersion;
    d.hotfix_binary = paths::kHotfixBinary;
    d.log_file = paths::kLogFile;
    d.route = DefaultReportRoute();
    return d;
  }();
  std::string log_level = "info";
};

void AddReportFlags(CLI::App& cmd, ReportFlags& f) {
  auto& o = f.o;
  cmd.add_option("--outcome", o.outcome,
                 "How provisioning with the hotfix binary ended: succeeded or failed")
      ->required()
      ->check(CLI::IsMember({"succeeded", "failed"}));
  cmd.add_option("--detail", o.detail, "Why it failed (at most 256 bytes are sent)");
  cmd.add_option("--hotfix-pointer", o.pointer_path, "Pointer file staged by check-hotfix")
      ->capture_default_str();
  cmd.add_option("--current-version", o.current_version,
                 "This node's agent version (YYYYMM.DD.PATCH)")
      ->capture_default_str();
  cmd.add_option("--hotfix-binary", o.hotfix_binary,
                 "The staged hotfix binary: nothing is reported unless it is executable (the "
                 "node then provisioned with it)")
      ->capture_default_str();
  cmd.add_option("--log-file", o.log_file, "JSON log lines are appended here and to stderr")
      ->capture_default_str();
  AddLogLevelFlag(cmd, f.log_level);
  AddReportRouteFlags(cmd, o.route);
}

// The first positional argument that looks like a flag: an unknown flag, a usage error.
bool UnknownFlag(const char* command, const std::vector<std::string>& extras) {
  for (const auto& a : extras) {
    if (!a.empty() && a[0] == '-') {
      std::cerr << command << ": unknown flag " << a << " (see --help)\n";
      return true;
    }
  }
  return false;
}

int CheckHotfixCommand(CLI::App& cmd, CheckHotfixFlags& f) {
  f.o.ignored_args = cmd.remaining();
  if (UnknownFlag("check-hotfix", f.o.ignored_args)) return hotfix::node::kExitUsage;
  if (!OldMillisecondsFlag("check-hotfix", cmd, "--lps-timeout", f.old_lps_timeout_ms,
                           &f.lps_timeout)) {
    return hotfix::node::kExitUsage;
  }
  auto timeout = DurationFlag("check-hotfix", "--lps-timeout", f.lps_timeout, milliseconds(1),
                              std::chrono::minutes(10));
  auto level = LogLevelFlag("check-hotfix", f.log_level);
  if (!timeout || !level) return hotfix::node::kExitUsage;
  f.o.fetch.timeout_ms = static_cast<int>(timeout->count());
  f.o.min_level = *level;
  f.o.user_agent = std::string("hotfix-agent/") + kVersion;
  return hotfix::node::CheckHotfixMain(f.o, std::cout);
}

int DownloadHotfixCommand(CLI::App& cmd, DownloadHotfixFlags& f) {
  const std::vector<std::string> extras = cmd.remaining();
  if (UnknownFlag("download-hotfix", extras)) return hotfix::node::kExitUsage;
  if (!extras.empty()) {
    // Exit 1, not 2: the reference's answer to this one usage error, which the node's
    // scripts see (docs/DOWNLOAD-HOTFIX.md, "Command line").
    std::string joined;
    for (const auto& a : extras) joined.append(joined.empty() ? "" : " ").append(a);
    std::cerr << "unexpected download-hotfix arguments: " << joined << "\n";
    return hotfix::node::kExitFailed;
  }
  if (!OldMillisecondsFlag("download-hotfix", cmd, "--retry-backoff", f.old_retry_backoff_ms,
                           &f.retry_backoff) ||
      !OldMillisecondsFlag("download-hotfix", cmd, "--command-timeout", f.old_command_timeout_ms,
                           &f.command_timeout)) {
    return hotfix::node::kExitUsage;
  }
  auto backoff = DurationFlag("download-hotfix", "--retry-backoff", f.retry_backoff,
                              milliseconds(0), std::chrono::minutes(10));
  auto timeout = DurationFlag("download-hotfix", "--command-timeout", f.command_timeout,
                              milliseconds(1), std::chrono::hours(1));
  auto level = LogLevelFlag("download-hotfix", f.log_level);
  if (!backoff || !timeout || !level) return hotfix::node::kExitUsage;
  f.o.download.retry_backoff = *backoff;
  f.o.download.command_timeout = *timeout;
  f.o.min_level = *level;
  f.o.report = !f.no_report;
  f.o.user_agent = std::string("hotfix-agent/") + kVersion;
  return hotfix::node::DownloadHotfixMain(f.o, std::cout, std::cerr);
}

int ReportCommand(ReportFlags& f) {
  auto level = LogLevelFlag("report", f.log_level);
  if (!level) return hotfix::node::kExitUsage;
  f.o.min_level = *level;
  f.o.user_agent = std::string("hotfix-agent/") + kVersion;
  return hotfix::node::ReportMain(f.o);
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
    return app.exit(e) == 0 ? hotfix::node::kExitOk : hotfix::node::kExitUsage;
  }
  if (check_cmd->parsed()) return CheckHotfixCommand(*check_cmd, check);
  if (download_cmd->parsed()) return DownloadHotfixCommand(*download_cmd, download);
  if (report_cmd->parsed()) return ReportCommand(report);
  return hotfix::node::kExitOk;
}
