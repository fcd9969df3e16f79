// Drift guards for the deployment files no test can run here. Envoy is not installable on
// the build machine and there is no cluster, so these read the files and hold them to what is
// tested: the Envoy listener to the HAProxy and nginx configs the routing tests run, every
// flag the systemd unit and the Kubernetes Deployment pass to the binary, and the kustomize
// base in deploy/kubernetes, as rendered by Debian's kubectl, to itself (selectors, ports,
// the NetworkPolicy), to the alerts and to the dashboard.
#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "service/transport/h2_session.h"
#include "service/transport/memory_budget.h"
#include "service_fixture.h"
#include "temp_dir.h"
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
  // The node's address goes to the service, and only to it, as a PROXY v2 header (HAProxy:
  // send-proxy-v2 on the one server of backend live_patching): the cluster after the
  // service's endpoint carries the transport socket, the apiserver's does not.
  const size_t service = envoy.find("- name: live_patching");
  const size_t apiserver = envoy.find("- name: apiserver");
  const std::string name = "envoy.transport_sockets.upstream_proxy_protocol";
  const size_t socket = envoy.find(name);
  ASSERT_NE(socket, std::string::npos);
  EXPECT_LT(service, socket);
  EXPECT_LT(socket, apiserver);
  EXPECT_EQ(envoy.find(name, socket + name.size()), std::string::npos);
  EXPECT_EQ(One(envoy, R"(version: (\S+))"), "V2");
  // Both clusters raise Envoy's default circuit breaker (1,024 connections): the service's
  // route to two full replicas (about 10,200 connections each at 512Mi), the apiserver's more.
  const std::vector<std::string> breakers = All(envoy, R"(max_connections: (\d+))");
  ASSERT_EQ(breakers.size(), 2u);
  EXPECT_GE(std::stoul(breakers[0]), 20000u) << "live_patching";
  EXPECT_GE(std::stoul(breakers[1]), std::stoul(breakers[0])) << "apiserver";
  EXPECT_LT(envoy.find("max_connections"), apiserver);
  EXPECT_GT(envoy.rfind("max_connections"), apiserver);
  std::string haproxy = WithoutComments(ReadDeployFile("haproxy/haproxy.cfg"));
  EXPECT_EQ(All(haproxy, R"(server lps "\$\{LP_SERVICE_ADDR\}" (send-proxy-v2))"),
            std::vector<std::string>{"send-proxy-v2"});
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

// The Kubernetes manifests, as a cluster would get them: deploy/kubernetes is a kustomize base,
// rendered here with Debian 12's kubectl 1.20 (kustomize v2.0.3, the oldest the base must
// render with). Debian's package cannot be installed where Google's `kubectl` package owns
// /usr/bin/kubectl (dpkg refuses to overwrite it), so scripts/install-deps.sh unpacks it into a
// folder of its own, and this test runs that binary, never whatever `kubectl` is on PATH.
constexpr char kDebianKubectl[] = "/opt/debian-kubernetes-client/usr/bin/kubectl";
constexpr char kImage[] = "mcr.microsoft.com/aks/live-patching-service";
constexpr char kNamespace[] = "kube-system";
constexpr char kJob[] = "live-patching-service";  // what the alerts and the dashboard select

using nlohmann::json;

// YAML as JSON, every scalar a string (kustomize re-emits YAML, so types of plain scalars
// are compared by their text).
json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.Scalar()] = ToJson(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) out.push_back(ToJson(item));
      return out;
    }
    case YAML::NodeType::Scalar:
      return node.Scalar();
    default:
      return nullptr;
  }
}

// A copy of j at a path of keys (a copy: callers pass temporaries); null when any is missing.
json At(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return json();
    at = &(*at)[key];
  }
  return *at;
}

// Every label of `labels` is in `of` with the same value (and there is at least one).
bool Subset(const json& labels, const json& of) {
  if (!labels.is_object() || labels.empty() || !of.is_object()) return false;
  for (const auto& [key, value] : labels.items()) {
    if (!of.contains(key) || of[key] != value) return false;
  }
  return true;
}

struct Rendered {
  std::vector<json> objects;

  std::vector<json> OfKind(const std::string& kind) const {
    std::vector<json> out;
    for (const json& o : objects) {
      if (At(o, {"kind"}) == kind) out.push_back(o);
    }
    return out;
  }
  // The one object of this kind; null (and a failure) unless there is exactly one.
  json One(const std::string& kind) const {
    std::vector<json> all = OfKind(kind);
    EXPECT_EQ(all.size(), 1u) << kind;
    return all.size() == 1 ? all[0] : json();
  }
  json Deployment() const { return One("Deployment"); }
  json Container() const {
    const json& containers = At(Deployment(), {"spec", "template", "spec", "containers"});
    EXPECT_EQ(containers.size(), 1u);
    return containers.size() == 1 ? containers[0] : json();
  }
  // --flag=VALUE of the container's args; "" (and a failure) unless exactly once.
  std::string Flag(const std::string& flag) const {
    std::vector<std::string> values;
    for (const json& arg : At(Container(), {"args"})) {
      std::string a = arg.get<std::string>();
      if (a.rfind(flag + "=", 0) == 0) values.push_back(a.substr(flag.size() + 1));
    }
    EXPECT_EQ(values.size(), 1u) << flag;
    return values.size() == 1 ? values[0] : "";
  }
  // The container port of this name ("" if none).
  std::string ContainerPort(const std::string& name) const {
    for (const json& p : At(Container(), {"ports"})) {
      if (At(p, {"name"}) == name) return At(p, {"containerPort"}).get<std::string>();
    }
    return "";
  }
};

