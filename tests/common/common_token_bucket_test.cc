#include "common/token_bucket.h"

#include <gtest/gtest.h>

namespace hotfix {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(TokenBucketTest, ABurstThenTheRate) {
  const TokenBucket::TimePoint t0{};
  TokenBucket bucket{3, t0};
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bucket.Take(t0, 3, 2)) << i;
  EXPECT_FALSE(bucket.Take(t0, 3, 2));
  EXPECT_FALSE(bucket.Take(t0 + milliseconds(499), 3, 2));  // 0.998 tokens
  EXPECT_TRUE(bucket.Take(t0 + milliseconds(500), 3, 2));
  EXPECT_FALSE(bucket.Take(t0 + milliseconds(500), 3, 2));
  // Idle for long: full again, never more than the burst.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bucket.Take(t0 + seconds(100), 3, 2)) << i;
  EXPECT_FALSE(bucket.Take(t0 + seconds(100), 3, 2));
}

TEST(TokenBucketTest, AClockThatStepsBackRefillsNothing) {
  const TokenBucket::TimePoint t0 = TokenBucket::TimePoint{} + seconds(10);
  TokenBucket bucket{1, t0};
  EXPECT_TRUE(bucket.Take(t0, 1, 1));
  EXPECT_FALSE(bucket.Take(t0 - seconds(5), 1, 1));
  EXPECT_EQ(bucket.refilled, t0);
  EXPECT_TRUE(bucket.Take(t0 + seconds(1), 1, 1));
}

TEST(TokenBucketTest, TokensAddedOtherwiseStopAtTheBurst) {
  const TokenBucket::TimePoint t0{};
  TokenBucket bucket{0, t0};
  bucket.Add(10, 4);
  EXPECT_EQ(bucket.tokens, 4);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(bucket.Take(t0, 4, 0)) << i;
  EXPECT_FALSE(bucket.Take(t0 + seconds(60), 4, 0));  // rate 0: only what is added
}

}  // namespace
}  // namespace hotfix
