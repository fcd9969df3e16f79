#include "common/file_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "captured_log.h"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace hotfix {
namespace {

using testsupport::ModeOf;
using testsupport::ReadFile;
using testsupport::TempDir;
using unittest::CapturedLog;

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

AtomicWriteOptions Options(mode_t mode, const std::string& prefix = ".test-tmp-") {
  AtomicWriteOptions options;
  options.mode = mode;
  options.temp_prefix = prefix;
  return options;
}

// --- WriteFileAtomically ---

TEST(WriteFileAtomicallyTest, WritesExactlyTheData) {
  TempDir dir;
  const std::string data("line\n\0binary\xFF", 13);
  ASSERT_TRUE(WriteFileAtomically(dir.File("f"), data, Options(0644)).ok());
  EXPECT_EQ(ReadFile(dir.File("f")), data);
  EXPECT_THAT(dir.Names(), ElementsAre("f"));
}

TEST(WriteFileAtomicallyTest, ReplacesAnExistingFile) {
  TempDir dir;
  const std::string path = dir.Write("f", "a much longer old content");
  ASSERT_TRUE(WriteFileAtomically(path, "new", Options(0644)).ok());
  EXPECT_EQ(ReadFile(path), "new");
}

TEST(WriteFileAtomicallyTest, AppliesTheModeRegardlessOfUmask) {
  TempDir dir;
  const mode_t old_umask = ::umask(077);
  Status a = WriteFileAtomically(dir.File("a"), "x", Options(0644));
  Status b = WriteFileAtomically(dir.File("b"), "x", Options(0755));
  ::umask(0);
  Status c = WriteFileAtomically(dir.File("c"), "x", Options(0600));
  ::umask(old_umask);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(ModeOf(dir.File("a")), 0644u);
  EXPECT_EQ(ModeOf(dir.File("b")), 0755u);
  EXPECT_EQ(ModeOf(dir.File("c")), 0600u);
}

TEST(WriteFileAtomicallyTest, FailedRenameRemovesTheTempFileAndLeavesTheTarget) {
  TempDir dir;
  const std::string target = dir.File("target");
  fs::create_directory(target);
  Status st = WriteFileAtomically(target, "data", Options(0644));
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), StartsWith("rename " + dir.path().string() + "/.test-tmp-"));
  EXPECT_THAT(dir.Names(), ElementsAre("target"));
  EXPECT_TRUE(fs::is_directory(target));
}

// write(2) fails with EFBIG under RLIMIT_FSIZE, root included; a child keeps the limit local.
TEST(WriteFileAtomicallyTest, FailedWriteRemovesTheTempFileAndLeavesTheTarget) {
  TempDir dir;
  const std::string target = dir.Write("target", "old");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {8, 8};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    Status st = WriteFileAtomically(target, std::string(4096, 'x'), Options(0644));
    ::_exit(st.ok() ? 1 : st.message().find("File too large") != std::string::npos ? 0 : 2);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "1: the write succeeded, 2: some other error";
  EXPECT_EQ(ReadFile(target), "old");
  EXPECT_THAT(dir.Names(), ElementsAre("target"));
}

TEST(WriteFileAtomicallyTest, MissingFolderIsNotFound) {
  TempDir dir;
  Status st = WriteFileAtomically(dir.File("missing/f"), "x", Options(0644));
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.IsNotFound());
  EXPECT_THAT(st.message(), StartsWith("creating temp file in " + dir.File("missing").string()));
  EXPECT_FALSE(fs::exists(dir.File("missing")));
}

// --- ExistingMode, DirName ---

TEST(ExistingModeTest, ReportsPermissionBitsOrNothing) {
  TempDir dir;
  const std::string path = dir.Write("f", "x");
  ::chmod(path.c_str(), 0640);
  EXPECT_EQ(ExistingMode(path), std::optional<mode_t>(0640));
  EXPECT_EQ(ExistingMode(dir.File("missing")), std::nullopt);
}

TEST(DirNameTest, FolderPart) {
  EXPECT_EQ(DirName("/opt/azure/containers/aks-node-controller-hotfix.json"),
            "/opt/azure/containers");
  EXPECT_EQ(DirName("a/b"), "a");
  EXPECT_EQ(DirName("b"), ".");
  EXPECT_EQ(DirName("/b"), "/");
}

// --- RemoveStaleTempFiles ---

TEST(RemoveStaleTempFilesTest, RemovesOnlyRegularFilesWithThePrefix) {
  TempDir dir;
  dir.Write(".tmp-abc", "stale");
  dir.Write(".tmp-def", "stale");
  dir.Write(".tmp-", "the bare prefix is not a temp file");
  dir.Write("x.tmp-abc", "prefix not at the start");
  dir.Write("keep", "unrelated");
  fs::create_directory(dir.File(".tmp-folder"));
  fs::create_symlink(dir.File("keep"), dir.File(".tmp-link"));
  EXPECT_EQ(RemoveStaleTempFiles(dir.path(), ".tmp-"), 2);
  EXPECT_THAT(dir.Names(), ElementsAre(".tmp-", ".tmp-folder", ".tmp-link", "keep", "x.tmp-abc"));
  EXPECT_EQ(ReadFile(dir.File("keep")), "unrelated");
}

TEST(RemoveStaleTempFilesTest, MissingFolderRemovesNothing) {
  EXPECT_EQ(RemoveStaleTempFiles("/nonexistent/folder", ".tmp-"), 0);
}

// --- ReadFileToString ---

TEST(ReadFileToStringTest, ReadsBinaryContent) {
  TempDir dir;
  const std::string data("a\0b\xFF\n", 5);
  StatusOr<std::string> got = ReadFileToString(dir.Write("f", data), 100);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, data);
}

TEST(ReadFileToStringTest, CapIsInclusive) {
  TempDir dir;
  const std::string path = dir.Write("f", std::string(100000, 'x'));
  EXPECT_TRUE(ReadFileToString(path, 100000).ok());
  StatusOr<std::string> over = ReadFileToString(path, 99999);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(over.status().message(), "read " + path + ": file is larger than 99999 bytes");
}

TEST(ReadFileToStringTest, MissingFileIsNotFound) {
  StatusOr<std::string> got = ReadFileToString("/nonexistent/file", 100);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(got.status().IsNotFound());
  EXPECT_EQ(got.status().message(), "open /nonexistent/file: No such file or directory");
}

// A FIFO without a writer used to block open(2) forever: check-hotfix hung at boot when its
// node config (or pointer) was one. Found by the fault matrix.
TEST(ReadFileToStringTest, AFifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string path = dir.File("fifo");
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  StatusOr<std::string> got = ReadFileToString(path, 100);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(got.status().message(), "read " + path + ": not a regular file");
}

TEST(ReadFileToStringTest, ACharacterDeviceIsRefused) {
  StatusOr<std::string> got = ReadFileToString("/dev/zero", 100);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "read /dev/zero: not a regular file");
}

TEST(ReadFileToStringTest, OtherErrorsAreNotNotFound) {
  TempDir dir;
  StatusOr<std::string> folder = ReadFileToString(dir.path(), 100);
  ASSERT_FALSE(folder.ok());
  EXPECT_FALSE(folder.status().IsNotFound());
  EXPECT_THAT(folder.status().message(), HasSubstr("Is a directory"));

  const std::string file = dir.Write("f", "x");
  StatusOr<std::string> through_file = ReadFileToString(file + "/child", 100);
  ASSERT_FALSE(through_file.ok());
  EXPECT_FALSE(through_file.status().IsNotFound());  // ENOTDIR, as Go's os.IsNotExist sees it
}

}  // namespace
}  // namespace hotfix
