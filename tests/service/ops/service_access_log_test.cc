#include "service/ops/access_log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hotfix::service {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(RefusalLogBudgetTest, WritesSoManyASecondAndCountsTheRest) {
  RefusalLogBudget budget(20);
  const steady_clock::time_point start = steady_clock::time_point{} + std::chrono::hours(1);
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

TEST(AccessLogLineTest, RefusedLinesSayHowManyWereNotLogged) {
  AccessLogEntry entry;
  entry.code = "UNAUTHENTICATED";
  entry.refused = true;
  entry.refusals_not_logged = 7;
  const auto now = std::chrono::system_clock::now();
  nlohmann::json refused = nlohmann::json::parse(FormatAccessLogLine(LogLevel::kWarn, entry, now));
  EXPECT_EQ(refused["refusals_not_logged"], 7);
  EXPECT_EQ(refused["level"], "WARN");
  entry.refused = false;
  entry.code = "OK";
  nlohmann::json ok = nlohmann::json::parse(FormatAccessLogLine(LogLevel::kInfo, entry, now));
  EXPECT_FALSE(ok.contains("refusals_not_logged"));
}

}  // namespace
}  // namespace hotfix::service
