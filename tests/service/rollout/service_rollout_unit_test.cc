// Staged rollouts (docs/ROLLOUTS.md): the bucket function against vectors computed outside
// this code, the step evaluation, hold, halt, overlay order, the served JSON, the match, every
// validation error and limit, monotonicity, and the operator's view (ExplainRollout, StateAt,
// NextStep).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "rollout_example.h"
#include "service/rollout/json_message.h"
#include "service/rollout/rollout.h"
#include "service/store/component_store.h"

namespace hotfix::service {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;  // NOLINT(build/namespaces): literals only
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kAks[] = "aksNodeController";
constexpr char kSub[] = "8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8";
constexpr char kOtherSub[] = "11111111-2222-3333-4444-555555555555";
constexpr char kHost[] = "myaks-dns-1a2b3c4d.hcp.eastus.azmk8s.io";

json MinimalRollout(const std::string& name, const std::string& version = "202604.01.5") {
  json r = json::object();
  r["name"] = name;
  r["hotfixes"] = json::object({{version.substr(0, 9), version}});
  r["steps"] = json::array({json::object({{"at", "2026-12-04T00:00:00Z"}, {"percent", 100}})});
  return r;
}

json BaseFile() {
  json file = json::object();
  file["hotfixes"] = json::object({{"202604.01", "202604.01.3"}});
  file["rollouts"] = json::array({ExampleRollout("anc-1"), MinimalRollout("anc-2")});
  return file;
}

ComponentConfig MustParse(const json& file, std::string_view component = kAks) {
  StatusOr<ComponentConfig> parsed = ParseComponentConfig(component, file.dump());
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? std::move(parsed).value() : ComponentConfig{};
}

Rollout MustParseRollout(const json& rollout) {
  StatusOr<std::vector<Rollout>> parsed = ParseRollouts(json::array({rollout}));
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() && parsed->size() == 1 ? parsed->front() : Rollout{};
}

// A rollout built by hand: every node matches, node cohort, the given steps.
Rollout Ramp(std::string name, std::vector<RolloutStep> steps) {
  Rollout r;
  r.name = std::move(name);
  r.hotfixes = {{"202604.01", "202604.01.4"}};
  r.steps = std::move(steps);
  return r;
}

// Deterministic lower-case GUIDs: mt19937's output is fixed by the standard.
std::string RandomGuid(std::mt19937& rng) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) s += '-';
    s += kHex[rng() & 15];
  }
  return s;
}

std::string RandomName(std::mt19937& rng) {
  static constexpr char kFirst[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static constexpr char kRest[] = "abcdefghijklmnopqrstuvwxyz0123456789._-";
  std::string s(1, kFirst[rng() % (sizeof kFirst - 1)]);
  const size_t len = rng() % 40;
  for (size_t i = 0; i < len; ++i) s += kRest[rng() % (sizeof kRest - 1)];
  return s;
}

// The first vmId (from a fixed sequence) whose bucket under `name` is in [lo, hi).
std::string VmIdWithBucket(const std::string& name, uint32_t lo, uint32_t hi) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    std::string vm = RandomGuid(rng);
    const uint32_t b = RolloutBucket(name, vm);
    if (b >= lo && b < hi) return vm;
  }
  ADD_FAILURE() << "no vmId with bucket in [" << lo << "," << hi << ")";
  return "";
}

bool Applies(const Rollout& rollout, const RolloutNode& node, RolloutTime now) {
  return !AnswerFor({}, {rollout}, node, now).applied.empty();
}

// ---- The bucket function ----------------------------------------------------------------

// Computed outside this code, with Python (docs/ROLLOUTS.md has the same table):
// clang-format off
//   python3 -c 'import hashlib,sys; n,k=sys.argv[1:3]; print(int.from_bytes(hashlib.sha256((n+":"+k).encode()).digest()[:8],"big")%10000)' NAME KEY
// clang-format on
struct BucketVector {
  const char* name;
  const char* key;
  uint32_t bucket;
};
constexpr BucketVector kBucketVectors[] = {
    {"anc-202604.01.4", "8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8", 8251},       // node: vmId
    {"anc-202604.01.4", "02aa7f1e-6c3d-4b0a-9f5e-2c1d3e4f5a6b", 7162},       // node: vmId
    {"anc-202604.01.5", "02aa7f1e-6c3d-4b0a-9f5e-2c1d3e4f5a6b", 868},        // renamed: new bucket
    {"canary", "c0ffee00-0000-4000-8000-000000000001", 2388},                // node: vmId
    {"anc-202604.01.4", "myaks-dns-1a2b3c4d.hcp.eastus.azmk8s.io", 5094},    // cluster
    {"cluster-wave-1", "prod-weu-7f3e9a01.hcp.westeurope.azmk8s.io", 6980},  // cluster
};

TEST(RolloutBucketTest, MatchesIndependentlyComputedVectors) {
  for (const BucketVector& v : kBucketVectors) {
    EXPECT_EQ(RolloutBucket(v.name, v.key), v.bucket) << v.name << ":" << v.key;
  }
}

TEST(RolloutBucketTest, NodeCohortKeyIsTheLowerCasedVmId) {
  Rollout r = Ramp("anc-202604.01.4", {{T("2026-12-04T00:00:00Z"), 10000}});
  const RolloutNode node =
      MakeRolloutNode("8ECADFC9-D1A3-4EA4-B844-0D9F87E4D7C8", kSub, "x.hcp.eastus.azmk8s.io:443");
  EXPECT_EQ(node.vm_id, "8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8");
  EXPECT_EQ(ExplainRollout(r, node, T("2026-12-04T00:00:00Z")).bucket, 8251u);
}

TEST(RolloutBucketTest, ClusterCohortKeyIsTheLowerCasedHostWithoutPort) {
  Rollout r = Ramp("anc-202604.01.4", {{T("2026-12-04T00:00:00Z"), 10000}});
  r.cohort = Cohort::kCluster;
  for (const char* authority :
       {"MyAKS-dns-1a2b3c4d.hcp.eastus.azmk8s.io:443", "myaks-dns-1a2b3c4d.hcp.eastus.azmk8s.io"}) {
    const RolloutNode node =
        MakeRolloutNode("02aa7f1e-6c3d-4b0a-9f5e-2c1d3e4f5a6b", kSub, authority);
    EXPECT_EQ(ExplainRollout(r, node, T("2026-12-04T00:00:00Z")).bucket, 5094u) << authority;
  }
}

TEST(RolloutBucketTest, AlwaysBelowTheBucketCount) {
  std::mt19937 rng(1);
  for (int i = 0; i < 2000; ++i) {
    EXPECT_LT(RolloutBucket(RandomName(rng), RandomGuid(rng)), kBucketCount);
  }
}

// ---- Times ------------------------------------------------------------------------------

TEST(RolloutTimeTest, ParsesUtcWholeSecondsOnly) {
  using namespace std::chrono;  // NOLINT(build/namespaces)
  EXPECT_EQ(T("1970-01-01T00:00:01Z").time_since_epoch(), 1s);
  EXPECT_EQ(T("2026-12-04T06:00:00Z"), RolloutTime(sys_days(2026y / 12 / 4)) + 6h);
  EXPECT_EQ(T("2028-02-29T23:59:59Z"), RolloutTime(sys_days(2028y / 3 / 1)) - 1s);
  for (const char* bad : {"2026-12-04T00:00:00+01:00",
                          "2026-12-04T00:00:00+00:00",
                          "2026-02-30T00:00:00Z",
                          "2026-02-29T00:00:00Z",
                          "2026-12-04T00:00:00.5Z",
                          "2026-12-04T00:00:00.000Z",
                          "2026-12-04T24:00:00Z",
                          "2026-12-04T23:60:00Z",
                          "2026-12-04T23:59:60Z",
                          "2026-13-04T00:00:00Z",
                          "2026-00-04T00:00:00Z",
                          "2026-12-00T00:00:00Z",
                          "2026-12-04t00:00:00Z",
                          "2026-12-04T00:00:00z",
                          "2026-12-04 00:00:00Z",
                          "2026-12-04T00:00:00",
                          "2026-12-4T00:00:00Z",
                          " 2026-12-04T00:00:00Z",
                          "",
                          "Z"}) {
    StatusOr<RolloutTime> t = ParseRolloutTime(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().message(),
              Quote(bad) + " is not RFC 3339 in UTC (\"2026-12-04T06:00:00Z\")");
  }
}

TEST(RolloutTimeTest, FormatRoundTrips) {
  for (const char* text : {"2026-12-04T06:00:00Z", "1970-01-01T00:00:00Z", "2028-02-29T23:59:59Z",
                           "2099-12-31T00:01:02Z"}) {
    EXPECT_EQ(FormatRolloutTime(T(text)), text);
  }
}

// ---- Step evaluation --------------------------------------------------------------------

