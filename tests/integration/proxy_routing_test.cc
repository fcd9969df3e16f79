// The ALPN routing contract, against the real HAProxy running deploy/haproxy/haproxy.cfg:
// a ClientHello offering "aks-live-patching" reaches the live-patching service, anything
// else reaches the apiserver, with SNI and the ClientHello bytes untouched either way.
//
//   client --TLS--> HAProxy :frontend --+-- ALPN aks-live-patching --> HelloTap --> FakeLpsServer
//                                       +-- otherwise ------------------------> TlsPeer "apiserver"
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "akslivepatching/v1/live_patching.grpc.pb.h"
#include "ports.h"
#include "proxied_lps.h"
#include "subprocess.h"
#include "test_certs.h"
#include "tls_client.h"

namespace hotfix::testsupport {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr auto kGenerous = std::chrono::seconds(10);
constexpr char kApiserverFqdn[] = "myaks-dns-12345678.hcp.eastus.azmk8s.io";

class ProxyRoutingTest : public ::testing::Test {
 protected:
  // A TLS client through the proxy that checks the certificate of the backend it expects:
  // kLpsServerName for the service (what the node agent pins), the FQDN for the apiserver.
  // SNI is the apiserver FQDN unless a test says otherwise, as the node agent sends it.
  TlsClientResult Connect(std::vector<std::string> alpn, const std::string& expected_name,
                          std::string sni = kApiserverFqdn) {
    TlsClientOptions options;
    options.port = stack_.proxy.frontend_port();
    options.sni = std::move(sni);
    options.alpn = std::move(alpn);
    options.ca_pem = ca_.cert_pem();
    options.verify_name = expected_name;
    return TlsHandshake(options);
  }

  void TearDown() override {
    if (HasFailure()) ADD_FAILURE() << "HAProxy log:\n" << stack_.proxy.Log();
  }

