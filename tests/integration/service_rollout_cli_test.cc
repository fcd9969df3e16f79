// The operator's tools through the real binary: `live-patching-service validate | plan |
// simulate` (docs/ROLLOUTS.md, "Operator tools"), their exit codes (0 ok, 1 the check failed,
// 2 usage) and output, and that the serving command line is unchanged (no --listen: exit 2).
// Expected values come from the service's own loader and bucket function, linked in process,
// or from the rules themselves; never from a run of the binary.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bin_dir.h"
#include "service/control/simulate.h"
#include "service/rollout/rollout.h"
#include "service/store/component_store.h"
#include "subprocess.h"
#include "temp_dir.h"

namespace hotfix::testsupport {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::json;

constexpr char kAks[] = "aksNodeController";
constexpr char kSub[] = "8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8";
constexpr char kEast[] = "myaks-dns-1a2b3c4d.hcp.eastus.azmk8s.io";
constexpr char kRollout[] = "anc-1";

// 1% at 00:00, 10.5% at 06:00, 100% on the 5th; one subscription, east US clusters.
std::string RolloutFile(const std::string& name, const std::string& second_step_at) {
  return R"({
  "hotfixes": {"202604.01": "202604.01.3"},
  "rollouts": [{
    "name": ")" +
         name + R"(",
    "hotfixes": {"202604.01": "202604.01.4"},
    "match": {"subscriptions": [")" +
         kSub + R"("], "clusters": ["*.hcp.eastus.azmk8s.io"]},
    "steps": [
      {"at": "2026-12-04T00:00:00Z", "percent": 1},
      {"at": ")" +
         second_step_at + R"(", "percent": 10.5},
      {"at": "2026-12-05T00:00:00Z", "percent": 100}
    ]
  }]
})";
}
std::string GoodFile(const std::string& name = kRollout) {
  return RolloutFile(name, "2026-12-04T06:00:00Z");
}
// The second step is not after the first.
std::string BadFile() { return RolloutFile(kRollout, "2026-12-03T06:00:00Z"); }

RunResult RunTool(std::vector<std::string> args) {
  SpawnOptions spawn;
  spawn.argv = {BinDir() + "/live-patching-service"};
  spawn.argv.insert(spawn.argv.end(), args.begin(), args.end());
  // Generous: a sanitizer build on a loaded machine.
  return RunProcess(std::move(spawn), std::chrono::seconds(60));
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> Split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, sep)) out.push_back(field);
  return out;
}

std::string VmId(int i) {
  char id[64];
  std::snprintf(id, sizeof id, "5e0c1a2b-0000-4000-8000-%012d", i);
  return id;
}

service::RolloutTime T(const std::string& text) {
  auto t = service::ParseRolloutTime(text);
  EXPECT_TRUE(t.ok()) << text;
  return t.ok() ? *t : service::RolloutTime{};
}

TEST(RolloutToolsCliTest, ValidatePassesAGoodFolderAndNamesTheProblemInABadOne) {
  TempDir good("rollout-cli"), bad("rollout-cli");
  good.Write("aksNodeController.json", GoodFile());
  good.Write("other.json", R"({"anything": true})");
  RunResult r = RunTool({"validate", "--components-dir", good.path().string()});
  EXPECT_EQ(r.status.exit_code, 0) << r.status.ToString() << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "2 files ok, 0 refused\n");

  bad.Write("aksNodeController.json", BadFile());
  bad.Write("other.json", R"({"anything": true})");
  r = RunTool({"validate", "--components-dir", bad.path().string()});
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.exit_code, 1) << r.stderr_text;
  const std::string expected =
      service::ValidateComponentConfig(kAks, BadFile()).message();  // the service's own words
  EXPECT_THAT(expected, StartsWith("aksNodeController.json: rollouts[0] \"anc-1\": steps[1].at "
                                   "\"2026-12-03T06:00:00Z\""));
  EXPECT_THAT(Lines(r.stdout_text), ElementsAre(expected, "1 file ok, 1 refused"));

  r = RunTool({"validate", "--components-dir", good.File("missing").string()});
  EXPECT_EQ(r.status.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("missing"));
  r = RunTool({"validate"});
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("--components-dir"));
  r = RunTool({"validate", "--help"});
  EXPECT_EQ(r.status.exit_code, 0);
  EXPECT_THAT(r.stdout_text, HasSubstr("exactly as the service would"));
  EXPECT_THAT(r.stdout_text, HasSubstr("Exit status"));
}

