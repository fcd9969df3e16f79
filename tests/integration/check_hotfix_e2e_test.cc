// hotfix-agent check-hotfix end to end, as a node runs it: the real binary, through the real
// HAProxy running deploy/haproxy/haproxy.cfg, to a real libgrpc++ service, with certificates
// made here and the IMDS contract served on loopback.
//
//   hotfix-agent --TLS--> HAProxy --ALPN aks-live-patching--> HelloTap --> FakeLpsServer
//        |                       `--anything else---------------------> TlsPeer "apiserver"
//        `--HTTP--> ImdsStandin

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bin_dir.h"
#include "check_hotfix_run.h"
#include "common/base64.h"
#include "imds_standin.h"
#include "ports.h"
#include "proxied_lps.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_certs.h"

namespace hotfix::testsupport {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Json = nlohmann::json;

constexpr char kServedMap[] =
    R"({"hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}})";
constexpr char kPreSeeded[] = R"({"version":"202604.01.2","scripts_version":"202604.01.1"})";
// Generous bounds only: the budget is 3 s for the exchange plus up to 2 s for IMDS's retry.
constexpr auto kRunTimeout = std::chrono::seconds(30);
constexpr auto kWithinBudget = std::chrono::milliseconds(8000);

// What one run of the binary left behind.
struct AgentRun {
  ExitStatus status;
  std::string stdout_text;
  std::string stderr_text;
  std::string log_file;
  std::vector<Json> events;
  std::vector<Json> log_lines;  // parsed from the log file

  const Json& Event() const { return events.at(0); }
  bool Logged(const std::string& msg) const {
    for (const auto& l : log_lines) {
      if (l.value("msg", "") == msg) return true;
    }
    return false;
  }
};

class CheckHotfixE2eTest : public ::testing::Test {
 protected:
  CheckHotfixE2eTest() {
    stack_.lps.SetConfig(kServedMap);
    WriteNodeConfig(ca_.cert_pem());
  }

  void TearDown() override {
    if (HasFailure()) {
      ADD_FAILURE() << "HAProxy log:\n"
                    << stack_.proxy.Log() << "\nagent stderr:\n"
                    << last_stderr_;
    }
  }

  void WriteNodeConfig(const std::string& ca_pem, const std::string& extra = "") {
    std::string text = NodeConfigJson(kApiserverFqdn, ca_pem).dump();
    if (!extra.empty()) text = text.substr(0, text.size() - 1) + "," + extra + "}";
    dir_.Write("config.json", text);
  }

  std::string PointerPath() const { return dir_.File("hotfix.json").string(); }

  CheckHotfixArgs Args(uint16_t connect_port) const {
    CheckHotfixArgs args;
    args.node_config = dir_.File("config.json");
    args.nbc_cmd = dir_.File("nbc-cmd.sh");
    args.pointer = PointerPath();
    args.imds_url = imds_url_;
    args.connect_to = LoopbackAddress(connect_port);
    args.events_dir = dir_.File("events");
    args.log_file = dir_.File("agent.log");
    args.current_version = current_version_;
    return args;
  }

  AgentRun Run(std::vector<std::string> extra_args = {},
               std::map<std::string, std::string> env = {},
               std::optional<uint16_t> connect_port = std::nullopt) {
    CheckHotfixArgs args = Args(connect_port.value_or(stack_.proxy.frontend_port()));
    args.extra_args = std::move(extra_args);
    args.env = std::move(env);
    RunResult r = RunProcess(CheckHotfixSpawn(args), kRunTimeout);
    AgentRun run;
    run.status = r.status;
    run.stdout_text = r.stdout_text;
    run.stderr_text = r.stderr_text;
    last_stderr_ = r.stderr_text;
    run.log_file = dir_.Read("agent.log");
    run.log_lines = JsonLines(run.log_file);
    for (const Json& line : run.log_lines) EXPECT_FALSE(line.is_discarded()) << run.log_file;
    run.events = ReadEventFiles(args.events_dir);
    for (const Json& event : run.events) EXPECT_FALSE(event.is_discarded()) << "an event file";
    return run;
  }

