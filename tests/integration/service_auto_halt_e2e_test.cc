// The closed loop (docs/ROLLOUTS.md, "Automatic halt"), with real parts: two replicas of the
// real live-patching-service behind the real HAProxy (deploy/haproxy/haproxy.cfg, its backend
// given both replicas), the real Prometheus (Debian's package) scraping both, and nodes running
// the real hotfix-agent: check-hotfix, then download-hotfix with a package-manager stand-in
// that fails for some, each node with its own attested identity from an IMDS stand-in.
//
// Asserted: no halt before min_reports; then the halt on both replicas; a new node no longer
// gets the canary; later successes and restarts of both replicas do not release it;
// Prometheus stopped holds it (signal unavailable, still halted); moving `since` resumes;
// bad and repeated reports are refused or dropped and nothing is counted twice. Nodes, not
// reports (docs/ROLLOUTS.md, "Counting nodes"): one VM sending every outcome to both replicas,
// again after restarts, is one node; a foreign scrape target exporting the same series changes
// nothing; two Prometheus servers scraping the same replicas into one store count each node
// once; a halt is carried across a restart of every replica, one at a time, by a Prometheus
// started after the failures; a window lost with every replica and Prometheus is flagged
// truncated while the finished rollout is still served; and the evidence is read through a
// real TLS reverse proxy (nginx) that wants a bearer token, re-read when its file changes.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "akslivepatching/v1/live_patching.grpc.pb.h"
#include "haproxy.h"
#include "prometheus.h"
#include "service/rollout/auto_halt.h"
#include "service/rollout/rollout.h"
#include "service_fixture.h"
#include "static_http_server.h"
#include "test_certs.h"
#include "tls_peer.h"

namespace hotfix::testsupport {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace pb = akslivepatching::v1;

constexpr char kAks[] = "aksNodeController";
constexpr char kCanaryVersion[] = "202604.01.4";
constexpr char kBaseVersion[] = "202604.01.3";
// The issue's bound: every replica halts within two minutes of the threshold being crossed.
constexpr auto kHaltWithin = 120s;
// A step that waits on Prometheus' scrapes and the halt loop's evaluations, or runs a whole
// agent command under ASan: longer than the suite's kGenerous (wait.h).
constexpr auto kSlowStep = 60s;

// When the canary started: 30 s before the test's SetUp (NewCanaryStart), within the minute's
// grace after which a window the replicas did not see is flagged truncated.
std::string g_canary_start;
void NewCanaryStart() {
  g_canary_start = hotfix::service::FormatRolloutTime(
      std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()) - 30s);
}
const std::string& CanaryStart() { return g_canary_start; }

// The only series that count (deploy/kubernetes/deployment.yaml sets the job and namespace).
constexpr char kSelector[] = "job=\"live-patching-service\"";

// The canary for everyone since CanaryStart(), halting at more than 25 % failed nodes of at
// least min_reports reporting (or max_failures failed nodes).
Json ComponentFile(int min_reports, const std::string& since = "", int max_failures = 0) {
  Json auto_halt = {{"max_failure_percent", 25}, {"min_reports", min_reports}};
  if (!since.empty()) auto_halt["since"] = since;
  if (max_failures > 0) auto_halt["max_failures"] = max_failures;
  return {{"hotfixes", {{"202604.01", kBaseVersion}}},
          {"rollouts",
           {{{"name", "canary"},
             {"hotfixes", {{"202604.01", kCanaryVersion}}},
             {"steps", Json::array({{{"at", CanaryStart()}, {"percent", 100}}})},
             {"auto_halt", auto_halt}}}}};
}

// deploy/haproxy/haproxy.cfg with its one service backend line given both replicas: the
// shipped file otherwise, as operators run it.
fs::path TwoReplicaHaproxyConfig(const TempDir& dir, uint16_t a, uint16_t b) {
  std::ifstream in(Haproxy::DefaultConfigPath());
  std::string cfg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string line = "    server lps \"${LP_SERVICE_ADDR}\"";
  const size_t at = cfg.find(line);
  EXPECT_NE(at, std::string::npos) << "the shipped HAProxy config changed its backend line";
  if (at != std::string::npos) {
    cfg.replace(at, line.size(),
                "    balance roundrobin\n    server lps1 " + LoopbackAddress(a) +
                    "\n    server lps2 " + LoopbackAddress(b));
  }
  return dir.Write("haproxy.cfg", cfg);
}

