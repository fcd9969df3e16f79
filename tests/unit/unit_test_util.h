// Helpers the unit tests share: a scoped temp folder, whole-file reads, permission bits and a
// Logger whose JSON lines a test reads back. Header-only and free of protobuf, so that unit
// tests (which link the node's lite messages) need not link tests/support.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>

#include "common/log.h"

namespace hotfix::unittest {

class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "unit-test") {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / (std::string(prefix) + "-XXXXXX")).string();
    path_ = ::mkdtemp(tmpl.data());
  }
  // Tests may leave the folder read-only: give it back its write bit before removing it.
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ignored);
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Writes (replaces) a file with explicit permission bits, whatever the umask.
  std::string Write(const std::string& name, const std::string& content, mode_t mode = 0644) const {
    const std::string p = File(name);
    std::ofstream(p, std::ios::binary) << content;
    ::chmod(p.c_str(), mode);
    return p;
  }
  // Entry names, sorted.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) {
      names.push_back(e.path().filename());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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
    std::ifstream in(path_);
    std::vector<nlohmann::json> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
  }
  std::vector<std::string> Messages() const {
    std::vector<std::string> msgs;
    for (const auto& line : Lines()) msgs.push_back(line["msg"]);
    return msgs;
  }

 private:
  TempDir dir_{"captured-log"};
  std::string path_;
  Logger log_;
};

}  // namespace hotfix::unittest
