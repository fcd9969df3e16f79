// Helpers the node's unit tests share beyond tests/support (lp_testkit): permission bits, and
// a Logger whose JSON lines a test reads back.
#pragma once

#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/log.h"
#include "temp_dir.h"
#include "text_util.h"

namespace hotfix::unittest {

// Permission bits of the path itself (a symlink's own, not its target's).
inline mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// A Logger writing JSON lines to a file the test reads back.
class CapturedLog {
 public:
  CapturedLog() : path_(dir_.File("log.jsonl")) {
    log_.set_stderr(false);
    EXPECT_TRUE(log_.OpenFile(path_).ok());
  }
  Logger& logger() { return log_; }
  std::vector<nlohmann::json> Lines() const {
    return testsupport::JsonLines(dir_.Read("log.jsonl"));
  }
  std::vector<std::string> Messages() const {
    std::vector<std::string> msgs;
    for (const auto& line : Lines()) msgs.push_back(line["msg"]);
    return msgs;
  }

 private:
  testsupport::TempDir dir_{"captured-log"};
  std::string path_;
  Logger log_;
};

}  // namespace hotfix::unittest
