// Which pair a ClientHello gets (server_certificates.h): exact names, one-label wildcards,
// case and trailing dots, the address of a client that sent no name, and the pairs refused.
#include "service/transport/server_certificates.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "test_certs.h"

namespace hotfix::service {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testsupport::CertAndKey;
using testsupport::LeafOptions;
using testsupport::TestCa;

constexpr char kClusterA[] = "myaks-dns-12345678.hcp.eastus.azmk8s.io";
constexpr char kClusterB[] = "other-dns-87654321.hcp.eastus.azmk8s.io";
constexpr char kRegionWildcard[] = "*.hcp.westus2.azmk8s.io";

const std::string kTenOne("\x0a\x00\x00\x01", 4);  // 10.0.0.1
const std::string kTenTwo("\x0a\x00\x00\x02", 4);

int64_t Now() { return static_cast<int64_t>(time(nullptr)); }

class ServerCertificatesTest : public ::testing::Test {
 protected:
  // A pair named `name` for these SANs, its CN the name (to tell which was served).
  std::shared_ptr<const ServingPair> Pair(const std::string& name, std::vector<std::string> dns,
                                          std::vector<std::string> ips = {},
                                          std::chrono::hours lifetime = std::chrono::hours(24)) {
    LeafOptions options;
    options.common_name = name;
    options.dns_names = std::move(dns);
    options.ip_addresses = std::move(ips);
    options.not_after = lifetime;
    CertAndKey leaf = ca_.IssueLeaf(options);
    auto pair = ParseServingPair(name, leaf.cert_pem, leaf.key_pem, Now());
    EXPECT_TRUE(pair.ok()) << pair.status().message();
    return pair.ok() ? *pair : nullptr;
  }
  static std::string NameOf(const ServingPair* pair) { return pair ? pair->name : "(none)"; }