class AutoHaltE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    NewCanaryStart();
    metrics_ports_ = {PickFreePort(), PickFreePort()};
    grpc_ports_ = {PickFreePort(), PickFreePort()};
    PrometheusOptions prometheus = ScrapingBoth();
    ConfigurePrometheus(&prometheus);
    prometheus_ = std::make_unique<PrometheusServer>(std::move(prometheus));
    prometheus_url_ = prometheus_->url();
    ConfigureEvidence();
    files_.WriteComponent(kAks, ComponentFile(24).dump());
    for (int i = 0; i < 2; ++i) StartReplica(i);
    HaproxyOptions options = AlpnRouteOptions(0, apiserver_.port());
    options.config_path = TwoReplicaHaproxyConfig(dir_, replicas_[0]->port(), replicas_[1]->port());
    proxy_ = std::make_unique<Haproxy>(std::move(options));
  }
  void TearDown() override {
    if (HasFailure()) {
      for (auto& r : replicas_) {
        if (r) ADD_FAILURE() << "replica log (tail):\n" << Tail(r->Stderr(), 6000);
      }
      if (prometheus_) ADD_FAILURE() << "prometheus log:\n" << Tail(prometheus_->Log(), 3000);
    }
  }
  static std::string Tail(const std::string& s, size_t n) {
    return s.size() <= n ? s : s.substr(s.size() - n);
  }
  // A Prometheus scraping both replicas every second under the shipped job.
  PrometheusOptions ScrapingBoth() const {
    PrometheusOptions prometheus;
    prometheus.targets = {LoopbackAddress(metrics_ports_[0]), LoopbackAddress(metrics_ports_[1])};
    prometheus.scrape_interval = 1s;
    return prometheus;
  }
  // Hooks for the fixtures below: the Prometheus the test starts, and where the replicas
  // read their evidence (prometheus_url_, extra_args_) once it runs.
  virtual void ConfigurePrometheus(PrometheusOptions*) {}
  virtual void ConfigureEvidence() {}

  void StartReplica(int i) {
    replicas_[i].reset();  // a restart: the old process first (its ports are reused)
    std::vector<std::string> flags = {"--metrics-listen",      LoopbackAddress(metrics_ports_[i]),
                                      "--prometheus-url",      prometheus_url_,
                                      "--prometheus-selector", kSelector,
                                      "--auto-halt-interval",  "1s"};
    flags.insert(flags.end(), extra_args_.begin(), extra_args_.end());
    std::vector<std::string> args = files_.Args(flags);
    // Fixed ports, so that HAProxy and Prometheus find a restarted replica where it was.
    *(std::find(args.begin(), args.end(), "--listen") + 1) = LoopbackAddress(grpc_ports_[i]);
    replicas_[i] = std::make_unique<ServiceProcess>(std::move(args));
  }
  void StopReplica(int i) {
    replicas_[i]->process().Stop(30s);
    replicas_[i].reset();
  }

  // The canary's row of GET /rollouts on replica i; null when there is none.
  Json Canary(int i) const {
    int status = 0;
    std::string body = HttpGet(metrics_ports_[i], "/rollouts", &status);
    if (status != 200) return nullptr;
    Json doc = Json::parse(body, nullptr, false);
    if (doc.is_discarded() || !doc["components"].contains(kAks)) return nullptr;
    for (const Json& row : doc["components"][kAks]) {
      if (row.value("name", "") == "canary") return row;
    }
    return nullptr;
  }
  // True once both replicas judged the evidence as holding `reports` reporting nodes (and,
  // when given, `failures` failed ones).
  bool BothSawReports(uint64_t reports, std::optional<uint64_t> failures = std::nullopt,
                      std::chrono::seconds within = kSlowStep) const {
    bool seen = false;
    WaitFor(
        [&] {
          for (int i = 0; i < 2; ++i) {
            Json row = Canary(i);
            if (row.is_null() || row["auto_halt"]["signal"] != "ok" ||
                row["auto_halt"]["reports"] != reports ||
                (failures && row["auto_halt"]["failures"] != *failures)) {
              return false;
            }
          }
          return seen = true;
        },
        within);
    return seen;
  }
  bool SinceOnBoth(const std::string& since) const {
    for (int i = 0; i < 2; ++i) {
      Json row = Canary(i);
      if (row.is_null() || row["auto_halt"]["since"] != since ||
          row["auto_halt"]["signal"] != "ok") {
        return false;
      }
    }
    return true;
  }
  bool BothInState(const std::string& state, std::chrono::seconds within) const {
    bool seen = false;
    WaitFor(
        [&] {
          return seen =
                     Canary(0).value("state", "") == state && Canary(1).value("state", "") == state;
        },
        within);
    return seen;
  }

  // One node's whole provisioning: check-hotfix stages what the service serves it, then
  // download-hotfix installs it with apt-get (a stand-in that fails when `fail`) and reports.
  // Returns the version the pointer named.
  // A scratch Ubuntu node's folders and files: the node config for this cluster, os-release,
  // the Microsoft apt source, and the folders the commands write to.
  void WriteNodeFiles(const TempDir& node) const {
    for (const char* d : {"opt", "usr/bin", "etc/apt/sources.list.d", "events", "fakebin"}) {
      fs::create_directories(node.File(d));
    }
    node.Write("opt/aks-node-controller-config.json",
               NodeConfigJson(kApiserverFqdn, files_.tls_ca().cert_pem()).dump());
    node.Write("etc/os-release", "NAME=\"Ubuntu\"\nID=ubuntu\n");
    node.Write("etc/apt/sources.list.d/microsoft-prod.list",
               "deb [arch=amd64] https://packages.microsoft.com/ubuntu/22.04/prod jammy main\n");
  }
  // The IMDS stand-in of node n: its own vmId, this fleet's subscription.
  std::unique_ptr<ImdsStandin> NodeImds(int n) const {
    ImdsStandinOptions imds_options;
    imds_options.signer = files_.signer();
    imds_options.vm_id = VmId(n);
    imds_options.subscription_id = kSubscription;
    return std::make_unique<ImdsStandin>(std::move(imds_options));
  }

  std::string NodeBoots(int n, bool fail) {
    TempDir node("auto-halt-node");
    WriteNodeFiles(node);
    fs::path vhd = node.Write("opt/aks-node-controller", "vhd binary\n");
    node.Write("usr/bin/aks-node-controller", "hotfix binary\n");
    auto tool = [&](const std::string& name, const std::string& body) {
      fs::permissions(node.Write("fakebin/" + name, "#!/bin/sh\n" + body), fs::perms(0755));
    };
    tool("apt-get", fail ? "echo 'E: Unable to fetch archives' >&2; exit 100\n" : "exit 0\n");
    tool("dpkg", "exit 0\n");
    tool("dpkg-query", std::string("printf 'installed\\t") + kCanaryVersion + "\\n'\n");
    const std::unique_ptr<ImdsStandin> imds = NodeImds(n);

    CheckHotfixArgs check;
    check.node_config = node.File("opt/aks-node-controller-config.json");
    check.nbc_cmd = node.File("opt/nbc-cmd.sh");
    check.pointer = node.File("opt/aks-node-controller-hotfix.json");
    check.imds_url = imds->document_url();
    check.connect_to = proxy_->frontend_address();
    check.events_dir = node.File("events");
    check.log_file = node.File("agent.log");
    RunResult checked = RunProcess(CheckHotfixSpawn(check), kSlowStep);
    EXPECT_TRUE(checked.status.success()) << checked.stderr_text;
    Json pointer = Json::parse(node.Read("opt/aks-node-controller-hotfix.json"), nullptr, false);
    const std::string version =
        pointer.is_object() ? pointer["hotfixes"].value("202604.01", "") : std::string();
    if (version != kCanaryVersion) return version;  // nothing of the canary's to install

    SpawnOptions spawn;
    spawn.argv = {BinDir() + "/hotfix-agent",
                  "download-hotfix",
                  "--hotfix-pointer",
                  check.pointer,
                  "--current-version",
                  "202604.01.0",
                  "--os-release",
                  node.File("etc/os-release"),
                  "--apt-sources-dir",
                  node.File("etc/apt/sources.list.d"),
                  "--package-binary",
                  node.File("usr/bin/aks-node-controller"),
                  "--vhd-binary",
                  vhd,
                  "--hotfix-binary",
                  node.File("opt/aks-node-controller-hotfix"),
                  "--node-custom-data",
                  node.File("opt/nodecustomdata.yml"),
                  "--retry-backoff",
                  "10ms",
                  "--events-dir",
                  node.File("events"),
                  "--log-file",
                  check.log_file,
                  "--node-config",
                  check.node_config,
                  "--nbc-cmd",
                  check.nbc_cmd,
                  "--imds-url",
                  check.imds_url,
                  "--connect-to",
                  *check.connect_to};
    spawn.env["PATH"] = node.File("fakebin").string() + ":/usr/sbin:/usr/bin:/sbin:/bin";
    for (const char* name : {"HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"}) {
      spawn.unset_env.push_back(name);
    }
    RunResult downloaded = RunProcess(std::move(spawn), kSlowStep);
    // The package manager's own code on failure; the report never changes it.
    EXPECT_EQ(downloaded.status.exit_code, fail ? 100 : 0) << downloaded.stderr_text;
    EXPECT_THAT(node.Read("agent.log"), HasSubstr("reported hotfix outcome to LPS"))
        << node.Read("agent.log");
    return version;
  }

  // One node's boot through deploy/node/aks-node-controller-hotfix.sh, as AgentBaker's
  // launcher runs its helper: check-hotfix, download-hotfix (apt-get a stand-in that installs),
  // the hotfix binary selected, its `provision` exiting provision_exit, then `hotfix-agent
  // report`. Returns the flow's exit code; *log its output.
  int NodeFlow(int n, int provision_exit, std::string* log = nullptr) {
    TempDir node("node-flow");
    WriteNodeFiles(node);
    node.Write("opt/enabled_features.sh",
               "# written by the bootstrapper\n"
               "ENABLE_PROVISIONING_HOTFIX=true");  // no newline
    auto executable = [&](const std::string& path, const std::string& body) {
      fs::permissions(node.Write(path, "#!/bin/sh\n" + body), fs::perms(0755));
    };
    // The VHD's agent, and what the package installs: its `provision` exits as asked.
    executable("opt/aks-node-controller", "echo vhd \"$@\" >>\"$(dirname \"$0\")/ran\"\n");
    executable("usr/bin/aks-node-controller",
               "echo hotfix \"$@\" >>\"$(dirname \"$0\")/../opt/ran\"\nexit " +
                   std::to_string(provision_exit) + "\n");
    executable("fakebin/apt-get", "exit 0\n");
    executable("fakebin/dpkg", "exit 0\n");
    executable("fakebin/dpkg-query",
               std::string("printf 'installed\\t") + kCanaryVersion + "\\n'\n");
    const std::unique_ptr<ImdsStandin> imds = NodeImds(n);

    SpawnOptions spawn;
    spawn.argv = {"/bin/bash", SourceDir() + "/deploy/node/aks-node-controller-hotfix.sh"};
    spawn.env["PATH"] = node.File("fakebin").string() + ":/usr/sbin:/usr/bin:/sbin:/bin";
    spawn.env["HOTFIX_AGENT"] = BinDir() + "/hotfix-agent";
    spawn.env["BIN_PATH"] = node.File("opt/aks-node-controller");
    spawn.env["HOTFIX_JSON"] = node.File("opt/aks-node-controller-hotfix.json");
    spawn.env["CONFIG_PATH"] = node.File("opt/aks-node-controller-config.json");
    spawn.env["NBC_CMD_PATH"] = node.File("opt/aks-node-controller-nbc-cmd.sh");  // absent
    spawn.env["FEATURES_PATH"] = node.File("opt/enabled_features.sh");
    spawn.env["CURRENT_VERSION"] = "202604.01.0";
    spawn.env["HOTFIX_AGENT_ARGS"] = "--imds-url\n" + imds->document_url() + "\n--connect-to\n" +
                                     proxy_->frontend_address() + "\n--log-file\n" +
                                     node.File("agent.log").string();
    spawn.env["HOTFIX_CHECK_ARGS"] = "--events-dir\n" + node.File("events").string();
    spawn.env["HOTFIX_DOWNLOAD_ARGS"] =
        "--os-release\n" + node.File("etc/os-release").string() + "\n--apt-sources-dir\n" +
        node.File("etc/apt/sources.list.d").string() + "\n--package-binary\n" +
        node.File("usr/bin/aks-node-controller").string() + "\n--node-custom-data\n" +
        node.File("opt/nodecustomdata.yml").string() + "\n--retry-backoff\n10ms\n--events-dir\n" +
        node.File("events").string();
    for (const char* name : {"HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"}) {
      spawn.unset_env.push_back(name);
    }
    RunResult ran = RunProcess(std::move(spawn), kSlowStep);
    if (log != nullptr) {
      *log = ran.stdout_text + ran.stderr_text + "\n--- ran:\n" + node.Read("opt/ran") +
             "--- agent.log:\n" + node.Read("agent.log");
    }
    return ran.status.exit_code;
  }

  static std::string VmId(int n) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "00000000-0000-4000-8000-%012d", n);
    return buf;
  }

  // A report straight to replica i over libgrpc++, as node n.
  grpc::Status Report(int i, int n, pb::HotfixOutcome outcome, const std::string& detail = "",
                      const std::string& component = kAks, bool with_token = true) {
    auto stub = pb::LivePatchingService::NewStub(replicas_[i]->Channel(files_));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    if (with_token) {
      AttestedDocumentFields fields;
      fields.vm_id = VmId(n);
      fields.subscription_id = kSubscription;
      ctx.AddMetadata("authorization", files_.Token(fields));
    }
    pb::ReportHotfixOutcomeRequest req;
    req.set_component_name(component);
    req.set_base_version("202604.01");
    req.set_hotfix_version(kCanaryVersion);
    req.set_outcome(outcome);
    req.set_detail(detail);
    pb::ReportHotfixOutcomeResponse resp;
    return stub->ReportHotfixOutcome(&ctx, req, &resp);
  }

  // The reports Prometheus holds for the canary, summed over replicas (counters as scraped).
  std::optional<double> PrometheusSum(const std::string& outcome_matcher = "") const {
    return prometheus_->Scalar("sum(lp_rollout_outcomes_total{rollout=\"canary\"" +
                               outcome_matcher + "})");
  }

  static constexpr char kSubscription[] = "8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8";
  std::string prometheus_url_;
  std::vector<std::string> extra_args_;
  TempDir dir_{"auto-halt-e2e"};
  ServiceFiles files_;
  std::vector<uint16_t> metrics_ports_;
  std::vector<uint16_t> grpc_ports_;
  std::unique_ptr<PrometheusServer> prometheus_;
  std::unique_ptr<ServiceProcess> replicas_[2];
  TlsPeer apiserver_{SilentApiserverOptions(files_.tls_ca(), kApiserverFqdn)};
  std::unique_ptr<Haproxy> proxy_;
};

