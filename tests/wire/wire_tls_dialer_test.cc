// DialTls against real TLS on loopback: tests/support's TlsPeer (it records each ClientHello's
// SNI and offered ALPN and picks a protocol), its CONNECT proxy, and a PKI made by its TestCa.
#include "wire/tls_dialer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "connect_proxy.h"
#include "ports.h"
#include "test_certs.h"
#include "tls_peer.h"

namespace hotfix::wire {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testsupport::CertAndKey;
using testsupport::ConnectProxy;
using testsupport::ConnectProxyMode;
using testsupport::KeyUsage;
using testsupport::LeafOptions;
using testsupport::TestCa;
using testsupport::TlsPeer;
using testsupport::TlsPeerAfterHandshake;
using testsupport::TlsPeerConnection;
using testsupport::TlsPeerMode;
using testsupport::TlsPeerOptions;
using namespace std::chrono_literals;

constexpr char kLpsName[] = "aks-security-patch.data.mcr.microsoft.com";
constexpr char kApiServer[] = "myaks-dns.hcp.eastus.azmk8s.io";

LeafOptions Leaf(std::string common_name, std::vector<std::string> dns_names) {
  LeafOptions leaf;
  leaf.common_name = std::move(common_name);
  leaf.dns_names = std::move(dns_names);
  return leaf;
}

LeafOptions Expired(LeafOptions leaf) {
  leaf.not_before = -48h;
  leaf.not_after = -24h;
  return leaf;
}

LeafOptions ClientOnly(LeafOptions leaf) {
  leaf.usage = KeyUsage::kClientAuth;
  return leaf;
}

struct Pki {
  TestCa ca = TestCa::Create("cluster CA");
  TestCa other_ca = TestCa::Create("someone else's CA");
  CertAndKey leaf = ca.IssueLeaf(Leaf(kLpsName, {kLpsName}));
  CertAndKey wrong_name = ca.IssueLeaf(Leaf("other", {"other.example.com"}));
  CertAndKey untrusted = other_ca.IssueLeaf(Leaf(kLpsName, {kLpsName}));
  CertAndKey expired = ca.IssueLeaf(Expired(Leaf(kLpsName, {kLpsName})));
  CertAndKey cn_only = ca.IssueLeaf(Leaf(kLpsName, {}));
  CertAndKey client_eku = ca.IssueLeaf(ClientOnly(Leaf(kLpsName, {kLpsName})));
  CertAndKey wildcard = ca.IssueLeaf(Leaf("w", {"*.data.mcr.microsoft.com"}));
  CertAndKey partial_wildcard = ca.IssueLeaf(Leaf("p", {"aks-*.data.mcr.microsoft.com"}));
};

const Pki& TestPki() {
  static const Pki* pki = new Pki();
  return *pki;
}

// A TLS server presenting `leaf`: by default it selects h2 when offered and echoes.
TlsPeerOptions Serving(const CertAndKey& leaf, TlsPeerMode mode = TlsPeerMode::kSelectH2Silent,
                       TlsPeerAfterHandshake after = TlsPeerAfterHandshake::kEcho) {
  TlsPeerOptions options;
  options.mode = mode;
  options.after = after;
  options.cert = leaf;
  return options;
}

// The one connection the peer saw, once its handshake ended.
TlsPeerConnection OnlyConnection(const TlsPeer& peer) {
  EXPECT_TRUE(peer.WaitForConnections(1, 5s));
  std::vector<TlsPeerConnection> connections = peer.connections();
  EXPECT_EQ(connections.size(), 1u);
  return connections.empty() ? TlsPeerConnection{} : connections[0];
}

// ---- Helpers. ----

TlsDialOptions Options(uint16_t port) {
  TlsDialOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.sni = kApiServer;
  o.alpn = {"aks-live-patching", "h2"};
  o.verify_name = kLpsName;
  o.ca_pem = TestPki().ca.cert_pem();
  return o;
}

template <typename T>
std::string Describe(const StatusOr<T>& s) {
  return s.ok() ? "OK" : s.status().message();
}

// ---- Success: what goes on the wire. ----

TEST(DialTls, ACancelledDialStopsBeforeTheHandshake) {
  TlsPeer server(Serving(TestPki().leaf));
  std::atomic<bool> cancelled{true};
  TlsDialOptions options = Options(server.port());
  options.cancelled = &cancelled;
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().message(), "dial cancelled");
  EXPECT_FALSE(OnlyConnection(server).client_hello);  // connected, but no ClientHello sent
}

