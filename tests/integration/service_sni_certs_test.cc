// One service for many clusters (--tls-cert-dir; docs/SERVICE.md, "TLS"): since AgentBaker
// #9351 each node verifies the service's certificate against its own cluster CA with the
// apiserver host it dialed as the name, so the service must show each node the certificate
// of that node's cluster, chosen by the SNI it sent. The real binary with a folder of pairs
// for two clusters' FQDNs and a region's wildcard, each cluster under a CA of its own (as AKS
// clusters are), called by the three node clients there are: our own dialer
// (src/wire/tls_dialer.h, SNI and name the FQDN, as hotfix-agent now dials), grpc-go
// verifying the dialed host with Go's standard verifier (grpcgo-sni-client, what AgentBaker's
// node runs), and libgrpc++ with SslCredentials and the target-name override. An unknown name
// is refused in the handshake and counted; pairs added, broken and removed while the service
// runs are followed; no name is ever shown another name's certificate.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/openssl.h"
#include "service_fixture.h"
#include "wire/tls_dialer.h"

namespace hotfix::testsupport {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kServedMap[] = R"({"hotfixes":{"202604.01":"202604.01.3"}})";
// Cluster A is the fixture's (kApiserverFqdn, ServiceFiles::tls_ca()); B has a CA of its own.
constexpr char kClusterB[] = "other-dns-87654321.hcp.eastus.azmk8s.io";
// A region's clusters under one CA and one wildcard pair (a test set-up: AKS gives each
// cluster its own CA, so there a wildcard pair serves only the clusters its CA is theirs).
constexpr char kWestus2Wildcard[] = "*.hcp.westus2.azmk8s.io";
constexpr char kWestus2Cluster[] = "c1-dns-13572468.hcp.westus2.azmk8s.io";
constexpr char kUnknownCluster[] = "unknown-dns-11111111.hcp.eastus.azmk8s.io";

std::string SniClient() {
  return (fs::path(BinDir()).parent_path() / "grpcgo-sni" / "sniclient").string();
}

// What one raw ClientHello got: the served leaf's CN (no verification), or the failure.
struct RawHandshake {
  bool ok = false;
  std::string served_cn;
  std::string error;
};

// A TLS handshake to 127.0.0.1:port offering what a node offers, with SNI `sni` (none when
// empty), after `preface` (a PROXY header) when given; the server's certificate is read, not
// verified, to see which one it picked.
RawHandshake RawTls(uint16_t port, const std::string& sni, const std::string& preface = {}) {
  RawHandshake result;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval timeout{.tv_sec = 10, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 ||
      (!preface.empty() && send(fd, preface.data(), preface.size(), MSG_NOSIGNAL) !=
                               static_cast<ssize_t>(preface.size()))) {
    result.error = std::string("connect/send: ") + strerror(errno);
    close(fd);
    return result;
  }
  ossl::SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  static const unsigned char kAlpn[] =
      "\x11"
      "aks-live-patching"
      "\x02"
      "h2";
  SSL_CTX_set_alpn_protos(ctx.get(), kAlpn, sizeof kAlpn - 1);
  ossl::SslPtr ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), fd);
  if (!sni.empty()) SSL_set_tlsext_host_name(ssl.get(), sni.c_str());
  ERR_clear_error();
  if (SSL_connect(ssl.get()) == 1) {
    result.ok = true;
    if (X509* peer = SSL_get0_peer_certificate(ssl.get())) {
      char cn[256] = "";
      X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
      result.served_cn = cn;
    }
  } else {
    result.error = ossl::DrainErrorsOr("the connection closed");
  }
  ssl.reset();
  close(fd);
  return result;
}

// A PROXY protocol v2 header: a node at 192.0.2.7 that dialed `dialed` (IPv4), port 443.
std::string ProxyHeaderV2(const char* dialed) {
  in_addr source{}, destination{};
  inet_pton(AF_INET, "192.0.2.7", &source);
  inet_pton(AF_INET, dialed, &destination);
  std::string header("\r\n\r\n\0\r\nQUIT\n", 12);
  header += "\x21\x11";
  header += std::string("\x00\x0c", 2);
  header.append(reinterpret_cast<const char*>(&source), 4);
  header.append(reinterpret_cast<const char*>(&destination), 4);
  header += std::string("\x9c\x41\x01\xbb", 4);  // 40001, 443
  return header;
}

