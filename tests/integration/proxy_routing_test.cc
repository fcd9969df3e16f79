// The ALPN routing contract, against each real proxy running the config we ship: HAProxy with
// deploy/haproxy/haproxy.cfg and nginx (stream + ssl_preread) with deploy/nginx/nginx.conf,
// byte for byte (Envoy, production's proxy, is not packaged for Debian 12: deploy/envoy is
// checked by deploy_config_test). A ClientHello offering "aks-live-patching" reaches the
// live-patching service, anything else reaches the apiserver, with SNI and the ClientHello
// bytes untouched either way.
//
//   client --TLS--> proxy --+-- ALPN aks-live-patching --> HelloTap --> FakeLpsServer
//                           +-- otherwise ------------------------> TlsPeer "apiserver"
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <thread>
#include <tuple>

#include "akslivepatching/v1/live_patching.grpc.pb.h"
#include "haproxy.h"
#include "nginx.h"
#include "ports.h"
#include "proxied_lps.h"
#include "subprocess.h"
#include "test_certs.h"
#include "tls_client.h"
#include "wait.h"

namespace hotfix::testsupport {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kApiserverFqdn[] = "myaks-dns-12345678.hcp.eastus.azmk8s.io";

enum class Proxy { kHaproxy, kNginx };

std::string ProxyName(Proxy proxy) { return proxy == Proxy::kHaproxy ? "HAProxy" : "Nginx"; }
void PrintTo(Proxy proxy, std::ostream* os) { *os << ProxyName(proxy); }

// The service and the apiserver behind one proxy, chosen by the test's parameter.
class RoutingFixture : public ::testing::Test {
 protected:
  void StartProxy(Proxy proxy) {
    if (proxy == Proxy::kHaproxy) {
      haproxy_ = std::make_unique<Haproxy>(
          AlpnRouteOptions(backends_.tap.port(), backends_.apiserver.port()));
    } else {
      nginx_ = std::make_unique<Nginx>(LoopbackAddress(backends_.tap.port()),
                                       LoopbackAddress(backends_.apiserver.port()));
    }
  }
  uint16_t ProxyPort() const { return haproxy_ ? haproxy_->frontend_port() : nginx_->port(); }
  // One line per connection, naming the backend chosen and the SNI, in either proxy's format.
  std::string ProxyLog() const {
    if (haproxy_) return haproxy_->Log();
    return nginx_ ? nginx_->Log() : "";
  }

  // A TLS client through the proxy that checks the certificate of the backend it expects:
  // kApiserverFqdn for the service (what the node agent pins), the FQDN for the apiserver.
  // SNI is the apiserver FQDN unless a test says otherwise, as the node agent sends it.
  TlsClientResult Connect(std::vector<std::string> alpn, const std::string& expected_name,
                          std::string sni = kApiserverFqdn) {
    TlsClientOptions options;
    options.port = ProxyPort();
    options.sni = std::move(sni);
    options.alpn = std::move(alpn);
    options.ca_pem = ca_.cert_pem();
    options.verify_name = expected_name;
    return TlsHandshake(options);
  }

  void TearDown() override {
    if (HasFailure()) ADD_FAILURE() << "proxy log:\n" << ProxyLog();
  }

