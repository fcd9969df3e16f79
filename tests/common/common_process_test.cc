#include "common/process.h"

#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "temp_dir.h"

namespace hotfix {
namespace {

using ::testing::HasSubstr;
using testsupport::TempDir;
using namespace std::chrono_literals;

constexpr size_t kMax = 1 << 20;

ChildExit RunToEnd(const std::vector<std::string>& argv, std::string* out = nullptr,
                   std::string* err = nullptr, size_t max = kMax) {
  SpawnOptions spawn;
  spawn.argv = argv;
  if (out != nullptr) spawn.out = ChildStream::kPipe;
  if (err != nullptr) spawn.err = ChildStream::kPipe;
  StatusOr<Child> child = Child::Spawn(spawn);
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  if (!child.ok()) return {};
  return child->Wait(Deadline::After(30s), nullptr, out, err, max);
}

TEST(FindOnPath, FirstExecutableRegularFile) {
  TempDir a, b;
  a.Write("tool", "x", 0644);  // not executable
  b.Write("tool", "#!/bin/sh\n", 0755);
  const char* old = getenv("PATH");
  const std::string saved = old ? old : "";
  setenv("PATH", (":" + a.path().string() + ":" + b.path().string()).c_str(), 1);
  EXPECT_EQ(FindOnPath("tool"), b.File("tool"));
  EXPECT_EQ(FindOnPath("absent-tool"), "");
  setenv("PATH", saved.c_str(), 1);
}

TEST(ChildTest, AMissingProgramIsNamed) {
  SpawnOptions spawn;
  spawn.argv = {"no-such-tool-anywhere"};
  StatusOr<Child> child = Child::Spawn(spawn);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(child.status().message(),
            "exec: \"no-such-tool-anywhere\": executable file not found in $PATH");
}

TEST(ChildTest, ExitCodesAndSignalsInGoWords) {
  ChildExit ok = RunToEnd({"sh", "-c", "exit 0"});
  EXPECT_TRUE(ok.success());
  EXPECT_EQ(ok.description, "exit status 0");
  ChildExit failed = RunToEnd({"sh", "-c", "exit 100"});
  EXPECT_FALSE(failed.success());
  EXPECT_EQ(failed.exit_code, 100);
  EXPECT_EQ(failed.description, "exit status 100");
  ChildExit signalled = RunToEnd({"sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(signalled.exit_code, -1);
  EXPECT_EQ(signalled.description, "signal: terminated");
}

TEST(ChildTest, PipedOutputIsKeptUpToTheCapAndTheRestDrained) {
  std::string out, err;
  // 1 MiB on stdout, more than a pipe holds: the child would block if the rest were not read.
  ChildExit exit = RunToEnd({"sh", "-c", "head -c 1048576 /dev/zero; echo oops >&2"}, &out, &err,
                            /*max=*/100);
  EXPECT_TRUE(exit.success()) << exit.description;
  EXPECT_EQ(out, std::string(100, '\0'));
  EXPECT_EQ(err, "oops\n");
}

// Dead or a zombie waiting for its new parent to reap it: either way no longer running.
bool NotRunning(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && line.size() > paren + 2 && line[paren + 2] == 'Z';
}

TEST(ChildTest, TheDeadlineKillsTheWholeGroup) {
  TempDir dir;
  const std::string pidfile = dir.File("grandchild.pid").string();
  SpawnOptions spawn;
  // A grandchild in the same group, its pid written before the deadline can pass.
  spawn.argv = {"sh", "-c", "sleep 60 & echo $! > " + pidfile + "; wait"};
  StatusOr<Child> child = Child::Spawn(spawn);
  ASSERT_TRUE(child.ok());
  std::string grandchild;
  for (auto until = std::chrono::steady_clock::now() + 20s;
       grandchild.empty() && std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(10ms)) {
    grandchild = dir.Read("grandchild.pid");
    if (!grandchild.empty() && grandchild.back() != '\n') grandchild.clear();  // half written
  }
  ASSERT_FALSE(grandchild.empty());
  const auto start = std::chrono::steady_clock::now();
  ChildExit exit = child->Wait(Deadline::After(200ms), nullptr, nullptr, nullptr, 0);
  EXPECT_TRUE(exit.killed);
  EXPECT_EQ(exit.exit_code, -1);
  EXPECT_EQ(exit.description, "signal: killed");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  const pid_t pid = std::stoi(grandchild);
  bool gone = false;
  for (auto until = std::chrono::steady_clock::now() + 20s;
       !(gone = NotRunning(pid)) && std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(10ms)) {
  }
  EXPECT_TRUE(gone) << "the grandchild outlived the group's kill";
}

TEST(ChildTest, CancellationKillsIt) {
  SpawnOptions spawn;
  spawn.argv = {"sleep", "60"};
  StatusOr<Child> child = Child::Spawn(spawn);
  ASSERT_TRUE(child.ok());
  std::atomic<bool> cancelled{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(100ms);
    cancelled = true;
  });
  ChildExit exit = child->Wait(Deadline::After(60s), &cancelled, nullptr, nullptr, 0);
  canceller.join();
  EXPECT_TRUE(exit.killed);
}

TEST(ChildTest, DestroyingARunningChildKillsAndReapsIt) {
  pid_t pid = -1;
  {
    SpawnOptions spawn;
    spawn.argv = {"sleep", "60"};
    StatusOr<Child> child = Child::Spawn(spawn);
    ASSERT_TRUE(child.ok());
    pid = child->pid();
  }
  // Reaped: no process (not even a zombie) has that pid any more.
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(ChildTest, ArgumentsReachTheProgramVerbatimWithoutAShell) {
  std::string out;
  ChildExit exit = RunToEnd({"printf", "%s|", "$(echo hi)", "a b", "*"}, &out);
  EXPECT_TRUE(exit.success());
  EXPECT_EQ(out, "$(echo hi)|a b|*|");
}

}  // namespace
}  // namespace hotfix
