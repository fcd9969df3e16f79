// download-hotfix's outcome report (docs/DOWNLOAD-HOTFIX.md, "Reporting the outcome"): which
// results report what, the detail's bounds, the once-per-(base, version, outcome) marker, and
// the real sender's one deadline over IMDS, the dial and the call.
#include "node/download/hotfix_report.h"

#include <stdlib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "captured_log.h"
#include "common/base64.h"
#include "temp_dir.h"
#include "test_certs.h"
#include "tls_peer.h"

namespace hotfix::node {
namespace {

using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testsupport::TempDir;
using unittest::CapturedLog;
using namespace std::chrono_literals;

constexpr char kCurrent[] = "202604.01.0";
constexpr char kTarget[] = "202604.01.1";

DownloadHotfixResult Installed() {
  DownloadHotfixResult r;
  r.binary = BinaryOutcome::kInstalled;
  r.binary_targeted = true;
  r.binary_target = kTarget;
  return r;
}

DownloadHotfixResult Failed(BinaryFailure failure, std::string error = "it broke") {
  DownloadHotfixResult r;
  r.binary = BinaryOutcome::kFailed;
  r.binary_failure = failure;
  r.binary_targeted = true;
  r.binary_target = kTarget;
  r.error = Status::IoError(std::move(error));
  r.exit_code = 1;
  return r;
}

// ---- The decision ------------------------------------------------------------------------

TEST(DecideHotfixReportTest, InstalledReportsInstalledWithTheNodesBase) {
  std::optional<HotfixReport> report =
      DecideHotfixReport(Installed(), kCurrent, "aksNodeController");
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->component, "aksNodeController");
  EXPECT_EQ(report->base_version, "202604.01");
  EXPECT_EQ(report->hotfix_version, kTarget);
  EXPECT_EQ(report->outcome, contract::HOTFIX_OUTCOME_INSTALLED);
  EXPECT_EQ(report->detail, "");
}

TEST(DecideHotfixReportTest, EachFailureKindHasItsOutcomeAndTheErrorAsDetail) {
  const std::vector<std::pair<BinaryFailure, contract::Outcome>> cases = {
      {BinaryFailure::kPlatformUnsupported, contract::HOTFIX_OUTCOME_PLATFORM_UNSUPPORTED},
      {BinaryFailure::kInstallFailed, contract::HOTFIX_OUTCOME_INSTALL_FAILED},
      {BinaryFailure::kVersionMismatch, contract::HOTFIX_OUTCOME_VERSION_MISMATCH},
      {BinaryFailure::kStageFailed, contract::HOTFIX_OUTCOME_STAGE_FAILED},
      {BinaryFailure::kOther, contract::HOTFIX_OUTCOME_FAILED_OTHER},
  };
  for (const auto& [failure, outcome] : cases) {
    std::optional<HotfixReport> report =
        DecideHotfixReport(Failed(failure, "install hotfix version 202604.01.1: exit status 100"),
                           kCurrent, "aksNodeController");
    ASSERT_TRUE(report.has_value()) << BinaryFailureName(failure);
    EXPECT_EQ(report->outcome, outcome) << BinaryFailureName(failure);
    EXPECT_EQ(report->detail, "install hotfix version 202604.01.1: exit status 100");
    EXPECT_EQ(report->hotfix_version, kTarget);
  }
}

TEST(DecideHotfixReportTest, OutcomesThatDidNotActOnABinaryHotfixReportNothing) {
  for (BinaryOutcome outcome : {BinaryOutcome::kNoHotfix, BinaryOutcome::kNotTargeted,
                                BinaryOutcome::kPointerUnreadable, BinaryOutcome::kBusy}) {
    DownloadHotfixResult r;
    r.binary = outcome;
    r.binary_target = outcome == BinaryOutcome::kNotTargeted ? kTarget : "";
    EXPECT_FALSE(DecideHotfixReport(r, kCurrent, "aksNodeController").has_value())
        << BinaryOutcomeName(outcome);
  }
  // An exception before the gate let a version through: nothing was tried.
  DownloadHotfixResult early = Failed(BinaryFailure::kOther);
  early.binary_targeted = false;
  EXPECT_FALSE(DecideHotfixReport(early, kCurrent, "aksNodeController").has_value());
  early.binary_target = "";
  early.binary_targeted = true;
  EXPECT_FALSE(DecideHotfixReport(early, kCurrent, "aksNodeController").has_value());
}

TEST(DecideHotfixReportTest, ABaseTheCurrentVersionCannotGiveComesFromTheTarget) {
  // The gate coerces "202604.01" to 202604.1.0; the base has to come from the target.
  std::optional<HotfixReport> report = DecideHotfixReport(Installed(), "202604.01", "c");
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->base_version, "202604.01");
}