TEST(RolloutToolsCliTest, PlanPrintsWhatTheNodeIsServedAndWhy) {
  TempDir dir("rollout-cli");
  dir.Write("aksNodeController.json", GoodFile());
  // A node whose bucket is under 10.5%: in at 07:00.
  std::string inside, outside;
  for (int i = 0; inside.empty() || outside.empty(); ++i) {
    const uint32_t bucket = service::RolloutBucket(kRollout, VmId(i));
    if (bucket < 1050 && inside.empty()) inside = VmId(i);
    if (bucket >= 1050 && outside.empty()) outside = VmId(i);
  }
  for (const std::string& vm : {inside, outside}) {
    RunResult r = RunTool({"plan", "--components-dir", dir.path().string(), "--component", kAks,
                           "--vm-id", vm, "--subscription", kSub, "--cluster",
                           std::string(kEast) + ":443", "--at", "2026-12-04T07:00:00Z"});
    ASSERT_EQ(r.status.exit_code, 0) << r.status.ToString() << r.stderr_text;
    Json plan = Json::parse(r.stdout_text, nullptr, false);
    ASSERT_FALSE(plan.is_discarded()) << r.stdout_text;
    EXPECT_EQ(plan["component"], kAks);
    EXPECT_EQ(plan["at"], "2026-12-04T07:00:00Z");
    EXPECT_EQ(plan["node"], Json({{"vm_id", vm}, {"subscription", kSub}, {"cluster", kEast}}));
    ASSERT_EQ(plan["rollouts"].size(), 1u);
    const Json& rollout = plan["rollouts"][0];
    const uint32_t bucket = service::RolloutBucket(kRollout, vm);
    const bool in = bucket < 1050;
    EXPECT_EQ(rollout["name"], kRollout);
    EXPECT_EQ(rollout["bucket"], bucket);
    EXPECT_EQ(rollout["threshold"], 1050);
    EXPECT_EQ(rollout["percent"], 10.5);
    EXPECT_EQ(rollout["applies"], in);
    EXPECT_EQ(rollout["state"], "ramping");
    EXPECT_EQ(plan["served"]["hotfixes"]["202604.01"], in ? "202604.01.4" : "202604.01.3");
    if (in) {
      EXPECT_TRUE(rollout["why"].is_null());
      EXPECT_EQ(rollout["enters_at"],
                bucket < 100 ? "2026-12-04T00:00:00Z" : "2026-12-04T06:00:00Z");
    } else {
      EXPECT_EQ(rollout["why"],
                "bucket " + std::to_string(bucket) + " not under threshold 1050 (10.5%)");
      EXPECT_EQ(rollout["enters_at"], "2026-12-05T00:00:00Z");
    }
  }

  // Without --at: now, in whole seconds.
  const auto before = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  RunResult r = RunTool({"plan", "--components-dir", dir.path().string(), "--component", kAks,
                         "--vm-id", inside, "--subscription", kSub, "--cluster", kEast});
  const auto after = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  ASSERT_EQ(r.status.exit_code, 0) << r.stderr_text;
  const service::RolloutTime at = T(Json::parse(r.stdout_text)["at"].get<std::string>());
  EXPECT_GE(at, before);
  EXPECT_LE(at, after);

  // A refused file, a missing component: 1. A bad time or name: 2.
  TempDir bad("rollout-cli");
  bad.Write("aksNodeController.json", BadFile());
  std::vector<std::string> common = {"--vm-id", inside, "--subscription", kSub, "--cluster", kEast};
  auto plan = [&](const std::string& folder, const std::string& component,
                  std::vector<std::string> extra) {
    std::vector<std::string> args = {"plan", "--components-dir", folder, "--component", component};
    args.insert(args.end(), common.begin(), common.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return RunTool(args);
  };
  r = plan(bad.path().string(), kAks, {});
  EXPECT_EQ(r.status.exit_code, 1);
  EXPECT_THAT(r.stderr_text,
              HasSubstr(service::ValidateComponentConfig(kAks, BadFile()).message()));
  r = plan(dir.path().string(), "nothere", {});
  EXPECT_EQ(r.status.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("nothere.json"));
  r = plan(dir.path().string(), kAks, {"--at", "2026-12-04 07:00"});
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("--at"));
  r = plan(dir.path().string(), "../x", {});
  EXPECT_EQ(r.status.exit_code, 2);
  r = RunTool({"plan", "--components-dir", dir.path().string()});
  EXPECT_EQ(r.status.exit_code, 2);
}

