// The operator's tools for staged rollouts (src/service/control/: validate.h, plan.h, fleet.h,
// simulate.h; the duration parser in rollout/rollout.h): plan's verdicts
// and enters_at on a real folder, the node file and duration parsers, simulate's counts against
// buckets computed here with RolloutBucket, and --against finding exactly the nodes a rename
// moves. Every expected number is derived in the test from the bucket function and the rules
// of docs/ROLLOUTS.md, never copied from a run.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "rollout_example.h"
#include "service/control/fleet.h"
#include "service/control/plan.h"
#include "service/control/simulate.h"
#include "service/control/validate.h"
#include "service/rollout/rollout.h"
#include "service/store/component_store.h"
#include "temp_dir.h"

namespace hotfix::service {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testsupport::TempDir;

constexpr char kAks[] = "aksNodeController";
constexpr char kSub[] = "8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8";
constexpr char kOtherSub[] = "11111111-2222-3333-4444-555555555555";
constexpr char kEast[] = "myaks-dns-1a2b3c4d.hcp.eastus.azmk8s.io";
constexpr char kWest[] = "other-dns-99.hcp.westus2.azmk8s.io";
constexpr char kRollout[] = "anc-202604.01.4";

std::string VmId(int i) {
  char id[64];
  std::snprintf(id, sizeof id, "5e0c1a2b-0000-4000-8000-%012d", i);
  return id;
}

// The first VmId(i) whose bucket in `rollout` satisfies pred.
template <typename Pred>
std::string FindVmId(const std::string& rollout, Pred pred) {
  for (int i = 0; i < 1000000; ++i) {
    if (pred(RolloutBucket(rollout, VmId(i)))) return VmId(i);
  }
  ADD_FAILURE() << "no vmId found";
  return "";
}

std::shared_ptr<const ComponentConfig> Load(const TempDir& dir, const std::string& component) {
  auto config = LoadComponentFromFolder(dir.path().string(), component);
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok() ? *config : std::make_shared<const ComponentConfig>();
}

json Plan(const ComponentConfig& config, const std::string& vm_id, const std::string& sub,
          const std::string& cluster, std::string_view at) {
  auto text = PlanJson(config, kAks, MakeRolloutNode(vm_id, sub, cluster), T(at));
  EXPECT_TRUE(text.ok()) << text.status().message();
  return text.ok() ? json::parse(*text) : json();
}

// ---- plan -----------------------------------------------------------------------------------

TEST(RolloutToolsTest, PlanSaysWhenANodeInsideComesInAndWhatItIsServed) {
  TempDir dir("rollout-tools");
  dir.Write("aksNodeController.json", ExampleFile(kRollout).dump(2));
  auto config = Load(dir, kAks);
  // Bucket under 100: in from the first step (1%).
  const std::string early = FindVmId(kRollout, [](uint32_t b) { return b < 100; });
  // Bucket from 1050 up: only in at 100%.
  const std::string late = FindVmId(kRollout, [](uint32_t b) { return b >= 1050; });
  // Between: in at 10.5%.
  const std::string middle = FindVmId(kRollout, [](uint32_t b) { return b >= 100 && b < 1050; });

  json plan = Plan(*config, early, kSub, std::string(kEast) + ":443", "2026-12-04T01:00:00Z");
  EXPECT_EQ(plan["component"], kAks);
  EXPECT_EQ(plan["at"], "2026-12-04T01:00:00Z");
  EXPECT_EQ(plan["node"]["cluster"], kEast);  // the port removed, as the service does
  EXPECT_EQ(plan["node"]["vm_id"], early);
  EXPECT_EQ(plan["node"]["subscription"], kSub);
  EXPECT_EQ(plan["served"], json::parse(R"({"hotfixes":{"202604.01":"202604.01.4"}})"));
  ASSERT_EQ(plan["rollouts"].size(), 1u);
  json r = plan["rollouts"][0];
  EXPECT_EQ(r["name"], kRollout);
  EXPECT_EQ(r["applies"], true);
  EXPECT_TRUE(r["why"].is_null());
  EXPECT_EQ(r["bucket"], RolloutBucket(kRollout, early));
  EXPECT_EQ(r["threshold"], 100);
  EXPECT_EQ(r["percent"], 1);
  EXPECT_EQ(r["enters_at"], "2026-12-04T00:00:00Z");
  EXPECT_EQ(r["state"], "ramping");
  EXPECT_EQ(r["hotfixes"], json::parse(R"({"202604.01":"202604.01.4"})"));

  // The same node before the first step: not yet, and when.
  plan = Plan(*config, early, kSub, kEast, "2026-12-03T23:59:59Z");
  r = plan["rollouts"][0];
  EXPECT_EQ(r["applies"], false);
  const uint32_t bucket = RolloutBucket(kRollout, early);
  EXPECT_EQ(r["why"], "bucket " + std::to_string(bucket) + " not under threshold 0 (0%)");
  EXPECT_EQ(r["enters_at"], "2026-12-04T00:00:00Z");
  EXPECT_EQ(r["state"], "scheduled");
  EXPECT_EQ(plan["served"], json::parse(R"({"hotfixes":{"202604.01":"202604.01.3"}})"));

  // A middle bucket at 07:00 is in since the 10.5% step; a late one waits for the 5th.
  plan = Plan(*config, middle, kSub, kEast, "2026-12-04T07:00:00Z");
  EXPECT_EQ(plan["rollouts"][0]["applies"], true);
  EXPECT_EQ(plan["rollouts"][0]["enters_at"], "2026-12-04T06:00:00Z");
  EXPECT_EQ(plan["rollouts"][0]["percent"], 10.5);
  plan = Plan(*config, late, kSub, kEast, "2026-12-04T07:00:00Z");
  r = plan["rollouts"][0];
  EXPECT_EQ(r["applies"], false);
  EXPECT_EQ(r["why"], "bucket " + std::to_string(RolloutBucket(kRollout, late)) +
                          " not under threshold 1050 (10.5%)");
  EXPECT_EQ(r["enters_at"], "2026-12-05T00:00:00Z");
  plan = Plan(*config, late, kSub, kEast, "2026-12-05T00:00:00Z");
  EXPECT_EQ(plan["rollouts"][0]["applies"], true);
  EXPECT_EQ(plan["rollouts"][0]["state"], "complete");
}

TEST(RolloutToolsTest, PlanAndSimulateSayWhichRolloutsCanHaltThemselves) {
  TempDir dir("rollout-tools");
  json file = ExampleFile(kRollout);
  file["rollouts"][0]["auto_halt"] = {{"max_failure_percent", 2.5}, {"min_reports", 50}};
  json plain = ExampleRollout("plain");
  file["rollouts"].push_back(plain);
  dir.Write("aksNodeController.json", file.dump(2));
  auto config = Load(dir, kAks);
  json plan = Plan(*config, "vm", kSub, kEast, "2026-12-04T01:00:00Z");
  const json& halting = plan["rollouts"][0]["auto_halt"];
  EXPECT_EQ(halting["max_failure_percent"], 2.5);
  EXPECT_EQ(halting["min_reports"], 50);
  EXPECT_TRUE(halting["max_failures"].is_null());
  EXPECT_EQ(halting["since"], "2026-12-04T00:00:00Z");  // the first step
  EXPECT_THAT(halting["note"].get<std::string>(), HasSubstr("GET /rollouts"));
  EXPECT_TRUE(plan["rollouts"][1]["auto_halt"].is_null());
  EXPECT_EQ(AutoHaltNote(*config), "can halt themselves on their nodes' reports (auto_halt): " +
                                       std::string(kRollout) + "; this table assumes none does\n");
  file["rollouts"][0].erase("auto_halt");
  dir.Write("aksNodeController.json", file.dump(2));
  EXPECT_EQ(AutoHaltNote(*Load(dir, kAks)), "");
}

TEST(RolloutToolsTest, PlanAndSimulateShowTheGates) {
  TempDir dir("rollout-tools");
  json file = ExampleFile(kRollout);
  json& steps = file["rollouts"][0]["steps"];
  ASSERT_GE(steps.size(), 2u);
  steps[1]["gate"] = {{"min_nodes", 50}, {"max_failure_percent", 2}, {"bake", "1h"}};
  dir.Write("aksNodeController.json", file.dump(2));
  auto config = Load(dir, kAks);
  json plan = Plan(*config, "vm", kSub, kEast, "2026-12-04T01:00:00Z");
  const json& gates = plan["rollouts"][0]["gates"];
  ASSERT_EQ(gates.size(), 1u);
  EXPECT_EQ(gates[0]["step"], 1);
  EXPECT_EQ(gates[0]["min_nodes"], 50);
  EXPECT_EQ(gates[0]["max_failure_percent"], 2);
  EXPECT_EQ(gates[0]["bake"], "1h");
  EXPECT_THAT(gates[0]["note"].get<std::string>(), HasSubstr("GET /rollouts"));
  EXPECT_THAT(AutoHaltNote(*config),
              HasSubstr("wait on their nodes' evidence (gate): " + std::string(kRollout) +
                        " step 1 (at " + steps[1]["at"].get<std::string>() + ")"));
}

TEST(RolloutToolsTest, PlanNamesTheMatchFieldThatFailed) {
  TempDir dir("rollout-tools");
  json file = ExampleFile(kRollout);
  file["rollouts"][0]["match"]["exclude_subscriptions"] = {kOtherSub};
  file["rollouts"][0]["match"]["subscriptions"] = {kSub, kOtherSub};
  dir.Write("aksNodeController.json", file.dump());
  auto config = Load(dir, kAks);
  const std::string vm = VmId(1);
  struct Case {
    std::string sub, cluster;
    RolloutVerdict verdict;
  };
  for (const Case& c :
       {Case{"aaaaaaaa-0000-0000-0000-000000000000", kEast, RolloutVerdict::kSubscriptionNotListed},
        Case{kOtherSub, kEast, RolloutVerdict::kSubscriptionExcluded},
        Case{kSub, kWest, RolloutVerdict::kClusterNotMatched}}) {
    json plan = Plan(*config, vm, c.sub, c.cluster, "2026-12-06T00:00:00Z");
    json r = plan["rollouts"][0];
    EXPECT_EQ(r["applies"], false);
    EXPECT_EQ(r["why"], RolloutVerdictName(c.verdict));
    EXPECT_TRUE(r["bucket"].is_null());
    EXPECT_TRUE(r["enters_at"].is_null());  // never, under the file as it stands
    EXPECT_EQ(plan["served"], json::parse(R"({"hotfixes":{"202604.01":"202604.01.3"}})"));
  }
  // Upper-case input is compared as the service compares it.
  json plan = Plan(*config, vm, "8ECADFC9-D1A3-4EA4-B844-0D9F87E4D7C8",
                   "MYAKS-dns-1a2b3c4d.hcp.EASTUS.azmk8s.io:443", "2026-12-06T00:00:00Z");
  EXPECT_EQ(plan["rollouts"][0]["applies"], true);
}

TEST(RolloutToolsTest, PlanShowsHaltHoldOverlayAndClusterCohort) {
  TempDir dir("rollout-tools");
  json file = ExampleFile(kRollout);
  json halted = ExampleFile("anc-halted")["rollouts"][0];
  halted["halted"] = true;
  json held = ExampleFile("anc-held")["rollouts"][0];
  held["hold_at"] = "2026-12-04T03:00:00Z";  // frozen at 1%
  held["hotfixes"] = {{"202605.01", "202605.01.2"}};
  json cluster = ExampleFile("anc-cluster")["rollouts"][0];
  cluster["cohort"] = "cluster";
  cluster["hotfixes"] = {{"202604.01", "202604.01.5"}};  // later in the list: wins the key
  file["rollouts"] = {file["rollouts"][0], halted, held, cluster};
  dir.Write("aksNodeController.json", file.dump());
  auto config = Load(dir, kAks);

  // A node with a held bucket of 100 or more never comes in while held.
  const std::string vm = FindVmId("anc-held", [](uint32_t b) { return b >= 100; });
  json plan = Plan(*config, vm, kSub, kEast, "2026-12-06T00:00:00Z");
  const json& rollouts = plan["rollouts"];
  ASSERT_EQ(rollouts.size(), 4u);
  EXPECT_EQ(rollouts[1]["why"], "halted");
  EXPECT_EQ(rollouts[1]["threshold"], 0);
  EXPECT_EQ(rollouts[1]["state"], "halted");
  EXPECT_TRUE(rollouts[1]["enters_at"].is_null());
  EXPECT_EQ(rollouts[2]["applies"], false);
  EXPECT_EQ(rollouts[2]["threshold"], 100);
  EXPECT_EQ(rollouts[2]["state"], "held");
  EXPECT_TRUE(rollouts[2]["enters_at"].is_null());
  EXPECT_EQ(rollouts[3]["cohort"], "cluster");
  EXPECT_EQ(rollouts[3]["bucket"], RolloutBucket("anc-cluster", kEast));
  // At 100% both the first and the cluster rollout apply: the later one wins the key.
  EXPECT_EQ(rollouts[0]["applies"], true);
  EXPECT_EQ(rollouts[3]["applies"], true);
  EXPECT_EQ(plan["served"], json::parse(R"({"hotfixes":{"202604.01":"202604.01.5"}})"));

  // The served config is exactly what the service serves.
  std::vector<size_t> applied;
  const RolloutNode node = MakeRolloutNode(vm, kSub, kEast);
  EXPECT_EQ(plan["served"],
            json::parse(config->ServedTo(node, T("2026-12-06T00:00:00Z"), &applied)));
  EXPECT_THAT(applied, ElementsAre(0u, 3u));
}

TEST(RolloutToolsTest, PlanOfAFileWithoutRolloutsServesTheFile) {
  TempDir dir("rollout-tools");
  const std::string text = R"({"hotfixes": {"202604.01": "202604.01.3"}})";
  dir.Write("aksNodeController.json", text);
  dir.Write("other.json", R"({"anything": [1, 2]})");
  auto plan = Plan(*Load(dir, kAks), VmId(1), kSub, kEast, "2026-12-06T00:00:00Z");
  EXPECT_EQ(plan["served"], json::parse(text));
  EXPECT_EQ(plan["rollouts"], json::array());
  auto other = PlanJson(*Load(dir, "other"), "other", MakeRolloutNode(VmId(1), kSub, kEast),
                        T("2026-12-06T00:00:00Z"));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(json::parse(*other)["served"], json::parse(R"({"anything": [1, 2]})"));
}

TEST(RolloutToolsTest, LoadingAComponentReportsRefusedAndMissingFiles) {
  TempDir dir("rollout-tools");
  json file = ExampleFile(kRollout);
  file["rollouts"][0]["steps"][1]["at"] = "2026-12-03T06:00:00Z";  // before the step before it
  const std::string text = file.dump();
  dir.Write("aksNodeController.json", text);
  auto config = LoadComponentFromFolder(dir.path().string(), kAks);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), Status::Code::kInvalidArgument);
  // The loader's own message, as the service logs it.
  EXPECT_EQ(config.status().message(), ValidateComponentConfig(kAks, text).message());
  EXPECT_THAT(config.status().message(),
              StartsWith("aksNodeController.json: rollouts[0] \"anc-202604.01.4\": steps[1].at"));

  auto missing = LoadComponentFromFolder(dir.path().string(), "nothere");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().IsNotFound());
  EXPECT_THAT(missing.status().message(), HasSubstr("nothere.json"));
  EXPECT_FALSE(LoadComponentFromFolder(dir.path().string(), "../etc/passwd").ok());
  EXPECT_FALSE(LoadComponentFromFolder(dir.File("nope").string(), kAks).ok());
}

