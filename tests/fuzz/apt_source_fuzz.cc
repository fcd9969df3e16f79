// microsoft-prod.sources and microsoft-prod.list (download-hotfix's repository fast path):
// ParseDeb822Sources and ParseOneLineSources on the same text. The bytes after the first NUL,
// if any, are the architecture ("amd64" otherwise).
//
// Properties: only kFailedPrecondition refuses; a source's URI, suite and component are
// non-empty tokens without whitespace, and each Signed-By entry an absolute path without commas
// or whitespace; and a source, written back as a deb822 paragraph (or, from the one-line form,
// as a one-line entry), parses to itself.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "node/repository/apt_source.h"

using namespace hotfix;
using namespace hotfix::node::repository;

namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (IsSpace(c)) return false;
  }
  return true;
}

bool Same(const AptSource& a, const AptSource& b) {
  return a.uri == b.uri && a.suite == b.suite && a.component == b.component &&
         a.signed_by == b.signed_by;
}

void CheckSource(const StatusOr<AptSource>& got) {
  if (!got.ok()) {
    FUZZ_CHECK(got.status().code() == Status::Code::kFailedPrecondition);
    FUZZ_CHECK(!got.status().message().empty());
    return;
  }
  FUZZ_CHECK(IsToken(got->uri) && IsToken(got->suite) && IsToken(got->component));
  for (const std::string& path : got->signed_by) {
    FUZZ_CHECK(IsToken(path) && path.front() == '/' && path.find(',') == std::string::npos);
  }
}

std::string Join(const std::vector<std::string>& paths, char separator) {
  std::string out;
  for (const std::string& p : paths) {
    if (!out.empty()) out.push_back(separator);
    out += p;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view text = input.substr(0, input.find('\0'));
  std::string_view arch = text.size() < input.size() ? input.substr(text.size() + 1) : "amd64";
  // An architecture that is one token can be written back into a source.
  const bool plain_arch = IsToken(arch) && arch.find_first_of(",]#") == std::string_view::npos;

  StatusOr<AptSource> deb822 = ParseDeb822Sources(text, arch);
  CheckSource(deb822);
  StatusOr<AptSource> one_line = ParseOneLineSources(text, arch);
  CheckSource(one_line);

  for (const StatusOr<AptSource>* got : {&deb822, &one_line}) {
    if (!got->ok() || !plain_arch) continue;
    std::string paragraph = "Types: deb\nURIs: " + (*got)->uri + "\nSuites: " + (*got)->suite +
                            "\nComponents: " + (*got)->component +
                            "\nArchitectures: " + std::string(arch) + "\n";
    if (!(*got)->signed_by.empty())
      paragraph += "Signed-By: " + Join((*got)->signed_by, ' ') + "\n";
    StatusOr<AptSource> again = ParseDeb822Sources(paragraph, arch);
    FUZZ_CHECK(again.ok() && Same(*again, **got));
  }

  if (one_line.ok() && plain_arch && one_line->uri.front() != '[') {
    // '#' never survives the one-line form's comment rule; ']' inside the group would end it.
    bool writable = true;
    for (const std::string& p : one_line->signed_by) writable &= p.find(']') == std::string::npos;
    if (writable) {
      std::string line = "deb [arch=" + std::string(arch);
      if (!one_line->signed_by.empty()) line += " signed-by=" + Join(one_line->signed_by, ',');
      line += "] " + one_line->uri + " " + one_line->suite + " " + one_line->component + "\n";
      StatusOr<AptSource> again = ParseOneLineSources(line, arch);
      FUZZ_CHECK(again.ok() && Same(*again, *one_line));
    }
  }
  return 0;
}
