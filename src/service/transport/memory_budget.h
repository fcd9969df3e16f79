// What a memory limit buys (docs/SERVICE.md, "Memory"): the process's own tables sized from it,
// a reserve for the process measured at start, a pool for what connections hold beyond their
// idle baseline (connection_memory.h), and a connection cap that charges each connection that
// baseline, as measured (bench/density.sh). So a flood is refused (shed_max_connections,
// memory_over_share) before the kernel's OOM killer ends the process.
//
//   auto limit = ParseByteSize("256Mi");                      // --memory-limit
//   std::optional<uint64_t> cgroup = CgroupMemoryLimit();      // cgroup_limits.h, the default
//   TableSizes tables = SizeTables(limit);                     // before the tables are made
//   ConnectionBudget b = BudgetConnections(*limit, ResidentBytes(), tables);
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix::service {

// What an idle TLS connection with HTTP/2 set up costs the process: 35.8 kB of resident memory
// and 37.5 kB of its cgroup's (with the kernel's socket) in a Release build, measured by
// bench/density.sh (docs/BENCHMARKS.md, "Density"); charged with room to spare.
inline constexpr uint64_t kConnectionBaselineBytes = 40 * 1024;
// Of that, what OpenSSL's and nghttp2's allocations and the output buffer come to for an idle
// connection (the same measurement, through the accounts): each connection's allowance, so an
// idle one charges the pool nothing (connection_memory.h).
inline constexpr uint64_t kConnectionAllowanceBytes = 40 * 1024;
// Beside what the process holds at start and its tables at their caps: a store reload's second
// snapshot, the metrics listener's buffers, malloc's slack.
inline constexpr uint64_t kProcessHeadroomBytes = 8ull << 20;
// The pool of connections' holdings beyond their baseline: an eighth of what is left after the
// reserve, at least this; one peer address may hold an eighth of the pool.
inline constexpr uint64_t kMinPoolBytes = 4ull << 20;
inline constexpr uint64_t kPoolShares = 8;
// Without a memory limit.
inline constexpr uint64_t kUnlimitedPoolBytes = 256ull << 20;
inline constexpr size_t kMinConnections = 16;

// The tables that grow with the fleet, capped from the limit: a 32nd of it for verified
// documents (0.34-0.46 kB each, measured), a 64th each for the reports seen and the rate
// limiter's nodes; each between 1,024 and 100,000 entries; 100,000 without a limit.
struct TableSizes {
  size_t identity_cache_entries = 100000;
  size_t recent_reports = 100000;
  size_t rate_limiter_keys = 100000;
  uint64_t bytes = 0;  // what they hold at their caps
};
inline constexpr uint64_t kIdentityCacheEntryBytes = 512;
inline constexpr uint64_t kRecentReportBytes = 256;
inline constexpr uint64_t kRateLimiterKeyBytes = 192;
TableSizes SizeTables(std::optional<uint64_t> memory_limit);

struct ConnectionBudget {
  uint64_t memory_limit = 0;    // bytes
  uint64_t reserve = 0;         // resident at start + the tables + kProcessHeadroomBytes
  uint64_t pool = 0;            // connections' holdings beyond their baseline
  uint64_t per_connection = 0;  // kConnectionBaselineBytes
  size_t max_connections = 0;   // (memory_limit - reserve - pool) / per_connection
};

// InvalidArgument when the limit leaves room for fewer than kMinConnections connections beside
// the reserve and the least pool, naming the least limit that would do.
StatusOr<ConnectionBudget> BudgetConnections(uint64_t memory_limit, uint64_t resident_now,
                                             const TableSizes& tables);

// "268435456", "256Mi", "1Gi", "512M", "2G", "64Ki", "64k" (Kubernetes' quantity suffixes:
// binary Ki/Mi/Gi/Ti, decimal k/M/G/T). InvalidArgument otherwise, or for 0.
StatusOr<uint64_t> ParseByteSize(std::string_view text);
// 268435456 -> "256Mi"; a value that is not a whole MiB -> its bytes.
std::string FormatByteSize(uint64_t bytes);

// This process's resident set now (/proc/self/statm), bytes; 0 if it cannot be read.
uint64_t ResidentBytes();

}  // namespace hotfix::service
