// hotfix-agent's three commands as functions of their parsed flags. cmd/hotfix-agent/main.cc
// parses the flags (usage errors exit 2 there) and calls one of these; each sets up what its
// command needs (the log file, IMDS, the route to the service), runs it, prints a dry run's
// plan, and returns the process's exit status by the agent's policy (docs/CHECK-HOTFIX.md,
// "Outcomes"; docs/DOWNLOAD-HOTFIX.md, "Exit codes and outcomes"):
//   check-hotfix     0 whatever the check finds, even when setting it up throws (fail-open)
//   download-hotfix  the run's: 0 unless an install was attempted and failed (1); an exception
//                    setting it up is 1, said on stderr
//   report           0 whatever the report meets (fail-open)
#pragma once

#include <atomic>
#include <ostream>
#include <string>
#include <vector>

#include "common/log.h"
#include "node/call/imds.h"
#include "node/call/lps_client.h"
#include "node/check/check_hotfix.h"
#include "node/check/lps_fetcher.h"
#include "node/download/download_hotfix.h"

namespace hotfix::node {

inline constexpr int kExitOk = 0;
// download-hotfix: an install was attempted and failed, or (the reference's answer, which the
// node's scripts see) unexpected positional arguments.
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;  // a command line that cannot be parsed

// The route a report takes to the service, check-hotfix's: download-hotfix's outcome report and
// `report`'s.
struct ReportRoute {
  LpsEndpoint lps;  // node config, nbc-cmd, connect-to, server name
  std::string imds_url = kDefaultImdsUrl;
  std::string component = "aksNodeController";
};

struct CheckHotfixCommandOptions {
  CheckHotfixOptions check;     // pointer, node config, current version, dry run
  GrpcLpsFetcherOptions fetch;  // its node config (check's) and user agent set from the rest
  std::string imds_url = kDefaultImdsUrl;
  std::string events_dir;
  std::string log_file;  // not opened in a dry run
  LogLevel min_level = LogLevel::kInfo;
  std::string user_agent;                 // "hotfix-agent/<version>"
  std::vector<std::string> ignored_args;  // positional arguments: logged, ignored
};
// The dry run's plan goes to `out` (CheckHotfixDryRunJson).
int CheckHotfixMain(const CheckHotfixCommandOptions& options, std::ostream& out);

struct DownloadHotfixCommandOptions {
  DownloadHotfixOptions download;  // its cancelled and user agent are set here
  std::string lock_file;           // empty: .aks-node-controller-download-hotfix.lock beside
                                   // the hotfix binary
  std::string events_dir;
  std::string log_file;  // not opened in a dry run
  LogLevel min_level = LogLevel::kInfo;
  std::string user_agent;
  ReportRoute route;
  bool report = true;  // false: --no-report
};
// SIGTERM and SIGINT cancel the run (the running command killed, no more retries, nothing
// reported): a handler is installed for the process. The dry run's plan goes to `out`.
int DownloadHotfixMain(const DownloadHotfixCommandOptions& options, std::ostream& out,
                       std::ostream& err);

struct ReportCommandOptions {
  std::string outcome;  // "succeeded" or "failed"
  std::string detail;
  std::string pointer_path;
  std::string current_version;
  std::string hotfix_binary;
  std::string log_file;
  LogLevel min_level = LogLevel::kInfo;
  std::string user_agent;
  ReportRoute route;
};
int ReportMain(const ReportCommandOptions& options);

// A dry run's plan, for scripts to read (JSON, two-space indented; invalid UTF-8 replaced):
// check-hotfix's outcome, error and the pointer it would write; download-hotfix's decision for
// the scripts and the binary, the commands it would run and where it would stage the binary
// ("would..." where a real run would have acted).
std::string CheckHotfixDryRunJson(const CheckHotfixResult& result, const std::string& pointer_path);
std::string DownloadHotfixDryRunJson(const DownloadHotfixResult& result,
                                     const DownloadHotfixOptions& options);

}  // namespace hotfix::node
