#include "node/download/binary_staging.h"

#include <atomic>
#include <filesystem>
#include <optional>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "captured_log.h"
#include "common/file_lock.h"
#include "common/file_util.h"

namespace hotfix::node {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testsupport::ModeOf;
using testsupport::ReadFile;
using testsupport::TempDir;

TEST(StageHotfixBinary, CopiesWithTheVhdModeAndLeavesTheVhdBinaryAlone) {
  TempDir usr, opt;
  const std::string src = usr.Write("aks-node-controller", "new binary", 0644);
  const std::string vhd = opt.Write("aks-node-controller", "vhd binary", 0755);
  const std::string dst = opt.File("aks-node-controller-hotfix");
  ASSERT_TRUE(StageHotfixBinary(src, vhd, dst).ok());
  EXPECT_EQ(ReadFile(dst), "new binary");
  EXPECT_EQ(ModeOf(dst), 0755u);
  EXPECT_EQ(ReadFile(vhd), "vhd binary");
  EXPECT_EQ(ModeOf(vhd), 0755u);
  EXPECT_EQ(ModeOf(src), 0644u);
  EXPECT_THAT(opt.Names(), ElementsAre("aks-node-controller", "aks-node-controller-hotfix"));
}

TEST(StageHotfixBinary, ReplacesAnEarlierHotfixAtomically) {
  TempDir usr, opt;
  const std::string src = usr.Write("bin", "second", 0644);
  const std::string vhd = opt.Write("aks-node-controller", "vhd", 0750);
  const std::string dst = opt.Write("aks-node-controller-hotfix", "first", 0700);
  ASSERT_TRUE(StageHotfixBinary(src, vhd, dst).ok());
  EXPECT_EQ(ReadFile(dst), "second");
  EXPECT_EQ(ModeOf(dst), 0750u);
}

TEST(StageHotfixBinary, RemovesTempFilesAKilledRunLeft) {
  TempDir usr, opt;
  const std::string src = usr.Write("bin", "b", 0644);
  const std::string vhd = opt.Write("aks-node-controller", "v", 0755);
  opt.Write(".aks-node-controller-update-AbC123", "half a binary");
  opt.Write(".aks-node-controller-hotfix-XYZ", "check-hotfix's own temp: not ours");
  ASSERT_TRUE(StageHotfixBinary(src, vhd, opt.File("aks-node-controller-hotfix")).ok());
  EXPECT_THAT(opt.Names(), ElementsAre(".aks-node-controller-hotfix-XYZ", "aks-node-controller",
                                       "aks-node-controller-hotfix"));
}

TEST(StageHotfixBinary, MissingSourceSaysReading) {
  TempDir opt;
  const std::string vhd = opt.Write("aks-node-controller", "v", 0755);
  Status st = StageHotfixBinary(opt.File("absent"), vhd, opt.File("aks-node-controller-hotfix"));
  EXPECT_THAT(st.message(), HasSubstr("reading " + opt.File("absent").string()));
  EXPECT_THAT(opt.Names(), ElementsAre("aks-node-controller"));
}

TEST(StageHotfixBinary, MissingReferenceSaysStatAndLeavesNoTemp) {
  TempDir usr, opt;
  const std::string src = usr.Write("bin", "b", 0644);
  Status st = StageHotfixBinary(src, opt.File("aks-node-controller"),
                                opt.File("aks-node-controller-hotfix"));
  EXPECT_THAT(st.message(), HasSubstr("stat " + opt.File("aks-node-controller").string()));
  EXPECT_TRUE(opt.Names().empty());
}

TEST(StageHotfixBinary, MissingDestinationFolderIsAnError) {
  TempDir usr, opt;
  const std::string src = usr.Write("bin", "b", 0644);
  const std::string vhd = opt.Write("aks-node-controller", "v", 0755);
  Status st = StageHotfixBinary(src, vhd, opt.File("missing/aks-node-controller-hotfix"));
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr(opt.File("missing").string()));
}

// Nothing is written while another holds the folder's lock: the holder finds no hotfix binary
// when it lets go, and staging returns only after that.
TEST(StageHotfixBinary, WaitsForTheFolderLockHolder) {
  TempDir usr, opt;
  const std::string src = usr.Write("bin", "b", 0644);
  const std::string vhd = opt.Write("aks-node-controller", "v", 0755);
  const std::string destination = opt.File("aks-node-controller-hotfix");
  std::optional<FileLock> held;
  {
    StatusOr<FileLock> l = FileLock::OnFolder(opt.path(), Deadline::After({}));
    ASSERT_TRUE(l.ok());
    held.emplace(std::move(l).value());
  }
  std::atomic<bool> written_while_held{false};
  std::atomic<bool> released{false};
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    written_while_held = std::filesystem::exists(destination);
    released = true;
    held.reset();
  });
  Status st = StageHotfixBinary(src, vhd, destination);
  const bool returned_after_release = released.load();
  releaser.join();
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_FALSE(written_while_held.load()) << "the binary was staged under another's lock";
  EXPECT_TRUE(returned_after_release) << "staging did not wait for the lock";
  EXPECT_TRUE(std::filesystem::exists(destination));
}

}  // namespace
}  // namespace hotfix::node