// ---- validate -------------------------------------------------------------------------------

TEST(RolloutToolsTest, ValidateListsOneLinePerRefusedFile) {
  TempDir dir("rollout-tools");
  dir.Write("aksNodeController.json", ExampleFile(kRollout).dump());
  dir.Write("other.json", "{}");
  dir.Write("notes.txt", "not a component");
  auto report = ValidateFolder(dir.path().string());
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->passed());
  EXPECT_EQ(report->Summary(), "2 files ok, 0 refused");

  json typo = ExampleFile(kRollout);
  typo["rollouts"][0]["match"]["subscription"] = {kSub};  // a typo must never widen
  const std::string typo_text = typo.dump();
  dir.Write("aksNodeController.json", typo_text);
  dir.Write("broken.json", "{\n\"a\":");
  dir.Write("9bad.json", "{}");
  report = ValidateFolder(dir.path().string());
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->passed());
  EXPECT_EQ(report->ok, 1u);
  EXPECT_EQ(report->Summary(), "1 file ok, 3 refused");
  ASSERT_EQ(report->problems.size(), 3u);
  // Sorted by file name; each one line, starting with the file.
  EXPECT_THAT(report->problems[0], StartsWith("9bad.json: "));
  EXPECT_EQ(report->problems[1], ValidateComponentConfig(kAks, typo_text).message());
  EXPECT_THAT(report->problems[1], HasSubstr("\"anc-202604.01.4\": match: unknown key"));
  EXPECT_THAT(report->problems[2], StartsWith("broken.json: "));
  for (const std::string& p : report->problems) EXPECT_EQ(p.find('\n'), std::string::npos);

  EXPECT_FALSE(ValidateFolder(dir.File("nope").string()).ok());
}