  TestCa ca_ = TestCa::Create("test-cluster-ca");
  LpsBackends backends_{ca_, kApiserverFqdn};
  std::unique_ptr<Haproxy> haproxy_;
  std::unique_ptr<Nginx> nginx_;
};

class RoutingTest : public RoutingFixture, public ::testing::WithParamInterface<Proxy> {
 protected:
  void SetUp() override { StartProxy(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(Proxies, RoutingTest, ::testing::Values(Proxy::kHaproxy, Proxy::kNginx),
                         [](const auto& param_info) { return ProxyName(param_info.param); });

TEST_P(RoutingTest, LivePatchingAlpnReachesTheService) {
  TlsClientResult r = Connect({"aks-live-patching", "h2"}, kApiserverFqdn);
  ASSERT_TRUE(r.handshake_ok) << r.error;
  // The gRPC server terminated this TLS session: its certificate, its ALPN choice.
  EXPECT_EQ(r.peer_common_name, kApiserverFqdn);
  EXPECT_EQ(r.selected_alpn, "h2");
  ASSERT_EQ(backends_.tap.connection_count(), 1u);
  TappedConnection seen = backends_.tap.connections()[0];
  EXPECT_TRUE(seen.parsed) << seen.error;
  // The proxy passed the ClientHello on untouched: same SNI, same list, same order.
  EXPECT_EQ(seen.hello.sni, kApiserverFqdn);
  EXPECT_THAT(seen.hello.alpn, ElementsAreArray({"aks-live-patching", "h2"}));
  EXPECT_EQ(backends_.apiserver.accepted_count(), 0u);
}

TEST_P(RoutingTest, LivePatchingAnywhereInTheListRoutes) {
  // Like Envoy's application_protocols, any offered entry matches.
  for (std::vector<std::string> offer : {std::vector<std::string>{"h2", "aks-live-patching"},
                                         {"http/1.1", "aks-live-patching", "h2"},
                                         {"aks-live-patching"}}) {
    TlsClientResult r = Connect(offer, kApiserverFqdn);
    EXPECT_TRUE(r.handshake_ok) << r.error;
  }
  EXPECT_EQ(backends_.tap.connection_count(), 3u);
  EXPECT_EQ(backends_.apiserver.accepted_count(), 0u);
}

TEST_P(RoutingTest, RoutingIgnoresSni) {
  // No SNI (a client dialling an IP literal) and the legacy LPS name both route on ALPN only.
  TlsClientResult no_sni = Connect({"aks-live-patching", "h2"}, kApiserverFqdn, "");
  EXPECT_TRUE(no_sni.handshake_ok) << no_sni.error;
  TlsClientResult legacy = Connect({"h2"}, kApiserverFqdn, kApiserverFqdn);
  EXPECT_TRUE(legacy.handshake_ok) << legacy.error;
  ASSERT_EQ(backends_.tap.connection_count(), 1u);
  EXPECT_EQ(backends_.tap.connections()[0].hello.sni, "");
  ASSERT_TRUE(backends_.apiserver.WaitForConnections(1, kGenerous));
  EXPECT_EQ(backends_.apiserver.connections()[0].sni, kApiserverFqdn);
}

TEST_P(RoutingTest, NonTlsGoesToTheApiserver) {
  int fd = ConnectLoopback(ProxyPort());
  ASSERT_GE(fd, 0);
  const char request[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_GT(send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL), 0);
  // HAProxy may wait out its inspect-delay (5 s) before giving up on a ClientHello.
  EXPECT_TRUE(backends_.apiserver.WaitForConnections(1, std::chrono::seconds(30)));
  close(fd);
  EXPECT_FALSE(backends_.apiserver.connections().at(0).handshake_ok);
  EXPECT_EQ(backends_.tap.connection_count(), 0u);
}

TEST_P(RoutingTest, StockGrpcClientIsRoutedToTheApiserver) {
  // libgrpc++ offers ["grpc-exp","h2"] and cannot be told otherwise: the reason the node
  // agent speaks gRPC over its own TLS client. Its call never reaches the service.
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ca_.cert_pem();
  grpc::ChannelArguments args;
  args.SetString(GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, kApiserverFqdn);
  auto channel =
      grpc::CreateCustomChannel(LoopbackAddress(ProxyPort()), grpc::SslCredentials(tls), args);
  auto stub = akslivepatching::v1::LivePatchingService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  akslivepatching::v1::GetComponentConfigRequest request;
  request.set_component_name(kAksNodeControllerComponent);
  akslivepatching::v1::GetComponentConfigResponse response;
  grpc::Status status = stub->GetComponentConfig(&ctx, request, &response);
  EXPECT_FALSE(status.ok());
  ASSERT_TRUE(backends_.apiserver.WaitForConnections(1, kGenerous));
  EXPECT_THAT(backends_.apiserver.connections()[0].offered_alpn,
              ElementsAreArray({"grpc-exp", "h2"}));
  EXPECT_EQ(backends_.lps.call_count(), 0u);
}

TEST_P(RoutingTest, LogNamesTheChosenBackendAndSni) {
  ASSERT_TRUE(Connect({"aks-live-patching", "h2"}, kApiserverFqdn).handshake_ok);
  ASSERT_TRUE(Connect({"h2"}, kApiserverFqdn).handshake_ok);
  // HAProxy: "live_patching/lps", "apiserver/apiserver"; nginx: " live_patching ",
  // " apiserver_hop " (the hop that would take a PROXY header off the apiserver's route).
  // Both log a session when it ends; both just closed, so allow a moment.
  const bool haproxy = GetParam() == Proxy::kHaproxy;
  const std::string to_service = haproxy ? "live_patching/lps" : " live_patching ";
  const std::string to_apiserver = haproxy ? "apiserver/apiserver" : " apiserver_hop ";
  auto both_logged = [&] {
    std::string log = ProxyLog();
    return log.find(to_service) != std::string::npos && log.find(to_apiserver) != std::string::npos;
  };
  EXPECT_TRUE(WaitFor(both_logged)) << ProxyLog();
  EXPECT_THAT(ProxyLog(), HasSubstr(std::string("sni=") + kApiserverFqdn));
  if (!haproxy) {
    EXPECT_THAT(ProxyLog(), HasSubstr("alpn=aks-live-patching,h2"));
  }
}

struct OtherOffer {
  const char* name;
  std::vector<std::string> alpn;
};
void PrintTo(const OtherOffer& offer, std::ostream* os) { *os << offer.name; }

class ApiserverRoutingTest : public RoutingFixture,
                             public ::testing::WithParamInterface<std::tuple<Proxy, OtherOffer>> {
 protected:
  void SetUp() override { StartProxy(std::get<0>(GetParam())); }
};

TEST_P(ApiserverRoutingTest, GoesToTheApiserver) {
  const std::vector<std::string>& offer = std::get<1>(GetParam()).alpn;
  TlsClientResult r = Connect(offer, kApiserverFqdn);
  ASSERT_TRUE(r.handshake_ok) << r.error;
  EXPECT_EQ(r.peer_common_name, kApiserverFqdn);
  ASSERT_TRUE(backends_.apiserver.WaitForConnections(1, kGenerous));
  TlsPeerConnection seen = backends_.apiserver.connections()[0];
  EXPECT_EQ(seen.sni, kApiserverFqdn);
  EXPECT_EQ(seen.offered_alpn, offer);
  EXPECT_EQ(backends_.tap.connection_count(), 0u);
  EXPECT_EQ(backends_.lps.call_count(), 0u);
}

// Besides the ordinary offers, the look-alikes an unanchored or case-folding match would let
// through.
INSTANTIATE_TEST_SUITE_P(
    NotLivePatching, ApiserverRoutingTest,
    ::testing::Combine(
        ::testing::Values(Proxy::kHaproxy, Proxy::kNginx),
        ::testing::Values(OtherOffer{"OnlyH2", {"h2"}},
                          OtherOffer{"H2AndHttp11", {"h2", "http/1.1"}}, OtherOffer{"NoAlpn", {}},
                          OtherOffer{"EvilSuffix", {"aks-live-patching-evil"}},
                          OtherOffer{"EvilPrefix", {"xaks-live-patching"}},
                          OtherOffer{"EvilPrefixInList", {"h2", "evil.aks-live-patching"}},
                          OtherOffer{"Prefix", {"aks-live-patchin"}},
                          OtherOffer{"UpperCase", {"AKS-LIVE-PATCHING"}},
                          OtherOffer{"GrpcDefault", {"grpc-exp", "h2"}})),
    [](const auto& param_info) {
      return ProxyName(std::get<0>(param_info.param)) + "_" + std::get<1>(param_info.param).name;
    });

// ---- Each proxy's own checks ----

TEST(NginxConfigTest, ReferenceConfigIsValidWithoutWarnings) {
  Nginx nginx("127.0.0.1:1", "127.0.0.1:2");
  SpawnOptions spawn;
  spawn.argv = nginx.Argv({"-t"});
  RunResult r = RunProcess(std::move(spawn), kGenerous);
  EXPECT_TRUE(r.status.success()) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("test is successful"));
  EXPECT_THAT(r.stderr_text, Not(HasSubstr("[warn]")));
}

TEST(HaproxyConfigTest, ReferenceConfigIsValid) {
  SpawnOptions spawn;
  spawn.argv = {Haproxy::DefaultBinary(), "-c", "-f", Haproxy::DefaultConfigPath().string()};
  spawn.env = {{"LP_FRONTEND_BIND", "127.0.0.1:1"},
               {"LP_SERVICE_ADDR", "127.0.0.1:2"},
               {"LP_APISERVER_ADDR", "127.0.0.1:3"}};
  RunResult r = RunProcess(spawn, kGenerous);
  EXPECT_TRUE(r.status.success()) << r.stdout_text << r.stderr_text;
  // A warning usually means a line does not do what its comment says.
  EXPECT_THAT(r.stdout_text + r.stderr_text, ::testing::Not(HasSubstr("WARNING")));
}

TEST(HaproxyFixtureTest, StopsAndReportsAStartFailure) {
  HaproxyOptions options;
  options.service_addr = "127.0.0.1:1";
  options.apiserver_addr = "not-an-address:::";
  EXPECT_THROW(Haproxy proxy(options), std::runtime_error);

  options.apiserver_addr = "127.0.0.1:2";
  Haproxy proxy(options);
  EXPECT_TRUE(proxy.running());
  uint16_t port = proxy.frontend_port();
  proxy.Stop();
  EXPECT_FALSE(proxy.running());
  EXPECT_FALSE(IsListening(port));  // the port is free again for the next test
}

}  // namespace
}  // namespace hotfix::testsupport
