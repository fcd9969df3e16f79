// The automatic halt (docs/ROLLOUTS.md, "Automatic halt"): the decision as a pure function
// (boundaries, the minimum sample, the absolute limit, no data), the judgement over a history
// (sticky, `since`, steps in any order), the `auto_halt` object's validation, the controller
// over a fake evidence source (halt, sticky, held without evidence, nothing applied before the
// first evaluation, a person resuming), Prometheus' answers parsed, and repeated reports.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rollout_example.h"
#include "service/control/auto_halt_controller.h"
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
  EXPECT_EQ(HaltEvidence(Policy(500, 20, 3), {10, 3}), "failures 3 >= max_failures 3");
  EXPECT_EQ(HaltEvidence(Policy(500, 20), {20, 2}),
            "failures 2 of 20 reports (10.00%) > 5.00% with 20 or more");
}

// ---- the judgement over a history --------------------------------------------------------

TallyStep Step(std::string_view end, uint64_t reports, uint64_t failures,
               std::chrono::seconds length = 30s) {
  const RolloutTime e = T(end);
  return {e - length, e, {reports, failures}};
}

TEST(JudgeAutoHalt, AddsTheStepsAndFindsTheFirstThatHeld) {
  const AutoHaltPolicy p = Policy(500, 10);
  const AutoHaltJudgement j =
      JudgeAutoHalt(p, T("2026-12-04T00:00:00Z"),
                    {Step("2026-12-04T00:01:00Z", 5, 0), Step("2026-12-04T00:01:30Z", 5, 1),
                     Step("2026-12-04T00:02:00Z", 2, 0)});
  EXPECT_EQ(j.total, (OutcomeTally{12, 1}));
  ASSERT_TRUE(j.halted_at.has_value());
  EXPECT_EQ(*j.halted_at, T("2026-12-04T00:01:30Z"));  // 1 of 10 = 10 % > 5 %
}

TEST(JudgeAutoHalt, IsStickyThroughLaterSuccesses) {
  const AutoHaltJudgement j =
      JudgeAutoHalt(Policy(500, 10), T("2026-12-04T00:00:00Z"),
                    {Step("2026-12-04T00:01:00Z", 10, 5), Step("2026-12-04T00:02:00Z", 1000, 0)});
  EXPECT_EQ(j.total, (OutcomeTally{1010, 5}));  // 0.5 % now
  EXPECT_TRUE(j.halted_at.has_value());
}

TEST(JudgeAutoHalt, LeavesOutStepsBeforeSinceAndTheOneStraddlingIt) {
  const AutoHaltPolicy p = Policy(500, 1);
  const std::vector<TallyStep> steps = {Step("2026-12-04T00:00:30Z", 10, 10),
                                        Step("2026-12-04T00:01:00Z", 10, 10),
                                        Step("2026-12-04T00:01:30Z", 10, 0)};
  const AutoHaltJudgement j = JudgeAutoHalt(p, T("2026-12-04T00:00:45Z"), steps);
  EXPECT_EQ(j.total, (OutcomeTally{10, 0}));  // the step (00:00:30, 00:01:00] straddles
  EXPECT_FALSE(j.halted_at.has_value());
  // A `since` on a step boundary starts with that step.
  EXPECT_EQ(JudgeAutoHalt(p, T("2026-12-04T00:00:30Z"), steps).total, (OutcomeTally{20, 10}));
}

TEST(JudgeAutoHalt, StepsInAnyOrderAndOneStepsSeriesAddedBeforeTheCheck) {
  const AutoHaltPolicy p = Policy(5000, 4);
  // One step's failures arrive (as their own series) before its successes: 2 of 4 is 50 %,
  // not over; counted alone the 2 failures of 2 would have been.
  const AutoHaltJudgement j =
      JudgeAutoHalt(p, T("2026-12-04T00:00:00Z"),
                    {Step("2026-12-04T00:02:00Z", 1, 1), Step("2026-12-04T00:01:00Z", 2, 2),
                     Step("2026-12-04T00:01:00Z", 2, 0)});
  EXPECT_EQ(j.total, (OutcomeTally{5, 3}));
  ASSERT_TRUE(j.halted_at.has_value());
  EXPECT_EQ(*j.halted_at, T("2026-12-04T00:02:00Z"));
}

