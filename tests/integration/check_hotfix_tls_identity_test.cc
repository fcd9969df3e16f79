// Which certificate a node accepts from the live-patching service since AgentBaker #9351
// (docs/CHECK-HOTFIX.md, "Verifying the service"): the cluster CA as the only anchor and the
// dialed apiserver host as the name, as Go's standard verifier checks it (DNS SANs with
// whole-label wildcards, the IP SANs for an IP literal, the CN never). The real hotfix-agent
// dials through the real HAProxy (deploy/haproxy/haproxy.cfg) routing ALPN aks-live-patching to
// a HelloTap in front of the service, which is either libgrpc++ (FakeLpsServer) or grpc-go 1.33
// (bench/grpcgo-server --trivial, Debian's golang-google-grpc-dev): each certificate case
// against both.
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bin_dir.h"
#include "check_hotfix_run.h"
#include "fake_lps_server.h"
#include "haproxy.h"
#include "hello_tap.h"
#include "imds_standin.h"
#include "ports.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_certs.h"
#include "tls_peer.h"

namespace hotfix::testsupport {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kServedMap[] = R"({"hotfixes":{"202604.01":"202604.01.3"}})";
// What a kubelet's serving certificate from the same cluster CA names: a node, not the service.
constexpr char kKubeletName[] = "aks-nodepool1-12345678-vmss000000";

enum class Backend { kLibGrpc, kGrpcGo };

std::string GrpcGoServer() {
  return (std::filesystem::path(BinDir()).parent_path() / "grpcgo" / "grpcgo-server").string();
}

// The service under test with the certificate the case gives it, listening on loopback.
class Service {
 public:
  Service(Backend backend, const CertAndKey& cert, const TempDir& dir) {
    if (backend == Backend::kLibGrpc) {
      FakeLpsServerOptions options;
      options.cert = cert;
      options.behavior.config = kServedMap;
      lps_ = std::make_unique<FakeLpsServer>(std::move(options));
      port_ = lps_->port();
      return;
    }
    const PemPaths tls = WritePemFiles(dir.path(), "grpcgo-tls", cert);
    std::filesystem::create_directories(dir.File("components"));
    dir.Write("components/aksNodeController.json", kServedMap);
    // --trivial answers from the store without checking the caller: only TLS is under test.
    const auto roots = WritePemFile(dir.path(), "unused-roots.pem", TestCa::Create().cert_pem());
    port_ = PickFreePort();
    SpawnOptions spawn;
    spawn.argv = {GrpcGoServer(),        "--listen",         LoopbackAddress(port_),
                  "--tls-cert",          tls.cert.string(),  "--tls-key",
                  tls.key.string(),      "--components-dir", dir.File("components").string(),
                  "--attestation-roots", roots.string(),     "--trivial"};
    go_ = std::make_unique<Subprocess>(std::move(spawn));
    if (!WaitUntilListening(port_, 30s, [this] { return go_->running(); })) {
      throw std::runtime_error("grpcgo-server did not listen: " + go_->Stderr());
    }
  }
  uint16_t port() const { return port_; }