TEST(ReportDetailTest, FitsIn256PrintableAsciiBytes) {
  EXPECT_EQ(ReportDetail("exit status 100"), "exit status 100");
  EXPECT_EQ(ReportDetail("a\nb\"c\xff"), "a\\x0ab\\x22c\\xff");
  const std::string exact(kMaxReportDetailBytes, 'x');
  EXPECT_EQ(ReportDetail(exact), exact);
  EXPECT_EQ(ReportDetail(exact + "y"), std::string(253, 'x') + "...");
  // Escapes are never split, whatever the mix.
  for (const std::string& long_text :
       {std::string(1000, '\n'), std::string(254, 'x') + "\x01", std::string(252, 'x') + "\x01\x01",
        std::string(255, 'x') + "\x7f", std::string(300, 'x')}) {
    const std::string detail = ReportDetail(long_text);
    EXPECT_LE(detail.size(), kMaxReportDetailBytes);
    for (char c : detail) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(c);
    EXPECT_THAT(detail, ::testing::EndsWith("..."));
    const std::string body = detail.substr(0, detail.size() - 3);
    const size_t slash = body.rfind('\\');
    if (slash != std::string::npos) {
      EXPECT_GE(body.size() - slash, 4u) << detail;  // the last escape is whole
    }
  }
}

// ---- The marker and the send -------------------------------------------------------------

class FakeSender : public HotfixReportSender {
 public:
  Status Send(const HotfixReport& report, Deadline deadline) override {
    sent.push_back(report);
    remaining.push_back(deadline.remaining());
    return answer;
  }
  std::vector<HotfixReport> sent;
  std::vector<std::chrono::milliseconds> remaining;
  Status answer;
};

class ReportHotfixOutcomeTest : public ::testing::Test {
 protected:
  ReportHotfixOutcomeTest() {
    options_.marker_path = HotfixReportMarkerPath(opt_.File("aks-node-controller-hotfix.json"));
  }
  ReportStatus Report(const DownloadHotfixResult& result) {
    return ReportHotfixOutcome(result, kCurrent, options_, sender_, log_.logger());
  }
  std::string Marker() const { return opt_.Read(kHotfixReportMarkerName); }

  TempDir opt_{"opt"};
  ReportHotfixOptions options_;
  FakeSender sender_;
  CapturedLog log_;
};

TEST_F(ReportHotfixOutcomeTest, TheMarkerLivesBesideThePointer) {
  EXPECT_EQ(HotfixReportMarkerPath("/opt/azure/containers/aks-node-controller-hotfix.json"),
            "/opt/azure/containers/aks-node-controller-hotfix-report.json");
}

TEST_F(ReportHotfixOutcomeTest, SendsOnceAndRemembersIt) {
  EXPECT_EQ(Report(Installed()), ReportStatus::kSent);
  ASSERT_EQ(sender_.sent.size(), 1u);
  EXPECT_EQ(sender_.sent[0].outcome, contract::HOTFIX_OUTCOME_INSTALLED);
  EXPECT_LE(sender_.remaining[0], 3000ms);  // one budget for everything
  EXPECT_GT(sender_.remaining[0], 0ms);
  EXPECT_EQ(Marker(), R"({"base":"202604.01","version":"202604.01.1","outcome":"INSTALLED"})"
                      "\n");
  EXPECT_THAT(log_.Messages(), Contains("reported hotfix outcome to LPS"));

  // The same (base, version, outcome) again: nothing is sent.
  EXPECT_EQ(Report(Installed()), ReportStatus::kAlreadyReported);
  EXPECT_EQ(sender_.sent.size(), 1u);
  EXPECT_THAT(log_.Messages(),
              Contains("hotfix outcome already reported to LPS; not sending it again"));
  EXPECT_THAT(opt_.Names(), ElementsAre(kHotfixReportMarkerName));  // no temp file left
}

