// Where a repository's files may come from (AgentBaker: aks-node-controller/repository_hotfix.go;
// docs/DOWNLOAD-HOTFIX.md, "The repository fast path"): the base URL the node's source names,
// every file under it by a truly relative path, and nothing that leaves it. A base the rules do
// not allow is a configuration the fast path does not support (fall back); a path from signed
// metadata that leaves the base is an integrity failure.
#pragma once

#include <string_view>

#include "common/status.h"
#include "wire/url.h"

namespace hotfix::node::repository {

// The base URL of a source or .repo file: http(s), a host, no userinfo, no query; plain http only
// to "localhost" or a loopback, private or link-local IP literal (as Go's IsLoopback, IsPrivate
// and IsLinkLocalUnicast). The fragment is dropped and the path made to end in '/'.
// FailedPrecondition naming the rule otherwise.
StatusOr<wire::Url> ParseRepositoryBase(std::string_view text);

// The URL of `relative` under `base`. `relative` must be a truly relative path: no scheme, no
// "//" authority, no leading '/', no query or fragment, and once cleaned (Go's path.Clean) it
// must not climb out of the base. DataLoss "repository path <p> escapes the repository" (or
// names the rule) otherwise: the paths come from signed metadata or from the hotfix version.
StatusOr<wire::Url> RepositoryFileUrl(const wire::Url& base, std::string_view relative);

// True when `target` is under `base`: same scheme and authority, and a path below the base's
// once dot segments are removed. What a redirect may lead to.
bool WithinRepository(const wire::Url& base, const wire::Url& target);

}  // namespace hotfix::node::repository
