// The identity cache on its own (src/service/identity/identity_cache.h): lookups, expiry, the
// bound.
#include "service/identity/identity_cache.h"

#include <gtest/gtest.h>

namespace hotfix::service {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using TimePoint = IdentityCache::TimePoint;

const TimePoint kNow = TimePoint() + hours(24 * 365 * 56);

ossl::Sha256Digest DigestOf(uint8_t n) {
  ossl::Sha256Digest d{};
  d.fill(n);
  return d;
}

NodeIdentity Node(const std::string& vm_id) {
  NodeIdentity id;
  id.vm_id = vm_id;
  id.subscription_id = "sub";
  return id;
}

TEST(IdentityCacheTest, FindsWhatWasInsertedAndSaysWhetherItIsStillFresh) {
  IdentityCache cache(10);
  bool fresh = true;
  EXPECT_EQ(cache.Find(DigestOf(1), kNow, &fresh), nullptr);
  cache.Insert(DigestOf(1), Node("a"), kNow + hours(1), kNow);
  auto found = cache.Find(DigestOf(1), kNow + minutes(59), &fresh);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->vm_id, "a");
  EXPECT_TRUE(fresh);
  ASSERT_NE(cache.Find(DigestOf(1), kNow + minutes(61), &fresh), nullptr);
  EXPECT_FALSE(fresh);  // kept, but no longer an identity: the caller answers kExpired
  EXPECT_EQ(cache.size(), 1u);
}

TEST(IdentityCacheTest, ASecondInsertOfTheSameDigestKeepsTheFirst) {
  IdentityCache cache(10);
  cache.Insert(DigestOf(1), Node("first"), kNow + hours(1), kNow);
  cache.Insert(DigestOf(1), Node("second"), kNow + hours(2), kNow);
  bool fresh = false;
  std::shared_ptr<const NodeIdentity> found = cache.Find(DigestOf(1), kNow, &fresh);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->vm_id, "first");
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.evictions(), 0u);
}

TEST(IdentityCacheTest, NeverHoldsMoreThanItsCapacityAndDropsTheOldest) {
  IdentityCache cache(3);
  for (uint8_t i = 1; i <= 5; ++i) cache.Insert(DigestOf(i), Node("n"), kNow + hours(i), kNow);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.evictions(), 2u);
  bool fresh = false;
  EXPECT_EQ(cache.Find(DigestOf(1), kNow, &fresh), nullptr);
  EXPECT_EQ(cache.Find(DigestOf(2), kNow, &fresh), nullptr);
  EXPECT_NE(cache.Find(DigestOf(5), kNow, &fresh), nullptr);
}

TEST(IdentityCacheTest, ExpiredEntriesGoBeforeTheOldestLiveOne) {
  IdentityCache cache(3);
  cache.Insert(DigestOf(1), Node("old-live"), kNow + hours(10), kNow);
  cache.Insert(DigestOf(2), Node("expires-soon"), kNow + minutes(1), kNow);
  cache.Insert(DigestOf(3), Node("live"), kNow + hours(10), kNow);
  // At kNow + 2 min the second has expired: it goes, the oldest live one stays.
  cache.Insert(DigestOf(4), Node("new"), kNow + hours(10), kNow + minutes(2));
  bool fresh = false;
  EXPECT_NE(cache.Find(DigestOf(1), kNow, &fresh), nullptr);
  EXPECT_EQ(cache.Find(DigestOf(2), kNow, &fresh), nullptr);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.evictions(), 1u);
}

TEST(IdentityCacheTest, ZeroCapacityStillHoldsOne) {
  IdentityCache cache(0);
  cache.Insert(DigestOf(1), Node("a"), kNow + hours(1), kNow);
  cache.Insert(DigestOf(2), Node("b"), kNow + hours(1), kNow);
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace hotfix::service