// The newest kubectl this machine has beside Debian's (machines of this kind carry Google's
// kubectl 1.27 to 1.33, as kubectl.1.NN under the Cloud SDK): the overlay operators copy uses
// kustomize v4+ (configMapGenerator with behavior: replace, labels, replacements), which
// Debian's v2.0.3 predates. "" (and a failure) when there is none.
std::string ModernKubectl() {
  const std::filesystem::path sdk = "/usr/lib/google-cloud-sdk/bin";
  std::string best;
  int best_minor = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sdk, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, std::regex(R"(kubectl\.1\.(\d+))")) &&
        std::stoi(m[1]) > best_minor) {
      best_minor = std::stoi(m[1]);
      best = entry.path().string();
    }
  }
  if (best.empty()) {
    ADD_FAILURE() << "no kubectl 1.21 or later under " << sdk
                  << ": the example overlay needs kustomize v4 or later to render";
  }
  return best;
}

// `kubectl kustomize DIR` by Debian's kubectl (or the one given), parsed.
Rendered Render(const std::filesystem::path& dir, const std::string& kubectl = kDebianKubectl) {
  Rendered out;
  if (!std::filesystem::is_regular_file(kubectl)) {
    ADD_FAILURE() << kubectl << " is missing: scripts/install-deps.sh unpacks Debian's "
                  << "kubernetes-client there";
    return out;
  }
  SpawnOptions spawn;
  spawn.argv = {kubectl, "kustomize", dir.string()};
  RunResult r = RunProcess(std::move(spawn), std::chrono::seconds(30));
  EXPECT_TRUE(r.status.success()) << r.status.ToString() << ": " << r.stderr_text;
  try {
    for (const YAML::Node& doc : YAML::LoadAll(r.stdout_text)) {
      if (doc.IsMap()) out.objects.push_back(ToJson(doc));
    }
  } catch (const YAML::Exception& e) {
    ADD_FAILURE() << "kubectl kustomize printed what yaml-cpp cannot read: " << e.what();
  }
  return out;
}

Rendered RenderBase() { return Render(std::filesystem::path(SourceDir()) / "deploy/kubernetes"); }

json ReadYaml(const std::string& relative) {
  try {
    return ToJson(YAML::LoadFile((std::filesystem::path(SourceDir()) / relative).string()));
  } catch (const YAML::Exception& e) {
    ADD_FAILURE() << relative << ": " << e.what();
    return json();
  }
}

// "0.0.0.0:8443" -> "8443".
std::string PortOf(const std::string& address) {
  size_t colon = address.rfind(':');
  return colon == std::string::npos ? "" : address.substr(colon + 1);
}

