// Staging the installed agent binary next to the VHD one (AgentBaker:
// aks-node-controller/hotfix.go copyBinaryAlongside): the launcher prefers <vhd>-hotfix when
// it is executable, and the VHD binary is never modified.
#pragma once

#include <string>

#include "common/status.h"

namespace hotfix::node {

inline constexpr char kBinaryTempPrefix[] = ".aks-node-controller-update-";

// Copies `source` (where the package installed it) to `destination` atomically and durably,
// with the permission bits of `mode_reference` (the VHD binary). Under the destination
// folder's lock, temp files a killed run left behind are removed first. Errors: "reading
// <source>: …", "stat <reference>: …", or the write's own.
Status StageHotfixBinary(const std::string& source, const std::string& mode_reference,
                         const std::string& destination);

}  // namespace hotfix::node
