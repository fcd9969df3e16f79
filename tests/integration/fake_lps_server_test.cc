// Self-test of FakeLpsServer and lps-dev-server with a real libgrpc++ client over TLS: every
// configured status comes back, and every call is recorded as the server saw it.
#include "fake_lps_server.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "akslivepatching/v1/live_patching.grpc.pb.h"
#include "bin_dir.h"
#include "ports.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_certs.h"
#include "wait.h"

namespace hotfix::testsupport {
namespace {

namespace pb = ::akslivepatching::v1;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct CallResult {
  grpc::Status status;
  pb::GetComponentConfigResponse response;
};

// A stock libgrpc++ client: trusts only the test CA and checks the LPS name, which
// GRPC_SSL_TARGET_NAME_OVERRIDE_ARG sets (together with the SNI) while we dial 127.0.0.1.
CallResult CallLps(const std::string& address, const std::string& ca_pem,
                   const std::string& component,
                   std::chrono::milliseconds deadline = std::chrono::seconds(10),
                   const std::string& verify_name = kApiserverFqdn) {
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ca_pem;
  grpc::ChannelArguments args;
  args.SetString(GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, verify_name);
  auto channel = grpc::CreateCustomChannel(address, grpc::SslCredentials(tls), args);
  auto stub = pb::LivePatchingService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  ctx.AddMetadata("authorization", "attested-signature-abc");
  pb::GetComponentConfigRequest request;
  request.set_component_name(component);
  CallResult result;
  result.status = stub->GetComponentConfig(&ctx, request, &result.response);
  return result;
}

class FakeLpsServerTest : public ::testing::Test {
 protected:
  explicit FakeLpsServerTest(bool register_service = true) {
    FakeLpsServerOptions options;
    options.cert = IssueLocalServerCert(ca_, {kApiserverFqdn});
    options.register_service = register_service;
    server_ = std::make_unique<FakeLpsServer>(std::move(options));
  }
  CallResult Call(const std::string& component = kAksNodeControllerComponent,
                  std::chrono::milliseconds deadline = std::chrono::seconds(10)) {
    return CallLps(server_->address(), ca_.cert_pem(), component, deadline);
  }

  TestCa ca_ = TestCa::Create("test-cluster-ca");
  std::unique_ptr<FakeLpsServer> server_;
};

TEST_F(FakeLpsServerTest, ServesConfigAndRecordsTheCall) {
  server_->SetConfig(R"({"hotfixes":{"202604.01":"202604.01.3"}})");
  CallResult r = Call();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.response.config(), R"({"hotfixes":{"202604.01":"202604.01.3"}})");
  EXPECT_EQ(r.response.component_name(), kAksNodeControllerComponent);

  ASSERT_EQ(server_->call_count(), 1u);
  LpsCall call = server_->calls()[0];
  EXPECT_EQ(call.component_name, kAksNodeControllerComponent);
  EXPECT_EQ(call.Authorization(), "attested-signature-abc");
  EXPECT_EQ(call.Count("authorization"), 1u);
  EXPECT_THAT(call.UserAgent(), HasSubstr("grpc-c++"));
  EXPECT_EQ(call.authority, kApiserverFqdn);  // what the override puts in :authority
  EXPECT_THAT(call.peer, StartsWith("ipv4:127.0.0.1:"));
  EXPECT_EQ(call.transport_security_type, "ssl");
  ASSERT_TRUE(call.deadline_remaining.has_value());
  EXPECT_GT(call.deadline_remaining->count(), 0);
  EXPECT_LE(*call.deadline_remaining, std::chrono::seconds(10));
  EXPECT_EQ(call.sequence, 1u);
  EXPECT_FALSE(call.cancelled);
}

TEST_F(FakeLpsServerTest, ResponseComponentNameCanDiffer) {
  LpsBehavior behavior;
  behavior.config = "{}";
  behavior.response_component_name = "resolvedName";
  server_->SetBehavior(behavior);
  CallResult r = Call();
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.response.component_name(), "resolvedName");
}

class FakeLpsStatusTest : public FakeLpsServerTest,
                          public ::testing::WithParamInterface<grpc::StatusCode> {};

TEST_P(FakeLpsStatusTest, ReturnsTheConfiguredStatus) {
  server_->SetStatus(GetParam(), "configured failure");
  CallResult r = Call();
  EXPECT_EQ(r.status.error_code(), GetParam());
  EXPECT_EQ(r.status.error_message(), "configured failure");
  EXPECT_EQ(server_->call_count(), 1u);
}

