// live-patching-service end to end: the real binary, started with certificates, trust roots
// and a components folder made here, called by a real gRPC client with attested documents
// signed here; and the project's hotfix-agent reaching it through the HAProxy route.
//
//   gRPC client / hotfix-agent --TLS--> [HAProxy] --> live-patching-service
//                                                       |-- components dir (inotify)
//                                                       |-- :metrics (Prometheus text)
//                                                       `-- :health (plaintext gRPC health)
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/unique_fd.h"
#include "haproxy.h"
#include "service/identity/node_identity.h"
#include "service/live_patching_service.h"
#include "service/ops/metrics.h"
#include "service/store/component_store.h"
#include "service/transport/grpc_server.h"
#include "service_fixture.h"
#include "tls_client.h"
#include "tls_peer.h"

namespace hotfix::testsupport {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kServedMap[] =
    R"({"hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}})";
constexpr char kNextMap[] = R"({"hotfixes":{"202604.01":"202604.01.4"}})";
constexpr char kDefaultVmId[] = "02aab8a4-74ef-476e-8182-f6d2ba4166a6";
constexpr char kDefaultSubscription[] = "8d10da13-8125-4ba9-a717-bf7490507b3d";
constexpr char kServiceName[] = "akslivepatching.v1.LivePatchingService";

class ServiceE2eTest : public ::testing::Test {
 protected:
  ServiceE2eTest() { files_.WriteComponent(kAksNodeControllerComponent, kServedMap); }

  void TearDown() override {
    if (HasFailure() && lps_) ADD_FAILURE() << "service stderr:\n" << lps_->Stderr();
  }

  ServiceProcess& Start(const std::vector<std::string>& extra = {},
                        const std::filesystem::path& components = {}) {
    lps_ = std::make_unique<ServiceProcess>(files_.Args(extra, components));
    channel_ = lps_->Channel(files_);
    return *lps_;
  }

  GrpcReply Call(const std::string& component, const std::optional<std::string>& token) {
    return CallGetComponentConfig(channel_, component, token);
  }
  GrpcReply CallAsNode(const std::string& component = kAksNodeControllerComponent) {
    return Call(component, files_.Token());
  }
  std::string ServedConfig() {
    GrpcReply r = CallAsNode();
    return r.status.ok() ? r.response.config() : "<" + r.status.error_message() + ">";
  }
  std::string Metrics() { return HttpGet(lps_->metrics_port(), "/metrics"); }

  ServiceFiles files_;
  std::unique_ptr<ServiceProcess> lps_;
  std::shared_ptr<grpc::Channel> channel_;
};

// ---- Every status code the node client's taxonomy reads --------------------------------------

TEST_F(ServiceE2eTest, ServesTheComponentConfigToAnAttestedNode) {
  Start();
  GrpcReply r = CallAsNode();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.response.component_name(), kAksNodeControllerComponent);
  EXPECT_EQ(r.response.config(), kServedMap);
}

