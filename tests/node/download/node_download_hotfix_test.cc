#include "node/download/download_hotfix.h"

#include <stdlib.h>

#include <deque>
#include <filesystem>
#include <stdexcept>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "captured_log.h"
#include "common/file_lock.h"
#include "common/file_util.h"

namespace hotfix::node {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testsupport::ModeOf;
using testsupport::ReadFile;
using testsupport::TempDir;
using unittest::CapturedLog;
using namespace std::chrono_literals;

// Records every command; install commands exit with the scripted codes, the version query
// prints `query_output`.
class RecordingRunner : public CommandRunner {
 public:
  CommandResult Run(const Argv& argv, const RunOptions& options) override {
    calls.push_back(argv);
    if (throw_on_call) throw std::runtime_error("runner exploded");
    CommandResult r;
    if ((argv[0] == "dpkg-query" || argv[0] == "rpm") && query_cannot_run) {
      r.status = Status::IoError("exec: \"" + argv[0] + "\": executable file not found in $PATH");
      return r;
    }
    if (argv[0] == "dpkg-query" || argv[0] == "rpm") {
      r.exit_code = 0;
      r.output = options.capture_output ? query_output : "";
      return r;
    }
    r.exit_code = exit_codes.empty() ? 0 : exit_codes.front();
    if (exit_codes.size() > 1) exit_codes.pop_front();
    if (r.exit_code != 0) r.status = Status::IoError("exit status " + std::to_string(r.exit_code));
    return r;
  }
  std::vector<Argv> calls;
  std::deque<int> exit_codes;
  std::string query_output = "installed\t202604.01.1\n";
  bool query_cannot_run = false;
  bool throw_on_call = false;
};

class DownloadHotfixTest : public ::testing::Test {
 protected:
  DownloadHotfixTest() {
    options_.pointer_path = opt_.File("aks-node-controller-hotfix.json");
    options_.os_release_path = etc_.Write("os-release", "NAME=\"Ubuntu\"\nID=ubuntu\n");
    ::mkdir(etc_.File("sources.list.d").c_str(), 0755);
    options_.apt_sources_dir = etc_.File("sources.list.d");
    etc_.Write("sources.list.d/microsoft-prod.list", "deb https://packages.microsoft.com x main\n");
    options_.package_binary = usr_.File("aks-node-controller");
    options_.vhd_binary = opt_.Write("aks-node-controller", "vhd binary", 0755);
    options_.hotfix_binary = opt_.File("aks-node-controller-hotfix");
    options_.node_custom_data = opt_.File("nodecustomdata.yml");
    options_.retry_backoff = 1ms;
    options_.command_timeout = 5s;
  }
  void Pointer(const std::string& json) { opt_.Write("aks-node-controller-hotfix.json", json); }
  void InstalledBinary() { usr_.Write("aks-node-controller", "hotfix binary", 0644); }
  DownloadHotfixResult Run(const std::string& current) {
    options_.current_version = current;
    return DownloadHotfix(options_, runner_, log_.logger());
  }
  std::vector<std::string> Programs() const {
    std::vector<std::string> programs;
    for (const auto& c : runner_.calls) programs.push_back(c[0] == "env" ? c[2] : c[0]);
    return programs;
  }

  TempDir opt_{"opt"}, usr_{"usr"}, etc_{"etc"};
  DownloadHotfixOptions options_;
  RecordingRunner runner_;
  CapturedLog log_;
};

TEST_F(DownloadHotfixTest, NoPointerFileIsNothingToDo) {
  auto r = Run("202604.01.0");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.binary, BinaryOutcome::kNoHotfix);
  EXPECT_THAT(runner_.calls, IsEmpty());
}

TEST_F(DownloadHotfixTest, SameVersionIsNotAnUpgrade) {
  Pointer(R"({"version":"202604.01.1"})");
  auto r = Run("202604.01.1");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.binary, BinaryOutcome::kNotTargeted);
  EXPECT_THAT(r.binary_reason, HasSubstr("needs the same YYYYMM.DD base and a higher patch"));
  EXPECT_THAT(runner_.calls, IsEmpty());
}

