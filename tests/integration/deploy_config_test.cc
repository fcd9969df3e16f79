// Drift guards for the deployment files no test can run here. Envoy is not installable on
// the build machine and there is no cluster, so these read the files as text and hold them to
// what is tested: the Envoy listener to the HAProxy and nginx configs the routing tests run,
// and every flag the systemd unit and the Kubernetes Deployment pass to the binary.
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "service_fixture.h"
#include "text_util.h"

namespace hotfix::testsupport {
namespace {

using ::testing::HasSubstr;

std::string ReadDeployFile(const std::string& relative) {
  const std::filesystem::path path = std::filesystem::path(SourceDir()) / "deploy" / relative;
  EXPECT_TRUE(std::filesystem::is_regular_file(path)) << relative;
  return ReadFile(path);
}

// "5s", "1h", "3600s", "500ms" -> milliseconds; -1 if unparseable.
long long DurationMs(const std::string& text) {
  std::smatch m;
  if (!std::regex_match(text, m, std::regex(R"((\d+)(ms|s|m|h))"))) return -1;
  long long n = std::stoll(m[1]);
  if (m[2] == "ms") return n;
  if (m[2] == "s") return n * 1000;
  if (m[2] == "m") return n * 60 * 1000;
  return n * 3600 * 1000;
}

// Every capture of `pattern` (first group) in text, in order.
std::vector<std::string> All(const std::string& text, const std::string& pattern) {
  std::vector<std::string> out;
  std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

// The one value of a setting, failing the test unless there is exactly one.
std::string One(const std::string& text, const std::string& pattern) {
  std::vector<std::string> all = All(text, pattern);
  EXPECT_EQ(all.size(), 1u) << pattern;
  return all.empty() ? "" : all[0];
}

// Lines that are not comments, so that prose never satisfies a check.
std::string WithoutComments(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == '#') continue;
    out += line + "\n";
  }
  return out;
}

struct ProxyTimeouts {
  long long client_hello_ms;
  long long connect_ms;
  long long idle_ms;
};

ProxyTimeouts Haproxy() {
  std::string cfg = WithoutComments(ReadDeployFile("haproxy/haproxy.cfg"));
  EXPECT_EQ(One(cfg, R"(timeout client (\S+))"), One(cfg, R"(timeout server (\S+))"));
  return {DurationMs(One(cfg, R"(tcp-request inspect-delay (\S+))")),
          DurationMs(One(cfg, R"(timeout connect (\S+))")),
          DurationMs(One(cfg, R"(timeout client (\S+))"))};
}

TEST(DeployConfigTest, EnvoyRoutesExactlyAsTheTestedHaproxyConfig) {
  std::string envoy = WithoutComments(ReadDeployFile("envoy/kube-api-proxy.yaml"));
  EXPECT_THAT(envoy, HasSubstr("name: envoy.filters.listener.tls_inspector"));
  EXPECT_EQ(All(envoy, R"(application_protocols:\s*(\[[^\]]*\]))"),
            std::vector<std::string>{R"(["aks-live-patching"])"});
  // No chain may match on SNI: routing is ALPN only, as in HAProxy.
  EXPECT_THAT(All(envoy, R"((server_names))"), ::testing::IsEmpty());
  // The ALPN chain goes to live_patching, the default chain to the apiserver.
  EXPECT_EQ(All(envoy, R"(\n\s+cluster: (\S+))"),
            (std::vector<std::string>{"live_patching", "apiserver"}));
  EXPECT_THAT(envoy, HasSubstr("default_filter_chain:"));
  // HAProxy sends a client that never finishes its ClientHello to the apiserver.
  EXPECT_EQ(One(envoy, R"(continue_on_listener_filters_timeout: (\S+))"), "true");
}

TEST(DeployConfigTest, TheThreeProxiesAgreeOnTimeouts) {
  ProxyTimeouts haproxy = Haproxy();
  ASSERT_GT(haproxy.client_hello_ms, 0);

  std::string envoy = WithoutComments(ReadDeployFile("envoy/kube-api-proxy.yaml"));
  EXPECT_EQ(DurationMs(One(envoy, R"(\n\s+listener_filters_timeout: (\S+))")),
            haproxy.client_hello_ms);
  for (const std::string& t : All(envoy, R"(connect_timeout: (\S+))")) {
    EXPECT_EQ(DurationMs(t), haproxy.connect_ms) << "envoy connect_timeout " << t;
  }
  std::vector<std::string> idle = All(envoy, R"(idle_timeout: (\S+))");
  EXPECT_EQ(idle.size(), 2u);
  for (const std::string& t : idle) EXPECT_EQ(DurationMs(t), haproxy.idle_ms) << t;

  std::string nginx = WithoutComments(ReadDeployFile("nginx/nginx.conf"));
  EXPECT_EQ(DurationMs(One(nginx, R"(preread_timeout (\S+);)")), haproxy.client_hello_ms);
  EXPECT_EQ(DurationMs(One(nginx, R"(proxy_connect_timeout (\S+);)")), haproxy.connect_ms);
  EXPECT_EQ(DurationMs(One(nginx, R"(proxy_timeout (\S+);)")), haproxy.idle_ms);
}

std::set<std::string> FlagsInHelp() {
  SpawnOptions spawn;
  spawn.argv = {BinDir() + "/live-patching-service", "--help"};
  RunResult r = RunProcess(std::move(spawn), std::chrono::seconds(10));
  EXPECT_TRUE(r.status.success());
  std::vector<std::string> flags = All(r.stdout_text, R"((--[a-z][a-z-]+))");
  return {flags.begin(), flags.end()};
}

TEST(DeployConfigTest, TheSystemdUnitPassesOnlyFlagsTheBinaryHas) {
  std::string unit = WithoutComments(ReadDeployFile("systemd/live-patching-service.service"));
  std::set<std::string> known = FlagsInHelp();
  std::vector<std::string> used = All(unit, R"((--[a-z][a-z-]+) )");
  EXPECT_GE(used.size(), 5u);
  for (const std::string& flag : used) EXPECT_TRUE(known.count(flag)) << flag;
  for (const char* needed :
       {"--listen", "--tls-cert", "--tls-key", "--components-dir", "--attestation-roots"}) {
    EXPECT_THAT(unit, HasSubstr(needed));
  }
  for (const char* hardening :
       {"DynamicUser=yes", "ProtectSystem=strict", "ReadOnlyPaths=", "NoNewPrivileges=yes",
        "CapabilityBoundingSet=", "ExecReload=/bin/kill -HUP $MAINPID"}) {
    EXPECT_THAT(unit, HasSubstr(hardening));
  }
}

TEST(DeployConfigTest, TheDeploymentRunsTwoReplicasWithGrpcProbesOnTheHealthPort) {
  std::string deployment = WithoutComments(ReadDeployFile("kubernetes/deployment.yaml"));
  std::set<std::string> known = FlagsInHelp();
  std::vector<std::string> used = All(deployment, R"(- (--[a-z][a-z-]+)=)");
  EXPECT_GE(used.size(), 5u);
  for (const std::string& flag : used) EXPECT_TRUE(known.count(flag)) << flag;

  EXPECT_EQ(One(deployment, R"(replicas: (\d+))"), "2");
  std::string health_port = One(deployment, R"(--health-listen=[0-9.]+:(\d+))");
  EXPECT_EQ(All(deployment, R"(grpc:\s+port: (\d+))"),
            (std::vector<std::string>{health_port, health_port}));
  // The store is the ConfigMap, mounted where --components-dir points.
  std::string components = One(deployment, R"(--components-dir=(\S+))");
  EXPECT_THAT(deployment, HasSubstr("mountPath: " + components));
  EXPECT_THAT(deployment, HasSubstr("name: live-patching-components"));
  EXPECT_THAT(deployment, HasSubstr("secretName: live-patching-tls"));

  std::string configmap = WithoutComments(ReadDeployFile("kubernetes/configmap.yaml"));
  EXPECT_THAT(configmap, HasSubstr("name: live-patching-components"));
  EXPECT_THAT(configmap, HasSubstr("aksNodeController.json:"));
  std::string service = WithoutComments(ReadDeployFile("kubernetes/service.yaml"));
  EXPECT_EQ(One(service, R"(targetPort: (\S+))"), "grpc-tls");
  EXPECT_THAT(deployment, HasSubstr("name: grpc-tls"));
  // The Envoy cluster points at this Service and port.
  std::string envoy = ReadDeployFile("envoy/kube-api-proxy.yaml");
  EXPECT_THAT(envoy, HasSubstr("live-patching-service.kube-system.svc.cluster.local"));
  EXPECT_EQ(One(service, R"(\n\s+port: (\d+))"), "8443");
}

}  // namespace
}  // namespace hotfix::testsupport
