// Go's unicode/utf8 decoding, which the reference's texts go through (node/go/go_strings.h,
// node/go/go_json.h): what a rune is, and which bytes become U+FFFD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hotfix::node {

struct GoRune {
  uint32_t code;
  size_t size;  // bytes consumed; 1 for an invalid byte
};
inline constexpr GoRune kGoRuneError = {0xFFFD, 1};
inline constexpr char kReplacementChar[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// utf8.DecodeRune of the bytes at s[i] (i < s.size()): no overlongs, no surrogates, nothing
// past U+10FFFF; a bad byte is (U+FFFD, 1).
GoRune DecodeRuneLikeGo(std::string_view s, size_t i);
// utf8.DecodeLastRune: the rune that ends at s[end] (0 < end <= s.size()).
GoRune DecodeLastRuneLikeGo(std::string_view s, size_t end);

// Every byte that does not start a valid UTF-8 sequence becomes U+FFFD, as Go's JSON codec
// does, so that nlohmann (which refuses invalid UTF-8) can encode any string.
std::string ReplaceInvalidUtf8(std::string_view text);

}  // namespace hotfix::node
