#include "common/log_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace hotfix {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

const steady_clock::time_point kStart = steady_clock::time_point{} + std::chrono::hours(1);

TEST(LogBudgetTest, WritesSoManyAWindowAndCountsTheRest) {
  LogBudget budget(20, std::chrono::seconds(1));
  const steady_clock::time_point start = kStart;
  uint64_t not_logged = 99;
  int admitted = 0;
  for (int i = 0; i < 100; ++i) admitted += budget.Admit(start + milliseconds(i), &not_logged);
  EXPECT_EQ(admitted, 20);
  EXPECT_EQ(not_logged, 0u);  // the last admitted line had nothing to report
  // The next second: the first line says how many were not written.
  ASSERT_TRUE(budget.Admit(start + milliseconds(1000), &not_logged));
  EXPECT_EQ(not_logged, 80u);
  ASSERT_TRUE(budget.Admit(start + milliseconds(1001), &not_logged));
  EXPECT_EQ(not_logged, 0u);
}

// The transport's events: one line per kind per 10 s.
TEST(LogBudgetTest, OneLineATenSecondWindow) {
  LogBudget budget(1, seconds(10));
  uint64_t not_logged = 99;
  ASSERT_TRUE(budget.Admit(kStart, &not_logged));
  EXPECT_EQ(not_logged, 0u);
  EXPECT_FALSE(budget.Admit(kStart + seconds(1), &not_logged));
  EXPECT_FALSE(budget.Admit(kStart + milliseconds(9999), &not_logged));
  ASSERT_TRUE(budget.Admit(kStart + seconds(10), &not_logged));
  EXPECT_EQ(not_logged, 2u);
}

// Lock-free under threads (the TSan build): in one window, the lines admitted are the budget's,
// give or take the one each racer may get at the window's opening; none is lost from the count.
TEST(LogBudgetTest, ThreadsShareOneWindow) {
  constexpr int kThreads = 4, kEach = 500;
  LogBudget budget(20, seconds(1));
  std::atomic<int> admitted{0};
  std::atomic<uint64_t> reported{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        uint64_t not_logged = 0;
        if (budget.Admit(kStart, &not_logged)) {
          admitted.fetch_add(1);
          reported.fetch_add(not_logged);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GE(admitted.load(), 20);
  EXPECT_LE(admitted.load(), 20 + kThreads);
  uint64_t rest = 0;
  ASSERT_TRUE(budget.Admit(kStart + seconds(1), &rest));
  EXPECT_EQ(reported.load() + rest, static_cast<uint64_t>(kThreads * kEach - admitted.load()));
}

}  // namespace
}  // namespace hotfix
