// Where to reach the live-patching service: the apiserver FQDN and the cluster CA, from the
// AKSNodeConfig JSON or, when that file does not exist, from aks-node-controller-nbc-cmd.sh
// (AgentBaker: aks-node-controller/checkhotfix.go lpsTargetFromNodeConfig).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/log.h"
#include "common/status.h"
#include "node/host/hotfix_pointer.h"
#include "node/host/node_config_json.h"

namespace hotfix::node {

struct LpsTarget {
  std::string api_server_name;  // as configured, e.g. "myaks-dns.hcp.eastus.azmk8s.io"
  std::string ca_pem;           // decoded; empty when the source had no CA
  std::string source_path;      // the file it came from
};

// Reads node_config_path; falls back to nbc_cmd_path only when node_config_path is ENOENT.
// Error texts follow the reference: "reading node config <p>: …", "node config has no
// api_server_config.api_server_name[ (parse error: …)]", "decoding node config
// kubernetes_ca_cert: …", "reading nbc-cmd <p>: …", "nbc-cmd <p> has no API_SERVER_NAME",
// "decoding nbc-cmd KUBE_CA_CRT: …".
StatusOr<LpsTarget> ResolveLpsTarget(const std::string& node_config_path,
                                     const std::string& nbc_cmd_path, Logger& log);

// The cold-start pointer: a top-level "hotfixes" map in the node config, decoded leniently.
// nullopt when the file is missing or the map is absent, null or empty. Errors: "reading node
// config <p>: …", "parsing cold-start hotfixes from node config: …".
StatusOr<std::optional<HotfixMap>> ReadColdStartHotfixes(const std::string& node_config_path);

// The apiserver name as host for SNI and dialing: Go's net.SplitHostPort host part when the
// name splits, the raw name otherwise (AgentBaker: aks-node-controller/checkhotfix_grpc.go
// dialLPSGRPC). The configured port is dropped: the service is always reached on 443.
std::string ApiServerHost(std::string_view api_server_name);

}  // namespace hotfix::node
