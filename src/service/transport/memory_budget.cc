#include "service/transport/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace hotfix::service {

TableSizes SizeTables(std::optional<uint64_t> memory_limit) {
  TableSizes t;
  if (memory_limit) {
    auto entries = [&](uint64_t share, uint64_t entry_bytes) {
      return static_cast<size_t>(
          std::clamp<uint64_t>(*memory_limit / share / entry_bytes, 1024, 100000));
    };
    t.identity_cache_entries = entries(32, kIdentityCacheEntryBytes);
    t.recent_reports = entries(64, kRecentReportBytes);
    t.rate_limiter_keys = entries(64, kRateLimiterKeyBytes);
  }
  t.bytes = t.identity_cache_entries * kIdentityCacheEntryBytes +
            t.recent_reports * kRecentReportBytes + t.rate_limiter_keys * kRateLimiterKeyBytes;
  return t;
}

StatusOr<ConnectionBudget> BudgetConnections(uint64_t memory_limit, uint64_t resident_now,
                                             const TableSizes& tables) {
  ConnectionBudget b;
  b.memory_limit = memory_limit;
  b.reserve = resident_now + tables.bytes + kProcessHeadroomBytes;
  b.per_connection = kConnectionBaselineBytes;
  const uint64_t least = b.reserve + kMinPoolBytes + kMinConnections * b.per_connection;
  if (memory_limit < least) {
    return Status::InvalidArgument(
        "--memory-limit " + FormatByteSize(memory_limit) + " leaves room for fewer than " +
        std::to_string(kMinConnections) + " connections of " +
        std::to_string(b.per_connection / 1024) + " KiB beside " + std::to_string(b.reserve >> 20) +
        " MiB for the process (" + std::to_string(resident_now >> 20) + " MiB resident now, " +
        std::to_string(tables.bytes >> 20) + " MiB for its tables) and " +
        std::to_string(kMinPoolBytes >> 20) + " MiB for calls; give at least " +
        std::to_string((least + (1 << 20) - 1) >> 20) + "Mi");
  }
  const uint64_t left = memory_limit - b.reserve;
  b.pool = std::max(kMinPoolBytes, left / kPoolShares);
  b.max_connections = static_cast<size_t>((left - b.pool) / b.per_connection);
  return b;
}

StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  struct Suffix {
    std::string_view name;
    uint64_t factor;
  };
  static constexpr Suffix kSuffixes[] = {
      {"Ki", 1ull << 10}, {"Mi", 1ull << 20}, {"Gi", 1ull << 30},   {"Ti", 1ull << 40},
      {"k", 1000ull},     {"M", 1000000ull},  {"G", 1000000000ull}, {"T", 1000000000000ull},
  };
  std::string_view digits = text;
  uint64_t factor = 1;
  for (const Suffix& s : kSuffixes) {
    if (digits.size() > s.name.size() && digits.substr(digits.size() - s.name.size()) == s.name) {
      digits.remove_suffix(s.name.size());
      factor = s.factor;
      break;
    }
  }
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || value == 0 ||
      value > UINT64_MAX / factor) {
    // Appended, not "\"" + std::string(text): GCC 12 at -O2 warns (-Wrestrict) on the
    // latter's inlined memcpy, a false positive (GCC bug 105329).
    std::string message = "\"";
    message.append(text);
    message.append("\": want a size such as 256Mi, 1Gi, 512M or a byte count");
    return Status::InvalidArgument(message);
  }
  return value * factor;
}

std::string FormatByteSize(uint64_t bytes) {
  if (bytes != 0 && bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + "Mi";
  return std::to_string(bytes);
}

uint64_t ResidentBytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace hotfix::service
