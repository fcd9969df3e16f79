// live-patching-service --proxy-protocol behind the real proxies with the shipped configs:
// HAProxy's send-proxy-v2 (version 2) and nginx's proxy_protocol on (version 1). Nodes on
// loopback addresses of their own (127.0.0.2, 127.0.0.3) connect to the proxy, which
// connects to the service from 127.0.0.1. The service must see each node's address, not the
// proxy's: in its per-peer connection limit and in its access log.
//
//   node 127.0.0.2 --+                        PROXY header, then the node's TLS bytes
//   node 127.0.0.3 --+--> HAProxy or nginx ----------------> live-patching-service
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "h2_frames.h"
#include "haproxy.h"
#include "nginx.h"
#include "raw_h2_server.h"
#include "service_fixture.h"
#include "socket_util.h"
#include "tls_client.h"
#include "tls_peer.h"

namespace hotfix::testsupport {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr char kServedMap[] = R"({"hotfixes":{"202604.01":"202604.01.3"}})";

// A node's TLS connection from `source` to 127.0.0.1:`port`, offering ALPN aks-live-patching
// and h2 as hotfix-agent does, verified against the cluster CA. Kept open until destroyed.
class NodeConnection {
 public:
  static std::unique_ptr<NodeConnection> Open(const std::string& source, uint16_t port,
                                              const TestCa& ca, std::string* error) {
    std::unique_ptr<NodeConnection> c(new NodeConnection());
    c->fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(c->fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
        connect(c->fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
      *error = "connect from " + source + ": " + std::strerror(errno);
      return nullptr;
    }
    timeval timeout{10, 0};
    setsockopt(c->fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    c->ctx_ = SSL_CTX_new(TLS_client_method());
    static const unsigned char kAlpn[] =
        "\x11"
        "aks-live-patching"
        "\x02"
        "h2";
    SSL_CTX_set_alpn_protos(c->ctx_, kAlpn, sizeof kAlpn - 1);
    X509_STORE* store = SSL_CTX_get_cert_store(c->ctx_);
    BIO* bio = BIO_new_mem_buf(ca.cert_pem().data(), static_cast<int>(ca.cert_pem().size()));
    X509* root = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    X509_STORE_add_cert(store, root);
    X509_free(root);
    BIO_free(bio);
    SSL_CTX_set_verify(c->ctx_, SSL_VERIFY_PEER, nullptr);
    c->ssl_ = SSL_new(c->ctx_);
    SSL_set_tlsext_host_name(c->ssl_, kApiserverFqdn);
    SSL_set1_host(c->ssl_, kApiserverFqdn);
    SSL_set_fd(c->ssl_, c->fd_);
    if (SSL_connect(c->ssl_) != 1) {
      *error = "TLS from " + source + " failed: " + std::to_string(ERR_get_error());
      ERR_clear_error();
      return nullptr;
    }
    return c;
  }
  ~NodeConnection() {
    if (ssl_) SSL_free(ssl_);
    if (ctx_) SSL_CTX_free(ctx_);
    if (fd_ >= 0) close(fd_);
  }

  // GetComponentConfig for aksNodeController with `token`, as one write.
  bool Call(const std::string& token) {
    const std::string block = h2::HpackBlock(h2::GrpcRequestFields(
        h2::kGetComponentConfigPath, kApiserverFqdn, {{"authorization", token}}));
    const std::string bytes =
        h2::ClientPreface() + h2::Settings() + h2::Headers(1, block, h2::kEndHeaders) +
        h2::Data(1, GrpcFrame(std::string("\x0a\x11") + kAksNodeControllerComponent), true);
    return SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) ==
           static_cast<int>(bytes.size());
  }

  // Reads until the other end closes the connection (with or without close_notify: OpenSSL 3
  // calls the latter an unexpected EOF): true; false after 10 s of silence (SO_RCVTIMEO).
  bool ReadsToTheEnd() {
    char buf[4096];
    for (;;) {
      errno = 0;
      int n = SSL_read(ssl_, buf, sizeof buf);
      if (n > 0) continue;
      const bool timed_out =
          SSL_get_error(ssl_, n) == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK);
      ERR_clear_error();
      return !timed_out;
    }
  }

 private:
  NodeConnection() = default;
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
};

enum class Proxy { kHaproxy, kNginx };
void PrintTo(Proxy proxy, std::ostream* os) {
  *os << (proxy == Proxy::kHaproxy ? "HAProxy" : "Nginx");
}

class ProxyProtocolTest : public ::testing::TestWithParam<Proxy> {
 protected:
  ProxyProtocolTest() {
    net::IgnoreSigpipe();
    files_.WriteComponent(kAksNodeControllerComponent, kServedMap);
  }
  void TearDown() override {
    if (HasFailure() && lps_) ADD_FAILURE() << "service stderr:\n" << lps_->Stderr();
    if (HasFailure() && haproxy_) ADD_FAILURE() << "HAProxy:\n" << haproxy_->Log();
    if (HasFailure() && nginx_) ADD_FAILURE() << "nginx:\n" << nginx_->Log();
  }

