// Azure Linux's Microsoft package repository, found in /etc/yum.repos.d (docs/DOWNLOAD-HOTFIX.md,
// "The repository fast path"), and its baseurl made concrete. Every refusal
// is kFailedPrecondition: the node then installs with dnf/tdnf, which reads the same files.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hotfix::node::repository {

// One .repo file: the caller globs /etc/yum.repos.d/*.repo, sorted, and reads each (a file
// it cannot read is left out).
struct YumRepoFile {
  std::string name;  // the path, for messages
  std::string text;
};

struct YumRepo {
  std::string section;  // "azurelinux-official-ms-oss"
  std::string baseurl;  // the first whitespace-separated field, variables not yet substituted
  // The gpgkey entries, each a local absolute path ("file://" stripped); may be empty.
  std::vector<std::string> gpgkey_paths;
};

// The first qualifying section, files in the given order and sections in file order. INI:
// '#' and ';' comment lines, "[section]", "key=value" (keys lower-cased, keys and values
// trimmed; other lines ignored). A section qualifies when its name contains "ms-oss" or
// "microsoft", or its baseurl contains "/ms-oss/" or "/microsoft/" (any case), and its
// enabled is not "0". Its gpgkey (split on whitespace and commas) must hold only local keys,
// "file:///abs" or "/abs": any other (https://...) stops the search with kFailedPrecondition
// rather than trying the next section. A qualifying section with an empty baseurl is skipped.
// None: kFailedPrecondition.
StatusOr<YumRepo> FindMicrosoftYumRepo(const std::vector<YumRepoFile>& files);

// baseurl with $releasever / ${releasever} and $basearch / ${basearch} replaced (one pass: a
// value is never rescanned). A variable is the longest run of [A-Za-z0-9_] after '$', as dnf
// reads it, so "$releasever_major" is not "$releasever" followed by "_major". Any '$' left
// (another variable, or one in a value) is kFailedPrecondition.
StatusOr<std::string> SubstituteYumVariables(std::string_view baseurl, std::string_view releasever,
                                             std::string_view basearch);

}  // namespace hotfix::node::repository
