#include "node/repository/apt_source.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "common/text.h"

namespace hotfix::node::repository {
namespace {

constexpr size_t kMaxEchoedBytes = 64;

std::vector<std::string_view> Fields(std::string_view s) { return SplitOnAny(s, IsAsciiSpace); }

bool Contains(const std::vector<std::string_view>& tokens, std::string_view want) {
  return std::find(tokens.begin(), tokens.end(), want) != tokens.end();
}

// Calls on_line(line) for each line, without its "\n" and a "\r" before it (CRLF read as LF).
template <typename F>
void ForEachLine(std::string_view text, F on_line) {
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    on_line(line);
  }
}

Status CheckSize(std::string_view text, std::string_view what) {
  if (text.size() <= kMaxAptSourceBytes) return Status::Ok();
  return Status::FailedPrecondition(std::string(what) + " is larger than " +
                                    std::to_string(kMaxAptSourceBytes) + " bytes");
}

// Signed-By's value (deb822) or signed-by='s (one-line): keyring paths separated by commas
// and whitespace. apt also takes fingerprints and, in deb822, an embedded key block; gpgv
// needs keyring files, so anything but an absolute path makes the source unusable here.
StatusOr<std::vector<std::string>> ParseSignedBy(std::string_view value) {
  std::vector<std::string> paths;
  for (std::string_view token :
       SplitOnAny(value, [](char c) { return c == ',' || IsAsciiSpace(c); })) {
    if (token.front() != '/') {
      return Status::FailedPrecondition(
          "APT Signed-By contains unsupported non-path constraint \"" +
          EscapeForMessage(token, kMaxEchoedBytes) + "\"");
    }
    paths.emplace_back(token);
  }
  return paths;
}

// One deb822 paragraph: lower-cased keys to values, continuation lines joined with "\n".
// A repeated key keeps its last value, as a map filled line by line does (apt refuses the
// file; the reference's handling was not seen).
using Paragraph = std::map<std::string, std::string>;

std::string_view Get(const Paragraph& p, const char* key) {
  auto it = p.find(key);
  return it == p.end() ? std::string_view() : std::string_view(it->second);
}

// The source from a paragraph, or nullopt when it does not apply to this node.
StatusOr<std::optional<AptSource>> FromParagraph(const Paragraph& p, std::string_view arch) {
  if (!Contains(Fields(Get(p, "types")), "deb")) return std::optional<AptSource>();
  if (AsciiLower(TrimBlanks(Get(p, "enabled"))) == "no") return std::optional<AptSource>();
  std::vector<std::string_view> arches = Fields(Get(p, "architectures"));
  if (!arches.empty() && !Contains(arches, arch)) return std::optional<AptSource>();
  std::vector<std::string_view> uris = Fields(Get(p, "uris"));
  std::vector<std::string_view> suites = Fields(Get(p, "suites"));
  std::vector<std::string_view> components = Fields(Get(p, "components"));
  if (uris.empty() || suites.empty() || components.empty()) return std::optional<AptSource>();
  StatusOr<std::vector<std::string>> signed_by = ParseSignedBy(Get(p, "signed-by"));
  if (!signed_by.ok()) return signed_by.status();
  return std::optional<AptSource>(AptSource{std::string(uris[0]), std::string(suites[0]),
                                            std::string(components[0]), std::move(*signed_by)});
}

}  // namespace

