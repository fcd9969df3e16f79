// Runs a binary as a child process without a shell (fork + execve): argv and environment
// are passed exactly, stdout/stderr go to files, and the child gets its own process group
// so that killing it also kills anything it started. The destructor stops a child that is
// still running (SIGTERM, then SIGKILL), so a failing test leaves nothing behind; and the
// child gets SIGKILL if the test process dies first (PR_SET_PDEATHSIG, which Linux ties to
// the spawning *thread*: spawn from a thread that outlives the child, e.g. the test's).
// Not thread-safe: use one Subprocess from one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hotfix::testsupport {

class TempDir;

struct SpawnOptions {
  // argv[0] is the binary: a path, or a bare name looked up in PATH.
  std::vector<std::string> argv;
  // Start from this process's environment (true) or an empty one, then apply set/unset.
  bool inherit_env = true;
  std::map<std::string, std::string> env;
  std::vector<std::string> unset_env;
  // Where stdout/stderr go; empty: a private temp file, read back with Stdout()/Stderr().
  std::filesystem::path stdout_path;
  std::filesystem::path stderr_path;
  // Empty: the current directory. stdin is always /dev/null.
  std::filesystem::path working_dir;
};

struct ExitStatus {
  bool exited = false;  // exited normally; exit_code is valid
  int exit_code = -1;
  int term_signal = 0;                     // the signal that killed it, if !exited
  bool timed_out = false;                  // Wait() ran out of time and killed it
  std::chrono::microseconds wall_time{0};  // spawn to reap
  bool success() const { return exited && exit_code == 0; }
  // "exit 3", "signal 9 (timed out)"; for assertion messages.
  std::string ToString() const;
};

class Subprocess {
 public:
  // Spawns at once; throws std::runtime_error if the binary cannot be started.
  explicit Subprocess(SpawnOptions options);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  // The status if the child has exited, without blocking.
  std::optional<ExitStatus> TryWait();
  // Waits up to timeout; on timeout kills the process group and reports timed_out.
  ExitStatus Wait(std::chrono::milliseconds timeout);
  // SIGTERM to the group, up to `grace` for it to exit, then SIGKILL. Idempotent.
  ExitStatus Stop(std::chrono::milliseconds grace = std::chrono::seconds(3));
  // Sends a signal to the whole process group while the child is alive.
  void Signal(int sig);

  std::string Stdout() const;
  std::string Stderr() const;
  const std::filesystem::path& stdout_path() const { return stdout_path_; }
  const std::filesystem::path& stderr_path() const { return stderr_path_; }

 private:
  bool WaitUntil(std::chrono::steady_clock::time_point deadline);
  void Reap(int wait_status);

  std::unique_ptr<TempDir> capture_dir_;
  std::filesystem::path stdout_path_;
  std::filesystem::path stderr_path_;
  pid_t pid_ = -1;
  int pidfd_ = -1;
  std::chrono::steady_clock::time_point started_;
  std::optional<ExitStatus> status_;
};

struct RunResult {
  ExitStatus status;
  std::string stdout_text;
  std::string stderr_text;
};

// Spawn, wait up to timeout (killing it then), and collect its output.
RunResult RunProcess(SpawnOptions options, std::chrono::milliseconds timeout);

}  // namespace hotfix::testsupport
