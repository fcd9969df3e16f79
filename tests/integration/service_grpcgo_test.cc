// The service called by grpc-go, the gRPC the AgentBaker reference's client is built on
// (Debian's golang-google-grpc-dev): `benchclient call` from bench/grpcgo-server, built
// offline from Debian's Go packages by bench/grpcgo-server/build.sh into
// $LP_BIN_DIR/../grpcgo. It offers ALPN ["aks-live-patching","h2"] like the node, reads the
// status from the trailers and prints "ok <code> <config>" per call. libgrpc++ is the other
// client of every other service test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "service_fixture.h"

namespace hotfix::testsupport {
namespace {

using ::testing::HasSubstr;

constexpr char kServedMap[] = R"({"hotfixes":{"202604.01":"202604.01.3"}})";

std::string BenchClient() {
  return (std::filesystem::path(BinDir()).parent_path() / "grpcgo" / "benchclient").string();
}

class ServiceGrpcGoTest : public ::testing::Test {
 protected:
  ServiceGrpcGoTest() {
    files_.WriteComponent(kAksNodeControllerComponent, kServedMap);
    lps_ = std::make_unique<ServiceProcess>(files_.Args());
  }

  RunResult Call(const std::string& token, int n) {
    std::string token_file = files_.dir().Write("token-" + std::to_string(++calls_), token);
    SpawnOptions spawn;
    spawn.argv = {BenchClient(),  "call",     "--addr", LoopbackAddress(lps_->port()),
                  "--token-file", token_file, "--n",    std::to_string(n)};
    return RunProcess(std::move(spawn), std::chrono::seconds(60));
  }

  ServiceFiles files_;
  std::unique_ptr<ServiceProcess> lps_;
  int calls_ = 0;
};

TEST_F(ServiceGrpcGoTest, AGrpcGoClientIsServedTheConfigOnOneConnectionManyTimes) {
  ASSERT_TRUE(std::filesystem::exists(BenchClient()))
      << BenchClient() << " was not built: bench/grpcgo-server/build.sh needs Debian's Go "
      << "packages (scripts/install-deps.sh installs them)";
  RunResult r = Call(files_.Token(), 5);
  EXPECT_TRUE(r.status.success()) << r.stdout_text << r.stderr_text;
  std::string expected = std::string("ok OK ") + kServedMap + "\n";
  std::string all;
  for (int i = 0; i < 5; ++i) all += expected;
  EXPECT_EQ(r.stdout_text, all) << r.stderr_text;
}

TEST_F(ServiceGrpcGoTest, AGrpcGoClientWithAForeignDocumentIsUnauthenticatedWithTheReason) {
  ASSERT_TRUE(std::filesystem::exists(BenchClient())) << BenchClient() << " was not built";
  RunResult r = Call("bm90IGEgZG9jdW1lbnQ=", 1);
  EXPECT_FALSE(r.status.success());
  EXPECT_THAT(r.stdout_text, HasSubstr("ok Unauthenticated"));
  EXPECT_THAT(r.stdout_text, HasSubstr("node identity not accepted (malformed)"));
}

}  // namespace
}  // namespace hotfix::testsupport