TEST(DeployConfigTest, TheKustomizeBaseRendersEveryObjectOnceInKubeSystem) {
  std::string version;
  {
    SpawnOptions spawn;
    spawn.argv = {kDebianKubectl, "version", "--client"};
    version = RunProcess(std::move(spawn), std::chrono::seconds(30)).stdout_text;
  }
  // Debian 12's kubectl, whose kustomize is v2.0.3: what renders there renders anywhere.
  EXPECT_THAT(version, HasSubstr(R"(GitVersion:"v1.20.)"));

  Rendered base = RenderBase();
  std::multiset<std::string> kinds;
  for (const json& o : base.objects) {
    kinds.insert(At(o, {"kind"}).get<std::string>());
    EXPECT_EQ(At(o, {"metadata", "namespace"}), kNamespace) << o.dump();
    EXPECT_EQ(At(o, {"metadata", "labels", "app.kubernetes.io/name"}), "live-patching-service")
        << At(o, {"metadata", "name"});
  }
  EXPECT_EQ(kinds,
            (std::multiset<std::string>{"ConfigMap", "ConfigMap", "ConfigMap", "Deployment",
                                        "NetworkPolicy", "PodDisruptionBudget", "PrometheusRule",
                                        "Service", "ServiceAccount", "ServiceMonitor"}));
  EXPECT_EQ(At(base.One("ServiceMonitor"), {"apiVersion"}), "monitoring.coreos.com/v1");
  EXPECT_EQ(At(base.One("PrometheusRule"), {"apiVersion"}), "monitoring.coreos.com/v1");
  EXPECT_EQ(At(base.One("PodDisruptionBudget"), {"apiVersion"}), "policy/v1");
  EXPECT_EQ(At(base.One("NetworkPolicy"), {"apiVersion"}), "networking.k8s.io/v1");
}

// One service for many clusters (docs/OPERATIONS.md, "Many clusters, one service"): the
// example overlay renders on the base, passes --tls-cert-dir instead of the one pair, and
// mounts each cluster's TLS Secret at <dir>/<name>/tls.crt and tls.key, the layout the
// service reads (service/transport/certificate_folder.h).
TEST(DeployConfigTest, TheManyClustersOverlayMountsOneSecretPerClusterAsAFolderOfPairs) {
  Rendered overlay = Render(std::filesystem::path(SourceDir()) / "deploy/overlays/many-clusters");
  json container = overlay.Container();
  std::set<std::string> known = FlagsInHelp();
  for (const json& arg : At(container, {"args"})) {
    std::smatch m;
    std::string a = arg.get<std::string>();
    if (!std::regex_match(a, m, std::regex(R"((--[a-z][a-z-]+)(=.*)?)"))) continue;
    EXPECT_TRUE(known.count(m[1])) << a;
    EXPECT_NE(m[1], "--tls-cert") << "the folder replaces the pair";
    EXPECT_NE(m[1], "--tls-key");
  }
  const std::string dir = overlay.Flag("--tls-cert-dir");
  EXPECT_EQ(dir, "/etc/live-patching/tls");
  std::string mounted;
  for (const json& m : At(container, {"volumeMounts"})) {
    if (At(m, {"name"}) == "tls") mounted = At(m, {"mountPath"}).get<std::string>();
  }
  EXPECT_EQ(mounted, dir);
  json projected;
  for (const json& v : At(overlay.Deployment(), {"spec", "template", "spec", "volumes"})) {
    if (At(v, {"name"}) == "tls") projected = At(v, {"projected"});
  }
  ASSERT_TRUE(projected.is_object()) << "the tls volume is a projected volume";
  const json& sources = At(projected, {"sources"});
  ASSERT_GE(sources.size(), 2u);
  for (const json& source : sources) {
    const json& items = At(source, {"secret", "items"});
    ASSERT_EQ(items.size(), 2u) << source.dump();
    std::map<std::string, std::string> paths;  // key -> path
    for (const json& item : items) {
      paths[At(item, {"key"}).get<std::string>()] = At(item, {"path"}).get<std::string>();
    }
    const std::string name = paths["tls.crt"].substr(0, paths["tls.crt"].find('/'));
    EXPECT_FALSE(name.empty());
    EXPECT_EQ(paths["tls.crt"], name + "/tls.crt");
    EXPECT_EQ(paths["tls.key"], name + "/tls.key");
  }
}

// The overlay docs/OPERATIONS.md shows, rendered: the components folder is the ConfigMap's
// only copy (every file, byte for byte, and nothing else), under the base's name so the pods
// keep reading it without a restart; the settings, the roots, the digest, the Prometheus label
// and the NetworkPolicy's selectors come from the overlay; every runbook_url is absolute.
TEST(DeployConfigTest, TheExampleOverlayGeneratesTheComponentsConfigMapFromItsFolder) {
  const std::filesystem::path dir = std::filesystem::path(SourceDir()) / "deploy/overlays/example";
  const std::string kubectl = ModernKubectl();
  if (kubectl.empty()) return;
  Rendered overlay = Render(dir, kubectl);
  std::map<std::string, json> config_maps;
  json dashboard;
  for (const json& o : overlay.objects) {
    if (At(o, {"metadata", "name"}) == "live-patching-service-dashboard") {
      dashboard = o;
      continue;
    }
    EXPECT_EQ(At(o, {"metadata", "namespace"}), kNamespace) << o.dump();
    if (At(o, {"kind"}) == "ConfigMap") {
      EXPECT_TRUE(config_maps.emplace(At(o, {"metadata", "name"}).get<std::string>(), o).second);
    }
  }
  ASSERT_EQ(config_maps.size(), 3u);
  // The dashboard, as Grafana's sidecar loads it: labelled, in its namespace, the file as is.
  ASSERT_TRUE(dashboard.is_object()) << "no dashboard ConfigMap";
  EXPECT_EQ(At(dashboard, {"metadata", "namespace"}), "monitoring");
  EXPECT_EQ(At(dashboard, {"metadata", "labels", "grafana_dashboard"}), "1");
  EXPECT_EQ(
      At(dashboard, {"data", "live-patching-service.json"}),
      ReadFile(std::filesystem::path(SourceDir()) / "deploy/grafana/live-patching-service.json"));
  // Components: exactly the folder.
  std::map<std::string, std::string> folder;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "components")) {
    folder[entry.path().filename().string()] = ReadFile(entry.path());
  }
  ASSERT_FALSE(folder.empty());
  std::map<std::string, std::string> generated;
  const json components = At(config_maps["live-patching-components"], {"data"});
  for (const auto& [key, value] : components.items()) {
    generated[key] = value.get<std::string>();
  }
  EXPECT_EQ(generated, folder);
  EXPECT_EQ(At(config_maps["live-patching-attestation-roots"], {"data", "roots.pem"}),
            ReadFile(dir / "attestation-roots.pem"));
  // The names the Deployment mounts and reads are the generated ones (no hash suffix).
  std::set<std::string> referenced;
  for (const json& v : At(overlay.Deployment(), {"spec", "template", "spec", "volumes"})) {
    if (v.contains("configMap")) referenced.insert(At(v, {"configMap", "name"}).get<std::string>());
  }
  for (const json& e : At(overlay.Container(), {"env"})) {
    if (e.contains("valueFrom")) {
      referenced.insert(At(e, {"valueFrom", "configMapKeyRef", "name"}).get<std::string>());
    }
  }
  for (const std::string& name : referenced) EXPECT_EQ(config_maps.count(name), 1u) << name;
  EXPECT_EQ(referenced.size(), 3u);
  // Settings from settings.env.
  const json settings = At(config_maps["live-patching-settings"], {"data"});
  const std::string env = ReadFile(dir / "settings.env");
  for (const char* key : {"allowed-subscriptions", "proxy-networks", "runbook-base"}) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(env, m, std::regex(std::string("\n") + key + "=(\\S+)"))) << key;
    EXPECT_EQ(At(settings, {key}), m[1].str()) << key;
  }
  EXPECT_EQ(At(settings, {"allowed-subscriptions"}), "8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8");
  // Every alert's runbook is runbook-base#<its section>.
  const std::string base = At(settings, {"runbook-base"}).get<std::string>();
  EXPECT_EQ(base.rfind("https://", 0), 0u) << base;
  size_t alerts = 0;
  for (const json& group : At(overlay.One("PrometheusRule"), {"spec", "groups"})) {
    for (const json& rule : At(group, {"rules"})) {
      std::string section = At(rule, {"alert"}).get<std::string>();
      std::transform(section.begin(), section.end(), section.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      EXPECT_EQ(At(rule, {"annotations", "runbook_url"}), base + "#" + section);
      ++alerts;
    }
  }
  EXPECT_GE(alerts, 17u);
  // The digest, the Prometheus label (not on selectors or the pod template), the proxy's label.
  EXPECT_THAT(At(overlay.Container(), {"image"}).get<std::string>(),
              ::testing::EndsWith("@sha256:" + std::string(64, '1')));
  for (const char* kind : {"ServiceMonitor", "PrometheusRule"}) {
    EXPECT_EQ(At(overlay.One(kind), {"metadata", "labels", "release"}), "kube-prometheus-stack");
  }
  EXPECT_FALSE(At(overlay.Deployment(), {"spec", "selector", "matchLabels"}).contains("release"));
  EXPECT_FALSE(
      At(overlay.Deployment(), {"spec", "template", "metadata", "labels"}).contains("release"));
  const json& ingress = At(overlay.One("NetworkPolicy"), {"spec", "ingress"});
  EXPECT_EQ(At(ingress[0], {"from"})[0]["podSelector"]["matchLabels"],
            json({{"app", "kube-api-proxy"}}));
  EXPECT_EQ(At(ingress[2], {"from"})[0]["ipBlock"]["cidr"], "10.224.0.0/16");
}

