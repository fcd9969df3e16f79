#include "node/download/command_runner.h"

#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <deque>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "captured_log.h"

namespace hotfix::node {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testsupport::TempDir;
using unittest::CapturedLog;
using namespace std::chrono_literals;

RunOptions Opts(std::chrono::milliseconds timeout = 30s, bool capture = false) {
  RunOptions o;
  o.timeout = timeout;
  o.capture_output = capture;
  return o;
}

TEST(ProcessRunner, ExitZeroIsOk) {
  auto runner = NewProcessRunner();
  CommandResult r = runner->Run({"true"}, Opts());
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.exit_code, 0);
}

TEST(ProcessRunner, NonZeroExitKeepsTheCodeInGoWords) {
  auto runner = NewProcessRunner();
  CommandResult r = runner->Run({"sh", "-c", "exit 100"}, Opts());
  EXPECT_FALSE(r.status.ok());
  EXPECT_EQ(r.exit_code, 100);
  EXPECT_EQ(r.status.message(), "exit status 100");
}

TEST(ProcessRunner, ArgvIsPassedWithoutAShell) {
  TempDir dir;
  const std::string out = dir.File("argv");
  // Globs, quotes and $ reach the program untouched.
  auto runner = NewProcessRunner();
  CommandResult r = runner->Run(
      {"sh", "-c", "printf '%s\\n' \"$@\" > \"$0\"", out, "pkg=1.2*", "a b", "$HOME", ";"}, Opts());
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(testsupport::ReadFile(out), "pkg=1.2*\na b\n$HOME\n;\n");
}

TEST(ProcessRunner, MissingProgramSaysSo) {
  auto runner = NewProcessRunner();
  CommandResult r = runner->Run({"no-such-program-hotfix"}, Opts());
  EXPECT_EQ(r.status.message(),
            "exec: \"no-such-program-hotfix\": executable file not found in $PATH");
  EXPECT_EQ(r.exit_code, -1);
}

TEST(ProcessRunner, CapturesStdout) {
  auto runner = NewProcessRunner();
  CommandResult r = runner->Run({"printf", "installed\\t1.2.3\\n"}, Opts(30s, true));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.output, "installed\t1.2.3\n");
}

TEST(ProcessRunner, CapturedOutputIsCapped) {
  auto runner = NewProcessRunner();
  RunOptions o = Opts(30s, true);
  o.max_output = 1000;
  CommandResult r = runner->Run({"head", "-c", "1000000", "/dev/zero"}, o);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.output.size(), 1000u);
}

// A hung command is killed at its deadline, and so is what it started (its process group).
// The shell names its child in a file before it waits; a machine too loaded to get that far
// within the deadline is given a doubled one (the kill is what is tested, not the shell's
// speed), so the grandchild is always there to be checked.
TEST(ProcessRunner, KillsAHungCommandAndItsChildrenAtTheDeadline) {
  TempDir dir;
  const std::string pidfile = dir.File("child.pid");
  auto runner = NewProcessRunner();
  std::string pid_text;
  for (auto deadline = 300ms; pid_text.empty() && deadline <= 4800ms; deadline *= 2) {
    const auto start = std::chrono::steady_clock::now();
    CommandResult r =
        runner->Run({"sh", "-c", "sleep 60 & echo $! > \"$0\"; wait", pidfile}, Opts(deadline));
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(r.status.code(), Status::Code::kDeadlineExceeded);
    EXPECT_EQ(r.status.message(),
              "killed after " + std::to_string(deadline.count()) + " ms timeout (signal: killed)");
    EXPECT_EQ(r.exit_code, -1);
    EXPECT_LT(took, deadline + 20s);  // generous: the command alone would take 60 s
    pid_text = testsupport::ReadFile(pidfile);
  }
  ASSERT_FALSE(pid_text.empty()) << "the shell never started its child";
  const pid_t child = std::stoi(pid_text);
  // The grandchild gets SIGKILL too; give the kernel a moment to reap it (init adopts it).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = ::kill(child, 0) != 0;
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(gone) << "grandchild " << child << " survived";
}

TEST(ProcessRunner, CancelKillsTheRunningCommand) {
  std::atomic<bool> cancelled{false};
  RunOptions o = Opts(60s);
  o.cancelled = &cancelled;
  std::thread canceller([&] {
    std::this_thread::sleep_for(200ms);
    cancelled = true;
  });
  auto runner = NewProcessRunner();
  CommandResult r = runner->Run({"sleep", "60"}, o);
  canceller.join();
  EXPECT_THAT(r.status.message(), HasSubstr("cancelled"));
  EXPECT_EQ(r.exit_code, -1);
}

