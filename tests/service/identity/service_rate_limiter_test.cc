#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "service/identity/rate_limiter.h"

namespace hotfix::service {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class FakeClock {
 public:
  SteadyNow Now() {
    return [this] { return now_.load(); };
  }
  void Advance(std::chrono::nanoseconds d) { now_ = now_.load() + d; }

 private:
  std::atomic<std::chrono::steady_clock::time_point> now_{std::chrono::steady_clock::time_point{} +
                                                          std::chrono::hours(1)};
};

// How many requests key gets right now, up to `limit`.
int Drain(RateLimiter& limiter, const std::string& key, int limit = 1000) {
  int allowed = 0;
  while (allowed < limit && limiter.Allow(key)) ++allowed;
  return allowed;
}

TEST(RateLimiterTest, BurstIsOneSecondOfRateThenRefusal) {
  FakeClock clock;
  auto limiter = NewTokenBucketLimiterWithClock(5, 100, clock.Now());
  EXPECT_EQ(Drain(*limiter, "vm-1"), 5);
  EXPECT_FALSE(limiter->Allow("vm-1"));
}

TEST(RateLimiterTest, BurstIsAtLeastOne) {
  FakeClock clock;
  auto limiter = NewTokenBucketLimiterWithClock(0.5, 100, clock.Now());
  EXPECT_EQ(Drain(*limiter, "vm-1"), 1);
  clock.Advance(seconds(1));
  EXPECT_FALSE(limiter->Allow("vm-1"));  // half a token
  clock.Advance(seconds(1));
  EXPECT_TRUE(limiter->Allow("vm-1"));
}

TEST(RateLimiterTest, RefillsWithTimeUpToTheBurst) {
  FakeClock clock;
  auto limiter = NewTokenBucketLimiterWithClock(10, 100, clock.Now());
  EXPECT_EQ(Drain(*limiter, "vm-1"), 10);
  clock.Advance(milliseconds(350));
  EXPECT_EQ(Drain(*limiter, "vm-1"), 3);
  clock.Advance(milliseconds(50));  // 3.5 + 0.5 = the 4th token after the first 3
  EXPECT_EQ(Drain(*limiter, "vm-1"), 1);
  clock.Advance(seconds(60));  // a long wait still gives only one burst
  EXPECT_EQ(Drain(*limiter, "vm-1"), 10);
}

TEST(RateLimiterTest, ClockSteppingBackNeitherRefillsNorDrains) {
  FakeClock clock;
  auto limiter = NewTokenBucketLimiterWithClock(2, 100, clock.Now());
  EXPECT_TRUE(limiter->Allow("vm-1"));
  clock.Advance(-seconds(10));
  EXPECT_EQ(Drain(*limiter, "vm-1"), 1);
}

TEST(RateLimiterTest, KeysAreIndependent) {
  FakeClock clock;
  auto limiter = NewTokenBucketLimiterWithClock(3, 100, clock.Now());
  EXPECT_EQ(Drain(*limiter, "vm-1"), 3);
  EXPECT_EQ(Drain(*limiter, "vm-2"), 3);
  EXPECT_FALSE(limiter->Allow("vm-1"));
  EXPECT_EQ(limiter->tracked_keys(), 2u);
}

TEST(RateLimiterTest, ZeroOrNegativeRateIsUnlimited) {
  for (double rate : {0.0, -1.0}) {
    auto limiter = NewTokenBucketLimiter(rate);
    EXPECT_EQ(Drain(*limiter, "vm-1", 10000), 10000) << rate;
    EXPECT_EQ(limiter->tracked_keys(), 0u);
  }
}

TEST(RateLimiterTest, IdleBucketsAreForgotten) {
  FakeClock clock;
  auto limiter = NewTokenBucketLimiterWithClock(2, 100, clock.Now());
  EXPECT_EQ(Drain(*limiter, "vm-1"), 2);
  clock.Advance(milliseconds(500));
  EXPECT_TRUE(limiter->Allow("vm-2"));
  EXPECT_EQ(limiter->tracked_keys(), 2u);  // vm-1 has refilled only half way
  clock.Advance(milliseconds(600));
  EXPECT_TRUE(limiter->Allow("vm-3"));
  EXPECT_EQ(limiter->tracked_keys(), 2u);  // vm-1 was full again: forgotten
  EXPECT_EQ(Drain(*limiter, "vm-1"), 2);   // and a fresh bucket is the same as the old
}

TEST(RateLimiterTest, TrackedKeysAreBoundedByForgettingTheLeastRecentlyUsed) {
  FakeClock clock;
  auto limiter = NewTokenBucketLimiterWithClock(1, 2, clock.Now());
  EXPECT_TRUE(limiter->Allow("a"));
  EXPECT_TRUE(limiter->Allow("b"));
  EXPECT_TRUE(limiter->Allow("c"));  // a forgotten
  EXPECT_EQ(limiter->tracked_keys(), 2u);
  EXPECT_FALSE(limiter->Allow("c"));
  EXPECT_FALSE(limiter->Allow("b"));  // b and c remembered; c is now the least recent
  EXPECT_TRUE(limiter->Allow("a"));   // a starts afresh, c goes
  EXPECT_FALSE(limiter->Allow("b"));
  EXPECT_TRUE(limiter->Allow("c"));
  EXPECT_EQ(limiter->tracked_keys(), 2u);
}

TEST(RateLimiterTest, ConcurrentCallersShareOneBucket) {
  FakeClock clock;  // frozen: exactly the burst is handed out, whatever the interleaving
  auto limiter = NewTokenBucketLimiterWithClock(50, 100, clock.Now());
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        if (limiter->Allow("vm-1")) ++allowed;
        limiter->Allow("other-" + std::to_string(i % 10));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(allowed.load(), 50);
}

}  // namespace
}  // namespace hotfix::service
