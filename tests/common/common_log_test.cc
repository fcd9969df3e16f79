#include "common/log.h"

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace hotfix {
namespace {

TEST(LogTest, LevelsParseInAnyCase) {
  EXPECT_EQ(ParseLogLevel("debug").value(), LogLevel::kDebug);
  EXPECT_EQ(ParseLogLevel("INFO").value(), LogLevel::kInfo);
  EXPECT_EQ(ParseLogLevel("Warn").value(), LogLevel::kWarn);
  EXPECT_EQ(ParseLogLevel("error").value(), LogLevel::kError);
  for (std::string_view bad : {"", "warning", "fatal", "info "}) {
    auto level = ParseLogLevel(bad);
    ASSERT_FALSE(level.ok()) << bad;
    EXPECT_EQ(level.status().code(), Status::Code::kInvalidArgument);
  }
}

TEST(LogTest, LinesBelowTheMinimumLevelAreDropped) {
  testsupport::TempDir dir("log-level");
  Logger log;
  log.set_stderr(false);
  ASSERT_TRUE(log.OpenFile(dir.File("log").string()).ok());
  EXPECT_TRUE(log.Enabled(LogLevel::kInfo));
  EXPECT_FALSE(log.Enabled(LogLevel::kDebug));
  log.set_min_level(LogLevel::kWarn);
  EXPECT_FALSE(log.Enabled(LogLevel::kInfo));
  log.Info("dropped");
  log.Warn("kept warning");
  log.Error("kept error");
  const std::string text = dir.Read("log");
  EXPECT_EQ(text.find("dropped"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("level":"WARN","msg":"kept warning")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("level":"ERROR","msg":"kept error")"), std::string::npos) << text;
}

}  // namespace
}  // namespace hotfix
