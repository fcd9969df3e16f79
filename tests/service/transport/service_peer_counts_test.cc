// PeerCounts: each address its own count, exactly. The case the hashed buckets it replaced
// got wrong: two addresses whose std::hash fell in the same of 4,096 buckets shared one count,
// so an attacker could fill a node's share from an address of its own choosing.
#include "service/transport/peer_counts.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace hotfix::service {
namespace {

std::string Ipv4(uint32_t n) {
  return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                     static_cast<char>(n >> 8), static_cast<char>(n)};
}

TEST(PeerCountsTest, AnAddressThatCollidedInTheOldBucketsHasACountOfItsOwn) {
  const std::string node = Ipv4(0x0a000001);  // 10.0.0.1
  // An address the old table put in the node's bucket (std::hash % 4096).
  const size_t bucket = std::hash<std::string>()(node) % 4096;
  std::string attacker;
  for (uint32_t n = 0xc0000000; attacker.empty(); ++n) {
    if (Ipv4(n) != node && std::hash<std::string>()(Ipv4(n)) % 4096 == bucket) attacker = Ipv4(n);
  }
  PeerCounts counts;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(counts.Admit(attacker, 3));
  EXPECT_FALSE(counts.Admit(attacker, 3)) << "the attacker past its own share";
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(counts.Admit(node, 3)) << "the node's share, whole";
  EXPECT_EQ(counts.Count(attacker), 3u);
  EXPECT_EQ(counts.Count(node), 3u);
  EXPECT_EQ(counts.Addresses(), 2u);
}

TEST(PeerCountsTest, EntriesLeaveWithTheirLastConnection) {
  PeerCounts counts;
  const std::string a = Ipv4(0x0a000002);
  EXPECT_TRUE(counts.Admit(a, 2));
  EXPECT_TRUE(counts.Admit(a, 2));
  EXPECT_FALSE(counts.Admit(a, 2));
  counts.Release(a);
  EXPECT_TRUE(counts.Admit(a, 2));
  counts.Release(a);
  counts.Release(a);
  EXPECT_EQ(counts.Count(a), 0u);
  EXPECT_EQ(counts.Addresses(), 0u) << "no entry kept for an address with nothing open";
  EXPECT_FALSE(counts.Admit(a, 0));
  EXPECT_EQ(counts.Addresses(), 0u);
}

TEST(PeerCountsTest, ManyThreadsNeverPassTheCap) {
  PeerCounts counts;
  const std::string a = Ipv4(0x0a000003);
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) admitted += counts.Admit(a, 100);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 100);
  EXPECT_EQ(counts.Count(a), 100u);
}

}  // namespace
}  // namespace hotfix::service