TEST(RolloutStepsTest, ThresholdIsTheLastStepAtOrBeforeNow) {
  const Rollout r = MustParseRollout(ExampleRollout());
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_EQ(r.steps[0].threshold, 100u);    // 1%
  EXPECT_EQ(r.steps[1].threshold, 1050u);   // 10.5%
  EXPECT_EQ(r.steps[2].threshold, 10000u);  // 100%
  EXPECT_EQ(ThresholdAt(r, T("2026-01-01T00:00:00Z")), 0u);
  EXPECT_EQ(ThresholdAt(r, T("2026-12-03T23:59:59Z")), 0u);    // before the first step
  EXPECT_EQ(ThresholdAt(r, T("2026-12-04T00:00:00Z")), 100u);  // exactly at
  EXPECT_EQ(ThresholdAt(r, T("2026-12-04T05:59:59Z")), 100u);  // between
  EXPECT_EQ(ThresholdAt(r, T("2026-12-04T06:00:00Z")), 1050u);
  EXPECT_EQ(ThresholdAt(r, T("2026-12-04T23:59:59Z")), 1050u);
  EXPECT_EQ(ThresholdAt(r, T("2026-12-05T00:00:00Z")), 10000u);  // the last
  EXPECT_EQ(ThresholdAt(r, T("2030-01-01T00:00:00Z")), 10000u);  // after the last
}

TEST(RolloutStepsTest, PercentTakesUpToTwoDecimals) {
  for (const auto& [percent, threshold] : std::vector<std::pair<double, uint32_t>>{{0, 0},
                                                                                   {0.01, 1},
                                                                                   {10.5, 1050},
                                                                                   {10.55, 1055},
                                                                                   {33.33, 3333},
                                                                                   {99.99, 9999},
                                                                                   {100, 10000}}) {
    json r = MinimalRollout("p");
    r["steps"][0]["percent"] = percent;
    EXPECT_EQ(MustParseRollout(r).steps[0].threshold, threshold) << percent;
  }
  json r = MinimalRollout("p");
  r["steps"][0]["percent"] = 7;  // an integer
  EXPECT_EQ(MustParseRollout(r).steps[0].threshold, 700u);
}

TEST(RolloutStepsTest, NodeIsInExactlyWhenBucketIsUnderThreshold) {
  // vmId 02aa7f1e-... has bucket 7162 under "anc-202604.01.4".
  const RolloutNode node = MakeRolloutNode("02aa7f1e-6c3d-4b0a-9f5e-2c1d3e4f5a6b", "", "h");
  const RolloutTime t0 = T("2026-12-04T00:00:00Z");
  EXPECT_FALSE(Applies(Ramp("anc-202604.01.4", {{t0, 7162}}), node, t0));
  EXPECT_TRUE(Applies(Ramp("anc-202604.01.4", {{t0, 7163}}), node, t0));
  EXPECT_FALSE(Applies(Ramp("anc-202604.01.4", {{t0, 7163}}), node, t0 - 1s));
  EXPECT_FALSE(Applies(Ramp("anc-202604.01.4", {{t0, 0}}), node, t0));
  EXPECT_TRUE(Applies(Ramp("anc-202604.01.4", {{t0, 10000}}), node, t0));
}

// ---- Hold -------------------------------------------------------------------------------

TEST(RolloutHoldTest, FreezesTheEvaluationTime) {
  json j = ExampleRollout();
  j["hold_at"] = "2026-12-04T03:00:00Z";
  const Rollout r = MustParseRollout(j);
  ASSERT_TRUE(r.hold_at.has_value());
  EXPECT_EQ(*r.hold_at, T("2026-12-04T03:00:00Z"));
  EXPECT_EQ(ThresholdAt(r, T("2026-12-03T00:00:00Z")), 0u);  // before: as without hold
  EXPECT_EQ(ThresholdAt(r, T("2026-12-04T00:00:00Z")), 100u);
  EXPECT_EQ(ThresholdAt(r, T("2026-12-04T06:00:00Z")), 100u);  // step 2 never applies
  EXPECT_EQ(ThresholdAt(r, T("2026-12-05T00:00:00Z")), 100u);  // nor step 3
  EXPECT_EQ(ThresholdAt(r, T("2040-01-01T00:00:00Z")), 100u);
}

TEST(RolloutHoldTest, HoldExactlyAtAStepIncludesIt) {
  json j = ExampleRollout();
  j["hold_at"] = "2026-12-04T06:00:00Z";
  EXPECT_EQ(ThresholdAt(MustParseRollout(j), T("2030-01-01T00:00:00Z")), 1050u);
}

TEST(RolloutHoldTest, HoldBeforeTheFirstStepKeepsEveryoneOut) {
  json j = ExampleRollout();
  j["hold_at"] = "2026-12-01T00:00:00Z";
  const Rollout r = MustParseRollout(j);
  EXPECT_EQ(ThresholdAt(r, T("2030-01-01T00:00:00Z")), 0u);
  const RolloutNode node = MakeRolloutNode("02aa7f1e-6c3d-4b0a-9f5e-2c1d3e4f5a6b", kSub, kHost);
  EXPECT_FALSE(Applies(r, node, T("2030-01-01T00:00:00Z")));
}

TEST(RolloutHoldTest, NodesInStayInAndNoOneElseComesIn) {
  Rollout r = Ramp("hold-me", {{T("2026-12-04T00:00:00Z"), 2000},
                               {T("2026-12-04T06:00:00Z"), 5000},
                               {T("2026-12-05T00:00:00Z"), 10000}});
  r.hold_at = T("2026-12-04T03:00:00Z");
  std::mt19937 rng(11);
  int in = 0;
  for (int i = 0; i < 2000; ++i) {
    const RolloutNode node = MakeRolloutNode(RandomGuid(rng), "", "");
    const bool at_hold = Applies(r, node, *r.hold_at);
    in += at_hold;
    for (const char* later : {"2026-12-04T03:00:01Z", "2026-12-04T06:00:00Z",
                              "2026-12-05T00:00:00Z", "2031-06-01T00:00:00Z"}) {
      EXPECT_EQ(Applies(r, node, T(later)), at_hold) << node.vm_id << " " << later;
    }
    EXPECT_EQ(at_hold, RolloutBucket("hold-me", node.vm_id) < 2000) << node.vm_id;
  }
  EXPECT_GT(in, 0);
  EXPECT_LT(in, 2000);
}

TEST(RolloutHoldTest, HoldInTheFutureDoesNotStopTheRampUntilThen) {
  json j = ExampleRollout();
  j["hold_at"] = "2026-12-04T12:00:00Z";
  const Rollout r = MustParseRollout(j);
  EXPECT_EQ(ThresholdAt(r, T("2026-12-04T00:00:00Z")), 100u);
  EXPECT_EQ(ThresholdAt(r, T("2026-12-04T06:00:00Z")), 1050u);
  EXPECT_EQ(ThresholdAt(r, T("2026-12-05T00:00:00Z")), 1050u);
}

// ---- Halt -------------------------------------------------------------------------------

TEST(RolloutHaltTest, RemovesTheRolloutForEveryone) {
  json file = BaseFile();
  file["rollouts"][0]["halted"] = true;
  file["rollouts"].erase(1);
  const ComponentConfig config = MustParse(file);
  ASSERT_EQ(config.rollouts.size(), 1u);
  EXPECT_TRUE(config.rollouts[0].halted);
  EXPECT_EQ(ThresholdAt(config.rollouts[0], T("2030-01-01T00:00:00Z")), 0u);
  std::mt19937 rng(3);
  for (int i = 0; i < 500; ++i) {
    const RolloutNode node = MakeRolloutNode(RandomGuid(rng), kSub, kHost);
    std::vector<size_t> applied = {99};
    EXPECT_EQ(config.ServedTo(node, T("2030-01-01T00:00:00Z"), &applied),
              R"({"hotfixes":{"202604.01":"202604.01.3"}})");
    EXPECT_THAT(applied, IsEmpty());
    const RolloutOutcome why = ExplainRollout(config.rollouts[0], node, T("2030-01-01T00:00:00Z"));
    EXPECT_EQ(why.verdict, RolloutVerdict::kHalted);
    EXPECT_FALSE(why.enters_at.has_value());
  }
}

TEST(RolloutHaltTest, HaltingALaterRolloutUncoversTheOneBeneath) {
  const RolloutTime t0 = T("2026-12-04T00:00:00Z");
  std::vector<Rollout> rollouts = {Ramp("first", {{t0, 10000}}), Ramp("second", {{t0, 10000}})};
  rollouts[1].hotfixes = {{"202604.01", "202604.01.5"}};
  const RolloutNode node = MakeRolloutNode("c0ffee00-0000-4000-8000-000000000001", kSub, kHost);
  EXPECT_EQ(AnswerFor({{"202604.01", "202604.01.3"}}, rollouts, node, t0).hotfixes.at("202604.01"),
            "202604.01.5");
  rollouts[1].halted = true;
  RolloutAnswer a = AnswerFor({{"202604.01", "202604.01.3"}}, rollouts, node, t0);
  EXPECT_EQ(a.hotfixes.at("202604.01"), "202604.01.4");
  EXPECT_THAT(a.applied, ElementsAre(0u));
}

