// Self-tests of tests/support's building blocks: certificates, temp dirs, subprocesses,
// ports, the ClientHello tap and the misbehaving TLS peers. The fixtures other tests trust
// must themselves do what their headers promise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "common/openssl.h"
#include "hello_tap.h"
#include "ports.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_certs.h"
#include "text_util.h"
#include "tls_client.h"
#include "tls_peer.h"
#include "wait.h"

namespace hotfix::testsupport {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// --- certificates --------------------------------------------------------------------------

using hotfix::ossl::X509Ptr;

std::vector<X509Ptr> ParseAll(const std::string& pem) {
  std::vector<X509Ptr> out;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  while (X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) out.emplace_back(x);
  BIO_free(bio);
  ERR_clear_error();
  return out;
}

// Verifies leaf (+ chain) against the root as a TLS client would: purpose sslserver, host.
int VerifyServerCert(const CertAndKey& leaf, const std::string& root_pem, const std::string& host) {
  auto chain = ParseAll(leaf.cert_pem);
  auto roots = ParseAll(root_pem);
  X509_STORE* store = X509_STORE_new();
  for (auto& r : roots) X509_STORE_add_cert(store, r.get());
  STACK_OF(X509)* untrusted = sk_X509_new_null();
  for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(untrusted, chain[i].get());
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, chain[0].get(), untrusted);
  X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
  X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx), host.c_str(), 0);
  int rc = X509_verify_cert(ctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  sk_X509_free(untrusted);
  X509_STORE_free(store);
  return rc;
}

LeafOptions ServerLeaf(std::string dns) {
  LeafOptions options;
  options.common_name = dns;
  options.dns_names = {dns};
  return options;
}

TEST(TestCertsTest, CaIsACertificateAuthority) {
  TestCa ca = TestCa::Create();
  auto certs = ParseAll(ca.cert_pem());
  ASSERT_EQ(certs.size(), 1u);
  EXPECT_EQ(X509_check_ca(certs[0].get()), 1);  // basicConstraints CA:TRUE + keyCertSign
  EXPECT_TRUE(X509_get_key_usage(certs[0].get()) & KU_KEY_CERT_SIGN);
  char cn[64] = {0};
  X509_NAME_get_text_by_NID(X509_get_subject_name(certs[0].get()), NID_commonName, cn, sizeof(cn));
  EXPECT_STREQ(cn, "test-ca");
  EXPECT_EQ(EVP_PKEY_get_id(X509_get0_pubkey(certs[0].get())), EVP_PKEY_EC);
}