TEST(DialTls, HandshakeSelectsH2AndSendsApiServerSni) {
  TlsPeer server(Serving(TestPki().leaf));
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  EXPECT_EQ((*stream)->selected_alpn(), "h2");
  EXPECT_EQ((*stream)->protocol_version(), "TLSv1.3");
  stream->reset();
  TlsPeerConnection hello = OnlyConnection(server);
  ASSERT_TRUE(hello.client_hello);
  EXPECT_EQ(hello.sni, kApiServer);
  EXPECT_THAT(hello.offered_alpn, ElementsAre("aks-live-patching", "h2"));
}

TEST(DialTls, NoSniForIpLiteralOrEmpty) {
  for (const char* sni : {"127.0.0.1", "::1", ""}) {
    TlsPeer server(Serving(TestPki().leaf));
    TlsDialOptions options = Options(server.port());
    options.sni = sni;
    auto stream = DialTls(options, Deadline::After(5s));
    ASSERT_TRUE(stream.ok()) << sni << ": " << Describe(stream);
    stream->reset();
    TlsPeerConnection hello = OnlyConnection(server);
    EXPECT_TRUE(hello.client_hello);
    EXPECT_EQ(hello.sni, "") << sni << " sent SNI " << hello.sni;
  }
}

TEST(DialTls, ResolvesHostNames) {
  TlsPeer server(Serving(TestPki().leaf));
  TlsDialOptions options = Options(server.port());
  options.host = "localhost";  // may resolve to ::1 first, where nothing listens
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  EXPECT_EQ((*stream)->selected_alpn(), "h2");
}

TEST(DialTls, WholeLabelWildcardAccepted) {
  TlsPeer server(Serving(TestPki().wildcard));
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  EXPECT_TRUE(stream.ok()) << Describe(stream);
}

// ---- Verification. ----

void ExpectVerificationFailure(const CertAndKey& leaf, const std::string& reason) {
  TlsPeer server(Serving(leaf));
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(stream.status().message(), "server certificate verification failed: " + reason);
}

TEST(DialTls, UntrustedCaRejected) {
  ExpectVerificationFailure(TestPki().untrusted, "unable to get local issuer certificate");
}

TEST(DialTls, WrongNameRejected) {
  ExpectVerificationFailure(TestPki().wrong_name, "hostname mismatch");
}

TEST(DialTls, ExpiredRejected) {
  ExpectVerificationFailure(TestPki().expired, "certificate has expired");
}

TEST(DialTls, CommonNameIsNotChecked) {
  // Go ignores the CN; a name only there does not verify.
  ExpectVerificationFailure(TestPki().cn_only, "hostname mismatch");
}

TEST(DialTls, PartialWildcardRejected) {
  ExpectVerificationFailure(TestPki().partial_wildcard, "hostname mismatch");
}

TEST(DialTls, ClientOnlyCertificateRejected) {
  ExpectVerificationFailure(TestPki().client_eku, "unsuitable certificate purpose");
}

TEST(DialTls, SystemRootsNotTrusted) {
  // The trust anchor is the other CA only: the leaf's own CA is unknown.
  TlsPeer server(Serving(TestPki().leaf));
  TlsDialOptions options = Options(server.port());
  options.ca_pem = TestPki().other_ca.cert_pem();
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kPermissionDenied);
}

TEST(DialTls, BundleTrustsEveryCertificate) {
  TlsPeer server(Serving(TestPki().untrusted));
  TlsDialOptions options = Options(server.port());
  options.ca_pem = TestPki().ca.cert_pem() + TestPki().other_ca.cert_pem();
  auto stream = DialTls(options, Deadline::After(5s));
  EXPECT_TRUE(stream.ok()) << Describe(stream);
}

// ---- ALPN and protocol version. ----