TEST_F(DownloadHotfixTest, DifferentBaseAndDevVersionSkip) {
  Pointer(R"({"version":"202604.01.1"})");
  EXPECT_EQ(Run("202605.01.0").binary, BinaryOutcome::kNotTargeted);
  auto dev = Run("dev");
  EXPECT_EQ(dev.exit_code, 0);
  EXPECT_EQ(dev.binary, BinaryOutcome::kNotTargeted);
  EXPECT_THAT(dev.binary_reason, HasSubstr("version \"dev\""));
  EXPECT_THAT(runner_.calls, IsEmpty());
}

TEST_F(DownloadHotfixTest, UnreadableOrInvalidPointerFailsOpen) {
  ::mkdir(options_.pointer_path.c_str(), 0755);  // EISDIR, whoever runs the test
  auto dir = Run("202604.01.0");
  EXPECT_EQ(dir.exit_code, 0);
  EXPECT_EQ(dir.binary, BinaryOutcome::kPointerUnreadable);
  ::rmdir(options_.pointer_path.c_str());
  Pointer("not json");
  auto bad = Run("202604.01.0");
  EXPECT_EQ(bad.exit_code, 0);
  EXPECT_EQ(bad.binary, BinaryOutcome::kPointerUnreadable);
  EXPECT_THAT(bad.error.message(), HasSubstr("parsing hotfix config " + options_.pointer_path));
  EXPECT_THAT(runner_.calls, IsEmpty());
  EXPECT_THAT(log_.Messages(),
              ::testing::Contains("failed to read hotfix config, skipping hotfix download"));
}

TEST_F(DownloadHotfixTest, MapDecidesWithDefaultDeny) {
  Pointer(
      R"({"version":"202604.01.9","hotfixes":{"202604.01":"202604.01.1","202605.30":"202605.30.2"}})");
  EXPECT_EQ(Run("202606.09.0").binary, BinaryOutcome::kNoHotfix);     // base absent: no fallback
  EXPECT_EQ(Run("202604.01.2").binary, BinaryOutcome::kNotTargeted);  // patch not higher
  Pointer(R"({"hotfixes":{"202604.01":"202605.30.2"}})");
  EXPECT_EQ(Run("202604.01.0").binary, BinaryOutcome::kNotTargeted);  // value's base differs
  EXPECT_THAT(runner_.calls, IsEmpty());
}

TEST_F(DownloadHotfixTest, TargetedInstallRunsTheAptCommandsConfirmsAndStages) {
  Pointer(R"({"hotfixes":{"202604.01":"202604.01.1"}})");
  InstalledBinary();
  auto r = Run("202604.01.0");
  EXPECT_EQ(r.exit_code, 0) << r.error.message();
  EXPECT_EQ(r.binary, BinaryOutcome::kInstalled);
  EXPECT_EQ(r.binary_target, "202604.01.1");
  EXPECT_THAT(Programs(), ElementsAre("dpkg", "apt-get", "apt-get", "dpkg-query"));
  EXPECT_EQ(runner_.calls[1][7],
            "Dir::Etc::sourcelist=" + etc_.File("sources.list.d/microsoft-prod.list").string());
  EXPECT_EQ(runner_.calls[2].back(), "aks-node-controller=202604.01.1*");
  EXPECT_EQ(ReadFile(options_.hotfix_binary), "hotfix binary");
  EXPECT_EQ(ModeOf(options_.hotfix_binary), 0755u);
  EXPECT_EQ(ReadFile(options_.vhd_binary), "vhd binary");
  EXPECT_THAT(log_.Messages(),
              ::testing::IsSupersetOf({"downloading ANC hotfix",
                                       "installed hotfix binary alongside VHD binary",
                                       "downloaded ANC hotfix"}));
}