// ---- Overlay ----------------------------------------------------------------------------

TEST(RolloutOverlayTest, LaterRolloutsWinKeysEarlierOnesSet) {
  const RolloutTime t0 = T("2026-12-04T00:00:00Z");
  const std::map<std::string, std::string> base = {{"202603.15", "202603.15.1"},
                                                   {"202604.01", "202604.01.3"}};
  Rollout a = Ramp("a", {{t0, 10000}});
  a.hotfixes = {{"202604.01", "202604.01.4"}, {"202605.01", "202605.01.1"}};
  Rollout b = Ramp("b", {{t0, 10000}});
  b.hotfixes = {{"202604.01", "202604.01.5"}};
  const RolloutNode node = MakeRolloutNode("c0ffee00-0000-4000-8000-000000000001", kSub, kHost);

  RolloutAnswer ab = AnswerFor(base, {a, b}, node, t0);
  EXPECT_EQ(ab.hotfixes, (std::map<std::string, std::string>{{"202603.15", "202603.15.1"},
                                                             {"202604.01", "202604.01.5"},
                                                             {"202605.01", "202605.01.1"}}));
  EXPECT_THAT(ab.applied, ElementsAre(0u, 1u));

  RolloutAnswer ba = AnswerFor(base, {b, a}, node, t0);
  EXPECT_EQ(ba.hotfixes.at("202604.01"), "202604.01.4");
  EXPECT_THAT(ba.applied, ElementsAre(0u, 1u));

  // A rollout that does not apply overlays nothing, wherever it stands.
  Rollout b_later = b;
  b_later.steps = {{t0 + 1h, 10000}};
  RolloutAnswer not_yet = AnswerFor(base, {a, b_later}, node, t0);
  EXPECT_EQ(not_yet.hotfixes.at("202604.01"), "202604.01.4");
  EXPECT_THAT(not_yet.applied, ElementsAre(0u));
  Rollout b_elsewhere = b;
  b_elsewhere.match.subscriptions = {kOtherSub};
  EXPECT_EQ(AnswerFor(base, {a, b_elsewhere}, node, t0).hotfixes.at("202604.01"), "202604.01.4");

  // Nothing applies: the base, untouched.
  RolloutAnswer none = AnswerFor(base, {b_later}, node, t0);
  EXPECT_EQ(none.hotfixes, base);
  EXPECT_THAT(none.applied, IsEmpty());
}

// ---- The served config ------------------------------------------------------------------

TEST(RolloutServedTest, CompactSortedHotfixesOnly) {
  EXPECT_EQ(ServedHotfixesJson({}), R"({"hotfixes":{}})");
  EXPECT_EQ(ServedHotfixesJson({{"202605.01", "202605.01.1"}, {"202603.15", "202603.15.10"}}),
            R"({"hotfixes":{"202603.15":"202603.15.10","202605.01":"202605.01.1"}})");
}

TEST(RolloutServedTest, NeverCarriesNamesOrTargeting) {
  json file = json::parse(R"({
    "rollouts": [
      {"name": "secret-rollout-name", "hotfixes": {"202604.01": "202604.01.4"},
       "match": {"subscriptions": ["8ECADFC9-D1A3-4EA4-B844-0D9F87E4D7C8",
                                   "11111111-2222-3333-4444-555555555555"],
                 "exclude_subscriptions": ["99999999-2222-3333-4444-555555555555"],
                 "clusters": ["*.hcp.eastus.azmk8s.io", "other-customer.example"],
                 "vm_ids": ["02aa7f1e-6c3d-4b0a-9f5e-2c1d3e4f5a6b"]},
       "steps": [{"at": "2026-12-04T00:00:00Z", "percent": 100}]}
    ],
    "hotfixes":   {"202605.01": "202605.01.2",   "202604.01": "202604.01.3"}
  })");
  const ComponentConfig config = MustParse(file);
  ASSERT_TRUE(config.has_rollouts);
  const RolloutTime now = T("2026-12-04T00:00:00Z");
  std::vector<size_t> applied;
  const std::string inside = config.ServedTo(
      MakeRolloutNode("02aa7f1e-6c3d-4b0a-9f5e-2c1d3e4f5a6b", kSub, std::string(kHost) + ":443"),
      now, &applied);
  EXPECT_EQ(inside, R"({"hotfixes":{"202604.01":"202604.01.4","202605.01":"202605.01.2"}})");
  EXPECT_THAT(applied, ElementsAre(0u));
  const std::string outside = config.ServedTo(
      MakeRolloutNode("c0ffee00-0000-4000-8000-000000000001", kSub, kHost), now, &applied);
  EXPECT_EQ(outside, R"({"hotfixes":{"202604.01":"202604.01.3","202605.01":"202605.01.2"}})");
  EXPECT_THAT(applied, IsEmpty());
  for (const std::string& served : {inside, outside}) {
    for (const char* secret : {"secret", "rollout", "8ecadfc9", "11111111", "99999999", "azmk8s",
                               "other-customer", "02aa7f1e", "match", "steps", " ", "\n"}) {
      EXPECT_THAT(served, Not(HasSubstr(secret))) << served;
    }
  }
}

TEST(RolloutServedTest, FileWithoutRolloutsIsServedByteForByte) {
  const std::string aks =
      "{ \"hotfixes\" : {\"202605.01\":\"202605.01.2\",\n \"202604.01\": "
      "\"202604.01.3\"} }\n";
  const std::string other = R"({"zeta": 1, "alpha": {"rollout": "not ours"}})";
  const RolloutNode node = MakeRolloutNode("c0ffee00-0000-4000-8000-000000000001", kSub, kHost);
  for (const auto& [component, text] :
       std::vector<std::pair<std::string, std::string>>{{kAks, aks}, {"other", other}}) {
    StatusOr<ComponentConfig> config = ParseComponentConfig(component, text);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_FALSE(config->has_rollouts);
    std::vector<size_t> applied;
    EXPECT_EQ(config->ServedTo(node, T("2026-12-04T00:00:00Z"), &applied), text);
    EXPECT_THAT(applied, IsEmpty());
  }
}

TEST(RolloutServedTest, AnEmptyRolloutListStillServesTheCompactForm) {
  const ComponentConfig config =
      MustParse(json::parse(R"({"hotfixes": {"202604.01": "202604.01.3"}, "rollouts": []})"));
  EXPECT_TRUE(config.has_rollouts);
  EXPECT_EQ(config.ServedTo(MakeRolloutNode("v", "s", "h"), T("2026-12-04T00:00:00Z"), nullptr),
            R"({"hotfixes":{"202604.01":"202604.01.3"}})");
}

TEST(RolloutServedTest, RolloutsWithoutTopLevelHotfixesStartFromNothing) {
  json file = json::object();
  file["rollouts"] = json::array({MinimalRollout("only")});
  for (const char* component : {kAks, "otherComponent"}) {
    const ComponentConfig config = MustParse(file, component);
    ASSERT_TRUE(config.hotfixes.has_value()) << component;
    EXPECT_THAT(*config.hotfixes, IsEmpty());
    EXPECT_EQ(config.ServedTo(MakeRolloutNode("v", "s", "h"), T("2026-12-03T00:00:00Z"), nullptr),
              R"({"hotfixes":{}})");
    EXPECT_EQ(config.ServedTo(MakeRolloutNode("v", "s", "h"), T("2026-12-04T00:00:00Z"), nullptr),
              R"({"hotfixes":{"202604.01":"202604.01.5"}})");
  }
}

TEST(RolloutServedTest, ParsesTheIssueExample) {
  const ComponentConfig config = MustParse(BaseFile());
  ASSERT_TRUE(config.has_rollouts);
  ASSERT_EQ(config.rollouts.size(), 2u);
  const Rollout& r = config.rollouts[0];
  EXPECT_EQ(r.name, "anc-1");
  EXPECT_EQ(r.hotfixes, (std::map<std::string, std::string>{{"202604.01", "202604.01.4"}}));
  EXPECT_THAT(r.match.subscriptions, ElementsAre(kSub));
  EXPECT_THAT(r.match.exclude_subscriptions, IsEmpty());
  EXPECT_THAT(r.match.clusters, ElementsAre("*.hcp.eastus.azmk8s.io"));
  EXPECT_THAT(r.match.vm_ids, IsEmpty());
  EXPECT_EQ(r.cohort, Cohort::kNode);
  EXPECT_FALSE(r.hold_at.has_value());  // null is "no hold"
  EXPECT_FALSE(r.halted);
  // Defaults: no match (everyone), node cohort, no hold, not halted.
  const Rollout& minimal = config.rollouts[1];
  EXPECT_THAT(minimal.match.subscriptions, IsEmpty());
  EXPECT_THAT(minimal.match.clusters, IsEmpty());
  EXPECT_EQ(minimal.cohort, Cohort::kNode);
  EXPECT_FALSE(minimal.hold_at.has_value());
  EXPECT_FALSE(minimal.halted);
}

