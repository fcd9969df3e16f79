#include "service/ops/access_log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hotfix::service {
namespace {

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