  TestCa ca_ = TestCa::Create("test-cluster-ca");
  ProxiedLps stack_{ca_, kApiserverFqdn};
};

TEST_F(ProxyRoutingTest, LivePatchingAlpnReachesTheService) {
  TlsClientResult r = Connect({"aks-live-patching", "h2"}, kLpsServerName);
  ASSERT_TRUE(r.handshake_ok) << r.error;
  // The gRPC server terminated this TLS session: its certificate, its ALPN choice.
  EXPECT_EQ(r.peer_common_name, kLpsServerName);
  EXPECT_EQ(r.selected_alpn, "h2");
  ASSERT_EQ(stack_.tap.connection_count(), 1u);
  TappedConnection seen = stack_.tap.connections()[0];
  EXPECT_TRUE(seen.parsed) << seen.error;
  // HAProxy passed the ClientHello on untouched: same SNI, same list, same order.
  EXPECT_EQ(seen.hello.sni, kApiserverFqdn);
  EXPECT_THAT(seen.hello.alpn, ElementsAreArray({"aks-live-patching", "h2"}));
  EXPECT_EQ(stack_.apiserver.accepted_count(), 0u);
}

TEST_F(ProxyRoutingTest, LivePatchingAnywhereInTheListRoutes) {
  // HAProxy's req.ssl_alpn (like Envoy's application_protocols) matches any offered entry.
  TlsClientResult r = Connect({"h2", "aks-live-patching"}, kLpsServerName);
  ASSERT_TRUE(r.handshake_ok) << r.error;
  EXPECT_EQ(stack_.tap.connection_count(), 1u);
  EXPECT_EQ(stack_.apiserver.accepted_count(), 0u);
}

TEST_F(ProxyRoutingTest, RoutingIgnoresSni) {
  // No SNI (a client dialling an IP literal) and the legacy LPS name both route on ALPN only.
  TlsClientResult no_sni = Connect({"aks-live-patching", "h2"}, kLpsServerName, "");
  EXPECT_TRUE(no_sni.handshake_ok) << no_sni.error;
  TlsClientResult legacy = Connect({"h2"}, kApiserverFqdn, kLpsServerName);
  EXPECT_TRUE(legacy.handshake_ok) << legacy.error;
  ASSERT_EQ(stack_.tap.connection_count(), 1u);
  EXPECT_EQ(stack_.tap.connections()[0].hello.sni, "");
  ASSERT_TRUE(stack_.apiserver.WaitForConnections(1, kGenerous));
  EXPECT_EQ(stack_.apiserver.connections()[0].sni, kLpsServerName);
}

struct OtherOffer {
  const char* name;
  std::vector<std::string> alpn;
};

class ApiserverRoutingTest : public ProxyRoutingTest,
                             public ::testing::WithParamInterface<OtherOffer> {};

TEST_P(ApiserverRoutingTest, GoesToTheApiserver) {
  const std::vector<std::string>& offer = GetParam().alpn;
  TlsClientResult r = Connect(offer, kApiserverFqdn);
  ASSERT_TRUE(r.handshake_ok) << r.error;
  EXPECT_EQ(r.peer_common_name, kApiserverFqdn);
  ASSERT_TRUE(stack_.apiserver.WaitForConnections(1, kGenerous));
  TlsPeerConnection seen = stack_.apiserver.connections()[0];
  EXPECT_EQ(seen.sni, kApiserverFqdn);
  EXPECT_EQ(seen.offered_alpn, offer);
  EXPECT_EQ(stack_.tap.connection_count(), 0u);
  EXPECT_EQ(stack_.lps.call_count(), 0u);
}

INSTANTIATE_TEST_SUITE_P(NotLivePatching, ApiserverRoutingTest,
                         ::testing::Values(OtherOffer{"OnlyH2", {"h2"}},
                                           OtherOffer{"H2AndHttp11", {"h2", "http/1.1"}},
                                           OtherOffer{"NoAlpn", {}},
                                           OtherOffer{"EvilSuffix", {"aks-live-patching-evil"}},
                                           OtherOffer{"Prefix", {"aks-live-patchin"}},
                                           OtherOffer{"UpperCase", {"AKS-LIVE-PATCHING"}},
                                           OtherOffer{"GrpcDefault", {"grpc-exp", "h2"}}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST_F(ProxyRoutingTest, NonTlsGoesToTheApiserver) {
  int fd = ConnectLoopback(stack_.proxy.frontend_port());
  ASSERT_GE(fd, 0);
  const char request[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_GT(send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL), 0);
  // HAProxy may wait out its inspect-delay (5 s) before giving up on a ClientHello.
  EXPECT_TRUE(stack_.apiserver.WaitForConnections(1, std::chrono::seconds(30)));
  close(fd);
  EXPECT_FALSE(stack_.apiserver.connections().at(0).handshake_ok);
  EXPECT_EQ(stack_.tap.connection_count(), 0u);
}

TEST_F(ProxyRoutingTest, StockGrpcClientIsRoutedToTheApiserver) {
  // libgrpc++ offers ["grpc-exp","h2"] and cannot be told otherwise: the reason the node
  // agent speaks gRPC over its own TLS client. Its call never reaches the service.
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ca_.cert_pem();
  grpc::ChannelArguments args;
  args.SetString(GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, kApiserverFqdn);
  auto channel =
      grpc::CreateCustomChannel(stack_.proxy.frontend_address(), grpc::SslCredentials(tls), args);
  auto stub = akslivepatching::v1::LivePatchingService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  akslivepatching::v1::GetComponentConfigRequest request;
  request.set_component_name(kAksNodeControllerComponent);
  akslivepatching::v1::GetComponentConfigResponse response;
  grpc::Status status = stub->GetComponentConfig(&ctx, request, &response);
  EXPECT_FALSE(status.ok());
  ASSERT_TRUE(stack_.apiserver.WaitForConnections(1, kGenerous));
  EXPECT_THAT(stack_.apiserver.connections()[0].offered_alpn, ElementsAreArray({"grpc-exp", "h2"}));
  EXPECT_EQ(stack_.lps.call_count(), 0u);
}

TEST_F(ProxyRoutingTest, LogNamesTheChosenBackendAndSni) {
  ASSERT_TRUE(Connect({"aks-live-patching", "h2"}, kLpsServerName).handshake_ok);
  ASSERT_TRUE(Connect({"h2"}, kApiserverFqdn).handshake_ok);
  // HAProxy logs a TCP session when it ends; both just closed, so allow a moment.
  auto until = std::chrono::steady_clock::now() + kGenerous;
  auto both_logged = [&] {
    std::string log = stack_.proxy.Log();
    return log.find("live_patching/lps") != std::string::npos &&
           log.find("apiserver/apiserver") != std::string::npos;
  };
  while (!both_logged() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(both_logged()) << stack_.proxy.Log();
  EXPECT_THAT(stack_.proxy.Log(), HasSubstr(std::string("sni=") + kApiserverFqdn));
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