class ServiceSniCertsTest : public ::testing::Test {
 protected:
  ServiceSniCertsTest() {
    files_.WriteComponent(kAksNodeControllerComponent, kServedMap);
    WritePair("cluster-a", files_.tls_ca(), {kApiserverFqdn}, {"127.0.0.1", "10.0.0.1"});
    WritePair("cluster-b", ca_b_, {kClusterB});
    WritePair("westus2", ca_westus2_, {kWestus2Wildcard});
  }

  // DIR/<name>/tls.{crt,key}: a leaf of `ca` for these SANs, its CN the pair's name. Written
  // beside the folder and renamed in whole, as a projected volume's update lands.
  void WritePair(const std::string& name, const TestCa& ca, std::vector<std::string> dns,
                 std::vector<std::string> ips = {}) {
    LeafOptions options;
    options.common_name = name;
    options.dns_names = std::move(dns);
    options.ip_addresses = std::move(ips);
    WritePairFiles(name, ca.IssueLeaf(options));
  }
  void WritePairFiles(const std::string& name, const CertAndKey& pair) {
    const fs::path staging = files_.dir().File("staging-" + name);
    fs::create_directories(staging);
    std::ofstream(staging / "tls.crt") << pair.cert_pem;
    std::ofstream(staging / "tls.key") << pair.key_pem;
    fs::remove_all(certs_dir() / name);
    fs::rename(staging, certs_dir() / name);
  }
  fs::path certs_dir() const {
    fs::create_directories(files_.dir().File("certs"));
    return files_.dir().File("certs");
  }

  // The fixture's flags with the folder instead of --tls-cert/--tls-key.
  std::vector<std::string> Args(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = files_.Args(extra);
    for (const char* flag : {"--tls-cert", "--tls-key"}) {
      auto it = std::find(args.begin(), args.end(), flag);
      args.erase(it, it + 2);
    }
    args.insert(args.end(), {"--tls-cert-dir", certs_dir().string()});
    return args;
  }
  void Start(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags = {"--refresh-interval", "1s"};
    flags.insert(flags.end(), kMetricsFlags.begin(), kMetricsFlags.end());
    flags.insert(flags.end(), extra.begin(), extra.end());
    lps_ = std::make_unique<ServiceProcess>(Args(flags));
  }

  // (a) Our dialer as hotfix-agent dials since #9351: SNI and the name checked are the host.
  Status DialAsNode(const std::string& host, const TestCa& ca) {
    wire::TlsDialOptions options;
    options.host = "127.0.0.1";
    options.port = lps_->port();
    options.sni = host;
    options.alpn = {"aks-live-patching", "h2"};
    options.verify_name = host;
    options.ca_pem = ca.cert_pem();
    auto stream = wire::DialTls(options, Deadline::After(std::chrono::milliseconds(10000)));
    if (!stream.ok()) return stream.status();
    if ((*stream)->selected_alpn() != "h2") {
      return Status::Internal("ALPN " + (*stream)->selected_alpn() + ", not h2");
    }
    return Status::Ok();
  }
  // (b) grpc-go, as AgentBaker's node: "ok OK <config>" or "error <code> <message>".
  RunResult CallWithGrpcGo(const std::string& host, const TestCa& ca) {
    const fs::path ca_file =
        files_.dir().Write("ca-" + std::to_string(++files_written_), ca.cert_pem());
    const fs::path token =
        files_.dir().Write("token-" + std::to_string(files_written_), files_.Token());
    SpawnOptions spawn;
    spawn.argv = {SniClient(),      "--connect",    LoopbackAddress(lps_->port()),
                  "--host",         host,           "--ca",
                  ca_file.string(), "--token-file", token.string()};
    return RunProcess(std::move(spawn), seconds(60));
  }
  // (c) libgrpc++: the cluster CA, and the host as the target name (SNI and the name checked).
  GrpcReply CallWithGrpcCpp(const std::string& host, const TestCa& ca) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = ca.cert_pem();
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride(host);
    args.SetInt("lp.test.own_channel", ++channels_);  // a connection of its own
    auto channel =
        grpc::CreateCustomChannel(LoopbackAddress(lps_->port()), grpc::SslCredentials(tls), args);
    return CallGetComponentConfig(channel, kAksNodeControllerComponent, files_.Token());
  }

  std::optional<double> Metric(const std::string& name,
                               const std::map<std::string, std::string>& labels = {}) {
    return MetricValue(HttpGet(lps_->metrics_port(), "/metrics"), name, labels);
  }
  std::optional<double> UnknownServerNames() {
    return Metric("lp_transport_events_total", {{"event", "unknown_server_name"}});
  }

  ServiceFiles files_;
  TestCa ca_b_ = TestCa::Create("cluster-b-ca");
  TestCa ca_westus2_ = TestCa::Create("westus2-ca");
  std::unique_ptr<ServiceProcess> lps_;
  int files_written_ = 0;
  int channels_ = 0;
};