TEST(ProcessRunner, ChildGetsDefaultSignalsAndOurEnvironment) {
  // A handler or ignored SIGTERM in the parent must not leak into the package manager.
  signal(SIGTERM, SIG_IGN);
  setenv("HOTFIX_RUNNER_TEST", "seen", 1);
  auto runner = NewProcessRunner();
  CommandResult r = runner->Run({"sh", "-c", "kill -TERM $$; sleep 5"}, Opts());
  signal(SIGTERM, SIG_DFL);
  EXPECT_EQ(r.status.message(), "signal: terminated");
  CommandResult env =
      runner->Run({"sh", "-c", "printf %s \"$HOTFIX_RUNNER_TEST\""}, Opts(30s, true));
  EXPECT_EQ(env.output, "seen");
}

// A scripted runner: returns the queued results in order and records each argv.
class FakeRunner : public CommandRunner {
 public:
  explicit FakeRunner(std::deque<CommandResult> results) : results_(std::move(results)) {}
  CommandResult Run(const Argv& argv, const RunOptions& options) override {
    calls.push_back(argv);
    timeouts.push_back(options.timeout);
    if (on_run) on_run();
    CommandResult r = results_.front();
    if (results_.size() > 1) results_.pop_front();
    return r;
  }
  std::vector<Argv> calls;
  std::vector<std::chrono::milliseconds> timeouts;
  std::function<void()> on_run;

 private:
  std::deque<CommandResult> results_;
};

CommandResult Exit(int code) {
  CommandResult r;
  r.exit_code = code;
  if (code != 0) r.status = Status::IoError("exit status " + std::to_string(code));
  return r;
}

RetryPolicy FastRetries() {
  RetryPolicy p;
  p.backoff = 1ms;
  p.timeout = 1234ms;
  return p;
}

TEST(RunWithRetries, SuccessOnFirstAttempt) {
  CapturedLog log;
  FakeRunner runner({Exit(0)});
  CommandResult r = RunWithRetries(runner, {"apt-get", "update"}, FastRetries(), log.logger());
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(runner.calls.size(), 1u);
  EXPECT_THAT(runner.timeouts, ElementsAre(1234ms));
  EXPECT_TRUE(log.Lines().empty());
}

TEST(RunWithRetries, SuccessAfterTwoFailures) {
  CapturedLog log;
  FakeRunner runner({Exit(100), Exit(100), Exit(0)});
  CommandResult r = RunWithRetries(runner, {"apt-get", "update"}, FastRetries(), log.logger());
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(runner.calls.size(), 3u);
  auto lines = log.Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["level"], "WARN");
  EXPECT_EQ(lines[0]["msg"], "command failed, retrying");
  EXPECT_EQ(lines[0]["command"], "apt-get");
  EXPECT_EQ(lines[0]["args"], "update");
  EXPECT_EQ(lines[0]["attempt"], 1);
  EXPECT_EQ(lines[1]["attempt"], 2);
  EXPECT_EQ(lines[0]["maxRetries"], 5);
  EXPECT_EQ(lines[0]["error"], "exit status 100");
}

TEST(RunWithRetries, AllAttemptsFailKeepsTheLastExitCode) {
  CapturedLog log;
  FakeRunner runner({Exit(100)});
  CommandResult r =
      RunWithRetries(runner, {"env", "A=b", "apt-get", "install"}, FastRetries(), log.logger());
  EXPECT_EQ(runner.calls.size(), 5u);
  EXPECT_EQ(r.exit_code, 100);
  EXPECT_EQ(r.status.message(),
            "command env A=b apt-get install failed after 5 attempts: exit status 100");
}

TEST(RunWithRetries, WaitsTheBackoffBetweenAttemptsOnly) {
  CapturedLog log;
  FakeRunner runner({Exit(1)});
  RetryPolicy p = FastRetries();
  p.max_attempts = 3;
  p.backoff = 100ms;
  const auto start = std::chrono::steady_clock::now();
  RunWithRetries(runner, {"x"}, p, log.logger());
  // Two pauses (none after the last attempt): at least 200 ms.
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  EXPECT_EQ(runner.calls.size(), 3u);
}

TEST(RunWithRetries, CancelDuringBackoffStopsAtOnce) {
  CapturedLog log;
  std::atomic<bool> cancelled{false};
  FakeRunner runner({Exit(100)});
  runner.on_run = [&] { cancelled = true; };
  RetryPolicy p = FastRetries();
  p.backoff = 60s;
  p.cancelled = &cancelled;
  const auto start = std::chrono::steady_clock::now();
  CommandResult r = RunWithRetries(runner, {"apt-get", "update"}, p, log.logger());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_EQ(runner.calls.size(), 1u);
  EXPECT_EQ(r.status.message(), "command apt-get update cancelled");
}

}  // namespace
}  // namespace hotfix::node
