#include "node/download/version_gate.h"

#include <charconv>

#include "common/text.h"
#include "node/go/go_strings.h"

namespace hotfix::node {
namespace {

// Written by hand: Debian ships no C++ semver library, and the gate must accept exactly what
// Masterminds' regex v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?(-ids)?(\+ids)? accepts, which is looser
// than SemVer 2.0 (leading zeros, missing parts).
bool IsIdentChar(char c) { return IsAsciiAlnum(c) || c == '-'; }

class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool done() const { return pos_ == s_.size(); }
  bool Take(char c) {
    if (done() || s_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  std::string_view TakeWhile(bool (*pred)(char)) {
    size_t start = pos_;
    while (!done() && pred(s_[pos_])) ++pos_;
    return s_.substr(start, pos_ - start);
  }
  // Dot-separated non-empty identifiers; empty result when the first one is missing.
  std::string_view TakeIdentifiers() {
    size_t start = pos_;
    if (TakeWhile(IsIdentChar).empty()) return {};
    while (!done() && s_[pos_] == '.') {
      size_t dot = pos_++;
      if (TakeWhile(IsIdentChar).empty()) {
        pos_ = dot;  // "1.2.3-a." does not match the regex: leave the dot to fail the parse
        break;
      }
    }
    return s_.substr(start, pos_ - start);
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

StatusOr<uint64_t> ParseSegment(std::string_view digits) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return Status::InvalidArgument("version segment " + std::string(digits) + " is out of range");
  }
  return value;
}

bool NumericWithLeadingZero(std::string_view prerelease) {
  size_t start = 0;
  while (start <= prerelease.size()) {
    size_t end = prerelease.find('.', start);
    if (end == std::string_view::npos) end = prerelease.size();
    std::string_view id = prerelease.substr(start, end - start);
    bool numeric = !id.empty();
    for (char c : id) numeric = numeric && IsAsciiDigit(c);
    if (numeric && id.size() > 1 && id[0] == '0') return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

StatusOr<LooseSemver> ParseLooseSemver(std::string_view text) {
  const Status invalid =
      Status::InvalidArgument("version \"" + std::string(text) + "\" is not a semantic version");
  Cursor in(text);
  in.Take('v');
  LooseSemver v;
  std::string_view parts[3];
  parts[0] = in.TakeWhile(IsAsciiDigit);
  if (parts[0].empty()) return invalid;
  for (int i = 1; i < 3 && in.Take('.'); ++i) {
    parts[i] = in.TakeWhile(IsAsciiDigit);
    if (parts[i].empty()) return invalid;
  }
  uint64_t* fields[3] = {&v.major, &v.minor, &v.patch};
  for (int i = 0; i < 3; ++i) {
    if (parts[i].empty()) continue;
    StatusOr<uint64_t> n = ParseSegment(parts[i]);
    if (!n.ok()) return n.status();
    *fields[i] = *n;
  }
  if (in.Take('-')) {
    v.prerelease = std::string(in.TakeIdentifiers());
    if (v.prerelease.empty()) return invalid;
    if (NumericWithLeadingZero(v.prerelease)) {
      return Status::InvalidArgument("version \"" + std::string(text) +
                                     "\": a numeric prerelease identifier starts with 0");
    }
  }
  if (in.Take('+')) {
    v.metadata = std::string(in.TakeIdentifiers());
    if (v.metadata.empty()) return invalid;
  }
  if (!in.done()) return invalid;
  return v;
}

StatusOr<bool> ShouldUpgradeToHotfix(std::string_view current, std::string_view hotfix) {
  StatusOr<LooseSemver> cur = ParseLooseSemver(TrimSpaceLikeGo(current));
  if (!cur.ok()) return cur.status().Annotate("parsing current version");
  StatusOr<LooseSemver> fix = ParseLooseSemver(TrimSpaceLikeGo(hotfix));
  if (!fix.ok()) return fix.status().Annotate("parsing hotfix version");
  return cur->major == fix->major && cur->minor == fix->minor && fix->patch > cur->patch;
}

}  // namespace hotfix::node
