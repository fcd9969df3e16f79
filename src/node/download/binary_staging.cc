#include "node/download/binary_staging.h"

#include <sys/stat.h>

#include <cerrno>

#include "common/file_lock.h"
#include "common/file_util.h"

namespace hotfix::node {
namespace {

// The agent binary is tens of MB; the cap only guards against a runaway file.
constexpr size_t kMaxBinaryBytes = size_t{1} << 30;
// check-hotfix holds the same folder lock for milliseconds.
constexpr auto kFolderLockWait = std::chrono::seconds(10);

}  // namespace

Status StageHotfixBinary(const std::string& source, const std::string& mode_reference,
                         const std::string& destination) {
  struct stat ref {};
  if (::stat(mode_reference.c_str(), &ref) != 0) {
    return Status::FromErrno("stat " + mode_reference, errno);
  }
  const std::string dir = DirName(destination);
  StatusOr<FileLock> lock = FileLock::OnFolder(dir, Deadline::After(kFolderLockWait));
  if (!lock.ok()) return lock.status();
  RemoveStaleTempFiles(dir, kBinaryTempPrefix);
  AtomicWriteOptions options;
  options.mode = ref.st_mode & 07777;
  options.temp_prefix = kBinaryTempPrefix;
  // Streamed: the agent binary (tens of MiB, up to the fast path's 128 MiB) is never held whole.
  return CopyFileAtomically(source, destination, kMaxBinaryBytes, options);
}

}  // namespace hotfix::node
