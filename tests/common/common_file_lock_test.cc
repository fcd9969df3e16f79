#include "common/file_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "temp_dir.h"

namespace hotfix {
namespace {

using ::testing::StartsWith;
using testsupport::TempDir;

Deadline Soon() { return Deadline::After(std::chrono::seconds(5)); }
Deadline Short() { return Deadline::After(std::chrono::milliseconds(50)); }

// flock(2) locks belong to an open file description, so a second open() of the folder in the
// same process contends with the first exactly as another process would.
TEST(FolderLockTest, SecondAcquireTimesOutWhileTheFirstIsHeld) {
  TempDir dir;
  StatusOr<FileLock> first = FileLock::OnFolder(dir.path(), Soon());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  StatusOr<FileLock> second = FileLock::OnFolder(dir.path(), Short());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(second.status().message(),
            "locking folder " + dir.path().string() + ": held by another process");
}

TEST(FolderLockTest, ReleasedOnDestruction) {
  TempDir dir;
  {
    StatusOr<FileLock> first = FileLock::OnFolder(dir.path(), Soon());
    ASSERT_TRUE(first.ok());
  }
  EXPECT_TRUE(FileLock::OnFolder(dir.path(), Short()).ok());
}

TEST(FolderLockTest, MovingKeepsTheLockHeld) {
  TempDir dir;
  StatusOr<FileLock> first = FileLock::OnFolder(dir.path(), Soon());
  ASSERT_TRUE(first.ok());
  {
    FileLock moved(std::move(first.value()));
    EXPECT_FALSE(FileLock::OnFolder(dir.path(), Short()).ok());
  }  // `moved` releases it; the moved-from lock must not double-close
  EXPECT_TRUE(FileLock::OnFolder(dir.path(), Short()).ok());
}

TEST(FolderLockTest, AnotherProcessWaitsForTheHolder) {
  TempDir dir;
  StatusOr<FileLock> held = FileLock::OnFolder(dir.path(), Soon());
  ASSERT_TRUE(held.ok());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    StatusOr<FileLock> other = FileLock::OnFolder(dir.path(), Short());
    ::_exit(other.ok() ? 1 : other.status().code() == Status::Code::kDeadlineExceeded ? 0 : 2);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "1: acquired a held lock, 2: some other error";
}

TEST(FolderLockTest, MissingFolderIsAnError) {
  StatusOr<FileLock> lock = FileLock::OnFolder("/nonexistent/folder", Soon());
  ASSERT_FALSE(lock.ok());
  EXPECT_TRUE(lock.status().IsNotFound());
  EXPECT_THAT(lock.status().message(), StartsWith("opening folder /nonexistent/folder: "));
}

// A lock file is created 0600, kept after release, and contends like the folder's lock.
TEST(FileLockTest, ALockFileIsCreatedKeptAndExclusive) {
  TempDir dir;
  const std::string path = dir.File(".lock").string();
  {
    StatusOr<FileLock> first = FileLock::OnFile(path, Soon());
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    EXPECT_EQ(std::filesystem::status(path).permissions(),
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    StatusOr<FileLock> second = FileLock::OnFile(path, Short());
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().message(), "locking " + path + ": held by another process");
  }
  EXPECT_TRUE(std::filesystem::exists(path)) << "removed: a waiter could lock another inode";
  EXPECT_TRUE(FileLock::OnFile(path, Short()).ok());
}

TEST(FileLockTest, ALockFileThatIsASymlinkIsRefused) {
  TempDir dir;
  std::filesystem::create_symlink(dir.File("elsewhere"), dir.File(".lock"));
  StatusOr<FileLock> lock = FileLock::OnFile(dir.File(".lock"), Short());
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(lock.status().message(), StartsWith("opening lock file "));
}

}  // namespace
}  // namespace hotfix