TEST_F(AutoHaltE2eTest, FailingNodesHaltTheCanaryOnEveryReplicaAndItStaysHalted) {
  // 23 nodes, 12 of them failing (52 %): one short of min_reports, so no halt.
  for (int n = 1; n <= 23; ++n) {
    ASSERT_EQ(NodeBoots(n, /*fail=*/n % 2 == 0 || n == 23), kCanaryVersion) << "node " << n;
  }
  ASSERT_TRUE(BothSawReports(23)) << Canary(0).dump() << Canary(1).dump();
  for (int i = 0; i < 2; ++i) {
    Json row = Canary(i);
    EXPECT_EQ(row["state"], "complete") << row.dump();
    EXPECT_EQ(row["auto_halt"]["failures"], 12);
    EXPECT_TRUE(row["auto_halt"]["halted_at"].is_null());
    std::string metrics = HttpGet(metrics_ports_[i], "/metrics");
    EXPECT_EQ(MetricValue(metrics, "lp_rollout_auto_halted", {{"rollout", "canary"}}), 0.0);
    EXPECT_GT(MetricValue(metrics, "lp_auto_halt_evaluations_total", {{"result", "ok"}}), 0.0);
  }
  EXPECT_EQ(PrometheusSum(), 23.0);

  // The 24th report is the sample: 13 of 24 failed.
  const auto crossed = std::chrono::steady_clock::now();
  ASSERT_EQ(NodeBoots(24, /*fail=*/true), kCanaryVersion);
  ASSERT_TRUE(BothInState("auto-halted", kHaltWithin)) << Canary(0).dump() << Canary(1).dump();
  EXPECT_LT(std::chrono::steady_clock::now() - crossed, kHaltWithin);
  for (int i = 0; i < 2; ++i) {
    Json row = Canary(i);
    EXPECT_EQ(row["auto_halt"]["reports"], 24) << row.dump();
    EXPECT_EQ(row["auto_halt"]["failures"], 13);
    EXPECT_EQ(row["auto_halt"]["failure_percent"], 54.17);
    EXPECT_FALSE(row["auto_halt"]["halted_at"].is_null());
    EXPECT_EQ(row["percent"], 0);
    EXPECT_EQ(MetricValue(HttpGet(metrics_ports_[i], "/metrics"), "lp_rollout_auto_halted",
                          {{"rollout", "canary"}}),
              1.0);
    EXPECT_TRUE(replicas_[i]->Logged("rollout auto-halted"));
  }
  // Both replicas take the earliest halt either recorded: the same halt time.
  bool same = false;
  WaitFor(
      [&] {
        return same = Canary(0)["auto_halt"]["halted_at"] == Canary(1)["auto_halt"]["halted_at"];
      },
      kSlowStep);
  EXPECT_TRUE(same) << Canary(0).dump() << Canary(1).dump();

  // A node booting now is served the baseline, through either replica.
  EXPECT_EQ(NodeBoots(100, false), kBaseVersion);
  EXPECT_EQ(NodeBoots(101, false), kBaseVersion);

  // Later successes do not release it.
  for (int n = 200; n < 230; ++n) {
    ASSERT_TRUE(Report(n % 2, n, pb::HOTFIX_OUTCOME_INSTALLED).ok());
  }
  ASSERT_TRUE(BothSawReports(54)) << Canary(0).dump();
  EXPECT_EQ(Canary(0)["state"], "auto-halted");
  EXPECT_EQ(Canary(1)["state"], "auto-halted");

  // Nor do restarts of every replica: a new process judges the same history.
  StopReplica(0);
  StopReplica(1);
  StartReplica(0);
  StartReplica(1);
  ASSERT_TRUE(BothSawReports(54)) << Canary(0).dump() << Canary(1).dump();
  EXPECT_EQ(Canary(0)["state"], "auto-halted");
  EXPECT_EQ(Canary(1)["state"], "auto-halted");
  EXPECT_EQ(NodeBoots(102, false), kBaseVersion);
}

