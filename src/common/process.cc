#include "common/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/text.h"

extern char** environ;

namespace hotfix {
namespace {

constexpr int kCancelPollMs = 50;

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

// Reads what is available without blocking, keeping at most max bytes in *out (null: drop it
// all). False at EOF or on an error: the stream is done.
bool Drain(int fd, size_t max, std::string* out) {
  char buf[4096];
  for (;;) {
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got > 0) {
      if (out != nullptr) {
        size_t room = max - std::min(max, out->size());
        out->append(buf, std::min(static_cast<size_t>(got), room));
      }
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    return got < 0 && errno == EAGAIN;
  }
}

// A pipe for one of the child's streams: the child's end is dup2'ed onto `target`, ours kept.
Status AddStream(ChildStream mode, int target, posix_spawn_file_actions_t* actions, UniqueFd* ours,
                 UniqueFd* theirs) {
  if (mode == ChildStream::kInherit) return Status::Ok();
  if (mode == ChildStream::kDiscard) {
    posix_spawn_file_actions_addopen(actions, target, "/dev/null", O_WRONLY, 0);
    return Status::Ok();
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  ours->reset(fds[0]);
  theirs->reset(fds[1]);
  // Never block on output: a grandchild may hold the pipe open after the command exits.
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  posix_spawn_file_actions_adddup2(actions, fds[1], target);
  return Status::Ok();
}

}  // namespace

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

Child::Child(pid_t pid, UniqueFd pidfd, UniqueFd out, UniqueFd err)
    : pid_(pid), pidfd_(std::move(pidfd)), out_(std::move(out)), err_(std::move(err)) {}

Child::Child(Child&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      pidfd_(std::move(other.pidfd_)),
      out_(std::move(other.out_)),
      err_(std::move(other.err_)) {}

Child::~Child() {
  if (pid_ <= 0) return;
  Kill();
  int wstatus = 0;
  while (::waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
}

StatusOr<Child> Child::Spawn(const SpawnOptions& options) {
  const std::vector<std::string>& argv = options.argv;
  if (argv.empty() || argv[0].empty()) return Status::InvalidArgument("empty command");
  const std::string program = FindOnPath(argv[0]);
  if (program.empty()) {
    return Status::NotFound("exec: \"" + argv[0] + "\": executable file not found in $PATH");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  UniqueFd out_read, out_write, err_read, err_write;
  Status streams = AddStream(options.out, 1, &actions, &out_read, &out_write);
  if (streams.ok()) streams = AddStream(options.err, 2, &actions, &err_read, &err_write);
  if (!streams.ok()) {
    posix_spawn_file_actions_destroy(&actions);
    return streams;
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group (pgid = its pid), and default signal handling whatever ours is.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = -1;
  // The resolved path, not argv[0] again: what FindOnPath vetted is what runs.
  int err = ::posix_spawn(&pid, program.c_str(), &actions, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (err != 0) return Status::FromErrno("exec: \"" + argv[0] + "\"", err);
  // glibc 2.36 declares pidfd_open without C linkage: call the system call directly.
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  return Child(pid, std::move(pidfd), std::move(out_read), std::move(err_read));
}

void Child::Kill() {
  if (pid_ > 0) ::kill(-pid_, SIGKILL);
}

ChildExit Child::Wait(Deadline deadline, const std::atomic<bool>* cancelled, std::string* out,
                      std::string* err, size_t max_output) {
  ChildExit exit;
  if (pid_ <= 0) {
    exit.description = "already waited for";
    return exit;
  }
  bool out_open = out_.valid(), err_open = err_.valid();
  for (;;) {
    if (!exit.killed && (deadline.expired() || (cancelled != nullptr && cancelled->load()))) {
      exit.killed = true;
      Kill();
    }
    pollfd fds[3];
    nfds_t n = 0;
    if (pidfd_.valid()) fds[n++] = {pidfd_.get(), POLLIN, 0};
    if (out_open) fds[n++] = {out_.get(), POLLIN, 0};
    if (err_open) fds[n++] = {err_.get(), POLLIN, 0};
    // Without a pidfd (old kernels) waitpid is polled every 10 ms.
    int timeout_ms = pidfd_.valid() ? std::min(deadline.PollTimeoutMs(), kCancelPollMs) : 10;
    if (timeout_ms < 0) timeout_ms = kCancelPollMs;
    if (exit.killed) timeout_ms = 10;
    if (::poll(fds, n, timeout_ms) < 0 && errno != EINTR) {
      exit.description = std::string("waiting for command: ") + std::strerror(errno);
      return exit;
    }
    if (out_open) out_open = Drain(out_.get(), max_output, out);
    if (err_open) err_open = Drain(err_.get(), max_output, err);
    int wstatus = 0;
    if (::waitpid(pid_, &wstatus, WNOHANG) != pid_) continue;
    if (out_open) Drain(out_.get(), max_output, out);
    if (err_open) Drain(err_.get(), max_output, err);
    exit.description = DescribeWaitStatus(wstatus, &exit.exit_code);
    if (exit.killed) {
      exit.exit_code = -1;
      // The group may outlive its leader; a killed command's children go with it.
      Kill();
    }
    pid_ = -1;
    return exit;
  }
}

}  // namespace hotfix
