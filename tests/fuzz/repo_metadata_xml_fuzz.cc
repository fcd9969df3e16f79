// repomd.xml and primary.xml (download-hotfix's repository fast path on Azure Linux), read with
// expat: the input is given to ParseRepomdPrimary and, as a stream, to FindPrimaryPackage for
// aks-node-controller 202608.21.1-1.azl3.x86_64.
//
// Properties: repomd's refusals are kDataLoss or kFailedPrecondition, primary's kDataLoss; a
// repomd entry has a non-empty href and 64 lower-case hex digests; a package entry has the
// expected href and a 64 lower-case hex SHA-256; an input that opens with a DOCTYPE is refused
// by both; and the answers do not change when the input is given again
// (nothing is kept between parses).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "node/repository/repo_metadata_xml.h"

using namespace hotfix;
using namespace hotfix::node::repository;

namespace {

const RpmQuery kQuery{"aks-node-controller", "x86_64", "202608.21.1", "1.azl3",
                      "Packages/a/aks-node-controller-202608.21.1-1.azl3.x86_64.rpm"};

StatusOr<std::optional<RpmPackageEntry>> FindIn(std::string_view xml) {
  std::istringstream in{std::string(xml)};
  return FindPrimaryPackage(in, kQuery);
}

std::string Describe(const StatusOr<RepomdData>& r) {
  if (!r.ok()) return "error " + r.status().message();
  return r->href + "|" + r->sha256 + "|" + (r->size ? std::to_string(*r->size) : "-") + "|" +
         r->open_sha256.value_or("-") + "|" + (r->open_size ? std::to_string(*r->open_size) : "-");
}

std::string Describe(const StatusOr<std::optional<RpmPackageEntry>>& r) {
  if (!r.ok()) return "error " + r.status().message();
  if (!r->has_value()) return "none";
  const RpmPackageEntry& e = **r;
  return e.href + "|" + e.sha256 + "|" + (e.size ? std::to_string(*e.size) : "-");
}

// A DOCTYPE (outside comments, CDATA and the like) comes before the root element; this is
// only the plain case: the document starts with one, after an optional XML declaration.
bool StartsWithDoctype(std::string_view xml) {
  if (xml.starts_with("<?xml")) {
    size_t end = xml.find("?>");
    if (end == std::string_view::npos) return false;
    xml.remove_prefix(end + 2);
  }
  while (!xml.empty() && (xml.front() == ' ' || xml.front() == '\n' || xml.front() == '\t' ||
                          xml.front() == '\r')) {
    xml.remove_prefix(1);
  }
  return xml.starts_with("<!DOCTYPE");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view xml(reinterpret_cast<const char*>(data), size);
  const bool doctype = StartsWithDoctype(xml);

  StatusOr<RepomdData> repomd = ParseRepomdPrimary(xml);
  if (repomd.ok()) {
    FUZZ_CHECK(!repomd->href.empty());
    FUZZ_CHECK(IsLowerHex64(repomd->sha256));
    if (repomd->open_sha256.has_value()) FUZZ_CHECK(IsLowerHex64(*repomd->open_sha256));
  } else {
    FUZZ_CHECK(repomd.status().code() == Status::Code::kDataLoss ||
               repomd.status().code() == Status::Code::kFailedPrecondition);
  }
  FUZZ_CHECK(Describe(ParseRepomdPrimary(xml)) == Describe(repomd));

  StatusOr<std::optional<RpmPackageEntry>> package = FindIn(xml);
  if (package.ok()) {
    if (package->has_value()) {
      FUZZ_CHECK((*package)->href == kQuery.expected_href);
      FUZZ_CHECK(IsLowerHex64((*package)->sha256));
    }
  } else {
    FUZZ_CHECK(package.status().code() == Status::Code::kDataLoss);
  }
  FUZZ_CHECK(Describe(FindIn(xml)) == Describe(package));
  if (doctype) FUZZ_CHECK(!repomd.ok() && !package.ok());
  return 0;
}