TEST_F(AutoHaltE2eTest, WithoutPrometheusItIsHeldAndMovingSinceResumes) {
  files_.WriteComponent(kAks, ComponentFile(10, "", /*max_failures=*/3).dump());
  for (int n = 1; n <= 3; ++n) {
    ASSERT_TRUE(
        Report(n % 2, n, pb::HOTFIX_OUTCOME_VERSION_MISMATCH, "dpkg says 202604.01.1").ok());
  }
  ASSERT_TRUE(BothInState("auto-halted", kHaltWithin)) << Canary(0).dump();
  // The replica that halted first did on the evidence; the other may have read its record
  // first (which one evaluates first is the scheduler's).
  const std::string evidence = Canary(0)["auto_halt"]["evidence"].get<std::string>() + " | " +
                               Canary(1)["auto_halt"]["evidence"].get<std::string>();
  EXPECT_THAT(evidence, HasSubstr("failed nodes 3 >= max_failures 3"));

  // Prometheus gone: the signal is unavailable, and the halt holds.
  prometheus_->Stop();
  bool unavailable = false;
  WaitFor(
      [&] {
        return unavailable = Canary(0)["auto_halt"]["signal"] == "unavailable" &&
                             Canary(1)["auto_halt"]["signal"] == "unavailable";
      },
      kSlowStep);
  ASSERT_TRUE(unavailable) << Canary(0).dump();
  EXPECT_EQ(Canary(0)["state"], "auto-halted");
  EXPECT_EQ(Canary(1)["state"], "auto-halted");
  EXPECT_EQ(MetricValue(HttpGet(metrics_ports_[0], "/metrics"), "lp_rollout_auto_halt_signal_ok",
                        {{"rollout", "canary"}}),
            0.0);
  // A replica that starts while Prometheus is down knows nothing: it applies the canary to no
  // one (the halt is not lost by a restart during the outage).
  StopReplica(1);
  StartReplica(1);
  Json fresh = Canary(1);
  EXPECT_EQ(fresh["auto_halt"]["signal"], "unavailable") << fresh.dump();
  EXPECT_EQ(fresh["percent"], 0);
  EXPECT_NE(NodeBoots(300, false), kCanaryVersion);
  EXPECT_NE(NodeBoots(301, false), kCanaryVersion);

  // Prometheus back (same data): both judge the history again, still halted.
  prometheus_->Start();
  ASSERT_TRUE(BothSawReports(3)) << Canary(0).dump() << Canary(1).dump();
  EXPECT_EQ(Canary(0)["state"], "auto-halted");
  EXPECT_EQ(Canary(1)["state"], "auto-halted");

  // A person moves `since` past the failures: resumed on both, and nodes get the canary again.
  const auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  const std::string since = hotfix::service::FormatRolloutTime(now + 2s);
  std::this_thread::sleep_for(3s);
  files_.WriteComponent(kAks, ComponentFile(10, since, 3).dump());
  ASSERT_TRUE(BothInState("complete", kSlowStep)) << Canary(0).dump() << Canary(1).dump();
  EXPECT_EQ(Canary(0)["auto_halt"]["reports"], 0);
  EXPECT_EQ(Canary(0)["auto_halt"]["since"], since);
  EXPECT_EQ(NodeBoots(302, false), kCanaryVersion);
}