  // Every run exits 0 and reports exactly one event, whatever happened.
  void ExpectFailOpen(const AgentRun& run, const std::string& outcome) {
    EXPECT_TRUE(run.status.success()) << run.status.ToString();
    ASSERT_EQ(run.events.size(), 1u);
    EXPECT_EQ(run.Event()["TaskName"], "AKS.AKSNodeController.CheckHotfix");
    EXPECT_THAT(run.Event()["Message"].get<std::string>(),
                StartsWith("check-hotfix outcome=" + outcome));
    EXPECT_EQ(run.Event()["EventLevel"], outcome == "failed" ? "Error" : "Informational");
    EXPECT_TRUE(run.Logged("aks-node-controller check-hotfix started"));
    EXPECT_LT(run.status.wall_time, kWithinBudget);
  }

  std::string ErrorOf(const AgentRun& run) { return run.Event()["Message"].get<std::string>(); }

  TestCa ca_ = TestCa::Create("test-cluster-ca");
  ProxiedLps stack_{ca_, kApiserverFqdn};
  ImdsStandin imds_;
  TempDir dir_{"check-hotfix-e2e"};
  std::string imds_url_ = imds_.document_url();
  std::string current_version_ = "202604.01.0";
  std::string last_stderr_;
};

TEST_F(CheckHotfixE2eTest, StagesTheServedMapThroughTheAlpnRoute) {
  std::filesystem::path pointer = dir_.Write("hotfix.json", kPreSeeded);
  std::filesystem::permissions(pointer, std::filesystem::perms(0600));

  AgentRun run = Run();

  ExpectFailOpen(run, "lpsRead");
  EXPECT_EQ(Json::parse(dir_.Read("hotfix.json")),
            Json::parse(R"({"version":"202604.01.2","scripts_version":"202604.01.1",)"
                        R"("hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}})"));
  EXPECT_EQ(ModeOf(pointer), 0600u);
  EXPECT_TRUE(run.Logged("staged hotfix pointer for download-hotfix"));
  EXPECT_TRUE(run.Logged("check-hotfix completed"));
  EXPECT_EQ(stack_.apiserver.accepted_count(), 0u);
}

// The launcher's order (AgentBaker's aks-node-controller-launcher.sh): check-hotfix stages,
// download-hotfix reads what was staged. download-hotfix's dry run shows the served map (not the
// preserved legacy version) decides, and that scripts_version survived the read-modify-write to
// gate the scripts hotfix.
TEST_F(CheckHotfixE2eTest, DownloadHotfixActsOnWhatCheckHotfixStaged) {
  dir_.Write("hotfix.json", kPreSeeded);
  ExpectFailOpen(Run(), "lpsRead");
  dir_.Write("os-release", "ID=ubuntu\n");
  std::filesystem::create_directories(dir_.File("sources.list.d"));
  dir_.Write("sources.list.d/microsoft-prod.sources", "Types: deb\n");
  SpawnOptions spawn;
  spawn.argv = {BinDir() + "/hotfix-agent",
                "download-hotfix",
                "--dry-run",
                "--hotfix-pointer",
                dir_.File("hotfix.json").string(),
                "--current-version",
                current_version_,
                "--os-release",
                dir_.File("os-release").string(),
                "--apt-sources-dir",
                dir_.File("sources.list.d").string(),
                "--node-custom-data",
                dir_.File("nodecustomdata.yml").string(),
                "--hotfix-binary",
                dir_.File("aks-node-controller-hotfix").string()};
  RunResult r = RunProcess(std::move(spawn), kRunTimeout);
  ASSERT_TRUE(r.status.success()) << r.stderr_text;
  Json plan = Json::parse(r.stdout_text);
  EXPECT_EQ(plan["binary"]["version"], "202604.01.3");  // the map's entry for 202604.01
  EXPECT_EQ(plan["binary"]["outcome"], "wouldInstall");
  EXPECT_EQ(plan["binary"]["would_run"][1][7],
            "Dir::Etc::sourcelist=" + dir_.File("sources.list.d/microsoft-prod.sources").string());
  EXPECT_EQ(plan["binary"]["would_run"][2].back(), "aks-node-controller=202604.01.3*");
  EXPECT_EQ(plan["scripts"]["version"], "202604.01.1");
  EXPECT_EQ(plan["scripts"]["outcome"], "wouldApply");
}

