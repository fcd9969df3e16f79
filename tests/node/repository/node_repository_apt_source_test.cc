#include "node/repository/apt_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "temp_dir.h"

namespace hotfix::node::repository {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// What packages-microsoft-prod installs on Ubuntu 24.04 (/etc/apt/sources.list.d/
// microsoft-prod.sources).
constexpr char kRealDeb822[] =
    "Types: deb\n"
    "URIs: https://packages.microsoft.com/ubuntu/24.04/prod/\n"
    "Suites: noble\n"
    "Components: main\n"
    "Architectures: amd64 arm64 armhf\n"
    "Signed-By: /usr/share/keyrings/microsoft-prod.gpg\n";

// An AKS Ubuntu 22.04 VHD's microsoft-prod.list (its key in trusted.gpg.d), and the form
// packages-microsoft-prod writes with signed-by.
constexpr char kAksOneLine[] =
    "deb [arch=amd64,arm64,armhf] https://packages.microsoft.com/ubuntu/22.04/prod jammy main\n";
constexpr char kSignedOneLine[] =
    "deb [arch=amd64,arm64,armhf signed-by=/usr/share/keyrings/microsoft-prod.gpg] "
    "https://packages.microsoft.com/ubuntu/22.04/prod jammy main\n";

void ExpectFailedPrecondition(const StatusOr<AptSource>& got, const std::string& message) {
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(got.status().message(), message);
}

TEST(ParseDeb822Sources, RealSourcesFile) {
  StatusOr<AptSource> got = ParseDeb822Sources(kRealDeb822, "amd64");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->uri, "https://packages.microsoft.com/ubuntu/24.04/prod/");
  EXPECT_EQ(got->suite, "noble");
  EXPECT_EQ(got->component, "main");
  EXPECT_THAT(got->signed_by, ElementsAre("/usr/share/keyrings/microsoft-prod.gpg"));
}

TEST(ParseDeb822Sources, CrlfKeysInAnyCaseAndComments) {
  StatusOr<AptSource> got = ParseDeb822Sources(
      "# written by hand\r\n"
      "TYPES: deb\r\n"
      "uris: https://packages.microsoft.com/ubuntu/22.04/prod\r\n"
      "# a comment inside the paragraph\r\n"
      "SuItEs:   jammy  \r\n"
      "components:\tmain\r\n",
      "arm64");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->uri, "https://packages.microsoft.com/ubuntu/22.04/prod");
  EXPECT_EQ(got->suite, "jammy");
  EXPECT_EQ(got->component, "main");
  EXPECT_THAT(got->signed_by, IsEmpty());
}

TEST(ParseDeb822Sources, ContinuationLinesAreJoinedAndTheFirstOfEachListTaken) {
  StatusOr<AptSource> got = ParseDeb822Sources(
      "Types: deb-src\n"
      " deb\n"
      "URIs:\n"
      " https://packages.microsoft.com/ubuntu/22.04/prod\n"
      "\thttps://mirror.example/prod\n"
      "Suites: jammy jammy-updates\n"
      "Components: main universe\n"
      "Signed-By: /usr/share/keyrings/a.gpg,\n"
      "  /usr/share/keyrings/b.gpg /etc/apt/keyrings/c.gpg\n",
      "amd64");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->uri, "https://packages.microsoft.com/ubuntu/22.04/prod");
  EXPECT_EQ(got->suite, "jammy");
  EXPECT_EQ(got->component, "main");
  EXPECT_THAT(got->signed_by, ElementsAre("/usr/share/keyrings/a.gpg", "/usr/share/keyrings/b.gpg",
                                          "/etc/apt/keyrings/c.gpg"));
}