// docs/OPERATIONS.md shows every file of the example overlay, each as it is: a fenced block
// after the line "File `deploy/overlays/example/PATH`:".
TEST(DeployConfigTest, OperationsShowsEveryFileOfTheExampleOverlayAsItIs) {
  const std::filesystem::path root = SourceDir();
  const std::string doc = ReadFile(root / "docs/OPERATIONS.md");
  const std::filesystem::path dir = root / "deploy/overlays/example";
  size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    ++files;
    const std::string relative = std::filesystem::relative(entry.path(), root).string();
    const std::string marker = "File `" + relative + "`:\n\n```";
    const size_t at = doc.find(marker);
    ASSERT_NE(at, std::string::npos) << "docs/OPERATIONS.md does not show " << relative;
    const size_t begin = doc.find('\n', at + marker.size()) + 1;
    const size_t end = doc.find("\n```\n", begin);
    ASSERT_NE(end, std::string::npos);
    EXPECT_EQ(doc.substr(begin, end + 1 - begin), ReadFile(entry.path())) << relative;
  }
  EXPECT_GE(files, 4u);
}

// The ```sh block after "Walkthrough commands (N):" in docs/OPERATIONS.md, one command a line.
std::vector<std::string> WalkthroughLines(const std::string& doc, int n) {
  const std::string marker = "Walkthrough commands (" + std::to_string(n) + "):\n\n```sh\n";
  const size_t at = doc.find(marker);
  EXPECT_NE(at, std::string::npos) << marker;
  if (at == std::string::npos) return {};
  const size_t begin = at + marker.size();
  std::vector<std::string> lines;
  std::istringstream in(doc.substr(begin, doc.find("\n```\n", begin) - begin));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// A command line as a shell would split it: words, and "double-quoted" words kept whole. The
// walkthrough uses nothing more (no pipes, globs or variables): the test runs no shell.
std::vector<std::string> SplitCommand(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool quoted = false, any = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (c == ' ' && !quoted) {
      if (any) words.push_back(word);
      word.clear();
      any = false;
    } else {
      word.push_back(c);
      any = true;
    }
  }
  if (any) words.push_back(word);
  EXPECT_FALSE(quoted) << line;
  return words;
}

TEST(DeployConfigTest, OperationsWalksFromAnEmptyFolderToAHaltedCanary) {
  const std::string kubectl = ModernKubectl();
  if (kubectl.empty()) return;
  const std::filesystem::path root = SourceDir();
  const std::string doc = ReadFile(root / "docs/OPERATIONS.md");
  TempDir work("walkthrough");
  std::filesystem::create_directory_symlink(root / "deploy", work.path() / "deploy");
  std::vector<RunResult> renders;
  auto run = [&](const std::string& line) {
    std::vector<std::string> argv = SplitCommand(line);
    ASSERT_FALSE(argv.empty());
    if (argv[0] == "live-patching-service") argv[0] = BinDir() + "/live-patching-service";
    if (argv[0] == "kubectl") argv[0] = kubectl;
    SpawnOptions spawn;
    spawn.argv = argv;
    spawn.working_dir = work.path();
    RunResult r = RunProcess(std::move(spawn), std::chrono::seconds(60));
    ASSERT_TRUE(r.status.success()) << line << "\n" << r.stderr_text << r.stdout_text;
    if (argv[0] == kubectl) renders.push_back(r);
  };
  for (const std::string& line : WalkthroughLines(doc, 1)) run(line);
  const std::string canary_marker =
      "Canary `fleet-config/deploy/overlays/prod/components/aksNodeController.json`:\n\n```json\n";
  const size_t at = doc.find(canary_marker);
  ASSERT_NE(at, std::string::npos);
  const size_t begin = at + canary_marker.size();
  const std::string canary = doc.substr(begin, doc.find("\n```\n", begin) + 1 - begin);
  work.Write("fleet-config/deploy/overlays/prod/components/aksNodeController.json", canary);
  const std::vector<std::string> lines = WalkthroughLines(doc, 2);
  ASSERT_EQ(lines.size(), 5u);
  for (const std::string& line : lines) run(line);

  ASSERT_EQ(renders.size(), 2u);
  auto served_file = [](const RunResult& render) {
    for (const YAML::Node& object : YAML::LoadAll(render.stdout_text)) {
      if (object["kind"].as<std::string>() == "ConfigMap" &&
          object["metadata"]["name"].as<std::string>() == "live-patching-components") {
        return json::parse(object["data"]["aksNodeController.json"].as<std::string>());
      }
    }
    return json();
  };
  const json before = served_file(renders[0]);
  const json after = served_file(renders[1]);
  EXPECT_EQ(before, json::parse(canary)) << "the first render ships the folder as written";
  ASSERT_TRUE(after.is_object());
  const json& rollout = after["rollouts"][0];
  EXPECT_EQ(rollout["halted"], true);
  EXPECT_EQ(rollout["halt_note"]["reason"], "INC-1234: nodes fail to join");
  EXPECT_EQ(rollout["halt_note"]["at"], "2026-12-05T09:00:00Z");
}

