#include "node/download/package_manager.h"

#include <stdlib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "captured_log.h"

namespace hotfix::node {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testsupport::TempDir;

// PATH pointed at a folder the test controls, restored afterwards.
class ScopedPath {
 public:
  explicit ScopedPath(const std::string& path) : old_(getenv("PATH") ? getenv("PATH") : "") {
    setenv("PATH", path.c_str(), 1);
  }
  ~ScopedPath() { setenv("PATH", old_.c_str(), 1); }

 private:
  std::string old_;
};

class DetectPackageManagerTest : public ::testing::Test {
 protected:
  StatusOr<PackageManager> Detect(const std::string& os_release) {
    return DetectPackageManager(dir_.Write("os-release", os_release));
  }
  TempDir dir_;
  TempDir bin_;
};

TEST_F(DetectPackageManagerTest, UbuntuIsAptGet) {
  for (const char* text : {"ID=ubuntu\n", "NAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=debian\n",
                           "ID=\"ubuntu\"", "  ID=Ubuntu  \n", "ID=\"\"ubuntu\"\"\n"}) {
    StatusOr<PackageManager> pm = Detect(text);
    ASSERT_TRUE(pm.ok()) << text << ": " << pm.status().message();
    EXPECT_EQ(*pm, PackageManager::kApt) << text;
  }
}

TEST_F(DetectPackageManagerTest, AzureLinuxAndMarinerUseDnfWhenOnPathElseTdnf) {
  ScopedPath path(bin_.path());
  for (const char* text : {"ID=\"azurelinux\"\n", "ID=mariner\n"}) {
    EXPECT_EQ(*Detect(text), PackageManager::kTdnf) << text;
  }
  bin_.Write("dnf", "#!/bin/sh\n", 0755);
  for (const char* text : {"ID=\"azurelinux\"\n", "ID=mariner\n"}) {
    EXPECT_EQ(*Detect(text), PackageManager::kDnf) << text;
  }
  // Not executable: not found, as exec.LookPath sees it.
  bin_.Write("dnf", "#!/bin/sh\n", 0644);
  EXPECT_EQ(*Detect("ID=mariner\n"), PackageManager::kTdnf);
}

TEST_F(DetectPackageManagerTest, UnsupportedOrMissingId) {
  EXPECT_THAT(Detect("ID=windows\n").status().message(), "unsupported OS: windows");
  EXPECT_THAT(Detect("ID=flatcar\n").status().message(), "unsupported OS: flatcar");
  // Single quotes are not stripped.
  EXPECT_THAT(Detect("ID='ubuntu'\n").status().message(), "unsupported OS: 'ubuntu'");
  EXPECT_THAT(Detect("ID=\n").status().message(), "unsupported OS: ");
  EXPECT_THAT(Detect("VERSION_ID=1\n").status().message(),
              "ID not found in " + dir_.File("os-release").string());
  // ID_LIKE and VERSION_ID do not count; the first ID= line wins.
  EXPECT_THAT(Detect("ID_LIKE=ubuntu\nID=acl\nID=ubuntu\n").status().message(),
              "unsupported OS: acl");
}

TEST_F(DetectPackageManagerTest, UnreadableOsReleaseIsAnError) {
  StatusOr<PackageManager> pm = DetectPackageManager(dir_.File("nonexistent"));
  ASSERT_FALSE(pm.ok());
  EXPECT_THAT(pm.status().message(), HasSubstr("reading " + dir_.File("nonexistent").string()));
  EXPECT_FALSE(DetectPackageManager(dir_.path()).ok());  // a folder
}

TEST_F(DetectPackageManagerTest, RealHostIsRecognisedOrSaysWhy) {
  StatusOr<PackageManager> pm = DetectPackageManager("/etc/os-release");
  if (pm.ok()) {
    EXPECT_THAT(PackageManagerName(*pm), ::testing::AnyOf("apt-get", "dnf", "tdnf"));
  } else {
    // This Debian machine is not a supported node OS.
    EXPECT_THAT(pm.status().message(), HasSubstr("unsupported OS: "));
  }
}

TEST(InstallCommands, AptIsTheReferenceArgvExactly) {
  auto cmds = InstallCommands(PackageManager::kApt, "202604.01.1",
                              "/etc/apt/sources.list.d/microsoft-prod.list");
  ASSERT_EQ(cmds.size(), 3u);
  EXPECT_THAT(cmds[0], ElementsAre("env", "DEBIAN_FRONTEND=noninteractive", "dpkg", "--configure",
                                   "-a", "--force-confdef", "--force-confold"));
  EXPECT_THAT(cmds[1],
              ElementsAre("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "update", "-o",
                          "Dpkg::Options::=--force-confold", "-o",
                          "Dir::Etc::sourcelist=/etc/apt/sources.list.d/microsoft-prod.list", "-o",
                          "Dir::Etc::sourceparts=-"));
  EXPECT_THAT(cmds[2],
              ElementsAre("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y",
                          "--allow-downgrades", "-o", "Dpkg::Options::=--force-confold",
                          "aks-node-controller=202604.01.1*"));
}

TEST(InstallCommands, DnfAndTdnfAreOneInstall) {
  EXPECT_THAT(InstallCommands(PackageManager::kDnf, "202604.01.1", ""),
              ElementsAre(ElementsAre("dnf", "install", "-y", "--refresh", "--allowerasing",
                                      "aks-node-controller-202604.01.1")));
  EXPECT_THAT(InstallCommands(PackageManager::kTdnf, "202604.01.1", ""),
              ElementsAre(ElementsAre("tdnf", "install", "-y", "--refresh", "--allowerasing",
                                      "aks-node-controller-202604.01.1")));
}

TEST(InstalledVersionQuery, ArgvPerPackageManager) {
  EXPECT_THAT(InstalledVersionQuery(PackageManager::kApt),
              ElementsAre("dpkg-query", "-W", "-f=${db:Status-Status}\\t${Version}\\n",
                          "aks-node-controller"));
  EXPECT_THAT(
      InstalledVersionQuery(PackageManager::kTdnf),
      ElementsAre("rpm", "-q", "--qf", "%{VERSION}\\t%{RELEASE}\\n", "aks-node-controller"));
}

TEST(InstalledVersionMatches, DebianVersionsAndTheGlobTrap) {
  std::string installed;
  const auto apt = [&](const std::string& out, const std::string& want) {
    return InstalledVersionMatches(PackageManager::kApt, out, want, &installed);
  };
  EXPECT_TRUE(apt("installed\t202604.01.1\n", "202604.01.1"));
  EXPECT_TRUE(apt("installed\t202604.01.1-1\n", "202604.01.1"));
  EXPECT_TRUE(apt("installed\t202604.01.1+azure\n", "202604.01.1"));
  EXPECT_TRUE(apt("installed\t202604.01.1~rc1\n", "202604.01.1"));
  // apt's "=202604.01.1*" would have taken these; they are other versions.
  EXPECT_FALSE(apt("installed\t202604.01.10\n", "202604.01.1"));
  EXPECT_EQ(installed, "202604.01.10");
  EXPECT_FALSE(apt("installed\t202604.01.1.5\n", "202604.01.1"));
  EXPECT_FALSE(apt("installed\t202604.01.0\n", "202604.01.1"));
  // Removed with its config files kept: not installed.
  EXPECT_FALSE(apt("config-files\t202604.01.1\n", "202604.01.1"));
  EXPECT_EQ(installed, "");
  EXPECT_FALSE(apt("", "202604.01.1"));
  EXPECT_FALSE(apt("garbage without a tab", "202604.01.1"));
}

TEST(InstalledVersionMatches, RpmVersionOrVersionRelease) {
  std::string installed;
  const auto rpm = [&](const std::string& out, const std::string& want) {
    return InstalledVersionMatches(PackageManager::kDnf, out, want, &installed);
  };
  EXPECT_TRUE(rpm("202604.01.1\t1.azl3\n", "202604.01.1"));
  EXPECT_TRUE(rpm("202604.01.1\t1.azl3\n", "202604.01.1-1.azl3"));
  EXPECT_FALSE(rpm("202604.01.1\t1.azl3\n", "202604.01.1-1"));
  EXPECT_FALSE(rpm("202604.01.10\t1\n", "202604.01.1"));
  EXPECT_EQ(installed, "202604.01.10-1");
  // Several installed (install-only): any match counts.
  EXPECT_TRUE(rpm("202604.01.0\t1\n202604.01.1\t1\n", "202604.01.1"));
}

}  // namespace
}  // namespace hotfix::node
