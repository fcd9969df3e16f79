// The automatic halt (docs/ROLLOUTS.md, "Automatic halt"): the decision as a pure function
// (boundaries, the minimum sample, the absolute limit, distinct subscriptions, no data), the
// `auto_halt` object's validation, the controller over a fake evidence source (nodes counted
// once, halt, sticky, a halt read back from another replica's record, held without evidence,
// nothing applied before the first evaluation, a person resuming, a truncated window),
// Prometheus' answers parsed (only the asked-for series kept), the selector, and repeated
// reports.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/text.h"
#include "rollout_example.h"
#include "service/control/auto_halt_controller.h"
#include "service/control/node_evidence.h"
#include "service/ops/prometheus_client.h"
#include "service/ops/prometheus_outcomes.h"
#include "service/recent_reports.h"
#include "service/rollout/auto_halt.h"
#include "service/rollout/rollout.h"
#include "service/store/component_store.h"

namespace hotfix::service {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;  // NOLINT(build/namespaces): literals only
using ::testing::HasSubstr;

AutoHaltPolicy Policy(uint32_t percent_x100, uint64_t min_reports,
                      std::optional<uint64_t> max_failures = std::nullopt) {
  AutoHaltPolicy p;
  p.max_failure_percent = percent_x100;
  p.min_reports = min_reports;
  p.max_failures = max_failures;
  return p;
}

// ---- the condition ----------------------------------------------------------------------

TEST(HaltCondition, NeedsTheMinimumSample) {
  const AutoHaltPolicy p = Policy(500, 20);       // 5 %, 20 reports
  EXPECT_FALSE(HaltConditionHolds(p, {19, 19}));  // every report a failure, one short
  EXPECT_TRUE(HaltConditionHolds(p, {20, 19}));
}

TEST(HaltCondition, TheShareMustExceedThePercentStrictly) {
  const AutoHaltPolicy p = Policy(500, 20);
  EXPECT_FALSE(HaltConditionHolds(p, {20, 1}));  // exactly 5 %
  EXPECT_TRUE(HaltConditionHolds(p, {20, 2}));   // 10 %
  EXPECT_FALSE(HaltConditionHolds(p, {100, 5}));
  EXPECT_TRUE(HaltConditionHolds(p, {100, 6}));
  // Two decimals are exact: 10.55 % of 10,000 reports is 1,055 failures.
  const AutoHaltPolicy fine = Policy(1055, 1);
  EXPECT_FALSE(HaltConditionHolds(fine, {10000, 1055}));
  EXPECT_TRUE(HaltConditionHolds(fine, {10000, 1056}));
}

TEST(HaltCondition, ZeroPercentHaltsOnAnyFailureOnceTheSampleIsThere) {
  const AutoHaltPolicy p = Policy(0, 3);
  EXPECT_FALSE(HaltConditionHolds(p, {3, 0}));
  EXPECT_FALSE(HaltConditionHolds(p, {2, 1}));
  EXPECT_TRUE(HaltConditionHolds(p, {3, 1}));
}

TEST(HaltCondition, OneHundredPercentNeverHaltsByShare) {
  EXPECT_FALSE(HaltConditionHolds(Policy(10000, 1), {50, 50}));
}

TEST(HaltCondition, MaxFailuresHaltsWhateverTheSample) {
  const AutoHaltPolicy p = Policy(5000, 1000, 3);
  EXPECT_FALSE(HaltConditionHolds(p, {2, 2}));
  EXPECT_TRUE(HaltConditionHolds(p, {3, 3}));
  EXPECT_TRUE(HaltConditionHolds(p, {999, 3}));  // 0.3 %, under the share, over the count
}

TEST(HaltCondition, NoDataNeverHalts) {
  EXPECT_FALSE(HaltConditionHolds(Policy(0, 1), {0, 0}));
  EXPECT_FALSE(HaltConditionHolds(Policy(0, 1, 1), {0, 0}));
}

TEST(HaltCondition, LargestCountsDoNotOverflow) {
  const AutoHaltPolicy p = Policy(9999, 1);
  EXPECT_FALSE(HaltConditionHolds(p, {kMaxAutoHaltCount, kMaxAutoHaltCount / 10000 * 9999}));
  EXPECT_TRUE(HaltConditionHolds(p, {kMaxAutoHaltCount, kMaxAutoHaltCount}));
}

TEST(HaltCondition, EvidenceSaysWhy) {
  EXPECT_EQ(HaltEvidence(Policy(500, 20, 3), {10, 3}), "failed nodes 3 >= max_failures 3");
  EXPECT_EQ(HaltEvidence(Policy(500, 20), {20, 2}),
            "failed nodes 2 of 20 reporting (10.00%) > 5.00% with 20 or more");
  AutoHaltPolicy p = Policy(500, 20, 3);
  p.min_failed_subscriptions = 2;
  EXPECT_EQ(HaltEvidence(p, {10, 3, 2}),
            "failed nodes 3 >= max_failures 3, from 2 subscriptions (2 needed)");
}

TEST(HaltCondition, MinFailedSubscriptionsKeepsOneTenantFromHaltingAlone) {
  AutoHaltPolicy p = Policy(500, 10, 3);
  p.min_failed_subscriptions = 2;
  EXPECT_FALSE(HaltConditionHolds(p, {100, 100, 1}));  // every failure from one subscription
  EXPECT_TRUE(HaltConditionHolds(p, {100, 3, 2}));
  EXPECT_FALSE(HaltConditionHolds(p, {100, 2, 2}));  // neither the share nor max_failures
}

TEST(PolicyLabel, NamesEveryThresholdAndNothingElse) {
  AutoHaltPolicy p = Policy(500, 20, 3);
  const std::string label = PolicyLabel(p);
  // printf 'max_failure_percent=500;min_reports=20;max_failures=3;min_failed_subscriptions=' |
  //   sha256sum | cut -c1-12
  EXPECT_EQ(label, "6e085f236a23");
  AutoHaltPolicy q = p;
  q.since = T("2026-12-04T00:00:00Z");  // since is the evidence's key, not the policy's
  EXPECT_EQ(PolicyLabel(q), label);
  for (const AutoHaltPolicy& changed : {Policy(501, 20, 3), Policy(500, 21, 3), Policy(500, 20)}) {
    EXPECT_NE(PolicyLabel(changed), label);
  }
  q.min_failed_subscriptions = 1;
  EXPECT_NE(PolicyLabel(q), label);
}

// ---- validation ---------------------------------------------------------------------------

json WithAutoHalt(json auto_halt) {
  json r = ExampleRollout("anc-1");
  r["auto_halt"] = std::move(auto_halt);
  return json::array({r});
}

TEST(AutoHaltPolicyParse, AcceptsTheDocumentedShape) {
  auto parsed = ParseRollouts(WithAutoHalt({{"max_failure_percent", 5.25},
                                            {"min_reports", 20},
                                            {"max_failures", 3},
                                            {"min_failed_subscriptions", 2},
                                            {"since", "2026-12-04T03:00:00Z"}}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Rollout& r = parsed->at(0);
  ASSERT_TRUE(r.auto_halt.has_value());
  EXPECT_EQ(r.auto_halt->max_failure_percent, 525u);
  EXPECT_EQ(r.auto_halt->min_reports, 20u);
  EXPECT_EQ(r.auto_halt->max_failures, std::optional<uint64_t>(3));
  EXPECT_EQ(r.auto_halt->min_failed_subscriptions, std::optional<uint64_t>(2));
  EXPECT_EQ(AutoHaltSince(r), T("2026-12-04T03:00:00Z"));
}

TEST(AutoHaltPolicyParse, SinceDefaultsToTheFirstStep) {
  auto parsed = ParseRollouts(WithAutoHalt({{"max_failure_percent", 5}, {"min_reports", 20}}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_FALSE(parsed->at(0).auto_halt->max_failures.has_value());
  EXPECT_EQ(AutoHaltSince(parsed->at(0)), T("2026-12-04T00:00:00Z"));
}

TEST(AutoHaltPolicyParse, RefusesWhatItShould) {
  const std::pair<json, std::string> cases[] = {
      {json::array(), "auto_halt is an array, not an object"},
      {{{"max_failure_percent", 5}}, "auto_halt: missing \"min_reports\""},
      {{{"min_reports", 5}}, "auto_halt: missing \"max_failure_percent\""},
      {{{"max_failure_percent", 5}, {"min_reports", 20}, {"window", "1h"}},
       "auto_halt: unknown key \"window\""},
      {{{"max_failure_percent", 100.5}, {"min_reports", 20}}, "is not between 0 and 100"},
      {{{"max_failure_percent", -1}, {"min_reports", 20}}, "is not between 0 and 100"},
      {{{"max_failure_percent", 5.125}, {"min_reports", 20}}, "has more than two decimals"},
      {{{"max_failure_percent", "5"}, {"min_reports", 20}}, "is a string, not a number"},
      {{{"max_failure_percent", 5}, {"min_reports", 0}},
       "auto_halt.min_reports 0 is not between 1"},
      {{{"max_failure_percent", 5}, {"min_reports", -3}},
       "auto_halt.min_reports -3 is not between"},
      {{{"max_failure_percent", 5}, {"min_reports", 2.5}}, "is a number, not an integer"},
      {{{"max_failure_percent", 5}, {"min_reports", 1}, {"max_failures", 0}},
       "auto_halt.max_failures 0 is not between 1"},
      {{{"max_failure_percent", 5}, {"min_reports", 1}, {"max_failures", 2199023255553}},
       "is not between 1 and 1099511627776"},
      {{{"max_failure_percent", 5}, {"min_reports", 1}, {"since", "yesterday"}},
       "auto_halt.since \"yesterday\" is not RFC 3339"},
      {{{"max_failure_percent", 5}, {"min_reports", 1}, {"min_failed_subscriptions", 0}},
       "auto_halt.min_failed_subscriptions 0 is not between 1"},
  };
  for (const auto& [auto_halt, want] : cases) {
    auto parsed = ParseRollouts(WithAutoHalt(auto_halt));
    ASSERT_FALSE(parsed.ok()) << auto_halt.dump();
    EXPECT_THAT(parsed.status().message(), HasSubstr(want)) << auto_halt.dump();
    EXPECT_THAT(parsed.status().message(), HasSubstr("rollouts[0] \"anc-1\"")) << auto_halt.dump();
  }
}

// ---- the controller -------------------------------------------------------------------------

constexpr char kAks[] = "aksNodeController";

// Evidence a test sets; counts the fetches (atomically: the background test reads the count
// while the controller's thread fetches; the other fields are for one-thread tests).
class FakeSource : public OutcomeSource {
 public:
  StatusOr<OutcomeEvidence> Fetch(const std::vector<EvidenceRequest>& requests,
                                  RolloutTime now) override {
    ++fetches;
    last_requests = requests;
    last_now = now;
    return next;
  }
  StatusOr<OutcomeEvidence> next = OutcomeEvidence{};
  std::atomic<int> fetches{0};
  std::vector<EvidenceRequest> last_requests;
  RolloutTime last_now;
};

// One rollout at 10 % from 00:00 and 100 % from 12:00, halting at 5 % of 20 or 3 failed nodes;
// a second rollout without auto_halt beside it.
json AutoHaltFile(const std::string& since = "") {
  json r = json::object();
  r["name"] = "canary";
  r["hotfixes"] = {{"202604.01", "202604.01.4"}};
  r["steps"] = json::array({{{"at", "2026-12-04T00:00:00Z"}, {"percent", 10}},
                            {{"at", "2026-12-04T12:00:00Z"}, {"percent", 100}}});
  r["auto_halt"] = {{"max_failure_percent", 5}, {"min_reports", 20}, {"max_failures", 3}};
  if (!since.empty()) r["auto_halt"]["since"] = since;
  json plain = r;
  plain["name"] = "plain";
  plain.erase("auto_halt");
  return {{"hotfixes", {{"202604.01", "202604.01.3"}}}, {"rollouts", {r, plain}}};
}

std::string VmId(int n) { return "abcdef00-0000-4000-8000-" + std::to_string(100000000000 + n); }

std::string Upper(std::string s) {
  for (char& c : s) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  return s;
}

// Nodes first..last reporting; those from failed_first on failed, in subscription "sub-<n%subs>".
NodeSets Nodes(int first, int last, int failed_first = 1 << 30, int subs = 1) {
  NodeEvidence e;
  const EvidenceKey k{"c", "r", RolloutTime{}};
  for (int n = first; n <= last; ++n) {
    e.Add(k, VmId(n), "sub-" + std::to_string(n % subs), n >= failed_first);
  }
  return e.MergeReadBack(k, {}, std::nullopt, RolloutTime{});
}

const EvidenceKey kCanaryKey{"aksNodeController", "canary", T("2026-12-04T00:00:00Z")};

struct ControllerTest : ::testing::Test {
  ControllerTest() { store.Set(AutoHaltFile()); }

  std::unique_ptr<AutoHaltController> Make(OutcomeSource* src, NodeEvidence* own = nullptr) {
    AutoHaltControllerOptions options;
    options.source = src;
    options.evidence = own != nullptr ? own : &evidence;
    options.now = [this] { return now; };
    options.served = [this](const RolloutKey&) { return served; };
    return std::make_unique<AutoHaltController>(&store, std::move(options));
  }
  // The canary as the controller serves it.
  const Rollout& Canary(const AutoHaltController& c) {
    held = c.Current();
    return held->components.at(kAks)->rollouts.at(0);
  }
  // What Prometheus answers about the canary: every replica's sets, merged.
  void Evidence(NodeSets sets, std::optional<RolloutTime> halted_at = std::nullopt,
                std::optional<RolloutTime> from = std::nullopt, EvidenceKey key = kCanaryKey) {
    OutcomeEvidence e;
    e.rollouts[key] = {std::move(sets), halted_at, from};
    e.known.insert({kAks, "canary"});
    source.next = e;
  }

  SwappableStore store;
  FakeSource source;
  NodeEvidence evidence;  // this replica's
  RolloutTime now = T("2026-12-04T06:00:00Z");
  bool served = false;
  std::shared_ptr<const StoreSnapshot> held;
};

TEST_F(ControllerTest, NothingIsAppliedBeforeTheFirstEvaluation) {
  auto c = Make(&source);
  EXPECT_TRUE(Canary(*c).halted);
  EXPECT_EQ(c->stats().ok + c->stats().unavailable, 0u);
  EXPECT_FALSE(c->Current()->components.at(kAks)->rollouts.at(1).halted);  // no auto_halt
  EXPECT_EQ(source.fetches, 0);
  EXPECT_TRUE(evidence.Exported().empty());  // nothing exported before it was read back
}

TEST_F(ControllerTest, AppliesWhileTheEvidenceIsGoodAndHaltsWhenItSaysSo) {
  auto c = Make(&source);
  Evidence(Nodes(1, 30, 30));  // 30 nodes, one failed
  c->EvaluateNow();
  ASSERT_EQ(source.last_requests.size(), 1u);
  EXPECT_EQ(source.last_requests[0].key, kCanaryKey);  // since: the first step's at
  EXPECT_EQ(source.last_requests[0].lookback, std::chrono::seconds(std::chrono::hours(24)));
  EXPECT_EQ(source.last_requests[0].policy, PolicyLabel(*Canary(*c).auto_halt));
  EXPECT_EQ(source.last_now, now);
  const Rollout& applied = Canary(*c);
  EXPECT_FALSE(applied.halted);
  EXPECT_FALSE(applied.hold_at.has_value());
  EXPECT_EQ(c->States().at({kAks, "canary"}).tally, (OutcomeTally{30, 1, 1}));
  // Read back once: later reads take only what changed since (and a minute and an interval
  // for late scrapes), and the sets are exported.
  EXPECT_TRUE(source.last_requests[0].full);
  c->EvaluateNow();
  EXPECT_FALSE(source.last_requests[0].full);
  EXPECT_EQ(source.last_requests[0].lookback, std::chrono::seconds(90));
  ASSERT_EQ(evidence.Exported().size(), 1u);
  EXPECT_EQ(evidence.Exported()[0].sets, Nodes(1, 30, 30));

  Evidence(Nodes(1, 35, 28));  // 8 failed nodes of 35
  now += 1min;
  c->EvaluateNow();
  EXPECT_TRUE(Canary(*c).halted);
  const AutoHaltState st = c->States().at({kAks, "canary"});
  EXPECT_EQ(st.halted_at, now);
  EXPECT_EQ(st.evidence, "failed nodes 8 >= max_failures 3");
  // The store's generation is kept; the other rollout is untouched.
  EXPECT_EQ(c->Current()->generation, store.Current()->generation);
  EXPECT_FALSE(c->Current()->components.at(kAks)->rollouts.at(1).halted);
}

TEST_F(ControllerTest, ReadsInFullFirstEveryTenMinutesAndAfterALongFailure) {
  auto c = Make(&source);
  Evidence(Nodes(1, 5));
  auto read = [&](std::chrono::seconds after) {
    now += after;
    c->EvaluateNow();
    return source.last_requests.at(0);
  };
  EXPECT_TRUE(read(0s).full);
  EvidenceRequest r = read(30s);
  EXPECT_FALSE(r.full);
  EXPECT_EQ(r.lookback, 30s + 90s);
  for (int i = 2; i < 20; ++i) EXPECT_FALSE(read(30s).full) << i;  // 9.5 minutes in
  r = read(30s);  // ten minutes since the last full read
  EXPECT_TRUE(r.full);
  EXPECT_EQ(r.lookback, 300s);  // not the first read: a few minutes back is enough
  source.next = Status::Unavailable("down");
  read(30s);
  read(3min);
  Evidence(Nodes(1, 5));
  EXPECT_TRUE(read(30s).full);  // four minutes without a good read: read everything again
}

TEST_F(ControllerTest, ANodeCountsOnceWhateverItSendsToWhicheverReplica) {
  // One node: every outcome, to this replica and (as read back) to two others, many times.
  NodeEvidence other1, other2;
  for (int i = 0; i < 50; ++i) {
    for (NodeEvidence* e : {&evidence, &other1, &other2}) {
      e->Add(kCanaryKey, VmId(7), "sub-a", i % 2 == 0);
      e->Add(kCanaryKey, Upper(VmId(7)), "SUB-A", true);  // the same node, other case
    }
  }
  NodeSets read = other1.MergeReadBack(kCanaryKey, {}, std::nullopt, RolloutTime{});
  read.Merge(other2.MergeReadBack(kCanaryKey, {}, std::nullopt, RolloutTime{}));
  read.Merge(read);  // a second Prometheus with the same series
  Evidence(read);
  auto c = Make(&source);
  c->EvaluateNow();
  EXPECT_EQ(c->States().at({kAks, "canary"}).tally, (OutcomeTally{1, 1, 1}));
}

TEST_F(ControllerTest, ThisReplicasOwnReportsCountBeforePrometheusHasThem) {
  auto c = Make(&source);
  Evidence(Nodes(1, 10));
  for (int n = 11; n <= 15; ++n) evidence.Add(kCanaryKey, VmId(n), "sub-0", true);
  c->EvaluateNow();
  EXPECT_EQ(c->States().at({kAks, "canary"}).tally, (OutcomeTally{15, 5, 1}));
  EXPECT_TRUE(Canary(*c).halted);
}

TEST_F(ControllerTest, StaysHaltedThroughLaterSuccessesAndLostEvidence) {
  auto c = Make(&source);
  Evidence(Nodes(1, 20, 18));
  c->EvaluateNow();
  ASSERT_TRUE(Canary(*c).halted);
  // Prometheus forgot (or a restart of it): this replica remembers.
  Evidence({});
  now += 1h;
  c->EvaluateNow();
  EXPECT_TRUE(Canary(*c).halted);
  source.next = Status::Unavailable("connection refused");
  c->EvaluateNow();
  EXPECT_TRUE(Canary(*c).halted);
  EXPECT_EQ(c->stats().ok, 2u);
  EXPECT_EQ(c->stats().unavailable, 1u);
}

TEST_F(ControllerTest, ARestartedReplicaTakesTheHaltBackFromARecord) {
  // The sets no longer say so (a thousand successes since), but a replica recorded the halt.
  Evidence(Nodes(1, 2000), T("2026-12-04T02:00:00Z"));
  NodeEvidence fresh;
  auto restarted = Make(&source, &fresh);
  restarted->EvaluateNow();
  EXPECT_TRUE(Canary(*restarted).halted);
  const AutoHaltState st = restarted->States().at({kAks, "canary"});
  EXPECT_EQ(st.halted_at, T("2026-12-04T02:00:00Z"));
  EXPECT_THAT(st.evidence, HasSubstr("lp_rollout_halt_record"));
}

TEST_F(ControllerTest, AWindowStartingAfterSinceIsTruncated) {
  auto c = Make(&source);
  Evidence(Nodes(1, 5));  // nothing read back says when it started: from now (06:00)
  c->EvaluateNow();
  AutoHaltState st = c->States().at({kAks, "canary"});
  EXPECT_TRUE(st.truncated);
  EXPECT_EQ(st.evidence_from, now);
  EXPECT_FALSE(Canary(*c).halted);  // truncation never halts nor holds
  // Another replica carried it from since: not truncated.
  NodeEvidence fresh;
  auto other = Make(&source, &fresh);
  Evidence(Nodes(1, 5), std::nullopt, T("2026-12-04T00:00:00Z"));
  other->EvaluateNow();
  st = other->States().at({kAks, "canary"});
  EXPECT_FALSE(st.truncated);
  EXPECT_EQ(st.evidence_from, T("2026-12-04T00:00:00Z"));
  // A since in the future is never truncated.
  store.Set(AutoHaltFile("2026-12-05T00:00:00Z"));
  NodeEvidence third;
  auto early = Make(&source, &third);
  source.next = OutcomeEvidence{};
  early->EvaluateNow();
  EXPECT_FALSE(early->States().at({kAks, "canary"}).truncated);
}

TEST_F(ControllerTest, WithoutEvidenceItHoldsWhereItWasAndNeverAdvances) {
  auto c = Make(&source);
  Evidence(Nodes(1, 5));
  c->EvaluateNow();  // 06:00, at 10 %
  source.next = Status::Unavailable("prometheus url: connection refused");
  now = T("2026-12-04T13:00:00Z");  // past the 100 % step
  c->EvaluateNow();
  const Rollout& held_rollout = Canary(*c);
  EXPECT_FALSE(held_rollout.halted);
  ASSERT_TRUE(held_rollout.hold_at.has_value());
  EXPECT_EQ(*held_rollout.hold_at, T("2026-12-04T06:00:00Z"));
  EXPECT_EQ(ThresholdAt(held_rollout, now), 1000u);  // still 10 %
  const AutoHaltState st = c->States().at({kAks, "canary"});
  EXPECT_FALSE(st.signal_ok);
  EXPECT_THAT(st.signal_error, HasSubstr("connection refused"));
  // The evidence returns: the ramp goes on.
  Evidence(Nodes(1, 5));
  c->EvaluateNow();
  EXPECT_FALSE(Canary(*c).hold_at.has_value());
}

TEST_F(ControllerTest, WithoutAPrometheusEveryAutoHaltingRolloutIsHeld) {
  auto c = Make(nullptr);
  c->EvaluateNow();
  EXPECT_TRUE(Canary(*c).halted);
  EXPECT_EQ(c->States().at({kAks, "canary"}).signal_error, "no --prometheus-url");
}

TEST_F(ControllerTest, ASeriesMissingForARolloutThisReplicaServedIsNoEvidence) {
  auto c = Make(&source);
  served = true;
  source.next = OutcomeEvidence{};  // Prometheus answers, but knows nothing of the canary
  c->EvaluateNow();
  EXPECT_THAT(c->States().at({kAks, "canary"}).signal_error, HasSubstr("is it scraping"));
  EXPECT_TRUE(Canary(*c).halted);  // never evaluated well: applied to no one
  served = false;                  // not served here: no reports yet is simply no reports
  c->EvaluateNow();
  EXPECT_TRUE(c->States().at({kAks, "canary"}).signal_ok);
  EXPECT_FALSE(Canary(*c).halted);
}

TEST_F(ControllerTest, MovingSinceResumesOnNewEvidence) {
  auto c = Make(&source);
  Evidence(Nodes(1, 20, 18), T("2026-12-04T01:00:00Z"));
  c->EvaluateNow();
  ASSERT_TRUE(Canary(*c).halted);
  store.Set(AutoHaltFile("2026-12-04T04:00:00Z"));
  EXPECT_TRUE(Canary(*c).halted);  // not judged under the new policy yet
  const EvidenceKey moved{kAks, "canary", T("2026-12-04T04:00:00Z")};
  Evidence(Nodes(100, 109), std::nullopt, std::nullopt, moved);
  c->EvaluateNow();
  EXPECT_EQ(source.last_requests.at(0).key, moved);
  EXPECT_FALSE(Canary(*c).halted);
  EXPECT_EQ(c->States().at({kAks, "canary"}).tally, (OutcomeTally{10, 0, 0}));
  // The old key's sets are forgotten: memory follows the file.
  ASSERT_EQ(evidence.Exported().size(), 1u);
  EXPECT_EQ(evidence.Exported()[0].key, moved);
}

TEST_F(ControllerTest, ChangingAThresholdJudgesAfreshUnderItsOwnRecord) {
  auto c = Make(&source);
  Evidence(Nodes(1, 20, 18));
  c->EvaluateNow();
  ASSERT_TRUE(Canary(*c).halted);
  json file = AutoHaltFile();
  file["rollouts"][0]["auto_halt"]["max_failures"] = 100;
  file["rollouts"][0]["auto_halt"]["max_failure_percent"] = 50;
  store.Set(file);
  c->EvaluateNow();  // 3 of 20 is 15 %, under 50 %; the old record has the old policy
  EXPECT_FALSE(Canary(*c).halted);
  EXPECT_NE(source.last_requests.at(0).policy, PolicyLabel(Policy(500, 20, 3)));
}

TEST_F(ControllerTest, NoRolloutWithAutoHaltNoEvaluation) {
  json file = AutoHaltFile();
  file["rollouts"][0].erase("auto_halt");
  store.Set(file);
  auto c = Make(&source);
  c->EvaluateNow();
  EXPECT_EQ(source.fetches, 0);
  EXPECT_TRUE(c->States().empty());
  EXPECT_EQ(c->stats().ok + c->stats().unavailable, 0u);
  EXPECT_FALSE(Canary(*c).halted);
}

TEST_F(ControllerTest, OneFetchForEveryRollout) {
  json file = AutoHaltFile();
  for (int i = 0; i < 63; ++i) {
    json r = file["rollouts"][0];
    r["name"] = "canary-" + std::to_string(i);
    file["rollouts"].push_back(r);
  }
  store.Set(file);
  auto c = Make(&source);
  c->EvaluateNow();
  EXPECT_EQ(source.fetches, 1);
  EXPECT_EQ(source.last_requests.size(), 64u);
  EXPECT_EQ(c->States().size(), 64u);
}

TEST_F(ControllerTest, TheBackgroundThreadEvaluatesAtOnceAndWhenWoken) {
  AutoHaltControllerOptions options;
  options.source = &source;
  options.evidence = &evidence;
  options.interval = std::chrono::hours(1);
  AutoHaltController c(&store, std::move(options));
  c.Start();
  for (int i = 0; i < 1000 && c.States().empty(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(c.States().size(), 1u);
  const int before = source.fetches;
  c.Wake();
  for (int i = 0; i < 1000 && source.fetches == before; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GT(source.fetches, before);
  c.Stop();
}

// ---- gates ---------------------------------------------------------------------------------

TEST(GateParse, AcceptsTheDocumentedShapeAndRefusesTheRest) {
  json r = ExampleRollout("anc-1");
  r["steps"] =
      json::array({{{"at", "2026-12-04T00:00:00Z"}, {"percent", 1}},
                   {{"at", "2026-12-04T06:00:00Z"},
                    {"percent", 25},
                    {"gate", {{"min_nodes", 50}, {"max_failure_percent", 2}, {"bake", "1h"}}}}});
  auto parsed = ParseRollouts(json::array({r}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const RolloutStep& step = parsed->at(0).steps.at(1);
  ASSERT_TRUE(step.gate.has_value());
  EXPECT_EQ(step.gate->min_nodes, 50u);
  EXPECT_EQ(step.gate->max_failure_percent, std::optional<uint32_t>(200));
  EXPECT_EQ(step.gate->bake, std::chrono::seconds(3600));
  EXPECT_FALSE(parsed->at(0).steps.at(0).gate.has_value());

  const std::pair<json, std::string> bad[] = {
      {{{"min_nodes", 0}}, "steps[1].gate.min_nodes 0 is not between 1"},
      {{{"bake", "1 hour"}}, "steps[1].gate.bake"},
      {{{"bake", "31d"}}, "steps[1].gate.bake"},
      {{{"bake", "1500ms"}}, "is not whole seconds"},
      {{{"max_failure_percent", 101}}, "is not between 0 and 100"},
      {{{"nodes", 5}}, "steps[1].gate: unknown key \"nodes\""},
      {json::object(), "steps[1].gate is empty"},
      {json::array(), "steps[1].gate is an array, not an object"},
  };
  for (const auto& [gate, want] : bad) {
    json b = r;
    b["steps"][1]["gate"] = gate;
    auto p = ParseRollouts(json::array({b}));
    ASSERT_FALSE(p.ok()) << gate.dump();
    EXPECT_THAT(p.status().message(), HasSubstr(want)) << gate.dump();
  }
  json first = r;
  first["steps"][0]["gate"] = {{"min_nodes", 1}};
  EXPECT_THAT(ParseRollouts(json::array({first})).status().message(),
              HasSubstr("steps[0].gate: the first step has no step before it"));
}

TEST(GateCondition, NodesAndShare) {
  StepGate g;
  g.min_nodes = 10;
  g.max_failure_percent = 200;  // 2 %
  EXPECT_FALSE(GateHolds(g, {9, 0, 0}));
  EXPECT_EQ(GateMissing(g, {9, 0, 0}), "9 of 10 reporting nodes");
  EXPECT_TRUE(GateHolds(g, {100, 2, 1}));  // exactly 2 % is not over
  EXPECT_FALSE(GateHolds(g, {100, 3, 1}));
  EXPECT_EQ(GateMissing(g, {100, 3, 1}), "failed nodes 3 of 100 (3.00%) > 2.00%");
  EXPECT_EQ(GateMissing(g, {100, 2, 1}), "");
  EXPECT_FALSE(GateHolds(StepGate{}, {0, 0, 0}));  // never on no evidence
}

// A canary at 10 % from 00:00, gated to 50 % (3 nodes, at most 40 % failed, baked 1 h) from
// 01:00 at the earliest, then 100 % at 02:00 (no gate: never before the gated step).
json GatedFile() {
  json r = json::object();
  r["name"] = "canary";
  r["hotfixes"] = {{"202604.01", "202604.01.4"}};
  r["steps"] =
      json::array({{{"at", "2026-12-04T00:00:00Z"}, {"percent", 10}},
                   {{"at", "2026-12-04T01:00:00Z"},
                    {"percent", 50},
                    {"gate", {{"min_nodes", 3}, {"max_failure_percent", 40}, {"bake", "1h"}}}},
                   {{"at", "2026-12-04T02:00:00Z"}, {"percent", 100}}});
  return {{"hotfixes", {{"202604.01", "202604.01.3"}}}, {"rollouts", {r}}};
}

struct GateTest : ControllerTest {
  GateTest() { store.Set(GatedFile()); }
  // What Prometheus holds of the window since the first step, and any gate records.
  void Window(NodeSets sets, std::optional<GateRecords> records = std::nullopt) {
    OutcomeEvidence e;
    e.rollouts[{kAks, "canary", T("2026-12-04T00:00:00Z")}] = {std::move(sets), {}, {}};
    if (records) {
      const Rollout& file = store.Current()->components.at(kAks)->rollouts.at(0);
      e.gates[{kAks, "canary", 1, GateLabel(file, 1)}] = *records;
    }
    e.known.insert({kAks, "canary"});
    source.next = e;
  }
  uint32_t PercentNow(const AutoHaltController& c) { return ThresholdAt(Canary(c), now); }
};

TEST_F(GateTest, NothingBeforeTheFirstEvaluationThenWaitsOnMissingEvidence) {
  auto c = Make(&source);
  EXPECT_TRUE(Canary(*c).halted);   // not judged yet: applied to no one
  now = T("2026-12-04T03:00:00Z");  // past every `at`
  Window(Nodes(1, 2));              // two nodes: the gate wants three
  c->EvaluateNow();
  EXPECT_FALSE(Canary(*c).halted);
  EXPECT_EQ(PercentNow(*c), 1000u);  // 10 %: the gated step waits, and the step after it
  const GatesState g = c->Gates().at({kAks, "canary"});
  ASSERT_EQ(g.gates.size(), 1u);
  EXPECT_EQ(g.gates[0].missing, "2 of 3 reporting nodes");
  EXPECT_FALSE(g.gates[0].open_at.has_value());
  source.next = Status::Unavailable("down");  // no evidence: still waits, never advances
  now += 1h;
  c->EvaluateNow();
  EXPECT_EQ(PercentNow(*c), 1000u);
}

TEST_F(GateTest, OpensOnEvidenceBakesThenStartsAtADeterministicTime) {
  auto c = Make(&source);
  now = T("2026-12-04T00:30:00Z");
  Window(Nodes(1, 3, 3));  // 3 nodes, 1 failed: 33 %, under 40 %
  c->EvaluateNow();
  GatesState g = c->Gates().at({kAks, "canary"});
  ASSERT_EQ(g.gates.size(), 1u);
  EXPECT_EQ(g.gates[0].open_at, T("2026-12-04T00:30:00Z"));
  EXPECT_FALSE(g.gates[0].started_at.has_value());
  EXPECT_EQ(PercentNow(*c), 1000u);
  now = T("2026-12-04T01:29:59Z");  // its `at` passed, the bake not yet
  c->EvaluateNow();
  EXPECT_EQ(PercentNow(*c), 1000u);
  EXPECT_THAT(c->Gates().at({kAks, "canary"}).gates[0].missing, HasSubstr("baking until"));
  now = T("2026-12-04T01:40:00Z");  // evaluated late: the start is still open + bake
  c->EvaluateNow();
  g = c->Gates().at({kAks, "canary"});
  EXPECT_EQ(g.gates[0].started_at, T("2026-12-04T01:30:00Z"));
  EXPECT_EQ(PercentNow(*c), 5000u);
  EXPECT_EQ(ThresholdAt(Canary(*c), T("2026-12-04T01:29:59Z")), 1000u);
  now = T("2026-12-04T02:00:00Z");  // the ungated step after it, at its own time
  c->EvaluateNow();
  EXPECT_EQ(PercentNow(*c), 10000u);
}

TEST_F(GateTest, AFailureDuringTheBakeClosesItAndTheBakeStartsAgain) {
  auto c = Make(&source);
  now = T("2026-12-04T00:30:00Z");
  Window(Nodes(1, 3, 3));  // 1 of 3 failed: open
  c->EvaluateNow();
  ASSERT_EQ(c->Gates().at({kAks, "canary"}).gates.at(0).open_at, T("2026-12-04T00:30:00Z"));
  now = T("2026-12-04T00:45:00Z");
  Window(Nodes(1, 5, 3));  // 3 of 5 failed: 60 % > 40 %, closed
  c->EvaluateNow();
  GatesState g = c->Gates().at({kAks, "canary"});
  EXPECT_FALSE(g.gates.at(0).open_at.has_value());
  EXPECT_EQ(g.gates.at(0).closed_at, T("2026-12-04T00:45:00Z"));
  now = T("2026-12-04T01:00:00Z");
  Window(Nodes(1, 20, 19));  // nodes only add up: 5 of 20 failed (25 %), open again
  c->EvaluateNow();
  now = T("2026-12-04T01:30:00Z");  // the first open's bake would have ended here
  c->EvaluateNow();
  EXPECT_EQ(PercentNow(*c), 1000u);
  now = T("2026-12-04T02:00:00Z");
  c->EvaluateNow();
  EXPECT_EQ(c->Gates().at({kAks, "canary"}).gates.at(0).started_at, T("2026-12-04T02:00:00Z"));
  // Another replica's open before a close it reads is not an open.
  NodeEvidence fresh;
  auto other = Make(&source, &fresh);
  GateRecords records;
  records.opens = {T("2026-12-04T00:30:00Z")};
  records.closed_at = T("2026-12-04T00:45:00Z");
  now = T("2026-12-04T01:50:00Z");
  Window(Nodes(1, 10, 8), records);
  other->EvaluateNow();
  EXPECT_EQ(other->Gates().at({kAks, "canary"}).gates.at(0).open_at, now);  // its own, new
  EXPECT_EQ(ThresholdAt(Canary(*other), now), 1000u);
}

TEST_F(GateTest, ABadShareKeepsItWaiting) {
  auto c = Make(&source);
  now = T("2026-12-04T03:00:00Z");
  Window(Nodes(1, 5, 3));  // 3 of 5 failed: 60 %
  c->EvaluateNow();
  EXPECT_EQ(PercentNow(*c), 1000u);
  EXPECT_EQ(c->Gates().at({kAks, "canary"}).gates[0].missing,
            "failed nodes 3 of 5 (60.00%) > 40.00%");
}

TEST_F(GateTest, ARestartedReplicaTakesTheStartBackAndTheEarliestOpenWins) {
  auto first = Make(&source);
  now = T("2026-12-04T02:30:00Z");
  GateRecords records;
  records.opens = {T("2026-12-04T00:20:00Z"),      // this replica's own, say
                   T("2026-12-04T00:10:00Z")};     // another replica saw it open first
  records.started_at = T("2026-12-04T01:10:00Z");  // and started it
  Window(Nodes(1, 3), records);
  first->EvaluateNow();
  NodeEvidence fresh;
  auto restarted = Make(&source, &fresh);
  restarted->EvaluateNow();
  for (const AutoHaltController* c : {first.get(), restarted.get()}) {
    const GatesState g = c->Gates().at({kAks, "canary"});
    EXPECT_EQ(g.gates.at(0).open_at, T("2026-12-04T00:10:00Z"));
    EXPECT_EQ(g.gates.at(0).started_at, T("2026-12-04T01:10:00Z"));
    EXPECT_EQ(ThresholdAt(Canary(*c), now), 10000u);
  }
  // A record of another gate (the file changed the gate) is not this gate's.
  const std::string old_label = GateLabel(store.Current()->components.at(kAks)->rollouts.at(0), 1);
  json changed = GatedFile();
  changed["rollouts"][0]["steps"][1]["gate"]["min_nodes"] = 4;
  store.Set(changed);
  EXPECT_NE(GateLabel(store.Current()->components.at(kAks)->rollouts.at(0), 1), old_label);
  NodeEvidence third;
  auto other = Make(&source, &third);
  Window(Nodes(1, 3));
  OutcomeEvidence e = *source.next;
  e.gates[{kAks, "canary", 1, old_label}] = records;  // recorded under the old gate's label
  source.next = e;
  other->EvaluateNow();
  EXPECT_EQ(ThresholdAt(Canary(*other), now), 1000u);
}

TEST_F(GateTest, ReportsCountInTheWindowOfTheStepInForce) {
  // The window a waiting gate counts is the one the report path adds to: the step in force.
  auto c = Make(&source);
  now = T("2026-12-04T00:30:00Z");
  Window(Nodes(1, 1));
  c->EvaluateNow();
  EXPECT_EQ(CurrentStepStart(Canary(*c), now), T("2026-12-04T00:00:00Z"));
  for (int n = 2; n <= 3; ++n) {
    evidence.Add({kAks, "canary", T("2026-12-04T00:00:00Z")}, VmId(n), "sub-0", false);
  }
  c->EvaluateNow();
  EXPECT_EQ(c->Gates().at({kAks, "canary"}).gates.at(0).tally.reports, 3u);
  EXPECT_TRUE(c->Gates().at({kAks, "canary"}).gates.at(0).open_at.has_value());
}

// ---- Prometheus' answers ------------------------------------------------------------------

std::string Vector(const std::string& series) {
  return R"({"status":"success","data":{"resultType":"vector","result":[)" + series + "]}}";
}

std::string SketchSeries(const std::string& labels, const NodeSketch::Gauge& g,
                         const std::string& set = "reporting") {
  return R"({"metric":{"component":"aksNodeController","rollout":"canary",)"
         R"("since":"2026-12-04T00:00:00Z","set":")" +
         set + R"(","slot":")" + g.slot + "\"" + labels + R"(},"value":[1764806470,")" +
         std::to_string(g.value) + "\"]}";
}

TEST(PrometheusOutcomes, SketchesOfEveryReplicaMergeAndOthersAreDropped) {
  NodeSets a = Nodes(1, 40, 39), b = Nodes(30, 60);
  std::string series;
  for (const auto& [sets, instance] : {std::pair{&a, "a"}, std::pair{&b, "b"}}) {
    for (const char* set : kNodeSetNames) {
      for (const auto& g : sets->Named(set)->Gauges()) {
        if (!series.empty()) series += ",";
        series += SketchSeries(std::string(R"(,"instance":")") + instance + "\"", g, set);
      }
    }
  }
  // A series of another rollout (the querier's answer to a broader selector) is dropped.
  series += R"(,{"metric":{"component":"aksNodeController","rollout":"other","since":"x",)"
            R"("set":"bogus","slot":"zz"},"value":[1,"1"]})";
  OutcomeEvidence e;
  EvidenceRequest r{kCanaryKey, "p", 60s, true, {}};
  ASSERT_TRUE(ParseSketchAnswer(Vector(series), {r}, &e).ok());
  NodeSets want = a;
  want.Merge(b);
  EXPECT_EQ(e.rollouts.at(kCanaryKey).sets, want);
  EXPECT_EQ(e.rollouts.at(kCanaryKey).sets.Tally(), (OutcomeTally{60, 2, 1}));
  EXPECT_EQ(e.rollouts.size(), 1u);
}

TEST(PrometheusOutcomes, RefusesErrorsAndMalformedAnswers) {
  OutcomeEvidence e;
  EvidenceRequest r{kCanaryKey, "p", 60s, true, {}};
  EXPECT_THAT(ParseSketchAnswer("not json", {r}, &e).message(), HasSubstr("not a JSON object"));
  EXPECT_THAT(ParseSketchAnswer(
                  R"({"status":"error","errorType":"bad_data","error":"parse error"})", {r}, &e)
                  .message(),
              HasSubstr("prometheus query failed: parse error"));
  EXPECT_THAT(ParseSketchAnswer(
                  R"({"status":"success","data":{"resultType":"matrix","result":[]}})", {r}, &e)
                  .message(),
              HasSubstr("no vector result"));
  EXPECT_THAT(
      ParseSketchAnswer(Vector(SketchSeries("", {"m0", 5}, "unknown_set")), {r}, &e).message(),
      HasSubstr("malformed node sketch"));
  EXPECT_THAT(ParseSketchAnswer(Vector(SketchSeries("", {"r999", 5})), {r}, &e).message(),
              HasSubstr("node sketch slot \"r999\""));
}

TEST(PrometheusOutcomes, HaltRecordsUnderThePolicyAndTheEarliestFrom) {
  const std::vector<EvidenceRequest> requests = {{kCanaryKey, "6e085f236a23", 60s, true, {}}};
  auto record = [](const std::string& policy, const std::string& value) {
    return R"({"metric":{"component":"aksNodeController","rollout":"canary",)"
           R"("since":"2026-12-04T00:00:00Z","policy":")" +
           policy + R"("},"value":[1,")" + value + "\"]}";
  };
  OutcomeEvidence e;
  ASSERT_TRUE(ParseHaltRecords(Vector(record("6e085f236a23", "1796349600") + "," +
                                      record("6e085f236a23", "1796346000") + "," +
                                      record("000000000000", "1796342400")),
                               requests, &e)
                  .ok());
  EXPECT_EQ(e.rollouts.at(kCanaryKey).halted_at, T("2026-12-04T01:00:00Z"));  // the earliest
  EXPECT_THAT(ParseHaltRecords(Vector(record("6e085f236a23", "-5")), requests, &e).message(),
              HasSubstr("malformed halt record"));
  ASSERT_TRUE(ParseEvidenceFrom(Vector(R"({"metric":{"component":"aksNodeController",)"
                                       R"("rollout":"canary","since":"2026-12-04T00:00:00Z"},)"
                                       R"("value":[1,"1796342400"]})"),
                                requests, &e)
                  .ok());
  EXPECT_EQ(e.rollouts.at(kCanaryKey).from, T("2026-12-04T00:00:00Z"));
}

TEST(PrometheusOutcomes, KnownRolloutsFromTheInstantQuery) {
  OutcomeEvidence e;
  ASSERT_TRUE(ParseKnownRollouts(Vector(R"({"metric":{"component":"aksNodeController",)"
                                        R"("rollout":"canary"},"value":[1,"1"]})"),
                                 &e)
                  .ok());
  EXPECT_EQ(e.known.count({kAks, "canary"}), 1u);
}

PrometheusOutcomeOptions Options(std::string url, std::string selector = R"(job="lp")",
                                 std::string ca = "", std::string token = "") {
  PrometheusOutcomeOptions o;
  o.client.url = std::move(url);
  o.client.ca_file = std::move(ca);
  o.client.bearer_token_file = std::move(token);
  o.selector = std::move(selector);
  return o;
}

TEST(PrometheusOutcomes, TheOptionsAreCheckedAtStart) {
  EXPECT_TRUE(NewPrometheusOutcomeSource(Options("http://127.0.0.1:9090")).ok());
  EXPECT_TRUE(NewPrometheusOutcomeSource(Options("http://prometheus.monitoring:9090/prom/")).ok());
  EXPECT_THAT(NewPrometheusOutcomeSource(Options("https://127.0.0.1:9090")).status().message(),
              HasSubstr("no --prometheus-ca"));
  EXPECT_THAT(NewPrometheusOutcomeSource(Options("http://127.0.0.1:9090/?x=1")).status().message(),
              HasSubstr("no query or fragment"));
  EXPECT_THAT(NewPrometheusOutcomeSource(Options("http://u:p@127.0.0.1:9090")).status().message(),
              HasSubstr("no user:password@"));
  EXPECT_THAT(NewPrometheusOutcomeSource(
                  Options("http://127.0.0.1:9090", R"(job="lp")", "", "/etc/hostname"))
                  .status()
                  .message(),
              HasSubstr("never sent in clear text"));
  EXPECT_THAT(NewPrometheusOutcomeSource(Options("http://127.0.0.1:9090", "")).status().message(),
              HasSubstr("--prometheus-selector: no matcher"));
}

TEST(PrometheusSelector, AcceptsPromQLMatchersAndRefusesTheRest) {
  const std::pair<std::string, std::string> good[] = {
      {R"(job="lp")", R"(job="lp")"},
      {R"( job = "lp" , namespace="kube-system", )", R"(job="lp",namespace="kube-system")"},
      {R"(pod=~"lp-.*",env!="dev",x!~"a\"b")", R"(pod=~"lp-.*",env!="dev",x!~"a\"b")"},
  };
  for (const auto& [in, want] : good) {
    auto parsed = ParsePrometheusSelector(in);
    ASSERT_TRUE(parsed.ok()) << in << ": " << parsed.status().ToString();
    EXPECT_EQ(*parsed, want);
  }
  const std::pair<std::string, std::string> bad[] = {
      {"", "no matcher"},
      {"job", "has no =, !=, =~ or !~"},
      {"job=lp", "not a double-quoted string"},
      {R"(job="lp)", "unterminated"},
      {R"(job="lp"} or vector(1) or up{a="b")", "expected a comma"},
      {R"(1job="lp")", "no label name"},
      {"job=\"a\nb\"", "control character"},
  };
  for (const auto& [in, want] : bad) {
    EXPECT_THAT(ParsePrometheusSelector(in).status().message(), HasSubstr(want)) << in;
  }
}

// ---- repeated reports ---------------------------------------------------------------------

TEST(RecentReports, ARepeatWithinTheWindowIsDropped) {
  RecentReports recent(10, 1h);
  const auto t0 = RecentReports::Clock::time_point{} + 100h;
  EXPECT_TRUE(recent.FirstSeen("vm-1|202604.01.4|installed", t0));
  EXPECT_FALSE(recent.FirstSeen("vm-1|202604.01.4|installed", t0 + 59min));
  EXPECT_TRUE(recent.FirstSeen("vm-1|202604.01.4|install_failed", t0 + 59min));
  EXPECT_TRUE(recent.FirstSeen("vm-1|202604.01.4|installed", t0 + 61min));  // window passed
}

TEST(RecentReports, BoundedOldestForgottenFirst) {
  RecentReports recent(3, 1h);
  const auto t0 = RecentReports::Clock::time_point{} + 100h;
  for (const char* k : {"a", "b", "c", "d"}) EXPECT_TRUE(recent.FirstSeen(k, t0));
  EXPECT_EQ(recent.size(), 3u);
  EXPECT_TRUE(recent.FirstSeen("a", t0));  // forgotten to make room for d
  EXPECT_FALSE(recent.FirstSeen("d", t0));
}

}  // namespace
}  // namespace hotfix::service