// ---- Match ------------------------------------------------------------------------------

RolloutVerdict VerdictFor(const json& match, const RolloutNode& node,
                          Cohort cohort = Cohort::kNode) {
  json j = MinimalRollout("m");
  j["match"] = match;
  Rollout r = MustParseRollout(j);
  r.cohort = cohort;
  return ExplainRollout(r, node, T("2026-12-04T00:00:00Z")).verdict;
}

constexpr char kVm[] = "02aa7f1e-6c3d-4b0a-9f5e-2c1d3e4f5a6b";

TEST(RolloutMatchTest, Subscriptions) {
  const RolloutNode node = MakeRolloutNode(kVm, kSub, kHost);
  EXPECT_EQ(
      VerdictFor(json::parse(R"({"subscriptions": ["8ECADFC9-d1a3-4ea4-b844-0d9f87e4d7c8"]})"),
                 node),
      RolloutVerdict::kApplies);
  EXPECT_EQ(VerdictFor({{"subscriptions", {kOtherSub, kSub}}}, node), RolloutVerdict::kApplies);
  EXPECT_EQ(VerdictFor({{"subscriptions", {kOtherSub}}}, node),
            RolloutVerdict::kSubscriptionNotListed);
  // The node's side is lower-cased too.
  EXPECT_EQ(VerdictFor({{"subscriptions", {kSub}}},
                       MakeRolloutNode(kVm, "8ECADFC9-D1A3-4EA4-B844-0D9F87E4D7C8", kHost)),
            RolloutVerdict::kApplies);
}

TEST(RolloutMatchTest, ExcludeSubscriptions) {
  const RolloutNode node = MakeRolloutNode(kVm, kSub, kHost);
  EXPECT_EQ(
      VerdictFor(
          json::parse(R"({"exclude_subscriptions": ["8ECADFC9-D1A3-4EA4-B844-0D9F87E4D7C8"]})"),
          node),
      RolloutVerdict::kSubscriptionExcluded);
  EXPECT_EQ(VerdictFor({{"exclude_subscriptions", {kOtherSub}}}, node), RolloutVerdict::kApplies);
  // Listed and excluded: excluded wins.
  EXPECT_EQ(VerdictFor({{"subscriptions", {kSub}}, {"exclude_subscriptions", {kSub}}}, node),
            RolloutVerdict::kSubscriptionExcluded);
}

TEST(RolloutMatchTest, ClusterPatterns) {
  struct Case {
    const char* pattern;
    const char* authority;
    bool matches;
  };
  const Case cases[] = {
      {"*.hcp.eastus.azmk8s.io", "myaks-dns-1a2b3c4d.hcp.eastus.azmk8s.io", true},
      {"*.hcp.eastus.azmk8s.io", "myaks-dns-1a2b3c4d.hcp.eastus.azmk8s.io:443", true},
      {"*.hcp.eastus.azmk8s.io", "a.b.c.hcp.eastus.azmk8s.io", true},  // `*` spans dots
      {"*.hcp.eastus.azmk8s.io", "hcp.eastus.azmk8s.io", false},
      {"*.hcp.eastus.azmk8s.io", "x.hcp.westus.azmk8s.io", false},
      {"*.hcp.eastus.azmk8s.io", "x.hcp.eastus.azmk8s.io.evil.example", false},
      {"*.HCP.EastUS.azmk8s.io", "MyAKS.hcp.eastus.AZMK8S.io:6443", true},  // case-insensitive
      {"myaks-*.hcp.*.azmk8s.io", "myaks-dns-1.hcp.westeurope.azmk8s.io", true},
      {"myaks-*.hcp.*.azmk8s.io", "other-dns-1.hcp.westeurope.azmk8s.io", false},
      {"*", "anything.example:443", true},
      {"*a*b*", "xxaxxbxx", true},
      {"*a*b*", "xxbxxaxx", false},
      {"exact.example", "exact.example", true},
      {"exact.example", "exact.example:443", true},
      {"exact.example", "xexact.example", false},
      {"exact.example", "exact.examplex", false},
      {"::1", "[::1]:443", true},  // IPv6 with a port
      {"::1", "[::1]", true},      // and without
      {"::1", "::1", true},        // bare: not a port
      {"10.0.0.1", "10.0.0.1:443", true},
  };
  for (const Case& c : cases) {
    const RolloutNode node = MakeRolloutNode(kVm, kSub, c.authority);
    EXPECT_EQ(VerdictFor({{"clusters", {c.pattern}}}, node),
              c.matches ? RolloutVerdict::kApplies : RolloutVerdict::kClusterNotMatched)
        << c.pattern << " vs " << c.authority;
  }
  // Any one pattern of the list.
  EXPECT_EQ(VerdictFor({{"clusters", {"nope.example", "*.eastus.azmk8s.io"}}},
                       MakeRolloutNode(kVm, kSub, kHost)),
            RolloutVerdict::kApplies);
}

TEST(RolloutMatchTest, MakeRolloutNodeStripsThePortAndLowerCases) {
  const RolloutNode n = MakeRolloutNode("AbC", "DeF", "Host.Example:443");
  EXPECT_EQ(n.vm_id, "abc");
  EXPECT_EQ(n.subscription, "def");
  EXPECT_EQ(n.cluster, "host.example");
  EXPECT_EQ(MakeRolloutNode("", "", "host.example").cluster, "host.example");
  EXPECT_EQ(MakeRolloutNode("", "", "[::1]:443").cluster, "::1");
  EXPECT_EQ(MakeRolloutNode("", "", "[2001:DB8::1]").cluster, "2001:db8::1");
  EXPECT_EQ(MakeRolloutNode("", "", "2001:db8::1").cluster, "2001:db8::1");
  EXPECT_EQ(MakeRolloutNode("", "", "").cluster, "");
}

TEST(RolloutMatchTest, VmIds) {
  const RolloutNode node = MakeRolloutNode(kVm, kSub, kHost);
  EXPECT_EQ(
      VerdictFor(json::parse(R"({"vm_ids": ["02AA7F1E-6C3D-4B0A-9F5E-2C1D3E4F5A6B"]})"), node),
      RolloutVerdict::kApplies);
  EXPECT_EQ(VerdictFor({{"vm_ids", {"c0ffee00-0000-4000-8000-000000000001"}}}, node),
            RolloutVerdict::kVmIdNotListed);
}

TEST(RolloutMatchTest, AbsentOrEmptyListsDoNotRestrict) {
  const RolloutNode node = MakeRolloutNode(kVm, kSub, kHost);
  EXPECT_EQ(VerdictFor(json::object(), node), RolloutVerdict::kApplies);
  EXPECT_EQ(VerdictFor(json::parse(R"({"subscriptions": [], "exclude_subscriptions": [],
                                      "clusters": [], "vm_ids": []})"),
                       node),
            RolloutVerdict::kApplies);
  // No match at all.
  Rollout r = MustParseRollout(MinimalRollout("m"));
  EXPECT_EQ(ExplainRollout(r, node, T("2026-12-04T00:00:00Z")).verdict, RolloutVerdict::kApplies);
}

TEST(RolloutMatchTest, EveryFieldMustPass) {
  const json all = {{"subscriptions", {kSub}},
                    {"exclude_subscriptions", {kOtherSub}},
                    {"clusters", {"*.hcp.eastus.azmk8s.io"}},
                    {"vm_ids", {kVm}}};
  EXPECT_EQ(VerdictFor(all, MakeRolloutNode(kVm, kSub, kHost)), RolloutVerdict::kApplies);
  EXPECT_EQ(VerdictFor(all, MakeRolloutNode(kVm, kOtherSub, kHost)),
            RolloutVerdict::kSubscriptionNotListed);
  EXPECT_EQ(VerdictFor(all, MakeRolloutNode(kVm, kSub, "x.westus.example")),
            RolloutVerdict::kClusterNotMatched);
  EXPECT_EQ(VerdictFor(all, MakeRolloutNode("c0ffee00-0000-4000-8000-000000000001", kSub, kHost)),
            RolloutVerdict::kVmIdNotListed);
}

