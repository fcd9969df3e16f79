// hotfix-agent download-hotfix end to end: the real binary, the real os-release and sources
// files of a scratch node, and the package managers found through PATH. Recording stand-ins
// (first on PATH) log each argv exactly and play scripted exit codes, hangs and outputs; the
// install itself is done once by the real dpkg, from a .deb built here with dpkg-deb, into a
// scratch root (dpkg --root), and confirmed by the real dpkg-query. The outcome report goes,
// as check-hotfix's call does, through the real HAProxy to a libgrpc++ service, with the
// attested document from an IMDS stand-in.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bin_dir.h"
#include "check_hotfix_run.h"
#include "imds_standin.h"
#include "ports.h"
#include "proxied_lps.h"
#include "recorded_calls.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_certs.h"

namespace hotfix::testsupport {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr auto kRunTimeout = 60s;

// Counts calls of one kind in $FAKE_DIR/<key>.n and prints the count.
constexpr char kCount[] =
    "count() { n=$(($(cat \"$FAKE_DIR/$1.n\" 2>/dev/null || echo 0) + 1)); "
    "echo $n > \"$FAKE_DIR/$1.n\"; echo $n; }\n";

// A plain command, inheriting the environment.
SpawnOptions Cmd(std::vector<std::string> argv) {
  SpawnOptions spawn;
  spawn.argv = std::move(argv);
  return spawn;
}

class DownloadHotfixE2eTest : public ::testing::Test {
 protected:
  DownloadHotfixE2eTest() {
    for (const char* d : {"opt", "usr/bin", "etc/apt/sources.list.d", "events", "fakebin"}) {
      fs::create_directories(node_.File(d));
    }
    node_.Write("etc/os-release",
                "PRETTY_NAME=\"Ubuntu 22.04.5 LTS\"\nNAME=\"Ubuntu\"\nID=ubuntu\n");
    node_.Write("etc/apt/sources.list.d/microsoft-prod.list",
                "deb [arch=amd64] https://packages.microsoft.com/ubuntu/22.04/prod jammy main\n");
    vhd_ = node_.Write("opt/aks-node-controller", "#!/bin/sh\necho vhd\n");
    fs::permissions(vhd_, fs::perms(0750));
    // Defaults that install 202604.01.1 successfully; tests replace what they exercise.
    Tool("dpkg", "exit 0\n");
    Tool("apt-get", "exit 0\n");
    Tool("dpkg-query", "printf 'installed\\t202604.01.1\\n'\n");
  }

  // A stand-in on PATH: records its argv, then runs body.
  void Tool(const std::string& name, const std::string& body) {
    fs::path p = node_.Write("fakebin/" + name, std::string(kRecordCall) + kCount + body);
    fs::permissions(p, fs::perms(0755));
  }
  void Pointer(const std::string& json) {
    node_.Write("opt/aks-node-controller-hotfix.json", json);
  }
  void PackageBinary(const std::string& content) {
    node_.Write("usr/bin/aks-node-controller", content);
  }
  fs::path Hotfix() const { return node_.File("opt/aks-node-controller-hotfix"); }

  SpawnOptions Spawn(std::vector<std::string> extra, const std::string& current = "202604.01.0") {
    SpawnOptions spawn;
    spawn.argv = {BinDir() + "/hotfix-agent", "download-hotfix", "--hotfix-pointer",
                  node_.File("opt/aks-node-controller-hotfix.json"), "--current-version", current,
                  "--os-release", node_.File("etc/os-release"), "--apt-sources-dir",
                  node_.File("etc/apt/sources.list.d"), "--package-binary",
                  package_binary_.empty() ? node_.File("usr/bin/aks-node-controller").string()
                                          : package_binary_,
                  "--vhd-binary", vhd_, "--hotfix-binary", Hotfix(), "--node-custom-data",
                  node_.File("opt/nodecustomdata.yml"), "--retry-backoff", "10ms", "--events-dir",
                  node_.File("events"), "--log-file", node_.File("agent.log"),
                  // No bootstrap files unless a test writes them: the report then fails at
                  // once, locally, without asking IMDS.
                  "--node-config", node_.File("opt/aks-node-controller-config.json"), "--nbc-cmd",
                  node_.File("opt/aks-node-controller-nbc-cmd.sh")};
    spawn.argv.insert(spawn.argv.end(), report_args_.begin(), report_args_.end());
    spawn.argv.insert(spawn.argv.end(), extra.begin(), extra.end());
    spawn.env["PATH"] = node_.File("fakebin").string() +
                        ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    spawn.env["FAKE_DIR"] = node_.path();
    return spawn;
  }
  RunResult Agent(std::vector<std::string> extra = {}, const std::string& current = "202604.01.0") {
    return RunProcess(Spawn(std::move(extra), current), kRunTimeout);
  }

