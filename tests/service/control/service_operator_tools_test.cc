// The operator's tools as the binary runs them (control/operator_tools.h): each tool's output,
// its errors and its exit status, on real folders. What each computes is
// service_rollout_tools_test's and service_rollout_edit_test's; this is what the command line
// sees (service_rollout_cli_test runs the binary itself).

#include "service/control/operator_tools.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "rollout_example.h"
#include "temp_dir.h"

namespace hotfix::service {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using testsupport::TempDir;

constexpr char kAks[] = "aksNodeController";
constexpr char kSub[] = "8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8";
constexpr char kEast[] = "myaks-dns-1a2b3c4d.hcp.eastus.azmk8s.io";

struct ToolRun {
  int code = -1;
  std::string out, err;
};

template <typename Options, typename Tool>
ToolRun RunTool(Tool tool, const Options& options) {
  std::ostringstream out, err;
  ToolRun run;
  run.code = tool(options, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

class OperatorToolsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_.Write("aksNodeController.json", ExampleFile("anc-1").dump(2)); }
  std::string Dir() const { return dir_.path().string(); }
  TempDir dir_{"lp-tools"};
};

TEST_F(OperatorToolsTest, ValidatePassesAGoodFolderAndFailsARefusedFile) {
  ToolRun ok = RunTool(RunValidateTool, ValidateToolOptions{Dir()});
  EXPECT_EQ(ok.code, kToolOk) << ok.err;
  EXPECT_EQ(ok.out, "1 file ok, 0 refused\n");
  EXPECT_THAT(ok.err, IsEmpty());

  dir_.Write("other.json", R"({"hotfixes": )");  // cut short
  ToolRun refused = RunTool(RunValidateTool, ValidateToolOptions{Dir()});
  EXPECT_EQ(refused.code, kToolFailed);
  EXPECT_THAT(refused.out, StartsWith("other.json"));
  EXPECT_THAT(refused.out, HasSubstr("1 file ok, 1 refused\n"));

  ToolRun missing = RunTool(RunValidateTool, ValidateToolOptions{Dir() + "/absent"});
  EXPECT_EQ(missing.code, kToolFailed);
  EXPECT_THAT(missing.err, StartsWith("live-patching-service validate: "));
}

TEST_F(OperatorToolsTest, PlanPrintsJsonAndRefusesBadFlagsAsUsage) {
  PlanToolOptions o{Dir(), kAks,  "5e0c1a2b-0000-4000-8000-000000000001",
                    kSub,  kEast, "2026-12-06T00:00:00Z"};
  ToolRun plan = RunTool(RunPlanTool, o);
  ASSERT_EQ(plan.code, kToolOk) << plan.err;
  const nlohmann::json json = nlohmann::json::parse(plan.out);
  // Past the last step (100 % on the 5th), every matching node is served the rollout's version.
  EXPECT_EQ(json.at("served"),
            nlohmann::json::parse(R"({"hotfixes": {"202604.01": "202604.01.4"}})"))
      << plan.out;

  PlanToolOptions bad_component = o;
  bad_component.component = "no such/component";
  EXPECT_EQ(RunTool(RunPlanTool, bad_component).code, kToolUsage);
  PlanToolOptions bad_time = o;
  bad_time.at = "yesterday";
  ToolRun at = RunTool(RunPlanTool, bad_time);
  EXPECT_EQ(at.code, kToolUsage);
  EXPECT_THAT(at.err, HasSubstr("--at "));
  PlanToolOptions no_host = o;
  no_host.cluster = ":443";
  EXPECT_EQ(RunTool(RunPlanTool, no_host).code, kToolUsage);
  PlanToolOptions absent = o;
  absent.component = "otherComponent";
  EXPECT_EQ(RunTool(RunPlanTool, absent).code, kToolFailed);
}

TEST_F(OperatorToolsTest, SimulateNeedsExactlyOneFleetAndCountsIt) {
  SimulateToolOptions o;
  o.components_dir = Dir();
  o.component = kAks;
  o.from = "2026-12-03T00:00:00Z";
  o.to = "2026-12-05T00:00:00Z";
  o.every = "1d";
  ToolRun neither = RunTool(RunSimulateTool, o);
  EXPECT_EQ(neither.code, kToolUsage);
  EXPECT_THAT(neither.err, HasSubstr("one of --nodes FILE or --random N is required"));

  const std::string nodes =
      dir_.Write("nodes.txt", std::string("# fleet\n5e0c1a2b-0000-4000-8000-000000000001,") + kSub +
                                  "," + kEast + "\n5e0c1a2b-0000-4000-8000-000000000001," + kSub +
                                  "," + kEast + "\n")
          .string();
  SimulateToolOptions both = o;
  both.nodes_file = nodes;
  both.random_count = 10;
  EXPECT_EQ(RunTool(RunSimulateTool, both).code, kToolUsage);

  SimulateToolOptions from_file = o;
  from_file.nodes_file = nodes;
  ToolRun counted = RunTool(RunSimulateTool, from_file);
  ASSERT_EQ(counted.code, kToolOk) << counted.err;
  EXPECT_THAT(counted.out, StartsWith("at\t"));
  // Three times (the 3rd, 4th and 5th); the one node's two lines counted once.
  EXPECT_THAT(counted.err,
              HasSubstr("simulated 1 nodes (1 repeated lines counted once) at 3 times"));

  SimulateToolOptions random = o;
  random.random_count = 50;
  ToolRun drawn = RunTool(RunSimulateTool, random);
  ASSERT_EQ(drawn.code, kToolOk) << drawn.err;
  EXPECT_THAT(drawn.err, HasSubstr("simulated 50 nodes at 3 times"));

  SimulateToolOptions bad_every = random;
  bad_every.every = "often";
  EXPECT_EQ(RunTool(RunSimulateTool, bad_every).code, kToolUsage);
  SimulateToolOptions empty_file = o;
  empty_file.nodes_file = dir_.Write("empty.txt", "# nobody\n").string();
  ToolRun empty = RunTool(RunSimulateTool, empty_file);
  EXPECT_EQ(empty.code, kToolUsage);
  EXPECT_THAT(empty.err, HasSubstr("no nodes"));
}

TEST_F(OperatorToolsTest, RolloutHaltWritesTheFileWithItsNoteAndADryRunWritesNothing) {
  const std::string before = dir_.Read("aksNodeController.json");
  RolloutToolOptions o;
  o.action = "halt";
  o.rollout = "anc-1";
  o.components_dir = Dir();
  o.by = "alice@laptop";
  ToolRun no_reason = RunTool(RunRolloutTool, o);
  EXPECT_EQ(no_reason.code, kToolUsage);
  EXPECT_THAT(no_reason.err, HasSubstr("halt needs --reason"));

  o.reason = "failures in eastus";
  o.dry_run = true;
  ToolRun dry = RunTool(RunRolloutTool, o);
  ASSERT_EQ(dry.code, kToolOk) << dry.err;
  EXPECT_THAT(dry.out, HasSubstr("\"halted\""));
  EXPECT_EQ(dir_.Read("aksNodeController.json"), before);

  o.dry_run = false;
  ToolRun halt = RunTool(RunRolloutTool, o);
  ASSERT_EQ(halt.code, kToolOk) << halt.err;
  EXPECT_THAT(halt.out, HasSubstr(": written\n"));
  const nlohmann::json file = nlohmann::json::parse(dir_.Read("aksNodeController.json"));
  const nlohmann::json& rollout = file.at("rollouts").at(0);
  EXPECT_EQ(rollout.at("halted"), true);
  EXPECT_EQ(rollout.at("halt_note").at("by"), "alice@laptop");
  EXPECT_EQ(rollout.at("halt_note").at("reason"), "failures in eastus");
  // The file is still one the service loads.
  EXPECT_EQ(RunTool(RunValidateTool, ValidateToolOptions{Dir()}).code, kToolOk);

  ToolRun again = RunTool(RunRolloutTool, o);
  EXPECT_EQ(again.code, kToolOk);
  EXPECT_THAT(again.out, HasSubstr("is already so; nothing to change"));

  RolloutToolOptions unknown = o;
  unknown.rollout = "no-such-rollout";
  ToolRun missing = RunTool(RunRolloutTool, unknown);
  EXPECT_EQ(missing.code, kToolFailed);
  EXPECT_THAT(missing.err, HasSubstr("aksNodeController.json: "));
  RolloutToolOptions bad_action = o;
  bad_action.action = "pause";
  EXPECT_EQ(RunTool(RunRolloutTool, bad_action).code, kToolUsage);
}

TEST(OperatorToolsWhoTest, WhoEditsIsTheUserAtTheHost) {
  const char* saved = getenv("USER");
  const std::string restore = saved != nullptr ? saved : "";
  setenv("USER", "carol", 1);
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  EXPECT_EQ(WhoEdits(), host[0] != '\0' ? std::string("carol@") + host : std::string("carol"));
  if (saved != nullptr) {
    setenv("USER", restore.c_str(), 1);
  } else {
    unsetenv("USER");
  }
}

}  // namespace
}  // namespace hotfix::service
