// Where the node's files are unless a flag says otherwise: the one list of them, for the flags'
// defaults (cmd/hotfix-agent) and the options' (check-hotfix, download-hotfix). The AKS
// layout: AgentBaker writes the bootstrap files and installs the agent at these paths.
#pragma once

namespace hotfix::node::paths {

// Bootstrap inputs (cloud-init) and the pointer check-hotfix stages for download-hotfix.
inline constexpr char kNodeConfig[] = "/opt/azure/containers/aks-node-controller-config.json";
inline constexpr char kNbcCmd[] = "/opt/azure/containers/aks-node-controller-nbc-cmd.sh";
inline constexpr char kHotfixPointer[] = "/opt/azure/containers/aks-node-controller-hotfix.json";
inline constexpr char kNodeCustomData[] = "/opt/azure/containers/nodecustomdata.yml";

// The agent binary: where its package installs it, the image's copy, and the staged hotfix
// the launcher prefers.
inline constexpr char kPackageBinary[] = "/usr/bin/aks-node-controller";
inline constexpr char kVhdBinary[] = "/opt/azure/containers/aks-node-controller";
inline constexpr char kHotfixBinary[] = "/opt/azure/containers/aks-node-controller-hotfix";

// The distribution and its package sources.
inline constexpr char kOsRelease[] = "/etc/os-release";
inline constexpr char kAptSourcesDir[] = "/etc/apt/sources.list.d";
// The Microsoft keyrings when the apt source names none (microsoft*.gpg), and the yum sources.
inline constexpr char kAptTrustedDir[] = "/etc/apt/trusted.gpg.d";
inline constexpr char kYumReposDir[] = "/etc/yum.repos.d";

// Guest-agent events and the log both commands append to.
inline constexpr char kEventsDir[] =
    "/var/log/azure/Microsoft.Azure.Extensions.CustomScript/events";
inline constexpr char kLogFile[] = "/var/log/azure/aks-node-controller.log";

}  // namespace hotfix::node::paths