TEST(RolloutToolsCliTest, SimulatePrintsATablePerTimeAndTheNodesARenameMoves) {
  TempDir dir("rollout-cli"), renamed("rollout-cli");
  dir.Write("aksNodeController.json", GoodFile());
  const std::string new_name = "anc-1-renamed";
  renamed.Write("aksNodeController.json", GoodFile(new_name));
  // 200 nodes: the even ones in the rollout's subscription and east US, the odd ones not.
  std::string nodes = "# vmId,subscriptionId,clusterHost\n";
  int matched = 0;
  std::map<int, int> moved_at;  // threshold -> nodes a rename moves
  for (int i = 0; i < 200; ++i) {
    const bool in_match = i % 2 == 0;
    nodes += VmId(i) + "," + (in_match ? kSub : "00000000-0000-0000-0000-000000000001") + "," +
             (i % 3 == 0 ? std::string(kEast) + ":443" : std::string(kEast)) + "\n";
    if (!in_match) continue;
    ++matched;
    for (int threshold : {100, 1050}) {
      moved_at[threshold] += (service::RolloutBucket(kRollout, VmId(i)) < uint32_t(threshold)) !=
                             (service::RolloutBucket(new_name, VmId(i)) < uint32_t(threshold));
    }
  }
  dir.Write("nodes.csv", nodes);
  const std::vector<std::string> window = {
      "--from", "2026-12-03T18:00:00Z", "--to", "2026-12-05T00:00:00Z", "--every", "6h"};
  auto simulate = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"simulate", "--components-dir", dir.path().string(),
                                     "--component", kAks};
    args.insert(args.end(), window.begin(), window.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return RunTool(args);
  };

  RunResult r =
      simulate({"--nodes", dir.File("nodes.csv").string(), "--against", renamed.path().string()});
  ASSERT_EQ(r.status.exit_code, 0) << r.status.ToString() << r.stderr_text;
  std::vector<std::string> lines = Lines(r.stdout_text);
  // Block 1: the header and 6 times (18:00, 00:00, 06:00, 12:00, 18:00, 00:00 the 5th).
  ASSERT_GE(lines.size(), 7u);
  EXPECT_EQ(lines[0], "at\t202604.01.3\t202604.01.4");
  const int expected_in_last = matched;  // at 100% every matched node, exactly
  for (int row = 1; row <= 6; ++row) {
    std::vector<std::string> cells = Split(lines[row], '\t');
    ASSERT_EQ(cells.size(), 3u) << lines[row];
    EXPECT_EQ(std::stoi(cells[1]) + std::stoi(cells[2]), 200) << lines[row];
  }
  EXPECT_EQ(lines[1], "2026-12-03T18:00:00Z\t200\t0");
  EXPECT_EQ(lines[6], "2026-12-05T00:00:00Z\t" + std::to_string(200 - expected_in_last) + "\t" +
                          std::to_string(expected_in_last));
  // Block 2: differing nodes per time.
  ASSERT_GE(lines.size(), 15u);
  EXPECT_EQ(lines[7], "");
  EXPECT_EQ(lines[8], "at\tdiffering\tlisted_at");
  const int expected_differing[] = {
      0, moved_at[100], moved_at[1050], moved_at[1050], moved_at[1050], 0};
  for (int row = 0; row < 6; ++row) {
    std::vector<std::string> cells = Split(lines[9 + row], '\t');
    ASSERT_EQ(cells.size(), 3u) << lines[9 + row];
    EXPECT_EQ(std::stoi(cells[1]), expected_differing[row]) << lines[9 + row];
  }
  // Block 3: the differing nodes, one a line, at most kMaxDiffNodesListed per time and once
  // for the three 10.5% rows, which differ in the same nodes. These 200 vmIds are fixed, and
  // the rename moves some of them at 10.5%: the block is never empty.
  ASSERT_GT(moved_at[1050], 0);
  const int cap = static_cast<int>(service::kMaxDiffNodesListed);
  const size_t listed = std::min(moved_at[100], cap) + std::min(moved_at[1050], cap);
  ASSERT_EQ(lines.size(), 17u + listed);
  EXPECT_EQ(lines[15], "");
  EXPECT_EQ(lines[16], "at\tvm_id\tsubscription\tcluster\tserved\tserved_against");
  for (size_t i = 17; i < lines.size(); ++i) {
    std::vector<std::string> cells = Split(lines[i], '\t');
    ASSERT_EQ(cells.size(), 6u) << lines[i];
    EXPECT_EQ(cells[2], kSub);
    EXPECT_EQ(cells[3], kEast);
    EXPECT_NE(cells[4], cells[5]);
  }
  EXPECT_THAT(r.stderr_text, HasSubstr("simulated 200 nodes at 6 times"));

  // --random: the same shape, the same table for the same seed.
  r = simulate({"--random", "300", "--seed", "7", "--subscriptions", kSub, "--clusters",
                std::string(kEast) + ",x.hcp.westus2.azmk8s.io"});
  ASSERT_EQ(r.status.exit_code, 0) << r.stderr_text;
  lines = Lines(r.stdout_text);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0], "at\t202604.01.3\t202604.01.4");
  for (int row = 1; row <= 6; ++row) {
    std::vector<std::string> cells = Split(lines[row], '\t');
    ASSERT_EQ(cells.size(), 3u);
    EXPECT_EQ(std::stoi(cells[1]) + std::stoi(cells[2]), 300);
  }
  RunResult again = simulate({"--random", "300", "--seed", "7", "--subscriptions", kSub,
                              "--clusters", std::string(kEast) + ",x.hcp.westus2.azmk8s.io"});
  EXPECT_EQ(again.stdout_text, r.stdout_text);

  // Usage errors: a bad node line (named), both fleets, neither, a bad duration, too many
  // rows. A file that cannot be read: 1.
  dir.Write("bad.csv", "a,b,c\n# ok\nd,e\n");
  r = simulate({"--nodes", dir.File("bad.csv").string()});
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("bad.csv: line 3: "));
  r = simulate({"--nodes", dir.File("nodes.csv").string(), "--random", "5"});
  EXPECT_EQ(r.status.exit_code, 2);
  r = simulate({});
  EXPECT_EQ(r.status.exit_code, 2);
  r = RunTool({"simulate", "--components-dir", dir.path().string(), "--component", kAks, "--random",
               "5", "--from", "2026-12-03T18:00:00Z", "--to", "2026-12-05T00:00:00Z", "--every",
               "6 hours"});
  EXPECT_EQ(r.status.exit_code, 2);
  r = RunTool({"simulate", "--components-dir", dir.path().string(), "--component", kAks, "--random",
               "5", "--from", "2026-01-01T00:00:00Z", "--to", "2027-01-01T00:00:00Z", "--every",
               "1m"});
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("more than 10000"));
  r = simulate({"--nodes", dir.File("missing.csv").string()});
  EXPECT_EQ(r.status.exit_code, 1);
  r = RunTool({"simulate", "--help"});
  EXPECT_EQ(r.status.exit_code, 0);
  EXPECT_THAT(r.stdout_text, HasSubstr("tab-separated"));
}

