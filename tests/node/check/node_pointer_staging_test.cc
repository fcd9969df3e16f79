#include "node/check/pointer_staging.h"

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
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/file_lock.h"
#include "common/file_util.h"

namespace hotfix::node {
namespace {

using testsupport::ModeOf;
using testsupport::ReadFile;
using testsupport::TempDir;
using unittest::CapturedLog;

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::json;

bool HasTempFile(const TempDir& dir) {
  for (const std::string& name : dir.Names()) {
    if (name.rfind(kPointerTempPrefix, 0) == 0) return true;
  }
  return false;
}

Deadline Soon() { return Deadline::After(std::chrono::seconds(5)); }

const char kSeeded[] =
    R"({"version":"202604.01.5","scripts_version":"202604.01.7","hotfixes":{"202604.01":"202604.01.5"}})";

// --- AgentBaker's WriteHotfixConfig_* tests ---

TEST(StageHotfixesTest, ShapeOfANewFile) {
  TempDir dir;
  const std::string path = dir.File("hotfix.json");
  ASSERT_TRUE(StageHotfixes(path, {{"202604.01", "202604.01.1"}}, Soon(), NullLogger()).ok());
  EXPECT_EQ(Json::parse(ReadFile(path)),
            Json::parse(R"({"hotfixes":{"202604.01":"202604.01.1"}})"));
  StatusOr<HotfixPointer> read = ReadHotfixPointer(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(ResolveVersion(*read, "202604.01.0", NullLogger()), "202604.01.1");
}

TEST(StageHotfixesTest, EmptyMapKeepsStableKey) {
  TempDir dir;
  const std::string path = dir.File("hotfix.json");
  ASSERT_TRUE(StageHotfixes(path, {}, Soon(), NullLogger()).ok());
  EXPECT_EQ(ReadFile(path), R"({"hotfixes":{}})");
}

TEST(StageHotfixesTest, PreservesExistingVersionAndScriptsVersion) {
  TempDir dir;
  const std::string path = dir.Write("hotfix.json", kSeeded);
  ASSERT_TRUE(StageHotfixes(path, {{"202604.01", "202604.01.9"}}, Soon(), NullLogger()).ok());
  EXPECT_EQ(ReadFile(path), R"({"version":"202604.01.5","scripts_version":"202604.01.7",)"
                            R"("hotfixes":{"202604.01":"202604.01.9"}})");
}

TEST(StageHotfixesTest, NewFileIs0644) {
  TempDir dir;
  const std::string path = dir.File("hotfix.json");
  ASSERT_TRUE(StageHotfixes(path, {{"a", "b"}}, Soon(), NullLogger()).ok());
  EXPECT_EQ(ModeOf(path), 0644u);
}

TEST(StageHotfixesTest, ExistingFileModeIsKept) {
  TempDir dir;
  const std::string path = dir.Write("hotfix.json", "{}", 0600);
  ASSERT_TRUE(StageHotfixes(path, {{"a", "b"}}, Soon(), NullLogger()).ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  const std::string odd = dir.Write("odd.json", "{}", 0640);
  ASSERT_TRUE(StageHotfixes(odd, {{"a", "b"}}, Soon(), NullLogger()).ok());
  EXPECT_EQ(ModeOf(odd), 0640u);
}

// --- Beyond the reference ---

TEST(StageHotfixesTest, NewFileIs0644EvenUnderARestrictiveUmask) {
  TempDir dir;
  const std::string path = dir.File("hotfix.json");
  const mode_t old_umask = ::umask(077);
  Status st = StageHotfixes(path, {{"a", "b"}}, Soon(), NullLogger()).status();
  ::umask(old_umask);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(ModeOf(path), 0644u);
}

TEST(StageHotfixesTest, ReplacesHotfixesWholeAndDropsOtherKeys) {
  TempDir dir;
  const std::string path = dir.Write(
      "hotfix.json",
      R"({"Version":"v","sha256":"abc","hotfixes":{"202604.01":"202604.01.1","202605.01":"x"}})");
  ASSERT_TRUE(StageHotfixes(path, {{"202606.01", "202606.01.1"}}, Soon(), NullLogger()).ok());
  EXPECT_EQ(ReadFile(path), R"({"version":"v","hotfixes":{"202606.01":"202606.01.1"}})");
}

TEST(StageHotfixesTest, LogsTheStagedPath) {
  TempDir dir;
  CapturedLog log;
  const std::string path = dir.File("hotfix.json");
  ASSERT_TRUE(StageHotfixes(path, {{"a", "b"}}, Soon(), log.logger()).ok());
  std::vector<Json> lines = log.Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["level"], "INFO");
  EXPECT_EQ(lines[0]["msg"], "staged hotfix pointer for download-hotfix");
  EXPECT_EQ(lines[0]["path"], path);
}

TEST(StageHotfixesTest, InvalidExistingFileWarnsAndCarriesNothingOver) {
  TempDir dir;
  CapturedLog log;
  const std::string path = dir.Write("hotfix.json", R"({"version":"v","hotfixes":[]})");
  ASSERT_TRUE(StageHotfixes(path, {{"a", "b"}}, Soon(), log.logger()).ok());
  EXPECT_EQ(ReadFile(path), R"({"hotfixes":{"a":"b"}})");
  std::vector<Json> lines = log.Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["level"], "WARN");
  EXPECT_EQ(
      lines[0]["msg"],
      "could not read existing hotfix pointer; version/scripts_version will not be preserved");
  EXPECT_EQ(lines[0]["path"], path);
  EXPECT_THAT(lines[0]["error"].get<std::string>(), StartsWith("parsing hotfix config " + path));
  EXPECT_EQ(lines[1]["msg"], "staged hotfix pointer for download-hotfix");
}

TEST(StageHotfixesTest, MissingOrBlankExistingFileIsSilentlyEmpty) {
  TempDir dir;
  CapturedLog log;
  const std::string blank = dir.Write("blank.json", " \n");
  ASSERT_TRUE(StageHotfixes(blank, {{"a", "b"}}, Soon(), log.logger()).ok());
  ASSERT_TRUE(StageHotfixes(dir.File("new.json"), {{"a", "b"}}, Soon(), log.logger()).ok());
  for (const Json& line : log.Lines()) EXPECT_EQ(line["level"], "INFO") << line.dump();
}

TEST(StageHotfixesTest, RemovesStaleTempFilesButNothingElse) {
  TempDir dir;
  dir.Write(".aks-node-controller-hotfix-abc", "half a pointer");
  dir.Write(".aks-node-controller-update-xyz", "not ours");
  dir.Write("unrelated.txt", "keep me");
  fs::create_directory(dir.File(".aks-node-controller-hotfix-dir"));
  ASSERT_TRUE(StageHotfixes(dir.File("hotfix.json"), {{"a", "b"}}, Soon(), NullLogger()).ok());
  EXPECT_THAT(dir.Names(),
              ElementsAre(".aks-node-controller-hotfix-dir", ".aks-node-controller-update-xyz",
                          "hotfix.json", "unrelated.txt"));
  EXPECT_EQ(ReadFile(dir.File("unrelated.txt")), "keep me");
}

TEST(StageHotfixesTest, MissingParentFolderIsAnErrorAndIsNotCreated) {
  TempDir dir;
  const std::string path = dir.File("missing/hotfix.json");
  Status st = StageHotfixes(path, {{"a", "b"}}, Soon(), NullLogger()).status();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), StartsWith("opening folder "));
  EXPECT_THAT(st.message(), HasSubstr("No such file or directory"));
  EXPECT_FALSE(fs::exists(dir.File("missing")));
}