TEST(JudgeAutoHalt, NoStepsNoHalt) {
  const AutoHaltJudgement j = JudgeAutoHalt(Policy(0, 1, 1), T("2026-12-04T00:00:00Z"), {});
  EXPECT_EQ(j.total, (OutcomeTally{0, 0}));
  EXPECT_FALSE(j.halted_at.has_value());
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
                                            {"since", "2026-12-04T03:00:00Z"}}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Rollout& r = parsed->at(0);
  ASSERT_TRUE(r.auto_halt.has_value());
  EXPECT_EQ(r.auto_halt->max_failure_percent, 525u);
  EXPECT_EQ(r.auto_halt->min_reports, 20u);
  EXPECT_EQ(r.auto_halt->max_failures, std::optional<uint64_t>(3));
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

// A store whose snapshot a test replaces.
class SwappableStore : public ComponentStore {
 public:
  void Set(const json& file) {
    auto parsed = ParseComponentConfig(kAks, file.dump());
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto snapshot = std::make_shared<StoreSnapshot>();
    snapshot->generation = ++generation_;
    snapshot->components[kAks] = std::make_shared<const ComponentConfig>(std::move(*parsed));
    snapshot_ = snapshot;
  }
  std::shared_ptr<const StoreSnapshot> Current() const override { return snapshot_; }

 private:
  uint64_t generation_ = 0;
  std::shared_ptr<const StoreSnapshot> snapshot_;
};

// Evidence a test sets; counts the fetches (atomically: the background test reads the count
// while the controller's thread fetches; the other fields are for one-thread tests).
class FakeSource : public OutcomeSource {
 public:
  StatusOr<OutcomeEvidence> Fetch(RolloutTime from, RolloutTime now) override {
    ++fetches;
    last_from = from;
    last_now = now;
    return next;
  }
  StatusOr<OutcomeEvidence> next = OutcomeEvidence{};
  std::atomic<int> fetches{0};
  RolloutTime last_from, last_now;
};

// One rollout at 10 % from 00:00 and 100 % from 12:00, halting at 5 % of 20 or 3 failures;
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

struct ControllerTest : ::testing::Test {
  ControllerTest() { store.Set(AutoHaltFile()); }

  std::unique_ptr<AutoHaltController> Make(OutcomeSource* src) {
    AutoHaltControllerOptions options;
    options.source = src;
    options.now = [this] { return now; };
    options.served = [this](const RolloutKey&) { return served; };
    return std::make_unique<AutoHaltController>(&store, std::move(options));
  }
  // The canary as the controller serves it.
  const Rollout& Canary(const AutoHaltController& c) {
    held = c.Current();
    return held->components.at(kAks)->rollouts.at(0);
  }
  void Evidence(std::vector<TallyStep> steps) {
    OutcomeEvidence e;
    e.steps[{kAks, "canary"}] = std::move(steps);
    e.known.insert({kAks, "canary"});
    source.next = e;
  }

  SwappableStore store;
  FakeSource source;
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
}

