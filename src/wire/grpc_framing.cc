#include "wire/grpc_framing.h"

#include <algorithm>

namespace hotfix::wire {

std::string FrameGrpcMessage(std::string_view message) {
  std::string out(kGrpcPrefixSize, '\0');
  auto length = static_cast<uint32_t>(message.size());
  for (int i = 0; i < 4; ++i) out[1 + i] = static_cast<char>(length >> (24 - 8 * i));
  out.append(message);
  return out;
}

uint32_t DeclaredGrpcLength(std::string_view prefix) {
  auto byte = [prefix](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(prefix[i])); };
  return (byte(1) << 24) | (byte(2) << 16) | (byte(3) << 8) | byte(4);
}

std::optional<GrpcFrame> ParseUnaryGrpcBody(std::string_view body, FrameError* error) {
  auto fail = [error](FrameError why) -> std::optional<GrpcFrame> {
    *error = why;
    return std::nullopt;
  };
  if (body.size() < kGrpcPrefixSize) return fail(FrameError::kTruncated);
  auto flag = static_cast<uint8_t>(body[0]);
  if (flag > 1) return fail(FrameError::kBadFlag);
  uint64_t declared = DeclaredGrpcLength(body);
  uint64_t available = body.size() - kGrpcPrefixSize;
  if (declared > available) return fail(FrameError::kTruncated);
  if (declared < available) return fail(FrameError::kTrailingBytes);
  return GrpcFrame{flag == 1, body.substr(kGrpcPrefixSize)};
}

std::string EncodeGrpcTimeout(std::chrono::milliseconds timeout) {
  constexpr int64_t kMaxValue = 99999999;
  int64_t ms = std::max<int64_t>(0, timeout.count());
  if (ms <= kMaxValue) return std::to_string(ms) + "m";
  int64_t seconds = (ms + 999) / 1000;
  if (seconds <= kMaxValue) return std::to_string(seconds) + "S";
  return std::to_string(std::min<int64_t>((seconds + 3599) / 3600, kMaxValue)) + "H";
}

std::optional<std::chrono::milliseconds> ParseGrpcTimeout(std::string_view text) {
  if (text.size() < 2 || text.size() > 9) return std::nullopt;
  int64_t value = 0;
  for (char c : text.substr(0, text.size() - 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  constexpr int64_t kNsPerMs = 1000000;
  switch (text.back()) {
    case 'H':
      return std::chrono::milliseconds(value * 3600 * 1000);
    case 'M':
      return std::chrono::milliseconds(value * 60 * 1000);
    case 'S':
      return std::chrono::milliseconds(value * 1000);
    case 'm':
      return std::chrono::milliseconds(value);
    case 'u':
      return std::chrono::milliseconds((value + 999) / 1000);
    case 'n':
      return std::chrono::milliseconds((value + kNsPerMs - 1) / kNsPerMs);
    default:
      return std::nullopt;
  }
}

bool IsGrpcContentType(std::string_view type) {
  constexpr std::string_view kBase = "application/grpc";
  if (type.substr(0, kBase.size()) != kBase) return false;
  return type.size() == kBase.size() || type[kBase.size()] == '+' || type[kBase.size()] == ';';
}

}  // namespace hotfix::wire
