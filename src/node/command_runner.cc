#include "node/command_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/deadline.h"
#include "common/text.h"
#include "common/unique_fd.h"

extern char** environ;

namespace hotfix::node {
namespace {

bool Cancelled(const std::atomic<bool>* flag) { return flag != nullptr && flag->load(); }

CommandResult Failure(Status status) {
  CommandResult result;
  result.status = std::move(status);
  return result;
}

std::string DescribeWaitStatus(int wstatus, int* exit_code) {
  if (WIFEXITED(wstatus)) {
    *exit_code = WEXITSTATUS(wstatus);
    return "exit status " + std::to_string(*exit_code);
  }
  if (WIFSIGNALED(wstatus)) {
    // Go's wording: "signal: killed", "signal: terminated".
    const char* text = strsignal(WTERMSIG(wstatus));
    return "signal: " + AsciiLower(text != nullptr ? text : std::to_string(WTERMSIG(wstatus)));
  }
  return "wait status " + std::to_string(wstatus);
}

// Reads what is available without blocking; false at EOF or on error.
bool DrainOutput(int fd, size_t max, std::string* out) {
  char buf[4096];
  for (;;) {
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got > 0) {
      size_t room = max - std::min(max, out->size());
      out->append(buf, std::min(static_cast<size_t>(got), room));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    return got < 0 && errno == EAGAIN;
  }
}

class ProcessRunner final : public CommandRunner {
 public:
  CommandResult Run(const Argv& argv, const RunOptions& options) override {
    if (argv.empty() || argv[0].empty()) return Failure(Status::InvalidArgument("empty command"));
    // posix_spawnp reports a missing program only as exit 127 from the child: look it up
    // first so that the error says what is missing.
    if (argv[0].find('/') == std::string::npos && FindOnPath(argv[0]).empty()) {
      return Failure(
          Status::NotFound("exec: \"" + argv[0] + "\": executable file not found in $PATH"));
    }
    UniqueFd out_read, out_write;
    if (options.capture_output) {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) return Failure(Status::FromErrno("pipe", errno));
      out_read.reset(fds[0]);
      out_write.reset(fds[1]);
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (options.capture_output) posix_spawn_file_actions_adddup2(&actions, out_write.get(), 1);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Its own process group (pgid = its pid), and default signal handling whatever ours is.
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    std::vector<char*> cargv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    pid_t pid = -1;
    int err = ::posix_spawnp(&pid, argv[0].c_str(), &actions, &attr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (err != 0) return Failure(Status::FromErrno("exec: \"" + argv[0] + "\"", err));
    out_write.reset();
    // Never block on output: a grandchild may hold the pipe open after the command exits.
    if (options.capture_output) ::fcntl(out_read.get(), F_SETFL, O_NONBLOCK);
    return Wait(pid, options, out_read.get());
  }

 private:
  static CommandResult Wait(pid_t pid, const RunOptions& options, int out_fd) {
    CommandResult result;
    const Deadline deadline = Deadline::After(options.timeout);
    // glibc 2.36 declares pidfd_open without C linkage: call the system call directly.
    const UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    bool killed_for_timeout = false;
    bool killed_for_cancel = false;
    bool output_open = out_fd >= 0;
    for (;;) {
      if (!killed_for_timeout && !killed_for_cancel) {
        killed_for_timeout = deadline.expired();
        killed_for_cancel = !killed_for_timeout && Cancelled(options.cancelled);
        if (killed_for_timeout || killed_for_cancel) ::kill(-pid, SIGKILL);
      }
      pollfd fds[2];
      int n = 0;
      if (pidfd.valid()) fds[n++] = {pidfd.get(), POLLIN, 0};
      if (output_open) fds[n++] = {out_fd, POLLIN, 0};
      // Without a pidfd (old kernels) fall back to polling waitpid every 10 ms.
      int timeout_ms = pidfd.valid() ? std::min(deadline.PollTimeoutMs(), 100) : 10;
      if (killed_for_timeout || killed_for_cancel) timeout_ms = 10;
      if (::poll(fds, static_cast<nfds_t>(n), timeout_ms) < 0 && errno != EINTR) break;
      if (output_open) output_open = DrainOutput(out_fd, options.max_output, &result.output);
      int wstatus = 0;
      pid_t done = ::waitpid(pid, &wstatus, WNOHANG);
      if (done == pid) {
        if (output_open) DrainOutput(out_fd, options.max_output, &result.output);
        std::string what = DescribeWaitStatus(wstatus, &result.exit_code);
        if (killed_for_timeout) {
          result.exit_code = -1;
          result.status =
              Status::DeadlineExceeded("killed after " + std::to_string(options.timeout.count()) +
                                       " ms timeout (" + what + ")");
        } else if (killed_for_cancel) {
          result.exit_code = -1;
          result.status = Status::DeadlineExceeded("cancelled (" + what + ")");
        } else if (!(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)) {
          result.status = Status::IoError(what);
        }
        // The group may outlive its leader; a timed-out command's children go with it.
        if (killed_for_timeout || killed_for_cancel) ::kill(-pid, SIGKILL);
        return result;
      }
    }
    result.status = Status::FromErrno("waiting for command", errno);
    return result;
  }
};

// Sleeps for d unless cancelled first (checked every 50 ms: a signal handler only sets a flag).
bool SleepUnlessCancelled(std::chrono::milliseconds d, const std::atomic<bool>* cancelled) {
  const Deadline until = Deadline::After(d);
  while (!until.expired()) {
    if (Cancelled(cancelled)) return false;
    std::this_thread::sleep_for(std::min(until.remaining(), std::chrono::milliseconds(50)));
  }
  return !Cancelled(cancelled);
}

}  // namespace

std::string JoinArgv(const Argv& argv) {
  std::string joined;
  for (const auto& a : argv) joined += (joined.empty() ? "" : " ") + a;
  return joined;
}

std::unique_ptr<CommandRunner> NewProcessRunner() { return std::make_unique<ProcessRunner>(); }

CommandResult RunWithRetries(CommandRunner& runner, const Argv& argv, const RetryPolicy& policy,
                             Logger& log) {
  RunOptions run;
  run.timeout = policy.timeout;
  run.cancelled = policy.cancelled;
  CommandResult last;
  const auto cancelled = [&] {
    last.status = Status::DeadlineExceeded("command " + JoinArgv(argv) + " cancelled");
    last.exit_code = -1;
    return last;
  };
  const int attempts = std::max(policy.max_attempts, 1);
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    if (Cancelled(policy.cancelled)) return cancelled();
    last = runner.Run(argv, run);
    if (last.status.ok()) return last;
    log.Warn("command failed, retrying",
             {{"command", argv.empty() ? "" : argv[0]},
              {"args", JoinArgv(Argv(argv.begin() + (argv.empty() ? 0 : 1), argv.end()))},
              {"attempt", attempt},
              {"maxRetries", attempts},
              {"error", last.status}});
    if (attempt < attempts && !SleepUnlessCancelled(policy.backoff, policy.cancelled)) {
      return cancelled();
    }
  }
  last.status = last.status.Annotate("command " + JoinArgv(argv) + " failed after " +
                                     std::to_string(attempts) + " attempts");
  return last;
}

std::string FindOnPath(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path_env = std::getenv("PATH");
  std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    start = end + 1;
    if (dir.empty()) continue;  // "." from an empty entry is not trusted for root's tools
    std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

}  // namespace hotfix::node
