#include "node/repository/source_files.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "temp_dir.h"

namespace hotfix::node::repository {
namespace {

using ::testing::HasSubstr;
using testsupport::TempDir;

TEST(ResolveMicrosoftProdSources, PrefersListThenSources) {
  TempDir dir;
  EXPECT_THAT(ResolveMicrosoftProdSources(dir.path()).status().message(),
              "neither " + dir.File("microsoft-prod.list").string() + " nor " +
                  dir.File("microsoft-prod.sources").string() + " exists");
  dir.Write("microsoft-prod.sources", "Types: deb\n");
  EXPECT_EQ(*ResolveMicrosoftProdSources(dir.path()), dir.File("microsoft-prod.sources"));
  dir.Write("microsoft-prod.list",
            "deb https://packages.microsoft.com/ubuntu/22.04/prod jammy main\n");
  EXPECT_EQ(*ResolveMicrosoftProdSources(dir.path()), dir.File("microsoft-prod.list"));
}

TEST(ResolveMicrosoftProdSources, StatErrorOtherThanMissingIsAnError) {
  TempDir dir;
  const std::string not_a_dir = dir.Write("file", "x");
  StatusOr<std::string> got = ResolveMicrosoftProdSources(not_a_dir);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("stat " + not_a_dir + "/microsoft-prod.list"));
  EXPECT_THAT(got.status().message(), HasSubstr("Not a directory"));
}

TEST(ReadYumRepoFiles, RepoFilesInNameOrderOthersIgnored) {
  TempDir dir;
  dir.Write("b.repo", "[b]\n");
  dir.Write("a.repo", "[a]\n");
  dir.Write("notes.txt", "[c]\n");
  std::filesystem::create_directories(dir.File("sub.repo"));  // a folder, unreadable as a file
  std::vector<YumRepoFile> files = ReadYumRepoFiles(dir.path());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].name, dir.File("a.repo").string());
  EXPECT_EQ(files[0].text, "[a]\n");
  EXPECT_EQ(files[1].name, dir.File("b.repo").string());
  EXPECT_TRUE(ReadYumRepoFiles(dir.File("absent")).empty());
}

}  // namespace
}  // namespace hotfix::node::repository
