// Staged rollouts through the real live-patching-service binary (docs/ROLLOUTS.md): many
// distinct nodes, each with its own attested document signed here, called over TLS by
// libgrpc++; the component file swapped as a ConfigMap update would; and the project's
// hotfix-agent staging what it is served through the HAProxy route.
//
// The bucket is recomputed here with OpenSSL's SHA-256 straight from the formula in
// docs/ROLLOUTS.md, not with the service's RolloutBucket, so the two are checked against
// each other.
#include <openssl/evp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "haproxy.h"
#include "service_fixture.h"
#include "tls_peer.h"

namespace hotfix::testsupport {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

constexpr char kBase[] = R"({"202604.01":"202604.01.3"})";
constexpr char kBaseServed[] = R"({"hotfixes":{"202604.01":"202604.01.3"}})";
constexpr char kRolloutServed[] = R"({"hotfixes":{"202604.01":"202604.01.4"}})";
constexpr char kSubscription[] = "8d10da13-8125-4ba9-a717-bf7490507b3d";
constexpr int kNodes = 300;

uint32_t BucketByFormula(const std::string& name, const std::string& key) {
  std::string input = name + ":" + key;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EXPECT_EQ(EVP_Digest(input.data(), input.size(), digest, &size, EVP_sha256(), nullptr), 1);
  uint64_t head = 0;
  for (int i = 0; i < 8; ++i) head = (head << 8) | digest[i];
  return static_cast<uint32_t>(head % 10000);
}

std::string VmId(int i) {
  char id[64];
  std::snprintf(id, sizeof id, "5e0c1a2b-0000-4000-8000-%012d", i);
  return id;
}

// RFC 3339, UTC, `offset` from now.
std::string At(std::chrono::seconds offset) {
  auto t = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now() + offset);
  time_t secs = std::chrono::system_clock::to_time_t(t);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

constexpr std::chrono::hours kDay{24};

// One rollout of 202604.01.4 named `name`; `extra` is merged into it.
std::string FileWith(const std::string& name, const Json& steps, const Json& extra = {}) {
  Json rollout = {{"name", name}, {"hotfixes", {{"202604.01", "202604.01.4"}}}, {"steps", steps}};
  if (extra.is_object()) rollout.update(extra);
  return Json({{"hotfixes", Json::parse(kBase)}, {"rollouts", {rollout}}}).dump(2);
}

class ServiceRolloutTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && lps_) ADD_FAILURE() << "service stderr (tail):\n" << Tail(lps_->Stderr());
  }
  static std::string Tail(const std::string& s) {
    return s.size() > 4000 ? s.substr(s.size() - 4000) : s;
  }

  void Start(const std::string& file) {
    files_.WriteComponent(kAksNodeControllerComponent, file);
    lps_ = std::make_unique<ServiceProcess>(files_.Args(kMetricsFlags));
    channel_ = lps_->Channel(files_);
    for (int i = 0; i < kNodes; ++i) {
      AttestedDocumentFields fields;
      fields.vm_id = VmId(i);
      fields.subscription_id = kSubscription;
      tokens_.push_back(files_.Token(fields));
    }
  }

  // The config each node is served, by node index.
  std::vector<std::string> ServeAll() {
    std::vector<std::string> served;
    for (const std::string& token : tokens_) {
      GrpcReply r = CallGetComponentConfig(channel_, kAksNodeControllerComponent, token);
      EXPECT_TRUE(r.status.ok()) << r.status.error_message();
      served.push_back(r.response.config());
    }
    return served;
  }

  // Nodes served the rollout's version.
  static std::set<int> Inside(const std::vector<std::string>& served) {
    std::set<int> in;
    for (size_t i = 0; i < served.size(); ++i) {
      EXPECT_TRUE(served[i] == kBaseServed || served[i] == kRolloutServed) << served[i];
      if (served[i] == kRolloutServed) in.insert(static_cast<int>(i));
    }
    return in;
  }

  static std::set<int> ExpectedInside(const std::string& name, uint32_t threshold) {
    std::set<int> in;
    for (int i = 0; i < kNodes; ++i) {
      if (BucketByFormula(name, VmId(i)) < threshold) in.insert(i);
    }
    return in;
  }

  // Swaps the file and waits until the service answers from the next generation.
  void Swap(const std::string& file) {
    const uint64_t before = Generation();
    files_.WriteComponent(kAksNodeControllerComponent, file);
    WaitFor([&] { return Generation() > before; }, std::chrono::seconds(15));
    ASSERT_GT(Generation(), before) << "the service did not reload the swapped file";
  }
  uint64_t Generation() {
    Json status = Json::parse(HttpGet(lps_->metrics_port(), "/rollouts"), nullptr, false);
    return status.is_object() ? status.value("generation", 0u) : 0u;
  }

  ServiceFiles files_;
  std::unique_ptr<ServiceProcess> lps_;
  std::shared_ptr<grpc::Channel> channel_;
  std::vector<std::string> tokens_;
};