TEST_F(ServiceSniCertsTest, EachNodeClientIsServedTheCertificateOfTheClusterItDialed) {
  ASSERT_TRUE(fs::exists(SniClient()))
      << SniClient() << " was not built: it needs Debian's Go packages (scripts/install-deps.sh)";
  Start();
  EXPECT_THAT(lps_->Stderr(), HasSubstr("\"tls_certificates\":3"));
  const std::vector<std::pair<std::string, const TestCa*>> clusters = {
      {kApiserverFqdn, &files_.tls_ca()},
      {kClusterB, &ca_b_},
      {kWestus2Cluster, &ca_westus2_},
      {"C2-DNS-24681357.HCP.WESTUS2.AZMK8S.IO", &ca_westus2_},  // any case, the same wildcard
  };
  for (const auto& [host, ca] : clusters) {
    SCOPED_TRACE(host);
    Status dialed = DialAsNode(host, *ca);
    EXPECT_TRUE(dialed.ok()) << dialed.message();
    RunResult go = CallWithGrpcGo(host, *ca);
    EXPECT_TRUE(go.status.success()) << go.stdout_text << go.stderr_text;
    EXPECT_EQ(go.stdout_text, std::string("ok OK ") + kServedMap + "\n") << go.stderr_text;
    GrpcReply cpp = CallWithGrpcCpp(host, *ca);
    EXPECT_TRUE(cpp.status.ok()) << cpp.status.error_message();
    EXPECT_EQ(cpp.response.config(), kServedMap);
  }
  // The access log names the cluster each call dialed.
  std::set<std::string> logged;
  for (const auto& line : lps_->AccessLog()) logged.insert(line.value("cluster", ""));
  EXPECT_TRUE(logged.count(kClusterB)) << lps_->Stderr();
  EXPECT_TRUE(logged.count(kWestus2Cluster));
  EXPECT_EQ(UnknownServerNames(), 0);
}

TEST_F(ServiceSniCertsTest, ANameIsNeverShownAnotherNamesCertificate) {
  Start();
  // Which pair each name gets, read without verifying.
  EXPECT_EQ(RawTls(lps_->port(), kApiserverFqdn).served_cn, "cluster-a");
  EXPECT_EQ(RawTls(lps_->port(), kClusterB).served_cn, "cluster-b");
  EXPECT_EQ(RawTls(lps_->port(), kWestus2Cluster).served_cn, "westus2");
  for (const char* name : {kUnknownCluster, kLegacyLpsServerName, "hcp.westus2.azmk8s.io",
                           "a.c1-dns-13572468.hcp.westus2.azmk8s.io", "localhost"}) {
    RawHandshake h = RawTls(lps_->port(), name);
    EXPECT_FALSE(h.ok) << name << " was shown " << h.served_cn;
    EXPECT_THAT(h.error, HasSubstr("unrecognized name")) << name;
  }
  // A node of cluster B that trusts only B's CA fails on any other cluster's certificate: the
  // check the node makes (and why no other pair may stand in for an unknown name).
  Status wrong = DialAsNode(kApiserverFqdn, ca_b_);
  EXPECT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.message(), HasSubstr("verif"));
  RunResult go = CallWithGrpcGo(kClusterB, files_.tls_ca());
  EXPECT_FALSE(go.status.success());
  EXPECT_THAT(go.stdout_text, StartsWith("error Unavailable"));
  EXPECT_THAT(go.stdout_text, HasSubstr("x509"));
}

