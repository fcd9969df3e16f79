// hotfix-agent check-hotfix as the integration tests run it: the node's bootstrap config, the
// command line from a node's paths, and what a run left behind (JSON log lines, event files).
// Header-only because BinDir() is defined per integration test target.
//
//   CheckHotfixArgs args;
//   args.node_config = dir.File("config.json");  ...  args.connect_to = proxy.frontend_address();
//   RunResult r = RunProcess(CheckHotfixSpawn(args), std::chrono::seconds(30));
//   std::vector<nlohmann::json> events = ReadEventFiles(args.events_dir);
#pragma once

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bin_dir.h"
#include "common/base64.h"
#include "subprocess.h"
#include "text_util.h"

namespace hotfix::testsupport {

// AKSNodeConfig as provisioning writes it (protojson field names): the apiserver's name and
// the cluster CA, base64 of the PEM.
inline nlohmann::json NodeConfigJson(const std::string& apiserver_fqdn, const std::string& ca_pem) {
  return {{"version", "v1"},
          {"api_server_config", {{"api_server_name", apiserver_fqdn}}},
          {"kubernetes_ca_cert", EncodeStdBase64(ca_pem)}};
}

struct CheckHotfixArgs {
  std::filesystem::path node_config, nbc_cmd, pointer, events_dir, log_file;
  std::string imds_url;
  // HOST:PORT to dial instead of the apiserver name; nullopt: no --connect-to (the name is
  // resolved and port 443 dialled).
  std::optional<std::string> connect_to;
  std::string current_version = "202604.01.0";
  std::vector<std::string> extra_args;  // appended after the others
  // Set for the run. The proxy variables not named here are unset: a developer's or CI's
  // proxy must not reach the agent unless the test means it to.
  std::map<std::string, std::string> env;
};

inline SpawnOptions CheckHotfixSpawn(const CheckHotfixArgs& args) {
  SpawnOptions spawn;
  spawn.argv = {BinDir() + "/hotfix-agent",
                "check-hotfix",
                "--node-config",
                args.node_config.string(),
                "--nbc-cmd",
                args.nbc_cmd.string(),
                "--hotfix-pointer",
                args.pointer.string(),
                "--imds-url",
                args.imds_url,
                "--events-dir",
                args.events_dir.string(),
                "--log-file",
                args.log_file.string(),
                "--current-version",
                args.current_version};
  if (args.connect_to) {
    spawn.argv.push_back("--connect-to");
    spawn.argv.push_back(*args.connect_to);
  }
  spawn.argv.insert(spawn.argv.end(), args.extra_args.begin(), args.extra_args.end());
  spawn.env = args.env;
  for (const char* name : {"HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "HTTP_PROXY",
                           "http_proxy", "ALL_PROXY", "all_proxy"}) {
    if (args.env.count(name) == 0) spawn.unset_env.push_back(name);
  }
  return spawn;
}

// Every file in a guest-agent events folder, parsed, in name order; none if the folder is
// missing.
inline std::vector<nlohmann::json> ReadEventFiles(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<nlohmann::json> events;
  for (const auto& f : files) {
    events.push_back(nlohmann::json::parse(ReadFile(f), nullptr, /*allow_exceptions=*/false));
  }
  return events;
}

}  // namespace hotfix::testsupport
