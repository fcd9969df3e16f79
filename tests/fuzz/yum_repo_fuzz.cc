// /etc/yum.repos.d (download-hotfix's repository fast path on Azure Linux): the input's
// NUL-separated fields are .repo files for FindMicrosoftYumRepo; the found baseurl, and the
// first field itself, go through SubstituteYumVariables.
//
// Properties: refusals are kFailedPrecondition; a found repository qualifies (its section name
// or a baseurl in its files names ms-oss or microsoft), has a one-token baseurl and only absolute
// local key paths; and a substituted URL has no '$' left and substitutes to itself again.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "node/repository/yum_repo.h"

using namespace hotfix;
using namespace hotfix::node::repository;

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

void CheckSubstitution(std::string_view url, std::string_view releasever,
                       std::string_view basearch) {
  StatusOr<std::string> got = SubstituteYumVariables(url, releasever, basearch);
  if (!got.ok()) {
    FUZZ_CHECK(got.status().code() == Status::Code::kFailedPrecondition);
    return;
  }
  FUZZ_CHECK(got->find('$') == std::string::npos);
  StatusOr<std::string> again = SubstituteYumVariables(*got, releasever, basearch);
  FUZZ_CHECK(again.ok() && *again == *got);
  if (url.find('$') == std::string_view::npos) FUZZ_CHECK(*got == url);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string_view> fields =
      SplitAtNul(std::string_view(reinterpret_cast<const char*>(data), size));
  std::vector<YumRepoFile> files;
  for (size_t i = 0; i < fields.size(); ++i) {
    files.push_back({"/etc/yum.repos.d/" + std::to_string(i) + ".repo", std::string(fields[i])});
  }

  StatusOr<YumRepo> repo = FindMicrosoftYumRepo(files);
  if (!repo.ok()) {
    FUZZ_CHECK(repo.status().code() == Status::Code::kFailedPrecondition);
  } else {
    const std::string name = Lower(repo->section);
    FUZZ_CHECK(!repo->baseurl.empty());
    for (char c : repo->baseurl) FUZZ_CHECK(c != ' ' && c != '\t' && c != '\n');
    // Qualified by its name, or by a baseurl value (of which the result is the first field)
    // in one of the files.
    bool marked = Contains(name, "ms-oss") || Contains(name, "microsoft");
    for (std::string_view file : fields) {
      const std::string text = Lower(file);
      marked = marked || Contains(text, "/ms-oss/") || Contains(text, "/microsoft/");
    }
    FUZZ_CHECK(marked);
    for (const std::string& key : repo->gpgkey_paths) {
      FUZZ_CHECK(!key.empty() && key.front() == '/');
    }
    CheckSubstitution(repo->baseurl, "3.0", "x86_64");
  }

  CheckSubstitution(fields[0], "3.0", "aarch64");
  if (fields.size() >= 3) CheckSubstitution(fields[0], fields[1], fields[2]);
  return 0;
}
