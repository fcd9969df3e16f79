// A Logger whose JSON lines a test reads back (header-only: it asserts with gtest, which
// lp_testkit does not link).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/log.h"
#include "temp_dir.h"
#include "text_util.h"

namespace hotfix::unittest {

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