TEST(DeployConfigTest, TheDeploymentRunsTwoReplicasWithGrpcProbesOnTheHealthPort) {
  Rendered base = RenderBase();
  json deployment = base.Deployment();
  json container = base.Container();
  std::set<std::string> known = FlagsInHelp();
  std::vector<std::string> used;
  for (const json& arg : At(container, {"args"})) {
    std::smatch m;
    std::string a = arg.get<std::string>();
    if (std::regex_match(a, m, std::regex(R"((--[a-z][a-z-]+)(=.*)?)"))) used.push_back(m[1]);
  }
  EXPECT_GE(used.size(), 5u);
  for (const std::string& flag : used) EXPECT_TRUE(known.count(flag)) << flag;

  EXPECT_EQ(At(deployment, {"spec", "replicas"}), "2");
  std::string health_port = PortOf(base.Flag("--health-listen"));
  EXPECT_EQ(base.ContainerPort("health"), health_port);
  EXPECT_EQ(At(container, {"readinessProbe", "grpc", "port"}), health_port);
  EXPECT_EQ(At(container, {"livenessProbe", "grpc", "port"}), health_port);
  EXPECT_EQ(base.ContainerPort("grpc-tls"), PortOf(base.Flag("--listen")));
  EXPECT_EQ(base.ContainerPort("metrics"), PortOf(base.Flag("--metrics-listen")));
  EXPECT_TRUE(At(container, {"resources", "limits", "memory"}).is_string());

  // The store is the components ConfigMap, mounted where --components-dir points; every
  // volume is an object the base renders, or the TLS Secret the operator creates.
  std::map<std::string, std::string> mounts;  // volume -> mountPath
  for (const json& m : At(container, {"volumeMounts"})) {
    mounts[At(m, {"name"}).get<std::string>()] = At(m, {"mountPath"}).get<std::string>();
  }
  std::set<std::string> configmaps;
  for (const json& cm : base.OfKind("ConfigMap")) {
    configmaps.insert(At(cm, {"metadata", "name"}).get<std::string>());
  }
  EXPECT_EQ(configmaps,
            (std::set<std::string>{"live-patching-components", "live-patching-attestation-roots",
                                   "live-patching-settings"}));
  std::set<std::string> mounted_configmaps;
  for (const json& v : At(deployment, {"spec", "template", "spec", "volumes"})) {
    std::string name = At(v, {"name"}).get<std::string>();
    EXPECT_TRUE(mounts.count(name)) << name;
    if (At(v, {"configMap"}).is_object()) {
      mounted_configmaps.insert(At(v, {"configMap", "name"}).get<std::string>());
      if (At(v, {"configMap", "name"}) == "live-patching-components") {
        EXPECT_EQ(mounts[name], base.Flag("--components-dir"));
      }
      if (At(v, {"configMap", "name"}) == "live-patching-attestation-roots") {
        EXPECT_EQ(mounts[name] + "/roots.pem", base.Flag("--attestation-roots"));
      }
    } else {
      EXPECT_EQ(At(v, {"secret", "secretName"}), "live-patching-tls") << v.dump();
      EXPECT_EQ(mounts[name] + "/tls.crt", base.Flag("--tls-cert"));
    }
  }
  // Settings: the allow-list mounted as a file, proxy-networks through the environment.
  EXPECT_EQ(mounted_configmaps, configmaps);
  for (const json& cm : base.OfKind("ConfigMap")) {
    if (At(cm, {"metadata", "name"}) == "live-patching-components") {
      EXPECT_TRUE(At(cm, {"data", "aksNodeController.json"}).is_string());
    }
  }

  // The Envoy cluster points at this Service and port.
  json service = base.One("Service");
  std::string envoy = ReadDeployFile("envoy/kube-api-proxy.yaml");
  EXPECT_THAT(envoy, HasSubstr(At(service, {"metadata", "name"}).get<std::string>() + "." +
                               kNamespace + ".svc.cluster.local"));
  bool grpc_port = false;
  for (const json& p : At(service, {"spec", "ports"})) {
    if (At(p, {"name"}) == "grpc-tls") grpc_port = At(p, {"port"}) == "8443";
  }
  EXPECT_TRUE(grpc_port);
  EXPECT_THAT(All(envoy, R"(port_value: (\d+))"), ::testing::Contains("8443"));
}