TEST(RolloutToolsCliTest, RolloutHaltHoldResumeEditTheFileThroughValidation) {
  TempDir dir("rollout-cli");
  dir.Write("aksNodeController.json", GoodFile());
  const std::string folder = dir.path().string();
  // A halt says why: without --reason it is a usage error and writes nothing.
  RunResult r = RunTool({"rollout", "halt", kRollout, "--components-dir", folder});
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("halt needs --reason TEXT"));
  const std::vector<std::string> halt = {"rollout",
                                         "halt",
                                         kRollout,
                                         "--components-dir",
                                         folder,
                                         "--reason",
                                         "INC-1234: nodes fail to join",
                                         "--at",
                                         "2026-12-04T07:00:00Z"};
  std::vector<std::string> dry = halt;
  dry.push_back("--dry-run");
  r = RunTool(dry);
  EXPECT_EQ(r.status.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("+      \"halted\": true"));
  EXPECT_EQ(dir.Read("aksNodeController.json"), GoodFile());  // a dry run writes nothing

  r = RunTool(halt);
  EXPECT_EQ(r.status.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("rollout \"" + std::string(kRollout) +
                                       "\": percent 10.5 -> 0 (halted) at 2026-12-04T07:00:00Z\n"));
  EXPECT_THAT(r.stdout_text, HasSubstr("next step: none while halted\n"));
  EXPECT_THAT(r.stdout_text, HasSubstr(": written"));
  Json file = Json::parse(dir.Read("aksNodeController.json"));
  EXPECT_EQ(file["rollouts"][0]["halted"], true);
  const Json note = file["rollouts"][0]["halt_note"];
  EXPECT_EQ(note["at"], "2026-12-04T07:00:00Z");
  EXPECT_EQ(note["reason"], "INC-1234: nodes fail to join");
  EXPECT_FALSE(note.value("by", "").empty()) << "who, by default the login and the host";
  EXPECT_EQ(RunTool({"validate", "--components-dir", folder}).status.exit_code, 0);
  r = RunTool(halt);
  EXPECT_THAT(r.stdout_text, HasSubstr("nothing to change"));

  r = RunTool(
      {"rollout", "hold", kRollout, "--components-dir", folder, "--at", "2026-12-04T03:00:00Z"});
  EXPECT_EQ(r.status.exit_code, 0) << r.stderr_text;
  // Resumed at 09:00, the percent continues from where it froze (the hold at 03:00: 1 %), and
  // the later steps move 6 h later.
  r = RunTool({"rollout", "resume", kRollout, "--components-dir", folder, "--at",
               "2026-12-04T09:00:00Z", "--by", "bob", "--reason", "fixed in .5"});
  EXPECT_EQ(r.status.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("percent 0 (halted) -> 1 at 2026-12-04T09:00:00Z\n"));
  EXPECT_THAT(r.stdout_text, HasSubstr("next step: 10.5 at 2026-12-04T12:00:00Z (2 steps moved "
                                       "6h later, by the time it was stopped)\n"));
  file = Json::parse(dir.Read("aksNodeController.json"));
  EXPECT_FALSE(file["rollouts"][0].contains("halted"));
  EXPECT_FALSE(file["rollouts"][0].contains("hold_at"));
  EXPECT_FALSE(file["rollouts"][0].contains("halt_note"));
  EXPECT_EQ(file["rollouts"][0]["resume_note"],
            Json({{"at", "2026-12-04T09:00:00Z"}, {"by", "bob"}, {"reason", "fixed in .5"}}));
  EXPECT_EQ(file["rollouts"][0]["steps"][2]["at"], "2026-12-05T06:00:00Z");

  // Refused: no such rollout (1), an unknown action or a bad time (2); the file is untouched.
  const std::string before = dir.Read("aksNodeController.json");
  r = RunTool({"rollout", "halt", "nope", "--components-dir", folder, "--reason", "x"});
  EXPECT_EQ(r.status.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("no rollout named \"nope\""));
  EXPECT_EQ(RunTool({"rollout", "stop", kRollout, "--components-dir", folder}).status.exit_code, 2);
  EXPECT_EQ(RunTool({"rollout", "hold", kRollout, "--components-dir", folder, "--at", "now"})
                .status.exit_code,
            2);
  EXPECT_EQ(dir.Read("aksNodeController.json"), before);
  // A file the service refuses is not edited either.
  dir.Write("aksNodeController.json", BadFile());
  r = RunTool({"rollout", "halt", kRollout, "--components-dir", folder, "--reason", "x"});
  EXPECT_EQ(r.status.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("would be refused"));
  EXPECT_EQ(dir.Read("aksNodeController.json"), BadFile());
}

TEST(RolloutToolsCliTest, TheServingCommandLineStillRequiresListen) {
  TempDir dir("rollout-cli");
  dir.Write("aksNodeController.json", GoodFile());
  RunResult r = RunTool({"--components-dir", dir.path().string(), "--tls-cert", "x.pem",
                         "--tls-key", "x.key", "--insecure-accept-any-token"});
  EXPECT_TRUE(r.status.exited) << r.status.ToString();
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("--listen"));
  r = RunTool({});
  EXPECT_EQ(r.status.exit_code, 2);
  // Its --help names the tools.
  r = RunTool({"--help"});
  EXPECT_EQ(r.status.exit_code, 0);
  for (const char* tool : {"validate", "plan", "simulate", "rollout"}) {
    EXPECT_THAT(r.stdout_text, HasSubstr("live-patching-service " + std::string(tool)));
  }
}

}  // namespace
}  // namespace hotfix::testsupport
