// The ALPN routing contract again, against real nginx (stream + ssl_preread) running
// deploy/nginx/nginx.conf byte for byte: the same cases as proxy_routing_test.cc runs against
// HAProxy, plus hotfix-agent check-hotfix through nginx to the real live-patching-service.
//
//   client --TLS--> nginx :listen --+-- ALPN aks-live-patching --> HelloTap --> FakeLpsServer
//                                   +-- otherwise ------------------------> TlsPeer "apiserver"
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hello_tap.h"
#include "service_fixture.h"
#include "tls_client.h"
#include "tls_peer.h"

namespace hotfix::testsupport {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto kGenerous = std::chrono::seconds(15);

std::string NginxBinary() {
  const char* bin = std::getenv("LP_NGINX_BIN");
  if (bin != nullptr && *bin != '\0') return bin;
  return std::filesystem::exists("/usr/sbin/nginx") ? "/usr/sbin/nginx" : "nginx";
}

std::filesystem::path ReferenceConfig() {
  return std::filesystem::path(SourceDir()) / "deploy" / "nginx" / "nginx.conf";
}

// nginx in the foreground with the reference nginx.conf copied unchanged into a prefix folder;
// only the two included files (listen address, upstreams) are the test's.
class Nginx {
 public:
  Nginx(const std::string& service_addr, const std::string& apiserver_addr) {
    std::filesystem::copy_file(ReferenceConfig(), dir_.File("nginx.conf"));
    dir_.Write("lp-upstreams.conf", "upstream live_patching { server " + service_addr +
                                        "; }\nupstream apiserver { server " + apiserver_addr +
                                        "; }\n");
    std::string failure;
    for (int attempt = 0; attempt < 3; ++attempt) {  // another process may take the port
      if (TryStart(PickFreePort(), &failure)) return;
    }
    throw std::runtime_error("nginx did not start: " + failure);
  }

  uint16_t port() const { return port_; }
  // The access log (stdout) and nginx's own messages (stderr).
  std::string Log() const { return process_ ? process_->Stdout() + process_->Stderr() : ""; }
  const TempDir& dir() const { return dir_; }

  // argv for nginx on this prefix; `extra` goes first (e.g. "-t").
  std::vector<std::string> Argv(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> argv = {NginxBinary()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::vector<std::string> rest = {
        "-p", dir_.path().string(),
        "-c", dir_.File("nginx.conf").string(),
        "-e", "stderr",
        "-g", "daemon off; pid " + dir_.File("nginx.pid").string() + ";"};
    argv.insert(argv.end(), rest.begin(), rest.end());
    return argv;
  }

 private:
  bool TryStart(uint16_t port, std::string* failure) {
    dir_.Write("lp-listen.conf", "listen 127.0.0.1:" + std::to_string(port) + ";\n");
    SpawnOptions spawn;
    spawn.argv = Argv();
    process_ = std::make_unique<Subprocess>(std::move(spawn));
    if (WaitUntilListening(port, kGenerous, [this] { return process_->running(); }) &&
        process_->running()) {
      port_ = port;
      return true;
    }
    *failure = process_->Stop().ToString() + ": " + process_->Stderr();
    process_.reset();
    return false;
  }

  TempDir dir_{"lp-nginx"};
  uint16_t port_ = 0;
  std::unique_ptr<Subprocess> process_;
};

class NginxRoutingTest : public ::testing::Test {
 protected:
  NginxRoutingTest()
      : lps_(LpsServerOptions(ca_)),
        tap_("127.0.0.1", lps_.port()),
        apiserver_(SilentApiserverOptions(ca_, kApiserverFqdn)),
        nginx_(LoopbackAddress(tap_.port()), LoopbackAddress(apiserver_.port())) {}

  // As the node agent connects: SNI the apiserver FQDN, the certificate of the backend it
  // expects verified against the cluster CA.
  TlsClientResult Connect(std::vector<std::string> alpn, const std::string& expected_name) {
    TlsClientOptions options;
    options.port = nginx_.port();
    options.sni = kApiserverFqdn;
    options.alpn = std::move(alpn);
    options.ca_pem = ca_.cert_pem();
    options.verify_name = expected_name;
    return TlsHandshake(options);
  }

  void TearDown() override {
    if (HasFailure()) ADD_FAILURE() << "nginx log:\n" << nginx_.Log();
  }