// The shipped base lets in only the subscriptions its settings ConfigMap names (a placeholder
// that matches none until an overlay sets the fleet's) and only AKS apiserver names.
TEST(DeployConfigTest, TheDeploymentAllowsOnlyTheSettingsSubscriptionsAndAksAuthorities) {
  Rendered base = RenderBase();
  json container = base.Container();
  // The subscriptions from the settings ConfigMap's key, as a file read again when it changes.
  const std::string file = base.Flag("--allowed-subscriptions-file");
  const std::filesystem::path path(file);
  std::string mounted_volume;
  for (const json& m : At(container, {"volumeMounts"})) {
    if (At(m, {"mountPath"}) == path.parent_path().string()) {
      mounted_volume = At(m, {"name"}).get<std::string>();
    }
  }
  json volume;
  for (const json& v : At(base.Deployment(), {"spec", "template", "spec", "volumes"})) {
    if (At(v, {"name"}) == mounted_volume) volume = v;
  }
  ASSERT_TRUE(volume.is_object()) << file << " is on no volume";
  EXPECT_EQ(At(volume, {"configMap", "name"}), "live-patching-settings");
  EXPECT_EQ(At(volume, {"configMap", "items"}),
            json::parse(R"([{"key":"allowed-subscriptions","path":")" + path.filename().string() +
                        R"("}])"));
  EXPECT_EQ(base.Flag("--allowed-authorities"), "*.azmk8s.io");
  bool proxy_protocol = false;  // a flag without a value: Flag() reads NAME=VALUE only
  for (const json& arg : At(container, {"args"})) proxy_protocol |= arg == "--proxy-protocol";
  EXPECT_TRUE(proxy_protocol) << "the Deployment reads the PROXY header Envoy's config sends";
  // Believed only from the proxies' networks, from the same settings.
  EXPECT_EQ(base.Flag("--proxy-protocol-from"), "$(LP_PROXY_NETWORKS)");
  std::map<std::string, std::string> from_settings;  // env var -> the settings key
  for (const json& env : At(container, {"env"})) {
    if (!env.contains("valueFrom") || !env["valueFrom"].contains("configMapKeyRef")) continue;
    if (At(env, {"valueFrom", "configMapKeyRef", "name"}) != "live-patching-settings") continue;
    from_settings[At(env, {"name"})] = At(env, {"valueFrom", "configMapKeyRef", "key"});
  }
  EXPECT_EQ(from_settings["LP_PROXY_NETWORKS"], "proxy-networks");
  json settings;
  for (const json& cm : base.OfKind("ConfigMap")) {
    if (At(cm, {"metadata", "name"}) == "live-patching-settings") settings = At(cm, {"data"});
  }
  EXPECT_EQ(settings.value("allowed-subscriptions", ""), "00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(settings.value("proxy-networks", ""), "10.244.0.0/16");
}

// The pod's memory limit is what the service budgets its connections by (no --memory-limit:
// the cgroup's is the default), so the flags that bound connections must fit inside it, and the
// limit must leave the process its reserve: the service would refuse to start otherwise.
TEST(DeployConfigTest, TheDeploymentsConnectionFlagsFitItsMemoryLimit) {
  Rendered base = RenderBase();
  json container = base.Container();
  auto limit =
      service::ParseByteSize(At(container, {"resources", "limits", "memory"}).get<std::string>());
  auto request =
      service::ParseByteSize(At(container, {"resources", "requests", "memory"}).get<std::string>());
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  EXPECT_LE(*request, *limit);
  for (const json& arg : At(container, {"args"})) {
    EXPECT_NE(arg.get<std::string>().rfind("--memory-limit=", 0), 0u)
        << "the Deployment passes --memory-limit: the cgroup's limit is the one to follow";
  }
  // As a Release build budgets it at start: it holds about 16 MiB then (bench/density.sh).
  auto budget = service::BudgetConnections(*limit, 20ull << 20, service::SizeTables(*limit));
  ASSERT_TRUE(budget.ok()) << budget.status().ToString();
  std::cout << "[deploy] " << service::FormatByteSize(*limit) << " admits "
            << budget->max_connections << " connections" << std::endl;
  const size_t per_peer = std::stoul(base.Flag("--max-connections-per-peer"));
  EXPECT_LE(per_peer, budget->max_connections)
      << "--max-connections-per-peer above the cap the memory limit gives";
  EXPECT_GE(budget->max_connections, 256u) << "a boot wave needs a few hundred at once";
}

TEST(DeployConfigTest, EverySelectorSelectsTheDeploymentsPods) {
  Rendered base = RenderBase();
  json deployment = base.Deployment();
  const json& selector = At(deployment, {"spec", "selector", "matchLabels"});
  ASSERT_TRUE(selector.is_object() && !selector.empty()) << deployment.dump();
  const json& pod_labels = At(deployment, {"spec", "template", "metadata", "labels"});
  EXPECT_TRUE(Subset(selector, pod_labels));

  json service = base.One("Service");
  EXPECT_EQ(At(service, {"spec", "selector"}), selector);
  json pdb = base.One("PodDisruptionBudget");
  EXPECT_EQ(At(pdb, {"spec", "selector", "matchLabels"}), selector);
  // Two replicas: one at a time may go.
  EXPECT_TRUE(At(pdb, {"spec", "maxUnavailable"}) == "1" ||
              At(pdb, {"spec", "minAvailable"}) == "1")
      << pdb.dump();
  EXPECT_EQ(At(base.One("NetworkPolicy"), {"spec", "podSelector", "matchLabels"}), selector);

  // Spread over zones, and over nodes.
  const json& pod = At(deployment, {"spec", "template", "spec"});
  const json& spread = At(pod, {"topologySpreadConstraints"});
  ASSERT_EQ(spread.size(), 1u);
  EXPECT_EQ(At(spread[0], {"topologyKey"}), "topology.kubernetes.io/zone");
  EXPECT_EQ(At(spread[0], {"labelSelector", "matchLabels"}), selector);
  const json& anti =
      At(pod, {"affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution"});
  ASSERT_EQ(anti.size(), 1u);
  EXPECT_EQ(At(anti[0], {"podAffinityTerm", "topologyKey"}), "kubernetes.io/hostname");
  EXPECT_EQ(At(anti[0], {"podAffinityTerm", "labelSelector", "matchLabels"}), selector);
}