TEST(ParseDeb822Sources, TakesTheFirstUsableParagraph) {
  const std::string usable =
      "Types: deb\nURIs: https://good.example/prod\nSuites: jammy\nComponents: main\n";
  const char* skipped[] = {
      "Types: deb-src\nURIs: https://x\nSuites: s\nComponents: c\n",
      "Types: debx\nURIs: https://x\nSuites: s\nComponents: c\n",
      "URIs: https://x\nSuites: s\nComponents: c\n",
      "Types: deb\nEnabled: no\nURIs: https://x\nSuites: s\nComponents: c\n",
      "Types: deb\nEnabled: NO\nURIs: https://x\nSuites: s\nComponents: c\n",
      "Types: deb\nArchitectures: arm64 armhf\nURIs: https://x\nSuites: s\nComponents: c\n",
      "Types: deb\nSuites: s\nComponents: c\n",
      "Types: deb\nURIs: https://x\nComponents: c\n",
      "Types: deb\nURIs: https://x\nSuites: s\n",
      "Types: deb\nURIs:\nSuites: s\nComponents: c\n",
      "Types: deb\nURIs: https://x\nSuites: s\nComponents:   \n",
      // A paragraph that is skipped is not judged on its Signed-By.
      "Types: deb\nEnabled: no\nURIs: https://x\nSuites: s\nComponents: c\nSigned-By: ABCD\n",
  };
  for (const char* first : skipped) {
    StatusOr<AptSource> got = ParseDeb822Sources(std::string(first) + "\n" + usable, "amd64");
    ASSERT_TRUE(got.ok()) << first << ": " << got.status().message();
    EXPECT_EQ(got->uri, "https://good.example/prod") << first;
  }
}

TEST(ParseDeb822Sources, EnabledOtherThanNoAndListedArchitectureAreUsable) {
  for (const char* enabled : {"yes", "Yes", "true", "0", "nope"}) {
    std::string text = std::string("Types: deb\nEnabled: ") + enabled +
                       "\nArchitectures: arm64 amd64\nURIs: u\nSuites: s\nComponents: c\n";
    StatusOr<AptSource> got = ParseDeb822Sources(text, "amd64");
    ASSERT_TRUE(got.ok()) << enabled;
    EXPECT_EQ(got->uri, "u");
  }
}

TEST(ParseDeb822Sources, BlankAndWhitespaceOnlyLinesSplitParagraphs) {
  // " \t" ends the first paragraph, so its Types does not reach the second's fields.
  ExpectFailedPrecondition(
      ParseDeb822Sources("Types: deb\n \t\nURIs: u\nSuites: s\nComponents: c\n", "amd64"),
      "APT deb822 source has no usable deb paragraph for amd64");
  StatusOr<AptSource> got =
      ParseDeb822Sources("\n\n\r\nTypes: deb\nURIs: u\nSuites: s\nComponents: c", "amd64");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->component, "c");
}

TEST(ParseDeb822Sources, RepeatedKeyKeepsTheLastValue) {
  StatusOr<AptSource> got = ParseDeb822Sources(
      "Types: deb\nURIs: first\nURIs: second\nSuites: s\nComponents: c\n", "amd64");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->uri, "second");
}

TEST(ParseDeb822Sources, NonPathSignedByIsUnsupported) {
  ExpectFailedPrecondition(
      ParseDeb822Sources("Types: deb\nURIs: u\nSuites: s\nComponents: c\n"
                         "Signed-By: BC528686B50D79E339D3721CEB3E94ADBE1229CF\n",
                         "amd64"),
      "APT Signed-By contains unsupported non-path constraint "
      "\"BC528686B50D79E339D3721CEB3E94ADBE1229CF\"");
  ExpectFailedPrecondition(
      ParseDeb822Sources("Types: deb\nURIs: u\nSuites: s\nComponents: c\n"
                         "Signed-By: /usr/share/keyrings/ok.gpg, relative.gpg\n",
                         "amd64"),
      "APT Signed-By contains unsupported non-path constraint \"relative.gpg\"");
  // deb822 lets Signed-By hold the key itself; gpgv needs a keyring file.
  ExpectFailedPrecondition(
      ParseDeb822Sources("Types: deb\nURIs: u\nSuites: s\nComponents: c\n"
                         "Signed-By:\n"
                         " -----BEGIN PGP PUBLIC KEY BLOCK-----\n"
                         " .\n"
                         " mQENBFYxWIwBCADAKoZhZlJxGNGWzqV+1OG1xiQeoowKhssGAKvd+buXCGISZJwT\n"
                         " -----END PGP PUBLIC KEY BLOCK-----\n",
                         "amd64"),
      "APT Signed-By contains unsupported non-path constraint \"-----BEGIN\"");
}

TEST(ParseDeb822Sources, NothingUsable) {
  for (const char* text : {"", "\n\n", "# only a comment\n", "Types: deb\n", "garbage\n"}) {
    ExpectFailedPrecondition(ParseDeb822Sources(text, "arm64"),
                             "APT deb822 source has no usable deb paragraph for arm64");
  }
}