// ---- parsers --------------------------------------------------------------------------------

TEST(RolloutToolsTest, DurationsParse) {
  using std::chrono::seconds;
  auto ok = [](std::string_view text) {
    auto d = ParseRolloutDuration(text);
    EXPECT_TRUE(d.ok()) << text << ": " << d.status().message();
    return d.ok() ? d->count() : -1;
  };
  EXPECT_EQ(ok("90s"), 90);
  EXPECT_EQ(ok("30m"), 30 * 60);
  EXPECT_EQ(ok("6h"), 6 * 3600);
  EXPECT_EQ(ok("1d"), 86400);
  EXPECT_EQ(ok("1h30m"), 5400);
  EXPECT_EQ(ok("3650d"), 3650LL * 86400);
  for (std::string_view bad : {"", "5", "m", "5x", "0s", "0h0m", "-5m", "1.5h", "5 m", " 5m", "5M",
                               "3651d", "9999999999s", "1h30"}) {
    auto d = ParseRolloutDuration(bad);
    EXPECT_FALSE(d.ok()) << "\"" << bad << "\" parsed";
    if (!d.ok()) {
      EXPECT_EQ(d.status().code(), Status::Code::kInvalidArgument);
    }
  }
}

TEST(RolloutToolsTest, NodeFilesParse) {
  auto list = ParseNodeList(
      "# vmId,subscriptionId,clusterHost\n"
      "\n"
      "5E0C1A2B-0000-4000-8000-000000000001, " +
      std::string(kSub) + " ,MYAKS.hcp.eastus.azmk8s.io:443\r\n" +
      "   # indented comment\n"
      "5e0c1a2b-0000-4000-8000-000000000002,s2,c2.example\n"
      "5e0c1a2b-0000-4000-8000-000000000001," +
      kSub + ",myaks.hcp.eastus.azmk8s.io\n");  // the first node again, as evaluated
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->nodes.size(), 2u);
  EXPECT_EQ(list->duplicates, 1u);
  EXPECT_EQ(list->nodes[0].vm_id, "5e0c1a2b-0000-4000-8000-000000000001");
  EXPECT_EQ(list->nodes[0].subscription, kSub);
  EXPECT_EQ(list->nodes[0].cluster, "myaks.hcp.eastus.azmk8s.io");
  EXPECT_EQ(list->nodes[1].cluster, "c2.example");
  // No trailing newline is fine.
  EXPECT_EQ(ParseNodeList("a,b,c").value().nodes.size(), 1u);
  EXPECT_TRUE(ParseNodeList("").value().nodes.empty());

  struct Bad {
    std::string text;
    std::string line;
    std::string why;
  };
  for (const Bad& bad : {
           Bad{"a,b,c\n\na,b\n", "line 3: ", "found 2 fields"},
           Bad{"# x\na,b,c,d\n", "line 2: ", "found 4 fields"},
           Bad{"just-a-vm-id\n", "line 1: ", "found 1 field"},
           Bad{"a,b,c\n,b,c\n", "line 2: ", "vmId is empty"},
           Bad{"a,,c\n", "line 1: ", "subscriptionId is empty"},
           Bad{"a,b,\n", "line 1: ", "clusterHost is empty"},
           Bad{"a b,s,c\n", "line 1: ", "vmId contains a space"},
           Bad{"a,s,c\x01\n", "line 1: ", "clusterHost contains a space or a control"},
           Bad{"a,s," + std::string(300, 'h') + "\n", "line 1: ", "longer than"},
           Bad{"a,s,:443\n", "line 1: ", "has no host"},
       }) {
    auto parsed = ParseNodeList(bad.text);
    ASSERT_FALSE(parsed.ok()) << bad.text;
    EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), StartsWith(bad.line)) << bad.text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(bad.why)) << bad.text;
  }
}

