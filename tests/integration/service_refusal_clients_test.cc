// A refused caller reads why, whichever gRPC it is built on. A refusal of the caller's identity
// ends its connection (GrpcReply::close_connection): the answer goes out first, then the
// GOAWAY. RFC 9113 allows either order, but Python's h2 (the HTTP/2 layer under grpclib)
// closes its connection on a GOAWAY and raises a ProtocolError on an answer behind it, so
// that caller would never learn it was refused (issue 31). Four independent clients, each
// asked for the same two refusals and one answered call:
//   - libgrpc++ (Debian's libgrpc++-dev), in process;
//   - grpc-go (Debian's golang-google-grpc-dev), bench/grpcgo-server's benchclient;
//   - grpc-js (@grpc/grpc-js, pinned with integrity hashes), clients/grpcjs/call.js;
//   - Python's h2 (Debian's python3-h2), clients/h2_grpc_call.py, which also reports the
//     order of what it read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "service_fixture.h"

namespace hotfix::testsupport {
namespace {

using ::testing::HasSubstr;

constexpr char kServedMap[] = R"({"hotfixes":{"202604.01":"202604.01.3"}})";
constexpr char kForeignSubscription[] = "99999999-0000-0000-0000-000000000000";

std::filesystem::path SourceDir() {
  const char* env = std::getenv("LP_SOURCE_DIR");
  return env != nullptr ? env : LP_DEFAULT_SOURCE_DIR;
}
std::filesystem::path BuildDir() { return std::filesystem::path(BinDir()).parent_path(); }

// The status a client read, as one shape for all four.
struct ClientResult {
  int code = -1;
  std::string message;
  nlohmann::json raw;  // the client's own report
  std::string output;  // everything it printed, for failure messages
};

class ServiceRefusalClientsTest : public ::testing::Test {
 protected:
  ServiceRefusalClientsTest() {
    files_.WriteComponent(kAksNodeControllerComponent, kServedMap);
    // The default document's subscription is allowed; kForeignSubscription is refused.
    lps_ = std::make_unique<ServiceProcess>(
        files_.Args({"--allowed-subscriptions", AttestedDocumentFields{}.subscription_id}));
  }

  std::string TokenFile(const std::string& token) {
    return files_.dir().Write("token-" + std::to_string(++tokens_), token).string();
  }
  std::string ForeignToken() {
    AttestedDocumentFields other;
    other.subscription_id = kForeignSubscription;
    return files_.Token(other);
  }

  static ClientResult FromJsonLine(const RunResult& r, const char* code_key,
                                   const char* message_key) {
    ClientResult out;
    out.output = r.stdout_text + r.stderr_text;
    const size_t brace = r.stdout_text.find('{');
    if (brace == std::string::npos) return out;
    out.raw = nlohmann::json::parse(r.stdout_text.substr(brace), nullptr, false);
    if (out.raw.is_discarded()) return out;
    out.code = out.raw.value(code_key, -1);
    out.message = out.raw.value(message_key, "");
    return out;
  }

  ClientResult CallWithGrpcpp(const std::string& token) {
    GrpcReply r = CallGetComponentConfig(lps_->Channel(files_, ++tokens_),
                                         kAksNodeControllerComponent, token);
    return {static_cast<int>(r.code()), r.status.error_message(), {}, r.status.error_message()};
  }

  ClientResult CallWithGrpcGo(const std::string& token) {
    const std::string client = (BuildDir() / "grpcgo" / "benchclient").string();
    EXPECT_TRUE(std::filesystem::exists(client)) << client << " was not built";
    SpawnOptions spawn;
    spawn.argv = {client,         "call",           "--addr", LoopbackAddress(lps_->port()),
                  "--token-file", TokenFile(token), "--n",    "1"};
    RunResult r = RunProcess(std::move(spawn), std::chrono::seconds(60));
    // "ok <Code> <message or config>": grpc-go's code names, mapped back to numbers here.
    ClientResult out;
    out.output = r.stdout_text + r.stderr_text;
    static const std::map<std::string, int> kCodes = {
        {"OK", 0}, {"Unauthenticated", 16}, {"PermissionDenied", 7}};
    std::istringstream line(r.stdout_text);
    std::string ok, code;
    line >> ok >> code;
    if (ok == "ok" && kCodes.count(code) != 0) out.code = kCodes.at(code);
    out.message.assign(std::istreambuf_iterator<char>(line), {});  // the rest, lines and all
    return out;
  }

