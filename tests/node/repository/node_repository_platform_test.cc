#include "node/repository/platform.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hotfix::node::repository {
namespace {

using ::testing::HasSubstr;

TEST(ParseOsReleaseTest, FirstOfEachKeyQuotesStrippedIdLowered) {
  OsRelease os = ParseOsRelease(
      "NAME=\"Ubuntu\"\r\nVERSION_ID=\"22.04\"\nID=Ubuntu\nID=debian\n VARIANT_ID=\"OSGuard\" \n");
  EXPECT_EQ(os.id, "ubuntu");
  EXPECT_EQ(os.version_id, "22.04");
  EXPECT_EQ(os.variant_id, "osguard");
  EXPECT_EQ(ParseOsRelease("ID_LIKE=debian\n").id, "");
}

TEST(ChoosePlatformTest, UbuntuIsDeb) {
  StatusOr<Platform> p =
      ChoosePlatform(ParseOsRelease("ID=ubuntu\nVERSION_ID=\"24.04\"\n"), "arm64");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->format, PackageFormat::kDeb);
  EXPECT_EQ(DebPackageVersion(*p, "202608.26.2"), "202608.26.2-ubuntu24.04u1");
  EXPECT_EQ(
      DebPoolPath(*p, "202608.26.2"),
      "pool/main/a/aks-node-controller/aks-node-controller_202608.26.2-ubuntu24.04u1_arm64.deb");
}

TEST(ChoosePlatformTest, AzureLinux3IsRpm) {
  StatusOr<Platform> p =
      ChoosePlatform(ParseOsRelease("ID=azurelinux\nVERSION_ID=\"3.0.20260304\"\n"), "amd64");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->format, PackageFormat::kRpm);
  EXPECT_EQ(p->releasever, "3.0");
  EXPECT_EQ(p->rpm_arch, "x86_64");
  EXPECT_EQ(RpmPackagePath(*p, "202608.21.1"),
            "Packages/a/aks-node-controller-202608.21.1-1.azl3.x86_64.rpm");
  p = ChoosePlatform(ParseOsRelease("ID=azurelinux\nVERSION_ID=3.0\n"), "arm64");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->rpm_arch, "aarch64");
}

TEST(ChoosePlatformTest, EverythingElseIsUnsupported) {
  const std::pair<const char*, const char*> cases[] = {
      {"ID=mariner\nVERSION_ID=2.0\n", "unsupported repository platform mariner"},
      {"ID=debian\nVERSION_ID=12\n", "unsupported repository platform debian"},
      {"NAME=x\n", "unsupported repository platform (no ID)"},
      {"ID=azurelinux\nVARIANT_ID=osguard\nVERSION_ID=3.0\n",
       "image-based OS azurelinux variant osguard"},
      {"ID=azurelinux\nVARIANT_ID=azurecontainerlinux\nVERSION_ID=3.0\n", "image-based"},
      {"ID=azurelinux\nVERSION_ID=2.0\n", "unsupported Azure Linux version 2.0"},
      {"ID=ubuntu\n", "has no VERSION_ID"},
  };
  for (const auto& [text, why] : cases) {
    StatusOr<Platform> p = ChoosePlatform(ParseOsRelease(text), "amd64");
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.status().code(), Status::Code::kFailedPrecondition) << text;
    EXPECT_THAT(p.status().message(), HasSubstr(why));
  }
  for (const char* arch : {"386", "arm", "unknown"}) {
    EXPECT_FALSE(ChoosePlatform(ParseOsRelease("ID=ubuntu\nVERSION_ID=22.04\n"), arch).ok());
    EXPECT_FALSE(ChoosePlatform(ParseOsRelease("ID=azurelinux\nVERSION_ID=3.0\n"), arch).ok());
  }
}

TEST(BuildArchTest, ThisBuildIsOneOfTheSupportedOnes) {
  // The tests build for the machine they run on: x86_64 or aarch64.
  EXPECT_THAT(std::string(BuildArch()), ::testing::AnyOf("amd64", "arm64"));
}

}  // namespace
}  // namespace hotfix::node::repository
