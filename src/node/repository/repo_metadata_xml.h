// An rpm repository's metadata (docs/DOWNLOAD-HOTFIX.md, "The repository fast path"):
// repomd.xml's primary entry and the hotfix package's entry in primary.xml, read with expat,
// the second as a stream (primary.xml can be 128 MiB uncompressed).
//
// Both refuse a document type declaration (kDataLoss): repository metadata never has one, and
// a DTD is where entity expansion attacks live. Elements are matched by namespace URI
// (http://linux.duke.edu/metadata/repo, .../common), never by prefix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix::node::repository {

// A start tag, comment or other piece of markup longer than this is refused (kDataLoss)
// before expat buffers it whole: createrepo_c's longest is a few KiB.
inline constexpr size_t kMaxXmlMarkupBytes = 1 << 20;
// Deeper nesting is refused (kDataLoss); primary.xml nests 5 deep.
inline constexpr int kMaxXmlDepth = 64;
// Text kept per element read (a checksum, a name, a size); longer text reads as invalid.
inline constexpr size_t kMaxXmlTextBytes = 64 * 1024;

struct RepomdData {
  std::string href;    // location href, as written (never empty)
  std::string sha256;  // 64 lower-case hex digits
  // <size> and <open-size> as declared (the reference compares size only when it is > 0).
  std::optional<uint64_t> size;
  std::optional<std::string> open_sha256;  // 64 lower-case hex digits
  std::optional<uint64_t> open_size;
};

// The first <data type="primary"> child of <repomd>. Its <checksum> must be type sha256 with
// 64 hex digits and an <open-checksum> (if any) type sha256 with 64 hex digits, otherwise
// kFailedPrecondition (a repository this path cannot check, not a corrupt one); no primary
// entry: kFailedPrecondition. A missing or empty <location href>, a <size>/<open-size> that is
// not a decimal integer, XML that does not parse (a DTD included): kDataLoss.
StatusOr<RepomdData> ParseRepomdPrimary(std::string_view repomd_xml);

struct RpmQuery {
  std::string name;           // "aks-node-controller"
  std::string arch;           // "x86_64"
  std::string version;        // version@ver: "202608.21.1"
  std::string release;        // version@rel: "1.azl3"
  std::string expected_href;  // "Packages/a/aks-node-controller-202608.21.1-1.azl3.x86_64.rpm"
};

struct RpmPackageEntry {
  std::string href;              // equal to the query's expected_href
  std::string sha256;            // 64 lower-case hex digits
  std::optional<uint64_t> size;  // <size package="...">, when present
};

// Streams primary.xml's <package> children of <metadata> and stops at the first whose <name>,
// <arch>, <version ver> and <version rel> equal the query's (name and arch trimmed of XML
// whitespace; epoch ignored). That package's <location href> must equal expected_href and its
// <checksum> be type sha256 with 64 hex digits, and a <size package> present must be a decimal
// integer; otherwise kDataLoss. No such package: nullopt. XML that does not parse up to the
// match (a DTD included): kDataLoss; a read error: kIoError.
StatusOr<std::optional<RpmPackageEntry>> FindPrimaryPackage(std::istream& in,
                                                            const RpmQuery& query);

}  // namespace hotfix::node::repository