TEST_F(CheckHotfixE2eTest, OffersTheAlpnListAndSniTheProxyRoutesOn) {
  AgentRun run = Run();
  ExpectFailOpen(run, "lpsRead");
  ASSERT_EQ(stack_.tap.connection_count(), 1u);
  TappedConnection seen = stack_.tap.connections().at(0);
  EXPECT_EQ(seen.hello.sni, kApiserverFqdn);
  EXPECT_THAT(seen.hello.alpn, ElementsAre("aks-live-patching", "h2"));
}

TEST_F(CheckHotfixE2eTest, SendsTheAttestedDocumentAsMetadataAndABoundedDeadline) {
  AgentRun run = Run();
  ExpectFailOpen(run, "lpsRead");
  ASSERT_EQ(stack_.lps.call_count(), 1u);
  LpsCall call = stack_.lps.calls().at(0);
  EXPECT_EQ(call.component_name, "aksNodeController");
  ASSERT_EQ(call.Count("authorization"), 1u);
  std::vector<std::string> served = imds_.served_signatures();
  ASSERT_EQ(served.size(), 1u);
  EXPECT_EQ(call.Authorization(), served[0]);
  EXPECT_THAT(call.UserAgent(), HasSubstr("hotfix-agent/"));
  EXPECT_EQ(call.authority, kApiserverFqdn);
  ASSERT_TRUE(call.deadline_remaining.has_value()) << "no grpc-timeout sent";
  EXPECT_GT(call.deadline_remaining->count(), 0);
  EXPECT_LE(call.deadline_remaining->count(), 5000);
  // IMDS saw the header it requires, and no proxy.
  ASSERT_EQ(imds_.request_count(), 1u);
  EXPECT_EQ(imds_.requests()[0].Header("Metadata"), "true");
  // The token is a credential: it appears in no log line.
  EXPECT_THAT(run.log_file, Not(HasSubstr(served[0].substr(0, 40))));
  EXPECT_THAT(run.stderr_text, Not(HasSubstr(served[0].substr(0, 40))));
}

TEST_F(CheckHotfixE2eTest, NoEntryForThisBaseIsNoHotfixForBaseButStillStaged) {
  current_version_ = "202607.15.0";
  AgentRun run = Run();
  ExpectFailOpen(run, "noHotfixForBase");
  EXPECT_EQ(Json::parse(dir_.Read("hotfix.json"))["hotfixes"], Json::parse(kServedMap)["hotfixes"]);
}

TEST_F(CheckHotfixE2eTest, EmptyServedConfigLeavesThePointerByteForByte) {
  dir_.Write("hotfix.json", kPreSeeded);
  for (const char* served : {"", "{}", R"({"hotfixes":{}})", R"({"version":"202604.01.9"})"}) {
    stack_.lps.SetConfig(served);
    std::filesystem::remove_all(dir_.File("events"));
    AgentRun run = Run();
    ExpectFailOpen(run, "noHotfixAvailable");
    EXPECT_EQ(dir_.Read("hotfix.json"), kPreSeeded) << served;
  }
}

TEST_F(CheckHotfixE2eTest, BenignCodesAreNoHotfixAvailableAndTouchNothing) {
  WriteNodeConfig(ca_.cert_pem(), R"("hotfixes":{"202604.01":"202604.01.7"})");
  for (auto code : {grpc::StatusCode::NOT_FOUND, grpc::StatusCode::PERMISSION_DENIED,
                    grpc::StatusCode::UNAUTHENTICATED}) {
    stack_.lps.SetStatus(code, "no hotfix for you");
    std::filesystem::remove_all(dir_.File("events"));
    AgentRun run = Run();
    ExpectFailOpen(run, "noHotfixAvailable");
    EXPECT_TRUE(run.Logged("LPS reports no hotfix available for this node (fail-open)"));
    EXPECT_FALSE(std::filesystem::exists(PointerPath()));
  }
}

TEST_F(CheckHotfixE2eTest, InvalidArgumentFailsWithoutColdStartFallback) {
  WriteNodeConfig(ca_.cert_pem(), R"("hotfixes":{"202604.01":"202604.01.7"})");
  stack_.lps.SetStatus(grpc::StatusCode::INVALID_ARGUMENT, "component name 100% wrong");
  AgentRun run = Run();
  ExpectFailOpen(run, "failed");
  EXPECT_THAT(ErrorOf(run), HasSubstr("not falling back: LPS gRPC call failed with code "
                                      "InvalidArgument: component name 100% wrong"));
  EXPECT_FALSE(std::filesystem::exists(PointerPath()));
}

