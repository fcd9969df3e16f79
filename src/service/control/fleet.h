// The fleet `live-patching-service simulate` evaluates (docs/ROLLOUTS.md, "Tools"): nodes read
// from a file (the access log can produce it) or drawn at random from a seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "service/rollout/rollout.h"

namespace hotfix::service {

inline constexpr size_t kMaxFleetNodes = 1000000;

struct NodeList {
  std::vector<RolloutNode> nodes;  // as evaluated (MakeRolloutNode), file order
  size_t duplicates = 0;           // lines naming a node already listed (dropped)
};

// Lines `vmId,subscriptionId,clusterHost` (the cluster may carry `:port`); blank lines and
// lines starting with `#` ignored; spaces around fields trimmed; CRLF accepted. A bad line is
// InvalidArgument "line N: ...". More than kMaxFleetNodes nodes is InvalidArgument.
StatusOr<NodeList> ParseNodeList(std::string_view text);
// The same from a file: a file that cannot be read is an IoError/NotFound (not
// InvalidArgument, which always means a bad line or too many nodes).
StatusOr<NodeList> ReadNodeFile(const std::string& path);

struct RandomFleetOptions {
  size_t count = 0;  // 1 to kMaxFleetNodes
  uint64_t seed = 1;
  // Drawn from uniformly; empty: 5 made-up subscription GUIDs / 8 made-up AKS hosts
  // (`aks-xxxxxx-dns-xxxxxxxx.hcp.<region>.azmk8s.io` in eastus, westeurope, southeastasia,
  // westus2), themselves drawn from the seed.
  std::vector<std::string> subscriptions;
  std::vector<std::string> clusters;
};
// GUID-shaped random vmIds; the same options give the same fleet on every machine
// (std::mt19937_64's raw output only).
StatusOr<std::vector<RolloutNode>> RandomFleet(const RandomFleetOptions& options);

}  // namespace hotfix::service