  // Each recorded call as its argv.
  std::vector<std::vector<std::string>> Calls() const { return RecordedCalls(node_.Read("calls")); }
  std::vector<std::string> Programs() const {
    std::vector<std::string> names;
    for (const auto& c : Calls()) names.push_back(c[0]);
    return names;
  }
  // True once a stand-in has been called (up to 5 s).
  bool WaitForFirstCall() const {
    for (int i = 0; i < 500 && node_.Read("calls").empty(); ++i) std::this_thread::sleep_for(10ms);
    return !node_.Read("calls").empty();
  }
  Json OnlyEvent() const {
    std::vector<Json> events = ReadEventFiles(node_.File("events"));
    EXPECT_EQ(events.size(), 1u);
    return events.empty() ? Json() : events[0];
  }

  TempDir node_{"download-hotfix-node"};
  fs::path vhd_;
  std::string package_binary_;
  std::vector<std::string> report_args_;  // the outcome report's flags, when a test sets them
};

TEST_F(DownloadHotfixE2eTest, AptPathRunsTheExactCommandsAndStagesTheBinary) {
  Pointer(R"({"hotfixes":{"202604.01":"202604.01.1"}})");
  PackageBinary("hotfix binary 202604.01.1");
  RunResult run = Agent();
  ASSERT_TRUE(run.status.success()) << run.status.ToString() << run.stderr_text;
  const std::string list = node_.File("etc/apt/sources.list.d/microsoft-prod.list");
  EXPECT_THAT(
      Calls(),
      ElementsAre(
          ElementsAre("dpkg", "--configure", "-a", "--force-confdef", "--force-confold"),
          ElementsAre("apt-get", "update", "-o", "Dpkg::Options::=--force-confold", "-o",
                      "Dir::Etc::sourcelist=" + list, "-o", "Dir::Etc::sourceparts=-"),
          ElementsAre("apt-get", "install", "-y", "--allow-downgrades", "-o",
                      "Dpkg::Options::=--force-confold", "aks-node-controller=202604.01.1*"),
          ElementsAre("dpkg-query", "-W", "-f=${db:Status-Status}\\t${Version}\\n",
                      "aks-node-controller")));
  EXPECT_EQ(node_.Read("opt/aks-node-controller-hotfix"), "hotfix binary 202604.01.1");
  EXPECT_EQ(ModeOf(Hotfix()), 0750u);
  EXPECT_EQ(node_.Read("opt/aks-node-controller"), "#!/bin/sh\necho vhd\n");
  EXPECT_EQ(ModeOf(vhd_), 0750u);
  Json event = OnlyEvent();
  EXPECT_EQ(event["TaskName"], "AKS.AKSNodeController.DownloadHotfix");
  EXPECT_EQ(event["EventLevel"], "Informational");
  EXPECT_THAT(event["Message"].get<std::string>(),
              HasSubstr("download-hotfix outcome=installed version=202604.01.1"));
  EXPECT_THAT(node_.Read("agent.log"), HasSubstr("\"msg\":\"downloaded ANC hotfix\""));
}

// The real thing once: dpkg-deb builds the package, dpkg --root installs it into a scratch root,
// dpkg-query confirms its version, and the installed file is what gets staged.
TEST_F(DownloadHotfixE2eTest, RealDpkgInstallsABuiltDebIntoAScratchRoot) {
  const fs::path pkg = node_.File("pkg");
  fs::create_directories(pkg / "DEBIAN");
  fs::create_directories(pkg / "usr/bin");
  node_.Write("pkg/DEBIAN/control",
              "Package: aks-node-controller\nVersion: 202604.01.1-1\nArchitecture: all\n"
              "Maintainer: AKS <aks@example.com>\nDescription: AKS node controller (test build)\n");
  fs::path bin =
      node_.Write("pkg/usr/bin/aks-node-controller", "#!/bin/sh\necho hotfix 202604.01.1\n");
  fs::permissions(bin, fs::perms(0755));
  const fs::path deb = node_.File("aks-node-controller_202604.01.1-1_all.deb");
  RunResult built = RunProcess(Cmd({"dpkg-deb", "--root-owner-group", "--build", pkg, deb}), 60s);
  ASSERT_TRUE(built.status.success()) << built.stderr_text;

  const fs::path root = node_.File("root");
  for (const char* d : {"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"}) {
    fs::create_directories(root / d);
  }
  node_.Write("root/var/lib/dpkg/status", "");
  node_.Write("root/var/lib/dpkg/available", "");
  const std::string r = root.string();
  // The stand-ins record, then hand over to the real dpkg on the scratch root.
  Tool("dpkg", "exec /usr/bin/dpkg --root=" + r + " --force-not-root \"$@\"\n");
  Tool("apt-get", "case \"$1\" in install) exec /usr/bin/dpkg --root=" + r +
                      " --force-not-root -i " + deb.string() + ";; esac\nexit 0\n");
  Tool("dpkg-query", "exec /usr/bin/dpkg-query --root=" + r + " \"$@\"\n");
  package_binary_ = (root / "usr/bin/aks-node-controller").string();
  Pointer(R"({"version":"202604.01.1"})");

  RunResult run = Agent();
  ASSERT_TRUE(run.status.success()) << run.status.ToString() << run.stderr_text;
  EXPECT_THAT(Programs(), ElementsAre("dpkg", "apt-get", "apt-get", "dpkg-query"));
  EXPECT_EQ(node_.Read("opt/aks-node-controller-hotfix"), "#!/bin/sh\necho hotfix 202604.01.1\n");
  EXPECT_EQ(ModeOf(Hotfix()), 0750u);
  // dpkg really installed it.
  RunResult status = RunProcess(
      Cmd({"dpkg-query", "--root=" + r, "-W", "-f=${Version}", "aks-node-controller"}), 30s);
  EXPECT_EQ(status.stdout_text, "202604.01.1-1");
}

TEST_F(DownloadHotfixE2eTest, RetriesAFailingCommandThenSucceeds) {
  Pointer(R"({"version":"202604.01.1"})");
  PackageBinary("b");
  Tool("apt-get", "case \"$1\" in update) [ \"$(count update)\" -ge 3 ] || exit 100;; esac\n");
  RunResult run = Agent();
  ASSERT_TRUE(run.status.success()) << run.stderr_text;
  EXPECT_THAT(Programs(),
              ElementsAre("dpkg", "apt-get", "apt-get", "apt-get", "apt-get", "dpkg-query"));
  const std::string log = node_.Read("agent.log");
  EXPECT_THAT(log, HasSubstr("\"msg\":\"command failed, retrying\",\"command\":\"env\""));
  EXPECT_THAT(log, HasSubstr("\"attempt\":2,\"maxRetries\":5,\"error\":\"exit status 100\""));
}

TEST_F(DownloadHotfixE2eTest, ExhaustedRetriesExitWithTheCommandsCode) {
  Pointer(R"({"version":"202604.01.1"})");
  PackageBinary("b");
  Tool("apt-get", "case \"$1\" in install) exit 100;; esac\n");
  RunResult run = Agent();
  EXPECT_TRUE(run.status.exited);
  EXPECT_EQ(run.status.exit_code, 100);
  EXPECT_THAT(Programs(), ElementsAre("dpkg", "apt-get", "apt-get", "apt-get", "apt-get", "apt-get",
                                      "apt-get"));
  EXPECT_FALSE(fs::exists(Hotfix()));
  Json event = OnlyEvent();
  EXPECT_EQ(event["EventLevel"], "Error");
  EXPECT_THAT(event["Message"].get<std::string>(),
              HasSubstr("failed after 5 attempts: exit status 100"));
}

TEST_F(DownloadHotfixE2eTest, AHungCommandIsKilledAtItsDeadlineEachAttempt) {
  Pointer(R"({"version":"202604.01.1"})");
  PackageBinary("b");
  Tool("dpkg", "echo $$ >> \"$FAKE_DIR/hung.pids\"; exec sleep 60\n");
  const auto start = std::chrono::steady_clock::now();
  RunResult run = Agent({"--command-timeout", "300ms"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);  // 5 x 60 s without the kill
  EXPECT_EQ(run.status.exit_code, 1);
  EXPECT_THAT(Programs(), ElementsAre("dpkg", "dpkg", "dpkg", "dpkg", "dpkg"));
  EXPECT_THAT(node_.Read("agent.log"), HasSubstr("killed after 300 ms timeout (signal: killed)"));
  std::istringstream pids(node_.Read("hung.pids"));
  for (pid_t pid; pids >> pid;) EXPECT_NE(::kill(pid, 0), 0) << "pid " << pid << " survived";
}

TEST_F(DownloadHotfixE2eTest, SigtermStopsAHungInstallPromptly) {
  Pointer(R"({"version":"202604.01.1"})");
  PackageBinary("b");
  Tool("dpkg", "exec sleep 60\n");
  Subprocess agent(Spawn({}));
  // Wait until the stand-in runs, then ask the agent to stop.
  ASSERT_TRUE(WaitForFirstCall());
  ::kill(agent.pid(), SIGTERM);
  ExitStatus status = agent.Wait(20s);
  EXPECT_FALSE(status.timed_out);
  EXPECT_EQ(status.exit_code, 1);
  EXPECT_THAT(Programs(), ElementsAre("dpkg"));  // no retry after the cancel
  EXPECT_THAT(node_.Read("agent.log"), HasSubstr("cancelled"));
}

TEST_F(DownloadHotfixE2eTest, InstalledVersionOtherThanRequestedIsNotStaged) {
  Pointer(R"({"version":"202604.01.1"})");
  PackageBinary("what the repository served");
  Tool("dpkg-query", "printf 'installed\\t202604.01.10\\n'\n");
  RunResult run = Agent();
  EXPECT_EQ(run.status.exit_code, 1);
  EXPECT_FALSE(fs::exists(Hotfix()));
  EXPECT_THAT(node_.Read("agent.log"),
              HasSubstr("aks-node-controller 202604.01.10 is installed after installing "
                        "202604.01.1; not staging it"));
}

TEST_F(DownloadHotfixE2eTest, AzureLinuxUsesDnfWhenPresentElseTdnf) {
  Pointer(R"({"version":"202604.01.1"})");
  PackageBinary("b");
  node_.Write("etc/os-release", "NAME=\"Microsoft Azure Linux\"\nID=\"azurelinux\"\n");
  Tool("rpm", "printf '202604.01.1\\t1.azl3\\n'\n");
  Tool("tdnf", "exit 0\n");
  ASSERT_TRUE(Agent().status.success());
  Tool("dnf", "exit 0\n");
  ASSERT_TRUE(Agent().status.success());
  EXPECT_THAT(
      Calls(),
      ElementsAre(
          ElementsAre("tdnf", "install", "-y", "--refresh", "--allowerasing",
                      "aks-node-controller-202604.01.1"),
          ElementsAre("rpm", "-q", "--qf", "%{VERSION}\\t%{RELEASE}\\n", "aks-node-controller"),
          ElementsAre("dnf", "install", "-y", "--refresh", "--allowerasing",
                      "aks-node-controller-202604.01.1"),
          ElementsAre("rpm", "-q", "--qf", "%{VERSION}\\t%{RELEASE}\\n", "aks-node-controller")));
}

TEST_F(DownloadHotfixE2eTest, NotTargetedRunsNothingAndExitsZero) {
  Pointer(R"({"hotfixes":{"202604.01":"202604.01.1"}})");
  RunResult run = Agent({}, "202605.30.0");
  EXPECT_TRUE(run.status.success());
  EXPECT_THAT(Calls(), IsEmpty());
  EXPECT_THAT(OnlyEvent()["Message"].get<std::string>(), HasSubstr("outcome=noHotfix"));
}

TEST_F(DownloadHotfixE2eTest, DryRunPrintsTheDecisionAndCommandsAndTouchesNothing) {
  Pointer(R"({"version":"202604.01.1","scripts_version":"202604.01.2"})");
  node_.Write("opt/nodecustomdata.yml",
              "write_files:\n- {path: " + node_.File("opt/marker").string() + ", content: m}\n");
  RunResult run = Agent({"--dry-run"});
  ASSERT_TRUE(run.status.success()) << run.stderr_text;
  Json out = Json::parse(run.stdout_text);
  EXPECT_EQ(out["binary"]["targeted"], true);
  EXPECT_EQ(out["binary"]["version"], "202604.01.1");
  EXPECT_EQ(out["binary"]["package_manager"], "apt-get");
  EXPECT_THAT(out["binary"]["reason"].get<std::string>(),
              HasSubstr("202604.01.1 upgrades 202604.01.0"));
  ASSERT_EQ(out["binary"]["would_run"].size(), 4u);
  EXPECT_EQ(out["binary"]["would_run"][2].back(), "aks-node-controller=202604.01.1*");
  EXPECT_EQ(out["binary"]["would_stage"]["to"], Hotfix().string());
  EXPECT_EQ(out["scripts"]["outcome"], "wouldApply");
  EXPECT_EQ(out["binary"]["outcome"], "wouldInstall");
  EXPECT_EQ(out["scripts"]["would_write"][0], node_.File("opt/marker").string());
  EXPECT_THAT(Calls(), IsEmpty());
  EXPECT_FALSE(fs::exists(node_.File("opt/marker")));
  EXPECT_FALSE(fs::exists(Hotfix()));
  EXPECT_TRUE(fs::is_empty(node_.File("events")));
  EXPECT_FALSE(fs::exists(node_.File("agent.log")));

  RunResult not_targeted = Agent({"--dry-run"}, "202604.01.1");
  Json no = Json::parse(not_targeted.stdout_text);
  EXPECT_EQ(no["binary"]["targeted"], false);
  EXPECT_EQ(no["binary"]["outcome"], "notTargeted");
  EXPECT_THAT(no["binary"]["would_run"], IsEmpty());
}

TEST_F(DownloadHotfixE2eTest, InvalidPointerFailsOpen) {
  Pointer("{not json");
  RunResult run = Agent();
  EXPECT_TRUE(run.status.success());
  EXPECT_THAT(Calls(), IsEmpty());
  EXPECT_THAT(node_.Read("agent.log"),
              HasSubstr("\"msg\":\"failed to read hotfix config, skipping hotfix download\""));
  EXPECT_THAT(OnlyEvent()["Message"].get<std::string>(), HasSubstr("outcome=pointerUnreadable"));
}

TEST_F(DownloadHotfixE2eTest, ASecondConcurrentRunDoesNothing) {
  Pointer(R"({"version":"202604.01.1"})");
  PackageBinary("b");
  Tool("dpkg", "exec sleep 60\n");
  Subprocess first(Spawn({}));
  ASSERT_TRUE(WaitForFirstCall());
  RunResult second = Agent();
  EXPECT_TRUE(second.status.success());
  EXPECT_THAT(second.stderr_text, HasSubstr("another download-hotfix run holds the lock"));
  EXPECT_THAT(Programs(), ElementsAre("dpkg"));  // only the first run's command
  first.Stop();
}

TEST_F(DownloadHotfixE2eTest, CommandLineErrors) {
  RunResult positional =
      RunProcess(Cmd({BinDir() + "/hotfix-agent", "download-hotfix", "extra"}), 30s);
  EXPECT_EQ(positional.status.exit_code, 1);
  EXPECT_THAT(positional.stderr_text, HasSubstr("unexpected download-hotfix arguments: extra"));
  RunResult flag = RunProcess(Cmd({BinDir() + "/hotfix-agent", "download-hotfix", "--bogus"}), 30s);
  EXPECT_EQ(flag.status.exit_code, 2);
  RunResult backoff = RunProcess(
      Cmd({BinDir() + "/hotfix-agent", "download-hotfix", "--retry-backoff", "2h"}), 30s);
  EXPECT_EQ(backoff.status.exit_code, 2);
  EXPECT_THAT(backoff.stderr_text, HasSubstr("--retry-backoff: duration \"2h\": want 0s to 10m"));
  RunResult timeout = RunProcess(
      Cmd({BinDir() + "/hotfix-agent", "download-hotfix", "--command-timeout", "0"}), 30s);
  EXPECT_EQ(timeout.status.exit_code, 2);
  RunResult help = RunProcess(Cmd({BinDir() + "/hotfix-agent", "download-hotfix", "--help"}), 30s);
  EXPECT_EQ(help.status.exit_code, 0);
  for (const char* f : {"--hotfix-pointer", "--current-version", "--os-release",
                        "--apt-sources-dir", "--package-binary", "--vhd-binary", "--hotfix-binary",
                        "--node-custom-data", "--retry-backoff", "--command-timeout",
                        "--events-dir", "--log-file", "--dry-run", "--log-level"}) {
    EXPECT_THAT(help.stdout_text, HasSubstr(f));
  }
  for (const char* f : {"--node-config", "--nbc-cmd", "--imds-url", "--connect-to", "--server-name",
                        "--component", "--no-report"}) {
    EXPECT_THAT(help.stdout_text, HasSubstr(f));
  }
}

// ---- The outcome report ------------------------------------------------------------------
//
//   hotfix-agent download-hotfix --TLS--> HAProxy --ALPN aks-live-patching--> HelloTap -->
//        |                                       FakeLpsServer (ReportHotfixOutcome)
//        `--HTTP--> ImdsStandin

constexpr auto kReportBudget = 3s;
constexpr auto kSlack = 1500ms;  // process exit, ASan, a loaded machine

class DownloadHotfixReportE2eTest : public DownloadHotfixE2eTest {
 protected:
  DownloadHotfixReportE2eTest() {
    node_.Write("opt/aks-node-controller-config.json",
                NodeConfigJson(kApiserverFqdn, ca_.cert_pem()).dump());
    report_args_ = {"--imds-url", imds_.document_url(), "--connect-to",
                    LoopbackAddress(stack_.proxy.frontend_port())};
    Pointer(R"({"hotfixes":{"202604.01":"202604.01.1"}})");
    PackageBinary("hotfix binary 202604.01.1");
  }
  void TearDown() override {
    if (HasFailure()) {
      ADD_FAILURE() << "HAProxy log:\n"
                    << stack_.proxy.Log() << "\nagent log:\n"
                    << node_.Read("agent.log");
    }
  }

  // A run as the launcher makes it, with a developer's or CI's proxy variables removed.
  RunResult Run(std::vector<std::string> extra = {}) {
    SpawnOptions spawn = Spawn(std::move(extra));
    for (const char* name : {"HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "HTTP_PROXY",
                             "http_proxy", "ALL_PROXY", "all_proxy"}) {
      spawn.unset_env.push_back(name);
    }
    return RunProcess(std::move(spawn), kRunTimeout);
  }
  std::vector<Json> LogLines() const { return JsonLines(node_.Read("agent.log")); }
  // The log line with this message, or null.
  Json LogLine(const std::string& msg) const {
    for (const Json& line : LogLines()) {
      if (line.value("msg", "") == msg) return line;
    }
    return nullptr;
  }
  std::string Marker() const { return node_.Read("opt/aks-node-controller-hotfix-report.json"); }

  TestCa ca_ = TestCa::Create("test-cluster-ca");
  ProxiedLps stack_{ca_, kApiserverFqdn};
  ImdsStandin imds_;
};

TEST_F(DownloadHotfixReportE2eTest, AnInstallReportsInstalledThroughTheAlpnRoute) {
  RunResult run = Run();
  ASSERT_TRUE(run.status.success()) << run.status.ToString() << run.stderr_text;
  EXPECT_EQ(node_.Read("opt/aks-node-controller-hotfix"), "hotfix binary 202604.01.1");

  ASSERT_EQ(stack_.lps.report_count(), 1u);
  LpsReport report = stack_.lps.reports().at(0);
  EXPECT_EQ(report.call.component_name, "aksNodeController");
  EXPECT_EQ(report.base_version, "202604.01");
  EXPECT_EQ(report.hotfix_version, "202604.01.1");
  EXPECT_EQ(report.outcome_name, "HOTFIX_OUTCOME_INSTALLED");
  EXPECT_EQ(report.detail, "");
  // The identity and transport of check-hotfix's call.
  ASSERT_EQ(report.call.Count("authorization"), 1u);
  std::vector<std::string> served = imds_.served_signatures();
  ASSERT_EQ(served.size(), 1u);
  EXPECT_EQ(report.call.Authorization(), served[0]);
  EXPECT_EQ(imds_.requests().at(0).Header("Metadata"), "true");
  EXPECT_EQ(report.call.authority, kApiserverFqdn);
  EXPECT_THAT(report.call.UserAgent(), HasSubstr("hotfix-agent/"));
  ASSERT_TRUE(report.call.deadline_remaining.has_value()) << "no grpc-timeout sent";
  EXPECT_LE(report.call.deadline_remaining->count(), 3000);
  ASSERT_EQ(stack_.tap.connection_count(), 1u);
  TappedConnection seen = stack_.tap.connections().at(0);
  EXPECT_EQ(seen.hello.sni, kApiserverFqdn);
  EXPECT_THAT(seen.hello.alpn, ElementsAre("aks-live-patching", "h2"));
  EXPECT_EQ(stack_.lps.call_count(), 0u);  // no GetComponentConfig
  EXPECT_EQ(stack_.apiserver.accepted_count(), 0u);

  EXPECT_EQ(Json::parse(Marker()),
            Json::parse(R"({"base":"202604.01","version":"202604.01.1","outcome":"INSTALLED"})"));
  Json sent = LogLine("reported hotfix outcome to LPS");
  ASSERT_FALSE(sent.is_null()) << node_.Read("agent.log");
  EXPECT_EQ(sent["outcome"], "INSTALLED");
  OnlyEvent();  // still exactly one event
  // The token is a credential: it appears in no log line.
  EXPECT_THAT(node_.Read("agent.log"), Not(HasSubstr(served[0].substr(0, 40))));
  EXPECT_THAT(run.stderr_text, Not(HasSubstr(served[0].substr(0, 40))));
}

TEST_F(DownloadHotfixReportE2eTest, AFailingPackageManagerReportsInstallFailedAndKeepsItsCode) {
  Tool("apt-get", "case \"$1\" in install) exit 100;; esac\n");
  RunResult run = Run();
  EXPECT_TRUE(run.status.exited);
  EXPECT_EQ(run.status.exit_code, 100);
  EXPECT_FALSE(fs::exists(Hotfix()));
  ASSERT_GE(stack_.lps.report_count(), 1u);
  LpsReport report = stack_.lps.reports().back();
  EXPECT_EQ(report.outcome_name, "HOTFIX_OUTCOME_INSTALL_FAILED");
  EXPECT_EQ(report.hotfix_version, "202604.01.1");
  EXPECT_THAT(report.detail, HasSubstr("failed after 5 attempts: exit status 100"));
  EXPECT_LE(report.detail.size(), 256u);
  EXPECT_EQ(Json::parse(Marker())["outcome"], "INSTALL_FAILED");
}

TEST_F(DownloadHotfixReportE2eTest, ARerunWithTheSameOutcomeSendsNothing) {
  ASSERT_TRUE(Run().status.success());
  ASSERT_EQ(stack_.lps.report_count(), 1u);
  const std::string marker = Marker();
  RunResult again = Run();
  ASSERT_TRUE(again.status.success()) << again.stderr_text;
  EXPECT_EQ(stack_.lps.report_count(), 1u);
  EXPECT_EQ(imds_.request_count(), 1u);  // the marker is read before IMDS is asked
  EXPECT_EQ(stack_.tap.connection_count(), 1u);
  EXPECT_EQ(Marker(), marker);
  EXPECT_FALSE(LogLine("hotfix outcome already reported to LPS; not sending it again").is_null());
}

TEST_F(DownloadHotfixReportE2eTest, AnUnavailableServiceLeavesNoMarkerAndTheNextRunSends) {
  stack_.lps.SetReportStatus(grpc::StatusCode::UNAVAILABLE, "draining");
  RunResult run = Run();
  ASSERT_TRUE(run.status.success()) << run.stderr_text;
  EXPECT_EQ(stack_.lps.report_count(), 1u);
  EXPECT_FALSE(fs::exists(node_.File("opt/aks-node-controller-hotfix-report.json")));
  Json failed = LogLine("failed to report hotfix outcome to LPS (fail-open)");
  ASSERT_FALSE(failed.is_null()) << node_.Read("agent.log");
  EXPECT_EQ(failed["level"], "WARN");
  EXPECT_THAT(failed["error"].get<std::string>(), HasSubstr("code Unavailable: draining"));

  stack_.lps.SetReportStatus(grpc::StatusCode::OK);
  ASSERT_TRUE(Run().status.success());
  EXPECT_EQ(stack_.lps.report_count(), 2u);
  EXPECT_EQ(Json::parse(Marker())["outcome"], "INSTALLED");
}

// The report's part of the run is measured from the last package-manager command (the version
// query stamps the time) to the end of the process: staging, the event and the report.
TEST_F(DownloadHotfixReportE2eTest, AServiceThatNeverAnswersCannotHoldTheRunBeyondTheBudget) {
  stack_.lps.SetReportDelay(60s);
  Tool("dpkg-query", "date +%s%N > \"$FAKE_DIR/query.ns\"\nprintf 'installed\\t202604.01.1\\n'\n");
  RunResult run = Run();
  const auto ended = std::chrono::system_clock::now();
  EXPECT_TRUE(run.status.success()) << run.status.ToString() << run.stderr_text;
  EXPECT_EQ(node_.Read("opt/aks-node-controller-hotfix"), "hotfix binary 202604.01.1");
  ASSERT_FALSE(node_.Read("query.ns").empty());
  const std::chrono::system_clock::time_point queried{
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(std::stoll(node_.Read("query.ns"))))};
  EXPECT_LT(ended - queried, kReportBudget + kSlack);
  EXPECT_EQ(stack_.lps.report_count(), 1u);  // the service saw the call and never answered
  EXPECT_FALSE(fs::exists(node_.File("opt/aks-node-controller-hotfix-report.json")));
  Json failed = LogLine("failed to report hotfix outcome to LPS (fail-open)");
  ASSERT_FALSE(failed.is_null()) << node_.Read("agent.log");
  EXPECT_THAT(failed["error"].get<std::string>(), HasSubstr("DeadlineExceeded"));
  EXPECT_LT(failed["durationMs"].get<int64_t>(), 3000 + 500);
  OnlyEvent();
}

TEST_F(DownloadHotfixReportE2eTest, NoReportDryRunAndNothingToDoSendNothing) {
  RunResult no_report = Run({"--no-report"});
  ASSERT_TRUE(no_report.status.success()) << no_report.stderr_text;
  EXPECT_FALSE(LogLine("hotfix outcome not reported to LPS (--no-report)").is_null());
  RunResult dry = Run({"--dry-run"});
  ASSERT_TRUE(dry.status.success()) << dry.stderr_text;
  EXPECT_EQ(Json::parse(dry.stdout_text)["binary"]["outcome"], "wouldInstall");
  Pointer(R"({"hotfixes":{"202604.01":"202604.01.0"}})");  // not an upgrade
  ASSERT_TRUE(Run().status.success());
  EXPECT_EQ(stack_.lps.report_count(), 0u);
  EXPECT_EQ(imds_.request_count(), 0u);
  EXPECT_EQ(stack_.tap.connection_count(), 0u);
  EXPECT_FALSE(fs::exists(node_.File("opt/aks-node-controller-hotfix-report.json")));
}

}  // namespace
}  // namespace hotfix::testsupport