TEST(ParseDeb822Sources, InputIsCappedAtOneMebibyte) {
  std::string text = kRealDeb822;
  text.append(kMaxAptSourceBytes - text.size(), '\n');
  EXPECT_TRUE(ParseDeb822Sources(text, "amd64").ok());
  text.push_back('\n');
  ExpectFailedPrecondition(ParseDeb822Sources(text, "amd64"),
                           "APT deb822 source is larger than 1048576 bytes");
}

TEST(ParseDeb822Sources, LargeInputsAreLinear) {
  // 1 MiB of one field's continuation lines, then of tiny paragraphs: a parser that rescans
  // what it joined, or splits the whole text per paragraph, would not finish.
  std::string joined = "Types: deb\nURIs: u\nSuites: s\nComponents: c\nX-Long: x\n";
  while (joined.size() < kMaxAptSourceBytes - 4) joined += " y\n";
  StatusOr<AptSource> got = ParseDeb822Sources(joined, "amd64");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->uri, "u");

  std::string many;
  const std::string last = "Types: deb\nURIs: last\nSuites: s\nComponents: c\n";
  while (many.size() + last.size() + 8 < kMaxAptSourceBytes) many += "Types: deb\n\n";
  got = ParseDeb822Sources(many + last, "amd64");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->uri, "last");
}

TEST(ParseOneLineSources, AksVhdLine) {
  StatusOr<AptSource> got = ParseOneLineSources(kAksOneLine, "amd64");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->uri, "https://packages.microsoft.com/ubuntu/22.04/prod");
  EXPECT_EQ(got->suite, "jammy");
  EXPECT_EQ(got->component, "main");
  EXPECT_THAT(got->signed_by, IsEmpty());
}

TEST(ParseOneLineSources, SignedBy) {
  StatusOr<AptSource> got = ParseOneLineSources(kSignedOneLine, "arm64");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_THAT(got->signed_by, ElementsAre("/usr/share/keyrings/microsoft-prod.gpg"));
  got = ParseOneLineSources("deb [signed-by=/a.gpg,/b.gpg] https://r jammy main", "amd64");
  ASSERT_TRUE(got.ok());
  EXPECT_THAT(got->signed_by, ElementsAre("/a.gpg", "/b.gpg"));
}

TEST(ParseOneLineSources, OptionGroupShapes) {
  for (const char* line : {
           "deb [ arch=amd64 ] https://r jammy main",
           "deb [arch=amd64 ] https://r jammy main",
           "deb [ arch=amd64] https://r jammy main",
           "deb [] https://r jammy main",
           "deb\t[arch=arm64,amd64\ttrusted=yes]\thttps://r\tjammy\tmain\textra",
           "deb https://r jammy main contrib",
       }) {
    StatusOr<AptSource> got = ParseOneLineSources(line, "amd64");
    ASSERT_TRUE(got.ok()) << line << ": " << got.status().message();
    EXPECT_EQ(got->uri, "https://r") << line;
    EXPECT_EQ(got->suite, "jammy") << line;
    EXPECT_EQ(got->component, "main") << line;
  }
}

TEST(ParseOneLineSources, SkipsCommentsOtherTypesShortLinesAndOtherArchitectures) {
  StatusOr<AptSource> got = ParseOneLineSources(
      "# deb https://commented jammy main\r\n"
      "   # deb https://indented-comment jammy main\r\n"
      "deb-src https://src jammy main\r\n"
      "deb https://short jammy\r\n"
      "deb [arch=arm64] https://arm-only jammy main\r\n"
      "deb [arch=amd64] https://too-few-after-options jammy\r\n"
      "debx https://other jammy main\r\n"
      "deb https://packages.microsoft.com/ubuntu/22.04/prod jammy main # trailing\r\n",
      "amd64");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->uri, "https://packages.microsoft.com/ubuntu/22.04/prod");
  EXPECT_EQ(got->component, "main");
}

TEST(ParseOneLineSources, CommentCutsTheLineShort) {
  ExpectFailedPrecondition(ParseOneLineSources("deb https://r jammy #main\n", "amd64"),
                           "APT one-line source has no usable deb line for amd64");
}