TEST_F(ReportHotfixOutcomeTest, AnotherOutcomeOrVersionIsSentAndReplacesTheMarker) {
  EXPECT_EQ(Report(Failed(BinaryFailure::kInstallFailed)), ReportStatus::kSent);
  EXPECT_EQ(Report(Installed()), ReportStatus::kSent);
  DownloadHotfixResult next = Installed();
  next.binary_target = "202604.01.2";
  EXPECT_EQ(Report(next), ReportStatus::kSent);
  ASSERT_EQ(sender_.sent.size(), 3u);
  EXPECT_EQ(sender_.sent[0].outcome, contract::HOTFIX_OUTCOME_INSTALL_FAILED);
  EXPECT_EQ(sender_.sent[0].detail, "it broke");
  EXPECT_EQ(nlohmann::json::parse(Marker())["version"], "202604.01.2");
}

TEST_F(ReportHotfixOutcomeTest, AFailedSendLeavesTheMarkerAndTheNextRunRetries) {
  ASSERT_EQ(Report(Failed(BinaryFailure::kStageFailed)), ReportStatus::kSent);
  const std::string before = Marker();
  sender_.answer = Status::Unavailable("LPS gRPC call failed with code Unavailable: draining");
  EXPECT_EQ(Report(Installed()), ReportStatus::kFailed);
  EXPECT_EQ(Marker(), before);
  auto lines = log_.Lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back()["msg"], "failed to report hotfix outcome to LPS (fail-open)");
  EXPECT_EQ(lines.back()["error"], "LPS gRPC call failed with code Unavailable: draining");
  EXPECT_EQ(lines.back()["level"], "WARN");

  sender_.answer = Status::Ok();
  EXPECT_EQ(Report(Installed()), ReportStatus::kSent);
  EXPECT_EQ(sender_.sent.size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(Marker())["outcome"], "INSTALLED");
}

TEST_F(ReportHotfixOutcomeTest, AGarbageMarkerIsAbsentAndOverwrittenAfterASend) {
  for (const char* garbage :
       {"", "not json", "[]", "{}", R"({"base":"202604.01","version":"202604.01.1"})",
        R"({"base":1,"version":"202604.01.1","outcome":"INSTALLED"})", "\xff\xfe"}) {
    opt_.Write(kHotfixReportMarkerName, garbage);
    sender_.sent.clear();
    EXPECT_EQ(Report(Installed()), ReportStatus::kSent) << garbage;
    EXPECT_EQ(sender_.sent.size(), 1u) << garbage;
    EXPECT_EQ(nlohmann::json::parse(Marker())["outcome"], "INSTALLED") << garbage;
  }
  // A failed send leaves even a garbage marker alone.
  opt_.Write(kHotfixReportMarkerName, "not json");
  sender_.answer = Status::Unavailable("down");
  EXPECT_EQ(Report(Installed()), ReportStatus::kFailed);
  EXPECT_EQ(Marker(), "not json");
}

TEST_F(ReportHotfixOutcomeTest, NothingToReportSendsNothingAndWritesNothing) {
  DownloadHotfixResult none;
  none.binary = BinaryOutcome::kNotTargeted;
  none.binary_target = kTarget;
  EXPECT_EQ(Report(none), ReportStatus::kNothingToReport);
  EXPECT_THAT(sender_.sent, IsEmpty());
  EXPECT_THAT(opt_.Names(), IsEmpty());
}

TEST_F(ReportHotfixOutcomeTest, NoReportAndACancelledRunSendNothing) {
  options_.enabled = false;
  EXPECT_EQ(Report(Installed()), ReportStatus::kDisabled);
  EXPECT_THAT(log_.Messages(), Contains("hotfix outcome not reported to LPS (--no-report)"));
  options_.enabled = true;
  std::atomic<bool> cancelled{true};
  options_.cancelled = &cancelled;
  EXPECT_EQ(Report(Failed(BinaryFailure::kInstallFailed, "cancelled")), ReportStatus::kCancelled);
  EXPECT_THAT(sender_.sent, IsEmpty());
  EXPECT_THAT(opt_.Names(), IsEmpty());
}

TEST_F(ReportHotfixOutcomeTest, AMarkerThatCannotBeWrittenIsAWarningNotAFailure) {
  options_.marker_path = opt_.File("no-such-folder/" + std::string(kHotfixReportMarkerName));
  EXPECT_EQ(Report(Installed()), ReportStatus::kSent);
  auto lines = log_.Lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines.back()["msg"].get<std::string>(), HasSubstr("could not record it"));
}

// ---- The real sender ---------------------------------------------------------------------