TEST_F(ServiceSniCertsTest, AnUnknownServerNameIsRefusedInTheHandshakeAndCounted) {
  ASSERT_TRUE(fs::exists(SniClient())) << SniClient() << " was not built";
  Start();
  ASSERT_EQ(UnknownServerNames(), 0);
  const std::optional<double> failed_before =
      Metric("lp_transport_events_total", {{"event", "handshake_failed"}});

  RawHandshake raw = RawTls(lps_->port(), kUnknownCluster);
  EXPECT_FALSE(raw.ok);
  EXPECT_THAT(raw.error, HasSubstr("unrecognized name"));
  Status dialed = DialAsNode(kUnknownCluster, files_.tls_ca());
  EXPECT_FALSE(dialed.ok());
  EXPECT_THAT(dialed.message(), HasSubstr("unrecognized name"));
  RunResult go = CallWithGrpcGo(kUnknownCluster, files_.tls_ca());
  EXPECT_THAT(go.stdout_text, StartsWith("error Unavailable"));
  EXPECT_THAT(go.stdout_text, HasSubstr("unrecognized name"));
  GrpcReply cpp = CallWithGrpcCpp(kUnknownCluster, files_.tls_ca());
  EXPECT_EQ(cpp.code(), grpc::UNAVAILABLE);

  // Each refused handshake is counted once the service has seen it fail (libgrpc++ retries
  // its connection: at least once from it).
  double counted = 0;
  EXPECT_TRUE(WaitFor([&] { return (counted = UnknownServerNames().value_or(0)) >= 4; }))
      << counted;
  EXPECT_EQ(Metric("lp_transport_events_total", {{"event", "handshake_failed"}}), failed_before)
      << "an unknown name is its own event";
  // Logged as the transport's refusals are, at most once per 10 s window.
  bool logged = false;
  for (const auto& line : lps_->LogLines()) {
    if (line.value("event", "") != "unknown_server_name") continue;
    logged = true;
    EXPECT_EQ(line.value("level", ""), "WARN");
    EXPECT_THAT(line.value("detail", ""), HasSubstr(kUnknownCluster));
  }
  EXPECT_TRUE(logged) << lps_->Stderr();
  // The refusals cost the others nothing.
  EXPECT_TRUE(DialAsNode(kClusterB, ca_b_).ok());
}

TEST_F(ServiceSniCertsTest, PairsAddedBrokenAndRemovedWhileRunningAreFollowed) {
  fs::remove_all(certs_dir() / "cluster-b");
  Start();
  EXPECT_EQ(Metric("lp_tls_certificates"), 2);
  ASSERT_FALSE(DialAsNode(kClusterB, ca_b_).ok());

  // Added: served once the folder is next read (--refresh-interval 1s).
  WritePair("cluster-b", ca_b_, {kClusterB});
  EXPECT_TRUE(WaitFor([&] { return RawTls(lps_->port(), kClusterB).served_cn == "cluster-b"; }));
  Status dialed = DialAsNode(kClusterB, ca_b_);
  EXPECT_TRUE(dialed.ok()) << dialed.message();
  EXPECT_TRUE(CallWithGrpcCpp(kClusterB, ca_b_).status.ok());
  EXPECT_EQ(Metric("lp_tls_certificates"), 3);
  EXPECT_EQ(Metric("lp_tls_last_reload_successful"), 1);
  EXPECT_TRUE(Metric("lp_tls_pair_expiry_timestamp_seconds", {{"pair", "cluster-b"}}).has_value());

  // Replaced by a pair that does not load (another pair's key): B keeps its pair, and the
  // refusal shows in the metrics and the log.
  LeafOptions options;
  options.common_name = "cluster-b-broken";
  options.dns_names = {kClusterB};
  CertAndKey broken = ca_b_.IssueLeaf(options);
  broken.key_pem = ca_b_.IssueLeaf(options).key_pem;
  WritePairFiles("cluster-b", broken);
  EXPECT_TRUE(WaitFor([&] { return Metric("lp_tls_last_reload_successful") == 0; }));
  EXPECT_EQ(Metric("lp_tls_rejected_certificates"), 1);
  EXPECT_EQ(RawTls(lps_->port(), kClusterB).served_cn, "cluster-b");
  EXPECT_TRUE(DialAsNode(kClusterB, ca_b_).ok());
  EXPECT_TRUE(lps_->Logged(
      "TLS certificate pair changed but does not load; still serving its previous pair"));

  // Replaced by a good one: served.
  options.common_name = "cluster-b-renewed";
  WritePairFiles("cluster-b", ca_b_.IssueLeaf(options));
  EXPECT_TRUE(
      WaitFor([&] { return RawTls(lps_->port(), kClusterB).served_cn == "cluster-b-renewed"; }));
  EXPECT_TRUE(WaitFor([&] { return Metric("lp_tls_last_reload_successful") == 1; }));

  // Removed: refused again, never answered with another pair.
  fs::remove_all(certs_dir() / "cluster-b");
  EXPECT_TRUE(WaitFor([&] { return !RawTls(lps_->port(), kClusterB).ok; }));
  EXPECT_THAT(RawTls(lps_->port(), kClusterB).error, HasSubstr("unrecognized name"));
  EXPECT_EQ(Metric("lp_tls_certificates"), 2);
  EXPECT_TRUE(DialAsNode(kApiserverFqdn, files_.tls_ca()).ok());
}

