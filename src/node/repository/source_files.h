// The node's package source files, found where the package manager's own path finds them, so
// that the fast path and apt/dnf read the same repository (AgentBaker's microsoftProdSourceListPath
// and its yum.repos.d glob).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "node/repository/yum_repo.h"

namespace hotfix::node::repository {

// <dir>/microsoft-prod.list if it exists, else <dir>/microsoft-prod.sources, else NotFound
// "neither <list> nor <sources> exists". A stat error other than ENOENT is an IoError.
StatusOr<std::string> ResolveMicrosoftProdSources(const std::string& apt_sources_dir);

// Every <dir>/*.repo regular file (at most 64 of 1 MiB each), sorted by name; unreadable ones
// skipped, as the reference skips them. A missing folder is none.
std::vector<YumRepoFile> ReadYumRepoFiles(const std::string& yum_repos_dir);

}  // namespace hotfix::node::repository
