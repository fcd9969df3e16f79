#include "node/repository/yum_repo.h"

#include <map>
#include <optional>
#include <utility>

#include "common/text.h"

namespace hotfix::node::repository {
namespace {

constexpr size_t kMaxEchoedBytes = 256;

// One "[section]" and its keys. A repeated key keeps its last value, as a map filled line by
// line does; a repeated section name starts another section rather than merging into the
// first (each is judged on what it says itself).
struct Section {
  std::string name;
  std::map<std::string, std::string> keys;
  std::string_view Get(const char* key) const {
    auto it = keys.find(key);
    return it == keys.end() ? std::string_view() : std::string_view(it->second);
  }
};

bool Qualifies(const Section& s) {
  std::string name = AsciiLower(s.name);
  std::string baseurl = AsciiLower(s.Get("baseurl"));
  bool microsoft = name.find("ms-oss") != std::string::npos ||
                   name.find("microsoft") != std::string::npos ||
                   baseurl.find("/ms-oss/") != std::string::npos ||
                   baseurl.find("/microsoft/") != std::string::npos;
  return microsoft && s.Get("enabled") != "0";
}

// The section's repository, nullopt to try the next one, or the refusal that ends the search.
StatusOr<std::optional<YumRepo>> FromSection(const Section& s, const std::string& file) {
  if (!Qualifies(s)) return std::optional<YumRepo>();
  YumRepo repo;
  repo.section = s.name;
  for (std::string_view key :
       SplitOnAny(s.Get("gpgkey"), [](char c) { return c == ',' || IsAsciiSpace(c); })) {
    std::string_view path = key;
    if (path.starts_with("file://")) path.remove_prefix(7);
    // A remote key means the repository's owner expects dnf to fetch its trust over the
    // network; gpgv here verifies with local keyrings only, so this path does not apply.
    if (!path.starts_with("/")) {
      return Status::FailedPrecondition(
          "yum repository [" + EscapeForMessage(s.name, kMaxEchoedBytes) + "] in " +
          EscapeForMessage(file, kMaxEchoedBytes) + " has a gpgkey that is not a local file: \"" +
          EscapeForMessage(key, kMaxEchoedBytes) + "\"");
    }
    repo.gpgkey_paths.emplace_back(path);
  }
  std::vector<std::string_view> baseurls = SplitOnAny(s.Get("baseurl"), IsAsciiSpace);
  if (baseurls.empty()) return std::optional<YumRepo>();
  repo.baseurl = std::string(baseurls[0]);
  return std::optional<YumRepo>(std::move(repo));
}

bool IsVariableChar(char c) { return IsAsciiAlnum(c) || c == '_'; }

Status LeftOver(std::string_view baseurl) {
  return Status::FailedPrecondition(
      "yum baseurl \"" + EscapeForMessage(baseurl, kMaxEchoedBytes) +
      "\" has a '$' left after substituting $releasever and $basearch");
}

}  // namespace

StatusOr<YumRepo> FindMicrosoftYumRepo(const std::vector<YumRepoFile>& files) {
  for (const YumRepoFile& file : files) {
    // Sections are judged in file order as each ends. The reference keeps a file's sections
    // in a Go map and so visits them in random order (two qualifying sections in one file
    // give either); file order makes the pick deterministic and is the one a reader expects.
    std::optional<Section> section;
    std::optional<StatusOr<std::optional<YumRepo>>> decided;
    auto finish = [&] {
      if (!section.has_value()) return;
      StatusOr<std::optional<YumRepo>> got = FromSection(*section, file.name);
      if (!got.ok() || got->has_value()) decided = std::move(got);
      section.reset();
    };
    std::string_view text = file.text;
    while (!text.empty() && !decided.has_value()) {
      size_t end = text.find('\n');
      std::string_view line = TrimBlanks(text.substr(0, end));
      text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
      if (!line.empty() && line.back() == '\r') line = TrimBlanks(line.substr(0, line.size() - 1));
      if (line.empty() || line.front() == '#' || line.front() == ';') continue;
      if (line.front() == '[' && line.back() == ']') {
        finish();
        if (decided.has_value()) break;
        section = Section{std::string(TrimBlanks(line.substr(1, line.size() - 2))), {}};
        continue;
      }
      // Keys before any section, and lines without '=' (dnf's indented continuation lines
      // among them: a baseurl's first field and a gpgkey's first line are on the key's line),
      // are not read.
      size_t eq = line.find('=');
      if (!section.has_value() || eq == std::string_view::npos) continue;
      section->keys[AsciiLower(TrimBlanks(line.substr(0, eq)))] =
          std::string(TrimBlanks(line.substr(eq + 1)));
    }
    if (!decided.has_value()) finish();
    if (decided.has_value()) {
      if (!decided->ok()) return decided->status();
      return std::move(***decided);
    }
  }
  return Status::FailedPrecondition(
      "no enabled ms-oss or microsoft yum repository with a baseurl in " +
      std::to_string(files.size()) + " .repo files");
}

StatusOr<std::string> SubstituteYumVariables(std::string_view baseurl, std::string_view releasever,
                                             std::string_view basearch) {
  std::string out;
  out.reserve(baseurl.size());
  size_t i = 0;
  while (i < baseurl.size()) {
    if (baseurl[i] != '$') {
      out.push_back(baseurl[i++]);
      continue;
    }
    std::string_view name;
    size_t after = i + 1;
    if (after < baseurl.size() && baseurl[after] == '{') {
      size_t close = baseurl.find('}', after + 1);
      if (close != std::string_view::npos) {
        name = baseurl.substr(after + 1, close - after - 1);
        after = close + 1;
      }
    } else {
      size_t end = after;
      while (end < baseurl.size() && IsVariableChar(baseurl[end])) ++end;
      name = baseurl.substr(after, end - after);
      after = end;
    }
    // Another variable ($releasever_major, $stream, one of dnf's vars.d), or a value that
    // brings its own '$': the URL dnf would build is not one this path can.
    if (name != "releasever" && name != "basearch") return LeftOver(baseurl);
    std::string_view value = name == "releasever" ? releasever : basearch;
    if (value.find('$') != std::string_view::npos) return LeftOver(baseurl);
    out.append(value);
    i = after;
  }
  return out;
}

}  // namespace hotfix::node::repository
