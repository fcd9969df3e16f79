#include "node/go/go_utf8.h"

namespace hotfix::node {
namespace {

unsigned char At(std::string_view s, size_t i) { return static_cast<unsigned char>(s[i]); }

}  // namespace

GoRune DecodeRuneLikeGo(std::string_view s, size_t i) {
  const unsigned char c = At(s, i);
  if (c < 0x80) return {c, 1};
  size_t size = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the valid range of the second byte
  uint32_t code = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    size = 2, code = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    size = 3, code = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    size = 4, code = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return kGoRuneError;
  }
  if (i + size > s.size() || At(s, i + 1) < lo || At(s, i + 1) > hi) return kGoRuneError;
  for (size_t k = 1; k < size; ++k) {
    if (k > 1 && (At(s, i + k) < 0x80 || At(s, i + k) > 0xBF)) return kGoRuneError;
    code = (code << 6) | (At(s, i + k) & 0x3F);
  }
  return {code, size};
}

GoRune DecodeLastRuneLikeGo(std::string_view s, size_t end) {
  if (At(s, end - 1) < 0x80) return {At(s, end - 1), 1};
  const size_t limit = end >= 4 ? end - 4 : 0;
  size_t start = end - 1;
  while (start > limit && (At(s, start) & 0xC0) == 0x80) --start;
  GoRune r = DecodeRuneLikeGo(s, start);
  return start + r.size == end ? r : kGoRuneError;
}

std::string ReplaceInvalidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    GoRune r = DecodeRuneLikeGo(text, i);
    out.append(r.size == 1 && At(text, i) >= 0x80 ? std::string_view(kReplacementChar)
                                                  : text.substr(i, r.size));
    i += r.size;
  }
  return out;
}

}  // namespace hotfix::node