  // `program script` with the flags both script clients take, run to its end.
  RunResult RunScriptClient(const std::string& program, const std::string& script,
                            const std::string& token) {
    SpawnOptions spawn;
    spawn.argv = {program,
                  script,
                  "--addr",
                  LoopbackAddress(lps_->port()),
                  "--ca",
                  WritePemFile(files_.dir().path(), "ca-" + std::to_string(++tokens_) + ".pem",
                               files_.tls_ca().cert_pem())
                      .string(),
                  "--server-name",
                  kApiserverFqdn,
                  "--token-file",
                  TokenFile(token)};
    return RunProcess(std::move(spawn), std::chrono::seconds(60));
  }

  ClientResult CallWithGrpcJs(const std::string& token) {
    const std::filesystem::path dir = BuildDir() / "grpcjs";
    EXPECT_TRUE(std::filesystem::exists(dir / "node_modules" / "@grpc" / "grpc-js"))
        << dir << " has no grpc-js: the grpcjs_client target runs `npm ci` there";
    return FromJsonLine(RunScriptClient("node", (dir / "call.js").string(), token), "code",
                        "details");
  }

  ClientResult CallWithPythonH2(const std::string& token) {
    // Debian's interpreter, where python3-h2 is installed (not a python3 earlier on PATH).
    return FromJsonLine(
        RunScriptClient("/usr/bin/python3",
                        (SourceDir() / "tests/integration/clients/h2_grpc_call.py").string(),
                        token),
        "status", "message");
  }

  // Every client: refused for a malformed document, refused for a foreign subscription, and
  // answered for the node's own document.
  void ExpectEachOutcome(const std::function<ClientResult(const std::string&)>& call) {
    ClientResult malformed = call("bm90IGEgZG9jdW1lbnQ=");
    EXPECT_EQ(malformed.code, 16) << malformed.output;  // UNAUTHENTICATED
    EXPECT_THAT(malformed.message, HasSubstr("node identity not accepted (malformed)"))
        << malformed.output;
    ClientResult foreign = call(ForeignToken());
    EXPECT_EQ(foreign.code, 7) << foreign.output;  // PERMISSION_DENIED
    EXPECT_THAT(foreign.message,
                HasSubstr(std::string("subscription ") + kForeignSubscription + " is not allowed"))
        << foreign.output;
    ClientResult served = call(files_.Token());
    EXPECT_EQ(served.code, 0) << served.output;
  }

  ServiceFiles files_;
  std::unique_ptr<ServiceProcess> lps_;
  int tokens_ = 0;
};

TEST_F(ServiceRefusalClientsTest, LibgrpcppReadsEachRefusal) {
  ExpectEachOutcome([this](const std::string& t) { return CallWithGrpcpp(t); });
}

TEST_F(ServiceRefusalClientsTest, GrpcGoReadsEachRefusal) {
  ExpectEachOutcome([this](const std::string& t) { return CallWithGrpcGo(t); });
}

TEST_F(ServiceRefusalClientsTest, GrpcJsReadsEachRefusal) {
  ExpectEachOutcome([this](const std::string& t) { return CallWithGrpcJs(t); });
}

TEST_F(ServiceRefusalClientsTest, PythonH2ReadsEachRefusal) {
  ExpectEachOutcome([this](const std::string& t) { return CallWithPythonH2(t); });
}

// What h2 saw, in order: the answer whole (its headers, the stream's end), then the GOAWAY
// naming that stream the last, then the end of the connection; no ProtocolError.
TEST_F(ServiceRefusalClientsTest, PythonH2ReadsTheAnswerBeforeTheGoaway) {
  ClientResult r = CallWithPythonH2("bm90IGEgZG9jdW1lbnQ=");
  ASSERT_TRUE(r.raw.is_object()) << r.output;
  EXPECT_FALSE(r.raw.contains("error")) << r.output;
  EXPECT_EQ(r.raw.value("alpn", ""), "h2") << r.output;
  EXPECT_EQ(r.raw.value("goaway_last_stream", -1), 1) << r.output;
  std::vector<std::string> events = r.raw.value("events", std::vector<std::string>{});
  auto at = [&](const std::string& name) {
    return std::find(events.begin(), events.end(), name) - events.begin();
  };
  ASSERT_LT(at("ResponseReceived"), static_cast<ptrdiff_t>(events.size())) << r.output;
  ASSERT_LT(at("ConnectionTerminated"), static_cast<ptrdiff_t>(events.size())) << r.output;
  EXPECT_LT(at("ResponseReceived"), at("ConnectionTerminated")) << r.output;
  EXPECT_LT(at("StreamEnded"), at("ConnectionTerminated")) << r.output;
}

}  // namespace
}  // namespace hotfix::testsupport
