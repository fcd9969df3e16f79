// TlsServerContext in process: real handshakes between an OpenSSL client and the service's
// SSL_CTX over a BIO pair (no sockets), for both shapes: one pair for every client, and a
// folder whose pairs are chosen by the ClientHello's server name, with an unknown name
// refused in the handshake (unrecognized_name) and reloads picked up by new handshakes while
// others run on other threads.
#include "service/transport/tls_server_context.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/openssl.h"
#include "temp_dir.h"
#include "test_certs.h"

namespace hotfix::service {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testsupport::CertAndKey;
using testsupport::LeafOptions;
using testsupport::TempDir;
using testsupport::TestCa;

constexpr char kClusterA[] = "myaks-dns-12345678.hcp.eastus.azmk8s.io";
constexpr char kClusterB[] = "other-dns-87654321.hcp.eastus.azmk8s.io";
constexpr char kLegacy[] = "aks-security-patch.data.mcr.microsoft.com";

struct Handshake {
  bool ok = false;
  std::string served_cn;      // the server leaf's common name
  int certificates_sent = 0;  // the Certificate message's length
  std::string alpn;
  std::string client_error;
  std::optional<std::string> refused;  // TlsServerContext::RefusedServerName
};

// A client that offers what a node offers (ALPN aks-live-patching, h2), trusts `ca_pem` and
// checks `verify_name` (a DNS name, or an IP literal against the IP SANs) as Go's verifier and
// our dialer do; SNI `sni` (none when empty). Pumped against the server over a BIO pair.
Handshake Connect(SSL_CTX* server_ctx, const std::string& ca_pem, const std::string& sni,
                  const std::string& verify_name,
                  const std::optional<sockaddr_storage>& arrived_on = std::nullopt) {
  Handshake result;
  ossl::SslCtxPtr client_ctx(SSL_CTX_new(TLS_client_method()));
  X509_STORE* store = SSL_CTX_get_cert_store(client_ctx.get());
  auto certs = ossl::ParsePemCertificates(ca_pem);
  for (const auto& c : *certs) X509_STORE_add_cert(store, c.get());
  SSL_CTX_set_verify(client_ctx.get(), SSL_VERIFY_PEER, nullptr);
  static const unsigned char kAlpn[] =
      "\x11"
      "aks-live-patching"
      "\x02"
      "h2";
  SSL_CTX_set_alpn_protos(client_ctx.get(), kAlpn, sizeof kAlpn - 1);
  ossl::SslPtr client(SSL_new(client_ctx.get()));
  ossl::SslPtr server(SSL_new(server_ctx));
  if (!sni.empty()) SSL_set_tlsext_host_name(client.get(), sni.c_str());
  X509_VERIFY_PARAM* param = SSL_get0_param(client.get());
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (X509_VERIFY_PARAM_set1_ip_asc(param, verify_name.c_str()) != 1) {
    ERR_clear_error();
    X509_VERIFY_PARAM_set1_host(param, verify_name.c_str(), 0);
  }
  if (arrived_on) TlsServerContext::SetArrivalAddress(server.get(), *arrived_on);
  BIO* client_bio = nullptr;
  BIO* server_bio = nullptr;
  BIO_new_bio_pair(&client_bio, 0, &server_bio, 0);
  SSL_set_bio(client.get(), client_bio, client_bio);
  SSL_set_bio(server.get(), server_bio, server_bio);
  SSL_set_connect_state(client.get());
  SSL_set_accept_state(server.get());
  bool client_done = false, server_done = false, failed = false;
  for (int round = 0; round < 50 && !(client_done && server_done) && !failed; ++round) {
    if (!client_done) {
      int rv = SSL_do_handshake(client.get());
      if (rv == 1) {
        client_done = true;
      } else if (int e = SSL_get_error(client.get(), rv); e != SSL_ERROR_WANT_READ) {
        result.client_error = ossl::DrainErrorsOr("client failed");
        failed = true;
      }
    }
    if (!server_done) {
      int rv = SSL_do_handshake(server.get());
      if (rv == 1) {
        server_done = true;
      } else if (int e = SSL_get_error(server.get(), rv); e != SSL_ERROR_WANT_READ) {
        ERR_clear_error();
        // The alert is in the BIO: let the client read it.
        if (!failed && !client_done) {
          SSL_do_handshake(client.get());
          result.client_error = ossl::DrainErrorsOr("client failed");
        }
        failed = true;
      }
    }
  }
  result.refused = TlsServerContext::RefusedServerName(server.get());
  result.ok = client_done && server_done && !failed;
  if (result.ok) {
    if (STACK_OF(X509)* sent = SSL_get_peer_cert_chain(client.get())) {
      result.certificates_sent = sk_X509_num(sent);
    }
    if (X509* peer = SSL_get0_peer_certificate(client.get())) {
      char cn[256] = "";
      X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
      result.served_cn = cn;
    }
    const unsigned char* alpn = nullptr;
    unsigned int alpn_len = 0;
    SSL_get0_alpn_selected(client.get(), &alpn, &alpn_len);
    result.alpn.assign(reinterpret_cast<const char*>(alpn), alpn_len);
  }
  ERR_clear_error();
  return result;
}

sockaddr_storage Ipv4(const char* text) {
  sockaddr_storage address{};
  auto* in = reinterpret_cast<sockaddr_in*>(&address);
  in->sin_family = AF_INET;
  inet_pton(AF_INET, text, &in->sin_addr);
  return address;
}

class TlsServerContextTest : public ::testing::Test {
 protected:
  // DIR/<name>/tls.{crt,key}: a leaf of `ca` (default: cluster A's CA) for these SANs, whose
  // CN is `name`; each file renamed into place as a Secret volume's update does.
  void WritePair(const std::string& name, std::vector<std::string> dns,
                 std::vector<std::string> ips = {}, const TestCa* ca = nullptr) {
    LeafOptions options;
    options.common_name = name;
    options.dns_names = std::move(dns);
    options.ip_addresses = std::move(ips);
    CertAndKey leaf = (ca ? *ca : ca_a_).IssueLeaf(options);
    fs::create_directories(dir_.File(name));
    for (const auto& [file, bytes] :
         {std::pair{"tls.crt", leaf.cert_pem}, {"tls.key", leaf.key_pem}}) {
      const fs::path tmp = dir_.File(name) / (std::string(".") + file);
      std::ofstream(tmp) << bytes;
      fs::rename(tmp, dir_.File(name) / file);
    }
  }
  std::unique_ptr<TlsServerContext> LoadFolder() {
    auto tls = TlsServerContext::LoadFolder(dir_.path().string(), &log_);
    EXPECT_TRUE(tls.ok()) << tls.status().message();
    return tls.ok() ? std::move(*tls) : nullptr;
  }
  SSL_CTX* Ctx(const TlsServerContext& tls) {
    uint64_t generation = 0;
    held_.push_back(tls.Current(&generation));
    return held_.back().get();
  }

