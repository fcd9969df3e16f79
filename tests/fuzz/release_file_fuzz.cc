// InRelease (download-hotfix's repository fast path): CheckClearsignedLayout on the file and
// FindReleaseSha256 on the same bytes read as signed text. The bytes after the first NUL, if
// any, are the path looked up ("main/binary-amd64/Packages.gz" otherwise).
//
// Properties: every refusal is kDataLoss; an accepted layout starts with the BEGIN line and
// holds the END line; an entry has the asked path, a 64 lower-case hex SHA-256, and written
// back as a one-line SHA256 section is found again, equal; with no CR in the input, the same
// text with CRLF line ends gives the same answers.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "node/repository/release_file.h"

using namespace hotfix;
using namespace hotfix::node::repository;

namespace {

bool SameResult(const StatusOr<ReleaseEntry>& a, const StatusOr<ReleaseEntry>& b) {
  if (a.ok() != b.ok()) return false;
  if (!a.ok()) return a.status().message() == b.status().message();
  return a->path == b->path && a->size == b->size && a->sha256 == b->sha256;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view text = input.substr(0, input.find('\0'));
  std::string_view path =
      text.size() < input.size() ? input.substr(text.size() + 1) : "main/binary-amd64/Packages.gz";

  Status layout = CheckClearsignedLayout(text);
  if (layout.ok()) {
    FUZZ_CHECK(text.starts_with("-----BEGIN PGP SIGNED MESSAGE-----"));
    FUZZ_CHECK(text.find("\n-----END PGP SIGNATURE-----") != std::string_view::npos);
  } else {
    FUZZ_CHECK(layout.code() == Status::Code::kDataLoss);
    FUZZ_CHECK(layout.message().starts_with("malformed clear-signed InRelease: "));
  }

  StatusOr<ReleaseEntry> entry = FindReleaseSha256(text, path);
  if (entry.ok()) {
    FUZZ_CHECK(entry->path == path);
    FUZZ_CHECK(IsLowerHex64(entry->sha256));
    // CRLF: a path may end with a CR of its own, which the line's CR protects.
    const std::string section = "SHA256:\r\n " + entry->sha256 + " " + std::to_string(entry->size) +
                                " " + entry->path + "\r\n";
    FUZZ_CHECK(SameResult(FindReleaseSha256(section, path), entry));
  } else {
    FUZZ_CHECK(entry.status().code() == Status::Code::kDataLoss);
    FUZZ_CHECK(entry.status().message().starts_with("InRelease has no SHA256 entry for "));
  }

  if (text.find('\r') == std::string_view::npos) {
    std::string crlf;
    crlf.reserve(text.size() * 2);
    for (char c : text) {
      if (c == '\n') crlf.push_back('\r');
      crlf.push_back(c);
    }
    FUZZ_CHECK(CheckClearsignedLayout(crlf).ok() == layout.ok());
    FUZZ_CHECK(SameResult(FindReleaseSha256(crlf, path), entry));
  }
  return 0;
}
