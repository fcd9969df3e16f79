// grpc-status and grpc-message as a server (or anything on the path) sends them:
// ParseGrpcStatus and PercentDecode.
//
// Properties: decoding never grows the text; whatever a conforming server percent-encodes
// (gRPC's rule: bytes outside 0x20..0x7E and '%' itself as %XX) decodes back to the original
// bytes; an accepted grpc-status is a code 0..16.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "wire/grpc_status.h"

using namespace hotfix::wire;

namespace {

// The encoder side of PROTOCOL-HTTP2.md's Percent-Encoded rule, as grpc-go's encodeGrpcMessage.
std::string GrpcPercentEncode(std::string_view raw) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : raw) {
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);

  const std::string decoded = PercentDecode(input);
  FUZZ_CHECK(decoded.size() <= input.size());
  FUZZ_CHECK(PercentDecode(GrpcPercentEncode(input)) == input);

  if (auto code = ParseGrpcStatus(input)) {
    FUZZ_CHECK(static_cast<int>(*code) >= 0 && static_cast<int>(*code) <= 16);
    FUZZ_CHECK(!GrpcCodeName(*code).empty());
  }
  GrpcStatus status{GrpcCode::kUnknown, decoded};
  status.ToString();
  return 0;
}
