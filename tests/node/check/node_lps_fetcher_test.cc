// The fetcher's order of work: everything local, the CA included, is checked before IMDS is
// asked (docs/CHECK-HOTFIX.md), and with a usable CA the IMDS request overlaps the dial.
#include "node/check/lps_fetcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
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

FetchResult FetchWith(const NodeConfig& config, AttestedTokenSource& tokens,
                      uint16_t port = kClosedPort) {
  GrpcLpsFetcherOptions options;
  options.node_config_path = config.path();
  options.nbc_cmd_path = config.path() + ".absent";
  options.connect_to = "127.0.0.1:" + std::to_string(port);
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

// A listening socket that never accepts: a dial to it is a connection waiting in its backlog
// (the TLS handshake then waits for an answer that never comes).
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "listening on loopback: " << std::strerror(errno);
    }
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { ::close(fd_); }
  uint16_t port() const { return port_; }
  // Whether a connection arrives within `timeout`.
  bool Dialed(std::chrono::milliseconds timeout) const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// An IMDS that answers only once the service was dialed (or after a second), and says which.
class TokensAfterTheDial : public AttestedTokenSource {
 public:
  explicit TokensAfterTheDial(const SilentListener& listener) : listener_(listener) {}
  StatusOr<Secret> Fetch(Deadline) override {
    dialed_while_asked = listener_.Dialed(std::chrono::seconds(1));
    return Status::Unavailable("imds stand-in: no token");
  }
  std::atomic<bool> dialed_while_asked{false};

 private:
  const SilentListener& listener_;
};

// Sequential code (IMDS, then the dial) would keep this IMDS waiting for a dial that comes
// only after it answers.
TEST(GrpcLpsFetcherTest, AUsableCaAsksImdsWhileItDials) {
  NodeConfig config(unittest::kCaOne);
  SilentListener service;
  TokensAfterTheDial tokens(service);
  FetchResult result = FetchWith(config, tokens, service.port());
  EXPECT_TRUE(tokens.dialed_while_asked.load()) << "IMDS was asked before the dial began";
  EXPECT_TRUE(result.local_error);
  EXPECT_THAT(result.ErrorText(), HasSubstr("imds stand-in: no token"));
}

}  // namespace
}  // namespace hotfix::node