TEST(StageHotfixesTest, ParentThatIsARegularFileIsAnError) {
  TempDir dir;
  dir.Write("plain", "x");
  Status st =
      StageHotfixes(dir.File("plain/hotfix.json"), {{"a", "b"}}, Soon(), NullLogger()).status();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), StartsWith("opening folder "));
  EXPECT_EQ(ReadFile(dir.File("plain")), "x");
  EXPECT_THAT(dir.Names(), ElementsAre("plain"));
}

TEST(StageHotfixesTest, PointerThatIsADirectoryIsAnErrorAndUntouched) {
  TempDir dir;
  const std::string path = dir.File("hotfix.json");
  fs::create_directory(path);
  std::ofstream(path + "/inside") << "content";
  Status st = StageHotfixes(path, {{"a", "b"}}, Soon(), NullLogger()).status();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), StartsWith("rename "));
  EXPECT_TRUE(fs::is_directory(path));
  EXPECT_EQ(ReadFile(path + "/inside"), "content");
  EXPECT_FALSE(HasTempFile(dir));
}

// A write that fails after the temp file exists: RLIMIT_FSIZE makes write(2) fail with EFBIG
// even for root. Run in a child so the limit does not leak into the test process.
TEST(StageHotfixesTest, FailedWriteLeavesPointerByteForByteAndNoTempFile) {
  TempDir dir;
  const std::string path = dir.Write("hotfix.json", kSeeded, 0600);
  HotfixMap big;
  for (int i = 0; i < 100; ++i) big["2026" + std::to_string(i)] = std::string(50, 'x');

  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {64, 64};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    Status st = StageHotfixes(path, big, Soon(), NullLogger()).status();
    const bool efbig = !st.ok() && st.message().find("File too large") != std::string::npos &&
                       st.message().rfind("writing ", 0) == 0;
    ::_exit(st.ok() ? 1 : efbig ? 0 : 2);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "1: the write succeeded, 2: some other error";
  EXPECT_EQ(ReadFile(path), kSeeded);
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_THAT(dir.Names(), ElementsAre("hotfix.json"));
}

