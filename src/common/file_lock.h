// An exclusive flock(2), released on destruction and by the kernel if the process dies. The
// descriptor is close-on-exec, so commands we start cannot keep it. Waiting ends at a deadline:
// a stuck holder must not stall provisioning.
//
//   StatusOr<FileLock> lock = FileLock::OnFolder(dir, Deadline::After(10s));
//   if (!lock.ok()) return lock.status();   // DeadlineExceeded "... held by another process"
#pragma once

#include <string>
#include <utility>

#include "common/deadline.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace hotfix {

class FileLock {
 public:
  // On a folder: writers of the same folder (check-hotfix, download-hotfix) take it, so that
  // temp files found under it are stale.
  static StatusOr<FileLock> OnFolder(const std::string& dir, Deadline deadline);
  // On a lock file, created 0600 if absent and never removed (removing it would let a waiter
  // and a newcomer lock two different inodes).
  static StatusOr<FileLock> OnFile(const std::string& path, Deadline deadline);

  FileLock(FileLock&&) noexcept = default;
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;

 private:
  explicit FileLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;  // closing it releases the flock
};

}  // namespace hotfix
