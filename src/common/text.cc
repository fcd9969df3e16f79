#include "common/text.h"

#include <algorithm>

namespace hotfix {

bool IsAsciiName(std::string_view name, size_t max_chars, bool digit_first) {
  if (name.empty() || name.size() > max_chars) return false;
  if (!(IsAsciiAlpha(name[0]) || (digit_first && IsAsciiDigit(name[0])))) return false;
  return std::all_of(name.begin() + 1, name.end(),
                     [](char c) { return IsAsciiAlnum(c) || c == '.' || c == '_' || c == '-'; });
}

int HexDigitValue(char c) {
  if (IsAsciiDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string EscapeForMessage(std::string_view s, size_t max_bytes) {
  std::string out;
  for (char c : s.substr(0, max_bytes)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && c != '"' && c != '\\') {
      out.push_back(c);
    } else {
      out += "\\x";
      out.push_back(kLowerHexDigits[byte >> 4]);
      out.push_back(kLowerHexDigits[byte & 0xf]);
    }
  }
  if (s.size() > max_bytes) out += "...";
  return out;
}

std::string_view TrimBlanks(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return s.substr(s.size());
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

std::vector<std::string_view> SplitOnAny(std::string_view s, bool (*is_separator)(char)) {
  std::vector<std::string_view> pieces;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_separator(s[i])) ++i;
    const size_t start = i;
    while (i < s.size() && !is_separator(s[i])) ++i;
    if (i > start) pieces.push_back(s.substr(start, i - start));
  }
  return pieces;
}

}  // namespace hotfix