TEST_F(DownloadHotfixTest, LegacyVersionInstallFailsAtCopyWithoutThePackageBinary) {
  // The reference's MatchingBaseUpgrades: commands run, then staging fails.
  Pointer(R"({"version":"202604.01.1"})");
  auto r = Run("202604.01.0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.binary, BinaryOutcome::kFailed);
  EXPECT_THAT(r.error.message(),
              HasSubstr("stage hotfix binary: reading " + options_.package_binary));
  EXPECT_THAT(Programs(), ElementsAre("dpkg", "apt-get", "apt-get", "dpkg-query"));
  EXPECT_THAT(opt_.Names(), ElementsAre("aks-node-controller", "aks-node-controller-hotfix.json"));
}

TEST_F(DownloadHotfixTest, ExhaustedRetriesExitWithThePackageManagersCode) {
  Pointer(R"({"version":"202604.01.1"})");
  InstalledBinary();
  runner_.exit_codes = {0, 100};  // dpkg --configure ok, apt-get update always 100
  auto r = Run("202604.01.0");
  EXPECT_EQ(r.exit_code, 100);
  EXPECT_THAT(
      r.error.message(),
      HasSubstr("install hotfix version 202604.01.1: command env DEBIAN_FRONTEND=noninteractive "
                "apt-get update"));
  EXPECT_THAT(r.error.message(), HasSubstr("failed after 5 attempts: exit status 100"));
  EXPECT_EQ(runner_.calls.size(), 6u);  // 1 + 5, and no install, no staging
  EXPECT_FALSE(std::filesystem::exists(options_.hotfix_binary));
}

TEST_F(DownloadHotfixTest, AnotherInstalledVersionIsNotStaged) {
  Pointer(R"({"version":"202604.01.1"})");
  InstalledBinary();
  runner_.query_output = "installed\t202604.01.10\n";
  auto r = Run("202604.01.0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.error.message(),
              HasSubstr("aks-node-controller 202604.01.10 is installed after installing "
                        "202604.01.1; not staging it"));
  EXPECT_FALSE(std::filesystem::exists(options_.hotfix_binary));
}

TEST_F(DownloadHotfixTest, OsAndSourcesErrorsRunNothing) {
  Pointer(R"({"version":"202604.01.1"})");
  etc_.Write("os-release", "ID=flatcar\n");
  auto os = Run("202604.01.0");
  EXPECT_EQ(os.exit_code, 1);
  EXPECT_THAT(os.error.message(), "install hotfix version 202604.01.1: unsupported OS: flatcar");
  etc_.Write("os-release", "ID=ubuntu\n");
  ::unlink(etc_.File("sources.list.d/microsoft-prod.list").c_str());
  auto sources = Run("202604.01.0");
  EXPECT_EQ(sources.exit_code, 1);
  EXPECT_THAT(sources.error.message(), HasSubstr("neither "));
  EXPECT_THAT(runner_.calls, IsEmpty());
}

TEST_F(DownloadHotfixTest, AzureLinuxWithoutDnfUsesTdnfAndRpm) {
  TempDir bin;
  const std::string saved = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", bin.path().c_str(), 1);
  Pointer(R"({"version":"202604.01.1"})");
  InstalledBinary();
  etc_.Write("os-release", "ID=\"azurelinux\"\n");
  runner_.query_output = "202604.01.1\t1.azl3\n";
  auto r = Run("202604.01.0");
  setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(r.exit_code, 0) << r.error.message();
  EXPECT_EQ(r.package_manager, "tdnf");
  EXPECT_THAT(runner_.calls[0], ElementsAre("tdnf", "install", "-y", "--refresh", "--allowerasing",
                                            "aks-node-controller-202604.01.1"));
  EXPECT_EQ(runner_.calls[1][0], "rpm");
}

TEST_F(DownloadHotfixTest, DryRunPlansAndRunsNothing) {
  Pointer(R"({"version":"202604.01.1","scripts_version":"202604.01.1"})");
  opt_.Write("nodecustomdata.yml",
             "write_files:\n- {path: " + opt_.File("marker").string() + ", content: m}\n");
  options_.dry_run = true;
  auto r = Run("202604.01.0");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.binary, BinaryOutcome::kInstalled);
  EXPECT_THAT(runner_.calls, IsEmpty());
  ASSERT_EQ(r.commands.size(), 4u);
  EXPECT_EQ(r.commands[3][0], "dpkg-query");
  EXPECT_EQ(r.staged_to, options_.hotfix_binary);
  EXPECT_THAT(r.files, ElementsAre(opt_.File("marker").string()));
  EXPECT_THAT(opt_.Names(), ElementsAre("aks-node-controller", "aks-node-controller-hotfix.json",
                                        "nodecustomdata.yml"));
}

