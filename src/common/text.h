// Small ASCII text helpers shared by the node, the transport and the service: hex digits,
// lower-casing, and making untrusted text safe to echo in a message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hotfix {

inline constexpr std::string_view kLowerHexDigits = "0123456789abcdef";
inline constexpr std::string_view kUpperHexDigits = "0123456789ABCDEF";

// The value of a hex digit of either case; -1 for any other character.
int HexDigitValue(char c);

// A-Z to a-z; every other byte (UTF-8 included) unchanged. Locale-independent.
std::string AsciiLower(std::string_view s);

// Text a peer or caller supplied, made safe to put in an error message or a log line: the
// first max_bytes bytes, each printable ASCII byte (0x20-0x7e) as it is except '"' and '\',
// every other byte (control characters, DEL, non-ASCII, '"', '\') as \xNN with lower-case
// hex, then "..." if anything was cut. Unambiguous, one line, and safe between double quotes.
std::string EscapeForMessage(std::string_view s, size_t max_bytes);

}  // namespace hotfix