  TestCa ca_ = TestCa::Create("test-cluster-ca");
  FakeLpsServer lps_;
  HelloTap tap_;
  TlsPeer apiserver_;
  Nginx nginx_;
};

TEST_F(NginxRoutingTest, ReferenceConfigIsValidWithoutWarnings) {
  SpawnOptions spawn;
  spawn.argv = nginx_.Argv({"-t"});
  RunResult r = RunProcess(std::move(spawn), kGenerous);
  EXPECT_TRUE(r.status.success()) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("test is successful"));
  EXPECT_THAT(r.stderr_text, Not(HasSubstr("[warn]")));
}

TEST_F(NginxRoutingTest, LivePatchingAlpnReachesTheService) {
  TlsClientResult r = Connect({"aks-live-patching", "h2"}, kLpsServerName);
  ASSERT_TRUE(r.handshake_ok) << r.error;
  EXPECT_EQ(r.peer_common_name, kLpsServerName);
  EXPECT_EQ(r.selected_alpn, "h2");
  ASSERT_EQ(tap_.connection_count(), 1u);
  TappedConnection seen = tap_.connections()[0];
  EXPECT_TRUE(seen.parsed) << seen.error;
  // ssl_preread passes the ClientHello on untouched.
  EXPECT_EQ(seen.hello.sni, kApiserverFqdn);
  EXPECT_THAT(seen.hello.alpn, ElementsAreArray({"aks-live-patching", "h2"}));
  EXPECT_EQ(apiserver_.accepted_count(), 0u);
}

TEST_F(NginxRoutingTest, LivePatchingAnywhereInTheListRoutes) {
  for (std::vector<std::string> offer : {std::vector<std::string>{"h2", "aks-live-patching"},
                                         {"http/1.1", "aks-live-patching", "h2"},
                                         {"aks-live-patching"}}) {
    TlsClientResult r = Connect(offer, kLpsServerName);
    EXPECT_TRUE(r.handshake_ok) << r.error;
  }
  EXPECT_EQ(tap_.connection_count(), 3u);
  EXPECT_EQ(apiserver_.accepted_count(), 0u);
}

struct OtherOffer {
  const char* name;
  std::vector<std::string> alpn;
};

class NginxApiserverRoutingTest : public NginxRoutingTest,
                                  public ::testing::WithParamInterface<OtherOffer> {};

TEST_P(NginxApiserverRoutingTest, GoesToTheApiserver) {
  const std::vector<std::string>& offer = GetParam().alpn;
  TlsClientResult r = Connect(offer, kApiserverFqdn);
  ASSERT_TRUE(r.handshake_ok) << r.error;
  EXPECT_EQ(r.peer_common_name, kApiserverFqdn);
  ASSERT_TRUE(apiserver_.WaitForConnections(1, kGenerous));
  TlsPeerConnection seen = apiserver_.connections()[0];
  EXPECT_EQ(seen.sni, kApiserverFqdn);
  EXPECT_EQ(seen.offered_alpn, offer);
  EXPECT_EQ(tap_.connection_count(), 0u);
}

// The HAProxy test's cases, plus the look-alikes an unanchored regex would let through.
INSTANTIATE_TEST_SUITE_P(
    NotLivePatching, NginxApiserverRoutingTest,
    ::testing::Values(OtherOffer{"OnlyH2", {"h2"}}, OtherOffer{"H2AndHttp11", {"h2", "http/1.1"}},
                      OtherOffer{"NoAlpn", {}},
                      OtherOffer{"EvilSuffix", {"aks-live-patching-evil"}},
                      OtherOffer{"EvilPrefix", {"xaks-live-patching"}},
                      OtherOffer{"EvilPrefixInList", {"h2", "evil.aks-live-patching"}},
                      OtherOffer{"Prefix", {"aks-live-patchin"}},
                      OtherOffer{"UpperCase", {"AKS-LIVE-PATCHING"}},
                      OtherOffer{"GrpcDefault", {"grpc-exp", "h2"}}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST_F(NginxRoutingTest, NonTlsGoesToTheApiserver) {
  int fd = ConnectLoopback(nginx_.port());
  ASSERT_GE(fd, 0);
  const char request[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_GT(send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL), 0);
  EXPECT_TRUE(apiserver_.WaitForConnections(1, std::chrono::seconds(30)));
  close(fd);
  EXPECT_EQ(tap_.connection_count(), 0u);
}

TEST_F(NginxRoutingTest, LogNamesTheChosenBackendAndSni) {
  ASSERT_TRUE(Connect({"aks-live-patching", "h2"}, kLpsServerName).handshake_ok);
  ASSERT_TRUE(Connect({"h2"}, kApiserverFqdn).handshake_ok);
  auto both_logged = [&] {
    std::string log = nginx_.Log();
    return log.find(" live_patching ") != std::string::npos &&
           log.find(" apiserver ") != std::string::npos;
  };
  WaitFor(both_logged, kGenerous);
  EXPECT_TRUE(both_logged()) << nginx_.Log();
  EXPECT_THAT(nginx_.Log(), HasSubstr(std::string("sni=") + kApiserverFqdn));
  EXPECT_THAT(nginx_.Log(), HasSubstr("alpn=aks-live-patching,h2"));
}

// hotfix-agent --TLS--> nginx (deploy/nginx/nginx.conf) --ALPN--> live-patching-service
TEST(CheckHotfixThroughNginxTest, AnAttestedNodeStagesTheServedPointer) {
  ServiceFiles files;
  files.WriteComponent(kAksNodeControllerComponent, R"({"hotfixes":{"202604.01":"202604.01.3"}})");
  ServiceProcess lps(files.Args());
  TlsPeer apiserver(SilentApiserverOptions(files.tls_ca(), kApiserverFqdn));
  Nginx nginx(LoopbackAddress(lps.port()), LoopbackAddress(apiserver.port()));
  ImdsStandinOptions imds_options;
  imds_options.signer = files.signer();
  ImdsStandin imds(std::move(imds_options));
  NodeAgent node(files.tls_ca());

  AgentRun run = node.CheckHotfix(imds.document_url(), LoopbackAddress(nginx.port()));
  EXPECT_THAT(run.Message(), HasSubstr("check-hotfix outcome=lpsRead"))
      << run.result.stderr_text << "\nnginx:\n"
      << nginx.Log() << "\nservice:\n"
      << lps.Stderr();
  EXPECT_EQ(nlohmann::json::parse(node.dir().Read("hotfix.json"))["hotfixes"],
            nlohmann::json::parse(R"({"202604.01":"202604.01.3"})"));
  EXPECT_EQ(apiserver.accepted_count(), 0u);
}

}  // namespace
}  // namespace hotfix::testsupport