TEST_F(AutoHaltE2eTest, BadAndRepeatedReportsAreRefusedOrDroppedAndNothingCountsTwice) {
  EXPECT_EQ(Report(0, 1, pb::HOTFIX_OUTCOME_INSTALLED, "", kAks, /*with_token=*/false).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Report(0, 1, pb::HOTFIX_OUTCOME_INSTALLED, "", "noSuchComponent").error_code(),
            grpc::StatusCode::NOT_FOUND);
  grpc::Status oversize = Report(0, 1, pb::HOTFIX_OUTCOME_INSTALL_FAILED, std::string(300, 'x'));
  EXPECT_EQ(oversize.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(oversize.error_message(), HasSubstr("detail is 300 bytes, more than 256"));
  EXPECT_EQ(Report(0, 1, pb::HOTFIX_OUTCOME_UNSPECIFIED).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // Counted once: a repeat to the same replica is answered OK and dropped.
  ASSERT_TRUE(Report(0, 1, pb::HOTFIX_OUTCOME_INSTALL_FAILED, "apt-get exited 100").ok());
  ASSERT_TRUE(Report(0, 1, pb::HOTFIX_OUTCOME_INSTALL_FAILED, "apt-get exited 100").ok());
  ASSERT_TRUE(Report(1, 2, pb::HOTFIX_OUTCOME_INSTALLED).ok());
  ASSERT_TRUE(BothSawReports(2)) << Canary(0).dump() << Canary(1).dump();
  EXPECT_EQ(Canary(0)["auto_halt"]["failures"], 1);
  EXPECT_EQ(PrometheusSum(), 2.0);
  EXPECT_EQ(PrometheusSum(",outcome=\"install_failed\""), 1.0);
  std::string metrics = HttpGet(metrics_ports_[0], "/metrics");
  EXPECT_EQ(MetricValue(metrics, "lp_rollout_outcomes_total",
                        {{"rollout", "canary"}, {"outcome", "install_failed"}}),
            1.0);
  EXPECT_EQ(MetricValue(metrics, "lp_requests_total",
                        {{"method", "ReportHotfixOutcome"}, {"code", "UNAUTHENTICATED"}}),
            1.0);
  // Each report has its access-log line with the detail, and the repeat says so.
  std::vector<Json> lines;
  for (const Json& l : replicas_[0]->LogLines()) {
    if (l.value("msg", "") == "ReportHotfixOutcome" && l.value("code", "") == "OK")
      lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["detail"], "apt-get exited 100");
  EXPECT_FALSE(lines[0]["duplicate"].get<bool>());
  EXPECT_TRUE(lines[1]["duplicate"].get<bool>());
}

TEST_F(AutoHaltE2eTest, OneVmSendingEveryOutcomeToBothReplicasIsOneNodeAcrossRestarts) {
  const pb::HotfixOutcome outcomes[] = {
      pb::HOTFIX_OUTCOME_INSTALLED,      pb::HOTFIX_OUTCOME_PLATFORM_UNSUPPORTED,
      pb::HOTFIX_OUTCOME_INSTALL_FAILED, pb::HOTFIX_OUTCOME_VERSION_MISMATCH,
      pb::HOTFIX_OUTCOME_STAGE_FAILED,   pb::HOTFIX_OUTCOME_FAILED_OTHER};
  auto flood = [&] {
    for (int round = 0; round < 2; ++round) {
      for (pb::HotfixOutcome outcome : outcomes) {
        for (int i = 0; i < 2; ++i) ASSERT_TRUE(Report(i, 7, outcome).ok());
      }
    }
  };
  flood();
  ASSERT_TRUE(BothSawReports(1, 1)) << Canary(0).dump() << Canary(1).dump();
  // Both replicas restarted, one after the other and then together: the node is read back,
  // and the same flood again moves nothing.
  StopReplica(0);
  StartReplica(0);
  ASSERT_TRUE(BothSawReports(1, 1)) << Canary(0).dump() << Canary(1).dump();
  StopReplica(0);
  StopReplica(1);
  StartReplica(0);
  StartReplica(1);
  ASSERT_TRUE(BothSawReports(1, 1)) << Canary(0).dump() << Canary(1).dump();
  flood();
  ASSERT_TRUE(Report(0, 8, pb::HOTFIX_OUTCOME_INSTALLED).ok());  // the counts still move
  ASSERT_TRUE(BothSawReports(2, 1)) << Canary(0).dump() << Canary(1).dump();
  EXPECT_EQ(Canary(0)["auto_halt"]["failed_subscriptions"], 1);
  EXPECT_EQ(MetricValue(HttpGet(metrics_ports_[1], "/metrics"), "lp_rollout_nodes",
                        {{"rollout", "canary"}, {"set", "reporting"}}),
            2.0);
  // The reports themselves are many: the counter (for dashboards) is not the evidence.
  EXPECT_GT(PrometheusSum().value_or(0), 2.0);
}

TEST_F(AutoHaltE2eTest, ProvisioningFailuresThroughTheNodeFlowHaltTheCanary) {
  files_.WriteComponent(kAks, ComponentFile(10, "", /*max_failures=*/2).dump());
  // A node whose hotfix binary provisions: the flow exits 0, and the node reported both the
  // install and the provisioning, one node.
  std::string log;
  ASSERT_EQ(NodeFlow(1, 0, &log), 0) << log;
  EXPECT_THAT(log, HasSubstr("Using hotfix binary"));
  EXPECT_THAT(log, HasSubstr("hotfix provision --provision-config="));
  EXPECT_THAT(log, HasSubstr("\"outcome\":\"PROVISION_SUCCEEDED\""));
  ASSERT_TRUE(BothSawReports(1, 0)) << Canary(0).dump() << Canary(1).dump();
  // Two nodes whose hotfix binary installs but fails to provision: provision's code is the
  // flow's, and two failed nodes halt the canary.
  for (int n = 2; n <= 3; ++n) {
    ASSERT_EQ(NodeFlow(n, 3, &log), 3) << log;
    EXPECT_THAT(log, HasSubstr("\"outcome\":\"PROVISION_FAILED\""));
  }
  ASSERT_TRUE(BothInState("auto-halted", kHaltWithin)) << Canary(0).dump() << Canary(1).dump();
  EXPECT_EQ(Canary(0)["auto_halt"]["failures"], 2);
  EXPECT_EQ(Canary(0)["auto_halt"]["reports"], 3);
  double provision_failed = 0;
  for (int i = 0; i < 2; ++i) {
    provision_failed +=
        MetricValue(HttpGet(metrics_ports_[i], "/metrics"), "lp_rollout_outcomes_total",
                    {{"rollout", "canary"}, {"outcome", "provision_failed"}})
            .value_or(0);
  }
  EXPECT_EQ(provision_failed, 2.0);
  // A node booting now is not served the canary: the VHD binary provisions, nothing reported.
  ASSERT_EQ(NodeFlow(4, 0, &log), 0) << log;
  EXPECT_THAT(log, HasSubstr("Using VHD-baked binary"));
  EXPECT_THAT(log, HasSubstr("vhd provision"));
  EXPECT_THAT(log, Not(HasSubstr("PROVISION_")));
}

// A gated canary: 50 % from CanaryStart(), 100 % once three of its nodes reported since then
// and five seconds passed; no auto_halt.
Json GatedFile() {
  const auto start = hotfix::service::ParseRolloutTime(CanaryStart()).value();
  return {{"hotfixes", {{"202604.01", kBaseVersion}}},
          {"rollouts",
           {{{"name", "canary"},
             {"hotfixes", {{"202604.01", kCanaryVersion}}},
             {"steps", Json::array({{{"at", CanaryStart()}, {"percent", 50}},
                                    {{"at", hotfix::service::FormatRolloutTime(start + 1s)},
                                     {"percent", 100},
                                     {"gate", {{"min_nodes", 3}, {"bake", "5s"}}}}})}}}}};
}

TEST_F(AutoHaltE2eTest, AGateWaitsThenOpensOnEvidenceAtOneStartTimeForEveryReplica) {
  files_.WriteComponent(kAks, GatedFile().dump());
  // Nodes in the 50 % (buckets under 5000) and one outside it.
  std::vector<int> in;
  int out = 0;
  for (int n = 1; in.size() < 4 || out == 0; ++n) {
    const bool inside = hotfix::service::RolloutBucket("canary", VmId(n)) < 5000;
    if (inside) in.push_back(n);
    if (!inside && out == 0) out = n;
  }
  auto waiting = [&](int i, const std::string& missing) {
    Json row = Canary(i);
    return !row.is_null() && row["percent"] == 50 && row["waiting_on"].is_object() &&
           row["waiting_on"]["missing"] == missing;
  };
  bool seen = false;
  WaitFor(
      [&] {
        return seen = waiting(0, "0 of 3 reporting nodes") && waiting(1, "0 of 3 reporting nodes");
      },
      kSlowStep);
  ASSERT_TRUE(seen) << Canary(0).dump() << Canary(1).dump();
  EXPECT_NE(NodeBoots(out, false), kCanaryVersion);  // outside the 50 %
  // Two nodes: missing evidence waits.
  ASSERT_TRUE(Report(0, in[0], pb::HOTFIX_OUTCOME_INSTALLED).ok());
  ASSERT_TRUE(Report(1, in[1], pb::HOTFIX_OUTCOME_PROVISION_SUCCEEDED).ok());
  WaitFor(
      [&] {
        return seen = waiting(0, "2 of 3 reporting nodes") && waiting(1, "2 of 3 reporting nodes");
      },
      kSlowStep);
  ASSERT_TRUE(seen) << Canary(0).dump() << Canary(1).dump();
  // The third: the gate opens, bakes five seconds, and the step starts on both replicas at
  // the same second.
  ASSERT_TRUE(Report(0, in[2], pb::HOTFIX_OUTCOME_INSTALLED).ok());
  WaitFor([&] { return seen = Canary(0)["percent"] == 100 && Canary(1)["percent"] == 100; },
          kSlowStep);
  ASSERT_TRUE(seen) << Canary(0).dump() << Canary(1).dump();
  auto started = [&](int i) { return Canary(i)["gates"][0]["started_at"]; };
  WaitFor([&] { return seen = started(0) == started(1) && started(0).is_string(); }, kSlowStep);
  ASSERT_TRUE(seen) << Canary(0).dump() << Canary(1).dump();
  const Json start = started(0);
  const Json open = Canary(0)["gates"][0]["open_at"];
  EXPECT_EQ(hotfix::service::ParseRolloutTime(start.get<std::string>()).value(),
            hotfix::service::ParseRolloutTime(open.get<std::string>()).value() + 5s);
  EXPECT_TRUE(Canary(0)["waiting_on"].is_null());
  EXPECT_EQ(NodeBoots(out, false), kCanaryVersion);  // the 100 % step reaches it
  // After a restart of each replica: the same start, at once.
  StopReplica(0);
  StopReplica(1);
  StartReplica(0);
  StartReplica(1);
  WaitFor([&] { return seen = started(0) == start && started(1) == start; }, kSlowStep);
  ASSERT_TRUE(seen) << Canary(0).dump() << Canary(1).dump();
  EXPECT_EQ(Canary(0)["percent"], 100);
  std::string metrics = HttpGet(metrics_ports_[0], "/metrics");
  EXPECT_EQ(MetricValue(metrics, "lp_rollout_step_start", {{"rollout", "canary"}, {"step", "1"}}),
            static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(
                                    hotfix::service::ParseRolloutTime(start.get<std::string>())
                                        .value()
                                        .time_since_epoch())
                                    .count()));
}

// A scrape target of another job exporting the service's own series, to halt the canary
// (failures, a halt record under its policy) or hide its failures (successes).
class ForeignTargetTest : public AutoHaltE2eTest {
 protected:
  void ConfigurePrometheus(PrometheusOptions* options) override {
    std::string policy = hotfix::service::PolicyLabel(
        hotfix::service::ParseRollouts(ComponentFile(24)["rollouts"])->at(0).auto_halt.value());
    std::string metrics;
    const std::string canary =
        "component=\"aksNodeController\",rollout=\"canary\",since=\"" + CanaryStart() + "\"";
    for (int i = 0; i < 40; ++i) {
      for (const char* set : {"reporting", "failed", "failed_subscriptions"}) {
        metrics += std::string("lp_rollout_node_sketch{") + canary + ",set=\"" + set +
                   "\",slot=\"m" + std::to_string(i) + "\"} " + std::to_string(1000 + i) + "\n";
      }
    }
    metrics += "lp_rollout_halt_record{" + canary + ",policy=\"" + policy + "\"} 1\n";
    metrics += "lp_rollout_evidence_from{" + canary + "} 1\n";
    metrics +=
        "lp_rollout_outcomes_total{component=\"aksNodeController\",rollout=\"canary\","
        "outcome=\"install_failed\"} 1000\n";
    metrics += "lp_rollout_applied_total{component=\"aksNodeController\",rollout=\"canary\"} 1\n";
    foreign_dir_.Write("metrics", metrics);
    StaticHttpServerOptions server;
    server.root = foreign_dir_.path();
    server.server_config = "default_type text/plain;";
    foreign_ = std::make_unique<StaticHttpServer>(server);
    options->other_jobs = {{"foreign", {foreign_->address()}}};
  }
  TempDir foreign_dir_{"foreign-target"};
  std::unique_ptr<StaticHttpServer> foreign_;
};

TEST_F(ForeignTargetTest, ChangesNothing) {
  for (int n = 1; n <= 10; ++n) ASSERT_TRUE(Report(n % 2, n, pb::HOTFIX_OUTCOME_INSTALLED).ok());
  // Prometheus holds the foreign series...
  std::optional<double> foreign_up;
  WaitFor([&] { return (foreign_up = prometheus_->Scalar("up{job=\"foreign\"}")) == 1.0; },
          kSlowStep);
  ASSERT_EQ(foreign_up, 1.0) << prometheus_->Log();
  ASSERT_TRUE(prometheus_->Scalar("lp_rollout_halt_record{job=\"foreign\"}").has_value());
  // ...and both replicas count the ten real nodes only, without a halt.
  ASSERT_TRUE(BothSawReports(10, 0)) << Canary(0).dump() << Canary(1).dump();
  for (int i = 0; i < 2; ++i) {
    Json row = Canary(i);
    EXPECT_EQ(row["state"], "complete") << row.dump();
    EXPECT_TRUE(row["auto_halt"]["halted_at"].is_null()) << row.dump();
    EXPECT_FALSE(row["auto_halt"]["truncated"].get<bool>()) << row.dump();
  }
  EXPECT_EQ(NodeBoots(50, false), kCanaryVersion);
}

// An HA pair: Prometheus a and b each scrape both replicas and write into one store without
// deduplication (each copy keeps its `replica` external label), which the replicas read.
class TwoPrometheusTest : public AutoHaltE2eTest {
 protected:
  void ConfigurePrometheus(PrometheusOptions* options) override {
    options->targets.clear();
    options->remote_write_receiver = true;
  }
  void ConfigureEvidence() override {
    for (const char* name : {"a", "b"}) {
      PrometheusOptions pair = ScrapingBoth();
      pair.external_labels = {{"replica", name}};
      pair.remote_write = {prometheus_->url() + "/api/v1/write"};
      pair_.push_back(std::make_unique<PrometheusServer>(std::move(pair)));
    }
  }
  std::vector<std::unique_ptr<PrometheusServer>> pair_;
};

TEST_F(TwoPrometheusTest, CountEachNodeOnce) {
  ASSERT_TRUE(Report(0, 1, pb::HOTFIX_OUTCOME_INSTALL_FAILED).ok());
  ASSERT_TRUE(Report(1, 2, pb::HOTFIX_OUTCOME_STAGE_FAILED).ok());
  ASSERT_TRUE(Report(0, 3, pb::HOTFIX_OUTCOME_INSTALLED).ok());
  // The store holds every series twice: a sum of the counters doubles.
  std::optional<double> doubled;
  WaitFor([&] { return (doubled = PrometheusSum()) == 6.0; }, kSlowStep);
  ASSERT_EQ(doubled, 6.0) << prometheus_->Log();
  ASSERT_EQ(prometheus_->Query("count by (replica) (lp_rollout_outcomes_total)").size(), 2u);
  // The nodes, read from the same store, are three.
  ASSERT_TRUE(BothSawReports(3, 2)) << Canary(0).dump() << Canary(1).dump();
  EXPECT_EQ(Canary(0)["auto_halt"]["failure_percent"], 66.67);
}

TEST_F(AutoHaltE2eTest, AHaltIsCarriedAcrossEveryReplicaByAPrometheusStartedAfterTheFailures) {
  files_.WriteComponent(kAks, ComponentFile(10, "", /*max_failures=*/3).dump());
  for (int n = 1; n <= 3; ++n) ASSERT_TRUE(Report(n % 2, n, pb::HOTFIX_OUTCOME_STAGE_FAILED).ok());
  ASSERT_TRUE(BothInState("auto-halted", kHaltWithin)) << Canary(0).dump() << Canary(1).dump();
  ASSERT_TRUE(BothSawReports(3, 3));

  // A new Prometheus where the old one was, with none of the old samples.
  const uint16_t port = prometheus_->port();
  prometheus_.reset();
  PrometheusOptions fresh = ScrapingBoth();
  fresh.port = port;
  prometheus_ = std::make_unique<PrometheusServer>(std::move(fresh));
  ASSERT_EQ(prometheus_->url(), prometheus_url_);
  // Every replica restarted, one at a time, once the new Prometheus has scraped the other.
  for (int i = 0; i < 2; ++i) {
    const std::string other = LoopbackAddress(metrics_ports_[1 - i]);
    std::optional<double> record;
    WaitFor(
        [&] {
          return (record = prometheus_->Scalar("count(lp_rollout_halt_record{instance=\"" + other +
                                               "\"})")) == 1.0;
        },
        kSlowStep);
    ASSERT_EQ(record, 1.0) << "replica " << 1 - i << " exports no halt record";
    StopReplica(i);
    StartReplica(i);
    bool halted = false;
    WaitFor([&] { return halted = Canary(i).value("state", "") == "auto-halted"; }, kSlowStep);
    ASSERT_TRUE(halted) << Canary(i).dump();
    EXPECT_THAT(Canary(i)["auto_halt"]["evidence"].get<std::string>(),
                HasSubstr("lp_rollout_halt_record"));
  }
  ASSERT_TRUE(BothSawReports(3, 3)) << Canary(0).dump() << Canary(1).dump();
  // The outcome counters' history is gone from this Prometheus once it has scraped the
  // restarted replicas (the old processes' last values are current until then); the halt is
  // not.
  WaitFor([&] { return !PrometheusSum().has_value(); }, kSlowStep);
  EXPECT_FALSE(PrometheusSum().has_value())
      << prometheus_->Query("lp_rollout_outcomes_total{rollout=\"canary\"}").dump();
  EXPECT_EQ(NodeBoots(400, false), kBaseVersion);
  // Until the file says halted, the alert's series stays 1 on every replica.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(MetricValue(HttpGet(metrics_ports_[i], "/metrics"), "lp_rollout_auto_halted",
                          {{"rollout", "canary"}}),
              1.0);
  }
}

