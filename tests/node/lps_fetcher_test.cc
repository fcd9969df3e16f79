// The fetcher's order of work: everything local, the CA included, is checked before IMDS is
// asked (docs/CHECK-HOTFIX.md), and with a usable CA the IMDS request overlaps the dial.
#include "node/lps_fetcher.h"

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/base64.h"
#include "test_ca_pem.h"

namespace hotfix::node {
namespace {

using ::testing::HasSubstr;

// An IMDS that counts the requests it gets and answers none of them with a token.
class CountingTokens : public AttestedTokenSource {
 public:
  StatusOr<Secret> Fetch(Deadline) override {
    ++fetches;
    return Status::Unavailable("imds stand-in: no token");
  }
  std::atomic<int> fetches{0};
};

// A node config naming the apiserver and carrying `ca_pem`, in a folder removed afterwards.
class NodeConfig {
 public:
  explicit NodeConfig(const std::string& ca_pem) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lps-fetcher-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    path_ = dir_ + "/aks-node-controller-config.json";
    nlohmann::json config = {{"api_server_config", {{"api_server_name", "api.example.com"}}},
                             {"kubernetes_ca_cert", EncodeStdBase64(ca_pem)}};
    std::ofstream(path_) << config.dump();
  }
  ~NodeConfig() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

// A loopback port nothing listens on (discard, not served on a test machine): the dial is
// refused at once.
constexpr uint16_t kClosedPort = 9;

FetchResult FetchWith(const NodeConfig& config, CountingTokens& tokens) {
  GrpcLpsFetcherOptions options;
  options.node_config_path = config.path();
  options.nbc_cmd_path = config.path() + ".absent";
  options.connect_to = "127.0.0.1:" + std::to_string(kClosedPort);
  options.timeout_ms = 2000;
  ::unsetenv("HTTPS_PROXY");
  ::unsetenv("https_proxy");
  return NewGrpcLpsFetcher(options, tokens, NullLogger())->Fetch();
}

TEST(GrpcLpsFetcherTest, AnUnparseableCaStopsTheFetchBeforeImdsIsAsked) {
  for (const std::string garbage :
       {"this is not a certificate",
        "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}) {
    NodeConfig config(garbage);
    CountingTokens tokens;
    FetchResult result = FetchWith(config, tokens);
    EXPECT_TRUE(result.local_error);
    EXPECT_EQ(result.ErrorText(), "dialing LPS gRPC: failed to parse cluster CA PEM");
    EXPECT_EQ(tokens.fetches, 0) << "IMDS was asked for a node that cannot connect";
  }
}

TEST(GrpcLpsFetcherTest, AUsableCaAsksImdsWhileItDials) {
  NodeConfig config(unittest::kCaOne);
  CountingTokens tokens;
  FetchResult result = FetchWith(config, tokens);
  EXPECT_TRUE(result.local_error);
  EXPECT_EQ(tokens.fetches, 1);
  // Whichever failed first is reported: the refused dial or the stand-in's missing token.
  EXPECT_THAT(result.ErrorText(), ::testing::AnyOf(HasSubstr("dialing LPS gRPC"),
                                                   HasSubstr("imds stand-in: no token")));
}

}  // namespace
}  // namespace hotfix::node
