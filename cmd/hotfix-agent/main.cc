// hotfix-agent: the node side of AKS live patching. A thin main: flags in, workflow out.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/log.h"
#include "node/check_hotfix.h"
#include "node/imds.h"
#include "node/lps_fetcher.h"

namespace {

constexpr char kVersion[] = HOTFIX_AGENT_VERSION;

struct CheckHotfixFlags {
  std::string node_config = "/opt/azure/containers/aks-node-controller-config.json";
  std::string nbc_cmd = "/opt/azure/containers/aks-node-controller-nbc-cmd.sh";
  std::string pointer = "/opt/azure/containers/aks-node-controller-hotfix.json";
  std::string imds_url = hotfix::node::kDefaultImdsUrl;
  std::string connect_to;
  std::string server_name = "aks-security-patch.data.mcr.microsoft.com";
  std::string component = "aksNodeController";
  int lps_timeout_ms = 3000;
  std::string events_dir = "/var/log/azure/Microsoft.Azure.Extensions.CustomScript/events";
  std::string log_file = "/var/log/azure/aks-node-controller.log";
  std::string current_version = kVersion;
  bool dry_run = false;
};

void AddCheckHotfixFlags(CLI::App& cmd, CheckHotfixFlags& f) {
  cmd.add_option("--node-config", f.node_config, "AKSNodeConfig JSON: apiserver FQDN and CA")
      ->capture_default_str();
  cmd.add_option("--nbc-cmd", f.nbc_cmd, "CSE command read when the node config is absent")
      ->capture_default_str();
  cmd.add_option("--hotfix-pointer", f.pointer, "Pointer file staged for download-hotfix")
      ->capture_default_str();
  cmd.add_option("--imds-url", f.imds_url, "IMDS attested-document URL (never proxied)")
      ->capture_default_str();
  cmd.add_option("--connect-to", f.connect_to,
                 "HOST:PORT TCP destination override; SNI and :authority stay the apiserver's");
  cmd.add_option("--server-name", f.server_name,
                 "Name the service certificate must carry (verified against the cluster CA)")
      ->capture_default_str();
  cmd.add_option("--component", f.component, "Component whose config is requested")
      ->capture_default_str();
  cmd.add_option("--lps-timeout-ms", f.lps_timeout_ms,
                 "Budget for connect, TLS and the call; the call may wait up to 2 s more for an "
                 "IMDS retry")
      ->capture_default_str()
      ->check(CLI::Range(1, 600000));
  cmd.add_option("--events-dir", f.events_dir, "Guest-agent events folder")->capture_default_str();
  cmd.add_option("--log-file", f.log_file, "JSON log lines are appended here and to stderr")
      ->capture_default_str();
  cmd.add_option("--current-version", f.current_version,
                 "This node's agent version (YYYYMM.DD.PATCH)")
      ->capture_default_str();
  cmd.add_flag("--dry-run", f.dry_run,
               "Report the outcome and the pointer it would write on stdout; write nothing");
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
  hotfix::node::GrpcLpsFetcherOptions fetch;
  fetch.node_config_path = f.node_config;
  fetch.nbc_cmd_path = f.nbc_cmd;
  fetch.connect_to = f.connect_to;
  fetch.server_name = f.server_name;
  fetch.component = f.component;
  fetch.timeout_ms = f.lps_timeout_ms;
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

}  // namespace

int main(int argc, char** argv) {
  // A write to a reset socket must be an error, not the end of the process.
  signal(SIGPIPE, SIG_IGN);

  CLI::App app{
      "hotfix-agent: the node side of AKS live patching.\n"
      "check-hotfix asks the live-patching service (through the apiserver's ALPN route) "
      "which hotfix applies to this node and stages it for download-hotfix."};
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);

  CheckHotfixFlags check;
  CLI::App* check_cmd =
      app.add_subcommand("check-hotfix",
                         "Read the hotfix pointer from the live-patching service and stage it "
                         "(fail-open: always exits 0)");
  AddCheckHotfixFlags(*check_cmd, check);
  check_cmd->allow_extras();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (check_cmd->parsed()) {
    std::vector<std::string> extras = check_cmd->remaining();
    for (const auto& a : extras) {
      if (!a.empty() && a[0] == '-') {
        std::cerr << "check-hotfix: unknown flag " << a << " (see --help)\n";
        return 2;
      }
    }
    try {
      return RunCheckHotfix(check, extras);
    } catch (...) {
      return 0;  // Fail-open even if setting up the run threw.
    }
  }
  return 0;
}