TEST_F(ControllerTest, AppliesWhileTheEvidenceIsGoodAndHaltsWhenItSaysSo) {
  auto c = Make(&source);
  Evidence({Step("2026-12-04T01:00:00Z", 30, 1)});
  c->EvaluateNow();
  EXPECT_EQ(source.last_from, T("2026-12-04T00:00:00Z"));  // the first step's at
  EXPECT_EQ(source.last_now, now);
  const Rollout& applied = Canary(*c);
  EXPECT_FALSE(applied.halted);
  EXPECT_FALSE(applied.hold_at.has_value());
  EXPECT_EQ(c->States().at({kAks, "canary"}).tally, (OutcomeTally{30, 1}));

  Evidence({Step("2026-12-04T01:00:00Z", 30, 1), Step("2026-12-04T02:00:00Z", 5, 2)});
  c->EvaluateNow();
  EXPECT_TRUE(Canary(*c).halted);
  const AutoHaltState st = c->States().at({kAks, "canary"});
  EXPECT_EQ(st.halted_at, T("2026-12-04T02:00:00Z"));
  EXPECT_EQ(st.evidence, "failures 3 >= max_failures 3");
  // The store's generation is kept; the other rollout is untouched.
  EXPECT_EQ(c->Current()->generation, store.Current()->generation);
  EXPECT_FALSE(c->Current()->components.at(kAks)->rollouts.at(1).halted);
}

TEST_F(ControllerTest, StaysHaltedThroughLaterSuccessesAndLostEvidence) {
  auto c = Make(&source);
  Evidence({Step("2026-12-04T01:00:00Z", 20, 3)});
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

TEST_F(ControllerTest, ANewReplicaJudgesTheSameHistoryTheSameWay) {
  Evidence({Step("2026-12-04T01:00:00Z", 20, 3), Step("2026-12-04T02:00:00Z", 2000, 0)});
  auto first = Make(&source);
  first->EvaluateNow();
  auto restarted = Make(&source);
  restarted->EvaluateNow();
  EXPECT_TRUE(Canary(*first).halted);
  EXPECT_TRUE(Canary(*restarted).halted);
  EXPECT_EQ(first->States().at({kAks, "canary"}).halted_at,
            restarted->States().at({kAks, "canary"}).halted_at);
}

TEST_F(ControllerTest, WithoutEvidenceItHoldsWhereItWasAndNeverAdvances) {
  auto c = Make(&source);
  Evidence({Step("2026-12-04T01:00:00Z", 5, 0)});
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
  Evidence({Step("2026-12-04T01:00:00Z", 5, 0)});
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

TEST_F(ControllerTest, MovingSinceResumes) {
  auto c = Make(&source);
  Evidence({Step("2026-12-04T01:00:00Z", 20, 3), Step("2026-12-04T05:00:00Z", 10, 0)});
  c->EvaluateNow();
  ASSERT_TRUE(Canary(*c).halted);
  store.Set(AutoHaltFile("2026-12-04T04:00:00Z"));
  EXPECT_TRUE(Canary(*c).halted);  // not judged under the new policy yet
  c->EvaluateNow();
  EXPECT_EQ(source.last_from, T("2026-12-04T04:00:00Z"));
  EXPECT_FALSE(Canary(*c).halted);
  EXPECT_EQ(c->States().at({kAks, "canary"}).tally, (OutcomeTally{10, 0}));
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
  EXPECT_EQ(c->States().size(), 64u);
}

TEST_F(ControllerTest, TheBackgroundThreadEvaluatesAtOnceAndWhenWoken) {
  AutoHaltControllerOptions options;
  options.source = &source;
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

// ---- Prometheus' answers ------------------------------------------------------------------

TEST(PrometheusOutcomes, StepsDivideAMinuteOrAnHour) {
  EXPECT_EQ(PrometheusStep(1s), 1s);
  EXPECT_EQ(PrometheusStep(3s), 5s);
  EXPECT_EQ(PrometheusStep(30s), 30s);
  EXPECT_EQ(PrometheusStep(45s), 60s);
  EXPECT_EQ(PrometheusStep(std::chrono::hours(2)), 3600s);
}

TEST(PrometheusOutcomes, TheStepInProgressFromTheInstantQuery) {
  auto e = ParseOutcomeVector(R"({"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"component":"aksNodeController","rollout":"canary","outcome":"stage_failed"},
       "value":[1764806470,"2"]}]}})",
                              T("2026-12-04T00:00:00Z"), T("2026-12-04T00:00:10Z"));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const TallyStep& s = e->steps.at({kAks, "canary"}).at(0);
  EXPECT_EQ(s.start, T("2026-12-04T00:00:00Z"));
  EXPECT_EQ(s.end, T("2026-12-04T00:00:10Z"));
  EXPECT_EQ(s.added, (OutcomeTally{2, 2}));
}

