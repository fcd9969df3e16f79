// RolloutStatus (control/rollout_status.h), which GET /rollouts and the lp_rollout_* metrics
// read: each rollout's state, percent and next step at a time, the calls it applied to, how
// those counts live through reloads, and the JSON an operator reads. The times and percents
// are the example rollout's (tests/support/rollout_example.h: 1 % at 00:00, 10.5 % at 06:00,
// 100 % on the 5th).

#include "service/control/rollout_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rollout_example.h"
#include "service/store/component_file.h"

namespace hotfix::service {
namespace {

using json = nlohmann::json;

constexpr char kAks[] = "aksNodeController";

json TwoRollouts() {
  json file = ExampleFile("anc-1");
  file["rollouts"].push_back(ExampleRollout("anc-2"));
  return file;
}

TEST(RolloutStatusTest, NothingLoadedIsNoRowsAndGenerationZero) {
  SwappableStore store;
  RolloutStatus status(&store);
  EXPECT_TRUE(status.Rows(T("2026-12-04T00:00:00Z")).empty());
  status.RecordApplied(1, kAks, {0});  // counted against nothing, and harmless
  const json j = json::parse(status.Json(T("2026-12-04T00:00:00Z")));
  EXPECT_EQ(j.at("generation"), 0);
  EXPECT_TRUE(j.at("components").empty());
}

TEST(RolloutStatusTest, RowsFollowTheStepsAndNameTheNextOne) {
  SwappableStore store;
  store.Set(ExampleFile("anc-1"));
  RolloutStatus status(&store);

  const auto before = status.Rows(T("2026-12-03T23:00:00Z"));
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].component, kAks);
  EXPECT_EQ(before[0].name, "anc-1");
  EXPECT_EQ(before[0].state, RolloutState::kScheduled);
  EXPECT_EQ(before[0].threshold, 0u);
  ASSERT_TRUE(before[0].next_step.has_value());
  EXPECT_EQ(before[0].next_step->at, T("2026-12-04T00:00:00Z"));
  EXPECT_EQ(before[0].next_step->threshold, 100u);

  const auto ramping = status.Rows(T("2026-12-04T07:00:00Z"));
  EXPECT_EQ(ramping[0].state, RolloutState::kRamping);
  EXPECT_EQ(ramping[0].threshold, 1050u);  // 10.5 %
  ASSERT_TRUE(ramping[0].next_step.has_value());
  EXPECT_EQ(ramping[0].next_step->at, T("2026-12-05T00:00:00Z"));

  const auto done = status.Rows(T("2026-12-06T00:00:00Z"));
  EXPECT_EQ(done[0].state, RolloutState::kComplete);
  EXPECT_EQ(done[0].threshold, 10000u);
  EXPECT_FALSE(done[0].next_step.has_value());
}

TEST(RolloutStatusTest, AHaltedRolloutShowsItsNoteAndNoNextStep) {
  SwappableStore store;
  json file = ExampleFile("anc-1");
  file["rollouts"][0]["halted"] = true;
  file["rollouts"][0]["halt_note"] = {
      {"at", "2026-12-04T03:00:00Z"}, {"by", "alice@laptop"}, {"reason", "failures"}};
  store.Set(file);
  RolloutStatus status(&store);
  const auto rows = status.Rows(T("2026-12-04T07:00:00Z"));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].halted);
  EXPECT_EQ(rows[0].state, RolloutState::kHalted);
  EXPECT_FALSE(rows[0].next_step.has_value());
  ASSERT_TRUE(rows[0].halt_note.has_value());
  const json j = json::parse(status.Json(T("2026-12-04T07:00:00Z")));
  const json& row = j.at("components").at(kAks).at(0);
  EXPECT_EQ(row.at("state"), "halted");
  EXPECT_EQ(row.at("halt_note").at("by"), "alice@laptop");
  EXPECT_EQ(row.at("halt_note").at("reason"), "failures");
  EXPECT_TRUE(row.at("next_step").is_null());
}

TEST(RolloutStatusTest, CallsAreCountedPerRolloutAndCarriedOverAReloadByName) {
  SwappableStore store;
  store.Set(TwoRollouts());
  RolloutStatus status(&store);
  EXPECT_FALSE(status.Served({kAks, "anc-1"}));
  status.RecordApplied(store.generation(), kAks, {0});
  status.RecordApplied(store.generation(), kAks, {0, 1});
  status.RecordApplied(store.generation(), kAks, {});
  status.RecordApplied(store.generation(), "otherComponent", {0});  // not in the snapshot
  auto rows = status.Rows(T("2026-12-04T07:00:00Z"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].applied_calls, 2u);
  EXPECT_EQ(rows[1].applied_calls, 1u);
  EXPECT_TRUE(status.Served({kAks, "anc-1"}));
  EXPECT_FALSE(status.Served({kAks, "anc-3"}));

  // The reload puts anc-2 first and drops anc-1: anc-2 keeps its count, anc-1's is gone.
  const uint64_t old_generation = store.generation();
  json reordered = ExampleFile("anc-2");
  reordered["rollouts"].push_back(ExampleRollout("anc-3"));
  store.Set(reordered);
  // A call answered from the old snapshot and counted after the reload is not counted.
  status.RecordApplied(old_generation, kAks, {0});
  rows = status.Rows(T("2026-12-04T07:00:00Z"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "anc-2");
  EXPECT_EQ(rows[0].applied_calls, 1u);
  EXPECT_EQ(rows[1].name, "anc-3");
  EXPECT_EQ(rows[1].applied_calls, 0u);
  EXPECT_FALSE(status.Served({kAks, "anc-1"}));

  const json j = json::parse(status.Json(T("2026-12-04T07:00:00Z")));
  EXPECT_EQ(j.at("generation"), store.generation());
  EXPECT_EQ(j.at("time"), "2026-12-04T07:00:00Z");
  EXPECT_EQ(j.at("files").at(kAks), store.Current()->components.at(kAks)->digest);
  EXPECT_EQ(j.at("components").at(kAks).at(0).at("applied_calls"), 1);
  EXPECT_EQ(j.at("components").at(kAks).at(0).at("percent"), 10.5);
  EXPECT_EQ(j.at("components").at(kAks).at(0).at("next_step").at("at"), "2026-12-05T00:00:00Z");
}

}  // namespace
}  // namespace hotfix::service