TEST(ParseOneLineSources, OptionThatIsNotKeyValueIsUnsupported) {
  ExpectFailedPrecondition(ParseOneLineSources("deb [trusted] https://r jammy main\n", "amd64"),
                           "APT source option \"trusted\" is not key=value");
  ExpectFailedPrecondition(ParseOneLineSources("deb [=amd64] https://r jammy main\n", "amd64"),
                           "APT source option \"=amd64\" is not key=value");
  // Refused while the line is read, before its architectures are looked at.
  ExpectFailedPrecondition(ParseOneLineSources("deb [arch=arm64 bogus] https://r jammy main\n"
                                               "deb https://fine jammy main\n",
                                               "amd64"),
                           "APT source option \"bogus\" is not key=value");
  ExpectFailedPrecondition(ParseOneLineSources("deb [arch=amd64 https://r jammy main\n", "amd64"),
                           "APT source option list \"[\" is not closed");
}

TEST(ParseOneLineSources, NonPathSignedByIsUnsupported) {
  ExpectFailedPrecondition(
      ParseOneLineSources("deb [signed-by=BC528686B50D79E339D3721CEB3E94ADBE1229CF] https://r "
                          "jammy main\n",
                          "amd64"),
      "APT Signed-By contains unsupported non-path constraint "
      "\"BC528686B50D79E339D3721CEB3E94ADBE1229CF\"");
  // Only the chosen line's Signed-By is judged.
  StatusOr<AptSource> got = ParseOneLineSources(
      "deb [arch=arm64 signed-by=FINGERPRINT] https://arm jammy main\n"
      "deb https://amd jammy main\n",
      "amd64");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->uri, "https://amd");
}

TEST(ParseOneLineSources, NothingUsable) {
  for (const char* text : {"", "\n", "# deb https://r jammy main\n", "deb https://r jammy\n",
                           "deb [arch=arm64] https://r jammy main\n", "deb-src https://r j m\n"}) {
    ExpectFailedPrecondition(ParseOneLineSources(text, "amd64"),
                             "APT one-line source has no usable deb line for amd64");
  }
}

TEST(ParseOneLineSources, InputIsCappedAtOneMebibyte) {
  std::string text = std::string(kMaxAptSourceBytes - sizeof(kAksOneLine) + 1, '\n') + kAksOneLine;
  ASSERT_EQ(text.size(), kMaxAptSourceBytes);
  EXPECT_TRUE(ParseOneLineSources(text, "amd64").ok());
  ExpectFailedPrecondition(ParseOneLineSources(text + "#", "amd64"),
                           "APT one-line source is larger than 1048576 bytes");
}

TEST(ParseOneLineSources, LargeInputsAreLinear) {
  // One 1 MiB option group, then 1 MiB of lines that each must be read.
  std::string group = "deb [";
  while (group.size() < kMaxAptSourceBytes - 64) group += "a=b ";
  group += "] https://r jammy main\n";
  EXPECT_TRUE(ParseOneLineSources(group, "amd64").ok());
  std::string lines;
  while (lines.size() < kMaxAptSourceBytes - 64) lines += "deb [arch=arm64] u s c\n";
  lines += "deb https://r jammy main\n";
  EXPECT_TRUE(ParseOneLineSources(lines, "amd64").ok());
}

TEST(DefaultMicrosoftKeyrings, RegularMicrosoftGpgFilesSorted) {
  testsupport::TempDir dir("apt-keyrings");
  dir.Write("microsoft.gpg", "k");
  dir.Write("microsoft-prod.gpg", "k");
  dir.Write("microsoft.asc", "k");
  dir.Write("other.gpg", "k");
  dir.Write("Microsoft-upper.gpg", "k");
  dir.Write("microsoft-prod.gpg~", "k");
  std::filesystem::create_directory(dir.File("microsoft-folder.gpg"));
  std::filesystem::create_symlink(dir.File("microsoft.gpg"), dir.File("microsoft-link.gpg"));
  std::filesystem::create_symlink(dir.File("missing"), dir.File("microsoft-dangling.gpg"));
  const std::string base = dir.path().string();
  EXPECT_THAT(DefaultMicrosoftKeyrings(base),
              ElementsAre(base + "/microsoft-link.gpg", base + "/microsoft-prod.gpg",
                          base + "/microsoft.gpg"));
}

TEST(DefaultMicrosoftKeyrings, MissingFolderIsEmpty) {
  testsupport::TempDir dir("apt-keyrings");
  EXPECT_THAT(DefaultMicrosoftKeyrings(dir.File("absent").string()), IsEmpty());
  EXPECT_THAT(DefaultMicrosoftKeyrings(dir.path().string()), IsEmpty());
}

}  // namespace
}  // namespace hotfix::node::repository