TEST_F(ServiceRolloutTest, ServesTheBucketFunctionsSet) {
  Start(FileWith("anc-202604.01.4", Json::array({{{"at", At(-kDay)}, {"percent", 25}}})));
  std::set<int> in = Inside(ServeAll());
  const std::set<int> expected = ExpectedInside("anc-202604.01.4", 2500);
  // These 300 fixed vmIds put 25% of the buckets neither at none nor at all of them, so the
  // equality below tells inside from outside (the share is the unit tests' subject).
  ASSERT_GT(expected.size(), 0u);
  ASSERT_LT(expected.size(), 300u);
  EXPECT_EQ(in, expected);

  // What the node was served is in its access-log line, never the targeting.
  std::vector<Json> access = lps_->AccessLog();
  ASSERT_EQ(access.size(), static_cast<size_t>(kNodes));
  size_t with_rollout = 0;
  for (const Json& line : access) {
    EXPECT_EQ(line["generation"], 1);
    if (line["rollouts"] == Json::array({"anc-202604.01.4"})) {
      ++with_rollout;
      EXPECT_EQ(line["served"], kRolloutServed);
    } else {
      EXPECT_EQ(line["rollouts"], Json::array());
      EXPECT_EQ(line["served"], kBaseServed);
    }
  }
  EXPECT_EQ(with_rollout, in.size());
  std::string metrics = HttpGet(lps_->metrics_port(), "/metrics");
  EXPECT_EQ(MetricValue(metrics, "lp_rollout_applied_total",
                        {{"component", "aksNodeController"}, {"rollout", "anc-202604.01.4"}}),
            static_cast<double>(in.size()));
  EXPECT_EQ(MetricValue(metrics, "lp_rollout_ratio",
                        {{"component", "aksNodeController"}, {"rollout", "anc-202604.01.4"}}),
            0.25);
}

TEST_F(ServiceRolloutTest, WideningKeepsEveryEarlierNodeAndHaltAndHoldTakeEffectOnReload) {
  const std::string name = "anc-widen";
  Start(FileWith(name, Json::array({{{"at", At(-kDay)}, {"percent", 10}}})));
  std::set<int> at10 = Inside(ServeAll());
  EXPECT_EQ(at10, ExpectedInside(name, 1000));

  Swap(FileWith(name, Json::array({{{"at", At(-kDay)}, {"percent", 10}},
                                   {{"at", At(-kDay / 2)}, {"percent", 50}}})));
  std::set<int> at50 = Inside(ServeAll());
  EXPECT_EQ(at50, ExpectedInside(name, 5000));
  for (int node : at10) EXPECT_EQ(at50.count(node), 1u) << "node " << node << " left at 50%";
  EXPECT_GT(at50.size(), at10.size());

  // Hold before the 50% step: the ramp is frozen at 10%; the 10% nodes stay in.
  const std::string held = FileWith(
      name,
      Json::array({{{"at", At(-kDay)}, {"percent", 10}}, {{"at", At(-kDay / 2)}, {"percent", 50}}}),
      {{"hold_at", At(-kDay * 3 / 4)}});
  Swap(held);
  EXPECT_EQ(Inside(ServeAll()), at10);
  Json status = Json::parse(HttpGet(lps_->metrics_port(), "/rollouts"));
  // The file this replica serves, as sha256sum names it.
  EXPECT_EQ(status["files"]["aksNodeController"], FileDigest(held));
  ASSERT_EQ(status["components"]["aksNodeController"].size(), 1u);
  EXPECT_EQ(status["components"]["aksNodeController"][0]["state"], "held");
  EXPECT_EQ(status["components"]["aksNodeController"][0]["percent"], 10);

  // Halt: everyone back on the baseline at once.
  Swap(FileWith(name, Json::array({{{"at", At(-kDay)}, {"percent", 50}}}), {{"halted", true}}));
  EXPECT_EQ(Inside(ServeAll()), std::set<int>());
}

