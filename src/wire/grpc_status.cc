#include "wire/grpc_status.h"

#include <array>
#include <charconv>

#include "common/text.h"

namespace hotfix::wire {
namespace {

constexpr std::array<std::string_view, 17> kCodeNames = {
    "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
    "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
    "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
    "DataLoss", "Unauthenticated"};

constexpr std::array<std::string_view, 17> kUpperCodeNames = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

}  // namespace

std::string_view GrpcCodeName(GrpcCode code) {
  auto index = static_cast<size_t>(code);
  // Only a cast from a bad integer gets here; grpc-go would print "Code(N)".
  if (index >= kCodeNames.size()) return "Code(out of range)";
  return kCodeNames[index];
}

std::string_view GrpcCodeUpperName(GrpcCode code) {
  auto index = static_cast<size_t>(code);
  if (index >= kUpperCodeNames.size()) return "UNKNOWN";
  return kUpperCodeNames[index];
}

std::optional<GrpcCode> ParseGrpcStatus(std::string_view value) {
  int parsed = -1;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, parsed);
  if (value.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  if (parsed < 0 || parsed > static_cast<int>(GrpcCode::kUnauthenticated)) return std::nullopt;
  return static_cast<GrpcCode>(parsed);
}

GrpcCode GrpcCodeFromHttpStatus(int http_status) {
  switch (http_status) {
    case 400:
      return GrpcCode::kInternal;
    case 401:
      return GrpcCode::kUnauthenticated;
    case 403:
      return GrpcCode::kPermissionDenied;
    case 404:
      return GrpcCode::kUnimplemented;
    case 429:
    case 502:
    case 503:
    case 504:
      return GrpcCode::kUnavailable;
    default:
      return GrpcCode::kUnknown;
  }
}

std::string PercentDecode(std::string_view encoded) {
  std::string out;
  out.reserve(encoded.size());
  for (size_t i = 0; i < encoded.size(); ++i) {
    if (encoded[i] == '%' && i + 2 < encoded.size()) {
      int hi = HexDigitValue(encoded[i + 1]);
      int lo = HexDigitValue(encoded[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(encoded[i]);
  }
  return out;
}

std::string PercentEncode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte <= 0x7e && byte != '%') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kUpperHexDigits[byte >> 4]);
      out.push_back(kUpperHexDigits[byte & 0xf]);
    }
  }
  return out;
}

std::string GrpcStatus::ToString() const {
  std::string text = "code = " + std::string(GrpcCodeName(code));
  if (!message.empty()) text += " desc = " + message;
  return text;
}

}  // namespace hotfix::wire