TEST_F(CheckHotfixE2eTest, UnavailableFallsBackToTheColdStartPointer) {
  WriteNodeConfig(ca_.cert_pem(), R"("hotfixes":{"202604.01":"202604.01.7"})");
  stack_.lps.SetStatus(grpc::StatusCode::UNAVAILABLE, "draining");
  AgentRun run = Run();
  ExpectFailOpen(run, "customDataFallback");
  EXPECT_TRUE(run.Logged("failed to reach LPS, attempting cold-start fallback"));
  EXPECT_EQ(Json::parse(dir_.Read("hotfix.json")),
            Json::parse(R"({"hotfixes":{"202604.01":"202604.01.7"}})"));
}

TEST_F(CheckHotfixE2eTest, UnavailableWithoutColdStartPointerFails) {
  stack_.lps.SetStatus(grpc::StatusCode::UNAVAILABLE, "draining");
  AgentRun run = Run();
  ExpectFailOpen(run, "failed");
  EXPECT_THAT(ErrorOf(run), HasSubstr("LPS fetch failed and no cold-start pointer present"));
  EXPECT_FALSE(std::filesystem::exists(PointerPath()));
}

TEST_F(CheckHotfixE2eTest, InvalidServedJsonFailsAndKeepsThePointer) {
  dir_.Write("hotfix.json", kPreSeeded);
  stack_.lps.SetConfig("not valid json");
  AgentRun run = Run();
  ExpectFailOpen(run, "failed");
  EXPECT_THAT(ErrorOf(run), HasSubstr("parsing LPS hotfix pointer: unmarshaling hotfix pointer"));
  EXPECT_EQ(dir_.Read("hotfix.json"), kPreSeeded);
}

TEST_F(CheckHotfixE2eTest, OversizedResponseIsResourceExhaustedWithoutFallback) {
  WriteNodeConfig(ca_.cert_pem(), R"("hotfixes":{"202604.01":"202604.01.7"})");
  stack_.lps.SetConfig(R"({"hotfixes":{"202604.01":"202604.01.3"},"pad":")" +
                       std::string(5 << 20, 'x') + "\"}");
  AgentRun run = Run();
  ExpectFailOpen(run, "failed");
  EXPECT_THAT(ErrorOf(run), HasSubstr("code ResourceExhausted"));
  EXPECT_FALSE(std::filesystem::exists(PointerPath()));
}

TEST_F(CheckHotfixE2eTest, ASlowServiceHitsTheDeadlineWithinTheBudget) {
  stack_.lps.SetDelay(std::chrono::seconds(8));
  AgentRun run = Run({"--lps-timeout", "1s"});
  ExpectFailOpen(run, "failed");
  EXPECT_THAT(ErrorOf(run), HasSubstr("code DeadlineExceeded"));
  EXPECT_LT(run.status.wall_time, std::chrono::milliseconds(6000));
  ASSERT_EQ(stack_.lps.call_count(), 1u);
  // grpc-timeout carried the remaining budget: at most 1 s + the 2 s IMDS allowance.
  EXPECT_LE(stack_.lps.calls()[0].deadline_remaining->count(), 3000);
}

TEST_F(CheckHotfixE2eTest, APeerThatNeverAnswersCannotHoldTheNodeBeyondTheBudget) {
  TlsPeerOptions silent;
  silent.mode = TlsPeerMode::kAcceptOnly;
  TlsPeer peer(std::move(silent));
  AgentRun run = Run({}, {}, peer.port());
  ExpectFailOpen(run, "failed");
  EXPECT_THAT(ErrorOf(run), HasSubstr("dialing LPS gRPC"));
  EXPECT_GE(peer.accepted_count(), 1u);
}

TEST_F(CheckHotfixE2eTest, AServerThatSelectsNoAlpnIsRejected) {
  TlsPeerOptions options;
  options.mode = TlsPeerMode::kNoAlpn;
  options.cert = IssueLocalServerCert(ca_, {kApiserverFqdn});
  TlsPeer peer(std::move(options));
  AgentRun run = Run({}, {}, peer.port());
  ExpectFailOpen(run, "failed");
  EXPECT_THAT(ErrorOf(run), HasSubstr("ALPN"));
}