TEST(RolloutToolsTest, NodeFilesAreReadFromDiskAndAMissingOneIsNotAUsageError) {
  TempDir dir("rollout-tools");
  dir.Write("nodes.csv", "a,b,c\nd,e,f\n");
  auto list = ReadNodeFile(dir.File("nodes.csv").string());
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(list->nodes.size(), 2u);
  dir.Write("bad.csv", "a,b,c\nd,e\n");
  auto bad = ReadNodeFile(dir.File("bad.csv").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), StartsWith("line 2: "));
  auto missing = ReadNodeFile(dir.File("missing.csv").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().code(), Status::Code::kInvalidArgument);
}

TEST(RolloutToolsTest, RandomFleetsAreSeededGuidShapedAndCapped) {
  RandomFleetOptions options;
  options.count = 500;
  options.seed = 42;
  auto a = RandomFleet(options);
  auto b = RandomFleet(options);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 500u);
  const std::regex guid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  std::set<std::string> vm_ids, subscriptions, clusters;
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].vm_id, (*b)[i].vm_id);
    EXPECT_EQ((*a)[i].subscription, (*b)[i].subscription);
    EXPECT_EQ((*a)[i].cluster, (*b)[i].cluster);
    EXPECT_TRUE(std::regex_match((*a)[i].vm_id, guid)) << (*a)[i].vm_id;
    EXPECT_TRUE(std::regex_match((*a)[i].subscription, guid)) << (*a)[i].subscription;
    vm_ids.insert((*a)[i].vm_id);
    subscriptions.insert((*a)[i].subscription);
    clusters.insert((*a)[i].cluster);
  }
  EXPECT_EQ(vm_ids.size(), 500u);
  EXPECT_EQ(subscriptions.size(), 5u);  // a handful, each drawn at 500 nodes
  EXPECT_EQ(clusters.size(), 8u);
  for (const std::string& c : clusters) EXPECT_THAT(c, HasSubstr(".azmk8s.io"));

  options.seed = 43;
  auto c = RandomFleet(options);
  ASSERT_TRUE(c.ok());
  EXPECT_NE((*c)[0].vm_id, (*a)[0].vm_id);

  options.subscriptions = {"SUB-A", "sub-b"};
  options.clusters = {"x.hcp.eastus.azmk8s.io:443"};
  auto d = RandomFleet(options);
  ASSERT_TRUE(d.ok());
  for (const RolloutNode& n : *d) {
    EXPECT_TRUE(n.subscription == "sub-a" || n.subscription == "sub-b") << n.subscription;
    EXPECT_EQ(n.cluster, "x.hcp.eastus.azmk8s.io");
  }

  options.count = 0;
  EXPECT_FALSE(RandomFleet(options).ok());
  options.count = kMaxFleetNodes + 1;
  EXPECT_FALSE(RandomFleet(options).ok());
}