TEST_F(AutoHaltE2eTest, AWindowLostWithEveryReplicaIsFlaggedAndTheFinishedRolloutStillServed) {
  // A since 30 s ago: the first evaluations cover it (within the minute's grace).
  const auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  const auto since = now - 30s;
  const std::string since_text = hotfix::service::FormatRolloutTime(since);
  files_.WriteComponent(kAks, ComponentFile(10, since_text).dump());
  // Reports count under the `since` the replica's file says when they arrive: wait for it.
  bool loaded = false;
  WaitFor([&] { return loaded = SinceOnBoth(since_text); }, kSlowStep);
  ASSERT_TRUE(loaded) << Canary(0).dump();
  ASSERT_TRUE(Report(0, 1, pb::HOTFIX_OUTCOME_INSTALLED).ok());
  ASSERT_TRUE(Report(1, 2, pb::HOTFIX_OUTCOME_INSTALLED).ok());
  ASSERT_TRUE(BothSawReports(2, 0)) << Canary(0).dump() << Canary(1).dump();
  EXPECT_FALSE(Canary(0)["auto_halt"]["truncated"].get<bool>()) << Canary(0).dump();

  // Every replica and Prometheus' data gone, past the grace (a minute and two intervals).
  StopReplica(0);
  StopReplica(1);
  const uint16_t port = prometheus_->port();
  prometheus_.reset();
  WaitFor([&] { return std::chrono::system_clock::now() > since + 65s; }, 120s);
  PrometheusOptions fresh = ScrapingBoth();
  fresh.port = port;
  prometheus_ = std::make_unique<PrometheusServer>(std::move(fresh));
  StartReplica(0);
  StartReplica(1);
  bool flagged = false;
  WaitFor(
      [&] {
        return flagged = Canary(0)["auto_halt"].value("truncated", false) &&
                         Canary(1)["auto_halt"].value("truncated", false);
      },
      kSlowStep);
  ASSERT_TRUE(flagged) << Canary(0).dump() << Canary(1).dump()
                       << prometheus_->Query("last_over_time(lp_rollout_evidence_from[1d])").dump()
                       << prometheus_->Query("lp_rollout_applied_total").dump();
  Json row = Canary(0);
  EXPECT_EQ(row["auto_halt"]["reports"], 0) << row.dump();
  EXPECT_GT(row["auto_halt"]["evidence_from"].get<std::string>(), since_text);
  EXPECT_EQ(MetricValue(HttpGet(metrics_ports_[0], "/metrics"), "lp_rollout_evidence_truncated",
                        {{"rollout", "canary"}}),
            1.0);
  // The finished rollout is still served.
  EXPECT_EQ(row["state"], "complete");
  EXPECT_EQ(NodeBoots(500, false), kCanaryVersion);
}

