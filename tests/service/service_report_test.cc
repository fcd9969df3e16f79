// ReportHotfixOutcome as the service decides it (docs/ROLLOUTS.md, "Automatic halt"): the
// same identity, allow-list and rate limit as GetComponentConfig, every bad field refused with
// its reason, attribution to the rollouts that serve the node that version, repeats dropped,
// and the access-log line.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "akslivepatching/v1/live_patching.pb.h"
#include "captured_log.h"
#include "service/live_patching_service.h"
#include "service/ops/metrics.h"
#include "service/store/component_store.h"

namespace hotfix::service {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using wire::GrpcCode;

constexpr char kAks[] = "aksNodeController";
constexpr char kSub[] = "8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8";

// "vm-N" tokens are nodes of kSub; "other-sub" a node of another subscription.
class TokenTable : public Authenticator {
 public:
  AuthResult Authenticate(std::string_view token) override {
    AuthResult r;
    if (token.empty()) {
      r.error = Status::InvalidArgument("no authorization");
      return r;
    }
    if (token.substr(0, 3) != "vm-" && token != "other-sub") {
      r.failure = IdentityFailure::kMalformed;
      r.error = Status::InvalidArgument("not a document");
      return r;
    }
    r.identity.vm_id = std::string(token);
    r.identity.subscription_id =
        token == "other-sub" ? "11111111-0000-0000-0000-000000000000" : kSub;
    return r;
  }
};

class RecordingMetrics : public Metrics {
 public:
  void RecordCall(const CallSample& s) override {
    calls.emplace_back(std::string(s.method), wire::GrpcCodeUpperName(s.code));
  }
  void RecordIdentityFailure(IdentityFailure) override {}
  void RecordOutcome(std::string_view component, std::string_view rollout,
                     contract::Outcome outcome) override {
    outcomes.emplace_back(std::string(component), std::string(rollout),
                          contract::OutcomeLabel(outcome));
  }
  void RecordReload(const ReloadReport&) override {}
  void RecordTransportEvent(TransportEvent) override {}
  std::vector<std::pair<std::string, std::string>> calls;
  std::vector<std::tuple<std::string, std::string, std::string>> outcomes;
};

class FixedStore : public ComponentStore {
 public:
  explicit FixedStore(const json& file) {
    auto parsed = ParseComponentConfig(kAks, file.dump());
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto snapshot = std::make_shared<StoreSnapshot>();
    snapshot->generation = 7;
    snapshot->components[kAks] = std::make_shared<const ComponentConfig>(std::move(*parsed));
    snapshot_ = snapshot;
  }
  // As the automatic halt serves it with rollout `index` halted (AutoHaltController).
  void JudgeHalted(size_t index) {
    auto judged = std::make_shared<ComponentConfig>(*snapshot_->components.at(kAks));
    judged->file = snapshot_->components.at(kAks);
    judged->rollouts.at(index).halted = true;
    auto snapshot = std::make_shared<StoreSnapshot>(*snapshot_);
    snapshot->components[kAks] = judged;
    snapshot_ = snapshot;
  }
  std::shared_ptr<const StoreSnapshot> Current() const override { return snapshot_; }

 private:
  std::shared_ptr<const StoreSnapshot> snapshot_;
};

// Two rollouts for everyone since 2026-01-01: "canary" ships 202604.01.4, "late" 202604.01.5
// on top of it (overlay: a node is served .5); "other-base" ships a hotfix of another base.
json File() {
  auto rollout = [](const std::string& name, const std::string& base, const std::string& v) {
    return json{{"name", name},
                {"hotfixes", {{base, v}}},
                {"steps", json::array({{{"at", "2026-01-01T00:00:00Z"}, {"percent", 100}}})}};
  };
  return {
      {"hotfixes", {{"202604.01", "202604.01.3"}}},
      {"rollouts",
       {rollout("canary", "202604.01", "202604.01.4"), rollout("late", "202604.01", "202604.01.5"),
        rollout("other-base", "202605.02", "202605.02.1")}}};
}

struct ReportTest : ::testing::Test {
  explicit ReportTest(std::vector<std::string> allowed = {}, double rate = 0) : store(File()) {
    if (rate > 0) limiter = NewTokenBucketLimiter(rate);
    LivePatchingServiceOptions options;
    options.authenticator = &auth;
    options.rate_limiter = limiter.get();
    options.store = &store;
    options.metrics = &metrics;
    options.access_log = &log.logger();
    options.recent_reports = &recent;
    allow_list = SubscriptionAllowList::Fixed(allowed);
    options.allowed_subscriptions = allow_list.get();
    service = std::make_unique<LivePatchingServiceImpl>(std::move(options));
  }