TEST_F(CheckHotfixE2eTest, AnUntrustedServiceCertificateIsRejected) {
  TestCa other = TestCa::Create("some-other-ca");
  WriteNodeConfig(other.cert_pem());
  AgentRun run = Run();
  ExpectFailOpen(run, "failed");
  EXPECT_THAT(ErrorOf(run), HasSubstr("server certificate verification failed"));
  EXPECT_EQ(stack_.lps.call_count(), 0u);
}

TEST_F(CheckHotfixE2eTest, ACertificateForAnotherNameIsRejected) {
  AgentRun run = Run({"--server-name", "not-the-lps.example.com"});
  ExpectFailOpen(run, "failed");
  EXPECT_THAT(ErrorOf(run), HasSubstr("server certificate verification failed"));
  EXPECT_EQ(stack_.lps.call_count(), 0u);
}

TEST_F(CheckHotfixE2eTest, ImdsDownFailsWithoutCallingTheService) {
  imds_url_ = "http://127.0.0.1:" + std::to_string(PickFreePort()) +
              "/metadata/attested/document?api-version=2025-04-07";
  AgentRun run = Run();
  ExpectFailOpen(run, "failed");
  EXPECT_THAT(ErrorOf(run), HasSubstr("imds attested token"));
  EXPECT_TRUE(run.Logged("fetch attempt failed, retrying"));
  EXPECT_EQ(stack_.lps.call_count(), 0u);
}

TEST_F(CheckHotfixE2eTest, ImdsRetriesOnceAfterAServerError) {
  imds_.FailFirst(1, 500);
  AgentRun run = Run();
  ExpectFailOpen(run, "lpsRead");
  EXPECT_EQ(imds_.request_count(), 2u);
}

TEST_F(CheckHotfixE2eTest, FallsBackToNbcCmdWhenTheNodeConfigIsAbsent) {
  std::filesystem::remove(dir_.File("config.json"));
  dir_.Write("nbc-cmd.sh", std::string("PROVISION_OUTPUT=\"/var/log/azure/cluster-provision.log\"; "
                                       "API_SERVER_NAME=") +
                               kApiserverFqdn + " KUBE_CA_CRT=\"" +
                               EncodeStdBase64(ca_.cert_pem()) +
                               "\" /usr/bin/nohup /bin/bash -c \"/bin/bash /opt/azure/"
                               "containers/provision_start.sh\"");
  AgentRun run = Run();
  ExpectFailOpen(run, "lpsRead");
  EXPECT_TRUE(run.Logged("node config not found, trying nbc-cmd.sh fallback"));
  EXPECT_TRUE(run.Logged("loaded LPS target from nbc-cmd.sh fallback"));
  ASSERT_EQ(stack_.tap.connection_count(), 1u);
  EXPECT_EQ(stack_.tap.connections()[0].hello.sni, kApiserverFqdn);
}

TEST_F(CheckHotfixE2eTest, AMissingCaFailsFastWithoutAskingImds) {
  std::filesystem::remove(dir_.File("config.json"));
  dir_.Write("nbc-cmd.sh",
             std::string("API_SERVER_NAME=") + kApiserverFqdn + " /usr/bin/nohup true");
  AgentRun run = Run();
  ExpectFailOpen(run, "failed");
  EXPECT_THAT(ErrorOf(run), HasSubstr("cluster CA unavailable"));
  EXPECT_EQ(imds_.request_count(), 0u);
  EXPECT_EQ(stack_.lps.call_count(), 0u);
}

TEST_F(CheckHotfixE2eTest, ACaWithoutCertificatesFailsBeforeAnythingIsSent) {
  WriteNodeConfig("this is not PEM");
  AgentRun run = Run();
  ExpectFailOpen(run, "failed");
  EXPECT_THAT(ErrorOf(run), HasSubstr("failed to parse cluster CA PEM"));
  EXPECT_EQ(stack_.tap.connection_count(), 0u);
  EXPECT_EQ(stack_.lps.call_count(), 0u);
}

TEST_F(CheckHotfixE2eTest, NeitherBootstrapFileFails) {
  std::filesystem::remove(dir_.File("config.json"));
  AgentRun run = Run();
  ExpectFailOpen(run, "failed");
  EXPECT_THAT(ErrorOf(run), HasSubstr("resolving LPS endpoint: reading nbc-cmd"));
}