TEST(RolloutCohortTest, ClusterCohortMovesAWholeClusterTogether) {
  Rollout r = Ramp("cluster-wave-1", {{T("2026-12-04T00:00:00Z"), 5000}});
  r.cohort = Cohort::kCluster;
  const RolloutTime now = T("2026-12-04T00:00:00Z");
  std::mt19937 rng(5);
  int clusters_in = 0;
  for (int c = 0; c < 100; ++c) {
    const std::string host = "aks-" + std::to_string(c) + ".hcp.eastus.azmk8s.io";
    const bool expected = RolloutBucket("cluster-wave-1", host) < 5000;
    clusters_in += expected;
    for (int n = 0; n < 30; ++n) {
      const RolloutNode node = MakeRolloutNode(RandomGuid(rng), kSub, host + ":443");
      EXPECT_EQ(Applies(r, node, now), expected) << host;
    }
  }
  EXPECT_GT(clusters_in, 20);  // both sides of the line are exercised
  EXPECT_LT(clusters_in, 80);
  // The vector's cluster: bucket 6980, in at 69.81%, out at 69.80%.
  const RolloutNode weu =
      MakeRolloutNode(kVm, kSub, "prod-weu-7f3e9a01.hcp.westeurope.azmk8s.io:443");
  r.steps = {{now, 6980}};
  EXPECT_FALSE(Applies(r, weu, now));
  r.steps = {{now, 6981}};
  EXPECT_TRUE(Applies(r, weu, now));
}

// --insecure-accept-any-token: the service passes an empty vmId and subscription.
TEST(RolloutCohortTest, NoVmIdNeverEntersANodeCohortRollout) {
  const RolloutNode anonymous = MakeRolloutNode("", "", std::string(kHost) + ":443");
  const RolloutTime now = T("2026-12-05T00:00:00Z");
  Rollout node_cohort = Ramp("n", {{T("2026-12-04T00:00:00Z"), 10000}});  // 100%, no match
  const RolloutOutcome why = ExplainRollout(node_cohort, anonymous, now);
  EXPECT_EQ(why.verdict, RolloutVerdict::kNoCohortKey);
  EXPECT_FALSE(why.enters_at.has_value());
  EXPECT_FALSE(Applies(node_cohort, anonymous, now));

  Rollout cluster_cohort = node_cohort;
  cluster_cohort.cohort = Cohort::kCluster;
  EXPECT_EQ(ExplainRollout(cluster_cohort, anonymous, now).verdict, RolloutVerdict::kApplies);
  EXPECT_TRUE(Applies(cluster_cohort, anonymous, now));
  cluster_cohort.name = "anc-202604.01.4";  // bucket 5094 for this host
  cluster_cohort.steps = {{T("2026-12-04T00:00:00Z"), 5095}};
  EXPECT_TRUE(Applies(cluster_cohort, anonymous, now));
  cluster_cohort.steps = {{T("2026-12-04T00:00:00Z"), 5094}};
  EXPECT_FALSE(Applies(cluster_cohort, anonymous, now));

  // Subscription and vmId lists never pass; an exclusion never excludes.
  EXPECT_EQ(VerdictFor({{"subscriptions", {kSub}}}, anonymous, Cohort::kCluster),
            RolloutVerdict::kSubscriptionNotListed);
  EXPECT_EQ(VerdictFor({{"vm_ids", {kVm}}}, anonymous, Cohort::kCluster),
            RolloutVerdict::kVmIdNotListed);
  EXPECT_EQ(VerdictFor({{"exclude_subscriptions", {kSub}}}, anonymous, Cohort::kCluster),
            RolloutVerdict::kApplies);
  EXPECT_EQ(VerdictFor({{"clusters", {"*.eastus.azmk8s.io"}}}, anonymous, Cohort::kCluster),
            RolloutVerdict::kApplies);
}

// ---- Validation -------------------------------------------------------------------------

struct Refusal {
  std::string name;
  std::function<void(json&)> edit;  // applied to BaseFile()
  std::vector<std::string> expect;  // substrings of the message
  std::string component = kAks;
};

std::ostream& operator<<(std::ostream& os, const Refusal& r) { return os << r.name; }

// The message starts with the file, then names the rollout, then the field.
const std::string kR0 = "aksNodeController.json: rollouts[0] \"anc-1\": ";

json& R0(json& f) { return f["rollouts"][0]; }

json ManyStrings(size_t n, const std::string& prefix) {
  json list = json::array();
  for (size_t i = 0; i < n; ++i) list.push_back(prefix + std::to_string(i));
  return list;
}

json ManyHotfixes(size_t n) {
  json map = json::object();
  for (size_t i = 0; i < n; ++i) {
    const std::string base = std::to_string(200000 + i) + ".01";
    map[base] = base + ".1";
  }
  return map;
}

json ManySteps(size_t n) {
  json steps = json::array();
  for (size_t i = 0; i < n; ++i) {
    steps.push_back({{"at", FormatRolloutTime(T("2026-12-04T00:00:00Z") + std::chrono::hours(i))},
                     {"percent", 1}});
  }
  return steps;
}

using Edit = std::function<void(json&)>;

// Sets (or, with Erase, removes) the value at a JSON pointer into the file.
Edit Set(const std::string& pointer, json value) {
  return [pointer, value](json& f) { f[json::json_pointer(pointer)] = value; };
}
Edit Erase(const std::string& pointer) {
  return [pointer](json& f) {
    const json::json_pointer p(pointer);
    f[p.parent_pointer()].erase(p.back());
  };
}