// A token source that answers after `delay`, or fails when `fail`; it honours the deadline and
// a cancel as IMDS does.
class SlowTokens : public AttestedTokenSource {
 public:
  explicit SlowTokens(std::chrono::milliseconds delay, bool fail = false)
      : delay_(delay), fail_(fail) {}
  StatusOr<Secret> Fetch(Deadline deadline) override {
    ++fetches;
    const Deadline ready = Deadline::After(delay_);
    while (!ready.expired() && !deadline.expired() && !cancelled_) std::this_thread::sleep_for(5ms);
    if (fail_ || !ready.expired()) return Status::Unavailable("imds stand-in: no token");
    return Secret("the-attested-signature");
  }
  void Cancel() override { cancelled_ = true; }
  std::atomic<int> fetches{0};

 private:
  std::chrono::milliseconds delay_;
  bool fail_;
  std::atomic<bool> cancelled_{false};
};

class GrpcSenderTest : public ::testing::Test {
 protected:
  GrpcSenderTest() {
    ::unsetenv("HTTPS_PROXY");
    ::unsetenv("https_proxy");
    nlohmann::json config = {{"api_server_config", {{"api_server_name", "api.example.com"}}},
                             {"kubernetes_ca_cert", EncodeStdBase64(ca_.cert_pem())}};
    endpoint_.node_config_path = dir_.Write("config.json", config.dump());
    endpoint_.nbc_cmd_path = dir_.File("nbc-cmd.sh");
  }
  HotfixReport AReport() { return *DecideHotfixReport(Installed(), kCurrent, "aksNodeController"); }

  testsupport::TestCa ca_ = testsupport::TestCa::Create("report-ca");
  TempDir dir_{"report-sender"};
  LpsEndpoint endpoint_;
};

TEST_F(GrpcSenderTest, OneDeadlineBoundsImdsTheDialAndASilentService) {
  testsupport::TlsPeerOptions silent;
  silent.mode = testsupport::TlsPeerMode::kSelectH2Silent;
  silent.cert = testsupport::IssueLocalServerCert(ca_, {"api.example.com"});
  testsupport::TlsPeer peer(std::move(silent));
  endpoint_.connect_to = "127.0.0.1:" + std::to_string(peer.port());
  SlowTokens tokens(300ms);  // a slow IMDS eats into the same budget
  auto sender = NewGrpcHotfixReportSender(endpoint_, tokens, NullLogger());

  const auto start = std::chrono::steady_clock::now();
  Status sent = sender->Send(AReport(), Deadline::After(1000ms));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_THAT(sent.message(), HasSubstr("DeadlineExceeded"));
  EXPECT_LT(took, 1000ms + 1500ms);  // the budget, with slack for a loaded machine
  ASSERT_EQ(peer.connection_count(), 1u);
  testsupport::TlsPeerConnection seen = peer.connections()[0];
  EXPECT_EQ(seen.sni, "api.example.com");
  EXPECT_THAT(seen.offered_alpn, ElementsAre("aks-live-patching", "h2"));
}

TEST_F(GrpcSenderTest, AnImdsThatNeverAnswersIsBoundedByTheSameDeadline) {
  testsupport::TlsPeerOptions silent;
  silent.mode = testsupport::TlsPeerMode::kAcceptOnly;
  testsupport::TlsPeer peer(std::move(silent));
  endpoint_.connect_to = "127.0.0.1:" + std::to_string(peer.port());
  SlowTokens tokens(1h);
  auto sender = NewGrpcHotfixReportSender(endpoint_, tokens, NullLogger());

  const auto start = std::chrono::steady_clock::now();
  Status sent = sender->Send(AReport(), Deadline::After(800ms));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 800ms + 1500ms);
  EXPECT_FALSE(sent.ok());
  EXPECT_THAT(sent.message(),
              AnyOf(HasSubstr("dialing LPS gRPC"), HasSubstr("imds stand-in: no token")));
  EXPECT_THAT(sent.message(), Not(HasSubstr("the-attested-signature")));
}

TEST_F(GrpcSenderTest, AnUnusableCaFailsBeforeImdsIsAsked) {
  dir_.Write("config.json",
             nlohmann::json({{"api_server_config", {{"api_server_name", "api.example.com"}}},
                             {"kubernetes_ca_cert", EncodeStdBase64("not a certificate")}})
                 .dump());
  SlowTokens tokens(0ms);
  auto sender = NewGrpcHotfixReportSender(endpoint_, tokens, NullLogger());
  Status sent = sender->Send(AReport(), Deadline::After(3000ms));
  EXPECT_EQ(sent.message(), "dialing LPS gRPC: failed to parse cluster CA PEM");
  EXPECT_EQ(tokens.fetches, 0);
}

}  // namespace
}  // namespace hotfix::node