TEST(RolloutToolsTest, SimulationTimesIncludeBothEndsAndAreCapped) {
  auto times =
      SimulationTimes(T("2026-12-04T00:00:00Z"), T("2026-12-05T00:00:00Z"), std::chrono::hours(6));
  ASSERT_TRUE(times.ok());
  ASSERT_EQ(times->size(), 5u);
  EXPECT_EQ(times->front(), T("2026-12-04T00:00:00Z"));
  EXPECT_EQ(times->back(), T("2026-12-05T00:00:00Z"));
  // An end not on the grid is not a row.
  times =
      SimulationTimes(T("2026-12-04T00:00:00Z"), T("2026-12-04T10:00:00Z"), std::chrono::hours(6));
  ASSERT_TRUE(times.ok());
  EXPECT_EQ(times->size(), 2u);
  EXPECT_FALSE(
      SimulationTimes(T("2026-12-05T00:00:00Z"), T("2026-12-04T00:00:00Z"), std::chrono::hours(1))
          .ok());
  const RolloutTime from = T("2026-01-01T00:00:00Z");
  EXPECT_EQ(SimulationTimes(from, from + std::chrono::minutes(kMaxSimulateTimes - 1),
                            std::chrono::minutes(1))
                .value()
                .size(),
            kMaxSimulateTimes);
  auto too_many = SimulationTimes(from, from + std::chrono::minutes(kMaxSimulateTimes),
                                  std::chrono::minutes(1));
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(too_many.status().message(), HasSubstr("more than 10000"));
}