  GrpcReply Call(const std::string& token,
                 const akslivepatching::v1::ReportHotfixOutcomeRequest& req) {
    GrpcCall call;
    call.path = contract::kReportHotfixOutcomePath;
    req.SerializeToString(&bytes);
    call.message = bytes;
    if (!token.empty()) call.metadata.emplace_back("authorization", token);
    call.authority = "myaks.hcp.eastus.azmk8s.io:443";
    call.peer = "127.0.0.1:5000";
    GrpcReply reply;
    service->Handle(call, &reply);
    return reply;
  }

  static akslivepatching::v1::ReportHotfixOutcomeRequest Request(
      const std::string& version = "202604.01.5",
      akslivepatching::v1::HotfixOutcome outcome = akslivepatching::v1::HOTFIX_OUTCOME_INSTALLED) {
    akslivepatching::v1::ReportHotfixOutcomeRequest r;
    r.set_component_name(kAks);
    r.set_base_version(version.substr(0, 9));
    r.set_hotfix_version(version);
    r.set_outcome(outcome);
    r.set_detail("apt-get install exited 100");
    return r;
  }

  TokenTable auth;
  std::unique_ptr<RateLimiter> limiter;
  FixedStore store;
  RecordingMetrics metrics;
  RecentReports recent{1000, std::chrono::hours(1)};
  unittest::CapturedLog log;
  std::string bytes;  // the last request, serialized
  std::unique_ptr<SubscriptionAllowList> allow_list;
  std::unique_ptr<LivePatchingServiceImpl> service;
};

TEST_F(ReportTest, AttributedToTheRolloutsThatServeTheNodeThatVersion) {
  GrpcReply reply = Call("vm-1", Request("202604.01.5"));
  EXPECT_EQ(reply.code, GrpcCode::kOk) << reply.error_message;
  akslivepatching::v1::ReportHotfixOutcomeResponse response;
  EXPECT_TRUE(response.ParseFromString(reply.message));
  // "canary" applies too, but names .4: the node installed .5, late's.
  EXPECT_THAT(metrics.outcomes, ElementsAre(std::make_tuple(kAks, "late", "installed")));
  EXPECT_THAT(metrics.calls, ElementsAre(std::make_pair("ReportHotfixOutcome", "OK")));
}

TEST_F(ReportTest, AnAutoHaltedRolloutsReportsStillCountForIt) {
  store.JudgeHalted(1);  // "late", halted by its evidence
  ASSERT_EQ(Call("vm-1", Request("202604.01.5")).code, GrpcCode::kOk);
  EXPECT_THAT(metrics.outcomes, ElementsAre(std::make_tuple(kAks, "late", "installed")));
}

TEST_F(ReportTest, AVersionNoApplyingRolloutNamesIsUnattributed) {
  ASSERT_EQ(
      Call("vm-1", Request("202604.01.9", akslivepatching::v1::HOTFIX_OUTCOME_STAGE_FAILED)).code,
      GrpcCode::kOk);
  EXPECT_THAT(metrics.outcomes, ElementsAre(std::make_tuple(kAks, "", "stage_failed")));
}

TEST_F(ReportTest, ProvisioningOutcomesAreCountedAndAFailedOneIsAFailure) {
  ASSERT_EQ(
      Call("vm-1", Request("202604.01.5", akslivepatching::v1::HOTFIX_OUTCOME_PROVISION_SUCCEEDED))
          .code,
      GrpcCode::kOk);
  ASSERT_EQ(
      Call("vm-2", Request("202604.01.5", akslivepatching::v1::HOTFIX_OUTCOME_PROVISION_FAILED))
          .code,
      GrpcCode::kOk);
  EXPECT_THAT(metrics.outcomes, ElementsAre(std::make_tuple(kAks, "late", "provision_succeeded"),
                                            std::make_tuple(kAks, "late", "provision_failed")));
  EXPECT_FALSE(contract::IsFailure(contract::HOTFIX_OUTCOME_PROVISION_SUCCEEDED));
  EXPECT_TRUE(contract::IsFailure(contract::HOTFIX_OUTCOME_PROVISION_FAILED));
  EXPECT_EQ(contract::OutcomeFromLabel("provision_failed"),
            contract::HOTFIX_OUTCOME_PROVISION_FAILED);
  EXPECT_EQ(
      Call("vm-3", Request("202604.01.5", static_cast<akslivepatching::v1::HotfixOutcome>(9))).code,
      GrpcCode::kInvalidArgument);
}

TEST_F(ReportTest, ARepeatIsAnsweredButNotCounted) {
  const auto failed = Request("202604.01.5", akslivepatching::v1::HOTFIX_OUTCOME_INSTALL_FAILED);
  EXPECT_EQ(Call("vm-1", failed).code, GrpcCode::kOk);
  EXPECT_EQ(Call("vm-1", failed).code, GrpcCode::kOk);
  EXPECT_EQ(Call("vm-2", failed).code, GrpcCode::kOk);                  // another node
  EXPECT_EQ(Call("vm-1", Request("202604.01.5")).code, GrpcCode::kOk);  // another outcome
  EXPECT_EQ(metrics.outcomes.size(), 3u);
  const std::vector<json> lines = log.Lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_FALSE(lines[0]["duplicate"].get<bool>());
  EXPECT_TRUE(lines[1]["duplicate"].get<bool>());
}

TEST_F(ReportTest, TheAccessLogCarriesTheReportNeverTheToken) {
  ASSERT_EQ(
      Call("vm-1", Request("202604.01.5", akslivepatching::v1::HOTFIX_OUTCOME_INSTALL_FAILED)).code,
      GrpcCode::kOk);
  const std::vector<json> lines = log.Lines();
  ASSERT_EQ(lines.size(), 1u);
  const json& l = lines[0];
  EXPECT_EQ(l["msg"], "ReportHotfixOutcome");
  EXPECT_EQ(l["vm_id"], "vm-1");
  EXPECT_EQ(l["base_version"], "202604.01");
  EXPECT_EQ(l["hotfix_version"], "202604.01.5");
  EXPECT_EQ(l["outcome"], "install_failed");
  EXPECT_EQ(l["detail"], "apt-get install exited 100");
  EXPECT_EQ(l["rollouts"], json::array({"late"}));
  EXPECT_EQ(l["code"], "OK");
}

TEST_F(ReportTest, RefusedLikeGetComponentConfigBeforeAnythingIsRead) {
  EXPECT_EQ(Call("", Request()).code, GrpcCode::kUnauthenticated);
  EXPECT_EQ(Call("forged", Request()).code, GrpcCode::kUnauthenticated);
  auto unknown = Request();
  unknown.set_component_name("nope");
  EXPECT_EQ(Call("vm-1", unknown).code, GrpcCode::kNotFound);
  unknown.set_component_name("../etc");
  EXPECT_EQ(Call("vm-1", unknown).code, GrpcCode::kInvalidArgument);
  EXPECT_TRUE(metrics.outcomes.empty());
}

TEST_F(ReportTest, EveryBadFieldIsRefusedWithItsReason) {
  struct Case {
    std::function<void(akslivepatching::v1::ReportHotfixOutcomeRequest*)> mutate;
    std::string want;
  };
  const Case cases[] = {
      {[](auto* r) { r->set_base_version("2026.01"); },
       "base_version \"2026.01\" is not YYYYMM.DD"},
      {[](auto* r) { r->set_hotfix_version("202604.01"); }, "is not YYYYMM.DD.PATCH"},
      {[](auto* r) { r->set_hotfix_version("202605.01.1"); },
       "hotfix_version \"202605.01.1\" is not of base_version \"202604.01\""},
      {[](auto* r) { r->set_outcome(akslivepatching::v1::HOTFIX_OUTCOME_UNSPECIFIED); },
       "outcome 0 is not a known HotfixOutcome"},
      {[](auto* r) { r->set_outcome(static_cast<akslivepatching::v1::HotfixOutcome>(42)); },
       "outcome 42 is not a known HotfixOutcome"},
      {[](auto* r) { r->set_detail(std::string(257, 'x')); }, "detail is 257 bytes, more than 256"},
      {[](auto* r) { r->set_detail("line\nbreak"); }, "detail is not printable ASCII"},
  };
  for (const Case& c : cases) {
    auto req = Request();
    c.mutate(&req);
    GrpcReply reply = Call("vm-1", req);
    EXPECT_EQ(reply.code, GrpcCode::kInvalidArgument) << c.want;
    EXPECT_THAT(reply.error_message, HasSubstr(c.want));
  }
  auto exact = Request();
  exact.set_detail(std::string(256, 'x'));
  EXPECT_EQ(Call("vm-3", exact).code, GrpcCode::kOk);
  EXPECT_EQ(metrics.outcomes.size(), 1u);
}

TEST_F(ReportTest, BytesThatAreNotTheRequestAreInvalidArgument) {
  GrpcCall call;
  call.path = contract::kReportHotfixOutcomePath;
  call.message = "\xff\xff\xff";
  GrpcReply reply;
  service->Handle(call, &reply);
  EXPECT_EQ(reply.code, GrpcCode::kInvalidArgument);
  EXPECT_EQ(reply.error_message, "the request is not a ReportHotfixOutcomeRequest");
}

struct AllowListedReportTest : ReportTest {
  AllowListedReportTest() : ReportTest({kSub}) {}
};

TEST_F(AllowListedReportTest, AnotherSubscriptionIsDenied) {
  EXPECT_EQ(Call("other-sub", Request()).code, GrpcCode::kPermissionDenied);
  EXPECT_EQ(Call("vm-1", Request()).code, GrpcCode::kOk);
  EXPECT_EQ(metrics.outcomes.size(), 1u);
}

// One bucket per node for both methods: a node's check and its report share it.
struct RateLimitedReportTest : ReportTest {
  RateLimitedReportTest() : ReportTest({}, 1) {}
};

TEST_F(RateLimitedReportTest, TheNodesBucketIsSharedWithGetComponentConfig) {
  GrpcCall get;
  get.path = contract::kGetComponentConfigPath;
  akslivepatching::v1::GetComponentConfigRequest request;
  request.set_component_name(kAks);
  std::string get_bytes = request.SerializeAsString();
  get.message = get_bytes;
  get.metadata.emplace_back("authorization", "vm-1");
  GrpcReply reply;
  service->Handle(get, &reply);
  ASSERT_EQ(reply.code, GrpcCode::kOk);
  GrpcReply limited = Call("vm-1", Request());
  EXPECT_EQ(limited.code, GrpcCode::kResourceExhausted);
  EXPECT_THAT(limited.error_message, HasSubstr("request rate limit exceeded"));
  EXPECT_EQ(Call("vm-2", Request()).code, GrpcCode::kOk);  // another node, its own bucket
  EXPECT_EQ(metrics.outcomes.size(), 1u);
}

// Refused calls' lines are budgeted per reason (kRefusalLinesPerSecond each): a flood of
// malformed documents keeps its own lines to the budget and cannot hide a caller refused for
// another reason.
struct RefusalLinesTest : ReportTest {
  RefusalLinesTest() : ReportTest({kSub}) {}
};

TEST_F(RefusalLinesTest, AFloodForOneReasonCannotHideAnother) {
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(Call("forged", Request()).code, GrpcCode::kUnauthenticated);
  }
  ASSERT_EQ(Call("other-sub", Request()).code, GrpcCode::kPermissionDenied);
  int malformed = 0, denied = 0;
  for (const json& l : log.Lines()) {
    malformed += l.value("identity_failure", "") == "malformed";
    denied += l.value("code", "") == "PERMISSION_DENIED";
  }
  // One budget window, or two if the loop crossed a second's boundary.
  EXPECT_GE(malformed, static_cast<int>(kRefusalLinesPerSecond));
  EXPECT_LE(malformed, 2 * static_cast<int>(kRefusalLinesPerSecond));
  EXPECT_EQ(denied, 1);
}

}  // namespace
}  // namespace hotfix::service