std::vector<Refusal> Refusals() {
  constexpr char kS1[] = "/rollouts/0/steps/1";
  const std::string at1 = std::string(kS1) + "/at";
  const std::string pct1 = std::string(kS1) + "/percent";
  const std::string m = "/rollouts/0/match";
  const std::string r0 = "/rollouts/0";
  const std::string f = "aksNodeController.json: ";
  // clang-format off
  return {
      // Unknown keys, at every level.
      {"UnknownTopLevelKey", Set("/rollout", json::array()), {f + "top-level key \"rollout\" is not allowed"}},
      {"UnknownRolloutKey", Set(r0 + "/hold", "2026-12-04T00:00:00Z"), {kR0 + "unknown key \"hold\""}},
      {"UnknownMatchKeySubscriptionTypo", Set(m + "/subscription", json::array({kSub})), {kR0 + "match: unknown key \"subscription\""}},
      {"UnknownStepKey", Set("/rollouts/0/steps/2/percentage", 100), {kR0 + "steps[2]: unknown key \"percentage\""}},
      // Names.
      {"NameEmpty", Set(r0 + "/name", ""), {f + "rollouts[0] \"\": name must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}"}},
      {"NameTooLong65", Set(r0 + "/name", std::string(65, 'a')), {f + "rollouts[0] \"aaaa", "name must match"}},
      {"NameStartsWithDot", Set(r0 + "/name", ".anc"), {f + "rollouts[0] \".anc\": name must match"}},
      {"NameStartsWithDash", Set(r0 + "/name", "-anc"), {f + "rollouts[0] \"-anc\": name must match"}},
      {"NameWithColon", Set(r0 + "/name", "anc:1"), {f + "rollouts[0] \"anc:1\": name must match"}},
      {"NameWithSlash", Set(r0 + "/name", "anc/1"), {f + "rollouts[0] \"anc/1\": name must match"}},
      {"NameWithSpace", Set(r0 + "/name", "anc 1"), {f + "rollouts[0] \"anc 1\": name must match"}},
      {"NameNotAString", Set(r0 + "/name", 7), {f + "rollouts[0] 7: name must match"}},
      {"NameMissing", Erase(r0 + "/name"), {f + "rollouts[0]: missing \"name\""}},
      {"NameDuplicate", Set("/rollouts/1/name", "anc-1"), {f + "rollouts[1] \"anc-1\": name is used by an earlier rollout"}},
      // Steps.
      {"StepsMissing", Erase(r0 + "/steps"), {kR0 + "missing \"steps\""}},
      {"StepsEmpty", Set(r0 + "/steps", json::array()), {kR0 + "steps is empty"}},
      {"StepsNotAnArray", Set(r0 + "/steps", json::object()), {kR0 + "steps is an object, not an array"}},
      {"StepNotAnObject", Set(kS1, 10), {kR0 + "steps[1] is a number, not an object"}},
      {"StepAtMissing", Erase(at1), {kR0 + "steps[1]: missing \"at\""}},
      {"StepPercentMissing", Erase(pct1), {kR0 + "steps[1]: missing \"percent\""}},
      {"AtNotUtc", Set(at1, "2026-12-04T06:00:00+01:00"), {kR0 + "steps[1].at \"2026-12-04T06:00:00+01:00\" is not RFC 3339 in UTC"}},
      {"AtZeroOffsetNotZ", Set(at1, "2026-12-04T06:00:00+00:00"), {kR0 + "steps[1].at \"2026-12-04T06:00:00+00:00\" is not RFC 3339 in UTC"}},
      {"AtNoSuchDay", Set(at1, "2026-02-30T00:00:00Z"), {kR0 + "steps[1].at \"2026-02-30T00:00:00Z\" is not RFC 3339 in UTC"}},
      {"AtFractionalSeconds", Set(at1, "2026-12-04T06:00:00.000Z"), {kR0 + "steps[1].at \"2026-12-04T06:00:00.000Z\" is not RFC 3339 in UTC"}},
      {"AtNotAString", Set(at1, 1796364000), {kR0 + "steps[1].at is a number, not an RFC 3339 string"}},
      {"AtEqualToThePrevious", Set(at1, "2026-12-04T00:00:00Z"), {kR0 + "steps[1].at \"2026-12-04T00:00:00Z\" is not after the step before it"}},
      {"AtBeforeThePrevious", Set(at1, "2026-12-03T00:00:00Z"), {kR0 + "steps[1].at \"2026-12-03T00:00:00Z\" is not after the step before it"}},
      {"PercentDecreasing", Set(pct1, 0.99), {kR0 + "steps[1].percent 0.99 is below the step before it"}},
      {"PercentAbove100", Set("/rollouts/0/steps/2/percent", 100.01), {kR0 + "steps[2].percent 100.01 is not between 0 and 100"}},
      {"PercentNegative", Set("/rollouts/0/steps/0/percent", -1), {kR0 + "steps[0].percent -1 is not between 0 and 100"}},
      {"PercentThreeDecimals", Set(pct1, 10.555), {kR0 + "steps[1].percent 10.555 has more than two decimals"}},
      {"PercentTinyFraction", Set(pct1, 1.001), {kR0 + "steps[1].percent 1.001 has more than two decimals"}},
      {"PercentString", Set(pct1, "10"), {kR0 + "steps[1].percent is a string, not a number"}},
      {"PercentBoolean", Set(pct1, true), {kR0 + "steps[1].percent is a boolean, not a number"}},
      // Cohort.
      {"CohortUnknownWord", Set(r0 + "/cohort", "nodes"), {kR0 + "cohort \"nodes\" is not \"node\" or \"cluster\""}},
      {"CohortWrongCase", Set(r0 + "/cohort", "Cluster"), {kR0 + "cohort \"Cluster\" is not"}},
      {"CohortNotAString", Set(r0 + "/cohort", 1), {kR0 + "cohort 1 is not"}},
      // The rollout's hotfixes map.
      {"HotfixesMissing", Erase(r0 + "/hotfixes"), {kR0 + "missing \"hotfixes\""}},
      {"HotfixesNotAnObject", Set(r0 + "/hotfixes", json::array({"202604.01.4"})), {kR0 + "hotfixes is an array, not an object"}},
      {"HotfixesBadKey", Set(r0 + "/hotfixes", {{"2026.01", "2026.01.4"}}), {kR0 + "hotfixes[\"2026.01\"]: key is not YYYYMM.DD"}},
      {"HotfixesBadValue", Set(r0 + "/hotfixes", {{"202604.01", "latest"}}), {kR0 + "hotfixes[\"202604.01\"]: value \"latest\" is not YYYYMM.DD.PATCH"}},
      {"HotfixesOtherBase", Set(r0 + "/hotfixes", {{"202604.01", "202605.01.1"}}), {kR0 + "hotfixes[\"202604.01\"]: value \"202605.01.1\" is for base \"202605.01\""}},
      {"HotfixesValueNotAString", Set(r0 + "/hotfixes", {{"202604.01", 4}}), {kR0 + "hotfixes[\"202604.01\"]: value 4 is a number, not a string"}},
      // hold_at, halted.
      {"HoldAtNotUtc", Set(r0 + "/hold_at", "2026-12-04T03:00:00-05:00"), {kR0 + "hold_at \"2026-12-04T03:00:00-05:00\" is not RFC 3339 in UTC"}},
      {"HoldAtNotAString", Set(r0 + "/hold_at", true), {kR0 + "hold_at is a boolean, not an RFC 3339 string"}},
      {"HaltedNotBoolean", Set(r0 + "/halted", "true"), {kR0 + "halted is a string, not true or false"}},
      {"HaltedNumber", Set(r0 + "/halted", 1), {kR0 + "halted is a number, not true or false"}},
      // Match shapes.
      {"MatchNotAnObject", Set(m, json::array()), {kR0 + "match is an array, not an object"}},
      {"MatchListNotAnArray", Set(m + "/clusters", "*.example"), {kR0 + "match.clusters is a string, not an array of strings"}},
      {"MatchEntryNotAString", Set(m + "/vm_ids", json::array({1})), {kR0 + "match.vm_ids[0] is a number, not a string"}},
      {"MatchEntryEmpty", Set(m + "/exclude_subscriptions", json::array({""})), {kR0 + "match.exclude_subscriptions[0] \"\" must be 1 to 64 characters"}},
      // The list itself.
      {"RolloutsNotAnArray", Set("/rollouts", json::object()), {f + "rollouts is an object, not an array"}},
      {"RolloutsNull", Set("/rollouts", nullptr), {f + "rollouts is null, not an array"}},
      {"RolloutNotAnObject", Set("/rollouts/1", "anc-2"), {f + "rollouts[1]: the entry is a string, not an object"}},
      // Size limits.
      {"TooManyRollouts", [](json& file) {
         file["rollouts"] = json::array();
         for (size_t i = 0; i <= kMaxRollouts; ++i) file["rollouts"].push_back(MinimalRollout("r" + std::to_string(i)));
       }, {f + "rollouts has 129 entries, more than 128"}},
      {"TooManySteps", Set(r0 + "/steps", ManySteps(kMaxRolloutSteps + 1)), {kR0 + "steps has 65 entries, more than 64"}},
      {"TooManySubscriptions", Set(m + "/subscriptions", ManyStrings(kMaxMatchEntries + 1, "s")), {kR0 + "match.subscriptions has 10001 entries, more than 10000"}},
      {"TooManyExcludedSubscriptions", Set(m + "/exclude_subscriptions", ManyStrings(kMaxMatchEntries + 1, "s")), {kR0 + "match.exclude_subscriptions has 10001 entries, more than 10000"}},
      {"TooManyVmIds", Set(m + "/vm_ids", ManyStrings(kMaxMatchEntries + 1, "v")), {kR0 + "match.vm_ids has 10001 entries, more than 10000"}},
      {"TooManyClusterPatterns", Set(m + "/clusters", ManyStrings(kMaxClusterPatterns + 1, "c")), {kR0 + "match.clusters has 257 entries, more than 256"}},
      {"ClusterPatternTooLong", Set(m + "/clusters", json::array({std::string(kMaxClusterPatternChars + 1, 'c')})), {kR0 + "match.clusters[0] ", "must be 1 to 253 characters"}},
      {"SubscriptionTooLong", Set(m + "/subscriptions", json::array({std::string(65, 's')})), {kR0 + "match.subscriptions[0] ", "must be 1 to 64 characters"}},
      {"TooManyRolloutHotfixes", Set(r0 + "/hotfixes", ManyHotfixes(kMaxRolloutHotfixes + 1)), {kR0 + "hotfixes has more than 256 entries"}},
      // Any component with rollouts takes the hotfixes shape.
      {"OtherComponentWithRolloutsAndAnExtraKey", Set("/version", 2), {"otherComponent.json: top-level key \"version\" is not allowed (only \"hotfixes\" and \"rollouts\")"}, "otherComponent"},
      {"OtherComponentWithRolloutsAndBadHotfixes", Set("/hotfixes", {{"latest", "1"}}), {"otherComponent.json: hotfixes[\"latest\"]: key is not YYYYMM.DD"}, "otherComponent"},
      {"DuplicateJsonKeyInARollout", nullptr, {f + "duplicate key \"halted\""}},
      // Who halted or resumed, when and why: a record the tool writes, refused when malformed,
      // and a halt's note beside a rollout that is not halted (a halt undone by hand).
      {"HaltNoteWithoutHalted", Set(r0 + "/halt_note", {{"at", "2026-12-04T00:00:00Z"}}), {kR0 + "halt_note is only for a halted rollout"}},
      {"HaltNoteWithoutAt", [](json& file) { R0(file)["halted"] = true; R0(file)["halt_note"] = {{"by", "a"}}; }, {kR0 + "halt_note: missing \"at\""}},
      {"HaltNoteUnknownKey", [](json& file) { R0(file)["halted"] = true; R0(file)["halt_note"] = {{"at", "2026-12-04T00:00:00Z"}, {"who", "a"}}; }, {kR0 + "halt_note: unknown key \"who\""}},
      {"HaltNoteReasonTooLong", [](json& file) { R0(file)["halted"] = true; R0(file)["halt_note"] = {{"at", "2026-12-04T00:00:00Z"}, {"reason", std::string(kMaxNoteReasonChars + 1, 'r')}}; }, {kR0 + "halt_note.reason has 1025 bytes, more than 1024"}},
      {"ResumeNoteByNotAscii", Set(r0 + "/resume_note", {{"at", "2026-12-04T00:00:00Z"}, {"by", "b\u00e9a"}}), {kR0 + "resume_note.by ", "must be printable ASCII"}},
      {"ResumeNoteReasonWithANewline", Set(r0 + "/resume_note", {{"at", "2026-12-04T00:00:00Z"}, {"reason", "a\nb"}}), {kR0 + "resume_note.reason ", "must not hold control characters"}},
      {"ResumeNoteNotAnObject", Set(r0 + "/resume_note", "yesterday"), {kR0 + "resume_note is a string, not an object"}},
  };
  // clang-format on
}

