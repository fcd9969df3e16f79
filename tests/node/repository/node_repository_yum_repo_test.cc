#include "node/repository/yum_repo.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hotfix::node::repository {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Azure Linux 3's /etc/yum.repos.d, as its images ship it (sorted by name).
const std::vector<YumRepoFile> kAzureLinux3 = {
    {"/etc/yum.repos.d/azurelinux-official-base.repo",
     "[azurelinux-official-base]\n"
     "name=Azure Linux Official Base $releasever $basearch\n"
     "baseurl=https://packages.microsoft.com/azurelinux/$releasever/prod/base/$basearch\n"
     "gpgkey=file:///etc/pki/rpm-gpg/MICROSOFT-RPM-GPG-KEY\n"
     "gpgcheck=1\n"
     "repo_gpgcheck=1\n"
     "enabled=1\n"
     "skip_if_unavailable=True\n"
     "sslverify=1\n"},
    {"/etc/yum.repos.d/azurelinux-official-ms-non-oss.repo",
     "[azurelinux-official-ms-non-oss]\n"
     "name=Azure Linux Official Microsoft Non-Open-Source $releasever $basearch\n"
     "baseurl=https://packages.microsoft.com/azurelinux/$releasever/prod/ms-non-oss/$basearch\n"
     "gpgkey=file:///etc/pki/rpm-gpg/MICROSOFT-RPM-GPG-KEY\n"
     "gpgcheck=1\n"
     "enabled=1\n"},
    {"/etc/yum.repos.d/azurelinux-official-ms-oss.repo",
     "[azurelinux-official-ms-oss]\n"
     "name=Azure Linux Official Microsoft Open-Source $releasever $basearch\n"
     "baseurl=https://packages.microsoft.com/azurelinux/$releasever/prod/ms-oss/$basearch\n"
     "gpgkey=file:///etc/pki/rpm-gpg/MICROSOFT-RPM-GPG-KEY\n"
     "gpgcheck=1\n"
     "repo_gpgcheck=1\n"
     "enabled=1\n"
     "skip_if_unavailable=True\n"
     "sslverify=1\n"},
};

StatusOr<YumRepo> FindIn(const std::string& text) {
  return FindMicrosoftYumRepo({{"/etc/yum.repos.d/test.repo", text}});
}

YumRepo FindOk(const std::string& text) {
  StatusOr<YumRepo> got = FindIn(text);
  EXPECT_TRUE(got.ok()) << text << ": " << got.status().message();
  return got.ok() ? *got : YumRepo{};
}

void ExpectNone(const std::vector<YumRepoFile>& files) {
  StatusOr<YumRepo> got = FindMicrosoftYumRepo(files);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(got.status().message(),
            "no enabled ms-oss or microsoft yum repository with a baseurl in " +
                std::to_string(files.size()) + " .repo files");
}

TEST(FindMicrosoftYumRepo, AzureLinux3Images) {
  StatusOr<YumRepo> got = FindMicrosoftYumRepo(kAzureLinux3);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->section, "azurelinux-official-ms-oss");
  EXPECT_EQ(got->baseurl,
            "https://packages.microsoft.com/azurelinux/$releasever/prod/ms-oss/$basearch");
  EXPECT_THAT(got->gpgkey_paths, ElementsAre("/etc/pki/rpm-gpg/MICROSOFT-RPM-GPG-KEY"));
}

TEST(FindMicrosoftYumRepo, QualifiesByNameOrBaseurlInAnyCase) {
  EXPECT_EQ(FindOk("[Microsoft-Prod]\nbaseurl=https://r/x\n").section, "Microsoft-Prod");
  EXPECT_EQ(FindOk("[my-MS-OSS-mirror]\nbaseurl=https://r/x\n").section, "my-MS-OSS-mirror");
  EXPECT_EQ(FindOk("[mirror]\nbaseurl=https://mirror.example/Microsoft/x\n").section, "mirror");
  EXPECT_EQ(FindOk("[mirror]\nbaseurl=https://mirror.example/az/MS-OSS/x\n").section, "mirror");
  // "/microsoft" and "ms-oss" without the slashes around them do not count in a baseurl.
  ExpectNone({{"a.repo",
               "[mirror]\nbaseurl=https://microsoft.example/ms-oss\n"
               "[mirror2]\nbaseurl=https://r/microsoft-prod/x\n"}});
}

