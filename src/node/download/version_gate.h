// Whether a hotfix version applies to the running agent version: the gate download-hotfix puts in
// front of every install (AgentBaker: aks-node-controller/hotfix.go shouldUpgradeToHotfix).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix::node {

// A version as Masterminds/semver v3 NewVersion (the coercing parser) reads it: an optional
// "v", then MAJOR(.MINOR)?(.PATCH)? with leading zeros allowed and missing parts 0, then an
// optional -prerelease and +metadata of [0-9A-Za-z-] identifiers. A numeric prerelease
// identifier with a leading zero is refused, as is anything else ("dev", "").
struct LooseSemver {
  uint64_t major = 0;
  uint64_t minor = 0;
  uint64_t patch = 0;
  std::string prerelease;
  std::string metadata;
};
StatusOr<LooseSemver> ParseLooseSemver(std::string_view text);

// True iff both (trimmed) versions parse, their major and minor are equal and the hotfix's
// patch is strictly higher. Prerelease and metadata play no part: 202604.01.1 ->
// 202604.01.1-1 is not an upgrade. An unparseable version is an error, which callers treat
// as "skip": an image built as "dev" is never hotfixed.
StatusOr<bool> ShouldUpgradeToHotfix(std::string_view current, std::string_view hotfix);

}  // namespace hotfix::node