TEST_F(CheckHotfixE2eTest, DryRunPrintsThePlanAndWritesNothing) {
  dir_.Write("hotfix.json", kPreSeeded);
  AgentRun run = Run({"--dry-run"});
  EXPECT_TRUE(run.status.success());
  Json plan = Json::parse(run.stdout_text);
  EXPECT_EQ(plan["outcome"], "lpsRead");
  EXPECT_EQ(plan["would_write"]["version"], "202604.01.2");
  EXPECT_EQ(plan["would_write"]["hotfixes"], Json::parse(kServedMap)["hotfixes"]);
  EXPECT_EQ(dir_.Read("hotfix.json"), kPreSeeded);
  EXPECT_TRUE(run.events.empty());
  EXPECT_FALSE(std::filesystem::exists(dir_.File("agent.log")));
}

TEST_F(CheckHotfixE2eTest, ExtraArgumentsAreIgnoredWithAWarning) {
  AgentRun run = Run({"unexpected", "words"});
  ExpectFailOpen(run, "lpsRead");
  EXPECT_TRUE(run.Logged("ignoring unexpected check-hotfix arguments"));
}

// The service dial goes straight to the apiserver whatever the proxy variables say, as the
// reference's grpc.WithNoProxy() dial does (docs/CHECK-HOTFIX.md, "No proxy").
class CheckHotfixProxyTest : public CheckHotfixE2eTest {
 protected:
  std::unique_ptr<Subprocess> StartTinyproxy(uint16_t port) {
    dir_.Write("tinyproxy.conf", "Port " + std::to_string(port) +
                                     "\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\n"
                                     "LogLevel Connect\nMaxClients 10\n");
    SpawnOptions spawn;
    spawn.argv = {"tinyproxy", "-d", "-c", dir_.File("tinyproxy.conf").string()};
    auto proc = std::make_unique<Subprocess>(std::move(spawn));
    EXPECT_TRUE(WaitUntilListening(port, std::chrono::seconds(10)));
    return proc;
  }
};

TEST_F(CheckHotfixProxyTest, ALiveProxyIsNotUsed) {
  uint16_t port = PickFreePort();
  auto tinyproxy = StartTinyproxy(port);
  const std::string proxy = "http://127.0.0.1:" + std::to_string(port);
  AgentRun run = Run({}, {{"HTTPS_PROXY", proxy}, {"https_proxy", proxy}, {"ALL_PROXY", proxy}});
  ExpectFailOpen(run, "lpsRead");
  // Nothing reached the proxy: a connection to it would be logged ("Connect (file descriptor"),
  // a tunnel as "CONNECT". The run above waited for tinyproxy to listen, so a connection
  // the agent had made would be in its log by the time the run ended.
  tinyproxy->Stop();
  const std::string log = tinyproxy->Stdout() + tinyproxy->Stderr();
  EXPECT_THAT(log, Not(HasSubstr("CONNECT")));
  EXPECT_THAT(log, Not(HasSubstr("Connect (file descriptor")));
  ASSERT_EQ(stack_.tap.connection_count(), 1u);
  EXPECT_EQ(stack_.tap.connections()[0].hello.sni, kApiserverFqdn);
}

TEST_F(CheckHotfixProxyTest, ADeadProxyDoesNotStopTheCheck) {
  uint16_t dead = PickFreePort();  // nothing listens: using it would fail the run
  AgentRun run = Run({}, {{"HTTPS_PROXY", "http://127.0.0.1:" + std::to_string(dead)}});
  ExpectFailOpen(run, "lpsRead");
  EXPECT_EQ(stack_.lps.call_count(), 1u);
}

TEST(HotfixAgentCliTest, HelpDescribesEveryFlag) {
  SpawnOptions spawn;
  spawn.argv = {BinDir() + "/hotfix-agent", "check-hotfix", "--help"};
  RunResult r = RunProcess(std::move(spawn), std::chrono::seconds(10));
  EXPECT_TRUE(r.status.success());
  for (const char* flag :
       {"--node-config", "--nbc-cmd", "--hotfix-pointer", "--imds-url", "--connect-to",
        "--server-name", "--component", "--lps-timeout", "--events-dir", "--log-file",
        "--current-version", "--dry-run", "--log-level"}) {
    EXPECT_THAT(r.stdout_text, HasSubstr(flag));
  }
}