TEST(FindMicrosoftYumRepo, OnlyEnabledZeroDisables) {
  ExpectNone({{"a.repo", "[ms-oss]\nbaseurl=https://r/x\nenabled=0\n"},
              {"b.repo", "[ms-oss]\nbaseurl=https://r/x\nenabled = 0 \n"}});
  for (const char* enabled : {"1", "false", "no", "00", ""}) {
    EXPECT_EQ(
        FindOk(std::string("[ms-oss]\nbaseurl=https://r/x\nenabled=") + enabled + "\n").baseurl,
        "https://r/x")
        << enabled;
  }
}

TEST(FindMicrosoftYumRepo, IniSyntax) {
  YumRepo repo = FindOk(
      "baseurl=https://before-any-section/ms-oss/x\r\n"
      "# [commented-ms-oss]\r\n"
      "; baseurl=https://semicolon/ms-oss/x\r\n"
      "   \r\n"
      "  [ azurelinux-official-ms-oss ]  \r\n"
      "  BaseURL =   https://packages.microsoft.com/azurelinux/3.0/prod/ms-oss/x86_64   \r\n"
      "\thttps://continuation.example/ms-oss/\r\n"
      "GPGKEY=file:///etc/pki/rpm-gpg/MICROSOFT-RPM-GPG-KEY\r\n"
      "not a key line\r\n");
  EXPECT_EQ(repo.section, "azurelinux-official-ms-oss");
  EXPECT_EQ(repo.baseurl, "https://packages.microsoft.com/azurelinux/3.0/prod/ms-oss/x86_64");
  EXPECT_THAT(repo.gpgkey_paths, ElementsAre("/etc/pki/rpm-gpg/MICROSOFT-RPM-GPG-KEY"));
}

TEST(FindMicrosoftYumRepo, FirstBaseurlFieldAndRepeatedKeys) {
  YumRepo repo = FindOk("[ms-oss]\nbaseurl=https://old/x\nbaseurl=https://a/x https://b/x\n");
  EXPECT_EQ(repo.baseurl, "https://a/x");
  EXPECT_THAT(repo.gpgkey_paths, IsEmpty());
}

TEST(FindMicrosoftYumRepo, GpgkeyListOfLocalKeys) {
  YumRepo repo = FindOk(
      "[ms-oss]\nbaseurl=https://r/x\n"
      "gpgkey=file:///etc/pki/a, /etc/pki/b\tfile:///etc/pki/c,,\n");
  EXPECT_THAT(repo.gpgkey_paths, ElementsAre("/etc/pki/a", "/etc/pki/b", "/etc/pki/c"));
}

TEST(FindMicrosoftYumRepo, NonLocalGpgkeyStopsTheSearch) {
  const std::vector<YumRepoFile> files = {
      {"/etc/yum.repos.d/a.repo",
       "[other]\nbaseurl=https://r/other\ngpgkey=https://ignored.example/key\n"
       "[ms-oss]\nbaseurl=https://r/x\n"
       "gpgkey=file:///etc/pki/local https://packages.microsoft.com/keys/microsoft.asc\n"
       "[microsoft-second]\nbaseurl=https://r/y\ngpgkey=file:///etc/pki/local\n"},
      {"/etc/yum.repos.d/b.repo", "[ms-oss-fine]\nbaseurl=https://r/z\n"},
  };
  StatusOr<YumRepo> got = FindMicrosoftYumRepo(files);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(got.status().message(),
            "yum repository [ms-oss] in /etc/yum.repos.d/a.repo has a gpgkey that is not a local "
            "file: \"https://packages.microsoft.com/keys/microsoft.asc\"");
  for (const char* key : {"http://k", "file://host/etc/key", "file://relative", "relative/key",
                          "ftp://k", "$HOME/key"}) {
    got = FindIn(std::string("[ms-oss]\nbaseurl=https://r/x\ngpgkey=") + key + "\n");
    ASSERT_FALSE(got.ok()) << key;
    EXPECT_EQ(got.status().code(), Status::Code::kFailedPrecondition) << key;
  }
  // Judged before the baseurl: an empty one does not hide a remote key.
  got = FindIn("[ms-oss]\nbaseurl=\ngpgkey=https://k\n");
  EXPECT_EQ(got.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(got.status().message().find("not a local file"), std::string::npos);
}

TEST(FindMicrosoftYumRepo, EmptyBaseurlSkipsTheSection) {
  YumRepo repo = FindOk(
      "[ms-oss]\nname=no baseurl\n[ms-oss-2]\nbaseurl=  \n"
      "[ms-oss-3]\nbaseurl=https://r/3\n");
  EXPECT_EQ(repo.section, "ms-oss-3");
}

TEST(FindMicrosoftYumRepo, SectionsInFileOrderFilesInGivenOrder) {
  EXPECT_EQ(
      FindOk("[microsoft-b]\nbaseurl=https://r/b\n[microsoft-a]\nbaseurl=https://r/a\n").section,
      "microsoft-b");
  // A repeated section name is another section, judged on its own keys.
  YumRepo repo =
      FindOk("[ms-oss]\nbaseurl=https://r/1\nenabled=0\n[ms-oss]\nbaseurl=https://r/2\n");
  EXPECT_EQ(repo.baseurl, "https://r/2");
  StatusOr<YumRepo> got = FindMicrosoftYumRepo({{"z.repo", "[ms-oss-z]\nbaseurl=https://r/z\n"},
                                                {"a.repo", "[ms-oss-a]\nbaseurl=https://r/a\n"}});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->section, "ms-oss-z");
}

