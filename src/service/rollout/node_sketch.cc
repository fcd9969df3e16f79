#include "service/rollout/node_sketch.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/openssl.h"
#include "common/text.h"

namespace hotfix::service {
namespace {

constexpr int kValueBits = 53;  // exact in a double
constexpr int kValueShift = 64 - kValueBits;
constexpr uint64_t kValueLimit = uint64_t{1} << kValueBits;
constexpr uint64_t kRegisterMask = (uint64_t{1} << NodeSketch::kRegisterBits) - 1;
constexpr uint64_t kRankMask = (uint64_t{1} << NodeSketch::kRankBits) - 1;
static_assert(NodeSketch::kRankBits + 1 <= static_cast<int>(kRegisterMask),
              "a rank must fit in a register");

// Ertl's sigma and tau (arXiv:1702.01284, algorithm 6): the corrections for empty and for
// saturated registers that make one formula right from 0 to far past 10^9.
double Sigma(double x) {
  if (x == 1) return std::numeric_limits<double>::infinity();
  double y = 1, z = x, previous;
  do {
    x *= x;
    previous = z;
    z += x * y;
    y += y;
  } while (z != previous);
  return z;
}

double Tau(double x) {
  if (x == 0 || x == 1) return 0;
  double y = 1, z = 1 - x, previous;
  do {
    x = std::sqrt(x);
    previous = z;
    y *= 0.5;
    z -= (1 - x) * (1 - x) * y;
  } while (z != previous);
  return z / 3;
}

std::optional<uint64_t> ParseIndex(std::string_view digits) {
  if (digits.empty() || digits.size() > 4 || (digits.size() > 1 && digits[0] == '0')) {
    return std::nullopt;
  }
  uint64_t n = 0;
  for (char c : digits) {
    if (!IsAsciiDigit(c)) return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

}  // namespace

uint64_t NodeSketch::Hash(std::string_view domain, std::string_view key) {
  std::string text;
  text.reserve(domain.size() + 1 + key.size());
  text.append(domain).append(1, ':').append(key);
  const std::string digest = ossl::Sha256Hex(text);
  uint64_t h = 0;
  for (int i = 0; i < 16; ++i) h = h << 4 | static_cast<uint64_t>(HexDigitValue(digest[i]));
  return h;
}

void NodeSketch::Add(uint64_t hash) { AddValue(hash >> kValueShift); }

// The value keeps the hash's top 53 bits, which hold the register's index (the top 12) and the
// rank bits after it: the registers can be rebuilt from the kept values alone.
void NodeSketch::AddValue(uint64_t value) {
  AddMinValue(value);
  const size_t index = value >> (kValueBits - kIndexBits);
  const uint64_t w = (value >> (kValueBits - kIndexBits - kRankBits)) & kRankMask;
  const int rank = w == 0 ? kRankBits + 1 : __builtin_clzll(w) - (64 - kRankBits) + 1;
  AddRegister(index, static_cast<uint8_t>(rank));
}

void NodeSketch::AddMinValue(uint64_t value) {
  auto at = std::lower_bound(min_values_.begin(), min_values_.end(), value);
  if (at != min_values_.end() && *at == value) return;
  if (min_values_.size() == kMinValues) {
    if (at == min_values_.end()) return;
    min_values_.pop_back();
  }
  min_values_.insert(at, value);
  if (min_values_.size() == kMinValues) saturated_ = true;
}

void NodeSketch::AddRegister(size_t index, uint8_t rank) {
  registers_[index] = std::max(registers_[index], rank);
}

void NodeSketch::Merge(const NodeSketch& other) {
  for (uint64_t v : other.min_values_) AddMinValue(v);
  for (size_t i = 0; i < kRegisters; ++i) AddRegister(i, other.registers_[i]);
  saturated_ = saturated_ || other.saturated_;
}

uint64_t NodeSketch::Count() const {
  if (exact()) return min_values_.size();
  std::array<uint32_t, kRankBits + 2> counts{};
  for (uint8_t r : registers_) ++counts[r];
  const double m = kRegisters;
  double z = m * Tau(1 - counts[kRankBits + 1] / m);
  for (int k = kRankBits; k >= 1; --k) z = 0.5 * (z + counts[k]);
  z += m * Sigma(counts[0] / m);
  const double estimate = m * m / (2 * std::log(2.0) * z);
  return std::max<uint64_t>(kMinValues, static_cast<uint64_t>(std::llround(estimate)));
}

std::vector<NodeSketch::Gauge> NodeSketch::Gauges() const {
  std::vector<Gauge> out;
  if (exact()) {
    for (size_t i = 0; i < min_values_.size(); ++i) {
      out.push_back({"m" + std::to_string(i), min_values_[i]});
    }
    return out;
  }
  for (size_t g = 0; g < kRegisterGauges; ++g) {
    uint64_t packed = 0;
    for (size_t i = 0; i < kRegistersPerGauge && g * kRegistersPerGauge + i < kRegisters; ++i) {
      packed |= uint64_t{registers_[g * kRegistersPerGauge + i]} << (kRegisterBits * i);
    }
    if (packed != 0) out.push_back({"r" + std::to_string(g), packed});
  }
  return out;
}

Status NodeSketch::AddGauge(std::string_view slot, double value) {
  auto bad = [&](const char* why) {
    return Status::InvalidArgument("node sketch slot \"" + EscapeForMessage(slot, 16) +
                                   "\": " + why);
  };
  if (!(value >= 0 && value < static_cast<double>(kValueLimit)) || value != std::floor(value)) {
    return bad("value is not a whole number below 2^53");
  }
  const auto v = static_cast<uint64_t>(value);
  std::optional<uint64_t> index = slot.empty() ? std::nullopt : ParseIndex(slot.substr(1));
  if (!index) return bad("not m<N> or r<N>");
  if (slot[0] == 'm') {
    if (*index >= kExactNodes) return bad("index out of range");
    AddValue(v);
    return Status::Ok();
  }
  if (slot[0] != 'r' || *index >= kRegisterGauges) return bad("not m<N> or r<N> in range");
  // The registers this gauge holds: 13, or fewer for the last gauge; no bit beyond them.
  const size_t first = *index * kRegistersPerGauge;
  const size_t held = std::min(kRegistersPerGauge, kRegisters - first);
  if (v >> (kRegisterBits * held) != 0) return bad("value sets bits past its registers");
  saturated_ = true;  // only a sketch past exact exports its registers
  for (size_t i = 0; i < held; ++i) {
    AddRegister(first + i, static_cast<uint8_t>((v >> (kRegisterBits * i)) & kRegisterMask));
  }
  return Status::Ok();
}

}  // namespace hotfix::service