INSTANTIATE_TEST_SUITE_P(AllFailureCodes, FakeLpsStatusTest,
                         ::testing::Values(grpc::CANCELLED, grpc::UNKNOWN, grpc::INVALID_ARGUMENT,
                                           grpc::DEADLINE_EXCEEDED, grpc::NOT_FOUND,
                                           grpc::ALREADY_EXISTS, grpc::PERMISSION_DENIED,
                                           grpc::RESOURCE_EXHAUSTED, grpc::FAILED_PRECONDITION,
                                           grpc::ABORTED, grpc::OUT_OF_RANGE, grpc::UNIMPLEMENTED,
                                           grpc::INTERNAL, grpc::UNAVAILABLE, grpc::DATA_LOSS,
                                           grpc::UNAUTHENTICATED));

TEST_F(FakeLpsServerTest, DelayPastTheClientDeadlineIsSeenAsCancelled) {
  server_->SetDelay(std::chrono::seconds(30));
  CallResult r = Call(kAksNodeControllerComponent, std::chrono::milliseconds(500));
  EXPECT_EQ(r.status.error_code(), grpc::DEADLINE_EXCEEDED);
  ASSERT_TRUE(server_->WaitForCalls(1, kGenerous));
  LpsCall call = server_->calls()[0];
  ASSERT_TRUE(call.deadline_remaining.has_value());
  EXPECT_LE(*call.deadline_remaining, std::chrono::milliseconds(500));  // grpc-timeout arrived
  // The server notices the cancellation while it delays.
  EXPECT_TRUE(WaitFor([&] { return server_->calls()[0].cancelled; }));
}

TEST_F(FakeLpsServerTest, OnlyComponentAnswersNotFoundForOthers) {
  server_->SetConfig("{}");
  server_->SetOnlyComponent(std::string(kAksNodeControllerComponent));
  EXPECT_TRUE(Call().status.ok());
  CallResult other = Call("securityPatch");
  EXPECT_EQ(other.status.error_code(), grpc::NOT_FOUND);
  EXPECT_EQ(other.status.error_message(), "component securityPatch not found");
}

TEST_F(FakeLpsServerTest, BehaviourChangesBetweenCalls) {
  server_->SetStatus(grpc::UNAVAILABLE, "down");
  EXPECT_EQ(Call().status.error_code(), grpc::UNAVAILABLE);
  server_->SetStatus(grpc::OK);
  EXPECT_TRUE(Call().status.ok());
  server_->ClearCalls();
  EXPECT_EQ(server_->call_count(), 0u);
}

TEST_F(FakeLpsServerTest, WrongVerifyNameFailsTheHandshake) {
  CallResult r = CallLps(server_->address(), ca_.cert_pem(), kAksNodeControllerComponent,
                         std::chrono::seconds(5), "not-the-lps.example");
  EXPECT_EQ(r.status.error_code(), grpc::UNAVAILABLE);
  EXPECT_EQ(server_->call_count(), 0u);
}

class UnregisteredLpsTest : public FakeLpsServerTest {
 protected:
  UnregisteredLpsTest() : FakeLpsServerTest(/*register_service=*/false) {}
};

TEST_F(UnregisteredLpsTest, EveryCallIsUnimplemented) {
  CallResult r = Call();
  EXPECT_EQ(r.status.error_code(), grpc::UNIMPLEMENTED);
  EXPECT_EQ(server_->call_count(), 0u);
}

TEST(FakeLpsServerCapTest, KeepsOnlyTheNewestCalls) {
  TestCa ca = TestCa::Create("test-cluster-ca");
  FakeLpsServerOptions options;
  options.cert = IssueLocalServerCert(ca, {kApiserverFqdn});
  options.max_recorded_calls = 2;
  int observed = 0;
  options.on_call = [&observed](const LpsCall&) { ++observed; };  // calls are sequential here
  FakeLpsServer server(std::move(options));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(CallLps(server.address(), ca.cert_pem(), kAksNodeControllerComponent).status.ok());
  }
  std::vector<LpsCall> calls = server.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].sequence, 2u);
  EXPECT_EQ(calls[1].sequence, 3u);
  EXPECT_EQ(observed, 3);
}