// The one-step halt, end to end: `live-patching-service rollout halt` on the folder the
// replica serves (a ConfigMap update does the same, a minute later). The replica's log says who,
// when and why, GET /rollouts shows the note, and no node gets the rollout; `rollout resume`
// brings the same nodes back, logged and noted as well.
TEST_F(ServiceRolloutTest, TheToolsHaltAndResumeAreLoggedAndShownWithWhoWhenAndWhy) {
  const std::string name = "anc-canary";
  Start(FileWith(name, Json::array({{{"at", At(-kDay)}, {"percent", 50}}})));
  const std::set<int> in = Inside(ServeAll());
  ASSERT_FALSE(in.empty());
  auto tool = [&](std::vector<std::string> args) {
    SpawnOptions spawn;
    spawn.argv = {BinDir() + "/live-patching-service", "rollout"};
    spawn.argv.insert(spawn.argv.end(), args.begin(), args.end());
    RunResult r = RunProcess(std::move(spawn), std::chrono::seconds(60));
    EXPECT_TRUE(r.status.success()) << r.stderr_text;
  };
  const std::string dir = files_.components_dir().string();
  const uint64_t before = Generation();
  tool({"halt", name, "--components-dir", dir, "--reason", "INC-7: nodes fail to join", "--by",
        "oncall@example"});
  WaitFor([&] { return Generation() > before; }, std::chrono::seconds(15));
  EXPECT_EQ(Inside(ServeAll()), std::set<int>());
  bool logged = false;
  for (const auto& l : lps_->LogLines()) {
    logged = logged || (l.value("msg", "") == "rollout halted by its file" &&
                        l.value("rollout", "") == name && l.value("by", "") == "oncall@example" &&
                        l.value("reason", "") == "INC-7: nodes fail to join");
  }
  EXPECT_TRUE(logged) << "the reload's log line names who and why";
  Json status = Json::parse(HttpGet(lps_->metrics_port(), "/rollouts"));
  const Json row = status["components"]["aksNodeController"][0];
  EXPECT_EQ(row["halted"], true);
  EXPECT_EQ(row["halt_note"]["by"], "oncall@example");
  EXPECT_EQ(row["halt_note"]["reason"], "INC-7: nodes fail to join");
  EXPECT_TRUE(row["resume_note"].is_null());

  const uint64_t halted = Generation();
  tool({"resume", name, "--components-dir", dir, "--reason", "fixed", "--by", "oncall@example"});
  WaitFor([&] { return Generation() > halted; }, std::chrono::seconds(15));
  EXPECT_EQ(Inside(ServeAll()), in) << "the same nodes come back";
  logged = false;
  for (const auto& l : lps_->LogLines()) {
    logged = logged || (l.value("msg", "") == "rollout no longer halted by its file" &&
                        l.value("reason", "") == "fixed");
  }
  EXPECT_TRUE(logged);
  status = Json::parse(HttpGet(lps_->metrics_port(), "/rollouts"));
  EXPECT_EQ(status["components"]["aksNodeController"][0]["resume_note"]["reason"], "fixed");
  EXPECT_EQ(MetricValue(HttpGet(lps_->metrics_port(), "/metrics"), "lp_rollout_halted",
                        {{"rollout", name}}),
            0.0);
}

TEST_F(ServiceRolloutTest, AnInvalidEditKeepsTheLastGoodFileAndNamesTheField) {
  const std::string name = "anc-typo";
  Start(FileWith(name, Json::array({{{"at", At(-kDay)}, {"percent", 100}}}),
                 {{"match", {{"subscriptions", {kSubscription}}}}}));
  EXPECT_EQ(Inside(ServeAll()).size(), static_cast<size_t>(kNodes));
  // A typo must never widen a rollout: the file is refused, the last good one kept.
  files_.WriteComponent(kAksNodeControllerComponent,
                        FileWith(name, Json::array({{{"at", At(-kDay)}, {"percent", 100}}}),
                                 {{"match", {{"subscription", {"other"}}}}}));
  WaitFor([&] { return lps_->Stderr().find("unknown key") != std::string::npos; },
          std::chrono::seconds(15));
  EXPECT_THAT(lps_->Stderr(),
              HasSubstr(R"(rollouts[0] \"anc-typo\": match: unknown key \"subscription\")"));
  EXPECT_EQ(Inside(ServeAll()).size(), static_cast<size_t>(kNodes));
  EXPECT_EQ(Generation(), 1u);
}