// The evidence read through nginx terminating TLS (a certificate of a CA the replicas are
// given) and refusing any request without the bearer token.
class PrometheusBehindTlsTest : public AutoHaltE2eTest {
 protected:
  void ConfigureEvidence() override {
    TestCa ca = TestCa::Create("prometheus-proxy-ca");
    PemPaths tls = WritePemFiles(dir_.path(), "proxy-tls", IssueLocalServerCert(ca));
    const std::string ca_file = WritePemFile(dir_.path(), "proxy-ca.pem", ca.cert_pem());
    StaticHttpServerOptions server;
    server.root = dir_.path();
    server.tls_cert = tls.cert;
    server.tls_key = tls.key;
    server.server_config =
        "location /api/ {\n"
        "  if ($http_authorization != \"Bearer s3cret-token\") { return 401; }\n"
        "  proxy_pass " +
        prometheus_->url() +
        ";\n"
        "}";
    proxy_server_ = std::make_unique<StaticHttpServer>(server);
    token_file_ = dir_.Write("token", "not-the-token\n");
    prometheus_url_ = "https://localhost:" + std::to_string(proxy_server_->port());
    extra_args_ = {"--prometheus-ca", ca_file, "--prometheus-bearer-token-file",
                   token_file_.string()};
  }
  std::unique_ptr<StaticHttpServer> proxy_server_;
  fs::path token_file_;
};

