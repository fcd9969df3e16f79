#include "common/log.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

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

// Puts a pipe where stderr was for the test's lifetime; the test reads its other end (or not).
class StderrPipe {
 public:
  StderrPipe() {
    EXPECT_EQ(pipe2(fds_, O_CLOEXEC), 0);
    EXPECT_GT(fcntl(fds_[1], F_SETPIPE_SZ, 4096), 0);  // the least a pipe holds: fills at once
    saved_ = dup(STDERR_FILENO);
    dup2(fds_[1], STDERR_FILENO);
  }
  ~StderrPipe() {
    dup2(saved_, STDERR_FILENO);
    close(saved_);
    close(fds_[0]);
    close(fds_[1]);
  }
  // Reads what the pipe holds until `done` says so or 30 s without a byte pass.
  std::string ReadUntil(const std::function<bool(const std::string&)>& done) {
    std::string text;
    char buf[4096];
    while (!done(text)) {
      pollfd p{fds_[0], POLLIN, 0};
      if (poll(&p, 1, 30000) <= 0) break;
      ssize_t n = read(fds_[0], buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    return text;
  }

 private:
  int fds_[2] = {-1, -1};
  int saved_ = -1;
};

TEST(LogTest, AStderrPipeNobodyReadsNeverStopsTheCaller) {
  StderrPipe pipe;
  const std::string pad(100, 'x');
  constexpr int kLines = 2000;  // ~240 KB: 60 times the pipe, 7 times the queue
  uint64_t dropped = 0;
  {
    Logger log;
    ASSERT_TRUE(log.NeverBlockOnStderr(32 * 1024).ok());
    for (int i = 0; i < kLines; ++i) log.Info("line", {{"n", i}, {"pad", pad}});
    // Every Info() returned with nobody reading: what did not fit was dropped and counted.
    dropped = log.dropped_lines();
    EXPECT_GT(dropped, 0u);
    EXPECT_LT(dropped, static_cast<uint64_t>(kLines));
    // The reader comes back: the queue, then the line that counts what was dropped.
    std::string text = pipe.ReadUntil([](const std::string& t) {
      return t.find("log lines dropped") != std::string::npos && t.back() == '\n';
    });
    std::istringstream in(text);
    int previous = -1;
    uint64_t kept = 0, said_dropped = 0;
    for (std::string line; std::getline(in, line);) {
      auto json = nlohmann::json::parse(line);  // every line whole
      if (json["msg"] == "line") {
        EXPECT_GT(json["n"].get<int>(), previous) << "out of order";
        previous = json["n"].get<int>();
        ++kept;
      } else {
        EXPECT_EQ(json["msg"], "log lines dropped: stderr was not being read");
        EXPECT_EQ(json["level"], "WARN");
        said_dropped = json["dropped"].get<uint64_t>();
      }
    }
    EXPECT_EQ(said_dropped, dropped);
    EXPECT_EQ(kept + dropped, static_cast<uint64_t>(kLines));
    EXPECT_GT(kept, 0u);
  }
}

TEST(LogTest, ALoggerWhoseStderrIsNeverReadStillEnds) {
  StderrPipe pipe;
  Logger log;
  ASSERT_TRUE(log.NeverBlockOnStderr(1 << 20, std::chrono::milliseconds(100)).ok());
  const std::string pad(1000, 'x');
  for (int i = 0; i < 100; ++i) log.Info("line", {{"pad", pad}});
  EXPECT_EQ(log.dropped_lines(), 0u);  // 100 KB: queued, not dropped
  // The destructor gives the queue 100 ms, then ends (a hang here is the failure).
}

TEST(LogTest, AStderrFileIsWrittenAtOnce) {
  testsupport::TempDir dir("log-stderr-file");
  int file = open(dir.File("stderr").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(file, 0);
  int saved = dup(STDERR_FILENO);
  dup2(file, STDERR_FILENO);
  {
    Logger log;
    ASSERT_TRUE(log.NeverBlockOnStderr().ok());
    log.Info("written before Info returns");
    EXPECT_NE(dir.Read("stderr").find("written before Info returns"), std::string::npos);
  }
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(file);
}

// The access log writes its lines without a DOM: its strings must be what the encoder of
// every other line writes, byte for byte.
TEST(LogTest, AppendJsonStringWritesWhatNlohmannWrites) {
  for (const std::string& s :
       {std::string(""), std::string("plain"), std::string("q\"b\\s/"), std::string("\b\f\n\r\t"),
        std::string("\x01\x1f\x7f", 3), std::string("\0nul", 4), std::string("caf\xC3\xA9"),
        std::string("bad \xFF utf-8")}) {
    std::string ours;
    AppendJsonString(&ours, s);
    EXPECT_EQ(ours,
              nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
        << s;
  }
}

TEST(LogTest, AppendLogTimeIsRfc3339WithNanosecondsAndAnOffset) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::seconds(1764806400)) +
                 std::chrono::nanoseconds(5);
  std::string text;
  AppendLogTime(&text, t);
  EXPECT_TRUE(std::regex_match(
      text, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000000005(Z|[+-]\d\d:\d\d))")))
      << text;
  std::string again;
  AppendLogTime(&again, t + std::chrono::nanoseconds(1));
  EXPECT_EQ(again.substr(0, 20), text.substr(0, 20)) << "the same second, its cached text";
  EXPECT_EQ(again.substr(20, 9), "000000006");
}

}  // namespace
}  // namespace hotfix