class RolloutRefusalTest : public ::testing::TestWithParam<Refusal> {};

TEST_P(RolloutRefusalTest, NamesTheRolloutAndTheField) {
  const Refusal& c = GetParam();
  std::string text;
  if (c.edit) {
    json file = BaseFile();
    c.edit(file);
    text = file.dump();
  } else {
    // Duplicate keys cannot be built with nlohmann: by hand.
    text = R"({"rollouts":[{"name":"anc-1","hotfixes":{},"halted":true,"halted":false,)"
           R"("steps":[{"at":"2026-12-04T00:00:00Z","percent":1}]}]})";
  }
  StatusOr<ComponentConfig> parsed = ParseComponentConfig(c.component, text);
  ASSERT_FALSE(parsed.ok()) << text.substr(0, 400);
  EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
  for (const std::string& want : c.expect) {
    EXPECT_THAT(parsed.status().message(), HasSubstr(want));
  }
  // Errors are bounded: a huge list is never echoed.
  EXPECT_LT(parsed.status().message().size(), 400u) << parsed.status().message();
}

INSTANTIATE_TEST_SUITE_P(EveryError, RolloutRefusalTest, ::testing::ValuesIn(Refusals()),
                         [](const ::testing::TestParamInfo<Refusal>& param_info) {
                           return param_info.param.name;
                         });

TEST(RolloutValidationTest, AtTheLimitsIsAccepted) {
  json file = BaseFile();
  file["rollouts"] = json::array();
  for (size_t i = 0; i < kMaxRollouts; ++i) {
    file["rollouts"].push_back(MinimalRollout("r" + std::to_string(i)));
  }
  json& r = file["rollouts"][0];
  r["steps"] = ManySteps(kMaxRolloutSteps);
  r["hotfixes"] = ManyHotfixes(kMaxRolloutHotfixes);
  r["match"]["subscriptions"] = ManyStrings(kMaxMatchEntries, "s");
  r["match"]["exclude_subscriptions"] = ManyStrings(kMaxMatchEntries, "x");
  r["match"]["vm_ids"] = ManyStrings(kMaxMatchEntries, "v");
  r["match"]["clusters"] = ManyStrings(kMaxClusterPatterns - 1, "c");
  r["match"]["clusters"].push_back(std::string(kMaxClusterPatternChars, 'c'));
  const ComponentConfig config = MustParse(file);
  ASSERT_EQ(config.rollouts.size(), kMaxRollouts);
  EXPECT_EQ(config.rollouts[0].steps.size(), kMaxRolloutSteps);
  EXPECT_EQ(config.rollouts[0].match.vm_ids.size(), kMaxMatchEntries);
  EXPECT_EQ(config.rollouts[0].match.clusters.size(), kMaxClusterPatterns);
}

TEST(RolloutValidationTest, AcceptsWhatTheFormatAllows) {
  json file = BaseFile();
  R0(file)["name"] = "A" + std::string(63, 'z');  // 64 characters
  R0(file)
  ["steps"] = json::parse(R"([{"at": "2026-12-04T00:00:00Z", "percent": 0},
                                     {"at": "2026-12-04T01:00:00Z", "percent": 0.01},
                                     {"at": "2026-12-04T02:00:00Z", "percent": 0.01},
                                     {"at": "2026-12-04T03:00:00Z", "percent": 10.5},
                                     {"at": "2026-12-04T04:00:00Z", "percent": 100}])");
  R0(file)["cohort"] = "cluster";
  R0(file)["hold_at"] = "2026-12-04T03:30:00Z";
  R0(file)["halted"] = true;
  file["rollouts"][1]["name"] = "0._-";
  file["rollouts"].push_back(MinimalRollout("ANC-1"));  // names are case-sensitive
  const ComponentConfig config = MustParse(file);
  ASSERT_EQ(config.rollouts.size(), 3u);
  const Rollout& r = config.rollouts[0];
  EXPECT_EQ(r.cohort, Cohort::kCluster);
  EXPECT_TRUE(r.halted);
  EXPECT_EQ(r.hold_at, T("2026-12-04T03:30:00Z"));
  std::vector<uint32_t> thresholds;
  for (const RolloutStep& s : r.steps) thresholds.push_back(s.threshold);
  EXPECT_THAT(thresholds, ElementsAre(0u, 1u, 1u, 1050u, 10000u));
  // A component other than aksNodeController may carry rollouts too.
  EXPECT_TRUE(MustParse(BaseFile(), "otherComponent").has_rollouts);
}

// A valid name of 63 or 64 characters is named in full in an error (a quoting limit that
// counted the quotes once cut it to 62/63 characters plus "...").
TEST(RolloutValidationTest, ErrorsNameALongValidRolloutInFull) {
  const std::string name = "anc-202604.01.4-eastus-canary-wave-1-" + std::string(27, 'x');
  ASSERT_EQ(name.size(), 64u);
  json file = BaseFile();
  R0(file)["name"] = name;
  R0(file)["steps"][1]["percent"] = 0.5;
  StatusOr<ComponentConfig> parsed = ParseComponentConfig(kAks, file.dump());
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("rollouts[0] \"" + name + "\": steps[1]"));
}

// ---- Monotonicity -----------------------------------------------------------------------

TEST(RolloutMonotonicityTest, RaisingThePercentNeverRemovesANode) {
  std::mt19937 rng(20261204);
  const RolloutTime t0 = T("2026-12-04T00:00:00Z");
  const RolloutTime t1 = T("2026-12-04T06:00:00Z");
  for (int round = 0; round < 20; ++round) {
    const std::string name = RandomName(rng);
    uint32_t lo = rng() % (kBucketCount + 1), hi = rng() % (kBucketCount + 1);
    if (lo > hi) std::swap(lo, hi);
    const Rollout r = Ramp(name, {{t0, lo}, {t1, hi}});
    int in_lo = 0, in_hi = 0;
    for (int n = 0; n < 3000; ++n) {
      const RolloutNode node = MakeRolloutNode(RandomGuid(rng), "", "");
      const bool a = Applies(r, node, t0);
      const bool b = Applies(r, node, t1);
      in_lo += a;
      in_hi += b;
      if (a) {
        EXPECT_TRUE(b) << name << " " << node.vm_id << " " << lo << " -> " << hi;
      }
    }
    EXPECT_LE(in_lo, in_hi) << name;
  }
}

TEST(RolloutMonotonicityTest, ShareIsThePercentWithinSamplingError) {
  std::mt19937 rng(42);
  constexpr int kNodes = 4000;
  std::vector<std::string> vms;
  for (int i = 0; i < kNodes; ++i) vms.push_back(RandomGuid(rng));
  const RolloutTime t0 = T("2026-12-04T00:00:00Z");
  for (int round = 0; round < 12; ++round) {
    const std::string name = RandomName(rng);
    const uint32_t threshold =
        round < 4 ? std::vector<uint32_t>{100, 1050, 5000, 9900}[round] : rng() % kBucketCount;
    const Rollout r = Ramp(name, {{t0, threshold}});
    int in = 0;
    for (const std::string& vm : vms) in += Applies(r, MakeRolloutNode(vm, "", ""), t0);
    const double p = threshold / 10000.0;
    const double sd = std::sqrt(kNodes * p * (1 - p));
    EXPECT_NEAR(in, kNodes * p, 4 * sd + 1) << name << " at " << threshold / 100.0 << "%";
  }
}

TEST(RolloutMonotonicityTest, ARenameDrawsNewBuckets) {
  std::mt19937 rng(9);
  int same = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::string vm = RandomGuid(rng);
    same += RolloutBucket("anc-202604.01.4", vm) == RolloutBucket("anc-202604.01.5", vm);
  }
  EXPECT_LT(same, 5);  // independent draws: about 1000/10000 expected
}

// ---- The operator's view ----------------------------------------------------------------

