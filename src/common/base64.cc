#include "common/base64.h"

#include <openssl/evp.h>

#include <algorithm>

#include "common/text.h"

namespace hotfix {
namespace {

// OpenSSL's block coder takes int lengths; feeding it bounded chunks keeps any input size safe.
// Both are whole quanta: 3 raw bytes per 4 encoded characters.
constexpr size_t kRawChunk = 3 * 16384;
constexpr size_t kEncodedChunk = 4 * 16384;

bool IsAlphabet(unsigned char c) {
  return IsAsciiAlnum(static_cast<char>(c)) || c == '+' || c == '/';
}

bool IsNewline(unsigned char c) { return c == '\n' || c == '\r'; }

Status Corrupt(size_t offset) {
  return Status::InvalidArgument("illegal base64 data at input byte " + std::to_string(offset));
}

size_t SkipNewlines(std::string_view src, size_t si) {
  while (si < src.size() && IsNewline(static_cast<unsigned char>(src[si]))) ++si;
  return si;
}

// The input reduced to alphabet characters plus its '=' padding, ready for OpenSSL.
struct Quanta {
  std::string text;
  size_t padding = 0;
};

// Walks the input quantum by quantum exactly as Go's decodeQuantum does. OpenSSL would accept
// (or reject) different inputs and report no offset, so the validation is Go's own, step for
// step, to get the same verdict and the same "input byte N" in the error.
StatusOr<Quanta> ScanLikeGo(std::string_view src) {
  Quanta out;
  out.text.reserve(src.size());
  size_t si = 0;
  while (si < src.size()) {
    for (int j = 0; j < 4; ++j) {
      if (si == src.size()) {
        if (j == 0) return out;                       // only newlines were left
        return Corrupt(si - static_cast<size_t>(j));  // a partial quantum: padding is required
      }
      const unsigned char in = static_cast<unsigned char>(src[si++]);
      if (IsAlphabet(in)) {
        out.text.push_back(static_cast<char>(in));
        continue;
      }
      if (IsNewline(in)) {
        --j;
        continue;
      }
      if (in != '=' || j < 2) return Corrupt(si - 1);
      if (j == 2) {  // "xx=" needs a second '=', newlines allowed in between
        si = SkipNewlines(src, si);
        if (si == src.size()) return Corrupt(src.size());
        if (src[si] != '=') return Corrupt(si - 1);
        ++si;
      }
      si = SkipNewlines(src, si);
      if (si < src.size()) return Corrupt(si);  // nothing may follow the padding
      out.padding = static_cast<size_t>(4 - j);
      out.text.append(out.padding, '=');
      return out;
    }
  }
  return out;
}

}  // namespace

StatusOr<std::string> DecodeStdBase64(std::string_view encoded) {
  StatusOr<Quanta> quanta = ScanLikeGo(encoded);
  if (!quanta.ok()) return quanta.status();
  const std::string& text = quanta->text;
  std::string out;
  for (size_t off = 0; off < text.size(); off += kEncodedChunk) {
    const size_t len = std::min(kEncodedChunk, text.size() - off);
    const size_t at = out.size();
    out.resize(at + len / 4 * 3);
    // EVP_DecodeBlock reads '=' as a zero sextet and returns the padded length (3 per quantum).
    int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data() + at),
                            reinterpret_cast<const unsigned char*>(text.data() + off),
                            static_cast<int>(len));
    if (n < 0) return Status::Internal("base64: OpenSSL rejected input that passed validation");
  }
  out.resize(out.size() - quanta->padding);
  return out;
}

std::string EncodeStdBase64(std::string_view raw) {
  std::string out;
  for (size_t off = 0; off < raw.size(); off += kRawChunk) {
    const size_t len = std::min(kRawChunk, raw.size() - off);
    const size_t at = out.size();
    out.resize(at + (len + 2) / 3 * 4 + 1);  // EVP_EncodeBlock writes a trailing NUL
    int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data() + at),
                            reinterpret_cast<const unsigned char*>(raw.data() + off),
                            static_cast<int>(len));
    out.resize(at + static_cast<size_t>(n));
  }
  return out;
}

}  // namespace hotfix