 private:
  std::unique_ptr<FakeLpsServer> lps_;
  std::unique_ptr<Subprocess> go_;
  uint16_t port_ = 0;
};

struct Case {
  std::string name;
  LeafOptions leaf;       // the service's certificate, from the cluster CA
  std::string apiserver;  // the node config's api_server_name
  std::vector<std::string> args;
  bool served = false;   // lpsRead; otherwise failed on the certificate
  bool sni_sent = true;  // the ClientHello named the apiserver host
};

// gtest names a parameter by these, not by its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
void PrintTo(Backend b, std::ostream* os) {
  *os << (b == Backend::kLibGrpc ? "libgrpc++" : "grpc-go");
}

LeafOptions Names(std::vector<std::string> dns, std::vector<std::string> ips = {}) {
  LeafOptions leaf;
  leaf.common_name = dns.empty() ? "lps" : dns[0];
  leaf.dns_names = std::move(dns);
  leaf.ip_addresses = std::move(ips);
  return leaf;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  cases.push_back({"TheApiserverFqdnIsServed", Names({kApiserverFqdn}), kApiserverFqdn, {}, true});
  cases.push_back({"AnIpHostIsCheckedAgainstTheIpSansWithoutSni",
                   Names({}, {"127.0.0.1"}),
                   "127.0.0.1",
                   {},
                   true,
                   false});
  cases.push_back({"AnIpHostIsNotServedAnFqdnOnlyCertificate",
                   Names({kApiserverFqdn}),
                   "127.0.0.1",
                   {},
                   false,
                   false});
  cases.push_back(
      {"TheOldPinnedNameAloneIsRefused", Names({kLegacyLpsServerName}), kApiserverFqdn, {}, false});
  cases.push_back({"TheOldPinnedNameIsServedWithServerName",
                   Names({kLegacyLpsServerName}),
                   kApiserverFqdn,
                   {"--server-name", kLegacyLpsServerName},
                   true});
  cases.push_back({"AKubeletCertificateFromTheSameCaIsRefused",
                   Names({kKubeletName}),
                   kApiserverFqdn,
                   {},
                   false});
  cases.push_back({"AWildcardForTheRegionIsServed",
                   Names({"*.hcp.eastus.azmk8s.io"}),
                   kApiserverFqdn,
                   {},
                   true});
  cases.push_back({"AWildcardOneLabelTooShallowIsRefused",
                   Names({"*.eastus.azmk8s.io"}),
                   kApiserverFqdn,
                   {},
                   false});
  LeafOptions cn_only = Names({});
  cn_only.common_name = kApiserverFqdn;  // Go ignores the CN: no SAN, no match
  cases.push_back({"TheCommonNameAloneIsRefused", cn_only, kApiserverFqdn, {}, false});
  LeafOptions client_only = Names({kApiserverFqdn});
  client_only.usage = KeyUsage::kClientAuth;
  cases.push_back({"AClientAuthOnlyCertificateIsRefused", client_only, kApiserverFqdn, {}, false});
  return cases;
}

class CheckHotfixTlsIdentityTest : public ::testing::TestWithParam<std::tuple<Backend, Case>> {};

TEST_P(CheckHotfixTlsIdentityTest, OnlyTheDialedNameIsAccepted) {
  const auto& [backend, c] = GetParam();
  if (backend == Backend::kGrpcGo) {
    ASSERT_TRUE(std::filesystem::exists(GrpcGoServer()))
        << GrpcGoServer() << " was not built (bench/grpcgo-server/build.sh)";
  }
  TempDir dir("tls-identity");
  TestCa ca = TestCa::Create("cluster-ca");
  Service service(backend, ca.IssueLeaf(c.leaf), dir);
  HelloTap tap("127.0.0.1", service.port());
  TlsPeer apiserver(SilentApiserverOptions(ca, kApiserverFqdn));
  Haproxy proxy(AlpnRouteOptions(tap.port(), apiserver.port()));
  ImdsStandin imds;

  dir.Write("config.json", NodeConfigJson(c.apiserver, ca.cert_pem()).dump());
  CheckHotfixArgs args;
  args.node_config = dir.File("config.json");
  args.nbc_cmd = dir.File("nbc-cmd.sh");
  args.pointer = dir.File("hotfix.json");
  args.events_dir = dir.File("events");
  args.log_file = dir.File("agent.log");
  args.imds_url = imds.document_url();
  args.connect_to = proxy.frontend_address();
  args.extra_args = c.args;
  RunResult run = RunProcess(CheckHotfixSpawn(args), 60s);
  ASSERT_TRUE(run.status.success()) << run.stderr_text;  // fail-open, whatever happened
  std::vector<Json> events = ReadEventFiles(args.events_dir);
  ASSERT_EQ(events.size(), 1u) << run.stderr_text;
  const std::string message = events[0]["Message"];

  ASSERT_EQ(tap.connection_count(), 1u) << "the node did not reach the service's route";
  const auto hello = tap.connections()[0].hello;
  EXPECT_EQ(hello.sni, c.sni_sent ? c.apiserver : "");
  if (c.served) {
    EXPECT_THAT(message, HasSubstr("check-hotfix outcome=lpsRead")) << run.stderr_text;
    EXPECT_EQ(ReadFile(args.pointer).find("202604.01.3") != std::string::npos, true);
  } else {
    EXPECT_THAT(message, HasSubstr("check-hotfix outcome=failed")) << run.stderr_text;
    EXPECT_THAT(message, HasSubstr("server certificate verification failed"));
    EXPECT_FALSE(std::filesystem::exists(args.pointer));
  }
  EXPECT_EQ(apiserver.accepted_count(), 0u) << "ALPN aks-live-patching went to the apiserver";
}

INSTANTIATE_TEST_SUITE_P(Certificates, CheckHotfixTlsIdentityTest,
                         ::testing::Combine(::testing::Values(Backend::kLibGrpc, Backend::kGrpcGo),
                                            ::testing::ValuesIn(Cases())),
                         [](const ::testing::TestParamInfo<std::tuple<Backend, Case>>& info) {
                           return std::string(std::get<0>(info.param) == Backend::kLibGrpc
                                                  ? "LibGrpc_"
                                                  : "GrpcGo_") +
                                  std::get<1>(info.param).name;
                         });

}  // namespace
}  // namespace hotfix::testsupport
