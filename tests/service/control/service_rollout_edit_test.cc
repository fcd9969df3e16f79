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

std::string File(json rollout_extra = json::object()) {
  json file = ExampleFile("anc-1");
  for (const auto& [k, v] : rollout_extra.items()) file["rollouts"][0][k] = v;
  return file.dump();
}

json Edited(const std::string& text, RolloutEditKind kind,
            std::string_view at = "2026-12-04T07:00:00Z") {
  auto edited = EditRollout(kAks, text, {kind, "anc-1", T(at)});
  EXPECT_TRUE(edited.ok()) << edited.status().ToString();
  if (!edited.ok()) return nullptr;
  EXPECT_TRUE(ValidateComponentConfig(kAks, *edited).ok());
  return json::parse(*edited);
}

TEST(RolloutEditTest, HaltSetsHaltedAndChangesNothingElse) {
  json after = Edited(File(), RolloutEditKind::kHalt);
  json want = json::parse(File());
  want["rollouts"][0]["halted"] = true;
  EXPECT_EQ(after, want);
}

TEST(RolloutEditTest, HoldSetsHoldAtToTheGivenTime) {
  json after = Edited(File(), RolloutEditKind::kHold, "2026-12-04T05:30:00Z");
  EXPECT_EQ(after["rollouts"][0]["hold_at"], "2026-12-04T05:30:00Z");
}

TEST(RolloutEditTest, ResumeRemovesHaltAndHoldAndMovesAnAutoHaltsSince) {
  const std::string text = File({{"halted", true},
                                 {"hold_at", "2026-12-04T03:00:00Z"},
                                 {"auto_halt", {{"max_failure_percent", 5}, {"min_reports", 20}}}});
  json after = Edited(text, RolloutEditKind::kResume, "2026-12-04T07:00:00Z");
  const json& r = after["rollouts"][0];
  EXPECT_FALSE(r.contains("halted"));
  EXPECT_FALSE(r.contains("hold_at"));
  EXPECT_EQ(r["auto_halt"]["since"], "2026-12-04T07:00:00Z");
  EXPECT_EQ(r["auto_halt"]["min_reports"], 20);
  // Without auto_halt, no since appears.
  json plain = Edited(File({{"halted", true}}), RolloutEditKind::kResume);
  EXPECT_FALSE(plain["rollouts"][0].contains("auto_halt"));
}

TEST(RolloutEditTest, AnEditThatChangesNothingReturnsTheTextAsItWas) {
  const std::string text = File({{"halted", true}});
  auto edited =
      EditRollout(kAks, text, {RolloutEditKind::kHalt, "anc-1", T("2026-12-04T07:00:00Z")});
  ASSERT_TRUE(edited.ok());
  EXPECT_EQ(*edited, text);
}

TEST(RolloutEditTest, KeysKeepTheirOrder) {
  auto edited =
      EditRollout(kAks, File(), {RolloutEditKind::kHalt, "anc-1", T("2026-12-04T07:00:00Z")});
  ASSERT_TRUE(edited.ok());
  EXPECT_LT(edited->find("\"hotfixes\""), edited->find("\"rollouts\""));
  EXPECT_LT(edited->find("\"match\""), edited->find("\"steps\""));
}

TEST(RolloutEditTest, RefusesWhatItCannotOrShouldNotDo) {
  const RolloutEdit halt{RolloutEditKind::kHalt, "anc-1", T("2026-12-04T07:00:00Z")};
  EXPECT_THAT(EditRollout(kAks, "{", halt).status().message(), HasSubstr("not JSON"));
  EXPECT_THAT(EditRollout(kAks, R"({"hotfixes":{}})", halt).status().message(),
              HasSubstr("no rollouts list"));
  EXPECT_THAT(
      EditRollout(kAks, File(), {RolloutEditKind::kHalt, "nope", halt.at}).status().message(),
      HasSubstr("no rollout named \"nope\""));
  // A file the service would refuse stays refused: the edit does not launder it.
  json bad = json::parse(File());
  bad["rollouts"][0]["steps"][0]["percent"] = 101;
  EXPECT_THAT(EditRollout(kAks, bad.dump(), halt).status().message(),
              HasSubstr("the edited file would be refused"));
  // A hold in the past is a valid edit too (it freezes the percent of that time).
  EXPECT_TRUE(
      EditRollout(kAks, File(), {RolloutEditKind::kHold, "anc-1", T("2026-01-01T00:00:00Z")}).ok());
}

TEST(RolloutEditTest, ChangedLinesShowsTheOneHunk) {
  EXPECT_EQ(ChangedLines("a\nb\nc\n", "a\nb\nc\n"), "");
  EXPECT_EQ(ChangedLines("a\nb\nc\nd\n", "a\nB\nB2\nd\n"),
            "--- before\n+++ after\n@@ -2,2 +2,2 @@\n-b\n-c\n+B\n+B2\n");
  EXPECT_EQ(ChangedLines("a\n", "a\nb\n"), "--- before\n+++ after\n@@ -2,0 +2,1 @@\n+b\n");
}

}  // namespace
}  // namespace hotfix::service
