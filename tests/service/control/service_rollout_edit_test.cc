// `live-patching-service rollout halt|hold|resume` (src/service/control/rollout_edit.h): each edit,
// what it leaves alone, a resume that moves an automatic halt's `since`, the edits the service
// would refuse, and the diff it prints.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "rollout_example.h"
#include "service/control/rollout_edit.h"
#include "service/store/component_store.h"

namespace hotfix::service {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr char kAks[] = "aksNodeController";

RolloutEdit Ed(RolloutEditKind kind, std::string name, RolloutTime at, std::string by = "",
               std::string reason = "") {
  return {kind, std::move(name), at, std::move(by), std::move(reason)};
}

std::string File(json rollout_extra = json::object()) {
  json file = ExampleFile("anc-1");
  for (const auto& [k, v] : rollout_extra.items()) file["rollouts"][0][k] = v;
  return file.dump();
}

json Edited(const std::string& text, RolloutEditKind kind,
            std::string_view at = "2026-12-04T07:00:00Z") {
  auto edited = EditRollout(kAks, text, Ed(kind, "anc-1", T(at)));
  EXPECT_TRUE(edited.ok()) << edited.status().ToString();
  if (!edited.ok()) return nullptr;
  EXPECT_TRUE(ValidateComponentConfig(kAks, *edited).ok());
  return json::parse(*edited);
}

TEST(RolloutEditTest, HaltSetsHaltedWithANoteAndChangesNothingElse) {
  auto edited = EditRollout(kAks, File(),
                            Ed(RolloutEditKind::kHalt, "anc-1", T("2026-12-04T07:00:00Z"),
                               "alice@laptop", "INC-1234: nodes fail to join"));
  ASSERT_TRUE(edited.ok()) << edited.status().ToString();
  json want = json::parse(File());
  want["rollouts"][0]["halted"] = true;
  want["rollouts"][0]["halt_note"] = {{"at", "2026-12-04T07:00:00Z"},
                                      {"by", "alice@laptop"},
                                      {"reason", "INC-1234: nodes fail to join"}};
  EXPECT_EQ(json::parse(*edited), want);
  // The service reads the note back as written.
  auto rollouts = ParseRollouts(json::parse(*edited)["rollouts"]);
  ASSERT_TRUE(rollouts.ok());
  ASSERT_TRUE((*rollouts)[0].halt_note.has_value());
  EXPECT_EQ((*rollouts)[0].halt_note->by, "alice@laptop");
  EXPECT_EQ((*rollouts)[0].halt_note->reason, "INC-1234: nodes fail to join");
  EXPECT_EQ((*rollouts)[0].halt_note->at, T("2026-12-04T07:00:00Z"));
}

TEST(RolloutEditTest, HoldSetsHoldAtToTheGivenTimeAndASecondHoldKeepsTheFirst) {
  json after = Edited(File(), RolloutEditKind::kHold, "2026-12-04T05:30:00Z");
  EXPECT_EQ(after["rollouts"][0]["hold_at"], "2026-12-04T05:30:00Z");
  // A later hold would let the percent climb to that time's: the first hold stands.
  const std::string held = after.dump();
  auto again =
      EditRollout(kAks, held, Ed(RolloutEditKind::kHold, "anc-1", T("2026-12-04T09:00:00Z")));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, held);
}

