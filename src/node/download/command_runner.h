// Running the package manager: argv straight to posix_spawn (never a shell; common/process.h),
// a kill deadline per attempt, and the reference's retry loop (AgentBaker:
// aks-node-controller/hotfix.go retryCommand). CommandRunner is the seam tests fake.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"

namespace hotfix::node {

using Argv = std::vector<std::string>;

// Space-joined, for logs and dry runs (argv is never handed to a shell).
std::string JoinArgv(const Argv& argv);

struct CommandResult {
  // OK when the command ran and exited 0. Otherwise says what happened, in the words of Go's
  // os/exec: "exit status 100", "signal: killed", `exec: "dnf": executable file not found in
  // $PATH`, with "killed after N ms" for a timeout.
  Status status;
  // The process's exit code when it exited on its own, otherwise -1.
  int exit_code = -1;
  // Standard output, when the caller asked for it (at most max_output bytes).
  std::string output;
};

struct RunOptions {
  std::chrono::milliseconds timeout{60000};  // SIGKILL to the command's process group after it
  bool capture_output = false;               // otherwise stdout and stderr are ours
  size_t max_output = 64 * 1024;
  // Set by a signal handler: the running command is killed and the call returns.
  const std::atomic<bool>* cancelled = nullptr;
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // argv[0] is looked up on PATH.
  virtual CommandResult Run(const Argv& argv, const RunOptions& options) = 0;
};

// Spawns each command in its own process group, so that a kill on timeout also reaches what
// it started (apt-get's download methods, dpkg, maintainer scripts).
std::unique_ptr<CommandRunner> NewProcessRunner();

struct RetryPolicy {
  int max_attempts = 5;
  std::chrono::milliseconds backoff{3000};  // between attempts, none after the last
  std::chrono::milliseconds timeout{60000};
  const std::atomic<bool>* cancelled = nullptr;
};

// Runs argv until it succeeds or max_attempts have failed. Each failure is logged as WARN
// "command failed, retrying" (command, args, attempt, maxRetries, error). The final failure
// reads "command <argv> failed after <n> attempts: <last error>" and keeps the last exit code.
// A cancellation stops at once: "command <argv> cancelled".
CommandResult RunWithRetries(CommandRunner& runner, const Argv& argv, const RetryPolicy& policy,
                             Logger& log);

}  // namespace hotfix::node
