// Which package manager installs the hotfix on this OS, and the exact commands it runs
// (AgentBaker: aks-node-controller/hotfix.go detectPackageManager, installWithApt and the
// dnf/tdnf installs), plus the version check we add before staging.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "node/download/command_runner.h"

namespace hotfix::node {

inline constexpr char kAgentPackage[] = "aks-node-controller";

enum class PackageManager { kApt, kDnf, kTdnf };
// "apt-get", "dnf", "tdnf"
const char* PackageManagerName(PackageManager pm);

// The first line of os-release whose trimmed text starts with ID=, with '"' stripped from both
// ends (single quotes are not) and lower-cased: ubuntu -> apt-get; azurelinux or mariner ->
// dnf when it is on PATH, else tdnf (OS Guard images). Errors: "unsupported OS: <id>",
// "ID not found in <path>", or the read error.
StatusOr<PackageManager> DetectPackageManager(const std::string& os_release_path);

// The commands that install `version`, in order, each to be retried on its own. apt-get:
// dpkg --configure -a, apt-get update restricted to the sources file, apt-get install
// aks-node-controller=<version>* (a literal glob for apt). dnf/tdnf: one install command.
std::vector<Argv> InstallCommands(PackageManager pm, const std::string& version,
                                  const std::string& apt_sources_file);

// The query whose output InstalledVersionMatches reads: dpkg-query or rpm -q.
Argv InstalledVersionQuery(PackageManager pm);

// Whether the query output shows `requested` installed. apt's `<version>*` glob would also take
// 202604.01.10 for 202604.01.1, so a Debian version must be `requested` exactly or followed by a
// revision or suffix ("-", "+", "~"), and its status must be "installed". For rpm, VERSION or
// VERSION-RELEASE must equal `requested`, as dnf's name-version match requires.
// On mismatch, *installed holds what is there ("" if nothing).
bool InstalledVersionMatches(PackageManager pm, const std::string& query_output,
                             const std::string& requested, std::string* installed);

}  // namespace hotfix::node