  TestCa ca_ = TestCa::Create("cluster-ca");
};

TEST_F(ServerCertificatesTest, AnExactNameSelectsItsPairWhateverItsCaseOrTrailingDot) {
  CertificateIndex index({Pair("a", {kClusterA}), Pair("b", {kClusterB})});
  EXPECT_EQ(NameOf(index.ForServerName(kClusterA)), "a");
  EXPECT_EQ(NameOf(index.ForServerName(kClusterB)), "b");
  EXPECT_EQ(NameOf(index.ForServerName("MyAKS-DNS-12345678.HCP.EastUS.azmk8s.io")), "a");
  EXPECT_EQ(NameOf(index.ForServerName(std::string(kClusterA) + ".")), "a");
  EXPECT_EQ(index.ForServerName(std::string(kClusterA) + ".."), nullptr) << "one dot only";
}

TEST_F(ServerCertificatesTest, AnUnknownNameSelectsNothingNeverAnotherClustersPair) {
  CertificateIndex index({Pair("a", {kClusterA})});
  EXPECT_EQ(index.ForServerName("unknown-dns-1.hcp.eastus.azmk8s.io"), nullptr);
  EXPECT_EQ(index.ForServerName("myaks-dns-12345678.hcp.eastus.azmk8s.io.evil"), nullptr);
  EXPECT_EQ(index.ForServerName("x" + std::string(kClusterA)), nullptr);
  EXPECT_EQ(index.ForServerName(""), nullptr);
  EXPECT_EQ(index.ForServerName(std::string(300, 'a')), nullptr);
}

TEST_F(ServerCertificatesTest, AWildcardStandsForExactlyOneWholeLabel) {
  CertificateIndex index({Pair("region", {kRegionWildcard})});
  EXPECT_EQ(NameOf(index.ForServerName("c1-dns-1.hcp.westus2.azmk8s.io")), "region");
  EXPECT_EQ(NameOf(index.ForServerName("C2.HCP.WESTUS2.AZMK8S.IO.")), "region");
  EXPECT_EQ(index.ForServerName("hcp.westus2.azmk8s.io"), nullptr) << "the bare domain";
  EXPECT_EQ(index.ForServerName("a.b.hcp.westus2.azmk8s.io"), nullptr) << "two labels";
  EXPECT_EQ(index.ForServerName(".hcp.westus2.azmk8s.io"), nullptr) << "an empty label";
  EXPECT_EQ(index.ForServerName("*.hcp.westus2.azmk8s.io"), nullptr) << "a star is no name";
  EXPECT_EQ(index.ForServerName("c1.hcp.eastus.azmk8s.io"), nullptr) << "another region";
}

TEST_F(ServerCertificatesTest, AnExactNameWinsOverAWildcard) {
  CertificateIndex index(
      {Pair("region", {kRegionWildcard}), Pair("one", {"c1-dns-1.hcp.westus2.azmk8s.io"})});
  EXPECT_EQ(NameOf(index.ForServerName("c1-dns-1.hcp.westus2.azmk8s.io")), "one");
  EXPECT_EQ(NameOf(index.ForServerName("c2-dns-2.hcp.westus2.azmk8s.io")), "region");
}

TEST_F(ServerCertificatesTest, PartialAndTopLevelWildcardsSelectNothing) {
  auto pair = Pair("mixed", {kClusterA, "f*.hcp.eastus.azmk8s.io", "*", "*.io",
                             "a.*.eastus.azmk8s.io", "**.eastus.azmk8s.io"});
  EXPECT_THAT(pair->dns_names, ElementsAre(kClusterA));
  EXPECT_EQ(pair->unusable_names.size(), 5u);
  CertificateIndex index({pair});
  EXPECT_EQ(index.ForServerName("foo.hcp.eastus.azmk8s.io"), nullptr);
  EXPECT_EQ(index.ForServerName("azmk8s.io"), nullptr);
  EXPECT_EQ(index.ForServerName("a.x.eastus.azmk8s.io"), nullptr);
}

TEST_F(ServerCertificatesTest, ANameTwoPairsCarrySelectsTheOneExpiringLast) {
  // A rotation: the new pair beside the old, whichever name sorts first.
  auto old_pair = Pair("a-new", {kClusterA}, {}, std::chrono::hours(24));
  auto new_pair = Pair("a-old", {kClusterA}, {}, std::chrono::hours(48));
  CertificateIndex index({old_pair, new_pair});
  EXPECT_EQ(NameOf(index.ForServerName(kClusterA)), "a-old");
  EXPECT_EQ(index.shared_names(), 1u);
  CertificateIndex reversed({new_pair, old_pair});
  EXPECT_EQ(NameOf(reversed.ForServerName(kClusterA)), "a-old");
}

TEST_F(ServerCertificatesTest, AClientWithoutANameGetsThePairForTheAddressItDialed) {
  CertificateIndex index({Pair("a", {kClusterA}, {"10.0.0.1"}), Pair("b", {kClusterB})});
  EXPECT_EQ(NameOf(index.ForAddress(kTenOne)), "a");
  EXPECT_EQ(index.ForAddress(kTenTwo), nullptr);
  // A dual-stack listener sees 10.0.0.1 as ::ffff:10.0.0.1.
  const std::string mapped = std::string(10, '\0') + "\xff\xff" + kTenOne;
  EXPECT_EQ(NameOf(index.ForAddress(mapped)), "a");
  // Some clients send the IP they dialed as the name.
  EXPECT_EQ(NameOf(index.ForServerName("10.0.0.1")), "a");
  EXPECT_EQ(index.ForServerName("10.0.0.2"), nullptr);
}

TEST_F(ServerCertificatesTest, AnAddressTwoClustersShareSelectsNeither) {
  // Private apiservers of two customers may well have the same address.
  CertificateIndex shared({Pair("a", {kClusterA}, {"10.0.0.1"}),
                           Pair("b", {kClusterB}, {"10.0.0.1"}),
                           Pair("c", {"c.hcp.eastus.azmk8s.io"}, {"10.0.0.1"})});
  EXPECT_EQ(shared.ForAddress(kTenOne), nullptr);
  EXPECT_EQ(NameOf(shared.ForServerName(kClusterA)), "a") << "names still select";
  // One cluster's two pairs (a rotation) carry the same names: the one expiring last.
  CertificateIndex rotation({Pair("a1", {kClusterA}, {"10.0.0.1"}, std::chrono::hours(48)),
                             Pair("a2", {kClusterA}, {"10.0.0.1"}, std::chrono::hours(24))});
  EXPECT_EQ(NameOf(rotation.ForAddress(kTenOne)), "a1");
}

TEST_F(ServerCertificatesTest, APairWithAChainKeepsItsIntermediates) {
  TestCa intermediate = ca_.IssueIntermediate("cluster-intermediate");
  LeafOptions options;
  options.dns_names = {kClusterA};
  CertAndKey leaf = intermediate.IssueLeaf(options);
  auto pair = ParseServingPair("chained", leaf.cert_pem, leaf.key_pem, Now());
  ASSERT_TRUE(pair.ok()) << pair.status().message();
  EXPECT_EQ(sk_X509_num((*pair)->chain.get()), 1);
  EXPECT_GT((*pair)->not_after, Now());
}

TEST_F(ServerCertificatesTest, RefusesPairsThatCannotServe) {
  LeafOptions options;
  options.dns_names = {kClusterA};
  CertAndKey good = ca_.IssueLeaf(options);
  CertAndKey other = ca_.IssueLeaf(options);
  auto refused = [&](std::string_view cert, std::string_view key) {
    auto pair = ParseServingPair("x", cert, key, Now());
    EXPECT_FALSE(pair.ok());
    return pair.ok() ? std::string() : pair.status().message();
  };
  EXPECT_THAT(refused("garbage", good.key_pem), HasSubstr("no PEM certificate"));
  EXPECT_THAT(refused(good.cert_pem, "garbage"), HasSubstr("no usable PEM private key"));
  EXPECT_THAT(refused(good.cert_pem, other.key_pem), HasSubstr("does not match"));

  LeafOptions expired = options;
  expired.not_before = -std::chrono::hours(48);
  expired.not_after = -std::chrono::hours(1);
  CertAndKey old = ca_.IssueLeaf(expired);
  EXPECT_THAT(refused(old.cert_pem, old.key_pem), HasSubstr("expired"));

  // The common name is never a name a client checks (Go since 1.15): no SAN, no pair.
  LeafOptions cn_only;
  cn_only.common_name = kClusterA;
  CertAndKey bare = ca_.IssueLeaf(cn_only);
  EXPECT_THAT(refused(bare.cert_pem, bare.key_pem), HasSubstr("no DNS or IP subjectAltName"));
  LeafOptions partial;
  partial.dns_names = {"f*.hcp.eastus.azmk8s.io"};
  CertAndKey wild = ca_.IssueLeaf(partial);
  EXPECT_THAT(refused(wild.cert_pem, wild.key_pem), HasSubstr("unusable: f*.hcp.eastus.azmk8s.io"));
  LeafOptions crowded;
  for (size_t i = 0; i <= kMaxNamesPerPair; ++i) {
    crowded.dns_names.push_back("c" + std::to_string(i) + ".hcp.eastus.azmk8s.io");
  }
  CertAndKey many = ca_.IssueLeaf(crowded);
  EXPECT_THAT(refused(many.cert_pem, many.key_pem),
              HasSubstr("257 subjectAltNames, more than 256"));
}

TEST_F(ServerCertificatesTest, NormalizeServerName) {
  EXPECT_EQ(NormalizeServerName("MyAKS.HCP.eastus.azmk8s.io."), "myaks.hcp.eastus.azmk8s.io");
  EXPECT_EQ(NormalizeServerName("."), "");
  EXPECT_EQ(NormalizeServerName(std::string(254, 'a')), "");
  EXPECT_EQ(NormalizeServerName(std::string(253, 'a')), std::string(253, 'a'));
}

}  // namespace
}  // namespace hotfix::service