// ---- simulate -------------------------------------------------------------------------------

// 400 nodes: 150 in east US clusters of kSub, 100 in east US of another subscription, 150 in
// west US of kSub.
std::vector<RolloutNode> SmallFleet() {
  std::vector<RolloutNode> fleet;
  for (int i = 0; i < 400; ++i) {
    const char* sub = (i >= 150 && i < 250) ? kOtherSub : kSub;
    const std::string cluster =
        i < 250 ? "c" + std::to_string(i % 7) + ".hcp.eastus.azmk8s.io:443" : kWest;
    fleet.push_back(MakeRolloutNode(VmId(i), sub, cluster));
  }
  return fleet;
}

// Nodes of SmallFleet the example rollout (named `name`) reaches at `threshold`, computed from
// the match rules and the bucket function directly.
uint64_t ExpectedIn(const std::vector<RolloutNode>& fleet, const std::string& name,
                    uint32_t threshold) {
  uint64_t in = 0;
  for (const RolloutNode& n : fleet) {
    const bool matched = n.subscription == kSub && n.cluster.ends_with(".hcp.eastus.azmk8s.io");
    if (matched && RolloutBucket(name, n.vm_id) < threshold) ++in;
  }
  return in;
}

TEST(RolloutToolsTest, SimulateCountsMatchTheBucketFunction) {
  TempDir dir("rollout-tools");
  dir.Write("aksNodeController.json", ExampleFile(kRollout).dump());
  auto config = Load(dir, kAks);
  const auto fleet = SmallFleet();
  auto times =
      SimulationTimes(T("2026-12-03T18:00:00Z"), T("2026-12-05T00:00:00Z"), std::chrono::hours(6));
  ASSERT_TRUE(times.ok());
  auto table = Simulate(*config, fleet, *times);
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_THAT(table->columns, ElementsAre("202604.01.3", "202604.01.4"));
  EXPECT_EQ(table->nodes, 400u);
  ASSERT_EQ(table->counts.size(), 6u);
  // Thresholds at 18:00 (before), 00:00, 06:00, 12:00, 18:00 and the 5th 00:00.
  const uint32_t thresholds[] = {0, 100, 1050, 1050, 1050, 10000};
  for (size_t t = 0; t < 6; ++t) {
    const uint64_t in = ExpectedIn(fleet, kRollout, thresholds[t]);
    EXPECT_EQ(table->counts[t][1], in) << FormatRolloutTime((*times)[t]);
    EXPECT_EQ(table->counts[t][0] + table->counts[t][1], 400u);
  }
  // Exact: at 100% every matched node (the 150 of kSub in east US) and no other.
  EXPECT_EQ(table->counts[5][1], 150u);
  EXPECT_EQ(table->counts[0][1], 0u);

  // The same counts straight from ServedTo, node by node: the memoised evaluation agrees
  // with the service's.
  for (size_t t = 0; t < times->size(); ++t) {
    std::map<std::string, uint64_t> served;
    for (const RolloutNode& n : fleet) ++served[config->ServedTo(n, (*times)[t], nullptr)];
    EXPECT_EQ(served[R"({"hotfixes":{"202604.01":"202604.01.4"}})"], table->counts[t][1]);
    EXPECT_EQ(served[R"({"hotfixes":{"202604.01":"202604.01.3"}})"], table->counts[t][0]);
  }

  const std::string text = FormatSimulateTable(*table);
  EXPECT_THAT(text, StartsWith("at\t202604.01.3\t202604.01.4\n2026-12-03T18:00:00Z\t400\t0\n"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 7);
}

TEST(RolloutToolsTest, SimulateShowsBasesSomeNodesLackAndHaltedRollouts) {
  TempDir dir("rollout-tools");
  json file = ExampleFile(kRollout);
  json new_base = ExampleFile("new-base")["rollouts"][0];
  new_base["hotfixes"] = {{"202605.01", "202605.01.10"}};
  new_base["match"] = json::object();
  new_base["steps"] = {{{"at", "2026-12-04T00:00:00Z"}, {"percent", 50}}};
  json patch9 = new_base;
  patch9["name"] = "patch9";
  patch9["hotfixes"] = {{"202605.01", "202605.01.9"}};
  patch9["halted"] = true;
  file["rollouts"] = {file["rollouts"][0], new_base, patch9};
  dir.Write("aksNodeController.json", file.dump());
  auto config = Load(dir, kAks);
  const auto fleet = SmallFleet();
  auto table = Simulate(*config, fleet, {T("2026-12-04T12:00:00Z")});
  ASSERT_TRUE(table.ok()) << table.status().message();
  // Patch numbers in numeric order; a column for nodes without the new base.
  EXPECT_THAT(table->columns, ElementsAre("202604.01.3", "202604.01.4", "202605.01.9",
                                          "202605.01.10", "202605.01:none"));
  uint64_t new_base_in = 0;
  for (const RolloutNode& n : fleet) new_base_in += RolloutBucket("new-base", n.vm_id) < 5000;
  const auto& row = table->counts[0];
  EXPECT_EQ(row[1], ExpectedIn(fleet, kRollout, 1050));
  EXPECT_EQ(row[2], 0u);  // halted
  EXPECT_EQ(row[3], new_base_in);
  EXPECT_EQ(row[4], 400u - new_base_in);
}

TEST(RolloutToolsTest, AgainstFindsExactlyTheNodesARenameMoves) {
  TempDir before("rollout-tools"), after("rollout-tools");
  before.Write("aksNodeController.json", ExampleFile(kRollout).dump());
  const std::string renamed = "anc-202604.01.4-take2";
  after.Write("aksNodeController.json", ExampleFile(renamed).dump());
  auto a = Load(before, kAks);
  auto b = Load(after, kAks);
  const auto fleet = SmallFleet();
  const std::vector<RolloutTime> times = {T("2026-12-03T00:00:00Z"), T("2026-12-04T07:00:00Z"),
                                          T("2026-12-04T08:00:00Z"), T("2026-12-05T01:00:00Z")};
  auto rows = SimulateAgainst(*a, *b, fleet, times);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 4u);

  // At 10.5%: a node moves when it is in under one name and out under the other.
  std::vector<std::string> moved;
  for (const RolloutNode& n : fleet) {
    if (n.subscription != kSub || n.cluster == kWest) continue;
    if ((RolloutBucket(kRollout, n.vm_id) < 1050) != (RolloutBucket(renamed, n.vm_id) < 1050)) {
      moved.push_back(n.vm_id);
    }
  }
  ASSERT_FALSE(moved.empty());  // 150 matched nodes at 10.5% under two names: some move
  const size_t moved_count = moved.size();
  EXPECT_EQ((*rows)[0].differing, 0u);  // before the first step: nobody is in either way
  EXPECT_FALSE((*rows)[0].listed_at.has_value());
  EXPECT_EQ((*rows)[1].differing, moved.size());
  std::vector<std::string> listed;
  for (const DiffNode& d : (*rows)[1].listed) {
    listed.push_back(d.node.vm_id);
    const bool in_before = RolloutBucket(kRollout, d.node.vm_id) < 1050;
    EXPECT_EQ(d.served, in_before ? R"({"hotfixes":{"202604.01":"202604.01.4"}})"
                                  : R"({"hotfixes":{"202604.01":"202604.01.3"}})");
    EXPECT_NE(d.served, d.served_against);
  }
  moved.resize(std::min(moved.size(), kMaxDiffNodesListed));
  EXPECT_EQ(listed, moved);  // the first ones, in fleet order
  EXPECT_EQ((*rows)[1].listed_at, times[1]);
  // 08:00 has the same answers as 07:00: counted, listed there.
  EXPECT_EQ((*rows)[2].differing, (*rows)[1].differing);
  EXPECT_TRUE((*rows)[2].listed.empty());
  EXPECT_EQ((*rows)[2].listed_at, times[1]);
  // At 100% the name no longer matters.
  EXPECT_EQ((*rows)[3].differing, 0u);

  // A folder against itself differs nowhere.
  auto same = SimulateAgainst(*a, *a, fleet, times);
  ASSERT_TRUE(same.ok());
  for (const DiffRow& row : *same) EXPECT_EQ(row.differing, 0u);

  const std::string text = FormatDiffRows(*rows);
  EXPECT_THAT(text, StartsWith("at\tdiffering\tlisted_at\n2026-12-03T00:00:00Z\t0\t-\n"));
  EXPECT_THAT(text, HasSubstr("\n2026-12-04T08:00:00Z\t" + std::to_string(moved_count) +
                              "\t2026-12-04T07:00:00Z\n"));
  EXPECT_THAT(text, HasSubstr("\n\nat\tvm_id\tsubscription\tcluster\tserved\tserved_against\n"));
  // One listed line per listed node, all at 07:00.
  const size_t header = text.find("served_against\n");
  ASSERT_NE(header, std::string::npos);
  const std::string lines = text.substr(header + 15);
  EXPECT_EQ(static_cast<size_t>(std::count(lines.begin(), lines.end(), '\n')), listed.size());
  EXPECT_EQ(lines.find("2026-12-04T08:00:00Z"), std::string::npos);
}

