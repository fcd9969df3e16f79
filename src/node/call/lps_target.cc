#include "node/call/lps_target.h"

#include <map>
#include <optional>

#include "common/base64.h"
#include "common/file_util.h"
#include "common/host_port.h"
#include "node/host/nbc_cmd.h"

namespace hotfix::node {
namespace {

// Real node configs and nbc commands are well under 100 KiB (the custom data that carries them
// is capped at 87380 bytes); the cap only stops a runaway file from being read whole.
constexpr size_t kMaxNodeConfigBytes = size_t{4} << 20;
constexpr size_t kMaxNbcCmdBytes = size_t{4} << 20;

StatusOr<LpsTarget> TargetFromNodeConfig(const std::string& path, const std::string& content,
                                         Logger& log) {
  NodeConfigFields fields = ParseNodeConfigFields(content);
  if (!fields.parse_error.empty()) {
    // The reference carries on with whatever decoded before the error.
    log.Info("node config parsed with errors, continuing with partial config",
             {{"error", fields.parse_error}});
  }
  if (fields.api_server_name.empty()) {
    std::string message = "node config has no api_server_config.api_server_name";
    if (!fields.parse_error.empty()) message += " (parse error: " + fields.parse_error + ")";
    return Status::InvalidArgument(std::move(message));
  }
  LpsTarget target{fields.api_server_name, "", path};
  if (!fields.kubernetes_ca_cert.empty()) {
    StatusOr<std::string> pem = DecodeStdBase64(fields.kubernetes_ca_cert);
    if (!pem.ok()) return pem.status().Annotate("decoding node config kubernetes_ca_cert");
    target.ca_pem = std::move(*pem);
  }
  return target;
}

StatusOr<LpsTarget> TargetFromNbcCmd(const std::string& path, Logger& log) {
  StatusOr<std::string> content = ReadFileToString(path, kMaxNbcCmdBytes);
  if (!content.ok()) return content.status().Annotate("reading nbc-cmd " + path);
  std::map<std::string, std::string> vars = ParseEnvVarsFromNbcCmd(*content);
  LpsTarget target{vars["API_SERVER_NAME"], "", path};
  if (target.api_server_name.empty()) {
    return Status::InvalidArgument("nbc-cmd " + path + " has no API_SERVER_NAME");
  }
  if (const std::string& ca = vars["KUBE_CA_CRT"]; !ca.empty()) {
    StatusOr<std::string> pem = DecodeStdBase64(ca);
    if (!pem.ok()) return pem.status().Annotate("decoding nbc-cmd KUBE_CA_CRT");
    target.ca_pem = std::move(*pem);
  }
  log.Info("loaded LPS target from nbc-cmd.sh fallback",
           {{"fqdn", target.api_server_name}, {"path", path}});
  return target;
}

}  // namespace

StatusOr<LpsTarget> ResolveLpsTarget(const std::string& node_config_path,
                                     const std::string& nbc_cmd_path, Logger& log) {
  StatusOr<std::string> content = ReadFileToString(node_config_path, kMaxNodeConfigBytes);
  if (content.ok()) return TargetFromNodeConfig(node_config_path, *content, log);
  // Only a missing file falls back: an unreadable config is a problem to report, not skip.
  if (!content.status().IsNotFound()) {
    return content.status().Annotate("reading node config " + node_config_path);
  }
  log.Info("node config not found, trying nbc-cmd.sh fallback", {{"path", node_config_path}});
  return TargetFromNbcCmd(nbc_cmd_path, log);
}

StatusOr<std::optional<HotfixMap>> ReadColdStartHotfixes(const std::string& node_config_path) {
  StatusOr<std::string> content = ReadFileToString(node_config_path, kMaxNodeConfigBytes);
  if (!content.ok()) {
    if (content.status().IsNotFound()) return std::optional<HotfixMap>();
    return content.status().Annotate("reading node config " + node_config_path);
  }
  StatusOr<HotfixMap> hotfixes = DecodeLenientHotfixes(*content);
  if (!hotfixes.ok()) {
    return hotfixes.status().Annotate("parsing cold-start hotfixes from node config");
  }
  if (hotfixes->empty()) return std::optional<HotfixMap>();
  return std::optional<HotfixMap>(std::move(*hotfixes));
}

std::string ApiServerHost(std::string_view api_server_name) {
  const std::optional<HostPort> split = SplitHostPort(api_server_name);
  return std::string(split ? split->host : api_server_name);
}

}  // namespace hotfix::node
