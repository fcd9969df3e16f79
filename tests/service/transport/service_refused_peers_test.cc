#include "service/transport/refused_peers.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace hotfix::service {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using TimePoint = RefusedPeers::TimePoint;

const std::string kNode2("\x7f\x00\x00\x02", 4);  // 127.0.0.2
const std::string kNode3("\x7f\x00\x00\x03", 4);
const TimePoint kStart = TimePoint() + seconds(1000);

// 10.0.0.(t+1)
std::string Address10(int t) { return {'\x0a', '\x00', '\x00', static_cast<char>(t + 1)}; }

RefusedPeers Limit(uint32_t max_refusals, milliseconds window = seconds(10), size_t slots = 64) {
  return RefusedPeers(RefusedPeerLimit{max_refusals, window, slots});
}

TEST(RefusedPeersTest, ShedFromTheLimitUntilTheWindowEnds) {
  RefusedPeers refused = Limit(3);
  refused.Record(kNode2, kStart);
  refused.Record(kNode2, kStart + seconds(1));
  EXPECT_FALSE(refused.Shed(kNode2, kStart + seconds(1))) << "2 refusals of 3";
  refused.Record(kNode2, kStart + seconds(2));
  EXPECT_TRUE(refused.Shed(kNode2, kStart + seconds(2)));
  EXPECT_TRUE(refused.Shed(kNode2, kStart + milliseconds(9999)));
  EXPECT_FALSE(refused.Shed(kNode3, kStart + seconds(2))) << "another address";
  // The window opened at the first refusal: at its end the address is let in again.
  EXPECT_FALSE(refused.Shed(kNode2, kStart + seconds(10)));
}

// While shed, one arrival in admit_one_in (4 by default) is let in: a node that shares the
// address keeps a share of its calls. Deterministic: the 4th, 8th, 12th arrivals.
TEST(RefusedPeersTest, WhileShedOneArrivalInFourIsLetIn) {
  RefusedPeers refused = Limit(3);
  for (int i = 0; i < 3; ++i) refused.Record(kNode2, kStart);
  std::vector<int> let_in;
  for (int arrival = 1; arrival <= 12; ++arrival) {
    if (!refused.Shed(kNode2, kStart + seconds(1))) let_in.push_back(arrival);
  }
  EXPECT_EQ(let_in, (std::vector<int>{4, 8, 12}));
  // A new window starts the count afresh.
  refused.Record(kNode2, kStart + seconds(10));
  EXPECT_FALSE(refused.Shed(kNode2, kStart + seconds(10))) << "1 fault of 3 in the new window";
  RefusedPeers none = RefusedPeers(RefusedPeerLimit{.max_refusals = 1, .admit_one_in = 1});
  none.Record(kNode2, kStart);
  EXPECT_FALSE(none.Shed(kNode2, kStart)) << "admit_one_in 1 lets every arrival in";
}

TEST(RefusedPeersTest, ANewWindowCountsAfresh) {
  RefusedPeers refused = Limit(2);
  refused.Record(kNode2, kStart);
  // The second refusal comes after the first one's window: a window of its own, 1 of 2.
  refused.Record(kNode2, kStart + seconds(11));
  EXPECT_FALSE(refused.Shed(kNode2, kStart + seconds(11)));
  refused.Record(kNode2, kStart + seconds(12));
  EXPECT_TRUE(refused.Shed(kNode2, kStart + seconds(12)));
  EXPECT_FALSE(refused.Shed(kNode2, kStart + seconds(21))) << "that window ends 10 s after 11";
}

TEST(RefusedPeersTest, ZeroNeverSheds) {
  RefusedPeers refused = Limit(0);
  for (int i = 0; i < 100; ++i) refused.Record(kNode2, kStart);
  EXPECT_FALSE(refused.Shed(kNode2, kStart));
}

TEST(RefusedPeersTest, AddressesAreWholeNotPrefixes) {
  RefusedPeers refused = Limit(1);
  // An IPv6 address whose first four bytes are 127.0.0.2's.
  const std::string v6 = kNode2 + std::string(12, '\x01');
  refused.Record(v6, kStart);
  EXPECT_TRUE(refused.Shed(v6, kStart));
  EXPECT_FALSE(refused.Shed(kNode2, kStart));
  refused.Record(kNode3, kStart);
  EXPECT_FALSE(refused.Shed(kNode3.substr(0, 3), kStart));
  // Nothing that is not an address is kept or shed.
  refused.Record("", kStart);
  EXPECT_FALSE(refused.Shed("", kStart));
  const std::string long_key(17, 'x');
  refused.Record(long_key, kStart);
  EXPECT_FALSE(refused.Shed(long_key, kStart));
}

// One slot: each new address takes it. What an address loses is its own count (shed less),
// never an innocent address shed for a refused one's sake.
TEST(RefusedPeersTest, AFullTableForgetsRefusedAddressesAndShedsNoOther) {
  RefusedPeers refused = Limit(2, seconds(10), 1);
  refused.Record(kNode2, kStart);
  refused.Record(kNode2, kStart);
  EXPECT_TRUE(refused.Shed(kNode2, kStart));
  EXPECT_FALSE(refused.Shed(kNode3, kStart)) << "shares the only slot";
  refused.Record(kNode3, kStart);
  EXPECT_FALSE(refused.Shed(kNode2, kStart)) << "its slot was taken: forgotten";
  EXPECT_FALSE(refused.Shed(kNode3, kStart)) << "1 refusal of 2";
}

// Loops record and check at once (TSan build: no race); each address's count is exact.
TEST(RefusedPeersTest, ThreadsRecordAndCheckTogether) {
  RefusedPeers refused = Limit(1000, seconds(10), 4096);
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&refused, t] {
      const std::string mine = Address10(t);
      for (int i = 0; i < 1000; ++i) {
        EXPECT_FALSE(refused.Shed(mine, kStart)) << "shed at " << i;
        refused.Record(mine, kStart);
        refused.Shed(kNode2, kStart);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < 6; ++t) {
    const std::string mine = Address10(t);
    EXPECT_TRUE(refused.Shed(mine, kStart)) << "address " << t;
  }
}

}  // namespace
}  // namespace hotfix::service
