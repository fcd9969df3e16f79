#include "common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

namespace hotfix {

namespace {

// flock has no timeout: poll with LOCK_NB until the deadline.
Status FlockUntil(int fd, Deadline deadline, const std::string& what) {
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (err == EWOULDBLOCK && !deadline.expired()) {
      ::usleep(5000);
      continue;
    }
    if (err == EINTR) continue;
    if (err == EWOULDBLOCK) return Status::DeadlineExceeded(what + ": held by another process");
    return Status::FromErrno(what, err);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<FileLock> FileLock::OnFolder(const std::string& dir, Deadline deadline) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("opening folder " + dir, errno);
  if (Status st = FlockUntil(fd.get(), deadline, "locking folder " + dir); !st.ok()) return st;
  return FileLock(std::move(fd));
}

StatusOr<FileLock> FileLock::OnFile(const std::string& path, Deadline deadline) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return Status::FromErrno("opening lock file " + path, errno);
  if (Status st = FlockUntil(fd.get(), deadline, "locking " + path); !st.ok()) return st;
  return FileLock(std::move(fd));
}

}  // namespace hotfix