TEST_F(PrometheusBehindTlsTest, ReadsWithTheTokenItsFileHoldsNow) {
  // The wrong token: refused, so the canary is held, applied to no one.
  bool refused = false;
  WaitFor(
      [&] {
        Json row = Canary(0);
        return refused = !row.is_null() && row["auto_halt"]["signal"] == "unavailable" &&
                         row["auto_halt"]["error"].get<std::string>().find("HTTP 401") !=
                             std::string::npos;
      },
      kSlowStep);
  ASSERT_TRUE(refused) << Canary(0).dump();
  EXPECT_EQ(Canary(0)["percent"], 0);
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(replicas_[i]->Logged("not-the-token"));
  // The token file replaced as a token writer does (rename): the next request carries it.
  dir_.Write("token.new", "s3cret-token\n");
  fs::rename(dir_.File("token.new"), token_file_);
  for (int n = 1; n <= 4; ++n) {
    ASSERT_TRUE(
        Report(n % 2, n, n <= 3 ? pb::HOTFIX_OUTCOME_INSTALLED : pb::HOTFIX_OUTCOME_INSTALL_FAILED)
            .ok());
  }
  ASSERT_TRUE(BothSawReports(4, 1)) << Canary(0).dump() << Canary(1).dump();
  EXPECT_EQ(Canary(0)["state"], "complete");
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(replicas_[i]->Logged("s3cret-token"));
  // Through the proxy, each request with the token (401s before the token file changed).
  int with_token = 0, refused_requests = 0;
  for (const AccessLogEntry& e : proxy_server_->Requests()) {
    if (e.path.rfind("/api/v1/query?", 0) != 0) continue;
    ++(e.status == 200 ? with_token : refused_requests);
  }
  EXPECT_GT(with_token, 0);
  EXPECT_GT(refused_requests, 0);
}

}  // namespace
}  // namespace hotfix::testsupport
