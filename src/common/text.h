// Small ASCII text helpers shared by the node, the transport and the service: character
// classes, hex digits, lower-casing, trimming, names, and making untrusted text safe to echo in a
// message. Locale-independent, unlike <cctype>'s.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace hotfix {

constexpr bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }
constexpr bool IsAsciiAlpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
constexpr bool IsAsciiAlnum(char c) { return IsAsciiDigit(c) || IsAsciiAlpha(c); }
// Space and tab: what separates fields on one line of the repository formats.
constexpr bool IsAsciiBlank(char c) { return c == ' ' || c == '\t'; }
// C's isspace in the "C" locale: blanks, line breaks, form feed, vertical tab.
constexpr bool IsAsciiSpace(char c) {
  return IsAsciiBlank(c) || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// The runs of s between separators (no empty pieces): SplitOnAny("a, b,,c", comma-or-space)
// is {"a", "b", "c"}. The views point into s.
std::vector<std::string_view> SplitOnAny(std::string_view s, bool (*is_separator)(char));

// A name of the shape the component and rollout files use: 1 to max_chars characters of
// [A-Za-z0-9._-], the first a letter (or, with digit_first, a letter or a digit).
bool IsAsciiName(std::string_view name, size_t max_chars, bool digit_first);

inline constexpr std::string_view kLowerHexDigits = "0123456789abcdef";
inline constexpr std::string_view kUpperHexDigits = "0123456789ABCDEF";

// The value of a hex digit of either case; -1 for any other character.
int HexDigitValue(char c);

// A-Z to a-z; every other byte (UTF-8 included) unchanged. Locale-independent.
std::string AsciiLower(std::string_view s);

// s without the spaces and tabs it starts and ends with (the node's Go-compatible trim is
// node/go/go_strings.h's TrimSpaceLikeGo, which also trims Unicode spaces).
std::string_view TrimBlanks(std::string_view s);

// Line breaks (CR, LF) as spaces: a message kept to one line of a listing.
std::string OneLine(std::string s);

// Text a peer or caller supplied, made safe to put in an error message or a log line: the
// first max_bytes bytes, each printable ASCII byte (0x20-0x7e) as it is except '"' and '\',
// every other byte (control characters, DEL, non-ASCII, '"', '\') as \xNN with lower-case
// hex, then "..." if anything was cut. Unambiguous, one line, and safe between double quotes.
std::string EscapeForMessage(std::string_view s, size_t max_bytes);

}  // namespace hotfix