TEST_F(ServiceSniCertsTest, ANodeThatDialedAnAddressIsServedThePairWithThatIpSan) {
  Start();
  // Our dialer sends no SNI for an IP literal and checks the IP SAN, as Go does.
  Status dialed = DialAsNode("127.0.0.1", files_.tls_ca());
  EXPECT_TRUE(dialed.ok()) << dialed.message();
  RawHandshake none = RawTls(lps_->port(), "");
  EXPECT_EQ(none.served_cn, "cluster-a") << none.error;
}

TEST_F(ServiceSniCertsTest, BehindAProxyTheAddressInItsHeaderIsTheOneDialed) {
  Start({"--proxy-protocol", "--proxy-protocol-from", "127.0.0.0/8"});
  // A node that dialed 10.0.0.1 (cluster A's IP SAN) through the kube-api-proxy: no SNI.
  EXPECT_EQ(RawTls(lps_->port(), "", ProxyHeaderV2("10.0.0.1")).served_cn, "cluster-a");
  // One that dialed an address no pair carries is refused, though the socket's own address
  // (127.0.0.1) is cluster A's too.
  RawHandshake other = RawTls(lps_->port(), "", ProxyHeaderV2("10.0.0.9"));
  EXPECT_FALSE(other.ok);
  EXPECT_THAT(other.error, HasSubstr("unrecognized name"));
  EXPECT_TRUE(WaitFor([&] { return UnknownServerNames() == 1; }));
  // Names still select behind the proxy.
  EXPECT_EQ(RawTls(lps_->port(), kClusterB, ProxyHeaderV2("10.0.0.1")).served_cn, "cluster-b");
}

TEST_F(ServiceSniCertsTest, RefusesToStartWithoutAUsablePairOrWithBothShapes) {
  // Both shapes at once: a usage error.
  std::vector<std::string> both = Args();
  both.insert(both.end(),
              {"--tls-cert", files_.tls().cert.string(), "--tls-key", files_.tls().key.string()});
  SpawnOptions spawn;
  spawn.argv = both;
  RunResult r = RunProcess(std::move(spawn), seconds(30));
  EXPECT_EQ(r.status.exit_code, 2) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("--tls-cert-dir"));

  // A folder without one pair that loads: refused, naming the folder and a pair's error.
  for (const char* name : {"cluster-a", "cluster-b", "westus2"}) fs::remove_all(certs_dir() / name);
  fs::create_directories(certs_dir() / "cluster-c");
  std::ofstream(certs_dir() / "cluster-c" / "tls.crt") << "not a certificate";
  std::ofstream(certs_dir() / "cluster-c" / "tls.key") << "not a key";
  SpawnOptions empty;
  empty.argv = Args();
  r = RunProcess(std::move(empty), seconds(30));
  EXPECT_EQ(r.status.exit_code, 1) << r.stderr_text;
  std::vector<nlohmann::json> lines = JsonLines(r.stderr_text, NonJsonLines::kSkip);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().value("msg", ""), "refusing to start");
  EXPECT_THAT(lines.back().value("error", ""), HasSubstr("--tls-cert-dir"));
  EXPECT_THAT(lines.back().value("error", ""), HasSubstr("cluster-c"));
  EXPECT_THAT(r.stderr_text, Not(HasSubstr("live-patching-service serving")));

  // Neither shape: a usage error too.
  std::vector<std::string> neither = Args();
  auto dir = std::find(neither.begin(), neither.end(), "--tls-cert-dir");
  neither.erase(dir, dir + 2);
  SpawnOptions none;
  none.argv = neither;
  r = RunProcess(std::move(none), seconds(30));
  EXPECT_EQ(r.status.exit_code, 2) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("--tls-cert and --tls-key, or --tls-cert-dir, is required"));
}

}  // namespace
}  // namespace hotfix::testsupport