TEST(DialTls, NoAlpnSelectedRejected) {
  TlsPeer server(Serving(TestPki().leaf, TlsPeerMode::kNoAlpn));
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(stream.status().message(), "server selected ALPN none, need h2");
}

TEST(DialTls, OtherOfferedAlpnRejected) {
  TlsPeer server(Serving(TestPki().leaf, TlsPeerMode::kSelectAksLivePatching));
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(stream.status().message(), "server selected ALPN aks-live-patching, need h2");
}

TEST(DialTls, UnofferedHttp11Rejected) {
  TlsPeer server(Serving(TestPki().leaf, TlsPeerMode::kSelectHttp11));
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  // OpenSSL itself refuses a protocol the client did not offer.
  EXPECT_THAT(stream.status().message(), HasSubstr("TLS handshake with 127.0.0.1:"));
}

TEST(DialTls, Tls11OnlyServerRejected) {
  TlsPeer server(Serving(TestPki().leaf, TlsPeerMode::kTls11Only));
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(stream.status().message(), StartsWith("TLS handshake with 127.0.0.1:"));
}

// ---- Deadlines and unreachable peers. ----

TEST(DialTls, SilentServerHitsDeadline) {
  TlsPeerOptions accept_only;
  accept_only.mode = TlsPeerMode::kAcceptOnly;  // accepts, reads, never answers
  TlsPeer server(accept_only);
  const uint16_t port = server.port();
  auto start = std::chrono::steady_clock::now();
  auto stream = DialTls(Options(port), Deadline::After(300ms));
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(stream.status().message(),
            "TLS handshake with 127.0.0.1:" + std::to_string(port) + " timed out");
  EXPECT_GE(elapsed, 250ms);
  EXPECT_LT(elapsed, 3s);
}

TEST(DialTls, ConnectionRefused) {
  uint16_t port = testsupport::PickFreePort();
  auto stream = DialTls(Options(port), Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(stream.status().message(),
            "connecting to 127.0.0.1:" + std::to_string(port) + ": Connection refused");
}

TEST(DialTls, UnresolvableHost) {
  TlsDialOptions options = Options(443);
  options.host = "does-not-exist.invalid";
  auto stream = DialTls(options, Deadline::After(2s));
  ASSERT_FALSE(stream.ok());
  // Without DNS in the sandbox the lookup may also outlast the deadline.
  EXPECT_TRUE(stream.status().code() == Status::Code::kUnavailable ||
              stream.status().code() == Status::Code::kDeadlineExceeded)
      << stream.status().message();
  EXPECT_THAT(stream.status().message(), StartsWith("resolving does-not-exist.invalid"));
}

TEST(DialTls, ExpiredDeadlineFailsFast) {
  TlsPeer server(Serving(TestPki().leaf));
  auto stream = DialTls(Options(server.port()), Deadline::After(-1ms));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kDeadlineExceeded);
}

// ---- Options and the CA bundle. ----

TEST(DialTls, EmptyCaRefused) {
  TlsDialOptions options = Options(testsupport::PickFreePort());
  options.ca_pem = "";
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(stream.status().message(),
            "cluster CA unavailable; refusing to connect over unverified TLS");
}

TEST(DialTls, GarbageCaRefused) {
  TlsDialOptions options = Options(testsupport::PickFreePort());
  options.ca_pem = "this is not a certificate";
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(stream.status().message(), "failed to parse cluster CA PEM");
}

TEST(DialTls, BadOptionsRefused) {
  TlsDialOptions no_name = Options(testsupport::PickFreePort());
  no_name.verify_name = "";
  TlsDialOptions empty_alpn = Options(testsupport::PickFreePort());
  empty_alpn.alpn = {"h2", ""};
  TlsDialOptions no_host = Options(testsupport::PickFreePort());
  no_host.host = "";
  for (const auto& options : {no_name, empty_alpn, no_host}) {
    auto stream = DialTls(options, Deadline::After(5s));
    ASSERT_FALSE(stream.ok());
    EXPECT_EQ(stream.status().code(), Status::Code::kInvalidArgument) << stream.status().message();
  }
}

const char kBadBase64Block[] = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
const char kKeyBlock[] = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";