TEST(DeployConfigTest, TheServicesNamedPortsAreTheContainersPorts) {
  Rendered base = RenderBase();
  std::map<std::string, std::string> ports;  // name -> port
  for (const json& p : At(base.One("Service"), {"spec", "ports"})) {
    std::string name = At(p, {"name"}).get<std::string>();
    ports[name] = At(p, {"port"}).get<std::string>();
    EXPECT_EQ(At(p, {"targetPort"}), name) << "target the container's port by its name";
    EXPECT_EQ(base.ContainerPort(name), ports[name]) << name;
    EXPECT_EQ(At(p, {"protocol"}), "TCP");
  }
  EXPECT_EQ(ports, (std::map<std::string, std::string>{{"grpc-tls", "8443"}, {"metrics", "9090"}}));
}

// A rule's ports as "TCP/8443".
std::set<std::string> RulePorts(const json& rule) {
  std::set<std::string> out;
  for (const json& p : At(rule, {"ports"})) {
    out.insert(At(p, {"protocol"}).get<std::string>() + "/" + At(p, {"port"}).get<std::string>());
  }
  return out;
}

// A peer that selects pods by label in the namespace of this name.
bool PodsInNamespace(const json& peer, const std::string& ns) {
  return At(peer, {"namespaceSelector", "matchLabels", "kubernetes.io/metadata.name"}) == ns &&
         At(peer, {"podSelector", "matchLabels"}).is_object() &&
         !At(peer, {"podSelector", "matchLabels"}).empty();
}

TEST(DeployConfigTest, TheNetworkPolicyAdmitsTheThreePortsAndReachesOnlyPrometheusAndDns) {
  Rendered base = RenderBase();
  json policy = base.One("NetworkPolicy");
  EXPECT_EQ(At(policy, {"spec", "policyTypes"}), (json{"Ingress", "Egress"}));

  std::string grpc = "TCP/" + base.ContainerPort("grpc-tls");
  std::string metrics = "TCP/" + base.ContainerPort("metrics");
  std::string health = "TCP/" + base.ContainerPort("health");
  std::vector<std::string> admitted;
  for (const json& rule : At(policy, {"spec", "ingress"})) {
    std::set<std::string> ports = RulePorts(rule);
    ASSERT_EQ(ports.size(), 1u) << "one port per rule: " << rule.dump();
    admitted.push_back(*ports.begin());
    const json& from = At(rule, {"from"});
    if (*ports.begin() == grpc) {
      // Only the proxy: pods by label (the label an operator patches), never from anywhere.
      ASSERT_EQ(from.size(), 1u) << rule.dump();
      EXPECT_TRUE(At(from[0], {"podSelector", "matchLabels"}).is_object() &&
                  !At(from[0], {"podSelector", "matchLabels"}).empty())
          << rule.dump();
    } else if (*ports.begin() == metrics) {
      ASSERT_EQ(from.size(), 1u) << rule.dump();
      EXPECT_TRUE(PodsInNamespace(from[0], "monitoring")) << rule.dump();
    } else if (*ports.begin() == health) {
      // kubelet, from the node network only: ipBlocks (AKS's default VNet until an overlay
      // sets the cluster's), never from anywhere.
      ASSERT_FALSE(from.empty()) << "the health port admitted from anywhere: " << rule.dump();
      for (const json& peer : from) EXPECT_TRUE(At(peer, {"ipBlock", "cidr"}).is_string()) << peer;
      EXPECT_EQ(At(from[0], {"ipBlock", "cidr"}), "10.224.0.0/12");
    }
  }
  // In this order: docs/OPERATIONS.md's overlay patches the rules by index.
  EXPECT_EQ(admitted, (std::vector<std::string>{grpc, metrics, health}));

  // Out: the Prometheus of --prometheus-url (prometheus-operated.monitoring.svc:9090) and DNS.
  std::smatch url;
  std::string prometheus_url = base.Flag("--prometheus-url");
  ASSERT_TRUE(std::regex_match(prometheus_url, url,
                               std::regex(R"(http://[a-z0-9-]+\.([a-z0-9-]+)\.svc[a-z.]*:(\d+))")))
      << prometheus_url;
  const std::string prometheus_ns = url[1];
  const std::string prometheus_port = url[2];
  EXPECT_EQ(prometheus_ns, "monitoring");
  std::vector<std::set<std::string>> reached;
  for (const json& rule : At(policy, {"spec", "egress"})) {
    std::set<std::string> ports = RulePorts(rule);
    reached.push_back(ports);
    const json& to = At(rule, {"to"});
    ASSERT_EQ(to.size(), 1u) << "never to anywhere: " << rule.dump();
    if (ports.count("TCP/53")) {
      EXPECT_TRUE(PodsInNamespace(to[0], kNamespace)) << rule.dump();
    } else {
      EXPECT_TRUE(PodsInNamespace(to[0], prometheus_ns)) << rule.dump();
    }
  }
  EXPECT_EQ(reached,
            (std::vector<std::set<std::string>>{{"TCP/" + prometheus_port}, {"TCP/53", "UDP/53"}}));
}