TEST(FindMicrosoftYumRepo, NoneQualifies) {
  ExpectNone({});
  ExpectNone({{"a.repo", ""}, {"b.repo", "garbage\n[unterminated\nbaseurl=https://r/ms-oss/x\n"}});
  ExpectNone({kAzureLinux3[0], kAzureLinux3[1]});
}

TEST(FindMicrosoftYumRepo, LargeFileIsOnePass) {
  std::string text;
  while (text.size() < (4u << 20)) text += "[other]\nbaseurl=https://r/other\nenabled=1\n";
  text += "[ms-oss]\nbaseurl=https://r/last\n";
  EXPECT_EQ(FindOk(text).baseurl, "https://r/last");
}

void ExpectLeftOver(std::string_view baseurl, std::string_view releasever = "3.0",
                    std::string_view basearch = "x86_64") {
  StatusOr<std::string> got = SubstituteYumVariables(baseurl, releasever, basearch);
  ASSERT_FALSE(got.ok()) << baseurl << " -> " << *got;
  EXPECT_EQ(got.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(got.status().message(), "yum baseurl \"" + std::string(baseurl) +
                                        "\" has a '$' left after substituting $releasever and "
                                        "$basearch");
}

TEST(SubstituteYumVariables, BothFormsOfBothVariables) {
  struct Case {
    const char* in;
    const char* out;
  } cases[] = {
      {"https://packages.microsoft.com/azurelinux/$releasever/prod/ms-oss/$basearch",
       "https://packages.microsoft.com/azurelinux/3.0/prod/ms-oss/x86_64"},
      {"https://r/${releasever}/prod/ms-oss/${basearch}/", "https://r/3.0/prod/ms-oss/x86_64/"},
      {"https://r/$basearch$releasever", "https://r/x86_643.0"},
      {"https://r/${basearch}suffix-${releasever}", "https://r/x86_64suffix-3.0"},
      {"https://r/$basearch/", "https://r/x86_64/"},
      {"https://r/$releasever.1", "https://r/3.0.1"},
      {"https://r/no/variables", "https://r/no/variables"},
      {"", ""},
  };
  for (const Case& c : cases) {
    StatusOr<std::string> got = SubstituteYumVariables(c.in, "3.0", "x86_64");
    ASSERT_TRUE(got.ok()) << c.in << ": " << got.status().message();
    EXPECT_EQ(*got, c.out) << c.in;
  }
}

TEST(SubstituteYumVariables, AnyDollarLeftIsUnsupported) {
  for (const char* baseurl : {
           "https://r/$releasever_major/x",  // dnf's own variable, not $releasever + "_major"
           "https://r/$basearchx",
           "https://r/$BASEARCH",
           "https://r/$arch",
           "https://r/${stream}/x",
           "https://r/${releasever",
           "https://r/$",
           "https://r/$$basearch",
           "https://r/${}",
       }) {
    ExpectLeftOver(baseurl);
  }
  // A value is not rescanned, and one that carries a '$' leaves it in the URL.
  ExpectLeftOver("https://r/$releasever/", "$basearch");
}

}  // namespace
}  // namespace hotfix::node::repository