// Reference nodecustomdata_test.go: the scripts hotfix follows scripts_version's gate.
TEST_F(DownloadHotfixTest, ScriptsHotfixFollowsScriptsVersion) {
  const std::string marker = opt_.File("marker");
  opt_.Write("nodecustomdata.yml", "write_files:\n- {path: " + marker + ", content: m}\n");
  Pointer("{}");
  EXPECT_EQ(Run("202604.01.0").scripts, ScriptsOutcome::kNone);
  Pointer(R"({"scripts_version":"202605.30.1"})");
  EXPECT_EQ(Run("202604.01.0").scripts, ScriptsOutcome::kNotTargeted);
  EXPECT_FALSE(std::filesystem::exists(marker));
  Pointer(R"({"scripts_version":"202604.01.1"})");
  auto r = Run("202604.01.0");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.scripts, ScriptsOutcome::kApplied);
  EXPECT_EQ(ReadFile(marker), "m");
  EXPECT_THAT(runner_.calls, IsEmpty());  // no binary target
}

TEST_F(DownloadHotfixTest, ScriptsFailureDoesNotStopTheBinary) {
  opt_.Write("nodecustomdata.yml", "write_files:\n- {path: /x, encoding: b64}\n");
  Pointer(R"({"version":"202604.01.1","scripts_version":"202604.01.1"})");
  InstalledBinary();
  auto r = Run("202604.01.0");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.scripts, ScriptsOutcome::kFailed);
  EXPECT_THAT(r.scripts_error.message(), HasSubstr("unsupported encoding \"b64\""));
  EXPECT_EQ(r.binary, BinaryOutcome::kInstalled);
  EXPECT_THAT(log_.Messages(), ::testing::Contains("failed to apply node custom data"));
}

// Each failure point has its kind, which the outcome report sends (hotfix_report.h).
TEST_F(DownloadHotfixTest, EachFailurePointHasItsKind) {
  Pointer(R"({"version":"202604.01.1"})");
  auto kind = [&](const std::string& current = "202604.01.0") {
    auto r = Run(current);
    EXPECT_EQ(r.binary, r.binary_failure == BinaryFailure::kNone ? BinaryOutcome::kInstalled
                                                                 : BinaryOutcome::kFailed);
    EXPECT_TRUE(r.binary_targeted);
    return r.binary_failure;
  };
  EXPECT_EQ(kind(), BinaryFailure::kStageFailed);  // no package binary to stage
  InstalledBinary();
  EXPECT_EQ(kind(), BinaryFailure::kNone);
  runner_.query_output = "installed\t202604.01.10\n";
  EXPECT_EQ(kind(), BinaryFailure::kVersionMismatch);
  runner_.query_output = "";  // not installed at all
  EXPECT_EQ(kind(), BinaryFailure::kVersionMismatch);
  runner_.query_cannot_run = true;  // nothing learnt about the package: not a mismatch
  EXPECT_EQ(kind(), BinaryFailure::kOther);
  runner_.query_cannot_run = false;
  runner_.exit_codes = {0, 0, 100};  // apt-get install fails every attempt
  EXPECT_EQ(kind(), BinaryFailure::kInstallFailed);
  runner_.exit_codes = {0};
  etc_.Write("os-release", "ID=flatcar\n");
  EXPECT_EQ(kind(), BinaryFailure::kPlatformUnsupported);
  etc_.Write("os-release", "ID=ubuntu\n");
  ::unlink(etc_.File("sources.list.d/microsoft-prod.list").c_str());
  EXPECT_EQ(kind(), BinaryFailure::kPlatformUnsupported);

  auto not_targeted = Run("202604.01.1");
  EXPECT_FALSE(not_targeted.binary_targeted);
  EXPECT_EQ(not_targeted.binary_failure, BinaryFailure::kNone);
}