TEST_F(ServiceE2eTest, NoAuthorizationIsUnauthenticated) {
  Start();
  GrpcReply r = Call(kAksNodeControllerComponent, std::nullopt);
  EXPECT_EQ(r.code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(r.status.error_message(), HasSubstr("no authorization metadata"));
  EXPECT_EQ(Call(kAksNodeControllerComponent, "").code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(ServiceE2eTest, GarbageTokenIsUnauthenticated) {
  Start();
  GrpcReply r = Call(kAksNodeControllerComponent, "bm90IGEgcGtjczc=");
  EXPECT_EQ(r.code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(r.status.error_message(), HasSubstr("malformed"));
}

TEST_F(ServiceE2eTest, ExpiredDocumentIsUnauthenticated) {
  Start();
  AttestedDocumentFields old;
  old.created_on = std::chrono::system_clock::now() - std::chrono::hours(7);
  old.expires_on = std::chrono::system_clock::now() - std::chrono::hours(1);
  GrpcReply r = Call(kAksNodeControllerComponent, files_.Token(old));
  EXPECT_EQ(r.code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(r.status.error_message(), AllOf(HasSubstr("expired"), HasSubstr("expired at")));
}

// A replay of a document the trusted signer made two hours ago, valid four more.
TEST_F(ServiceE2eTest, ADocumentOlderThanTheMaxTokenAgeIsUnauthenticated) {
  Start({"--max-token-age", "10m"});
  AttestedDocumentFields fields;
  fields.created_on =
      std::chrono::floor<seconds>(std::chrono::system_clock::now()) - std::chrono::hours(2);
  fields.expires_on = fields.created_on + std::chrono::hours(6);
  GrpcReply r = Call(kAksNodeControllerComponent, files_.Token(fields));
  EXPECT_EQ(r.code(), grpc::UNAUTHENTICATED) << r.status.error_message();
  EXPECT_TRUE(CallAsNode().status.ok());
  ASSERT_FALSE(lps_->AccessLog().empty());
  EXPECT_EQ(lps_->AccessLog().front().value("identity_failure", ""), "expired");
}

// Distinct documents of one foreign signer, as a flood of minted documents: each refused
// alike, the certificate's chain built for the first only (the refused signers kept).
TEST_F(ServiceE2eTest, ForeignSignedDocumentsAreUnauthenticated) {
  Start(kMetricsFlags);
  TestCa foreign = TestCa::Create("someone-elses-root");
  CertAndKey signer = IssueImdsSigner(foreign);  // the right name, the wrong chain
  for (const char* vm : {"vm-1", "vm-2", "vm-3"}) {
    AttestedDocumentFields fields;
    fields.vm_id = vm;
    GrpcReply r = Call(kAksNodeControllerComponent, files_.Token(fields, &signer));
    EXPECT_EQ(r.code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(r.status.error_message(), HasSubstr("untrusted_signer"));
  }
  EXPECT_TRUE(CallAsNode().status.ok());
  const std::string text = Metrics();
  EXPECT_EQ(MetricValue(text, "lp_identity_verifications_total"), 4.0) << text;
  EXPECT_EQ(MetricValue(text, "lp_signer_refusal_cache_hits_total"), 2.0);
  EXPECT_EQ(MetricValue(text, "lp_identity_failures_total", {{"reason", "untrusted_signer"}}), 3.0);
}

TEST_F(ServiceE2eTest, TrustedChainWithAnotherSignerNameIsUnauthenticated) {
  Start();
  CertAndKey signer = IssueImdsSigner(files_.imds_root(), "metadata.example.com");
  GrpcReply r = Call(kAksNodeControllerComponent, files_.Token({}, &signer));
  EXPECT_EQ(r.code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(r.status.error_message(), HasSubstr("wrong_signer"));
}

TEST_F(ServiceE2eTest, SubscriptionsOffTheAllowListArePermissionDenied) {
  // GUIDs compare case-insensitively: the upper-cased entry allows the default node.
  std::string upper = kDefaultSubscription;
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  Start({"--allowed-subscriptions", "11111111-2222-3333-4444-555555555555," + upper});
  EXPECT_TRUE(CallAsNode().status.ok());
  AttestedDocumentFields other;
  other.subscription_id = "99999999-0000-0000-0000-000000000000";
  GrpcReply r = Call(kAksNodeControllerComponent, files_.Token(other));
  EXPECT_EQ(r.code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(r.status.error_message(),
              HasSubstr("subscription 99999999-0000-0000-0000-000000000000 is not allowed"));
}

// The allow-list from a file, as the Deployment mounts it from the settings ConfigMap: a
// subscription added while the service runs is served within --refresh-interval, the same
// document included (the identity is cached, the list applied at every call); a file that does
// not load keeps the list before it, logged and counted.
TEST_F(ServiceE2eTest, TheAllowListFileIsReadAgainWhileTheServiceRuns) {
  const std::string other = "11111111-2222-3333-4444-555555555555";
  const std::filesystem::path file = files_.components_dir().parent_path() / "allowed";
  // Replaced whole, by rename, as a ConfigMap volume update lands.
  auto WriteFile = [](const std::filesystem::path& path, const std::string& text) {
    const std::filesystem::path next = path.string() + ".next";
    std::ofstream(next, std::ios::binary | std::ios::trunc) << text;
    std::filesystem::rename(next, path);
  };
  WriteFile(file, "# the fleet\n" + other + "\n");
  std::vector<std::string> flags = kMetricsFlags;
  flags.insert(flags.end(),
               {"--allowed-subscriptions-file", file.string(), "--refresh-interval", "1s"});
  Start(flags);
  const std::string token = files_.Token();
  EXPECT_EQ(Call(kAksNodeControllerComponent, token).code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(MetricValue(Metrics(), "lp_allowed_subscriptions"), 1.0);

  // The node's subscription added: served, with the very document refused before.
  WriteFile(file, other + "," + kDefaultSubscription + "\n");
  WaitFor([&] { return Call(kAksNodeControllerComponent, token).status.ok(); }, kGenerous);
  EXPECT_TRUE(Call(kAksNodeControllerComponent, token).status.ok());
  EXPECT_EQ(MetricValue(Metrics(), "lp_allowed_subscriptions"), 2.0);
  EXPECT_TRUE(lps_->Logged("allowed subscriptions reloaded"));

  // Emptied by mistake: refused, the list before stays (not "everyone").
  WriteFile(file, "\n");
  WaitFor(
      [&] {
        return MetricValue(Metrics(), "lp_allowed_subscriptions_last_reload_successful") == 0.0;
      },
      kGenerous);
  EXPECT_EQ(MetricValue(Metrics(), "lp_allowed_subscriptions_last_reload_successful"), 0.0);
  EXPECT_TRUE(Call(kAksNodeControllerComponent, token).status.ok());
  AttestedDocumentFields stranger;
  stranger.subscription_id = "99999999-0000-0000-0000-000000000000";
  EXPECT_EQ(Call(kAksNodeControllerComponent, files_.Token(stranger)).code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(lps_->Logged(
      "allowed subscriptions changed but do not load; still allowing the previous list"));

  // Both ways at once are refused: which list would apply?
  SpawnOptions both;
  both.argv = files_.Args(
      {"--allowed-subscriptions", other, "--allowed-subscriptions-file", file.string()});
  RunResult r = RunProcess(std::move(both), seconds(30));
  EXPECT_NE(r.status.exit_code, 0);
  EXPECT_THAT(r.stderr_text,
              HasSubstr("give --allowed-subscriptions or --allowed-subscriptions-file, not both"));
}

TEST_F(ServiceE2eTest, ANodeOverItsRateIsResourceExhaustedOthersAreNot) {
  Start({"--rate-limit-per-node", "1/s"});
  std::string token = files_.Token();
  ASSERT_TRUE(Call(kAksNodeControllerComponent, token).status.ok());
  // One token a second and a one-second burst: of five immediate retries some must be refused
  // however slow this machine is (a refused one gives nothing back).
  std::vector<GrpcReply> retries;
  for (int i = 0; i < 5; ++i) retries.push_back(Call(kAksNodeControllerComponent, token));
  auto refused = std::find_if(retries.begin(), retries.end(), [](const GrpcReply& r) {
    return r.code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  });
  ASSERT_NE(refused, retries.end());
  EXPECT_THAT(refused->status.error_message(),
              AllOf(HasSubstr("rate limit"), HasSubstr(kDefaultVmId)));
  AttestedDocumentFields another;
  another.vm_id = "5f0c0b8e-0000-4000-8000-000000000002";
  EXPECT_TRUE(Call(kAksNodeControllerComponent, files_.Token(another)).status.ok());
}

TEST_F(ServiceE2eTest, BadComponentNamesAreInvalidArgumentAndNeverAPath) {
  // A file one level up: a name that became a path would find it.
  files_.dir().Write("secret.json", R"({"hotfixes":{"202604.01":"202604.01.666"}})");
  Start();
  for (std::string name :
       {std::string(""), std::string("../secret"), std::string("..%2fsecret"),
        std::string("/etc/passwd"), std::string("9lives"), std::string(".hidden"),
        std::string("a b"), std::string("a/b"), std::string(65, 'a'),
        std::string("aks\nNodeController"), std::string("aks\0x", 5)}) {
    GrpcReply r = CallAsNode(name);
    EXPECT_EQ(r.code(), grpc::StatusCode::INVALID_ARGUMENT) << "name: " << name;
    EXPECT_THAT(r.status.error_message(), HasSubstr("component_name")) << name;
    EXPECT_THAT(r.response.config(), Not(HasSubstr("666")));
  }
  EXPECT_EQ(CallAsNode("").status.error_message(), "component_name is required");
  EXPECT_EQ(CallAsNode(std::string(64, 'a')).code(), grpc::StatusCode::NOT_FOUND);  // valid
}

TEST_F(ServiceE2eTest, UnknownComponentIsNotFound) {
  Start();
  GrpcReply r = CallAsNode("someOtherComponent");
  EXPECT_EQ(r.code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(r.status.error_message(), "component \"someOtherComponent\" not found");
}

TEST_F(ServiceE2eTest, AnUnauthenticatedCallerLearnsNothingAboutTheStore) {
  Start({"--allowed-subscriptions", "11111111-2222-3333-4444-555555555555"});
  EXPECT_EQ(Call("../secret", std::nullopt).code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Call("nope", std::nullopt).code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallAsNode("nope").code(), grpc::StatusCode::PERMISSION_DENIED);
}

// --attestation-issuers pins the CA that issues IMDS's signer: its documents verify with no
// root configured, and a signer from another CA under the same root does not.
TEST_F(ServiceE2eTest, PinnedAttestationIssuersTrustOnlyTheirOwnSigners) {
  TestCa issuer = files_.imds_root().IssueIntermediate("test-imds-issuing-ca");
  TestCa sibling = files_.imds_root().IssueIntermediate("test-other-issuing-ca");
  const auto issuers = WritePemFile(files_.dir().path(), "issuers.pem", issuer.cert_pem());
  std::vector<std::string> args = files_.Args();
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--attestation-roots") {
      args[i] = "--attestation-issuers";
      args[i + 1] = issuers.string();
    }
  }
  lps_ = std::make_unique<ServiceProcess>(args);
  channel_ = lps_->Channel(files_);
  const CertAndKey pinned = IssueImdsSigner(issuer);
  const CertAndKey other = IssueImdsSigner(sibling);
  EXPECT_TRUE(Call(kAksNodeControllerComponent, files_.Token({}, &pinned)).status.ok());
  GrpcReply r = Call(kAksNodeControllerComponent, files_.Token({}, &other));
  EXPECT_EQ(r.code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(r.status.error_message(), HasSubstr("untrusted_signer"));
  // The root's own signer: nothing above the pin is trusted.
  r = Call(kAksNodeControllerComponent, files_.Token());
  EXPECT_EQ(r.code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(lps_->Logged("verifying attested documents"));
}

// ---- Access log and metrics ----------------------------------------------------------------

TEST_F(ServiceE2eTest, OneAccessLogLinePerCallWithIdentityAndNeverTheToken) {
  Start();
  std::string token = files_.Token();
  ASSERT_TRUE(Call(kAksNodeControllerComponent, token).status.ok());
  ASSERT_EQ(Call("nope", token).code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_EQ(Call(kAksNodeControllerComponent, "garbage!").code(),
            grpc::StatusCode::UNAUTHENTICATED);

  std::vector<Json> lines = lps_->AccessLog();
  ASSERT_EQ(lines.size(), 3u) << lps_->Stderr();
  EXPECT_EQ(lines[0]["level"], "INFO");
  EXPECT_EQ(lines[0]["vm_id"], kDefaultVmId);
  EXPECT_EQ(lines[0]["subscription_id"], kDefaultSubscription);
  EXPECT_EQ(lines[0]["component"], kAksNodeControllerComponent);
  EXPECT_EQ(lines[0]["code"], "OK");
  EXPECT_EQ(lines[0]["insecure_identity"], false);
  EXPECT_TRUE(lines[0]["duration_us"].is_number_integer());
  EXPECT_THAT(lines[0]["peer"].get<std::string>(), HasSubstr("127.0.0.1"));
  // Which file answered: the first 12 hex digits of its SHA-256, as sha256sum says.
  EXPECT_EQ(lines[0]["file_sha256"], FileDigest(kServedMap));
  EXPECT_EQ(lines[1]["file_sha256"], "");
  EXPECT_EQ(lines[1]["code"], "NOT_FOUND");
  EXPECT_EQ(lines[1]["component"], "nope");
  EXPECT_EQ(lines[2]["code"], "UNAUTHENTICATED");
  EXPECT_EQ(lines[2]["identity_failure"], "malformed");
  EXPECT_EQ(lines[2]["vm_id"], "");
  // Neither the token nor any recognisable part of it.
  EXPECT_THAT(lps_->Stderr(), Not(HasSubstr(token.substr(0, 32))));
  EXPECT_THAT(lps_->Stderr(), Not(HasSubstr(token.substr(token.size() / 2, 32))));
  EXPECT_THAT(lps_->Stderr(), Not(HasSubstr("garbage!")));
}

TEST_F(ServiceE2eTest, MetricsCountCallsIdentityFailuresAndTheStore) {
  Start(kMetricsFlags);
  ASSERT_NE(lps_->metrics_port(), 0);
  std::string before = Metrics();
  EXPECT_EQ(MetricValue(before, "lp_store_generation"), 1.0) << before;
  // The process in Prometheus' standard names, and when the serving certificate expires.
  const double now_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GT(MetricValue(before, "process_resident_memory_bytes").value_or(0), 1e6) << before;
  EXPECT_GT(MetricValue(before, "process_cpu_seconds_total").value_or(0), 0.0);
  const double fds = MetricValue(before, "process_open_fds").value_or(0);
  EXPECT_GT(fds, 5.0);
  EXPECT_LE(fds, MetricValue(before, "process_max_fds").value_or(0));
  const double started = MetricValue(before, "process_start_time_seconds").value_or(0);
  EXPECT_GT(started, now_s - 120);
  EXPECT_LE(started, now_s + 1);
  const double expiry =
      MetricValue(before, "lp_tls_certificate_expiry_timestamp_seconds").value_or(0);
  EXPECT_GT(expiry, now_s);
  EXPECT_LT(expiry, now_s + 20 * 365 * 86400.0);
  const double roots =
      MetricValue(before, "lp_attestation_roots_expiry_timestamp_seconds").value_or(0);
  EXPECT_GT(roots, now_s);
  EXPECT_LT(roots, now_s + 50 * 365 * 86400.0);
  // Which file each component is served from, and which build this replica runs.
  EXPECT_EQ(
      MetricValue(before, "lp_component_file_info",
                  {{"component", kAksNodeControllerComponent}, {"sha256", FileDigest(kServedMap)}}),
      1.0)
      << before;
  EXPECT_EQ(MetricValue(before, "lp_build_info", {{"version", "0.1.0"}}), 1.0) << before;
  EXPECT_THAT(before, ::testing::ContainsRegex("lp_build_info\\{revision=\"[0-9a-z-]+\""));
  EXPECT_EQ(MetricValue(before, "lp_store_last_reload_successful"), 1.0);
  EXPECT_EQ(MetricValue(before, "lp_identity_failures_total", {{"reason", "expired"}}), 0.0);

  ASSERT_TRUE(CallAsNode().status.ok());
  ASSERT_TRUE(CallAsNode().status.ok());
  ASSERT_EQ(Call(kAksNodeControllerComponent, std::nullopt).code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_EQ(CallAsNode("nope").code(), grpc::StatusCode::NOT_FOUND);

  std::string after = Metrics();
  EXPECT_EQ(MetricValue(after, "lp_requests_total",
                        {{"component", kAksNodeControllerComponent}, {"code", "OK"}}),
            2.0)
      << after;
  // Names the store does not know never become label values.
  EXPECT_EQ(
      MetricValue(after, "lp_requests_total", {{"component", "unknown"}, {"code", "NOT_FOUND"}}),
      1.0);
  EXPECT_FALSE(MetricValue(after, "lp_requests_total", {{"component", "nope"}}).has_value());
  EXPECT_EQ(MetricValue(after, "lp_requests_total", {{"code", "UNAUTHENTICATED"}}), 1.0);
  EXPECT_EQ(MetricValue(after, "lp_identity_failures_total", {{"reason", "missing"}}), 1.0);
  EXPECT_EQ(MetricValue(after, "lp_requests_by_subscription_total",
                        {{"subscription", kDefaultSubscription}}),
            3.0);
  EXPECT_EQ(
      MetricValue(after, "lp_request_duration_seconds_count", {{"method", "GetComponentConfig"}}),
      4.0);
  EXPECT_EQ(
      MetricValue(after, "lp_request_duration_seconds_count", {{"method", "ReportHotfixOutcome"}}),
      0.0);
}

// The identity cache, the signer cache and the rate limiter keep their own counts; /metrics
// reads them when scraped.
TEST_F(ServiceE2eTest, MetricsReadTheIdentityCachesAndTheRateLimiter) {
  std::vector<std::string> flags = kMetricsFlags;
  flags.insert(flags.end(), {"--rate-limit-per-node", "100/s"});
  Start(flags);
  const std::string first = files_.Token();
  AttestedDocumentFields other;
  other.vm_id = "11111111-2222-4333-8444-555555555555";
  ASSERT_TRUE(Call(kAksNodeControllerComponent, first).status.ok());
  ASSERT_TRUE(Call(kAksNodeControllerComponent, first).status.ok());  // the same document
  ASSERT_TRUE(Call(kAksNodeControllerComponent, files_.Token(other)).status.ok());

  std::string text = Metrics();
  EXPECT_EQ(MetricValue(text, "lp_identity_verifications_total"), 2.0) << text;
  EXPECT_EQ(MetricValue(text, "lp_identity_cache_hits_total"), 1.0);
  EXPECT_EQ(MetricValue(text, "lp_identity_cache_entries"), 2.0);
  EXPECT_EQ(MetricValue(text, "lp_identity_cache_evictions_total"), 0.0);
  // The second document came from the signer the first one's verification kept.
  EXPECT_EQ(MetricValue(text, "lp_signer_cache_hits_total"), 1.0);
  EXPECT_EQ(MetricValue(text, "lp_signer_cache_entries"), 1.0);
  EXPECT_EQ(MetricValue(text, "lp_rate_limiter_tracked_nodes"), 2.0);
}

// stderr is a FIFO the test reads until the service serves and then stops reading, as a stalled
// log shipper would. Calls and health go on (before NeverBlockOnStderr, the 64 KiB pipe filled
// after about a hundred access-log lines and every connection stopped); what did not fit is
// counted, and said once the reader reads again.
TEST_F(ServiceE2eTest, AStderrReaderThatStopsStallsNoCall) {
  const std::filesystem::path fifo = files_.dir().File("stderr.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  UniqueFd reader(open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_GE(reader.get(), 0);
  ASSERT_GT(fcntl(reader.get(), F_SETPIPE_SZ, 4096), 0);
  auto read_until = [&](const std::string& wanted) {
    std::string text;
    char buf[65536];
    auto until = std::chrono::steady_clock::now() + kGenerous;
    while (text.find(wanted) == std::string::npos && std::chrono::steady_clock::now() < until) {
      pollfd p{reader.get(), POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      ssize_t n = read(reader.get(), buf, sizeof buf);
      if (n > 0) text.append(buf, static_cast<size_t>(n));
    }
    // ...and the rest of the line it is in.
    while (!text.empty() && text.back() != '\n' && std::chrono::steady_clock::now() < until) {
      pollfd p{reader.get(), POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      ssize_t n = read(reader.get(), buf, sizeof buf);
      if (n > 0) text.append(buf, static_cast<size_t>(n));
    }
    return text;
  };
  SpawnOptions spawn;
  spawn.argv = files_.Args(kMetricsFlags);
  spawn.stderr_path = fifo;
  Subprocess lps(std::move(spawn));
  Json serving;
  for (const Json& l :
       JsonLines(read_until("live-patching-service serving"), NonJsonLines::kSkip)) {
    if (l.value("msg", "") == "live-patching-service serving") serving = l;
  }
  ASSERT_TRUE(serving.is_object()) << "the service did not start";
  const uint16_t port = serving.value("port", 0);
  const uint16_t health_port = serving.value("health_port", 0);
  const uint16_t metrics_port = serving.value("metrics_port", 0);

  // Nobody reads from here on. 2,500 access-log lines (about 1.2 MB) overflow the 4 KiB pipe
  // and the 1 MiB queue behind it.
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = files_.tls_ca().cert_pem();
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(kApiserverFqdn);
  auto channel = grpc::CreateCustomChannel(LoopbackAddress(port), grpc::SslCredentials(tls), args);
  auto health =
      grpc::CreateChannel(LoopbackAddress(health_port), grpc::InsecureChannelCredentials());
  const std::string token = files_.Token();
  constexpr int kCalls = 2500;
  int ok = 0;
  for (int i = 0; i < kCalls; ++i) {
    if (CallGetComponentConfig(channel, kAksNodeControllerComponent, token).status.ok()) ++ok;
    if (i % 500 == 499) {
      EXPECT_EQ(HealthCheck(health, ""), 1) << "after " << i + 1 << " calls";
    }
  }
  EXPECT_EQ(ok, kCalls);
  std::optional<double> dropped =
      MetricValue(HttpGet(metrics_port, "/metrics"), "lp_log_lines_dropped_total");
  ASSERT_TRUE(dropped.has_value());
  EXPECT_GT(*dropped, 0);
  EXPECT_LT(*dropped, kCalls);

  // The reader is back: the queue comes out, then the count of what never did.
  std::string rest = read_until("log lines dropped");
  int access_lines = 0;
  std::optional<double> said;
  for (const Json& l : JsonLines(rest, NonJsonLines::kSkip)) {
    if (l.value("msg", "") == "GetComponentConfig") ++access_lines;
    if (l.value("msg", "") == "log lines dropped: stderr was not being read") {
      said = l.value("dropped", -1.0);
    }
  }
  EXPECT_EQ(said, dropped);
  EXPECT_EQ(access_lines + static_cast<int>(*dropped), kCalls);
  EXPECT_TRUE(lps.Stop().success());
}

// Every verified document is kept, whatever is decided after it, and the allow-list and the
// rate are applied afresh to each call: a valid document from a subscription off the
// allow-list, replayed, is PERMISSION_DENIED from the cache (a hash, not a signature check:
// issue 31), and a node past its rate is RESOURCE_EXHAUSTED from it.
TEST_F(ServiceE2eTest, VerifiedIdentitiesAreCachedAndJudgedAtEveryCall) {
  std::vector<std::string> flags = kMetricsFlags;
  flags.insert(flags.end(), {"--allowed-subscriptions", kDefaultSubscription,
                             "--rate-limit-per-node", "0.001/s"});  // one call per node
  Start(flags);
  AttestedDocumentFields foreign;
  foreign.subscription_id = "99999999-8888-4777-8666-555555555555";
  const std::string foreign_token = files_.Token(foreign);
  EXPECT_EQ(Call(kAksNodeControllerComponent, foreign_token).code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Call(kAksNodeControllerComponent, foreign_token).code(),
            grpc::StatusCode::PERMISSION_DENIED);
  AttestedDocumentFields earlier;  // the same node's document of a minute ago
  earlier.created_on -= std::chrono::minutes(1);
  const std::string token = files_.Token();
  ASSERT_TRUE(Call(kAksNodeControllerComponent, token).status.ok());
  EXPECT_EQ(Call(kAksNodeControllerComponent, files_.Token(earlier)).code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);

  std::string text = Metrics();
  EXPECT_EQ(MetricValue(text, "lp_identity_verifications_total"), 3.0) << text;
  EXPECT_EQ(MetricValue(text, "lp_identity_cache_entries"), 3.0);
  EXPECT_EQ(MetricValue(text, "lp_identity_cache_hits_total"), 1.0);  // the foreign replay
  // The node's document again: from the cache, and still over its rate.
  EXPECT_EQ(Call(kAksNodeControllerComponent, token).code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(MetricValue(Metrics(), "lp_identity_cache_hits_total"), 2.0);
}

// ---- The store: reload, invalid files, ConfigMap volumes ------------------------------------

// The reload is timed by the store's generation on /metrics, a cheap poll, not by calls: a
// call is a TLS handshake and a full verification, which a loaded machine makes slow.
TEST_F(ServiceE2eTest, AChangedFileIsServedWithinTwoSeconds) {
  Start(kMetricsFlags);
  ASSERT_EQ(ServedConfig(), kServedMap);
  auto changed = std::chrono::steady_clock::now();
  files_.WriteComponent(kAksNodeControllerComponent, kNextMap);
  WaitFor([&] { return MetricValue(Metrics(), "lp_store_generation") == 2.0; }, seconds(10));
  auto took = std::chrono::steady_clock::now() - changed;
  EXPECT_EQ(MetricValue(Metrics(), "lp_store_generation"), 2.0);
  EXPECT_LT(took, seconds(2));
  EXPECT_EQ(ServedConfig(), kNextMap);
  // A new file is a new component.
  files_.WriteComponent("otherComponent", R"({"anything":[1,2,3]})");
  WaitFor([&] { return CallAsNode("otherComponent").status.ok(); }, seconds(10));
  EXPECT_EQ(CallAsNode("otherComponent").response.config(), R"({"anything":[1,2,3]})");
}

TEST_F(ServiceE2eTest, AnInvalidFileIsKeptOutAndTheLastGoodConfigServed) {
  Start(kMetricsFlags);
  files_.WriteComponent(kAksNodeControllerComponent, R"({"hotfixes":{"202604.01":)");
  files_.WriteComponent("brokenComponent", "not json");
  WaitFor([&] { return MetricValue(Metrics(), "lp_store_last_reload_successful") == 0.0; },
          kGenerous);
  std::string metrics = Metrics();
  EXPECT_EQ(MetricValue(metrics, "lp_store_last_reload_successful"), 0.0) << metrics;
  EXPECT_EQ(MetricValue(metrics, "lp_store_rejected_files"), 2.0);
  EXPECT_EQ(ServedConfig(), kServedMap);
  EXPECT_EQ(CallAsNode("brokenComponent").code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(lps_->Logged("component file refused; the component keeps its last good config"));
  // Fixing the file brings it back and clears the error.
  files_.WriteComponent(kAksNodeControllerComponent, kNextMap);
  std::filesystem::remove(files_.components_dir() / "brokenComponent.json");
  WaitFor([&] { return ServedConfig() == kNextMap; }, kGenerous);
  EXPECT_EQ(ServedConfig(), kNextMap);
  WaitFor([&] { return MetricValue(Metrics(), "lp_store_last_reload_successful") == 1.0; },
          kGenerous);
  EXPECT_EQ(MetricValue(Metrics(), "lp_store_last_reload_successful"), 1.0);
}

// Ready means serving what the folder says (docs/OPERATIONS.md, "Ready means serving"): a
// replica that starts while a file is refused answers calls with what loaded, but its health
// says NOT_SERVING until a load takes every file; a file refused later keeps it SERVING.
TEST_F(ServiceE2eTest, AReplicaWhoseFirstLoadRefusedAFileIsNotReadyUntilALoadTakesEveryFile) {
  files_.WriteComponent("brokenComponent", R"({"hotfixes":{"202604.01":)");
  Start(kMetricsFlags);
  ASSERT_NE(lps_->health_port(), 0);
  EXPECT_EQ(HealthCheck(lps_->HealthChannel(), ""), 2) << "NOT_SERVING";
  EXPECT_EQ(HealthCheck(lps_->HealthChannel(), kServiceName), 2);
  EXPECT_EQ(HealthCheck(channel_, ""), 2) << "the TLS port's health agrees";
  std::string metrics = Metrics();
  EXPECT_EQ(MetricValue(metrics, "lp_store_complete"), 0.0) << metrics;
  EXPECT_EQ(MetricValue(metrics, "lp_store_rejected_files"), 1.0);
  EXPECT_TRUE(
      lps_->Logged("not ready: a component file was refused before any load took every "
                   "file; health answers NOT_SERVING until one does"));
  bool start_line_says_so = false;
  for (const auto& l : lps_->LogLines()) {
    if (l.value("msg", "") == "live-patching-service serving") {
      start_line_says_so = l.value("store_complete", true) == false;
    }
  }
  EXPECT_TRUE(start_line_says_so);
  EXPECT_EQ(ServedConfig(), kServedMap) << "a call is still answered from what loaded";

  // The fix lands (the file goes): SERVING from that load on.
  std::filesystem::remove(files_.components_dir() / "brokenComponent.json");
  WaitFor([&] { return HealthCheck(lps_->HealthChannel(), "") == 1; }, kGenerous);
  EXPECT_EQ(HealthCheck(lps_->HealthChannel(), ""), 1);
  EXPECT_EQ(MetricValue(Metrics(), "lp_store_complete"), 1.0);
  EXPECT_TRUE(lps_->Logged("store complete: every component file loads; health answers SERVING"));

  // A file refused later keeps its last good text, and the replica Ready (with the alert's
  // metric at 0).
  files_.WriteComponent("brokenComponent", "not json");
  WaitFor([&] { return MetricValue(Metrics(), "lp_store_last_reload_successful") == 0.0; },
          kGenerous);
  EXPECT_EQ(MetricValue(Metrics(), "lp_store_last_reload_successful"), 0.0);
  EXPECT_EQ(HealthCheck(lps_->HealthChannel(), ""), 1);
  EXPECT_EQ(MetricValue(Metrics(), "lp_store_complete"), 1.0);
}

// The failure docs/OPERATIONS.md's upgrade order prevents: a file written in a newer format
// (here a rollout key this binary does not know, as a release's new field is to the release
// before) reaches replicas of the older binary. A running one refuses it and keeps serving its
// last good file, Ready; one that starts (an image roll back, a rescheduled pod) has no good
// copy of that component: it answers NOT_FOUND and stays NOT_SERVING, so no traffic reaches it.
TEST_F(ServiceE2eTest, AFileInANewerFormatIsRefusedByAnOlderBinaryAndAStartingReplicaIsNotReady) {
  Start(kMetricsFlags);
  ASSERT_EQ(HealthCheck(lps_->HealthChannel(), ""), 1);
  const std::string newer = R"({"hotfixes":{"202604.01":"202604.01.3"},"rollouts":[{)"
                            R"("name":"canary","hotfixes":{"202604.01":"202604.01.4"},)"
                            R"("steps":[{"at":"2026-01-01T00:00:00Z","percent":10}],)"
                            R"("pause_window":{"from":"22:00","to":"06:00"}}]})";
  files_.WriteComponent(kAksNodeControllerComponent, newer);
  WaitFor([&] { return MetricValue(Metrics(), "lp_store_last_reload_successful") == 0.0; },
          kGenerous);
  EXPECT_EQ(MetricValue(Metrics(), "lp_store_last_reload_successful"), 0.0);
  EXPECT_EQ(ServedConfig(), kServedMap) << "the running replica keeps its last good file";
  EXPECT_EQ(HealthCheck(lps_->HealthChannel(), ""), 1) << "and stays Ready";
  bool named = false;
  for (const auto& l : lps_->LogLines()) {
    named =
        named || (l.value("msg", "") ==
                      "component file refused; the component keeps its "
                      "last good config" &&
                  l.value("error", "").find("unknown key \"pause_window\"") != std::string::npos);
  }
  EXPECT_TRUE(named) << "the refusal names the key";

  ServiceProcess starting(files_.Args(kMetricsFlags));
  auto channel = starting.Channel(files_);
  EXPECT_EQ(CallGetComponentConfig(channel, kAksNodeControllerComponent, files_.Token())
                .status.error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(HealthCheck(starting.HealthChannel(), ""), 2) << "not Ready: no traffic reaches it";
}

// kubelet's ConfigMap volume: <key> -> ..data/<key>, ..data -> ..<timestamp>/, and an update
// is a new timestamped folder plus an atomic rename of a new ..data symlink over the old one.
class ConfigMapVolume {
 public:
  explicit ConfigMapVolume(std::filesystem::path root) : root_(std::move(root)) {
    std::filesystem::create_directories(root_);
  }
  const std::filesystem::path& root() const { return root_; }

  void Publish(const std::map<std::string, std::string>& data) {
    std::string version = "..2026_12_02_15_00_00." + std::to_string(++versions_);
    std::filesystem::create_directory(root_ / version);
    for (const auto& [key, value] : data) {
      std::ofstream(root_ / version / key) << value;
      if (!std::filesystem::is_symlink(root_ / key)) {
        std::filesystem::create_symlink(std::filesystem::path("..data") / key, root_ / key);
      }
    }
    std::filesystem::create_directory_symlink(version, root_ / "..data_tmp");
    std::filesystem::rename(root_ / "..data_tmp", root_ / "..data");
    if (!previous_.empty()) std::filesystem::remove_all(root_ / previous_);
    previous_ = version;
  }

 private:
  std::filesystem::path root_;
  int versions_ = 0;
  std::string previous_;
};

TEST_F(ServiceE2eTest, FollowsAConfigMapDataSymlinkSwap) {
  ConfigMapVolume volume(files_.dir().File("configmap"));
  volume.Publish({{"aksNodeController.json", kServedMap}});
  Start(kMetricsFlags, volume.root());
  ASSERT_EQ(ServedConfig(), kServedMap);
  // Nothing but "..data"'s rename marks the update: no file the service saw was written.
  auto swapped = std::chrono::steady_clock::now();
  volume.Publish({{"aksNodeController.json", kNextMap}});
  WaitFor([&] { return MetricValue(Metrics(), "lp_store_generation") == 2.0; }, seconds(10));
  EXPECT_LT(std::chrono::steady_clock::now() - swapped, seconds(2));
  EXPECT_EQ(ServedConfig(), kNextMap);
  // The "..<timestamp>" folders and "..data" are not components.
  EXPECT_EQ(CallAsNode("..data").code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServiceE2eTest, ReplicasOnTheSameStoreGiveTheSameAnswers) {
  Start();
  ServiceProcess replica(files_.Args());
  auto second = replica.Channel(files_);
  std::string token = files_.Token();
  for (const std::string& component :
       {std::string(kAksNodeControllerComponent), std::string("nope")}) {
    GrpcReply a = Call(component, token);
    GrpcReply b = CallGetComponentConfig(second, component, token);
    EXPECT_EQ(a.code(), b.code()) << component;
    EXPECT_EQ(a.status.error_message(), b.status.error_message());
    EXPECT_EQ(a.response.SerializeAsString(), b.response.SerializeAsString());
  }
  files_.WriteComponent(kAksNodeControllerComponent, kNextMap);
  auto both_updated = [&] {
    return ServedConfig() == kNextMap &&
           CallGetComponentConfig(second, kAksNodeControllerComponent, token).response.config() ==
               kNextMap;
  };
  WaitFor(both_updated, kGenerous);
  EXPECT_TRUE(both_updated());
}

// ---- Process: drain, health, TLS ----------------------------------------------------------

TEST_F(ServiceE2eTest, SigtermDrainsAnInFlightCallThenExitsZero) {
  // Answers are held 8 s (the hidden test hook), so the call is still in flight after the
  // steps below on a loaded machine; the grace (30 s) outlasts the hold.
  Start({"--testing-response-delay", "8s", "--shutdown-grace", "30s"});
  RawCall slow(channel_, "/akslivepatching.v1.LivePatchingService/GetComponentConfig",
               {{"authorization", files_.Token()}});
  akslivepatching::v1::GetComponentConfigRequest request;
  request.set_component_name(kAksNodeControllerComponent);
  ASSERT_TRUE(slow.Start());
  ASSERT_TRUE(slow.Send(request.SerializeAsString()));
  // The access log line is written when the answer is decided, before the hold.
  WaitFor([&] { return !lps_->AccessLog().empty(); }, kGenerous);
  ASSERT_EQ(lps_->AccessLog().size(), 1u);
  lps_->process().Signal(SIGTERM);

  const std::string draining =
      "draining: health NOT_SERVING, no new calls, in-flight calls may finish";
  WaitFor([&] { return lps_->Logged(draining); }, kGenerous);
  ASSERT_TRUE(lps_->Logged(draining));
  // No new connections: the listener closes while the call is still open ...
  WaitFor([&] { return !IsListening(lps_->port()); }, kGenerous);
  EXPECT_FALSE(IsListening(lps_->port()));
  // ... and health says NOT_SERVING on the plaintext port that kubelet probes.
  EXPECT_EQ(HealthCheck(lps_->HealthChannel(), ""), 2);
  EXPECT_TRUE(lps_->process().running());

  std::optional<std::string> reply = slow.Receive();
  grpc::Status status = slow.Finish();
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  ASSERT_TRUE(reply.has_value());
  akslivepatching::v1::GetComponentConfigResponse response;
  ASSERT_TRUE(response.ParseFromString(*reply));
  EXPECT_EQ(response.config(), kServedMap);

  ExitStatus exit = lps_->process().Wait(seconds(30));
  EXPECT_TRUE(exit.success()) << exit.ToString();
  EXPECT_TRUE(lps_->Logged("drained: every listener closed"));
}

TEST_F(ServiceE2eTest, ACallLongerThanTheGraceIsCancelledAndTheProcessStillExits) {
  Start({"--testing-response-delay", "20s", "--shutdown-grace", "1s"});
  RawCall slow(channel_, "/akslivepatching.v1.LivePatchingService/GetComponentConfig",
               {{"authorization", files_.Token()}});
  akslivepatching::v1::GetComponentConfigRequest request;
  request.set_component_name(kAksNodeControllerComponent);
  ASSERT_TRUE(slow.Start());
  ASSERT_TRUE(slow.Send(request.SerializeAsString()));
  WaitFor([&] { return !lps_->AccessLog().empty(); }, kGenerous);
  ASSERT_EQ(lps_->AccessLog().size(), 1u);  // decided and held: in flight
  lps_->process().Signal(SIGTERM);
  slow.Receive();
  EXPECT_FALSE(slow.Finish().ok());
  ExitStatus exit = lps_->process().Wait(seconds(60));
  EXPECT_TRUE(exit.success()) << exit.ToString();
}

TEST_F(ServiceE2eTest, SigtermWithNothingInFlightExitsPromptly) {
  // A grace longer than the wait below: a drain that waited it out would fail the test.
  Start({"--shutdown-grace", "1m"});
  ASSERT_TRUE(CallAsNode().status.ok());
  // Gone, as a node agent is after its call. (An idle libgrpc++ client that stays would hold
  // the drain until its backup poller reads the GOAWAY, up to 5 s later.)
  channel_.reset();
  lps_->process().Signal(SIGTERM);
  ExitStatus exit = lps_->process().Wait(seconds(30));
  EXPECT_TRUE(exit.success()) << exit.ToString();
  EXPECT_TRUE(lps_->Logged("drained: every listener closed"));
}

TEST_F(ServiceE2eTest, HealthIsServingOnTheTlsAndPlaintextPortsAndNothingElseIsServed) {
  Start();
  auto tls = lps_->Channel(files_);
  EXPECT_EQ(HealthCheck(tls, ""), 1);
  EXPECT_EQ(HealthCheck(tls, kServiceName), 1);
  ASSERT_NE(lps_->health_port(), 0);
  EXPECT_EQ(HealthCheck(lps_->HealthChannel(), ""), 1);
  EXPECT_EQ(HealthCheck(lps_->HealthChannel(), kServiceName), 1);
  grpc::Status unknown;
  EXPECT_FALSE(HealthCheck(tls, "no.such.Service", &unknown).has_value());
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);

  // Server reflection is not served (docs/SERVICE.md, "Health"): a streaming RPC no node uses.
  RawCall reflection(tls, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo");
  if (reflection.Start()) reflection.Send(ProtoStringField(7, "*"));
  EXPECT_EQ(reflection.Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
  // The plaintext port serves health only: GetComponentConfig is not there.
  auto plain = akslivepatching::v1::LivePatchingService::NewStub(lps_->HealthChannel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kGenerous);
  akslivepatching::v1::GetComponentConfigRequest request;
  akslivepatching::v1::GetComponentConfigResponse response;
  EXPECT_EQ(plain->GetComponentConfig(&ctx, request, &response).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(ServiceE2eTest, SelectsH2FromTheNodesAlpnList) {
  Start();
  TlsClientOptions options;
  options.port = lps_->port();
  options.sni = "myaks-dns-12345678.hcp.eastus.azmk8s.io";
  options.alpn = {"aks-live-patching", "h2"};
  options.ca_pem = files_.tls_ca().cert_pem();
  options.verify_name = kApiserverFqdn;
  TlsClientResult r = TlsHandshake(options);
  ASSERT_TRUE(r.handshake_ok) << r.error;
  EXPECT_EQ(r.selected_alpn, "h2");
}

TEST_F(ServiceE2eTest, ReReadsTheTlsCertificateWhenItsFileChanges) {
  Start({"--refresh-interval", "1s"});
  TlsClientOptions options;
  options.port = lps_->port();
  options.alpn = {"aks-live-patching", "h2"};
  options.ca_pem = files_.tls_ca().cert_pem();
  options.verify_name = kApiserverFqdn;
  TlsClientResult before = TlsHandshake(options);
  ASSERT_TRUE(before.handshake_ok) << before.error;
  const std::string first = before.peer_common_name;
  ASSERT_FALSE(first.empty());

  LeafOptions leaf;
  leaf.common_name = "rotated-lps";
  leaf.dns_names = {kApiserverFqdn};
  leaf.ip_addresses = {"127.0.0.1"};
  CertAndKey rotated = files_.tls_ca().IssueLeaf(leaf);
  // Replace both files by rename, key first, as a Secret volume update lands.
  std::filesystem::create_directories(files_.dir().File("rotated"));
  PemPaths fresh = WritePemFiles(files_.dir().File("rotated"), "tls", rotated);
  std::filesystem::rename(fresh.key, files_.tls().key);
  std::filesystem::rename(fresh.cert, files_.tls().cert);

  std::string now;
  WaitFor([&] { return (now = TlsHandshake(options).peer_common_name) == "rotated-lps"; },
          seconds(20));
  EXPECT_NE(first, "rotated-lps");
  EXPECT_EQ(now, "rotated-lps");
  EXPECT_TRUE(CallAsNode().status.ok());
}

TEST_F(ServiceE2eTest, ReReadsTheAttestationRootsWhenTheirFileChanges) {
  // The old name of --refresh-interval, still accepted.
  Start({"--tls-refresh-seconds", "1", "--metrics-listen", "127.0.0.1:0"});
  TestCa rotated_root = TestCa::Create("rotated-imds-root");
  CertAndKey rotated_signer = IssueImdsSigner(rotated_root);
  const std::string rotated_token = files_.Token({}, &rotated_signer);
  ASSERT_EQ(Call(kAksNodeControllerComponent, rotated_token).code(), grpc::UNAUTHENTICATED);
  ASSERT_TRUE(CallAsNode().status.ok());

  // As a ConfigMap update lands: a new file renamed over the old.
  auto replace_roots = [&](const std::string& pem) {
    const auto tmp = files_.dir().Write("roots.tmp", pem);
    std::filesystem::rename(tmp, files_.roots());
  };
  replace_roots(rotated_root.cert_pem());
  WaitFor([&] { return Call(kAksNodeControllerComponent, rotated_token).status.ok(); }, kGenerous);
  EXPECT_TRUE(Call(kAksNodeControllerComponent, rotated_token).status.ok());
  EXPECT_EQ(CallAsNode().code(), grpc::UNAUTHENTICATED) << "the old roots are still trusted";
  EXPECT_TRUE(lps_->Logged("attestation roots reloaded"));
  EXPECT_EQ(MetricValue(Metrics(), "lp_attestation_roots_last_reload_successful"), 1.0);

  // A broken file: said in the log and the metric, and the rotated roots keep verifying.
  replace_roots("-----BEGIN CERTIFICATE-----\ncut short");
  WaitFor(
      [&] { return MetricValue(Metrics(), "lp_attestation_roots_last_reload_successful") == 0.0; },
      kGenerous);
  EXPECT_EQ(MetricValue(Metrics(), "lp_attestation_roots_last_reload_successful"), 0.0);
  EXPECT_TRUE(lps_->Logged(
      "attestation roots changed but do not load; still verifying with the previous roots"));
  EXPECT_TRUE(Call(kAksNodeControllerComponent, rotated_token).status.ok());
}

TEST_F(ServiceE2eTest, InsecureModeIsLoggedAtStartAndAcceptsAnyNonEmptyToken) {
  std::vector<std::string> args = files_.Args({"--insecure-accept-any-token"});
  // Without trust roots: the insecure mode is the alternative to them.
  auto roots = std::find(args.begin(), args.end(), "--attestation-roots");
  args.erase(roots, roots + 2);
  lps_ = std::make_unique<ServiceProcess>(args);
  channel_ = lps_->Channel(files_);
  bool warned = false;
  for (const auto& l : lps_->LogLines()) {
    if (l["level"] == "WARN" && l["msg"].get<std::string>().find("INSECURE") == 0) warned = true;
  }
  EXPECT_TRUE(warned) << lps_->Stderr();
  GrpcReply r = Call(kAksNodeControllerComponent, "anything at all");
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(Call(kAksNodeControllerComponent, std::nullopt).code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_FALSE(lps_->AccessLog().empty());
  EXPECT_EQ(lps_->AccessLog()[0]["insecure_identity"], true);
  EXPECT_THAT(lps_->Stderr(), Not(HasSubstr("anything at all")));
}

// ---- Refusing to start ---------------------------------------------------------------------

struct Refusal {
  const char* name;
  const char* flag;
  // The value given to the flag; "<dir>" is replaced with the test's folder.
  const char* value;
  const char* says;
};

class RefusesToStartTest : public ::testing::TestWithParam<Refusal> {};

TEST_P(RefusesToStartTest, WithAMessageNamingTheFlag) {
  ServiceFiles files;
  files.dir().Write("garbage.pem", "this is not PEM\n");
  files.dir().Write("other.key", IssueLocalServerCert(files.tls_ca()).key_pem);
  std::vector<std::string> args = files.Args();
  std::string value = GetParam().value;
  if (value.rfind("<dir>", 0) == 0) value = files.dir().path().string() + value.substr(5);
  auto flag = std::find(args.begin(), args.end(), GetParam().flag);
  ASSERT_NE(flag, args.end());
  *(flag + 1) = value;

  SpawnOptions spawn;
  spawn.argv = args;
  RunResult r = RunProcess(std::move(spawn), seconds(30));
  EXPECT_EQ(r.status.exit_code, 1) << r.status.ToString() << "\n" << r.stderr_text;
  std::vector<Json> lines = JsonLines(r.stderr_text, NonJsonLines::kSkip);
  ASSERT_FALSE(lines.empty()) << r.stderr_text;
  EXPECT_EQ(lines.back()["msg"], "refusing to start");
  std::string error = lines.back().value("error", "");
  EXPECT_THAT(error, HasSubstr(GetParam().flag));
  EXPECT_THAT(error, HasSubstr(GetParam().says));
  EXPECT_THAT(r.stderr_text, Not(HasSubstr("live-patching-service serving")));
}

INSTANTIATE_TEST_SUITE_P(
    LiveService, RefusesToStartTest,
    ::testing::Values(
        Refusal{"MissingCert", "--tls-cert", "<dir>/nope.crt", "No such file or directory"},
        Refusal{"CertIsAFolder", "--tls-cert", "<dir>", "Is a directory"},
        Refusal{"CertIsNotPem", "--tls-cert", "<dir>/garbage.pem", "no PEM certificate"},
        Refusal{"MissingKey", "--tls-key", "<dir>/nope.key", "No such file or directory"},
        Refusal{"KeyOfAnotherCert", "--tls-key", "<dir>/other.key", "does not match"},
        Refusal{"MissingRoots", "--attestation-roots", "<dir>/nope.pem",
                "No such file or directory"},
        Refusal{"RootsNotPem", "--attestation-roots", "<dir>/garbage.pem", "no PEM certificate"},
        Refusal{"MissingStore", "--components-dir", "<dir>/no-such-folder", "no-such-folder"},
        Refusal{"StoreIsAFile", "--components-dir", "<dir>/garbage.pem", "garbage.pem"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST_F(ServiceE2eTest, ASecondInstanceOnABusyPortIsRefusedNotSharingIt) {
  Start();
  std::vector<std::string> args = files_.Args();
  *(std::find(args.begin(), args.end(), "--listen") + 1) = LoopbackAddress(lps_->port());
  SpawnOptions spawn;
  spawn.argv = args;
  RunResult r = RunProcess(std::move(spawn), seconds(30));
  EXPECT_EQ(r.status.exit_code, 1) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("cannot listen there"));
  EXPECT_TRUE(CallAsNode().status.ok());
}

TEST(LiveServiceCliTest, RequiresTrustRootsUnlessInsecureModeIsExplicit) {
  ServiceFiles files;
  std::vector<std::string> args = files.Args();
  auto roots = std::find(args.begin(), args.end(), "--attestation-roots");
  args.erase(roots, roots + 2);
  SpawnOptions spawn;
  spawn.argv = args;
  RunResult r = RunProcess(std::move(spawn), seconds(30));
  EXPECT_EQ(r.status.exit_code, 2) << r.stderr_text;
  // The one shape every refusal has (docs/SERVICE.md, "Refusing to start").
  std::vector<nlohmann::json> lines = JsonLines(r.stderr_text, NonJsonLines::kSkip);
  ASSERT_EQ(lines.size(), 1u) << r.stderr_text;
  EXPECT_EQ(lines[0].value("level", ""), "ERROR");
  EXPECT_EQ(lines[0].value("msg", ""), "refusing to start");
  EXPECT_THAT(lines[0].value("error", ""),
              HasSubstr("--attestation-roots or --attestation-issuers is required"));
}

TEST(LiveServiceCliTest, HelpListsEveryFlag) {
  SpawnOptions spawn;
  spawn.argv = {BinDir() + "/live-patching-service", "--help"};
  RunResult r = RunProcess(std::move(spawn), seconds(10));
  EXPECT_TRUE(r.status.success()) << r.status.ToString();
  for (const char* flag : {"--listen",
                           "--tls-cert",
                           "--tls-key",
                           "--components-dir",
                           "--attestation-roots",
                           "--attestation-signer-name",
                           "--allowed-subscriptions",
                           "--rate-limit-per-node",
                           "--metrics-listen",
                           "--health-listen",
                           "--insecure-accept-any-token",
                           "--refresh-interval",
                           "--shutdown-grace",
                           "--prometheus-url",
                           "--prometheus-selector",
                           "--prometheus-ca",
                           "--prometheus-bearer-token-file",
                           "--evidence-lookback",
                           "--auto-halt-interval",
                           "--memory-limit",
                           "--log-level",
                           "--attestation-issuers",
                           "--allowed-authorities",
                           "--proxy-protocol",
                           "--proxy-protocol-from",
                           "--max-refusals-per-peer",
                           "--refusal-window",
                           "--max-calls-per-connection",
                           "--version"}) {
    EXPECT_THAT(r.stdout_text, HasSubstr(flag));
  }
}

TEST(LiveServiceCliTest, VersionSaysTheBuildAndItsRevision) {
  SpawnOptions spawn;
  spawn.argv = {BinDir() + "/live-patching-service", "--version"};
  RunResult r = RunProcess(std::move(spawn), seconds(10));
  EXPECT_TRUE(r.status.success()) << r.status.ToString() << r.stderr_text;
  // A build from a checkout names its commit; one from a tree without .git says unknown.
  EXPECT_THAT(r.stdout_text,
              ::testing::MatchesRegex("live-patching-service [0-9A-Za-z.+-]+ "
                                      "\\(revision ([0-9a-f]{12}(-dirty)?|unknown)\\)\n"));
}

TEST(LiveServiceCliTest, DurationsSizesAndLevelsAreUsageErrorsWhenMalformed) {
  ServiceFiles files;
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--shutdown-grace", "10"}, "--shutdown-grace: duration \"10\": want a number and a unit"},
      {{"--shutdown-grace", "2h"}, "--shutdown-grace: duration \"2h\": want 0s to 1h"},
      {{"--refresh-interval", "1500ms"}, "--refresh-interval 1500ms: want whole seconds"},
      {{"--auto-halt-interval", "2h"}, "want 1s to 1h"},
      {{"--refusal-window", "500ms"}, "--refusal-window: duration \"500ms\": want 1s to 1h"},
      {{"--memory-limit", "lots"}, "--memory-limit: \"lots\": want a size such as 256Mi"},
      {{"--log-level", "chatty"}, "--log-level: log level \"chatty\""},
      {{"--shutdown-grace", "1s", "--shutdown-grace-seconds", "1"},
       "give --shutdown-grace or --shutdown-grace-seconds, not both"},
  };
  for (const auto& [flags, message] : cases) {
    SpawnOptions spawn;
    spawn.argv = files.Args(flags);
    RunResult r = RunProcess(std::move(spawn), seconds(30));
    EXPECT_EQ(r.status.exit_code, 2) << flags[0] << ": " << r.stderr_text;
    std::vector<nlohmann::json> lines = JsonLines(r.stderr_text, NonJsonLines::kSkip);
    ASSERT_EQ(lines.size(), 1u) << r.stderr_text;
    EXPECT_EQ(lines[0].value("msg", ""), "refusing to start");
    EXPECT_THAT(lines[0].value("error", ""), HasSubstr(message)) << flags[0];
  }
}

TEST(LiveServiceCliTest, AMemoryLimitTooSmallForTheProcessIsRefusedNamingTheLeast) {
  ServiceFiles files;
  files.WriteComponent(kAksNodeControllerComponent, kServedMap);
  SpawnOptions spawn;
  // 16Mi is below the fixed reserve alone (8 MiB headroom and a 4 MiB pool) plus any build's
  // resident set, so every build (Release, ASan, TSan) refuses it.
  spawn.argv = files.Args({"--memory-limit", "16Mi"});
  RunResult r = RunProcess(std::move(spawn), seconds(30));
  EXPECT_EQ(r.status.exit_code, 1) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("--memory-limit 16Mi leaves room for fewer than 16 "
                                       "connections"));
  EXPECT_THAT(r.stderr_text, HasSubstr("give at least"));
}

// --log-level error keeps a refusal and drops every INFO line before it.
TEST(LiveServiceCliTest, TheLogLevelDropsTheLinesBelowIt) {
  ServiceFiles files;
  files.WriteComponent(kAksNodeControllerComponent, kServedMap);
  ServiceProcess first(files.Args());
  SpawnOptions spawn;
  std::vector<std::string> flags = {"--log-level", "error"};
  spawn.argv = files.Args(flags);
  for (size_t i = 0; i + 1 < spawn.argv.size(); ++i) {
    if (spawn.argv[i] == "--listen")
      spawn.argv[i + 1] = "127.0.0.1:" + std::to_string(first.port());
  }
  RunResult r = RunProcess(std::move(spawn), seconds(30));
  EXPECT_EQ(r.status.exit_code, 1) << r.stderr_text;
  std::vector<nlohmann::json> lines = JsonLines(r.stderr_text, NonJsonLines::kSkip);
  ASSERT_EQ(lines.size(), 1u) << r.stderr_text;
  EXPECT_EQ(lines[0].value("msg", ""), "refusing to start");
}

TEST(LiveServiceCliTest, ABadRateIsAUsageError) {
  ServiceFiles files;
  SpawnOptions spawn;
  spawn.argv = files.Args({"--rate-limit-per-node", "fast"});
  RunResult r = RunProcess(std::move(spawn), seconds(30));
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("want N/s"));
}

// ---- In process: the one code the real store cannot produce on demand ----------------------

// A store that has not loaded yet (DirectoryStore loads before Start returns, so the binary
// never shows this window; the service must still answer it properly).
class NotLoadedStore : public service::ComponentStore {
 public:
  std::shared_ptr<const service::StoreSnapshot> Current() const override { return nullptr; }
};

TEST(LivePatchingServiceInProcessTest, StoreNotLoadedYetIsUnavailable) {
  NotLoadedStore store;
  auto auth = service::NewInsecureAnyTokenAuthenticator();
  auto metrics = service::NewNoopMetrics();
  service::LivePatchingServiceOptions options;
  options.authenticator = auth.get();
  options.store = &store;
  options.metrics = metrics.get();
  options.access_log = &NullLogger();
  service::LivePatchingServiceImpl impl(options);

  // The service's own server, plaintext (h2c) for the test's client.
  service::GrpcServerOptions server_options;
  service::ListenerSpec listener;
  listener.address = "127.0.0.1:0";
  listener.tls = false;
  listener.handler = &impl;
  listener.flag = "--listen";
  server_options.listeners.push_back(std::move(listener));
  server_options.kept_metadata = {"authorization"};
  server_options.threads = 1;
  auto server = service::GrpcServer::Start(std::move(server_options));
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto channel =
      grpc::CreateChannel(LoopbackAddress((*server)->port(0)), grpc::InsecureChannelCredentials());
  GrpcReply r = CallGetComponentConfig(channel, kAksNodeControllerComponent, "token");
  EXPECT_EQ(r.code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(r.status.error_message(), "the component store is not loaded yet; retry later");
  // Name checks come first: a bad name is still the caller's error, not ours.
  EXPECT_EQ(CallGetComponentConfig(channel, "../x", "token").code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  (*server)->Drain(std::chrono::milliseconds(0));
}

// ---- hotfix-agent check-hotfix, the way a node runs it -------------------------------------

//   hotfix-agent --TLS--> HAProxy (deploy/haproxy/haproxy.cfg) --ALPN--> live-patching-service
//        `--HTTP--> ImdsStandin                        `--else--> TlsPeer "apiserver"
class CheckHotfixThroughHaproxyTest : public ServiceE2eTest {
 protected:
  CheckHotfixThroughHaproxyTest() {
    apiserver_ = std::make_unique<TlsPeer>(SilentApiserverOptions(files_.tls_ca(), kApiserverFqdn));
  }

  void StartProxy() {
    proxy_ = std::make_unique<Haproxy>(AlpnRouteOptions(lps_->port(), apiserver_->port()));
  }

  // Runs check-hotfix through the proxy and returns its one event's message.
  std::string RunAgent(const ImdsStandin& imds) {
    AgentRun run = node_.CheckHotfix(imds.document_url(), proxy_->frontend_address());
    EXPECT_TRUE(run.result.status.success()) << run.result.status.ToString();
    if (run.events.size() != 1) {
      ADD_FAILURE() << "expected one event; agent stderr:\n"
                    << run.result.stderr_text << "\nHAProxy:\n"
                    << proxy_->Log();
    }
    return run.Message();
  }

  NodeAgent node_{files_.tls_ca()};
  std::unique_ptr<TlsPeer> apiserver_;
  std::unique_ptr<Haproxy> proxy_;
};

TEST_F(CheckHotfixThroughHaproxyTest, AnAttestedNodeStagesTheServedPointer) {
  Start();
  StartProxy();
  node_.dir().Write("hotfix.json", R"({"version":"202604.01.2","scripts_version":"202604.01.1"})");
  ImdsStandinOptions options;
  options.signer = files_.signer();  // chains to --attestation-roots
  ImdsStandin imds(std::move(options));

  EXPECT_THAT(RunAgent(imds), HasSubstr("check-hotfix outcome=lpsRead"));
  EXPECT_EQ(Json::parse(node_.dir().Read("hotfix.json")),
            Json::parse(R"({"version":"202604.01.2","scripts_version":"202604.01.1",)"
                        R"("hotfixes":{"202604.01":"202604.01.3","202605.30":"202605.30.1"}})"));
  std::vector<Json> access = lps_->AccessLog();
  ASSERT_EQ(access.size(), 1u);
  EXPECT_EQ(access[0]["code"], "OK");
  EXPECT_EQ(access[0]["vm_id"], kDefaultVmId);
  EXPECT_EQ(apiserver_->accepted_count(), 0u);
  // Every line the service wrote is JSON (gRPC's own messages included).
  std::istringstream lines(lps_->Stderr());
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(Json::accept(line)) << line;
  }
  // The document the node sent is not in the service's output.
  ASSERT_EQ(imds.served_signatures().size(), 1u);
  EXPECT_THAT(lps_->Stderr(), Not(HasSubstr(imds.served_signatures()[0].substr(0, 40))));
}

// `:authority` is what the node says it dialed (the apiserver FQDN hotfix-agent puts there):
// --allowed-authorities keeps callers to the cluster names given, after authentication.
TEST_F(CheckHotfixThroughHaproxyTest, AnAuthorityNoPatternAllowsIsPermissionDenied) {
  ImdsStandinOptions options;
  options.signer = files_.signer();
  ImdsStandin imds(std::move(options));

  Start({"--allowed-authorities", "*.hcp.EastUS.azmk8s.io"});
  StartProxy();
  EXPECT_THAT(RunAgent(imds), HasSubstr("check-hotfix outcome=lpsRead"));
  std::vector<Json> access = lps_->AccessLog();
  ASSERT_EQ(access.size(), 1u);
  EXPECT_EQ(access[0]["code"], "OK");
  EXPECT_EQ(access[0]["cluster"], kApiserverFqdn);
  // Who is not authenticated learns nothing of the patterns (this client's :authority is the
  // service's own name, which no pattern allows).
  EXPECT_EQ(Call(kAksNodeControllerComponent, std::nullopt).code(),
            grpc::StatusCode::UNAUTHENTICATED);

  Start({"--allowed-authorities", "*.hcp.westus.azmk8s.io,api.example.com"});
  StartProxy();
  RunAgent(imds);  // fail-open: the node goes on, with one event
  access = lps_->AccessLog();
  ASSERT_EQ(access.size(), 1u);
  EXPECT_EQ(access[0]["code"], "PERMISSION_DENIED");
  EXPECT_EQ(access[0]["error"], std::string("authority ") + kApiserverFqdn +
                                    " matches no --allowed-authorities pattern");
}

TEST_F(CheckHotfixThroughHaproxyTest, AForeignSignedNodeGetsNoHotfixAvailable) {
  Start();
  StartProxy();
  ImdsStandin imds;  // its own generated root, which the service does not trust

  std::string message = RunAgent(imds);
  EXPECT_THAT(message, HasSubstr("check-hotfix outcome=noHotfixAvailable"));
  EXPECT_FALSE(std::filesystem::exists(node_.pointer()));
  std::vector<Json> access = lps_->AccessLog();
  ASSERT_EQ(access.size(), 1u);
  EXPECT_EQ(access[0]["code"], "UNAUTHENTICATED");
  EXPECT_EQ(access[0]["identity_failure"], "untrusted_signer");
}

}  // namespace
}  // namespace hotfix::testsupport
