// Staging the served map into the pointer file: read-modify-write that carries over the
// existing version and scripts_version verbatim, replaces hotfixes whole, keeps the file's
// permission bits (0644 for a new file), and replaces the file atomically and durably under
// the folder lock, clearing temp files a killed run left behind.
#pragma once

#include <string>

#include "common/deadline.h"
#include "common/log.h"
#include "common/status.h"
#include "node/host/hotfix_pointer.h"

namespace hotfix::node {

inline constexpr char kPointerTempPrefix[] = ".aks-node-controller-hotfix-";

// What the pointer file would hold after staging `hotfixes`, without writing anything. An
// unreadable or invalid existing file logs WARN "could not read existing hotfix pointer;
// version/scripts_version will not be preserved" and carries nothing over. A plan that
// serialises to more than kMaxPointerBytes (escaping can make it 6 times the served bytes) is
// refused: "hotfix pointer would be N bytes; download-hotfix reads at most 1048576".
StatusOr<HotfixPointer> PlanStagedPointer(const std::string& path, const HotfixMap& hotfixes,
                                          Logger& log);

// Plans under the folder lock and writes; returns what was written. Logs INFO "staged hotfix
// pointer for download-hotfix" with path. On an error the pointer is untouched; callers
// prefix the error with what they were writing ("writing hotfix config: …").
StatusOr<HotfixPointer> StageHotfixes(const std::string& path, const HotfixMap& hotfixes,
                                      Deadline deadline, Logger& log);

}  // namespace hotfix::node
