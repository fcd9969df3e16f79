// A Debian Packages index (download-hotfix's repository fast path): FindPackageStanza on the
// input as a stream, then CheckDebStanza on a match. The input is "index[\0package\0version
// \0architecture]" (aks-node-controller 202608.21.1-ubuntu22.04u1 amd64 otherwise).
//
// Properties: refusals are kDataLoss; a match carries the query's package, version and
// architecture; CheckDebStanza accepts it against its own Filename exactly when its SHA256 is
// 64 hex digits; written back as a stanza it is found again, equal; and the same index placed
// after a 64 KiB stanza (so that its lines straddle the reader's block boundary, at an offset
// the first byte chooses) gives the same answer.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "node/repository/packages_index.h"

using namespace hotfix;
using namespace hotfix::node::repository;

namespace {

constexpr size_t kBlockBytes = 64 * 1024;

bool IsHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

StatusOr<std::optional<DebStanza>> Find(const std::string& index, const DebPackageQuery& query) {
  std::istringstream in(index);
  return FindPackageStanza(in, query);
}

bool Same(const StatusOr<std::optional<DebStanza>>& a,
          const StatusOr<std::optional<DebStanza>>& b) {
  if (a.ok() != b.ok()) return false;
  if (!a.ok())
    return a.status().code() == b.status().code() && a.status().message() == b.status().message();
  if (a->has_value() != b->has_value()) return false;
  if (!a->has_value()) return true;
  const DebStanza &x = **a, &y = **b;
  return x.filename == y.filename && x.sha256 == y.sha256 && x.package == y.package &&
         x.version == y.version && x.architecture == y.architecture;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string_view> fields =
      SplitAtNul(std::string_view(reinterpret_cast<const char*>(data), size));
  const std::string index(fields[0]);
  DebPackageQuery query{"aks-node-controller", "202608.21.1-ubuntu22.04u1", "amd64"};
  if (fields.size() >= 4) {
    query = {std::string(fields[1]), std::string(fields[2]), std::string(fields[3])};
  }

  StatusOr<std::optional<DebStanza>> got = Find(index, query);
  if (!got.ok()) {
    FUZZ_CHECK(got.status().code() == Status::Code::kDataLoss);
  } else if (got->has_value()) {
    const DebStanza& stanza = **got;
    FUZZ_CHECK(stanza.package == query.package && stanza.version == query.version &&
               stanza.architecture == query.architecture);
    Status check = CheckDebStanza(stanza, stanza.filename);
    FUZZ_CHECK(check.ok() == IsHex64(stanza.sha256));
    if (!check.ok()) FUZZ_CHECK(check.code() == Status::Code::kDataLoss);
    if (!stanza.filename.empty()) {
      Status wrong = CheckDebStanza(stanza, stanza.filename + "x");
      FUZZ_CHECK(wrong.code() == Status::Code::kDataLoss);
    }
    // Values are trimmed single lines; one ending in CR keeps it only behind the line's own.
    std::string again = "Package: " + stanza.package + "\r\nVersion: " + stanza.version +
                        "\r\nArchitecture: " + stanza.architecture +
                        "\r\nFilename: " + stanza.filename + "\r\nSHA256: " + stanza.sha256 +
                        "\r\n";
    FUZZ_CHECK(Same(Find(again, query), got));
  }

  // The reader's block boundary falls inside the index, 1 to 256 bytes into it.
  const size_t into = 1 + (index.empty() ? 0 : static_cast<uint8_t>(index[0]));
  std::string padded = "X-Pad: " + std::string(kBlockBytes - into - 9, 'p') + "\n\n";
  padded += index;
  FUZZ_CHECK(Same(Find(padded, query), got));
  return 0;
}
