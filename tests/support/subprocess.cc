#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "temp_dir.h"
#include "text_util.h"

extern char** environ;

namespace hotfix::testsupport {
namespace {

std::vector<std::string> BuildEnvironment(const SpawnOptions& options) {
  std::map<std::string, std::string> merged;
  if (options.inherit_env) {
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry(*e);
      size_t eq = entry.find('=');
      if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
  }
  for (const auto& [key, value] : options.env) merged[key] = value;
  for (const auto& key : options.unset_env) merged.erase(key);
  std::vector<std::string> out;
  for (const auto& [key, value] : merged) out.push_back(key + "=" + value);
  return out;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// PATH lookup happens here, before fork: the child may only make async-signal-safe calls.
std::string ResolveBinary(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return name;  // execve fails with ENOENT and the parent reports it
}

// Everything the child needs, prepared before fork.
struct ChildPlan {
  std::string binary;
  std::vector<char*> argv;
  std::vector<char*> envp;
  const char* stdout_path;
  const char* stderr_path;
  const char* working_dir;  // nullptr: stay
  pid_t parent;
  int error_pipe;  // write end, close-on-exec: EOF in the parent means exec succeeded
};

// Runs in the forked child: only async-signal-safe calls, then exec. Never returns.
[[noreturn]] void RunChild(const ChildPlan& plan) {
  // Die with the test process even if it crashes before its destructors run.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != plan.parent) _exit(127);
  setpgid(0, 0);  // own group: Stop() signals the whole tree
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // SIGKILL etc. just fail
  // Inherited descriptors (a fixture's listening socket, say) would keep ports busy after
  // the test; close all but the error pipe. Older kernels without close_range keep them.
  close_range(3, static_cast<unsigned>(plan.error_pipe) - 1, 0);
  close_range(static_cast<unsigned>(plan.error_pipe) + 1, ~0U, 0);
  int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int out = open(plan.stdout_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = open(plan.stderr_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = in >= 0 && out >= 0 && err >= 0 && dup2(in, 0) == 0 && dup2(out, 1) == 1 &&
            dup2(err, 2) == 2 && (!plan.working_dir || chdir(plan.working_dir) == 0);
  if (ok) execve(plan.binary.c_str(), plan.argv.data(), plan.envp.data());
  int e = errno;
  if (write(plan.error_pipe, &e, sizeof(e)) < 0) {
    // Nothing left to report to.
  }
  _exit(127);
}

}  // namespace

std::string ExitStatus::ToString() const {
  std::string text =
      exited ? "exit " + std::to_string(exit_code) : "signal " + std::to_string(term_signal);
  if (timed_out) text += " (timed out)";
  return text;
}

Subprocess::Subprocess(SpawnOptions options) {
  if (options.argv.empty()) throw std::runtime_error("Subprocess: empty argv");
  stdout_path_ = options.stdout_path;
  stderr_path_ = options.stderr_path;
  if (stdout_path_.empty() || stderr_path_.empty()) {
    capture_dir_ = std::make_unique<TempDir>("lp-proc");
    if (stdout_path_.empty()) stdout_path_ = capture_dir_->File("stdout");
    if (stderr_path_.empty()) stderr_path_ = capture_dir_->File("stderr");
  }
  std::vector<std::string> env = BuildEnvironment(options);
  std::vector<std::string> args = options.argv;
  ChildPlan plan{ResolveBinary(args[0]),
                 CStrings(args),
                 CStrings(env),
                 stdout_path_.c_str(),
                 stderr_path_.c_str(),
                 options.working_dir.empty() ? nullptr : options.working_dir.c_str(),
                 getpid(),
                 -1};
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  plan.error_pipe = pipe_fds[1];
  started_ = std::chrono::steady_clock::now();
  pid_ = fork();
  if (pid_ == 0) RunChild(plan);
  close(pipe_fds[1]);
  int child_errno = 0;
  ssize_t n = pid_ > 0 ? read(pipe_fds[0], &child_errno, sizeof(child_errno)) : 0;
  close(pipe_fds[0]);
  if (pid_ < 0 || n > 0) {
    std::string why = std::strerror(pid_ < 0 ? errno : child_errno);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
    pid_ = -1;
    throw std::runtime_error("spawning " + options.argv[0] + ": " + why);
  }
  // A pidfd lets Wait() sleep in poll() instead of polling waitpid; older kernels lack it.
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
}

Subprocess::~Subprocess() {
  Stop();
  if (pidfd_ >= 0) close(pidfd_);
}

void Subprocess::Reap(int wait_status) {
  ExitStatus status;
  status.wall_time = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - started_);
  status.exited = WIFEXITED(wait_status);
  status.exit_code = status.exited ? WEXITSTATUS(wait_status) : -1;
  status.term_signal = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
  status_ = status;
  // Grandchildren left in the group must not outlive the test. The group id cannot have
  // been reused while any member is alive, so this reaches only our own processes.
  kill(-pid_, SIGKILL);
}

std::optional<ExitStatus> Subprocess::TryWait() {
  if (status_ || pid_ < 0) return status_;
  int wait_status = 0;
  pid_t r = waitpid(pid_, &wait_status, WNOHANG);
  if (r == pid_) Reap(wait_status);
  return status_;
}

bool Subprocess::running() { return !TryWait().has_value(); }

// Sleeps until the child exits or the deadline passes; true if it exited.
bool Subprocess::WaitUntil(std::chrono::steady_clock::time_point deadline) {
  while (!TryWait()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (pidfd_ >= 0) {
      pollfd p{pidfd_, POLLIN, 0};
      poll(&p, 1, static_cast<int>(std::min<long long>(left.count() + 1, 1000)));
    } else {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(5)));
    }
  }
  return true;
}

ExitStatus Subprocess::Wait(std::chrono::milliseconds timeout) {
  if (WaitUntil(std::chrono::steady_clock::now() + timeout)) return *status_;
  kill(-pid_, SIGKILL);
  WaitUntil(std::chrono::steady_clock::time_point::max());
  status_->timed_out = true;
  return *status_;
}

ExitStatus Subprocess::Stop(std::chrono::milliseconds grace) {
  if (pid_ < 0) return ExitStatus{};
  if (TryWait()) return *status_;
  kill(-pid_, SIGTERM);
  if (!WaitUntil(std::chrono::steady_clock::now() + grace)) {
    kill(-pid_, SIGKILL);
    WaitUntil(std::chrono::steady_clock::time_point::max());
  }
  return *status_;
}

void Subprocess::Signal(int sig) {
  if (!TryWait()) kill(-pid_, sig);
}

std::string Subprocess::Stdout() const { return ReadFile(stdout_path_); }
std::string Subprocess::Stderr() const { return ReadFile(stderr_path_); }

RunResult RunProcess(SpawnOptions options, std::chrono::milliseconds timeout) {
  Subprocess process(std::move(options));
  RunResult result;
  result.status = process.Wait(timeout);
  result.stdout_text = process.Stdout();
  result.stderr_text = process.Stderr();
  return result;
}

}  // namespace hotfix::testsupport