class RolloutExplainTest : public ::testing::Test {
 protected:
  // 1% at t0, 10.5% at t1, 100% at t2; everyone matches.
  const RolloutTime t0 = T("2026-12-04T00:00:00Z");
  const RolloutTime t1 = T("2026-12-04T06:00:00Z");
  const RolloutTime t2 = T("2026-12-05T00:00:00Z");
  Rollout r = Ramp("anc-202604.01.4", {{t0, 100}, {t1, 1050}, {t2, 10000}});
  const std::string vm_early = VmIdWithBucket("anc-202604.01.4", 0, 100);
  const std::string vm_mid = VmIdWithBucket("anc-202604.01.4", 100, 1050);
  // Bucket 8251 (the first vector).
  const std::string vm_late = "8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8";

  RolloutOutcome Explain(const std::string& vm, RolloutTime now) const {
    return ExplainRollout(r, MakeRolloutNode(vm, kSub, kHost), now);
  }
};

TEST_F(RolloutExplainTest, EntersAtIsTheFirstStepWhoseThresholdExceedsTheBucket) {
  const RolloutTime before = t0 - 1h;
  EXPECT_EQ(Explain(vm_early, before).enters_at, t0);
  EXPECT_EQ(Explain(vm_mid, before).enters_at, t1);
  EXPECT_EQ(Explain(vm_late, before).enters_at, t2);
  const RolloutOutcome late = Explain(vm_late, t1);
  EXPECT_EQ(late.verdict, RolloutVerdict::kNotUnderThreshold);
  EXPECT_EQ(late.bucket, 8251u);
  EXPECT_EQ(late.threshold, 1050u);
  // Already in: when it came in.
  const RolloutOutcome mid = Explain(vm_mid, t1 + 1h);
  EXPECT_EQ(mid.verdict, RolloutVerdict::kApplies);
  EXPECT_EQ(mid.enters_at, t1);
  EXPECT_EQ(Explain(vm_late, t2).verdict, RolloutVerdict::kApplies);
}

TEST_F(RolloutExplainTest, EntersAtIsNullWhenHeldBeforeIt) {
  r.hold_at = t0 + 3h;
  EXPECT_EQ(Explain(vm_early, t0 - 1h).enters_at, t0);
  EXPECT_FALSE(Explain(vm_mid, t0 - 1h).enters_at.has_value());
  EXPECT_FALSE(Explain(vm_late, t2).enters_at.has_value());
  EXPECT_EQ(Explain(vm_late, t2).verdict, RolloutVerdict::kNotUnderThreshold);
  r.hold_at = t1;  // a hold exactly at a step keeps it
  EXPECT_EQ(Explain(vm_mid, t0).enters_at, t1);
  EXPECT_FALSE(Explain(vm_late, t0).enters_at.has_value());
}

TEST_F(RolloutExplainTest, EntersAtIsNullWhenHaltedOrNotMatched) {
  r.halted = true;
  EXPECT_EQ(Explain(vm_early, t2).verdict, RolloutVerdict::kHalted);
  EXPECT_FALSE(Explain(vm_early, t2).enters_at.has_value());
  r.halted = false;
  r.match.subscriptions = {kOtherSub};
  EXPECT_EQ(Explain(vm_early, t2).verdict, RolloutVerdict::kSubscriptionNotListed);
  EXPECT_FALSE(Explain(vm_early, t2).enters_at.has_value());
  r.match.subscriptions.clear();
  // Every step too small for the bucket.
  r.steps = {{t0, 100}, {t1, 5000}};
  EXPECT_FALSE(Explain(vm_late, t0).enters_at.has_value());
}

TEST_F(RolloutExplainTest, AgreesWithTheServicePath) {
  r.hold_at = t1 + 1h;
  std::vector<Rollout> variants = {r, r, r};
  variants[1].cohort = Cohort::kCluster;
  variants[2].match.clusters = {"*.westus.azmk8s.io"};
  std::mt19937 rng(17);
  for (int i = 0; i < 1000; ++i) {
    const RolloutNode node =
        MakeRolloutNode(RandomGuid(rng), i % 3 ? kSub : "",
                        i % 2 ? kHost : "c" + std::to_string(i) + ".hcp.westus.azmk8s.io:443");
    for (RolloutTime now : {t0 - 1s, t0, t1, t2}) {
      for (const Rollout& v : variants) {
        EXPECT_EQ(ExplainRollout(v, node, now).verdict == RolloutVerdict::kApplies,
                  Applies(v, node, now));
      }
    }
  }
}

TEST_F(RolloutExplainTest, StateAt) {
  EXPECT_EQ(StateAt(r, t0 - 1s), RolloutState::kScheduled);
  EXPECT_EQ(StateAt(r, t0), RolloutState::kRamping);
  EXPECT_EQ(StateAt(r, t1 + 1h), RolloutState::kRamping);
  EXPECT_EQ(StateAt(r, t2), RolloutState::kComplete);
  EXPECT_EQ(StateAt(r, t2 + 24h * 365), RolloutState::kComplete);
  r.hold_at = t1 + 1h;
  EXPECT_EQ(StateAt(r, t0), RolloutState::kRamping);  // the hold is ahead
  EXPECT_EQ(StateAt(r, t1 + 1h), RolloutState::kHeld);
  EXPECT_EQ(StateAt(r, t2), RolloutState::kHeld);
  r.hold_at = t0 - 1h;  // held before it began
  EXPECT_EQ(StateAt(r, t0 - 2h), RolloutState::kScheduled);
  EXPECT_EQ(StateAt(r, t0), RolloutState::kHeld);
  r.hold_at.reset();
  r.halted = true;
  EXPECT_EQ(StateAt(r, t0 - 1s), RolloutState::kHalted);
  EXPECT_EQ(StateAt(r, t2), RolloutState::kHalted);
  // A ramp that stops below 100%: complete after its last step.
  Rollout partial = Ramp("p", {{t0, 100}, {t1, 5000}});
  EXPECT_EQ(StateAt(partial, t1 - 1s), RolloutState::kRamping);
  EXPECT_EQ(StateAt(partial, t1), RolloutState::kComplete);
  // A hold after the last step freezes nothing: still complete, not held.
  partial.hold_at = t1 + 1h;
  EXPECT_EQ(StateAt(partial, t1 + 2h), RolloutState::kComplete);
  EXPECT_STREQ(RolloutStateName(RolloutState::kScheduled), "scheduled");
  EXPECT_STREQ(RolloutStateName(RolloutState::kRamping), "ramping");
  EXPECT_STREQ(RolloutStateName(RolloutState::kComplete), "complete");
  EXPECT_STREQ(RolloutStateName(RolloutState::kHeld), "held");
  EXPECT_STREQ(RolloutStateName(RolloutState::kHalted), "halted");
}

TEST_F(RolloutExplainTest, NextStep) {
  auto next_at = [&](RolloutTime now) -> std::optional<RolloutTime> {
    std::optional<RolloutStep> s = NextStep(r, now);
    if (s) return s->at;
    return std::nullopt;
  };
  EXPECT_EQ(next_at(t0 - 1h), t0);
  ASSERT_TRUE(NextStep(r, t0 - 1h).has_value());
  EXPECT_EQ(NextStep(r, t0 - 1h)->threshold, 100u);
  EXPECT_EQ(next_at(t0), t1);  // the step at now has applied
  EXPECT_EQ(next_at(t1 + 1h), t2);
  ASSERT_TRUE(NextStep(r, t1 + 1h).has_value());
  EXPECT_EQ(NextStep(r, t1 + 1h)->threshold, 10000u);
  EXPECT_EQ(next_at(t2), std::nullopt);
  // Steps that do not change the threshold are not "next".
  Rollout flat = Ramp("f", {{t0, 1000}, {t1, 1000}, {t2, 5000}});
  std::optional<RolloutStep> s = NextStep(flat, t0);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->at, t2);
  // Held: only steps at or before hold_at.
  r.hold_at = t1;
  EXPECT_EQ(next_at(t0), t1);
  EXPECT_EQ(next_at(t1), std::nullopt);
  r.hold_at = t0 + 1h;
  EXPECT_EQ(next_at(t0 - 1h), t0);
  EXPECT_EQ(next_at(t0), std::nullopt);
  EXPECT_EQ(next_at(t2 + 1h), std::nullopt);
  r.hold_at.reset();
  r.halted = true;
  EXPECT_EQ(next_at(t0 - 1h), std::nullopt);
}

TEST(RolloutVerdictTest, NamesAreStable) {
  EXPECT_STREQ(RolloutVerdictName(RolloutVerdict::kApplies), "applies");
  EXPECT_STREQ(RolloutVerdictName(RolloutVerdict::kHalted), "halted");
  EXPECT_STREQ(RolloutVerdictName(RolloutVerdict::kNoCohortKey),
               "no vmId to bucket by (node cohort)");
  EXPECT_STREQ(RolloutVerdictName(RolloutVerdict::kNotUnderThreshold),
               "bucket not under threshold");
}

}  // namespace
}  // namespace hotfix::service
