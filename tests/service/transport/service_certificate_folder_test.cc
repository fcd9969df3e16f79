// The --tls-cert-dir folder (certificate_folder.h): its layout, pairs added, replaced and
// removed between scans, a bad pair never replacing a good one, and the caps.
#include "service/transport/certificate_folder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "test_certs.h"

namespace hotfix::service {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testsupport::CertAndKey;
using testsupport::LeafOptions;
using testsupport::TempDir;
using testsupport::TestCa;

int64_t Now() { return static_cast<int64_t>(time(nullptr)); }

class CertificateFolderTest : public ::testing::Test {
 protected:
  CertAndKey Leaf(const std::string& dns) {
    LeafOptions options;
    options.common_name = dns;
    options.dns_names = {dns};
    return ca_.IssueLeaf(options);
  }
  // DIR/<name>/tls.crt and tls.key, each written to a temp file and renamed into place (a new
  // inode, as a Secret volume's update gives).
  void WritePair(const std::string& name, const CertAndKey& pair) {
    WriteFile(name, "tls.crt", pair.cert_pem);
    WriteFile(name, "tls.key", pair.key_pem);
  }
  void WriteFile(const std::string& name, const std::string& file, const std::string& bytes) {
    fs::create_directories(dir_.File(name));
    const fs::path tmp = dir_.File(name) / ("." + file + ".tmp");
    std::ofstream(tmp, std::ios::binary | std::ios::trunc) << bytes;
    fs::rename(tmp, dir_.File(name) / file);
  }
  std::vector<std::string> Served(const CertificateFolder& folder) {
    std::vector<std::string> names;
    for (const auto& pair : folder.Pairs()) names.push_back(pair->name);
    return names;
  }
  std::string dir() const { return dir_.path().string(); }