// The complaint of issue 32: held at 1 %, the schedule long past 100 %, a resume jumped to 100.
// Now it continues from 1 %, and the later steps keep their spacing.
TEST(RolloutEditTest, ResumeContinuesFromThePercentItHeldAndMovesTheLaterSteps) {
  const std::string held = File({{"hold_at", "2026-12-04T03:00:00Z"}});
  const RolloutEdit resume = Ed(RolloutEditKind::kResume, "anc-1", T("2026-12-10T03:00:00Z"), "bob",
                                "fixed in 202604.01.5");
  auto edited = EditRollout(kAks, held, resume);
  ASSERT_TRUE(edited.ok()) << edited.status().ToString();
  const json r = json::parse(*edited)["rollouts"][0];
  EXPECT_EQ(r["steps"][0]["at"], "2026-12-04T00:00:00Z") << "a step already started stays";
  EXPECT_EQ(r["steps"][1]["at"], "2026-12-10T06:00:00Z") << "6 days later";
  EXPECT_EQ(r["steps"][2]["at"], "2026-12-11T00:00:00Z");
  EXPECT_FALSE(r.contains("hold_at"));
  EXPECT_EQ(
      r["resume_note"],
      json({{"at", "2026-12-10T03:00:00Z"}, {"by", "bob"}, {"reason", "fixed in 202604.01.5"}}));
  auto before = ParseRollouts(json::parse(held)["rollouts"]);
  json one = json::array();
  one.push_back(r);
  auto after = ParseRollouts(one);
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_EQ(ThresholdAt((*before)[0], resume.at), 100u) << "1 %";
  EXPECT_EQ(ThresholdAt((*after)[0], resume.at), 100u) << "still 1 %, not 100 %";
  EXPECT_EQ(DescribeRolloutEdit(held, *edited, resume),
            "rollout \"anc-1\": percent 1 (held at 2026-12-04T03:00:00Z) -> 1 at "
            "2026-12-10T03:00:00Z\n"
            "rollout \"anc-1\": next step: 10.5 at 2026-12-10T06:00:00Z (2 steps moved 6d "
            "later, by the time it was stopped)\n");
}

TEST(RolloutEditTest, ResumeOfANotedHaltContinuesFromWhereTheHaltStopped) {
  const std::string halted =
      File({{"halted", true}, {"halt_note", {{"at", "2026-12-04T07:00:00Z"}, {"by", "alice"}}}});
  const RolloutEdit resume = Ed(RolloutEditKind::kResume, "anc-1", T("2026-12-04T09:00:00Z"));
  auto edited = EditRollout(kAks, halted, resume);
  ASSERT_TRUE(edited.ok()) << edited.status().ToString();
  const json r = json::parse(*edited)["rollouts"][0];
  EXPECT_FALSE(r.contains("halted"));
  EXPECT_FALSE(r.contains("halt_note"));
  EXPECT_EQ(r["steps"][1]["at"], "2026-12-04T06:00:00Z") << "started before the halt";
  EXPECT_EQ(r["steps"][2]["at"], "2026-12-05T02:00:00Z") << "2 h later";
  EXPECT_EQ(DescribeRolloutEdit(halted, *edited, resume),
            "rollout \"anc-1\": percent 0 (halted) -> 10.5 at 2026-12-04T09:00:00Z\n"
            "rollout \"anc-1\": next step: 100 at 2026-12-05T02:00:00Z (1 step moved 2h "
            "later, by the time it was stopped)\n");
  // A hold set later than a future time is not yet a freeze: nothing moves.
  const std::string future_hold = File({{"hold_at", "2026-12-04T12:00:00Z"}});
  json moved_nothing = Edited(future_hold, RolloutEditKind::kResume, "2026-12-04T09:00:00Z");
  EXPECT_EQ(moved_nothing["rollouts"][0]["steps"],
            json::parse(future_hold)["rollouts"][0]["steps"]);
}

TEST(RolloutEditTest, ResumeOfARolloutNeitherHaltedNorHeldChangesNothing) {
  const std::string text = File();
  auto edited =
      EditRollout(kAks, text, Ed(RolloutEditKind::kResume, "anc-1", T("2026-12-04T07:00:00Z")));
  ASSERT_TRUE(edited.ok());
  EXPECT_EQ(*edited, text) << "no resume_note for nothing resumed";
}

TEST(RolloutEditTest, HaltAndHoldSayThePercentAndTheNextStep) {
  const RolloutEdit halt = Ed(RolloutEditKind::kHalt, "anc-1", T("2026-12-04T07:00:00Z"), "a", "r");
  auto halted = EditRollout(kAks, File(), halt);
  ASSERT_TRUE(halted.ok());
  EXPECT_EQ(DescribeRolloutEdit(File(), *halted, halt),
            "rollout \"anc-1\": percent 10.5 -> 0 (halted) at 2026-12-04T07:00:00Z\n"
            "rollout \"anc-1\": next step: none while halted\n");
  const RolloutEdit hold = Ed(RolloutEditKind::kHold, "anc-1", T("2026-12-04T01:00:00Z"));
  auto held = EditRollout(kAks, File(), hold);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(DescribeRolloutEdit(File(), *held, hold),
            "rollout \"anc-1\": percent 1 -> 1 (held at 2026-12-04T01:00:00Z) at "
            "2026-12-04T01:00:00Z\n"
            "rollout \"anc-1\": next step: none while held\n");
  EXPECT_EQ(DescribeRolloutEdit(File(), File(), hold),
            "rollout \"anc-1\": percent 1 -> 1 at 2026-12-04T01:00:00Z\n"
            "rollout \"anc-1\": next step: 10.5 at 2026-12-04T06:00:00Z\n");
}