  TestCa ca_a_ = TestCa::Create("cluster-a-ca");
  TestCa ca_b_ = TestCa::Create("cluster-b-ca");
  TempDir dir_{"lp-tls-folder"};
  Logger log_;
  std::vector<std::shared_ptr<SSL_CTX>> held_;
};

TEST_F(TlsServerContextTest, EachServerNameGetsItsOwnClustersCertificate) {
  WritePair("cluster-a", {kClusterA});
  WritePair("cluster-b", {kClusterB}, {}, &ca_b_);
  WritePair("westus2", {"*.hcp.westus2.azmk8s.io"});
  auto tls = LoadFolder();
  ASSERT_NE(tls, nullptr);
  EXPECT_TRUE(tls->selects_by_server_name());
  EXPECT_EQ(tls->certificates(), 3u);
  EXPECT_TRUE(tls->last_reload_successful());

  Handshake a = Connect(Ctx(*tls), ca_a_.cert_pem(), kClusterA, kClusterA);
  EXPECT_TRUE(a.ok) << a.client_error;
  EXPECT_EQ(a.served_cn, "cluster-a");
  EXPECT_EQ(a.alpn, "h2") << "ALPN stays h2";
  Handshake b = Connect(Ctx(*tls), ca_b_.cert_pem(), kClusterB, kClusterB);
  EXPECT_TRUE(b.ok) << b.client_error;
  EXPECT_EQ(b.served_cn, "cluster-b");
  Handshake upper =
      Connect(Ctx(*tls), ca_a_.cert_pem(), "MYAKS-DNS-12345678.HCP.EASTUS.AZMK8S.IO", kClusterA);
  EXPECT_TRUE(upper.ok) << upper.client_error;
  Handshake wild = Connect(Ctx(*tls), ca_a_.cert_pem(), "c9-dns-9.hcp.westus2.azmk8s.io",
                           "c9-dns-9.hcp.westus2.azmk8s.io");
  EXPECT_TRUE(wild.ok) << wild.client_error;
  EXPECT_EQ(wild.served_cn, "westus2");
}

TEST_F(TlsServerContextTest, AnUnknownServerNameIsRefusedInTheHandshake) {
  WritePair("cluster-a", {kClusterA});
  auto tls = LoadFolder();
  ASSERT_NE(tls, nullptr);
  for (const char* name : {kClusterB, kLegacy, "a.b.hcp.westus2.azmk8s.io"}) {
    Handshake h = Connect(Ctx(*tls), ca_a_.cert_pem(), name, name);
    EXPECT_FALSE(h.ok) << name;
    EXPECT_TRUE(h.served_cn.empty()) << "no certificate was shown";
    EXPECT_THAT(h.client_error, HasSubstr("unrecognized name")) << name;
    ASSERT_TRUE(h.refused.has_value()) << name;
    EXPECT_THAT(*h.refused, HasSubstr(std::string("server name \"") + name + "\" matches no"));
  }
}

TEST_F(TlsServerContextTest, WithoutAServerNameTheAddressDialedDecides) {
  WritePair("cluster-a", {kClusterA}, {"10.0.0.1"});
  WritePair("cluster-b", {kClusterB}, {"10.0.0.2"}, &ca_b_);
  auto tls = LoadFolder();
  ASSERT_NE(tls, nullptr);
  // A node that dialed 10.0.0.1 (the PROXY header's destination) and checks the IP SAN.
  Handshake a = Connect(Ctx(*tls), ca_a_.cert_pem(), "", "10.0.0.1", Ipv4("10.0.0.1"));
  EXPECT_TRUE(a.ok) << a.client_error;
  EXPECT_EQ(a.served_cn, "cluster-a");
  Handshake none = Connect(Ctx(*tls), ca_a_.cert_pem(), "", "10.0.0.3", Ipv4("10.0.0.3"));
  EXPECT_FALSE(none.ok);
  EXPECT_THAT(none.client_error, HasSubstr("unrecognized name"));
  ASSERT_TRUE(none.refused.has_value());
  EXPECT_THAT(*none.refused, HasSubstr("no server name (SNI)"));
  EXPECT_THAT(*none.refused, HasSubstr("10.0.0.3"));
  // No socket and no PROXY header: no address, so nothing is served.
  Handshake unknown = Connect(Ctx(*tls), ca_a_.cert_pem(), "", kClusterA);
  EXPECT_FALSE(unknown.ok);
}

TEST_F(TlsServerContextTest, OnePairServesEveryNameAsBefore) {
  CertAndKey pair = testsupport::IssueLocalServerCert(ca_a_, {kClusterA});
  testsupport::PemPaths paths = testsupport::WritePemFiles(dir_.path(), "single", pair);
  auto tls = TlsServerContext::Load(paths.cert.string(), paths.key.string());
  ASSERT_TRUE(tls.ok()) << tls.status().message();
  EXPECT_FALSE((*tls)->selects_by_server_name());
  EXPECT_EQ((*tls)->certificates(), 1u);
  Handshake h = Connect(Ctx(**tls), ca_a_.cert_pem(), kClusterA, kClusterA);
  EXPECT_TRUE(h.ok) << h.client_error;
  // Any other name gets the same certificate (which that client's check then refuses).
  Handshake other = Connect(Ctx(**tls), ca_a_.cert_pem(), kClusterB, kClusterA);
  EXPECT_TRUE(other.ok) << other.client_error;
  EXPECT_FALSE(other.refused.has_value());

  // A changed pair that does not load is counted, and the previous one keeps serving.
  std::ofstream(paths.key, std::ios::trunc) << "garbage";
  (*tls)->ReloadIfChanged(&log_);
  EXPECT_FALSE((*tls)->last_reload_successful());
  EXPECT_EQ((*tls)->rejected_certificates(), 1u);
  EXPECT_TRUE(Connect(Ctx(**tls), ca_a_.cert_pem(), kClusterA, kClusterA).ok);
  testsupport::WritePemFiles(dir_.path(), "single", pair);
  (*tls)->ReloadIfChanged(&log_);
  EXPECT_TRUE((*tls)->last_reload_successful());
}

// The Certificate message carries the pair's file, never a chain OpenSSL built: a leaf alone
// is sent alone even when its issuer is in the context's store, where OpenSSL's automatic
// chain building would find it (and spend a chain verification on every handshake looking).
TEST_F(TlsServerContextTest, TheChainSentIsThePairsFileNothingBuilt) {
  CertAndKey pair = testsupport::IssueLocalServerCert(ca_a_, {kClusterA});
  testsupport::PemPaths paths = testsupport::WritePemFiles(dir_.path(), "single", pair);
  auto tls = TlsServerContext::Load(paths.cert.string(), paths.key.string());
  ASSERT_TRUE(tls.ok()) << tls.status().message();
  StatusOr<std::vector<ossl::X509Ptr>> ca = ossl::ParsePemCertificates(ca_a_.cert_pem());
  ASSERT_TRUE(ca.ok());
  ASSERT_EQ(X509_STORE_add_cert(SSL_CTX_get_cert_store(Ctx(**tls)), ca->front().get()), 1);
  Handshake alone = Connect(Ctx(**tls), ca_a_.cert_pem(), kClusterA, kClusterA);
  ASSERT_TRUE(alone.ok) << alone.client_error;
  EXPECT_EQ(alone.certificates_sent, 1);

  // The file with its issuer after the leaf: both go.
  std::ofstream(paths.cert, std::ios::trunc) << pair.cert_pem << ca_a_.cert_pem();
  auto with_issuer = TlsServerContext::Load(paths.cert.string(), paths.key.string());
  ASSERT_TRUE(with_issuer.ok()) << with_issuer.status().message();
  Handshake both = Connect(Ctx(**with_issuer), ca_a_.cert_pem(), kClusterA, kClusterA);
  ASSERT_TRUE(both.ok) << both.client_error;
  EXPECT_EQ(both.certificates_sent, 2);
}

TEST_F(TlsServerContextTest, AReloadAddsReplacesAndRemovesPairsForNewHandshakes) {
  WritePair("cluster-a", {kClusterA});
  auto tls = LoadFolder();
  ASSERT_NE(tls, nullptr);
  SSL_CTX* before = Ctx(*tls);
  const uint64_t generation = tls->generation();
  EXPECT_FALSE(Connect(before, ca_b_.cert_pem(), kClusterB, kClusterB).ok);

  WritePair("cluster-b", {kClusterB}, {}, &ca_b_);
  tls->ReloadIfChanged(&log_);
  EXPECT_GT(tls->generation(), generation);
  EXPECT_EQ(tls->certificates(), 2u);
  SSL_CTX* after = Ctx(*tls);
  Handshake b = Connect(after, ca_b_.cert_pem(), kClusterB, kClusterB);
  EXPECT_TRUE(b.ok) << b.client_error;
  // The context a loop still holds keeps answering as it did, until the loop picks up the new.
  EXPECT_TRUE(Connect(before, ca_a_.cert_pem(), kClusterA, kClusterA).ok);
  EXPECT_FALSE(Connect(before, ca_b_.cert_pem(), kClusterB, kClusterB).ok);

  // A bad replacement keeps the pair in use, and says so.
  std::ofstream(dir_.File("cluster-b") / "tls.crt", std::ios::trunc) << "garbage";
  const uint64_t before_bad = tls->generation();
  tls->ReloadIfChanged(&log_);
  EXPECT_EQ(tls->generation(), before_bad) << "nothing served changed";
  EXPECT_FALSE(tls->last_reload_successful());
  EXPECT_EQ(tls->rejected_certificates(), 1u);
  EXPECT_TRUE(Connect(Ctx(*tls), ca_b_.cert_pem(), kClusterB, kClusterB).ok);

  fs::remove_all(dir_.File("cluster-b"));
  tls->ReloadIfChanged(&log_);
  EXPECT_TRUE(tls->last_reload_successful());
  EXPECT_EQ(tls->certificates(), 1u);
  Handshake gone = Connect(Ctx(*tls), ca_b_.cert_pem(), kClusterB, kClusterB);
  EXPECT_FALSE(gone.ok);
  EXPECT_TRUE(gone.refused.has_value());
  ASSERT_EQ(tls->PairExpiries().size(), 1u);
  EXPECT_EQ(tls->PairExpiries()[0].first, "cluster-a");
  EXPECT_EQ(tls->not_after(), tls->PairExpiries()[0].second);
}

TEST_F(TlsServerContextTest, HandshakesOnManyThreadsWhileTheFolderReloads) {
  WritePair("cluster-a", {kClusterA});
  auto tls = LoadFolder();
  ASSERT_NE(tls, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, handshakes{0};
  std::vector<std::thread> loops;
  for (int t = 0; t < 3; ++t) {
    // As an event loop does: the context of the generation it last saw, renewed when it moves.
    loops.emplace_back([&] {
      uint64_t seen = 0;
      std::shared_ptr<SSL_CTX> ctx = tls->Current(&seen);
      while (!stop.load()) {
        if (tls->generation() != seen) ctx = tls->Current(&seen);
        if (!Connect(ctx.get(), ca_a_.cert_pem(), kClusterA, kClusterA).ok) ++failures;
        ++handshakes;
      }
    });
  }
  for (int i = 0; i < 20; ++i) {
    WritePair("cluster-" + std::to_string(i % 4 + 2),
              {"c" + std::to_string(i) + ".hcp.eastus.azmk8s.io"});
    if (i % 5 == 4) fs::remove_all(dir_.File("cluster-" + std::to_string(i % 4 + 2)));
    tls->ReloadIfChanged(&log_);
  }
  while (handshakes.load() < 30) std::this_thread::yield();
  stop = true;
  for (auto& t : loops) t.join();
  EXPECT_EQ(failures.load(), 0) << "cluster A was served throughout";
}

TEST_F(TlsServerContextTest, AFolderWithNothingToServeIsRefusedAtStart) {
  auto empty = TlsServerContext::LoadFolder(dir_.path().string(), &log_);
  EXPECT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("no pair in it loads"));
  fs::create_directories(dir_.File("broken"));
  std::ofstream(dir_.File("broken") / "tls.crt") << "garbage";
  std::ofstream(dir_.File("broken") / "tls.key") << "garbage";
  auto broken = TlsServerContext::LoadFolder(dir_.path().string(), &log_);
  EXPECT_FALSE(broken.ok());
  EXPECT_THAT(broken.status().message(), HasSubstr("broken"));
  auto missing = TlsServerContext::LoadFolder(dir_.File("nope").string(), &log_);
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("--tls-cert-dir"));
}

}  // namespace
}  // namespace hotfix::service