  TestCa ca_ = TestCa::Create("cluster-ca");
  TempDir dir_{"lp-cert-folder"};
};

TEST_F(CertificateFolderTest, LoadsEachSubfolderAsAPairAndSkipsDotEntries) {
  WritePair("cluster-a", Leaf("a.hcp.eastus.azmk8s.io"));
  WritePair("cluster-b", Leaf("b.hcp.eastus.azmk8s.io"));
  // A projected Secret volume's own entries.
  fs::create_directories(dir_.File("..2026_12_02_16_18_10.000"));
  fs::create_symlink("..2026_12_02_16_18_10.000", dir_.File("..data"));
  CertificateFolder folder(dir());
  CertificateFolderScan scan = folder.Scan(Now());
  ASSERT_TRUE(scan.error.ok()) << scan.error.message();
  EXPECT_TRUE(scan.changed);
  EXPECT_THAT(scan.added, ElementsAre("cluster-a", "cluster-b"));
  EXPECT_THAT(scan.refused, IsEmpty());
  EXPECT_THAT(Served(folder), ElementsAre("cluster-a", "cluster-b"));
  EXPECT_EQ(folder.Pairs()[0]->dns_names, std::vector<std::string>{"a.hcp.eastus.azmk8s.io"});

  CertificateFolderScan again = folder.Scan(Now());
  EXPECT_FALSE(again.changed) << "nothing changed";
  EXPECT_THAT(again.refused, IsEmpty());
}

TEST_F(CertificateFolderTest, APairFolderMayBeASymlinkAsAProjectedVolumeMakesIt) {
  CertAndKey pair = Leaf("a.hcp.eastus.azmk8s.io");
  fs::create_directories(dir_.File("..data/cluster-a"));
  std::ofstream(dir_.File("..data/cluster-a/tls.crt")) << pair.cert_pem;
  std::ofstream(dir_.File("..data/cluster-a/tls.key")) << pair.key_pem;
  fs::create_symlink("..data/cluster-a", dir_.File("cluster-a"));
  CertificateFolder folder(dir());
  ASSERT_TRUE(folder.Scan(Now()).error.ok());
  EXPECT_THAT(Served(folder), ElementsAre("cluster-a"));
}

TEST_F(CertificateFolderTest, EntriesThatAreNotPairsAreRefusedAndReportedOnce) {
  WritePair("cluster-a", Leaf("a.hcp.eastus.azmk8s.io"));
  dir_.Write("stray.crt", Leaf("s.hcp.eastus.azmk8s.io").cert_pem);
  fs::create_directories(dir_.File("bad name"));
  fs::create_directories(dir_.File("half"));
  dir_.Write("half/tls.crt", Leaf("h.hcp.eastus.azmk8s.io").cert_pem);
  CertificateFolder folder(dir());
  CertificateFolderScan scan = folder.Scan(Now());
  EXPECT_THAT(Served(folder), ElementsAre("cluster-a"));
  ASSERT_EQ(scan.refused.size(), 3u);
  EXPECT_EQ(scan.refused[0].name, "bad name");
  EXPECT_THAT(scan.refused[0].error, HasSubstr("is not a pair's name"));
  EXPECT_EQ(scan.refused[1].name, "half");
  EXPECT_THAT(scan.refused[1].error, HasSubstr("tls.key"));
  EXPECT_EQ(scan.refused[2].name, "stray.crt");
  EXPECT_THAT(scan.refused[2].error, HasSubstr("is not a folder holding tls.crt and tls.key"));
  EXPECT_EQ(folder.Refused().size(), 3u);
  // The same refusals again are not news; they stay refused until fixed.
  EXPECT_THAT(folder.Scan(Now()).refused, IsEmpty());
  EXPECT_EQ(folder.Refused().size(), 3u);

  dir_.Write("half/tls.key", "");  // still no key
  EXPECT_THAT(folder.Scan(Now()).refused.at(0).error, HasSubstr("no usable PEM private key"));
}

TEST_F(CertificateFolderTest, PairsAreAddedReplacedAndRemovedBetweenScans) {
  WritePair("cluster-a", Leaf("a.hcp.eastus.azmk8s.io"));
  CertificateFolder folder(dir());
  folder.Scan(Now());
  std::shared_ptr<const ServingPair> first = folder.Pairs().at(0);

  WritePair("cluster-b", Leaf("b.hcp.eastus.azmk8s.io"));
  CertificateFolderScan added = folder.Scan(Now());
  EXPECT_TRUE(added.changed);
  EXPECT_THAT(added.added, ElementsAre("cluster-b"));
  EXPECT_EQ(folder.Pairs().at(0), first) << "an unchanged pair is the same object";

  WritePair("cluster-a", Leaf("a2.hcp.eastus.azmk8s.io"));
  CertificateFolderScan replaced = folder.Scan(Now());
  EXPECT_THAT(replaced.replaced, ElementsAre("cluster-a"));
  EXPECT_EQ(folder.Pairs().at(0)->dns_names, std::vector<std::string>{"a2.hcp.eastus.azmk8s.io"});

  fs::remove_all(dir_.File("cluster-b"));
  CertificateFolderScan removed = folder.Scan(Now());
  EXPECT_THAT(removed.removed, ElementsAre("cluster-b"));
  EXPECT_THAT(Served(folder), ElementsAre("cluster-a"));
}

TEST_F(CertificateFolderTest, TheSameBytesUnderNewInodesAreNotParsedAgain) {
  CertAndKey pair = Leaf("a.hcp.eastus.azmk8s.io");
  WritePair("cluster-a", pair);
  CertificateFolder folder(dir());
  folder.Scan(Now());
  std::shared_ptr<const ServingPair> first = folder.Pairs().at(0);
  WritePair("cluster-a", pair);  // a Secret volume's update of another key: every file renamed
  CertificateFolderScan scan = folder.Scan(Now());
  EXPECT_FALSE(scan.changed);
  EXPECT_EQ(folder.Pairs().at(0), first);
}

TEST_F(CertificateFolderTest, ABadPairNeverReplacesAGoodOne) {
  CertAndKey good = Leaf("a.hcp.eastus.azmk8s.io");
  WritePair("cluster-a", good);
  CertificateFolder folder(dir());
  folder.Scan(Now());
  std::shared_ptr<const ServingPair> first = folder.Pairs().at(0);

  // Half-written: the new certificate with the old key.
  WriteFile("cluster-a", "tls.crt", Leaf("a.hcp.eastus.azmk8s.io").cert_pem);
  CertificateFolderScan scan = folder.Scan(Now());
  EXPECT_FALSE(scan.changed);
  ASSERT_EQ(scan.refused.size(), 1u);
  EXPECT_TRUE(scan.refused[0].kept_previous);
  EXPECT_THAT(scan.refused[0].error, HasSubstr("does not match"));
  EXPECT_EQ(folder.Pairs().at(0), first) << "still serving the previous pair";
  EXPECT_EQ(folder.Refused().size(), 1u);

  // Put back as it was: no change, and no refusal any more.
  WritePair("cluster-a", good);
  scan = folder.Scan(Now());
  EXPECT_FALSE(scan.changed);
  EXPECT_THAT(folder.Refused(), IsEmpty());
  EXPECT_EQ(folder.Pairs().at(0), first);

  // A bad new pair is never served.
  WriteFile("cluster-b", "tls.crt", "not a certificate");
  WriteFile("cluster-b", "tls.key", good.key_pem);
  scan = folder.Scan(Now());
  ASSERT_EQ(scan.refused.size(), 1u);
  EXPECT_FALSE(scan.refused[0].kept_previous);
  EXPECT_THAT(Served(folder), ElementsAre("cluster-a"));
}

TEST_F(CertificateFolderTest, AnExpiredReplacementKeepsThePairInUse) {
  WritePair("cluster-a", Leaf("a.hcp.eastus.azmk8s.io"));
  CertificateFolder folder(dir());
  folder.Scan(Now());
  LeafOptions expired;
  expired.dns_names = {"a.hcp.eastus.azmk8s.io"};
  expired.not_before = -std::chrono::hours(48);
  expired.not_after = -std::chrono::hours(1);
  WritePair("cluster-a", ca_.IssueLeaf(expired));
  CertificateFolderScan scan = folder.Scan(Now());
  ASSERT_EQ(scan.refused.size(), 1u);
  EXPECT_THAT(scan.refused[0].error, HasSubstr("expired"));
  EXPECT_EQ(folder.Pairs().size(), 1u);
}

TEST_F(CertificateFolderTest, TheCapKeepsPairsInUseAndAdmitsNewOnesInNameOrder) {
  CertificateFolderLimits limits;
  limits.max_pairs = 2;
  WritePair("b", Leaf("b.hcp.eastus.azmk8s.io"));
  CertificateFolder folder(dir(), limits);
  folder.Scan(Now());
  WritePair("a", Leaf("a.hcp.eastus.azmk8s.io"));
  WritePair("c", Leaf("c.hcp.eastus.azmk8s.io"));
  CertificateFolderScan scan = folder.Scan(Now());
  // "b" was served already; of the new ones "a" comes first.
  EXPECT_THAT(Served(folder), ElementsAre("a", "b"));
  ASSERT_EQ(scan.refused.size(), 1u);
  EXPECT_EQ(scan.refused[0].name, "c");
  EXPECT_THAT(scan.refused[0].error, HasSubstr("over the cap of 2 pairs"));
  EXPECT_THAT(folder.Scan(Now()).refused, IsEmpty()) << "reported once";

  // Room again: the refused pair is admitted without its files changing.
  fs::remove_all(dir_.File("b"));
  scan = folder.Scan(Now());
  EXPECT_THAT(scan.removed, ElementsAre("b"));
  EXPECT_THAT(scan.added, ElementsAre("c"));
  EXPECT_THAT(Served(folder), ElementsAre("a", "c"));
  EXPECT_THAT(folder.Refused(), IsEmpty());
}

TEST_F(CertificateFolderTest, AFileOverTheSizeCapIsRefused) {
  CertificateFolderLimits limits;
  limits.max_file_bytes = 1024;
  CertAndKey pair = Leaf("a.hcp.eastus.azmk8s.io");
  WriteFile("cluster-a", "tls.crt", pair.cert_pem + std::string(2048, '\n'));
  WriteFile("cluster-a", "tls.key", pair.key_pem);
  CertificateFolder folder(dir(), limits);
  CertificateFolderScan scan = folder.Scan(Now());
  ASSERT_EQ(scan.refused.size(), 1u);
  EXPECT_THAT(scan.refused[0].error, HasSubstr("larger than 1024 bytes"));
  EXPECT_THAT(folder.Pairs(), IsEmpty());
}

TEST_F(CertificateFolderTest, AFolderThatCannotBeListedChangesNothing) {
  WritePair("cluster-a", Leaf("a.hcp.eastus.azmk8s.io"));
  const std::string moved = dir() + "-moved";
  CertificateFolder folder(dir());
  folder.Scan(Now());
  fs::rename(dir(), moved);
  CertificateFolderScan scan = folder.Scan(Now());
  EXPECT_FALSE(scan.error.ok());
  EXPECT_THAT(scan.error.message(), HasSubstr("--tls-cert-dir"));
  EXPECT_FALSE(scan.changed);
  EXPECT_THAT(Served(folder), ElementsAre("cluster-a"));
  fs::rename(moved, dir());
}

}  // namespace
}  // namespace hotfix::service
