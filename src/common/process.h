// Running another program: argv straight to posix_spawnp (never a shell), in a process group of
// its own so that a kill reaches what it started, with default signal handling whatever ours
// is. The package manager (node/download/command_runner.h) and the repository tools (gpgv,
// dpkg-deb, rpmkeys: node/repository/tool_runner.h) both start their commands here.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace hotfix {

// exec.LookPath: the first executable regular file named `name` in $PATH ("" entries, which
// would mean ".", are skipped), or `name` itself when it holds a '/' and is executable; ""
// when there is none.
std::string FindOnPath(const std::string& name);

// What happens to one of the child's output streams.
enum class ChildStream {
  kInherit,  // ours
  kPipe,     // a pipe whose read end the parent holds (non-blocking)
  kDiscard,  // /dev/null
};

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] looked up with FindOnPath
  ChildStream out = ChildStream::kInherit;
  ChildStream err = ChildStream::kInherit;
};

// How a child ended, in the words of Go's os/exec ("exit status 2", "signal: killed").
struct ChildExit {
  int exit_code = -1;   // the code when it exited on its own, else -1
  bool killed = false;  // we killed it (deadline or cancellation)
  std::string description;
  bool success() const { return exit_code == 0 && !killed; }
};

class Child {
 public:
  // NotFound `exec: "<name>": executable file not found in $PATH` when argv[0] is not on
  // PATH, so the error says what is missing (posix_spawnp would only exit 127 in the child).
  static StatusOr<Child> Spawn(const SpawnOptions& options);

  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  Child(const Child&) = delete;
  // A child still running is killed with its group and reaped: none outlives its owner.
  ~Child();

  pid_t pid() const { return pid_; }
  // The read ends of piped streams (-1 unless kPipe). Non-blocking.
  int out_fd() const { return out_.get(); }
  int err_fd() const { return err_.get(); }
  // Closes the read end of stdout, e.g. once what was wanted from it has been read.
  void CloseOut() { out_.reset(); }

  // SIGKILL to the child's process group.
  void Kill();

  // Waits for the child to exit. Piped output still open is drained meanwhile into *out and
  // *err (when not null, at most max_output bytes each; the rest is read and dropped, so the
  // child never blocks on a full pipe). At the deadline, or once *cancelled is true (checked
  // every 50 ms), the group is killed and the exit reports killed.
  ChildExit Wait(Deadline deadline, const std::atomic<bool>* cancelled, std::string* out,
                 std::string* err, size_t max_output);

 private:
  Child(pid_t pid, UniqueFd pidfd, UniqueFd out, UniqueFd err);
  pid_t pid_ = -1;  // -1 once reaped
  UniqueFd pidfd_;
  UniqueFd out_;
  UniqueFd err_;
};

}  // namespace hotfix