class DownloadHotfixCommandTest : public DownloadHotfixTest {
 protected:
  DownloadHotfixResult RunCommand(const std::string& current) {
    options_.current_version = current;
    return RunDownloadHotfixCommand(options_, runner_, opt_.File(".lock"), events_.path(),
                                    log_.logger(), reporter_);
  }
  // Records what the reporter saw, and whether the run's lock was still held then.
  void RecordReports() {
    reporter_ = [this](const DownloadHotfixResult& r) {
      reported_.push_back(r);
      lock_held_while_reporting_.push_back(
          !FileLock::OnFile(opt_.File(".lock"), Deadline::After({})).ok());
      events_while_reporting_.push_back(events_.Names().size());
    };
  }
  nlohmann::json OnlyEvent() {
    auto names = events_.Names();
    EXPECT_EQ(names.size(), 1u);
    return names.empty() ? nlohmann::json()
                         : nlohmann::json::parse(ReadFile(events_.File(names[0])));
  }
  TempDir events_{"events"};
  DownloadHotfixReporter reporter_;
  std::vector<DownloadHotfixResult> reported_;
  std::vector<bool> lock_held_while_reporting_;
  std::vector<size_t> events_while_reporting_;
};

TEST_F(DownloadHotfixCommandTest, OneEventPerRun) {
  Pointer(R"({"version":"202604.01.1"})");
  InstalledBinary();
  auto r = RunCommand("202604.01.0");
  EXPECT_EQ(r.exit_code, 0);
  auto event = OnlyEvent();
  EXPECT_EQ(event["TaskName"], "AKS.AKSNodeController.DownloadHotfix");
  EXPECT_EQ(event["EventLevel"], "Informational");
  EXPECT_THAT(event["Message"].get<std::string>(),
              HasSubstr("download-hotfix outcome=installed version=202604.01.1 "
                        "route=packageManager scripts=none | "));
  auto msgs = log_.Messages();
  EXPECT_EQ(msgs.front(), "aks-node-controller hotfix download started");
  EXPECT_EQ(msgs.back(), "aks-node-controller hotfix download finished");
}

TEST_F(DownloadHotfixCommandTest, FailureIsAnErrorEvent) {
  Pointer(R"({"version":"202604.01.1"})");
  auto r = RunCommand("202604.01.0");  // no package binary: staging fails
  EXPECT_EQ(r.exit_code, 1);
  auto event = OnlyEvent();
  EXPECT_EQ(event["EventLevel"], "Error");
  EXPECT_THAT(event["Message"].get<std::string>(), HasSubstr("outcome=failed version=202604.01.1"));
  EXPECT_THAT(event["Message"].get<std::string>(), HasSubstr("error=stage hotfix binary: reading"));
  EXPECT_EQ(log_.Lines().back()["msg"], "aks-node-controller hotfix download failed");
  EXPECT_EQ(log_.Lines().back()["level"], "ERROR");
}

TEST_F(DownloadHotfixCommandTest, ASecondRunWhileOneHoldsTheLockDoesNothing) {
  Pointer(R"({"version":"202604.01.1"})");
  InstalledBinary();
  StatusOr<FileLock> held = FileLock::OnFile(opt_.File(".lock"), Deadline::After({}));
  ASSERT_TRUE(held.ok());
  auto r = RunCommand("202604.01.0");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.binary, BinaryOutcome::kBusy);
  EXPECT_THAT(runner_.calls, IsEmpty());
  EXPECT_THAT(OnlyEvent()["Message"].get<std::string>(), HasSubstr("outcome=busy"));
  EXPECT_THAT(
      log_.Messages(),
      ::testing::Contains("another download-hotfix run holds the lock; not starting a second one"));
}