TEST(ParseTrustAnchors, CountsCertificatesSkippingOtherBlocks) {
  const Pki& pki = TestPki();
  auto one = ParseTrustAnchors(pki.ca.cert_pem());
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->size(), 1u);
  auto bundle = ParseTrustAnchors(std::string("comment\n") + kBadBase64Block + pki.ca.cert_pem() +
                                  kKeyBlock + pki.other_ca.cert_pem() + "trailing text\n");
  ASSERT_TRUE(bundle.ok()) << bundle.status().message();
  EXPECT_EQ(bundle->size(), 2u);
}

TEST(ParseTrustAnchors, Errors) {
  auto empty = ParseTrustAnchors("");
  EXPECT_EQ(empty.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(empty.status().message(),
            "cluster CA unavailable; refusing to connect over unverified TLS");
  for (std::string bad :
       {std::string("garbage"), std::string(kBadBase64Block), std::string(kKeyBlock)}) {
    auto parsed = ParseTrustAnchors(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), "failed to parse cluster CA PEM");
  }
}

// ---- The proxy path. ----

TEST(DialTls, ThroughConnectProxy) {
  TlsPeer server(Serving(TestPki().leaf));
  ConnectProxy proxy(ConnectProxyMode::kTunnel, server.port());
  TlsDialOptions options = Options(443);
  options.host = "lps.unresolvable.test";  // only the proxy resolves the target
  options.proxy = ProxyConfig{"127.0.0.1", proxy.port(), "Basic YWxpY2U6czNjcmV0"};
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  EXPECT_EQ((*stream)->selected_alpn(), "h2");
  stream->reset();
  EXPECT_THAT(proxy.requests(), ElementsAre("CONNECT lps.unresolvable.test:443 HTTP/1.1\r\n"
                                            "Host: lps.unresolvable.test:443\r\n"
                                            "Proxy-Authorization: Basic YWxpY2U6czNjcmV0\r\n\r\n"));
  EXPECT_EQ(OnlyConnection(server).sni, kApiServer);
}

TEST(DialTls, ProxyWithoutCredentialsSendsNoAuthorization) {
  TlsPeer server(Serving(TestPki().leaf));
  ConnectProxy proxy(ConnectProxyMode::kTunnel, server.port());
  TlsDialOptions options = Options(6443);
  options.host = "2001:db8::7";
  options.proxy = ProxyConfig{"127.0.0.1", proxy.port(), ""};
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  stream->reset();
  EXPECT_THAT(
      proxy.requests(),
      ElementsAre("CONNECT [2001:db8::7]:6443 HTTP/1.1\r\nHost: [2001:db8::7]:6443\r\n\r\n"));
}

TEST(DialTls, ProxyRefusal) {
  ConnectProxy proxy(ConnectProxyMode::kForbidden);
  TlsDialOptions options = Options(443);
  options.proxy = ProxyConfig{"127.0.0.1", proxy.port(), ""};
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(stream.status().message(),
              StartsWith("proxy CONNECT to 127.0.0.1:443 via 127.0.0.1:"));
  EXPECT_THAT(stream.status().message(), HasSubstr("\"HTTP/1.1 403 Forbidden\""));
}

TEST(DialTls, SilentProxyHitsDeadline) {
  ConnectProxy proxy(ConnectProxyMode::kSilent);
  TlsDialOptions options = Options(443);
  options.proxy = ProxyConfig{"127.0.0.1", proxy.port(), ""};
  auto start = std::chrono::steady_clock::now();
  auto stream = DialTls(options, Deadline::After(300ms));
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kDeadlineExceeded);
  EXPECT_THAT(stream.status().message(), StartsWith("proxy CONNECT to 127.0.0.1:443"));
  EXPECT_LT(elapsed, 3s);
}

TEST(DialTls, ProxyHeaderCapped) {
  ConnectProxy proxy(ConnectProxyMode::kHugeHeader);
  TlsDialOptions options = Options(443);
  options.proxy = ProxyConfig{"127.0.0.1", proxy.port(), ""};
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(stream.status().message(), HasSubstr("exceeds 16 KiB"));
}