TEST(RolloutToolsTest, SimulateRefusesMoreWorkThanItsLimit) {
  TempDir dir("rollout-tools");
  // 40 rollouts of 64 one-minute steps each, one after the other: over 2,560 minutes every
  // time row is its own threshold setting.
  constexpr int kRollouts = 40, kSteps = 64;
  json file = ExampleFile(kRollout);
  json rollouts = json::array();
  const RolloutTime start = T("2026-12-04T00:00:00Z");
  for (int r = 0; r < kRollouts; ++r) {
    json rollout = ExampleFile("r" + std::to_string(r))["rollouts"][0];
    json steps = json::array();
    for (int i = 0; i < kSteps; ++i) {
      steps.push_back({{"at", FormatRolloutTime(start + std::chrono::minutes(r * kSteps + i))},
                       {"percent", i + 1}});
    }
    rollout["steps"] = steps;
    rollouts.push_back(rollout);
  }
  file["rollouts"] = rollouts;
  dir.Write("aksNodeController.json", file.dump());
  auto config = Load(dir, kAks);
  auto times = SimulationTimes(start, start + std::chrono::minutes(kRollouts * kSteps - 1),
                               std::chrono::minutes(1));
  ASSERT_TRUE(times.ok());
  // settings x (rollouts + 1) evaluations per node: the fleet that first goes over the limit.
  const uint64_t per_node = uint64_t{kRollouts} * kSteps * (kRollouts + 1);
  const size_t over = static_cast<size_t>(kMaxSimulateWork / per_node + 1);
  ASSERT_LE(over, kMaxFleetNodes);
  // Refused before any node is evaluated: the nodes need no identity.
  auto table = Simulate(*config, std::vector<RolloutNode>(over), *times);
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.status().message(), HasSubstr("evaluations"));
  auto diff = SimulateAgainst(*config, *config, std::vector<RolloutNode>(over), *times);
  ASSERT_FALSE(diff.ok());
}

}  // namespace
}  // namespace hotfix::service