StatusOr<AptSource> ParseDeb822Sources(std::string_view text, std::string_view arch) {
  if (Status s = CheckSize(text, "APT deb822 source"); !s.ok()) return s;
  // Paragraphs are collected line by line and judged as each ends, so the first usable one
  // wins without splitting the text up front.
  Paragraph paragraph;
  std::string* last_value = nullptr;  // the field a continuation line extends
  std::optional<StatusOr<std::optional<AptSource>>> found;
  auto finish = [&] {
    if (!found.has_value() && !paragraph.empty()) {
      StatusOr<std::optional<AptSource>> got = FromParagraph(paragraph, arch);
      if (!got.ok() || got->has_value()) found = std::move(got);
    }
    paragraph.clear();
    last_value = nullptr;
  };
  ForEachLine(text, [&](std::string_view line) {
    if (found.has_value()) return;
    if (TrimBlanks(line).empty()) {
      finish();
      return;
    }
    if (line.front() == '#') return;
    if (IsAsciiBlank(line.front())) {
      // A continuation before any field has nothing to extend: ignored, as apt would not
      // read it either.
      if (last_value != nullptr) {
        last_value->push_back('\n');
        last_value->append(TrimBlanks(line));
      }
      return;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      last_value = nullptr;
      return;
    }
    std::string& value = paragraph[AsciiLower(TrimBlanks(line.substr(0, colon)))];
    value = std::string(TrimBlanks(line.substr(colon + 1)));
    last_value = &value;
  });
  finish();
  if (!found.has_value()) {
    return Status::FailedPrecondition("APT deb822 source has no usable deb paragraph for " +
                                      EscapeForMessage(arch, kMaxEchoedBytes));
  }
  if (!found->ok()) return found->status();
  return std::move(***found);
}

StatusOr<AptSource> ParseOneLineSources(std::string_view text, std::string_view arch) {
  if (Status s = CheckSize(text, "APT one-line source"); !s.ok()) return s;
  std::optional<StatusOr<AptSource>> found;
  ForEachLine(text, [&](std::string_view line) {
    if (found.has_value()) return;
    line = line.substr(0, line.find('#'));
    std::vector<std::string_view> fields = Fields(line);
    if (fields.size() < 4 || fields[0] != "deb") return;
    size_t next = 1;
    std::vector<std::string_view> arches;
    bool have_arch = false;
    std::string_view signed_by;
    if (fields[1].front() == '[') {
      // "[k=v k2=v2]", "[ k=v ]": the tokens up to the one that ends with ']'.
      std::vector<std::string_view> options;
      bool closed = false;
      for (; next < fields.size() && !closed; ++next) {
        std::string_view token = fields[next];
        if (next == 1) token.remove_prefix(1);
        if (!token.empty() && token.back() == ']') {
          token.remove_suffix(1);
          closed = true;
        }
        if (!token.empty()) options.push_back(token);
      }
      if (!closed) {
        found = Status::FailedPrecondition("APT source option list \"[\" is not closed");
        return;
      }
      for (std::string_view option : options) {
        size_t eq = option.find('=');
        if (eq == std::string_view::npos || eq == 0) {
          found = Status::FailedPrecondition("APT source option \"" +
                                             EscapeForMessage(option, kMaxEchoedBytes) +
                                             "\" is not key=value");
          return;
        }
        std::string_view key = option.substr(0, eq), value = option.substr(eq + 1);
        if (key == "arch") {
          have_arch = true;
          arches = SplitOnAny(value, [](char c) { return c == ','; });
        } else if (key == "signed-by") {
          signed_by = value;
        }
      }
    }
    if (fields.size() - next < 3) return;
    if (have_arch && !Contains(arches, arch)) return;
    StatusOr<std::vector<std::string>> keyrings = ParseSignedBy(signed_by);
    if (!keyrings.ok()) {
      found = keyrings.status();
      return;
    }
    found = AptSource{std::string(fields[next]), std::string(fields[next + 1]),
                      std::string(fields[next + 2]), std::move(*keyrings)};
  });
  if (!found.has_value()) {
    return Status::FailedPrecondition("APT one-line source has no usable deb line for " +
                                      EscapeForMessage(arch, kMaxEchoedBytes));
  }
  return std::move(*found);
}

std::vector<std::string> DefaultMicrosoftKeyrings(const std::string& trusted_dir) {
  constexpr std::string_view kPrefix = "microsoft", kSuffix = ".gpg";
  std::vector<std::string> paths;
  std::error_code ec;
  std::filesystem::directory_iterator it(trusted_dir, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.size() < kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
        !name.ends_with(kSuffix)) {
      continue;
    }
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;  // follows symlinks, as gpgv will
    paths.push_back(it->path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace hotfix::node::repository