TEST(TestCertsTest, LeafVerifiesForItsNamesOnly) {
  TestCa ca = TestCa::Create();
  CertAndKey leaf = ca.IssueLeaf(ServerLeaf("aks-security-patch.data.mcr.microsoft.com"));
  EXPECT_EQ(VerifyServerCert(leaf, ca.cert_pem(), "aks-security-patch.data.mcr.microsoft.com"),
            X509_V_OK);
  EXPECT_EQ(VerifyServerCert(leaf, ca.cert_pem(), "other.example"), X509_V_ERR_HOSTNAME_MISMATCH);
  TestCa stranger = TestCa::Create("stranger-ca");
  EXPECT_EQ(
      VerifyServerCert(leaf, stranger.cert_pem(), "aks-security-patch.data.mcr.microsoft.com"),
      X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
}

TEST(TestCertsTest, ValidityWindowIsHonoured) {
  TestCa ca = TestCa::Create();
  LeafOptions expired = ServerLeaf("a.example");
  expired.not_before = -std::chrono::hours(48);
  expired.not_after = -std::chrono::hours(24);
  EXPECT_EQ(VerifyServerCert(ca.IssueLeaf(expired), ca.cert_pem(), "a.example"),
            X509_V_ERR_CERT_HAS_EXPIRED);
  LeafOptions future = ServerLeaf("a.example");
  future.not_before = std::chrono::hours(24);
  EXPECT_EQ(VerifyServerCert(ca.IssueLeaf(future), ca.cert_pem(), "a.example"),
            X509_V_ERR_CERT_NOT_YET_VALID);
}

TEST(TestCertsTest, WrongExtendedKeyUsageFailsServerPurpose) {
  TestCa ca = TestCa::Create();
  LeafOptions signing = ServerLeaf("a.example");
  signing.usage = KeyUsage::kCodeSigning;
  EXPECT_EQ(VerifyServerCert(ca.IssueLeaf(signing), ca.cert_pem(), "a.example"),
            X509_V_ERR_INVALID_PURPOSE);
}

TEST(TestCertsTest, IntermediateChainTravelsWithTheLeaf) {
  TestCa root = TestCa::Create("test-root");
  TestCa intermediate = root.IssueIntermediate("test-intermediate");
  CertAndKey leaf = intermediate.IssueLeaf(ServerLeaf("a.example"));
  EXPECT_EQ(ParseAll(leaf.cert_pem).size(), 2u);
  EXPECT_EQ(VerifyServerCert(leaf, root.cert_pem(), "a.example"), X509_V_OK);
}

TEST(TestCertsTest, LocalServerCertCoversLoopback) {
  TestCa ca = TestCa::Create();
  CertAndKey leaf = IssueLocalServerCert(ca, {"api.example"});
  auto cert = std::move(ParseAll(leaf.cert_pem).at(0));
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_host(cert.get(), "localhost", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(cert.get(), "api.example", 0, 0, nullptr), 1);
}

TEST(TestCertsTest, WritesPemFiles) {
  TempDir dir;
  TestCa ca = TestCa::Create();
  PemPaths paths = WritePemFiles(dir.path(), "server", IssueLocalServerCert(ca));
  EXPECT_EQ(paths.cert, dir.File("server.crt"));
  EXPECT_THAT(dir.Read("server.crt"), HasSubstr("BEGIN CERTIFICATE"));
  EXPECT_THAT(dir.Read("server.key"), HasSubstr("BEGIN PRIVATE KEY"));
  auto perms = std::filesystem::status(paths.key).permissions();
  EXPECT_EQ(perms & std::filesystem::perms::group_read, std::filesystem::perms::none);
}

// --- temp dir, ports, subprocess -----------------------------------------------------------

TEST(TempDirTest, RemovesEverythingOnDestruction) {
  std::filesystem::path path;
  {
    TempDir dir("lp-selftest");
    path = dir.path();
    dir.Write("a.txt", "hello");
    std::filesystem::create_directories(dir.File("sub/deeper"));
    EXPECT_EQ(dir.Read("a.txt"), "hello");
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(TempDirTest, WritesExactModesListsNamesAndRemovesAReadOnlyFolder) {
  std::filesystem::path path;
  {
    TempDir dir("lp-selftest");
    path = dir.path();
    const mode_t old_umask = ::umask(077);
    const std::filesystem::path plain = dir.Write("b.txt", "b");
    const std::filesystem::path script = dir.Write("a.sh", "#!/bin/sh\n", 0755);
    ::umask(old_umask);
    EXPECT_EQ(std::filesystem::status(plain).permissions(), std::filesystem::perms(0644));
    EXPECT_EQ(std::filesystem::status(script).permissions(), std::filesystem::perms(0755));
    EXPECT_THAT(dir.Names(), ::testing::ElementsAre("a.sh", "b.txt"));
    std::filesystem::permissions(path, std::filesystem::perms(0500));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(TextUtilTest, ReadsFilesAndJsonLines) {
  TempDir dir("lp-selftest");
  EXPECT_EQ(ReadFile(dir.Write("bytes", std::string("a\0b\n", 4))), std::string("a\0b\n", 4));
  EXPECT_EQ(ReadFile(dir.File("absent")), "");
  EXPECT_EQ(ReadFileOrThrow(dir.File("bytes")), std::string("a\0b\n", 4));
  EXPECT_THROW(ReadFileOrThrow(dir.File("absent")), std::runtime_error);
  const std::string text = "{\"a\":1}\nE0101 a libgrpc line\n[2]\n{\"b\":2}\n";
  std::vector<nlohmann::json> every = JsonLines(text);
  ASSERT_EQ(every.size(), 4u);
  EXPECT_EQ(every[0]["a"], 1);
  EXPECT_TRUE(every[1].is_discarded());
  EXPECT_EQ(every[2], nlohmann::json::array({2}));
  EXPECT_EQ(every[3]["b"], 2);
  std::vector<nlohmann::json> objects = JsonLines(text, NonJsonLines::kSkip);
  ASSERT_EQ(objects.size(), 2u);
  EXPECT_EQ(objects[0]["a"], 1);
  EXPECT_EQ(objects[1]["b"], 2);
}

TEST(PortsTest, PicksDistinctBindablePorts) {
  std::set<uint16_t> seen;
  for (int i = 0; i < 20; ++i) {
    uint16_t port = PickFreePort();
    EXPECT_TRUE(seen.insert(port).second) << port;
    EXPECT_FALSE(IsListening(port));
  }
}

TEST(PortsTest, ParsesAListenAddress) {
  ListenAddress any = ParseListenAddress("127.0.0.1:0");
  EXPECT_EQ(any.host, "127.0.0.1");
  EXPECT_EQ(any.port, 0);
  ListenAddress v6 = ParseListenAddress("[::1]:8443");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 8443);
  for (const char* bad : {"bogus", "127.0.0.1", "127.0.0.1:65536", "127.0.0.1:x", "::1:80"}) {
    EXPECT_THROW(ParseListenAddress(bad), std::runtime_error) << bad;
  }
}

TEST(PortsTest, SeesAListenerWithoutConnecting) {
  TlsPeerOptions options;
  options.mode = TlsPeerMode::kAcceptOnly;
  TlsPeer peer(options);
  EXPECT_TRUE(WaitUntilListening(peer.port(), kGenerous));
  EXPECT_EQ(peer.accepted_count(), 0u);  // the probe read /proc, it did not connect
}

TEST(SubprocessTest, ReportsExitCodeOutputAndWallTime) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"};
  RunResult r = RunProcess(options, kGenerous);
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.exit_code, 3);
  EXPECT_EQ(r.stdout_text, "out\n");
  EXPECT_EQ(r.stderr_text, "err\n");
  EXPECT_GT(r.status.wall_time.count(), 0);
}

TEST(SubprocessTest, PassesArgvVerbatimWithoutAShell) {
  SpawnOptions options;
  options.argv = {"printf", "%s|", "a b", "$HOME", "*"};
  RunResult r = RunProcess(options, kGenerous);
  EXPECT_EQ(r.stdout_text, "a b|$HOME|*|");
}

TEST(SubprocessTest, SetsAndUnsetsEnvironment) {
  setenv("LP_SELFTEST_INHERITED", "1", 1);
  setenv("LP_SELFTEST_REMOVED", "1", 1);
  SpawnOptions options;
  options.argv = {"/usr/bin/env"};
  options.env = {{"LP_SELFTEST_SET", "value with spaces"}};
  options.unset_env = {"LP_SELFTEST_REMOVED"};
  RunResult r = RunProcess(options, kGenerous);
  EXPECT_THAT(r.stdout_text, HasSubstr("LP_SELFTEST_SET=value with spaces\n"));
  EXPECT_THAT(r.stdout_text, HasSubstr("LP_SELFTEST_INHERITED=1\n"));
  EXPECT_THAT(r.stdout_text, ::testing::Not(HasSubstr("LP_SELFTEST_REMOVED")));

  options.inherit_env = false;
  options.unset_env.clear();
  EXPECT_EQ(RunProcess(options, kGenerous).stdout_text, "LP_SELFTEST_SET=value with spaces\n");
}

TEST(SubprocessTest, TimeoutKillsTheProcessGroup) {
  TempDir dir;
  SpawnOptions options;
  // The shell starts a grandchild; killing only the shell would leave it running.
  options.argv = {"/bin/sh", "-c", "sleep 60 & echo $! > " + dir.File("pid").string() + "; wait"};
  Subprocess child(options);
  ExitStatus status = child.Wait(std::chrono::milliseconds(500));
  EXPECT_TRUE(status.timed_out);
  EXPECT_FALSE(status.exited);
  EXPECT_EQ(status.term_signal, SIGKILL);
  pid_t grandchild = std::stoi(dir.Read("pid"));
  // SIGKILL is asynchronous, and an orphan stays a zombie until some reaper collects it.
  auto gone_or_zombie = [&] {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string state;
    std::getline(stat, state);
    return state.empty() || state.find(") Z") != std::string::npos;
  };
  EXPECT_TRUE(WaitFor(gone_or_zombie));
}

TEST(SubprocessTest, StopSendsSigtermFirst) {
  SpawnOptions options;
  options.argv = {"sleep", "60"};
  Subprocess child(options);
  EXPECT_TRUE(child.running());
  ExitStatus status = child.Stop();
  EXPECT_EQ(status.term_signal, SIGTERM);
  EXPECT_FALSE(child.running());
}

TEST(SubprocessTest, MissingBinaryThrows) {
  SpawnOptions options;
  options.argv = {"/nonexistent/lp-no-such-binary"};
  EXPECT_THROW(Subprocess child(options), std::runtime_error);
}

// --- ClientHello tap -----------------------------------------------------------------------

class TlsFixture : public ::testing::Test {
 protected:
  std::unique_ptr<TlsPeer> Peer(TlsPeerMode mode) {
    TlsPeerOptions options;
    options.mode = mode;
    options.cert = IssueLocalServerCert(ca_, {"api.example"});
    return std::make_unique<TlsPeer>(options);
  }
  TlsClientOptions Client(uint16_t port, std::vector<std::string> alpn) {
    TlsClientOptions options;
    options.port = port;
    options.sni = "api.example";
    options.alpn = std::move(alpn);
    options.ca_pem = ca_.cert_pem();
    return options;
  }
  TestCa ca_ = TestCa::Create();
};

using HelloTapTest = TlsFixture;

TEST_F(HelloTapTest, RecordsSniAndAlpnAndForwardsUntouched) {
  auto upstream = Peer(TlsPeerMode::kSelectH2Silent);
  HelloTap tap("127.0.0.1", upstream->port());
  TlsClientResult r = TlsHandshake(Client(tap.port(), {"aks-live-patching", "h2"}));
  // The handshake completing end to end proves the bytes reached the server unchanged.
  ASSERT_TRUE(r.handshake_ok) << r.error;
  EXPECT_EQ(r.selected_alpn, "h2");
  ASSERT_TRUE(tap.WaitForConnections(1, kGenerous));
  TappedConnection conn = tap.connections().at(0);
  EXPECT_TRUE(conn.parsed) << conn.error;
  EXPECT_EQ(conn.hello.sni, "api.example");
  EXPECT_THAT(conn.hello.alpn, ElementsAre("aks-live-patching", "h2"));
  ASSERT_TRUE(upstream->WaitForConnections(1, kGenerous));
  EXPECT_THAT(upstream->connections()[0].offered_alpn, ElementsAre("aks-live-patching", "h2"));
}

TEST_F(HelloTapTest, NoSniNoAlpnAreEmpty) {
  auto upstream = Peer(TlsPeerMode::kSelectH2Silent);
  HelloTap tap("127.0.0.1", upstream->port());
  TlsClientOptions options = Client(tap.port(), {});
  options.sni.clear();
  options.verify_name = "api.example";
  TlsClientResult r = TlsHandshake(options);
  ASSERT_TRUE(r.handshake_ok) << r.error;
  ASSERT_TRUE(tap.WaitForConnections(1, kGenerous));
  TappedConnection conn = tap.connections().at(0);
  EXPECT_TRUE(conn.parsed);
  EXPECT_EQ(conn.hello.sni, "");
  EXPECT_FALSE(conn.hello.has_alpn_extension);
  EXPECT_THAT(conn.hello.alpn, IsEmpty());
}

TEST(ClientHelloParseTest, PartialHelloNeedsMoreAndJunkIsNotTls) {
  ClientHelloInfo info;
  std::string error;
  EXPECT_EQ(ParseClientHello(std::string("\x16\x03\x01\x02\x00\x01", 6), &info, &error),
            HelloParse::kNeedMore);
  EXPECT_EQ(ParseClientHello("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &info, &error),
            HelloParse::kNotTls);
  EXPECT_FALSE(error.empty());
}

// --- misbehaving TLS peers -----------------------------------------------------------------

using TlsPeerTest = TlsFixture;

TEST_F(TlsPeerTest, AcceptOnlyNeverAnswers) {
  auto peer = Peer(TlsPeerMode::kAcceptOnly);
  TlsClientOptions options = Client(peer->port(), {"h2"});
  options.timeout = std::chrono::milliseconds(500);
  TlsClientResult r = TlsHandshake(options);
  EXPECT_TRUE(r.tcp_connected);
  EXPECT_FALSE(r.handshake_ok);
  EXPECT_TRUE(peer->WaitForAccepted(1, kGenerous));
  EXPECT_EQ(peer->connection_count(), 0u);
}

TEST_F(TlsPeerTest, NoAlpnCompletesWithoutAProtocol) {
  auto peer = Peer(TlsPeerMode::kNoAlpn);
  TlsClientResult r = TlsHandshake(Client(peer->port(), {"aks-live-patching", "h2"}));
  ASSERT_TRUE(r.handshake_ok) << r.error;
  EXPECT_EQ(r.selected_alpn, "");
  ASSERT_TRUE(peer->WaitForConnections(1, kGenerous));
  EXPECT_THAT(peer->connections()[0].offered_alpn, ElementsAre("aks-live-patching", "h2"));
}

TEST_F(TlsPeerTest, Http11IsSelectedEvenWhenNotOffered) {
  auto peer = Peer(TlsPeerMode::kSelectHttp11);
  // An OpenSSL client refuses a protocol it never offered: the handshake itself fails.
  TlsClientResult refused = TlsHandshake(Client(peer->port(), {"aks-live-patching", "h2"}));
  EXPECT_FALSE(refused.handshake_ok);
  TlsClientResult accepted = TlsHandshake(Client(peer->port(), {"h2", "http/1.1"}));
  ASSERT_TRUE(accepted.handshake_ok) << accepted.error;
  EXPECT_EQ(accepted.selected_alpn, "http/1.1");
}

TEST_F(TlsPeerTest, Tls11OnlyFailsModernClientsAndServesLegacyOnes) {
  auto peer = Peer(TlsPeerMode::kTls11Only);
  TlsClientOptions modern = Client(peer->port(), {"h2"});
  modern.min_version = TLS1_2_VERSION;
  TlsClientResult refused = TlsHandshake(modern);
  EXPECT_FALSE(refused.handshake_ok);
  EXPECT_THAT(refused.error, HasSubstr("protocol version"));
  // Proves the peer really speaks TLS 1.1 rather than failing every handshake.
  TlsClientOptions legacy = Client(peer->port(), {"h2"});
  legacy.min_version = TLS1_1_VERSION;
  legacy.max_version = TLS1_1_VERSION;
  TlsClientResult r = TlsHandshake(legacy);
  ASSERT_TRUE(r.handshake_ok) << r.error;
  EXPECT_EQ(r.protocol_version, "TLSv1.1");
}

TEST_F(TlsPeerTest, SelectH2SilentCompletesTlsThenSaysNothing) {
  auto peer = Peer(TlsPeerMode::kSelectH2Silent);
  TlsClientResult r = TlsHandshake(Client(peer->port(), {"aks-live-patching", "h2"}));
  ASSERT_TRUE(r.handshake_ok) << r.error;
  EXPECT_EQ(r.selected_alpn, "h2");
  EXPECT_EQ(r.peer_common_name, "api.example");
  ASSERT_TRUE(peer->WaitForConnections(1, kGenerous));
  TlsPeerConnection conn = peer->connections()[0];
  EXPECT_TRUE(conn.handshake_ok);
  EXPECT_EQ(conn.sni, "api.example");
  EXPECT_EQ(conn.selected_alpn, "h2");
  // Without h2 on offer it finishes with no ALPN at all.
  TlsClientResult none = TlsHandshake(Client(peer->port(), {"aks-live-patching"}));
  ASSERT_TRUE(none.handshake_ok) << none.error;
  EXPECT_EQ(none.selected_alpn, "");
}

TEST_F(TlsPeerTest, StopsWhileClientsStillHoldConnections) {
  auto peer = Peer(TlsPeerMode::kSelectH2Silent);
  int fd = ConnectLoopback(peer->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(peer->WaitForAccepted(1, kGenerous));
  peer.reset();  // must not hang on the handler blocked in SSL_accept
  close(fd);
}

}  // namespace
}  // namespace hotfix::testsupport
