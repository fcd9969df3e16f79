// hotfix-agent's commands as its main calls them (node/agent_commands.h): the exit status each
// returns whatever happens (the agent's policy), the dry runs' JSON, and that a dry run writes
// nothing. Everything here stays on the machine: a node with no node config and no nbc-cmd
// fails check-hotfix before IMDS or the network is asked.

#include "node/agent_commands.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "node/download/provision_report.h"
#include "temp_dir.h"

namespace hotfix::node {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testsupport::TempDir;

TEST(AgentCommandsTest, CheckHotfixExitsZeroWhenItFailsAndADryRunPrintsItsPlanOnly) {
  TempDir dir("lp-agent");
  CheckHotfixCommandOptions o;
  o.check.pointer_path = dir.File("pointer.json").string();
  o.check.node_config_path = dir.File("absent-config.json").string();
  o.check.current_version = "202604.01.0";
  o.check.dry_run = true;
  o.fetch.nbc_cmd_path = dir.File("absent-nbc-cmd.sh").string();
  o.imds_url = "http://127.0.0.1:9/metadata/attested/document";  // never reached
  o.events_dir = dir.File("events").string();
  o.log_file = dir.File("agent.log").string();
  o.ignored_args = {"extra"};
  std::ostringstream out;
  EXPECT_EQ(CheckHotfixMain(o, out), kExitOk);
  const nlohmann::json plan = nlohmann::json::parse(out.str());
  EXPECT_EQ(plan.at("outcome"), "failed") << out.str();
  EXPECT_FALSE(plan.at("error").is_null());
  EXPECT_EQ(plan.at("pointer_path"), o.check.pointer_path);
  EXPECT_TRUE(plan.at("would_write").is_null());
  // A dry run writes nothing: no pointer, no event, no log file.
  EXPECT_THAT(dir.Names(), IsEmpty());

  o.check.dry_run = false;
  std::ostringstream quiet;
  EXPECT_EQ(CheckHotfixMain(o, quiet), kExitOk);
  EXPECT_THAT(quiet.str(), IsEmpty());
  EXPECT_THAT(dir.Read("agent.log"), HasSubstr("ignoring unexpected check-hotfix arguments"));
  EXPECT_FALSE(std::filesystem::exists(o.check.pointer_path));
}

TEST(AgentCommandsTest, DownloadHotfixWithNoPointerExitsZeroAndItsDryRunSaysSo) {
  TempDir dir("lp-agent");
  DownloadHotfixCommandOptions o;
  o.download.pointer_path = dir.File("absent-pointer.json").string();
  o.download.current_version = "202604.01.0";
  o.download.hotfix_binary = dir.File("hotfix-binary").string();
  o.download.node_custom_data = dir.File("absent-custom-data.yml").string();
  o.download.dry_run = true;
  o.events_dir = dir.File("events").string();
  o.log_file = dir.File("agent.log").string();
  o.report = false;
  std::ostringstream out, err;
  EXPECT_EQ(DownloadHotfixMain(o, out, err), kExitOk) << err.str();
  const nlohmann::json plan = nlohmann::json::parse(out.str());
  EXPECT_EQ(plan.at("pointer_path"), o.download.pointer_path);
  EXPECT_EQ(plan.at("binary").at("targeted"), false);
  EXPECT_EQ(plan.at("binary").at("repository_fast_path"),
            "tried first; on an integrity failure nothing below runs");
  EXPECT_THAT(dir.Names(), IsEmpty());  // the dry run wrote nothing, not even its lock
}

TEST(AgentCommandsTest, DownloadDryRunJsonSaysWouldWhereARunWouldHaveActed) {
  DownloadHotfixResult r;
  r.binary = BinaryOutcome::kInstalled;
  r.binary_target = "202604.01.4";
  r.scripts = ScriptsOutcome::kApplied;
  r.commands = {{"apt-get", "install", "-y", "aks-node-controller=202604.01.4"}};
  r.staged_from = "/opt/bin/pkg";
  r.staged_to = "/opt/bin/hotfix";
  DownloadHotfixOptions o;
  o.repository_fast_path = false;
  o.vhd_binary = "/opt/bin/vhd";
  const nlohmann::json plan = nlohmann::json::parse(DownloadHotfixDryRunJson(r, o));
  EXPECT_EQ(plan.at("binary").at("outcome"), "wouldInstall");
  EXPECT_EQ(plan.at("binary").at("targeted"), true);
  EXPECT_EQ(plan.at("binary").at("repository_fast_path"), "off");
  EXPECT_EQ(plan.at("binary").at("would_run").at(0).at(3), "aks-node-controller=202604.01.4");
  EXPECT_EQ(plan.at("binary").at("would_stage").at("mode_of"), "/opt/bin/vhd");
  EXPECT_EQ(plan.at("scripts").at("outcome"), "wouldApply");
  EXPECT_TRUE(plan.at("error").is_null());

  r.binary = BinaryOutcome::kNotTargeted;
  r.staged_to.clear();
  const nlohmann::json skipped = nlohmann::json::parse(DownloadHotfixDryRunJson(r, o));
  EXPECT_EQ(skipped.at("binary").at("outcome"), "notTargeted");
  EXPECT_FALSE(skipped.at("binary").contains("would_stage"));
}

TEST(AgentCommandsTest, ADryRunsJsonSurvivesBytesThatAreNotUtf8) {
  CheckHotfixResult result;
  result.error = Status::Internal(std::string("bad \xff byte"));
  const nlohmann::json plan = nlohmann::json::parse(CheckHotfixDryRunJson(result, "/p"));
  EXPECT_THAT(plan.at("error").get<std::string>(), HasSubstr("bad "));
}

TEST(AgentCommandsTest, ReportExitsZeroWhenTheNodeDidNotProvisionWithAHotfix) {
  TempDir dir("lp-agent");
  ReportCommandOptions o;
  o.outcome = "failed";
  o.detail = "provision exited 1";
  o.pointer_path = dir.File("pointer.json").string();
  o.current_version = "202604.01.0";
  o.hotfix_binary = dir.File("absent-hotfix-binary").string();  // the VHD binary was used
  o.log_file = dir.File("agent.log").string();
  o.route.imds_url = "http://127.0.0.1:9/metadata/attested/document";  // never reached
  EXPECT_EQ(ReportMain(o), kExitOk);
  EXPECT_THAT(dir.Read("agent.log"), HasSubstr("not reported"));
  EXPECT_FALSE(std::filesystem::exists(ProvisionReportMarkerPath(o.pointer_path)));
}

}  // namespace
}  // namespace hotfix::node