TEST(DialTls, ProxyUnreachable) {
  TlsDialOptions options = Options(443);
  uint16_t port = testsupport::PickFreePort();
  options.proxy = ProxyConfig{"127.0.0.1", port, ""};
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(stream.status().message(),
            "connecting to proxy 127.0.0.1:" + std::to_string(port) + ": Connection refused");
}

// ---- The established stream. ----

TEST(TlsStream, EchoRoundTrip) {
  TlsPeer server(Serving(TestPki().leaf));
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  std::string payload(64 * 1024, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7);
  ASSERT_TRUE((*stream)->WriteAll(payload, Deadline::After(5s)).ok());
  std::string echoed;
  char buf[4096];
  while (echoed.size() < payload.size()) {
    auto n = (*stream)->ReadSome(buf, sizeof(buf), Deadline::After(5s));
    ASSERT_TRUE(n.ok()) << n.status().message();
    ASSERT_GT(*n, 0u);
    echoed.append(buf, *n);
  }
  EXPECT_EQ(echoed, payload);
}

TEST(TlsStream, CloseNotifyReadsAsEndOfStream) {
  TlsPeer server(
      Serving(TestPki().leaf, TlsPeerMode::kSelectH2Silent, TlsPeerAfterHandshake::kCloseNotify));
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  char buf[64];
  auto n = (*stream)->ReadSome(buf, sizeof(buf), Deadline::After(5s));
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 0u);
}

TEST(TlsStream, ReadTimesOut) {
  TlsPeer server(
      Serving(TestPki().leaf, TlsPeerMode::kSelectH2Silent, TlsPeerAfterHandshake::kDrain));
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  char buf[64];
  auto start = std::chrono::steady_clock::now();
  auto n = (*stream)->ReadSome(buf, sizeof(buf), Deadline::After(200ms));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), Status::Code::kDeadlineExceeded);
  EXPECT_THAT(n.status().message(), HasSubstr("timed out"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

// HTTP/2 forbids renegotiation after the preface (RFC 7540 §9.2.1) and Go's client refuses it:
// so does ours, or a TLS 1.2 server could make it redo handshakes for as long as the call's
// deadline. Refused, the server's request is answered with an alert that ends the connection
// at once; accepted, both ends would wait for data until the read's deadline.
TEST(TlsStream, ARenegotiationIsRefused) {
  TlsPeer server(
      Serving(TestPki().leaf, TlsPeerMode::kSelectH2Tls12, TlsPeerAfterHandshake::kRenegotiate));
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  EXPECT_EQ(OnlyConnection(server).protocol_version, "TLSv1.2");
  char buf[64];
  auto n = (*stream)->ReadSome(buf, sizeof(buf), Deadline::After(20s));
  if (n.ok()) {
    EXPECT_EQ(*n, 0u);  // the server closed after the alert
  } else {
    EXPECT_EQ(n.status().code(), Status::Code::kUnavailable) << n.status().message();
  }
}

TEST(TlsStream, ResetIsUnavailableAndNeverRaisesSigpipe) {
  TlsPeer server(
      Serving(TestPki().leaf, TlsPeerMode::kSelectH2Silent, TlsPeerAfterHandshake::kReset));
  // Default SIGPIPE disposition (set after the peer, which ignores SIGPIPE process-wide once):
  // a write to the reset socket without MSG_NOSIGNAL would kill this test process.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  struct sigaction old {};
  sigaction(SIGPIPE, &dfl, &old);

  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  ASSERT_TRUE(server.WaitForConnections(1, 5s));  // the RST follows the handshake
  char buf[64];
  auto n = (*stream)->ReadSome(buf, sizeof(buf), Deadline::After(5s));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(n.status().message(), HasSubstr("reading from 127.0.0.1:"));

  Status written;
  for (int i = 0; i < 20 && written.ok(); ++i) {
    written = (*stream)->WriteAll(std::string(4096, 'x'), Deadline::After(5s));
  }
  EXPECT_EQ(written.code(), Status::Code::kUnavailable) << written.message();
  stream->reset();  // close_notify on a dead socket must not raise SIGPIPE either
  sigaction(SIGPIPE, &old, nullptr);
}

}  // namespace
}  // namespace hotfix::wire