// rename(2) replaces the link itself, as the reference's os.Rename does: the pointer becomes a
// regular file and the link's target is neither created nor modified.
TEST(StageHotfixesTest, DanglingSymlinkIsReplacedByARegularFile) {
  TempDir dir;
  const std::string path = dir.File("hotfix.json");
  fs::create_symlink(dir.File("target.json"), path);
  ASSERT_TRUE(StageHotfixes(path, {{"a", "b"}}, Soon(), NullLogger()).ok());
  EXPECT_FALSE(fs::is_symlink(path));
  EXPECT_TRUE(fs::is_regular_file(path));
  EXPECT_EQ(ModeOf(path), 0644u);
  EXPECT_EQ(ReadFile(path), R"({"hotfixes":{"a":"b"}})");
  EXPECT_FALSE(fs::exists(dir.File("target.json")));
}

// The replaced link is reported: the fault matrix's "pointer is a dangling symlink" row found
// that nothing in the log said the link was gone.
TEST(StageHotfixesTest, ReplacingASymlinkIsLogged) {
  TempDir dir;
  const std::string path = dir.File("hotfix.json");
  fs::create_symlink(dir.File("target.json"), path);
  CapturedLog log;
  ASSERT_TRUE(StageHotfixes(path, {{"a", "b"}}, Soon(), log.logger()).ok());
  std::vector<Json> lines = log.Lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0]["msg"],
            "hotfix pointer path is a symlink; replacing the link with a regular file");
  EXPECT_EQ(lines[0]["level"], "WARN");
  EXPECT_EQ(lines[0]["target"], dir.File("target.json").string());
}

TEST(StageHotfixesTest, ARegularPointerLogsNoSymlinkWarning) {
  TempDir dir;
  const std::string path = dir.Write("hotfix.json", kSeeded);
  CapturedLog log;
  ASSERT_TRUE(StageHotfixes(path, {{"a", "b"}}, Soon(), log.logger()).ok());
  EXPECT_THAT(log.Messages(), ElementsAre("staged hotfix pointer for download-hotfix"));
}

TEST(StageHotfixesTest, SymlinkToAFileCarriesItsFieldsButLeavesTheTargetAlone) {
  TempDir dir;
  const std::string target = dir.Write("target.json", kSeeded, 0600);
  const std::string path = dir.File("hotfix.json");
  fs::create_symlink(target, path);
  ASSERT_TRUE(StageHotfixes(path, {{"a", "b"}}, Soon(), NullLogger()).ok());
  EXPECT_FALSE(fs::is_symlink(path));
  EXPECT_EQ(ModeOf(path), 0600u);  // the mode is read through the link
  EXPECT_EQ(ReadFile(path),
            R"({"version":"202604.01.5","scripts_version":"202604.01.7","hotfixes":{"a":"b"}})");
  EXPECT_EQ(ReadFile(target), kSeeded);
}

TEST(StageHotfixesTest, WaitsForTheFolderLockOnlyUntilTheDeadline) {
  TempDir dir;
  const std::string path = dir.Write("hotfix.json", kSeeded);
  StatusOr<FileLock> held = FileLock::OnFolder(dir.path(), Soon());
  ASSERT_TRUE(held.ok());
  Status st = StageHotfixes(path, {{"a", "b"}}, Deadline::After(std::chrono::milliseconds(50)),
                            NullLogger())
                  .status();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kDeadlineExceeded);
  EXPECT_THAT(st.message(), StartsWith("locking folder"));
  EXPECT_EQ(ReadFile(path), kSeeded);
}