TEST(RolloutEditTest, ResumeRemovesHaltAndHoldAndMovesAnAutoHaltsSince) {
  const std::string text = File({{"halted", true},
                                 {"hold_at", "2026-12-04T03:00:00Z"},
                                 {"auto_halt", {{"max_failure_percent", 5}, {"min_reports", 20}}}});
  json after = Edited(text, RolloutEditKind::kResume, "2026-12-04T07:00:00Z");
  const json& r = after["rollouts"][0];
  EXPECT_FALSE(r.contains("halted"));
  EXPECT_FALSE(r.contains("hold_at"));
  EXPECT_EQ(r["steps"][1]["at"], "2026-12-04T10:00:00Z") << "held from 03:00: moved 4 h";
  EXPECT_EQ(r["auto_halt"]["since"], "2026-12-04T07:00:00Z");
  EXPECT_EQ(r["auto_halt"]["min_reports"], 20);
  // Without auto_halt, no since appears.
  json plain = Edited(File({{"halted", true}}), RolloutEditKind::kResume);
  EXPECT_FALSE(plain["rollouts"][0].contains("auto_halt"));
}

TEST(RolloutEditTest, AnEditThatChangesNothingReturnsTheTextAsItWas) {
  const std::string text =
      File({{"halted", true}, {"halt_note", {{"at", "2026-12-04T06:30:00Z"}, {"reason", "x"}}}});
  auto edited =
      EditRollout(kAks, text, Ed(RolloutEditKind::kHalt, "anc-1", T("2026-12-04T07:00:00Z")));
  ASSERT_TRUE(edited.ok());
  EXPECT_EQ(*edited, text);
}

TEST(RolloutEditTest, KeysKeepTheirOrder) {
  auto edited =
      EditRollout(kAks, File(), Ed(RolloutEditKind::kHalt, "anc-1", T("2026-12-04T07:00:00Z")));
  ASSERT_TRUE(edited.ok());
  EXPECT_LT(edited->find("\"hotfixes\""), edited->find("\"rollouts\""));
  EXPECT_LT(edited->find("\"match\""), edited->find("\"steps\""));
}

TEST(RolloutEditTest, RefusesWhatItCannotOrShouldNotDo) {
  const RolloutEdit halt = Ed(RolloutEditKind::kHalt, "anc-1", T("2026-12-04T07:00:00Z"));
  EXPECT_THAT(EditRollout(kAks, "{", halt).status().message(), HasSubstr("not JSON"));
  EXPECT_THAT(EditRollout(kAks, R"({"hotfixes":{}})", halt).status().message(),
              HasSubstr("no rollouts list"));
  EXPECT_THAT(
      EditRollout(kAks, File(), Ed(RolloutEditKind::kHalt, "nope", halt.at)).status().message(),
      HasSubstr("no rollout named \"nope\""));
  // A file the service would refuse stays refused: the edit does not launder it.
  json bad = json::parse(File());
  bad["rollouts"][0]["steps"][0]["percent"] = 101;
  EXPECT_THAT(EditRollout(kAks, bad.dump(), halt).status().message(),
              HasSubstr("the edited file would be refused"));
  // A hold in the past is a valid edit too (it freezes the percent of that time).
  EXPECT_TRUE(
      EditRollout(kAks, File(), Ed(RolloutEditKind::kHold, "anc-1", T("2026-01-01T00:00:00Z")))
          .ok());
}

TEST(RolloutEditTest, ChangedLinesShowsTheOneHunk) {
  EXPECT_EQ(ChangedLines("a\nb\nc\n", "a\nb\nc\n"), "");
  EXPECT_EQ(ChangedLines("a\nb\nc\nd\n", "a\nB\nB2\nd\n"),
            "--- before\n+++ after\n@@ -2,2 +2,2 @@\n-b\n-c\n+B\n+B2\n");
  EXPECT_EQ(ChangedLines("a\n", "a\nb\n"), "--- before\n+++ after\n@@ -2,0 +2,1 @@\n+b\n");
}

}  // namespace
}  // namespace hotfix::service