// A cluster-cohort rollout keyed on the apiserver host the node dialed: `:authority` with and
// without a port, case-insensitively; a whole cluster moves together.
TEST_F(ServiceRolloutTest, ClusterPatternsMatchTheAuthorityWithAndWithoutAPort) {
  // A certificate for the apiserver names, so that libgrpc++ sends them as :authority (with
  // a name override it would send the override).
  const std::string east = "myaks-dns-1.hcp.eastus.azmk8s.io";
  const std::string west = "myaks-dns-1.hcp.westus.azmk8s.io";
  PemPaths tls = WritePemFiles(files_.dir().path(), "cluster-names",
                               IssueLocalServerCert(files_.tls_ca(), {east, west}));
  std::vector<std::string> args = files_.Args();
  *(std::find(args.begin(), args.end(), "--tls-cert") + 1) = tls.cert.string();
  *(std::find(args.begin(), args.end(), "--tls-key") + 1) = tls.key.string();
  files_.WriteComponent(
      kAksNodeControllerComponent,
      FileWith("anc-eastus", Json::array({{{"at", At(-kDay)}, {"percent", 100}}}),
               {{"match", {{"clusters", {"*.HCP.eastus.azmk8s.io"}}}}, {"cohort", "cluster"}}));
  lps_ = std::make_unique<ServiceProcess>(args);
  const std::string token = files_.Token();
  auto call_with_authority = [&](const std::string& authority) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = files_.tls_ca().cert_pem();
    grpc::ChannelArguments channel_args;
    channel_args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, authority);
    auto channel = grpc::CreateCustomChannel(LoopbackAddress(lps_->port()),
                                             grpc::SslCredentials(options), channel_args);
    GrpcReply r = CallGetComponentConfig(channel, kAksNodeControllerComponent, token);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    return r.response.config();
  };
  EXPECT_EQ(call_with_authority(east), kRolloutServed);
  EXPECT_EQ(call_with_authority("MyAks-DNS-1.hcp.EASTUS.azmk8s.io:443"), kRolloutServed);
  EXPECT_EQ(call_with_authority(west + ":443"), kBaseServed);
  std::vector<Json> access = lps_->AccessLog();
  ASSERT_EQ(access.size(), 3u);
  EXPECT_EQ(access[1]["cluster"], east);  // lower-cased, port removed
}

// --insecure-accept-any-token has no vmId: a node-cohort rollout applies to nobody, a
// cluster-cohort one still by its cluster (docs/ROLLOUTS.md, "Development mode").
TEST_F(ServiceRolloutTest, WithoutAVerifiedIdentityNodeCohortRolloutsNeverApply) {
  Json node = {{"name", "by-node"},
               {"hotfixes", {{"202604.01", "202604.01.4"}}},
               {"steps", {{{"at", At(-kDay)}, {"percent", 100}}}}};
  Json cluster = {{"name", "by-cluster"},
                  {"hotfixes", {{"202605.30", "202605.30.2"}}},
                  {"cohort", "cluster"},
                  {"steps", {{{"at", At(-kDay)}, {"percent", 100}}}}};
  files_.WriteComponent(
      kAksNodeControllerComponent,
      Json({{"hotfixes", Json::parse(kBase)}, {"rollouts", {node, cluster}}}).dump());
  std::vector<std::string> args = files_.Args();
  // The insecure mode excludes --attestation-roots.
  auto roots = std::find(args.begin(), args.end(), "--attestation-roots");
  args.erase(roots, roots + 2);
  args.push_back("--insecure-accept-any-token");
  lps_ = std::make_unique<ServiceProcess>(args);
  GrpcReply r = CallGetComponentConfig(lps_->Channel(files_), kAksNodeControllerComponent,
                                       std::string("anything"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.response.config(),
            R"({"hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.2"}})");
}

// ---- hotfix-agent check-hotfix through HAProxy: one node inside, one outside ----------------

TEST_F(ServiceRolloutTest, CheckHotfixStagesTheRolloutVersionInsideAndTheBaselineOutside) {
  const std::string inside = VmId(1), outside = VmId(2);
  files_.WriteComponent(
      kAksNodeControllerComponent,
      FileWith("anc-canary", Json::array({{{"at", At(-kDay)}, {"percent", 100}}}),
               {{"match", {{"vm_ids", {inside}}, {"clusters", {"*.azmk8s.io"}}}}}));
  lps_ = std::make_unique<ServiceProcess>(files_.Args());
  TlsPeer apiserver(SilentApiserverOptions(files_.tls_ca(), kApiserverFqdn));
  Haproxy proxy(AlpnRouteOptions(lps_->port(), apiserver.port()));

  auto run_node = [&](const std::string& vm_id) {
    NodeAgent node(files_.tls_ca());
    ImdsStandinOptions options;
    options.signer = files_.signer();
    options.vm_id = vm_id;
    ImdsStandin imds(std::move(options));
    AgentRun run = node.CheckHotfix(imds.document_url(), proxy.frontend_address());
    EXPECT_TRUE(run.result.status.success()) << run.result.stderr_text;
    EXPECT_THAT(run.Message(), HasSubstr("check-hotfix outcome=lpsRead")) << proxy.Log();
    return Json::parse(node.dir().Read("hotfix.json"), nullptr, false);
  };
  EXPECT_EQ(run_node(inside)["hotfixes"], Json::parse(R"({"202604.01":"202604.01.4"})"));
  EXPECT_EQ(run_node(outside)["hotfixes"], Json::parse(kBase));
  // The rollout's targeting never reached a node.
  std::vector<Json> access = lps_->AccessLog();
  ASSERT_EQ(access.size(), 2u);
  EXPECT_EQ(access[0]["rollouts"], Json::array({"anc-canary"}));
  EXPECT_EQ(access[1]["rollouts"], Json::array());
}

}  // namespace
}  // namespace hotfix::testsupport
