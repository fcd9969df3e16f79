// The node's apt source for the Microsoft repository (docs/DOWNLOAD-HOTFIX.md, "The repository
// fast path"): microsoft-prod.sources (deb822) or microsoft-prod.list (one-line),
// read as AgentBaker's repository_hotfix_deb.go reads them. Hand-written: no Debian library
// parses sources without apt's whole configuration, and the rules (which paragraph, which
// options are refused) are the reference's, not apt's.
//
// Every refusal is kFailedPrecondition: a source this path cannot use sends download-hotfix
// to the package manager, which reads the same file with apt's own rules.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hotfix::node::repository {

struct AptSource {
  std::string uri;        // the first URI, as written
  std::string suite;      // the first suite
  std::string component;  // the first component
  // Signed-By keyrings: absolute paths only. Empty: the source names none
  // (DefaultMicrosoftKeyrings then).
  std::vector<std::string> signed_by;
};

// Inputs larger than this are refused rather than read: a real source file is a few lines.
inline constexpr size_t kMaxAptSourceBytes = 1 << 20;

// microsoft-prod.sources: the first paragraph whose Types include "deb", whose Enabled is not
// "no" (any case), whose Architectures are empty or include arch, and whose URIs, Suites and
// Components are all non-empty. Paragraphs are split on blank lines (CRLF read as LF), keys
// are case-insensitive, continuation lines (starting with a space or tab) are joined, '#' lines
// ignored. Its Signed-By is split on commas and whitespace; every token must be an absolute
// path ("APT Signed-By contains unsupported non-path constraint": a fingerprint or an embedded
// key block).
StatusOr<AptSource> ParseDeb822Sources(std::string_view text, std::string_view arch);

// microsoft-prod.list: the first "deb" line with at least four fields ('#' starts a comment),
// an optional "[k=v ...]" group after "deb" (a token that is not k=v: kFailedPrecondition),
// "arch=" a comma list that skips the line unless it holds arch, then URI, suite and component.
// "signed-by=" follows ParseDeb822Sources's Signed-By rule.
StatusOr<AptSource> ParseOneLineSources(std::string_view text, std::string_view arch);

// The keyrings used when the source names none: the regular files (symlinks followed)
// <trusted_dir>/microsoft*.gpg, sorted byte-wise as Go's filepath.Glob returns them. Empty
// when there are none or trusted_dir cannot be read.
std::vector<std::string> DefaultMicrosoftKeyrings(const std::string& trusted_dir);

}  // namespace hotfix::node::repository