TEST(FakeLpsServerCertTest, ExpiredCertificateFailsTheHandshake) {
  TestCa ca = TestCa::Create("test-cluster-ca");
  LeafOptions leaf;
  leaf.dns_names = {kApiserverFqdn};
  leaf.ip_addresses = {"127.0.0.1"};
  leaf.not_before = -std::chrono::hours(48);
  leaf.not_after = -std::chrono::hours(1);
  FakeLpsServerOptions options;
  options.cert = ca.IssueLeaf(leaf);
  FakeLpsServer server(std::move(options));
  CallResult r = CallLps(server.address(), ca.cert_pem(), kAksNodeControllerComponent,
                         std::chrono::seconds(5));
  EXPECT_EQ(r.status.error_code(), grpc::UNAVAILABLE);
  EXPECT_EQ(server.call_count(), 0u);
}

// --- lps-dev-server ------------------------------------------------------------------------

// Waits for the "listening on 127.0.0.1:<port>" line a standalone server prints when ready.
std::string WaitForListeningLine(Subprocess& process, const std::string& prefix) {
  auto until = std::chrono::steady_clock::now() + kGenerous;
  while (std::chrono::steady_clock::now() < until && process.running()) {
    std::string out = process.Stdout();
    size_t at = out.find(prefix);
    size_t end = out.find('\n', at);
    if (at != std::string::npos && end != std::string::npos) {
      return out.substr(at + prefix.size(), end - at - prefix.size());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

class LpsDevServerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Subprocess> Start(std::vector<std::string> extra_args) {
    PemPaths pem = WritePemFiles(dir_.path(), "lps", IssueLocalServerCert(ca_, {kApiserverFqdn}));
    std::string config = dir_.Write("config.json", R"({"hotfixes":{"202604.01":"202604.01.3"}})");
    SpawnOptions spawn;
    spawn.argv = {BinDir() + "/lps-dev-server",
                  "--listen",
                  "127.0.0.1:0",
                  "--tls-cert",
                  pem.cert.string(),
                  "--tls-key",
                  pem.key.string(),
                  "--config-file",
                  config};
    spawn.argv.insert(spawn.argv.end(), extra_args.begin(), extra_args.end());
    auto process = std::make_unique<Subprocess>(std::move(spawn));
    address_ = WaitForListeningLine(*process, "lps-dev-server listening on ");
    return process;
  }

  TempDir dir_;
  TestCa ca_ = TestCa::Create("test-cluster-ca");
  std::string address_;
};

TEST_F(LpsDevServerTest, ServesTheConfigFileForAksNodeControllerOnly) {
  auto server = Start({});
  ASSERT_FALSE(address_.empty()) << server->Stderr();
  CallResult ok = CallLps(address_, ca_.cert_pem(), kAksNodeControllerComponent);
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.response.config(), R"({"hotfixes":{"202604.01":"202604.01.3"}})");
  EXPECT_EQ(CallLps(address_, ca_.cert_pem(), "localDNS").status.error_code(), grpc::NOT_FOUND);

  ExitStatus status = server->Stop();
  EXPECT_TRUE(status.success()) << status.ToString() << server->Stderr();  // clean SIGTERM exit
  EXPECT_THAT(server->Stderr(),
              HasSubstr("call component=aksNodeController authorization_bytes=22"));
  EXPECT_THAT(server->Stderr(), ::testing::Not(HasSubstr("attested-signature-abc")));
}

TEST_F(LpsDevServerTest, AnswersTheConfiguredStatus) {
  auto server = Start({"--status", "UNAVAILABLE", "--status-message", "maintenance"});
  ASSERT_FALSE(address_.empty()) << server->Stderr();
  CallResult r = CallLps(address_, ca_.cert_pem(), kAksNodeControllerComponent);
  EXPECT_EQ(r.status.error_code(), grpc::UNAVAILABLE);
  EXPECT_EQ(r.status.error_message(), "maintenance");
}

TEST_F(LpsDevServerTest, RejectsMissingCertificate) {
  SpawnOptions spawn;
  spawn.argv = {BinDir() + "/lps-dev-server", "--listen", "127.0.0.1:0"};
  RunResult r = RunProcess(spawn, kGenerous);
  EXPECT_FALSE(r.status.success());
  EXPECT_THAT(r.stderr_text + r.stdout_text, HasSubstr("--tls-cert"));
}

}  // namespace
}  // namespace hotfix::testsupport
