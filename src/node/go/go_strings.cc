#include "node/go/go_strings.h"

#include <cstdint>

#include "common/text.h"
#include "node/go/go_utf8.h"

namespace hotfix::node {
namespace {

// unicode.IsSpace.
bool IsGoSpace(uint32_t r) {
  return (r >= '\t' && r <= '\r') || r == ' ' || r == 0x85 || r == 0xA0 || r == 0x1680 ||
         (r >= 0x2000 && r <= 0x200A) || r == 0x2028 || r == 0x2029 || r == 0x202F || r == 0x205F ||
         r == 0x3000;
}

unsigned char At(std::string_view s, size_t i) { return static_cast<unsigned char>(s[i]); }

// Runes strconv.Quote escapes although they are valid: C1 controls, the non-ASCII spaces and
// the common format characters. (Go's full IsPrint table is not reproduced: unassigned and
// private-use code points are written verbatim here.)
bool IsGoNonPrintable(uint32_t r) {
  return (r >= 0x80 && r <= 0xA0) || r == 0xAD || r == 0x1680 || (r >= 0x2000 && r <= 0x200F) ||
         (r >= 0x2028 && r <= 0x202F) || (r >= 0x205F && r <= 0x206F) || r == 0x3000 ||
         r == 0xFEFF || (r >= 0xFFF9 && r <= 0xFFFB);
}

// Go's one-letter escapes: kShortEscaped[k] is written as a backslash and kShortEscapes[k].
constexpr std::string_view kShortEscaped = "\"\\\a\b\f\n\r\t\v";
constexpr std::string_view kShortEscapes = "\"\\abfnrtv";

// Appends `prefix` then `value` as `digits` lowercase hex digits (Go writes x7f, u00a0).
void AppendHexEscape(const char* prefix, uint32_t value, int digits, std::string* out) {
  out->append(prefix);
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4)
    out->push_back(kLowerHexDigits[(value >> shift) & 0xF]);
}

}  // namespace

std::string_view TrimSpaceLikeGo(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    GoRune r = DecodeRuneLikeGo(s, begin);
    if (!IsGoSpace(r.code)) break;
    begin += r.size;
  }
  size_t end = s.size();
  while (end > begin) {
    GoRune r = DecodeLastRuneLikeGo(s, end);
    if (!IsGoSpace(r.code)) break;
    end -= r.size;
  }
  return s.substr(begin, end - begin);
}

std::string QuoteLikeGo(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = At(s, i);
    if (c >= 0x80) {
      GoRune r = DecodeRuneLikeGo(s, i);
      if (r.size == 1) {
        AppendHexEscape("\\x", c, 2, &out);
      } else if (IsGoNonPrintable(r.code)) {
        const bool wide = r.code > 0xFFFF;
        AppendHexEscape(wide ? "\\U" : "\\u", r.code, wide ? 8 : 4, &out);
      } else {
        out.append(s.substr(i, r.size));
      }
      i += r.size;
      continue;
    }
    if (const size_t k = kShortEscaped.find(static_cast<char>(c)); k != std::string_view::npos) {
      out += '\\';
      out += kShortEscapes[k];
    } else if (c < 0x20 || c == 0x7F) {
      AppendHexEscape("\\x", c, 2, &out);
    } else {
      out.push_back(static_cast<char>(c));
    }
    ++i;
  }
  out += "\"";
  return out;
}

}  // namespace hotfix::node
