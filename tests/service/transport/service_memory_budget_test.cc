#include "service/transport/memory_budget.h"

#include <gtest/gtest.h>

namespace hotfix::service {
namespace {

TEST(MemoryBudgetTest, SizesParseAsKubernetesWritesThem) {
  EXPECT_EQ(ParseByteSize("268435456").value(), 268435456u);
  EXPECT_EQ(ParseByteSize("256Mi").value(), 256ull << 20);
  EXPECT_EQ(ParseByteSize("1Gi").value(), 1ull << 30);
  EXPECT_EQ(ParseByteSize("64Ki").value(), 64ull << 10);
  EXPECT_EQ(ParseByteSize("512M").value(), 512000000u);
  EXPECT_EQ(ParseByteSize("2G").value(), 2000000000u);
  EXPECT_EQ(ParseByteSize("64k").value(), 64000u);
  for (std::string_view bad : {"", "0", "0Mi", "Mi", "256MB", "-1Gi", "1.5Gi", "256 Mi", "256mi",
                               "99999999999999999999", "99999999999Ti"}) {
    auto size = ParseByteSize(bad);
    EXPECT_FALSE(size.ok()) << bad;
  }
  EXPECT_EQ(FormatByteSize(256ull << 20), "256Mi");
  EXPECT_EQ(FormatByteSize(1000), "1000");
}

TEST(MemoryBudgetTest, TablesAreSizedFromTheLimit) {
  const TableSizes unlimited = SizeTables(std::nullopt);
  EXPECT_EQ(unlimited.identity_cache_entries, 100000u);
  EXPECT_EQ(unlimited.recent_reports, 100000u);
  EXPECT_EQ(unlimited.rate_limiter_keys, 100000u);
  const TableSizes small = SizeTables(128ull << 20);
  EXPECT_EQ(small.identity_cache_entries, (128ull << 20) / 32 / kIdentityCacheEntryBytes);
  EXPECT_EQ(small.recent_reports, (128ull << 20) / 64 / kRecentReportBytes);
  EXPECT_EQ(small.rate_limiter_keys, (128ull << 20) / 64 / kRateLimiterKeyBytes);
  EXPECT_EQ(small.bytes, small.identity_cache_entries * kIdentityCacheEntryBytes +
                             small.recent_reports * kRecentReportBytes +
                             small.rate_limiter_keys * kRateLimiterKeyBytes);
  EXPECT_LE(small.bytes, (128ull << 20) / 16);
  EXPECT_EQ(SizeTables(1ull << 20).identity_cache_entries, 1024u) << "never fewer";
  EXPECT_EQ(SizeTables(64ull << 30).identity_cache_entries, 100000u) << "never more";
}

TEST(MemoryBudgetTest, ConnectionsAreChargedTheirBaselineBesideTheReserveAndThePool) {
  const uint64_t limit = 128ull << 20;
  const TableSizes tables = SizeTables(limit);
  auto b = BudgetConnections(limit, 16ull << 20, tables);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->reserve, (16ull << 20) + tables.bytes + kProcessHeadroomBytes);
  EXPECT_EQ(b->pool, (limit - b->reserve) / kPoolShares);
  EXPECT_EQ(b->per_connection, kConnectionBaselineBytes);
  EXPECT_EQ(b->max_connections, (limit - b->reserve - b->pool) / kConnectionBaselineBytes);
  // Issue 31's goal: 2,000 idle TLS connections in 128Mi, as a Release build idles (16 MiB).
  EXPECT_GE(b->max_connections, 2000u);
  // A big process (an ASan build): what it holds is the reserve's start.
  auto big = BudgetConnections(limit, 90ull << 20, tables);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->pool, kMinPoolBytes) << "the least pool";
  EXPECT_LT(big->max_connections, b->max_connections);
  // Too small a limit is refused, naming the least that would do.
  auto small = BudgetConnections(64ull << 20, 60ull << 20, SizeTables(64ull << 20));
  ASSERT_FALSE(small.ok());
  const uint64_t least = (60ull << 20) + SizeTables(64ull << 20).bytes + kProcessHeadroomBytes +
                         kMinPoolBytes + kMinConnections * kConnectionBaselineBytes;
  const uint64_t least_mi = (least + (1 << 20) - 1) >> 20;
  EXPECT_NE(small.status().message().find("give at least " + std::to_string(least_mi) + "Mi"),
            std::string::npos)
      << small.status().message();
  EXPECT_TRUE(BudgetConnections(least_mi << 20, 60ull << 20, SizeTables(64ull << 20)).ok());
}

TEST(ResidentBytesTest, IsThisProcessesResidentSet) {
  const uint64_t rss = ResidentBytes();
  EXPECT_GT(rss, 1u << 20);
  EXPECT_LT(rss, 64ull << 30);
}

}  // namespace

}  // namespace hotfix::service