  void Start(const std::vector<std::string>& flags) {
    std::vector<std::string> all = kMetricsFlags;
    all.insert(all.end(), flags.begin(), flags.end());
    lps_ = std::make_unique<ServiceProcess>(files_.Args(all));
    if (GetParam() == Proxy::kHaproxy) {
      HaproxyOptions options = AlpnRouteOptions(lps_->port(), apiserver_.port());
      options.send_proxy_v2 = true;
      haproxy_ = std::make_unique<Haproxy>(std::move(options));
    } else {
      nginx_ = std::make_unique<Nginx>(LoopbackAddress(lps_->port()),
                                       LoopbackAddress(apiserver_.port()), true);
    }
  }
  uint16_t ProxyPort() const { return haproxy_ ? haproxy_->frontend_port() : nginx_->port(); }
  std::unique_ptr<NodeConnection> Node(const std::string& source) {
    std::string error;
    auto c = NodeConnection::Open(source, ProxyPort(), files_.tls_ca(), &error);
    if (!c) std::cout << "[proxy] " << error << std::endl;
    return c;
  }
  std::optional<double> Event(const std::string& event) {
    return MetricValue(HttpGet(lps_->metrics_port(), "/metrics"), "lp_transport_events_total",
                       {{"event", event}});
  }

  ServiceFiles files_;
  TlsPeer apiserver_{SilentApiserverOptions(files_.tls_ca(), kApiserverFqdn)};
  std::unique_ptr<ServiceProcess> lps_;
  std::unique_ptr<Haproxy> haproxy_;
  std::unique_ptr<Nginx> nginx_;
};

// One connection per node: the second from 127.0.0.2 is refused while its first is open,
// 127.0.0.3's is not (without the header every connection would be the proxy's, and the
// third refused too); the call's access-log line names its node, not HAProxy.
TEST_P(ProxyProtocolTest, PerPeerLimitAndAccessLogSeeTheNodesAddress) {
  Start({"--proxy-protocol", "--proxy-protocol-from", "127.0.0.0/8", "--max-connections-per-peer",
         "1"});
  std::unique_ptr<NodeConnection> first = Node("127.0.0.2");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(Node("127.0.0.2"), nullptr) << "a second connection from 127.0.0.2 was let in";
  std::unique_ptr<NodeConnection> other = Node("127.0.0.3");
  ASSERT_NE(other, nullptr) << "127.0.0.3 was counted as 127.0.0.2 (or as the proxy)";
  EXPECT_EQ(Event("shed_per_peer"), 1.0);

  ASSERT_TRUE(other->Call(files_.Token()));
  WaitFor([&] { return !lps_->AccessLog().empty(); }, kGenerous);
  std::vector<nlohmann::json> access = lps_->AccessLog();
  ASSERT_EQ(access.size(), 1u);
  EXPECT_EQ(access[0]["code"], "OK");
  EXPECT_THAT(access[0]["peer"].get<std::string>(), ::testing::StartsWith("ipv4:127.0.0.3:"));
  EXPECT_EQ(access[0]["cluster"], kApiserverFqdn);
  EXPECT_EQ(Event("proxy_header_invalid"), 0.0);
}

// A node whose calls are refused (a token that is no attested document) gets
// --max-refusals-per-peer answers, each ending its connection; its next connection is closed
// right after its PROXY header, before TLS, counted as shed_refused_peer, while another node's
// is served. (The window's end is tested in service_refused_peers_test, on a clock of its own.)
TEST_P(ProxyProtocolTest, APeerRefusedTooOftenIsShedBeforeTls) {
  Start({"--proxy-protocol", "--proxy-protocol-from", "127.0.0.0/8", "--max-refusals-per-peer", "2",
         "--refusal-window", "1h"});
  for (int i = 0; i < 2; ++i) {
    std::unique_ptr<NodeConnection> refused = Node("127.0.0.2");
    ASSERT_NE(refused, nullptr) << "refusal " << i + 1 << " of 2 must still be answered";
    ASSERT_TRUE(refused->Call("not-an-attested-document"));
    EXPECT_TRUE(refused->ReadsToTheEnd()) << "the refusal did not end the connection";
  }
  EXPECT_EQ(Node("127.0.0.2"), nullptr) << "a third connection from 127.0.0.2 got a handshake";
  WaitFor([&] { return Event("shed_refused_peer") == 1.0; }, kGenerous);
  EXPECT_EQ(Event("shed_refused_peer"), 1.0);
  EXPECT_EQ(Event("handshake_failed"), 0.0) << "the shed connection reached TLS";

  std::unique_ptr<NodeConnection> other = Node("127.0.0.3");
  ASSERT_NE(other, nullptr) << "127.0.0.3 was shed for 127.0.0.2's refusals";
  ASSERT_TRUE(other->Call(files_.Token()));
  WaitFor([&] { return lps_->AccessLog().size() == 3; }, kGenerous);
  std::vector<nlohmann::json> access = lps_->AccessLog();
  ASSERT_EQ(access.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(access[i]["code"], "UNAUTHENTICATED");
    EXPECT_THAT(access[i]["peer"].get<std::string>(), ::testing::StartsWith("ipv4:127.0.0.2:"));
  }
  EXPECT_EQ(access[2]["code"], "OK");
  EXPECT_THAT(access[2]["peer"].get<std::string>(), ::testing::StartsWith("ipv4:127.0.0.3:"));
  bool logged = false;
  for (const auto& line : lps_->LogLines()) {
    logged |= line.value("event", "") == "shed_refused_peer" &&
              line.value("peer", "").rfind("ipv4:127.0.0.2:", 0) == 0;
  }
  EXPECT_TRUE(logged) << "no WARN line naming the shed peer";
}

// Only a peer's own faults count against its address: a node refused for what a real node may
// send through no act of its neighbours (a subscription off the allow-list) is answered every
// time and never shed, so the nodes it shares an address with (a NAT) are not either.
TEST_P(ProxyProtocolTest, RefusalsARealNodeMayGetNeverShedItsAddress) {
  Start({"--proxy-protocol", "--proxy-protocol-from", "127.0.0.0/8", "--max-refusals-per-peer", "2",
         "--refusal-window", "1h", "--allowed-subscriptions",
         "11111111-2222-3333-4444-555555555555"});
  for (int i = 0; i < 5; ++i) {
    std::unique_ptr<NodeConnection> refused = Node("127.0.0.2");
    ASSERT_NE(refused, nullptr) << "call " << i + 1 << " was shed before TLS";
    ASSERT_TRUE(refused->Call(files_.Token()));
    EXPECT_TRUE(refused->ReadsToTheEnd()) << "the refusal did not end the connection";
  }
  WaitFor([&] { return lps_->AccessLog().size() == 5; }, kGenerous);
  std::vector<nlohmann::json> access = lps_->AccessLog();
  ASSERT_EQ(access.size(), 5u);
  for (const auto& line : access) EXPECT_EQ(line["code"], "PERMISSION_DENIED");
  EXPECT_EQ(Event("shed_refused_peer"), 0.0);
}

// The header is required: a client that reaches the service directly, without one, is refused
// before TLS, counted and logged; the health port is not behind the proxy and needs none.
TEST_P(ProxyProtocolTest, AConnectionWithoutTheHeaderIsRefused) {
  Start({"--proxy-protocol", "--proxy-protocol-from", "127.0.0.0/8"});
  TlsClientOptions direct;
  direct.port = lps_->port();
  direct.sni = kApiserverFqdn;
  direct.alpn = {"aks-live-patching", "h2"};
  TlsClientResult r = TlsHandshake(direct);
  EXPECT_TRUE(r.tcp_connected);
  EXPECT_FALSE(r.handshake_ok);
  WaitFor([&] { return Event("proxy_header_invalid") == 1.0; }, kGenerous);
  EXPECT_EQ(Event("proxy_header_invalid"), 1.0);
  EXPECT_EQ(HealthCheck(lps_->HealthChannel(), ""), 1);
  bool logged = false;
  for (const auto& line : lps_->LogLines()) {
    if (line.value("event", "") == "proxy_header_invalid") {
      logged = line.value("detail", "").find("PROXY protocol: ") != std::string::npos;
    }
  }
  EXPECT_TRUE(logged) << "no WARN line naming the PROXY protocol";
  // Through the proxy, a node is served.
  std::unique_ptr<NodeConnection> node = Node("127.0.0.2");
  ASSERT_NE(node, nullptr);
}

// The apiserver's route through nginx's hop, which takes the header off again: a client that
// does not offer aks-live-patching still reaches the apiserver (which reads no header).
TEST_P(ProxyProtocolTest, TheApiserverGetsNoHeader) {
  Start({"--proxy-protocol", "--proxy-protocol-from", "127.0.0.0/8"});
  TlsClientOptions client;
  client.port = ProxyPort();
  client.sni = kApiserverFqdn;
  client.alpn = {"h2"};
  client.ca_pem = files_.tls_ca().cert_pem();
  TlsClientResult r = TlsHandshake(client);
  EXPECT_TRUE(r.handshake_ok) << r.error;
  EXPECT_EQ(apiserver_.accepted_count(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Proxies, ProxyProtocolTest,
                         ::testing::Values(Proxy::kHaproxy, Proxy::kNginx));

}  // namespace
}  // namespace hotfix::testsupport
