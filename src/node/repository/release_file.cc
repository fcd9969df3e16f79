#include "node/repository/release_file.h"

#include <charconv>

#include "common/text.h"

namespace hotfix::node::repository {
namespace {

constexpr std::string_view kBeginMessage = "-----BEGIN PGP SIGNED MESSAGE-----";
constexpr std::string_view kBeginSignature = "-----BEGIN PGP SIGNATURE-----";
constexpr std::string_view kEndSignature = "-----END PGP SIGNATURE-----";
constexpr std::string_view kArmorDashes = "-----";
constexpr size_t kMaxEchoedBytes = 256;

// Reads a text line by line; each line without its "\n" and the "\r" before it.
class Lines {
 public:
  explicit Lines(std::string_view text) : rest_(text) {}
  bool Next(std::string_view* line) {
    if (rest_.empty()) return false;
    size_t end = rest_.find('\n');
    *line = rest_.substr(0, end);
    rest_.remove_prefix(end == std::string_view::npos ? rest_.size() : end + 1);
    if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
    ++number_;
    return true;
  }
  size_t number() const { return number_; }
  std::string_view rest() const { return rest_; }

 private:
  std::string_view rest_;
  size_t number_ = 0;
};

// An armor line: GnuPG ignores whitespace after one, so this does too.
bool IsArmorLine(std::string_view line, std::string_view armor) {
  while (!line.empty() && IsAsciiBlank(line.back())) line.remove_suffix(1);
  return line == armor;
}

Status Malformed(const std::string& why) {
  return Status::DataLoss("malformed clear-signed InRelease: " + why);
}

std::string LineName(size_t number) { return "line " + std::to_string(number); }

bool IsHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (HexDigitValue(c) < 0) return false;
  }
  return true;
}

}  // namespace

Status CheckClearsignedLayout(std::string_view file) {
  Lines lines(file);
  std::string_view line;
  if (!lines.Next(&line) || !IsArmorLine(line, kBeginMessage) || !file.starts_with(kBeginMessage)) {
    return Malformed("does not start with " + std::string(kBeginMessage));
  }
  // Armor headers up to the first empty line. A clear-signed message may carry only "Hash:"
  // headers (GnuPG refuses any other as "invalid clearsig header"); RFC 9580 lets it carry none.
  for (;;) {
    if (!lines.Next(&line)) return Malformed("no blank line after the armor headers");
    if (line.empty()) break;
    if (!line.starts_with("Hash: ") || TrimBlanks(line.substr(6)).empty()) {
      return Malformed("armor header on " + LineName(lines.number()) + " is not \"Hash: ...\"");
    }
  }
  // The text: every line that starts with '-' is dash-escaped, so the first that is not must
  // be the signature's armor. Anything else (a second "BEGIN PGP SIGNED MESSAGE", a bare
  // "-----END") means the file is not the one message gpgv will report on.
  for (;;) {
    if (!lines.Next(&line)) return Malformed("no " + std::string(kBeginSignature) + " line");
    if (line.empty() || line.front() != '-') continue;
    if (line.starts_with("- ")) continue;
    if (IsArmorLine(line, kBeginSignature)) break;
    return Malformed("unescaped dash line on " + LineName(lines.number()) + " of the signed text");
  }
  for (;;) {
    if (!lines.Next(&line)) return Malformed("no " + std::string(kEndSignature) + " line");
    if (IsArmorLine(line, kEndSignature)) break;
    if (line.starts_with(kArmorDashes)) {
      return Malformed("unexpected armor line on " + LineName(lines.number()) +
                       " of the signature");
    }
  }
  for (char c : lines.rest()) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
      return Malformed("content after " + std::string(kEndSignature));
    }
  }
  return Status::Ok();
}

StatusOr<ReleaseEntry> FindReleaseSha256(std::string_view signed_text, std::string_view path) {
  auto missing = [&path] {
    return Status::DataLoss("InRelease has no SHA256 entry for " +
                            EscapeForMessage(path, kMaxEchoedBytes));
  };
  Lines lines(signed_text);
  std::string_view line;
  bool in_sha256 = false;
  while (lines.Next(&line)) {
    if (line.empty() || !IsAsciiBlank(line.front())) {
      in_sha256 = line == "SHA256:";
      continue;
    }
    if (!in_sha256) continue;
    std::string_view fields[3];
    size_t count = 0, i = 0;
    while (count <= 3) {
      while (i < line.size() && IsAsciiBlank(line[i])) ++i;
      if (i == line.size()) break;
      size_t start = i;
      while (i < line.size() && !IsAsciiBlank(line[i])) ++i;
      if (count < 3) fields[count] = line.substr(start, i - start);
      ++count;
    }
    if (count != 3 || fields[2] != path) continue;
    // The first line for the path decides: a later one never rescues a malformed first.
    std::string_view hash = fields[0], size_text = fields[1];
    ReleaseEntry entry;
    const char* end = size_text.data() + size_text.size();
    auto [ptr, ec] = std::from_chars(size_text.data(), end, entry.size);
    if (ec != std::errc() || ptr != end || !IsAsciiDigit(size_text.front()) || !IsHex64(hash)) {
      return missing();
    }
    entry.path = std::string(path);
    entry.sha256 = AsciiLower(hash);
    return entry;
  }
  return missing();
}

}  // namespace hotfix::node::repository