TEST(PlanStagedPointerTest, PlansWithoutWriting) {
  TempDir dir;
  const std::string path = dir.Write("hotfix.json", kSeeded);
  auto plan = PlanStagedPointer(path, {{"202605.01", "202605.01.2"}}, NullLogger());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(*plan, (HotfixPointer{"202604.01.5", "202604.01.7", {{"202605.01", "202605.01.2"}}}));
  EXPECT_EQ(ReadFile(path), kSeeded);
  auto fresh = PlanStagedPointer(dir.File("none.json"), {}, NullLogger());
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(*fresh, HotfixPointer{});
  EXPECT_FALSE(fs::exists(dir.File("none.json")));
}

TEST(PlanStagedPointerTest, UnreadableExistingFileWarns) {
  TempDir dir;
  CapturedLog log;
  fs::create_directory(dir.File("hotfix.json"));
  auto plan = PlanStagedPointer(dir.File("hotfix.json"), {{"a", "b"}}, log.logger());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(*plan, (HotfixPointer{"", "", {{"a", "b"}}}));
  std::vector<Json> lines = log.Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["level"], "WARN");
  EXPECT_THAT(lines[0]["error"].get<std::string>(), HasSubstr("Is a directory"));
}

// Found by review: a served map that serialises past the reader's cap (Go's escaping makes
// '<' six bytes) was staged, and download-hotfix then refused the file it had been given.
// Staging now refuses it instead, and the staged pointer stays as it was.
TEST(StageHotfixesTest, APointerTheReaderWouldRefuseIsNotWritten) {
  TempDir dir;
  const std::string path = dir.Write("hotfix.json", kSeeded);
  const HotfixMap huge = {{"202605.01", std::string(200 * 1024, '<')}};  // 1.2 MB escaped
  auto plan = PlanStagedPointer(path, huge, NullLogger());
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(plan.status().message(),
              testing::MatchesRegex("hotfix pointer would be [0-9]+ bytes; download-hotfix reads "
                                    "at most 1048576"));
  auto staged = StageHotfixes(path, huge, Soon(), NullLogger());
  ASSERT_FALSE(staged.ok());
  EXPECT_EQ(staged.status().message(), plan.status().message());
  EXPECT_EQ(ReadFile(path), kSeeded);
}

// The writer's cap and the reader's are the same number: a pointer of exactly kMaxPointerBytes
// is staged and read back whole.
TEST(StageHotfixesTest, APointerOfExactlyTheCapIsStagedAndReadBack) {
  TempDir dir;
  const std::string path = dir.File("hotfix.json");
  HotfixMap map = {{"202605.01", ""}};
  const size_t frame = SerializeHotfixPointer(HotfixPointer{"", "", map}).size();
  map["202605.01"] = std::string(kMaxPointerBytes - frame, 'a');
  auto staged = StageHotfixes(path, map, Soon(), NullLogger());
  ASSERT_TRUE(staged.ok()) << staged.status().message();
  EXPECT_EQ(ReadFile(path).size(), kMaxPointerBytes);
  auto read = ReadHotfixPointer(path);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->hotfixes, map);

  map["202605.01"] += "a";
  EXPECT_FALSE(StageHotfixes(path, map, Soon(), NullLogger()).ok());
  EXPECT_EQ(ReadFile(path).size(), kMaxPointerBytes);
}

}  // namespace
}  // namespace hotfix::node

namespace hotfix::node {
namespace {

// A reboot that gets the answer it already staged must not rewrite (and flush) the file.
TEST(StageHotfixesTest, AnUnchangedPointerIsNotRewritten) {
  TempDir dir;
  const std::string path = dir.File("hotfix.json");
  ASSERT_TRUE(StageHotfixes(path, {{"202604.01", "202604.01.1"}}, Soon(), NullLogger()).ok());
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  auto again = StageHotfixes(path, {{"202604.01", "202604.01.1"}}, Soon(), NullLogger());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->hotfixes.at("202604.01"), "202604.01.1");
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);  // a rewrite renames a new inode into place
  // A different answer is written.
  ASSERT_TRUE(StageHotfixes(path, {{"202604.01", "202604.01.2"}}, Soon(), NullLogger()).ok());
  struct stat changed {};
  ASSERT_EQ(::stat(path.c_str(), &changed), 0);
  EXPECT_NE(changed.st_ino, before.st_ino);
}

}  // namespace
}  // namespace hotfix::node