TEST_F(DownloadHotfixCommandTest, DryRunWritesNoEventAndTakesNoLock) {
  Pointer(R"({"version":"202604.01.1"})");
  options_.dry_run = true;
  auto r = RunCommand("202604.01.0");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(events_.Names().empty());
  EXPECT_FALSE(std::filesystem::exists(opt_.File(".lock")));
}

}  // namespace
}  // namespace hotfix::node

namespace hotfix::node {
namespace {

TEST_F(DownloadHotfixCommandTest, TheReporterRunsOnceAfterTheEventUnderTheLock) {
  RecordReports();
  Pointer(R"({"version":"202604.01.1"})");
  InstalledBinary();
  auto r = RunCommand("202604.01.0");
  EXPECT_EQ(r.exit_code, 0);
  ASSERT_EQ(reported_.size(), 1u);
  EXPECT_EQ(reported_[0].binary, BinaryOutcome::kInstalled);
  EXPECT_EQ(reported_[0].binary_target, "202604.01.1");
  EXPECT_THAT(lock_held_while_reporting_, ElementsAre(true));
  EXPECT_THAT(events_while_reporting_, ElementsAre(1u));
  EXPECT_EQ(log_.Messages().back(), "aks-node-controller hotfix download finished");
}

TEST_F(DownloadHotfixCommandTest, TheReporterIsNotCalledWhenBusyNorInADryRun) {
  RecordReports();
  Pointer(R"({"version":"202604.01.1"})");
  InstalledBinary();
  {
    StatusOr<FileLock> held = FileLock::OnFile(opt_.File(".lock"), Deadline::After({}));
    ASSERT_TRUE(held.ok());
    EXPECT_EQ(RunCommand("202604.01.0").binary, BinaryOutcome::kBusy);
  }
  options_.dry_run = true;
  EXPECT_EQ(RunCommand("202604.01.0").binary, BinaryOutcome::kInstalled);
  EXPECT_THAT(reported_, IsEmpty());
}

TEST_F(DownloadHotfixCommandTest, AReporterThatThrowsChangesNothing) {
  reporter_ = [](const DownloadHotfixResult&) { throw std::runtime_error("reporter exploded"); };
  Pointer(R"({"version":"202604.01.1"})");
  InstalledBinary();
  runner_.exit_codes = {0, 0, 100};
  auto r = RunCommand("202604.01.0");
  EXPECT_EQ(r.exit_code, 100);
  EXPECT_EQ(r.binary_failure, BinaryFailure::kInstallFailed);
  OnlyEvent();
  EXPECT_THAT(log_.Messages(), ::testing::Contains("hotfix outcome report failed (fail-open)"));
  EXPECT_EQ(log_.Messages().back(), "aks-node-controller hotfix download failed");
}

// An exception keeps what the run had learnt: the version it was installing, for the report.
TEST_F(DownloadHotfixCommandTest, AnExceptionIsFailedOtherWithTheTarget) {
  RecordReports();
  Pointer(R"({"version":"202604.01.1"})");
  runner_.throw_on_call = true;
  auto r = RunCommand("202604.01.0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.binary, BinaryOutcome::kFailed);
  EXPECT_EQ(r.binary_failure, BinaryFailure::kOther);
  EXPECT_TRUE(r.binary_targeted);
  EXPECT_EQ(r.binary_target, "202604.01.1");
  EXPECT_THAT(r.error.message(), HasSubstr("unexpected exception: runner exploded"));
  ASSERT_EQ(reported_.size(), 1u);
  EXPECT_EQ(reported_[0].binary_failure, BinaryFailure::kOther);
  EXPECT_THAT(OnlyEvent()["Message"].get<std::string>(),
              HasSubstr("outcome=failed version=202604.01.1"));
}

}  // namespace
}  // namespace hotfix::node
