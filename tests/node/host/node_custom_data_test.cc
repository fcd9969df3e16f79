#include "node/host/node_custom_data.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "captured_log.h"

namespace hotfix::node {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testsupport::ModeOf;
using testsupport::ReadFile;
using testsupport::TempDir;
using unittest::CapturedLog;

constexpr char kGzipContent[] = "H4sIAAAAAAAC/0uvyizQTc7PK0nNKwEAoD0Z5wwAAAA=";  // "gzip-content"
// Two gzip members, which Go's gzip.Reader reads as one stream: "part one part two".
constexpr char kTwoMembers[] =
    "H4sIAAAAAAAC/ytILCpRyM9LVQAA2miGIgkAAAAfiwgAAAAAAAL/K0gsKlEoKc8HACcfsuAIAAAA";
constexpr char kTruncatedGzip[] = "H4sIAAAAAAAC/6sAAIMW";

class NodeCustomDataTest : public ::testing::Test {
 protected:
  // Applies a nodecustomdata.yml whose entries write under root_.
  StatusOr<ApplyNodeCustomDataResult> Apply(const std::string& yaml, bool dry_run = false) {
    return ApplyNodeCustomData(cfg_.Write("nodecustomdata.yml", yaml), dry_run, log_.logger());
  }
  std::string At(const std::string& rel) const { return root_.File(rel); }
  TempDir cfg_{"customdata"};
  TempDir root_{"customdata-root"};
  CapturedLog log_;
};

// The reference's ApplyNodeCustomData test: a plain block entry and a gzip !!binary entry.
TEST_F(NodeCustomDataTest, PlainAndGzipEntries) {
  auto applied = Apply(
      "#cloud-config\n"
      "write_files:\n"
      "- path: " +
      At("plain.txt") +
      "\n"
      "  permissions: \"0600\"\n"
      "  owner: root\n"
      "  content: |\n"
      "    plain-content\n"
      "- path: " +
      At("gzip.txt") +
      "\n"
      "  encoding: gzip\n"
      "  content: !!binary |\n"
      "    " +
      kGzipContent + "\n");
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_THAT(applied->paths, ElementsAre(At("plain.txt"), At("gzip.txt")));
  EXPECT_EQ(ReadFile(At("plain.txt")), "plain-content\n");
  EXPECT_EQ(ModeOf(At("plain.txt")), 0600u);
  EXPECT_EQ(ReadFile(At("gzip.txt")), "gzip-content");
}

TEST_F(NodeCustomDataTest, Base64AndConcatenatedGzipMembers) {
  auto applied = Apply(
      "write_files:\n"
      "- {path: " +
      At("b64") +
      ", encoding: base64, content: YmFzZTY0LWNvbnRlbnQK}\n"
      "- {path: " +
      At("two") + ", encoding: gzip, content: !!binary " + kTwoMembers + "}\n");
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_EQ(ReadFile(At("b64")), "base64-content\n");
  EXPECT_EQ(ReadFile(At("two")), "part one part two");
}

TEST_F(NodeCustomDataTest, NewFileModeIsTheEntrysLessTheUmaskAndDefaults0644) {
  const mode_t old = ::umask(027);
  auto applied = Apply(
      "write_files:\n"
      "- {path: " +
      At("a") +
      ", permissions: '0666', content: x}\n"
      "- {path: " +
      At("b") +
      ", content: y}\n"
      "- {path: " +
      At("c") +
      ", permissions: 0755, content: z}\n"
      "- {path: " +
      At("d") + ", permissions: '4755', content: s}\n");
  ::umask(old);
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_EQ(ModeOf(At("a")), 0640u);
  EXPECT_EQ(ModeOf(At("b")), 0640u);  // 0644 & ~027
  EXPECT_EQ(ModeOf(At("c")), 0750u);  // an unquoted YAML number is read as its text
  EXPECT_EQ(ModeOf(At("d")), 0750u);  // only permission bits, as Go's os.FileMode keeps
}

TEST_F(NodeCustomDataTest, ExistingFileKeepsItsModeAndOwner) {
  const std::string existing = root_.Write("existing", "old", 0604);
  ASSERT_EQ(::chown(existing.c_str(), 4242, 4343) == 0, geteuid() == 0);
  ASSERT_TRUE(
      Apply("write_files:\n- {path: " + existing + ", permissions: '0700', content: new}\n").ok());
  EXPECT_EQ(ReadFile(existing), "new");
  EXPECT_EQ(ModeOf(existing), 0604u);
  if (geteuid() == 0) {
    struct stat st {};
    ASSERT_EQ(::stat(existing.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 4242u);
    EXPECT_EQ(st.st_gid, 4343u);
  }
}

TEST_F(NodeCustomDataTest, CreatesParentFoldersAndFollowsSymlinks) {
  const std::string target = root_.Write("real", "old", 0644);
  ASSERT_EQ(::symlink(target.c_str(), At("link").c_str()), 0);
  ASSERT_TRUE(Apply("write_files:\n"
                    "- {path: " +
                    At("deep/er/file") +
                    ", content: made}\n"
                    "- {path: " +
                    At("link") + ", content: through}\n")
                  .ok());
  EXPECT_EQ(ReadFile(At("deep/er/file")), "made");
  struct stat st {};
  ASSERT_EQ(::stat(At("deep/er").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(ReadFile(target), "through");
  ASSERT_EQ(::lstat(At("link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

TEST_F(NodeCustomDataTest, ABadEntryAnywhereWritesNothing) {
  const std::string first = root_.Write("first", "untouched", 0644);
  auto applied = Apply(
      "write_files:\n"
      "- {path: " +
      first +
      ", content: replaced}\n"
      "- {path: " +
      At("second") + ", encoding: gz+b64, content: x}\n");
  ASSERT_FALSE(applied.ok());
  EXPECT_THAT(applied.status().message(),
              HasSubstr("write_files[1] (" + At("second") + "): unsupported encoding \"gz+b64\""));
  EXPECT_EQ(ReadFile(first), "untouched");
  EXPECT_THAT(root_.Names(), ElementsAre("first"));
}

TEST_F(NodeCustomDataTest, EachEntryErrorIsNamed) {
  const std::pair<std::string, std::string> cases[] = {
      {"- {content: x}", "write_files[0]: path is required"},
      {"- {path: /x/p, owner: azureuser}", "unsupported owner \"azureuser\" (only root)"},
      {"- {path: /x/p, owner: 'root:root'}", "unsupported owner \"root:root\""},
      {"- {path: /x/p, encoding: b64}", "unsupported encoding \"b64\""},
      {"- {path: /x/p, permissions: '0899'}", "invalid permissions \"0899\""},
      {"- {path: /x/p, permissions: '-1'}", "invalid permissions \"-1\""},
      {"- {path: /x/p, permissions: '0o644'}", "invalid permissions \"0o644\""},
      {"- {path: /x/p, permissions: '77777777777'}", "invalid permissions"},
      {"- {path: /x/p, encoding: base64, content: 'not base64!'}", "base64 content"},
      {"- {path: /x/p, encoding: gzip, content: plain}", "gzip content"},
      {std::string("- {path: /x/p, encoding: gzip, content: !!binary ") + kTruncatedGzip + "}",
       "gzip content: unexpected EOF"},
      {"- {path: /x/p, content: !!binary '***'}", "write_files[0].content: !!binary"},
      {"- {path: [a, b]}", "write_files[0].path: cannot unmarshal !!seq into string"},
      {"- {path: /x/p, content: {a: b}}", "write_files[0].content: cannot unmarshal !!map"},
      {"- just a string", "write_files[0]: cannot unmarshal !!str"},
  };
  for (const auto& [entry, want] : cases) {
    auto applied = Apply("write_files:\n" + entry + "\n");
    ASSERT_FALSE(applied.ok()) << entry;
    EXPECT_THAT(applied.status().message(), HasSubstr(want)) << entry;
    EXPECT_THAT(applied.status().message(), HasSubstr(cfg_.File("nodecustomdata.yml").string()))
        << entry;
  }
}

TEST_F(NodeCustomDataTest, DocumentShapes) {
  // Nothing to write: no write_files, null, empty document, only comments.
  for (const char* yaml : {"", "#cloud-config\n", "write_files:\n", "write_files: null\n",
                           "runcmd: [ls]\nbootcmd: {a: b}\n", "write_files: []\n"}) {
    auto applied = Apply(yaml);
    ASSERT_TRUE(applied.ok()) << yaml << ": " << applied.status().message();
    EXPECT_TRUE(applied->paths.empty()) << yaml;
  }
  EXPECT_THAT(Apply("write_files: {path: /x}\n").status().message(),
              HasSubstr("write_files: cannot unmarshal !!map into a list"));
  EXPECT_THAT(Apply("- a\n- b\n").status().message(), HasSubstr("cannot unmarshal !!seq"));
  EXPECT_THAT(Apply("write_files: [\n").status().message(),
              HasSubstr("parsing node custom data: "));
}

TEST_F(NodeCustomDataTest, MissingFileIsNothingToDo) {
  auto applied = ApplyNodeCustomData(cfg_.File("absent.yml"), false, log_.logger());
  ASSERT_TRUE(applied.ok());
  EXPECT_TRUE(applied->paths.empty());
}

TEST_F(NodeCustomDataTest, UnreadableFileIsAnError) {
  auto applied = ApplyNodeCustomData(cfg_.path(), false, log_.logger());  // a folder
  ASSERT_FALSE(applied.ok());
  EXPECT_THAT(applied.status().message(), HasSubstr("reading node custom data"));
}

TEST_F(NodeCustomDataTest, DryRunListsButWritesNothing) {
  auto applied = Apply("write_files:\n- {path: " + At("f") + ", content: x}\n", true);
  ASSERT_TRUE(applied.ok());
  EXPECT_THAT(applied->paths, ElementsAre(At("f")));
  EXPECT_TRUE(root_.Names().empty());
}

TEST_F(NodeCustomDataTest, AFolderInTheWayIsAnErrorAndLeavesNoTemp) {
  ASSERT_EQ(::mkdir(At("dir").c_str(), 0755), 0);
  auto applied = Apply("write_files:\n- {path: " + At("dir") + ", content: x}\n");
  ASSERT_FALSE(applied.ok());
  EXPECT_THAT(applied.status().message(), HasSubstr("is a directory"));
  EXPECT_THAT(root_.Names(), ElementsAre("dir"));
}

// A run killed between creating its temp file and the rename leaves the temp behind; the next
// run must remove it, or each crash would leak a copy of the file into the target's folder.
TEST_F(NodeCustomDataTest, RemovesTempFilesAKilledRunLeft) {
  root_.Write(".aks-node-controller-write-AbC123", "half a script");
  root_.Write(".aks-node-controller-update-XYZ", "the binary staging's own temp: not ours");
  ASSERT_TRUE(Apply("write_files:\n- {path: " + At("f") + ", content: x}\n").ok());
  EXPECT_THAT(root_.Names(), ElementsAre(".aks-node-controller-update-XYZ", "f"));
  EXPECT_EQ(ReadFile(At("f")), "x");
}

TEST(ParseNodeCustomData, KeepsUnknownKeysOutAndNullEntriesEmpty) {
  auto entries = ParseNodeCustomData(
      "write_files:\n- path: /a\n  append: true\n  defer: true\n  content: c\n-\n");
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].path, "/a");
  EXPECT_EQ((*entries)[0].content, "c");
  EXPECT_EQ((*entries)[1].path, "");
  // A null entry then fails validation with the reference's message.
  EXPECT_THAT(PrepareWriteFile((*entries)[1], 1).status().message(),
              "write_files[1]: path is required");
}

}  // namespace
}  // namespace hotfix::node
