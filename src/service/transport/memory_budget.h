// How many connections a memory limit admits. Every connection a peer opens can be made to hold its
// worst case (H2Limits: every stream at its header-list and message caps, nghttp2's buffer for one
// header field, the output a peer leaves unread, OpenSSL's record buffers), so the connection cap
// is what fits beside the process's own needs: the process then refuses connections
// (shed_max_connections) before the kernel's OOM killer ends it (docs/SERVICE.md, "Limits").
//
//   auto limit = ParseByteSize("256Mi");                      // --memory-limit
//   std::optional<uint64_t> cgroup = CgroupMemoryLimit();      // the default
//   ConnectionBudget b = BudgetConnections(*limit, ResidentBytes(), H2Limits{});
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "service/transport/h2_session.h"

namespace hotfix::service {

// What one connection may hold at most besides its streams: OpenSSL's object and its two
// record buffers while busy (about 34 KiB), nghttp2's session and HPACK tables (4 KiB each
// way), with room to spare; measured by the flood in tests/integration/service_attack_test.cc.
inline constexpr uint64_t kConnectionOverheadBytes = 48 * 1024;
// nghttp2 buffers one header field while it decodes it; its HPACK limit is 64 KiB
// (nghttp2_hd.c, NGHTTP2_HD_MAX_NV).
inline constexpr uint64_t kHeaderFieldBufferBytes = 64 * 1024;
// Output queued for a peer that does not read (grpc_server.cc pauses reading past it).
inline constexpr uint64_t kMaxPendingOutputBytes = 64 * 1024;
// Kept back from the limit for the process itself at least: code and libraries, the identity cache
// at its 100,000 entries (about 30 MiB), the recent reports at theirs (about 10 MiB), two store
// snapshots during a reload, the metrics server. A Release build idles at about 20 MiB resident.
inline constexpr uint64_t kMinProcessReserveBytes = 96ull << 20;
// Beside what the process already holds when the budget is made (an ASan build idles at
// about 80 MiB): the caches above at their caps.
inline constexpr uint64_t kProcessHeadroomBytes = 64ull << 20;

// The worst case of one connection under `limits`.
uint64_t WorstCaseConnectionBytes(const H2Limits& limits);

struct ConnectionBudget {
  uint64_t memory_limit = 0;    // bytes
  uint64_t reserve = 0;         // kept back for the process
  uint64_t per_connection = 0;  // WorstCaseConnectionBytes
  size_t max_connections = 0;   // (memory_limit - reserve) / per_connection
};

// The reserve is the larger of kMinProcessReserveBytes and resident_now +
// kProcessHeadroomBytes. InvalidArgument when the limit leaves room for fewer than
// kMinConnections connections, naming the least limit that would do.
inline constexpr size_t kMinConnections = 16;
StatusOr<ConnectionBudget> BudgetConnections(uint64_t memory_limit, uint64_t resident_now,
                                             const H2Limits& limits);

// The request bytes every connection's streams may keep at once (kept_bytes_budget.h): a
// quarter of what the connections may use, (memory_limit - reserve) / 4, so that a flood that
// fills every stream at its caps still leaves the rest to TLS, output and the process;
// kDefaultKeptBytesBudget without a memory limit. Nodes keep about 5 KiB per call.
inline constexpr uint64_t kDefaultKeptBytesBudget = 256ull << 20;
uint64_t KeptBytesBudgetFor(const std::optional<ConnectionBudget>& budget);

// "268435456", "256Mi", "1Gi", "512M", "2G", "64Ki", "64k" (Kubernetes' quantity suffixes:
// binary Ki/Mi/Gi/Ti, decimal k/M/G/T). InvalidArgument otherwise, or for 0.
StatusOr<uint64_t> ParseByteSize(std::string_view text);
// 268435456 -> "256Mi"; a value that is not a whole MiB -> its bytes.
std::string FormatByteSize(uint64_t bytes);

// The memory limit of the cgroup this process is in: cgroup v2's memory.max or v1's
// memory.limit_in_bytes, looked up under cgroup_root by the path in proc_self_cgroup, then at
// cgroup_root itself (a container sees its own cgroup there). nullopt when there is no limit
// ("max", or v1's page-rounded 2^63) or nothing can be read.
std::optional<uint64_t> CgroupMemoryLimit(const std::string& proc_self_cgroup = "/proc/self/cgroup",
                                          const std::string& cgroup_root = "/sys/fs/cgroup");

// This process's resident set now (/proc/self/statm), bytes; 0 if it cannot be read.
uint64_t ResidentBytes();

}  // namespace hotfix::service