TEST(PrometheusOutcomes, ParsesTheMatrixPerRolloutWithFailuresApart) {
  const std::string body = R"({"status":"success","data":{"resultType":"matrix","result":[
    {"metric":{"component":"aksNodeController","rollout":"canary","outcome":"installed"},
     "values":[[1764806430,"4"],[1764806460,"1"]]},
    {"metric":{"component":"aksNodeController","rollout":"canary","outcome":"install_failed"},
     "values":[[1764806460,"2"]]},
    {"metric":{"component":"aksNodeController","rollout":"canary","outcome":"from_the_future"},
     "values":[[1764806460,"1"]]},
    {"metric":{"component":"aksNodeController","outcome":"installed"},
     "values":[[1764806460,"9"]]}]}})";
  auto evidence = ParseOutcomeMatrix(body, 30s);
  ASSERT_TRUE(evidence.ok()) << evidence.status().ToString();
  ASSERT_EQ(evidence->steps.size(), 1u);  // the unattributed series is nobody's evidence
  const std::vector<TallyStep>& steps = evidence->steps.at({kAks, "canary"});
  ASSERT_EQ(steps.size(), 4u);
  const AutoHaltJudgement j = JudgeAutoHalt(Policy(10000, 1), RolloutTime{}, steps);
  EXPECT_EQ(j.total, (OutcomeTally{8, 3}));  // an unknown outcome counts as a failure
  EXPECT_EQ(steps[0].end - steps[0].start, 30s);
}

TEST(PrometheusOutcomes, RefusesErrorsAndMalformedAnswers) {
  EXPECT_THAT(ParseOutcomeMatrix("not json", 30s).status().message(),
              HasSubstr("not a JSON object"));
  EXPECT_THAT(
      ParseOutcomeMatrix(R"({"status":"error","errorType":"bad_data","error":"parse error"})", 30s)
          .status()
          .message(),
      HasSubstr("prometheus query failed: parse error"));
  EXPECT_THAT(ParseOutcomeMatrix(R"({"status":"success","data":{"resultType":"vector",
      "result":[]}})",
                                 30s)
                  .status()
                  .message(),
              HasSubstr("no matrix result"));
  EXPECT_THAT(ParseOutcomeMatrix(R"({"status":"success","data":{"resultType":"matrix","result":[
      {"metric":{"component":"a","rollout":"b","outcome":"installed"},"values":[[1,"NaN"]]}]}})",
                                 30s)
                  .status()
                  .message(),
              HasSubstr("malformed sample"));
}

TEST(PrometheusOutcomes, KnownRolloutsFromTheInstantQuery) {
  OutcomeEvidence e;
  ASSERT_TRUE(ParseKnownRollouts(R"({"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"component":"aksNodeController","rollout":"canary"},"value":[1,"1"]}]}})",
                                 &e)
                  .ok());
  EXPECT_EQ(e.known.count({kAks, "canary"}), 1u);
}

TEST(PrometheusOutcomes, TheUrlIsCheckedAtStart) {
  EXPECT_TRUE(NewPrometheusOutcomeSource({"http://127.0.0.1:9090"}).ok());
  EXPECT_TRUE(NewPrometheusOutcomeSource({"http://prometheus.monitoring:9090/prom/"}).ok());
  EXPECT_THAT(NewPrometheusOutcomeSource({"https://127.0.0.1:9090"}).status().message(),
              HasSubstr("--prometheus-url"));
  EXPECT_THAT(NewPrometheusOutcomeSource({"http://127.0.0.1:9090/?x=1"}).status().message(),
              HasSubstr("no query allowed"));
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