TEST(HotfixAgentCliTest, VersionSaysTheBuildAndItsRevision) {
  SpawnOptions spawn;
  spawn.argv = {BinDir() + "/hotfix-agent", "--version"};
  RunResult r = RunProcess(std::move(spawn), std::chrono::seconds(10));
  EXPECT_TRUE(r.status.success()) << r.status.ToString();
  EXPECT_THAT(r.stdout_text,
              ::testing::MatchesRegex("hotfix-agent [0-9A-Za-z.+-]+ "
                                      "\\(revision ([0-9a-f]{12}(-dirty)?|unknown)\\)\n"));
}

// Usage errors exit 2 with what is wrong; a check that runs stays fail-open (exit 0).
TEST(HotfixAgentCliTest, DurationsAndLevelsAreUsageErrorsWhenMalformed) {
  auto run = [](std::vector<std::string> args) {
    SpawnOptions spawn;
    spawn.argv = {BinDir() + "/hotfix-agent", "check-hotfix", "--dry-run"};
    spawn.argv.insert(spawn.argv.end(), args.begin(), args.end());
    return RunProcess(std::move(spawn), std::chrono::seconds(10));
  };
  RunResult bad = run({"--lps-timeout", "3"});
  EXPECT_EQ(bad.status.exit_code, 2);
  EXPECT_THAT(bad.stderr_text,
              HasSubstr("--lps-timeout: duration \"3\": want a number and a unit"));
  RunResult long_one = run({"--lps-timeout", "1h"});
  EXPECT_EQ(long_one.status.exit_code, 2);
  EXPECT_THAT(long_one.stderr_text, HasSubstr("want 1ms to 10m"));
  RunResult both = run({"--lps-timeout", "1s", "--lps-timeout-ms", "1000"});
  EXPECT_EQ(both.status.exit_code, 2);
  EXPECT_THAT(both.stderr_text, HasSubstr("give --lps-timeout or --lps-timeout-ms, not both"));
  RunResult level = run({"--log-level", "loud"});
  EXPECT_EQ(level.status.exit_code, 2);
  EXPECT_THAT(level.stderr_text, HasSubstr("want debug, info, warn or error"));
  RunResult missing = RunProcess(
      [] {
        SpawnOptions spawn;
        spawn.argv = {BinDir() + "/hotfix-agent"};
        return spawn;
      }(),
      std::chrono::seconds(10));
  EXPECT_EQ(missing.status.exit_code, 2);
}

// The old name still works, and --log-level warn keeps the warnings and drops the rest: here
// no node config exists, so the check fails open with warnings only.
TEST(HotfixAgentCliTest, TheOldTimeoutNameAndTheLogLevel) {
  TempDir dir("agent-cli");
  SpawnOptions spawn;
  spawn.argv = {BinDir() + "/hotfix-agent",
                "check-hotfix",
                "--dry-run",
                "--lps-timeout-ms",
                "500",
                "--log-level",
                "warn",
                "--node-config",
                dir.File("absent.json").string(),
                "--nbc-cmd",
                dir.File("absent.sh").string(),
                "--hotfix-pointer",
                dir.File("pointer.json").string(),
                "--events-dir",
                dir.path().string()};
  RunResult r = RunProcess(std::move(spawn), std::chrono::seconds(30));
  EXPECT_EQ(r.status.exit_code, 0) << r.stderr_text;
  std::vector<nlohmann::json> lines = JsonLines(r.stderr_text, NonJsonLines::kSkip);
  ASSERT_FALSE(lines.empty()) << r.stderr_text;
  for (const auto& line : lines) EXPECT_NE(line.value("level", ""), "INFO") << line.dump();
  EXPECT_NE(r.stderr_text.find("check-hotfix completed with error (fail-open)"), std::string::npos)
      << r.stderr_text;
}

TEST(HotfixAgentCliTest, AnUnknownFlagIsAUsageError) {
  SpawnOptions spawn;
  spawn.argv = {BinDir() + "/hotfix-agent", "check-hotfix", "--no-such-flag"};
  RunResult r = RunProcess(std::move(spawn), std::chrono::seconds(10));
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("--no-such-flag"));
}

}  // namespace
}  // namespace hotfix::testsupport