TEST(DeployConfigTest, TheServiceMonitorScrapesTheMetricsPortAsTheJobTheAlertsSelect) {
  Rendered base = RenderBase();
  json service = base.One("Service");
  json monitor = base.One("ServiceMonitor");
  EXPECT_TRUE(
      Subset(At(monitor, {"spec", "selector", "matchLabels"}), At(service, {"metadata", "labels"})))
      << monitor.dump();
  // Its own namespace (the Service's), unless it names that one.
  const json& namespaces = At(monitor, {"spec", "namespaceSelector", "matchNames"});
  EXPECT_TRUE(namespaces.is_null() || namespaces == json{kNamespace}) << namespaces;

  const json& endpoints = At(monitor, {"spec", "endpoints"});
  ASSERT_EQ(endpoints.size(), 1u);
  EXPECT_EQ(At(endpoints[0], {"port"}), "metrics");
  EXPECT_THAT(At(endpoints[0], {"interval"}).get<std::string>(), ::testing::AnyOf("15s", "30s"));
  const json& path = At(endpoints[0], {"path"});
  EXPECT_TRUE(path.is_null() || path == "/metrics");

  // The Prometheus operator names the job after the Service's label jobLabel names, or
  // after the Service.
  const json& job_label = At(monitor, {"spec", "jobLabel"});
  json job = job_label.is_string()
                 ? At(service, {"metadata", "labels", job_label.get<std::string>().c_str()})
                 : At(service, {"metadata", "name"});
  EXPECT_EQ(job, kJob);
  // ...the job every alert and every dashboard query selects.
  std::vector<std::string> selected =
      All(ReadDeployFile("prometheus/alerts.yml"), R"re(job="([^"]*)")re");
  std::vector<std::string> in_dashboard =
      All(ReadDeployFile("grafana/live-patching-service.json"), R"re(job=\\"([^"\\]*)\\")re");
  EXPECT_FALSE(selected.empty());
  EXPECT_FALSE(in_dashboard.empty());
  selected.insert(selected.end(), in_dashboard.begin(), in_dashboard.end());
  for (const std::string& j : selected) EXPECT_EQ(j, kJob);

  // Prometheus finds the replicas through the ServiceMonitor only: annotations as well
  // would scrape each twice, and the automatic halt would count every report twice.
  const json& annotations = At(base.Deployment(), {"spec", "template", "metadata", "annotations"});
  for (const auto& [key, value] : annotations.items()) {
    EXPECT_EQ(key.rfind("prometheus.io/", 0), std::string::npos) << key;
  }
}

TEST(DeployConfigTest, ThePrometheusRuleGroupsAreAlertsYml) {
  Rendered base = RenderBase();
  json expected = At(ReadYaml("deploy/prometheus/alerts.yml"), {"groups"});
  json groups = At(base.One("PrometheusRule"), {"spec", "groups"});
  ASSERT_TRUE(expected.is_array() && !expected.empty());
  // The whole, then group by group and rule by rule for a readable difference.
  EXPECT_TRUE(groups == expected)
      << "deploy/kubernetes/prometheusrule.yaml's groups are not deploy/prometheus/alerts.yml's: "
         "refresh the copy as its header says";
  ASSERT_EQ(groups.size(), expected.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    json rules = At(groups[g], {"rules"});
    json expected_rules = At(expected[g], {"rules"});
    EXPECT_EQ(At(groups[g], {"name"}), At(expected[g], {"name"}));
    EXPECT_EQ(rules.size(), expected_rules.size()) << At(expected[g], {"name"});
    for (size_t r = 0; r < std::min(rules.size(), expected_rules.size()); ++r) {
      EXPECT_EQ(rules[r], expected_rules[r]) << At(expected[g], {"name"}) << " rule " << r;
    }
  }
}

TEST(DeployConfigTest, ThePodRunsNonRootReadOnlyTokenlessFromAnImageByDigest) {
  Rendered base = RenderBase();
  json account = base.One("ServiceAccount");
  EXPECT_EQ(At(account, {"automountServiceAccountToken"}), "false");
  const json& pod = At(base.Deployment(), {"spec", "template", "spec"});
  EXPECT_EQ(At(pod, {"automountServiceAccountToken"}), "false");
  EXPECT_EQ(At(pod, {"serviceAccountName"}), At(account, {"metadata", "name"}));

  EXPECT_EQ(At(pod, {"securityContext", "runAsNonRoot"}), "true");
  EXPECT_EQ(At(pod, {"securityContext", "runAsUser"}), "65532");
  EXPECT_EQ(At(pod, {"securityContext", "runAsGroup"}), "65532");
  json container = base.Container();
  EXPECT_EQ(At(container, {"securityContext", "readOnlyRootFilesystem"}), "true");
  EXPECT_EQ(At(container, {"securityContext", "allowPrivilegeEscalation"}), "false");
  EXPECT_EQ(At(container, {"securityContext", "capabilities", "drop"}), json{"ALL"});

  // By digest, and under the name kustomization.yaml's images entry (what an overlay sets)
  // names, with the same digest.
  std::string image = At(container, {"image"}).get<std::string>();
  std::smatch m;
  ASSERT_TRUE(std::regex_match(image, m, std::regex(R"(([^@]+)@(sha256:[0-9a-f]{64}))"))) << image;
  EXPECT_EQ(m[1], kImage);
  json kustomization = ReadYaml("deploy/kubernetes/kustomization.yaml");
  const json& images = At(kustomization, {"images"});
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(At(images[0], {"name"}), kImage);
  EXPECT_EQ(At(images[0], {"digest"}), std::string(m[2]));
}

}  // namespace
}  // namespace hotfix::testsupport
