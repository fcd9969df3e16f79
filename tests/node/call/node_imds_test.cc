// The IMDS client against a real HTTP/1.1 server on loopback serving IMDS's contract.
#include "node/call/imds.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "loopback_http_server.h"
#include "wire/memory_stream.h"

namespace hotfix::node {
namespace {

using ::testing::HasSubstr;

TEST(ParseAttestedDocumentTest, ReturnsTheSignatureVerbatim) {
  auto s = ParseAttestedDocument(R"({"encoding":"pkcs7","signature":"MIIabc+/="})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->reveal(), "MIIabc+/=");
}

TEST(ParseAttestedDocumentTest, MatchesTheKeyCaseInsensitivelyLikeGo) {
  auto s = ParseAttestedDocument(R"({"Signature":"abc"})");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->reveal(), "abc");
}

TEST(ParseAttestedDocumentTest, RejectsEmptyMissingNullAndWrongTypes) {
  for (const char* body :
       {R"({"signature":""})", R"({"encoding":"pkcs7"})", R"({"signature":null})"}) {
    auto s = ParseAttestedDocument(body);
    ASSERT_FALSE(s.ok()) << body;
    EXPECT_EQ(s.status().message(), "imds attested document had empty signature");
  }
  EXPECT_THAT(ParseAttestedDocument(R"({"signature":42})").status().message(),
              HasSubstr("not a string"));
  EXPECT_THAT(ParseAttestedDocument("<html>").status().message(), HasSubstr("invalid JSON"));
  EXPECT_THAT(ParseAttestedDocument("[1]").status().message(), HasSubstr("not a JSON object"));
}

// An IMDS stand-in whose behaviour each test scripts.
struct ImdsServer : testsupport::LoopbackHttpServer {
  ImdsServer() : LoopbackHttpServer("/metadata/attested/document") {}
  std::string Url() const { return LoopbackHttpServer::Url("?api-version=2025-04-07"); }
};

void ServeSignature(const httplib::Request&, httplib::Response& res) {
  res.set_content(R"({"encoding":"pkcs7","signature":"c2lnbmVk"})", "application/json");
}

Deadline Generous() { return Deadline::After(std::chrono::seconds(10)); }

TEST(ImdsTokenSourceTest, FetchesTheSignatureWithTheMetadataHeader) {
  ImdsServer imds;
  imds.handler = ServeSignature;
  ImdsTokenSource source(imds.Url(), NullLogger());
  auto token = source.Fetch(Generous());
  ASSERT_TRUE(token.ok()) << token.status().message();
  EXPECT_EQ(token->reveal(), "c2lnbmVk");
  EXPECT_EQ(imds.last.get_header_value("Metadata"), "true");
  EXPECT_EQ(imds.requests, 1);
}

TEST(ImdsTokenSourceTest, RetriesOnceAfterAServerError) {
  ImdsServer imds;
  imds.handler = [&](const httplib::Request& req, httplib::Response& res) {
    if (imds.requests == 1) {
      res.status = 500;
      return;
    }
    ServeSignature(req, res);
  };
  ImdsTokenSource source(imds.Url(), NullLogger());
  auto token = source.Fetch(Generous());
  ASSERT_TRUE(token.ok()) << token.status().message();
  EXPECT_EQ(imds.requests, 2);
}

TEST(ImdsTokenSourceTest, GivesUpAfterTwoAttempts) {
  ImdsServer imds;
  imds.handler = [](const httplib::Request&, httplib::Response& res) { res.status = 503; };
  ImdsTokenSource source(imds.Url(), NullLogger());
  auto token = source.Fetch(Generous());
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().message(), "imds attested token: imds returned status 503");
  EXPECT_EQ(imds.requests, 2);
}

TEST(ImdsTokenSourceTest, DoesNotFollowRedirects) {
  ImdsServer imds;
  imds.handler = [](const httplib::Request&, httplib::Response& res) {
    res.set_redirect("http://127.0.0.1:1/elsewhere");
  };
  ImdsTokenSource source(imds.Url(), NullLogger());
  auto token = source.FetchOnce(Generous());
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().message(), "imds returned status 302");
}

TEST(ImdsTokenSourceTest, CapsTheBodyAtOneMebibyte) {
  ImdsServer imds;
  imds.handler = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"signature":")" + std::string(1 << 20, 'A') + R"("})", "application/json");
  };
  ImdsTokenSource source(imds.Url(), NullLogger());
  auto token = source.FetchOnce(Generous());
  ASSERT_FALSE(token.ok());
  EXPECT_THAT(token.status().message(), HasSubstr("exceeds 1048576 bytes"));
}

TEST(ImdsTokenSourceTest, ASlowAnswerTimesOutWithinTheAttemptBudget) {
  ImdsServer imds;
  imds.handler = [](const httplib::Request& req, httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));
    ServeSignature(req, res);
  };
  ImdsTokenSource source(imds.Url(), NullLogger());
  auto start = std::chrono::steady_clock::now();
  auto token = source.FetchOnce(Generous());
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().code(), Status::Code::kDeadlineExceeded);
  EXPECT_LT(took, std::chrono::milliseconds(2900));  // generous: the budget is 1-2 s
}

TEST(ImdsTokenSourceTest, ConnectionRefusedIsAnError) {
  ImdsTokenSource source("http://127.0.0.1:1/metadata/attested/document", NullLogger());
  auto token = source.Fetch(Generous());
  ASSERT_FALSE(token.ok());
  EXPECT_THAT(token.status().message(), HasSubstr("imds attested token: GET http://127.0.0.1:1"));
}

TEST(ImdsTokenSourceTest, IgnoresProxyVariables) {
  ImdsServer imds;
  imds.handler = ServeSignature;
  // A proxy that refuses connections: if it were used, the fetch would fail.
  setenv("http_proxy", "http://127.0.0.1:1", 1);
  setenv("HTTP_PROXY", "http://127.0.0.1:1", 1);
  setenv("ALL_PROXY", "http://127.0.0.1:1", 1);
  ImdsTokenSource source(imds.Url(), NullLogger());
  auto token = source.Fetch(Generous());
  unsetenv("http_proxy");
  unsetenv("HTTP_PROXY");
  unsetenv("ALL_PROXY");
  ASSERT_TRUE(token.ok()) << token.status().message();
}

TEST(ImdsTokenSourceTest, CancelStopsARetryLoop) {
  ImdsServer imds;
  imds.handler = [](const httplib::Request&, httplib::Response& res) { res.status = 500; };
  ImdsTokenSource source(imds.Url(), NullLogger());
  source.Cancel();
  auto token = source.Fetch(Generous());
  ASSERT_FALSE(token.ok());
  EXPECT_LE(imds.requests, 1);
}

// A raw HTTP/1.1 peer that answers one request with scripted pieces, each sent only once the
// client has read the one before, so the client meets every split as scripted: responses
// split at awkward places, without Content-Length, chunked.
class RawPeer {
 public:
  explicit RawPeer(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 1), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~RawPeer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string Url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/metadata/attested/document";
  }
  std::string request;

 private:
  void Serve() {
    sockaddr_in client{};
    socklen_t len = sizeof client;
    int conn = ::accept(fd_, reinterpret_cast<sockaddr*>(&client), &len);
    if (conn < 0) return;
    char buf[4096];
    ssize_t n = ::recv(conn, buf, sizeof buf, 0);
    if (n > 0) request.assign(buf, static_cast<size_t>(n));
    for (const auto& piece : pieces_) {
      ::send(conn, piece.data(), piece.size(), MSG_NOSIGNAL);
      WaitUntilRead(ntohs(client.sin_port));
    }
    ::close(conn);
  }

  // Until the client's socket (local port `client_port`, remote ours) holds no unread byte:
  // its rx_queue in /proc/net/tcp (Linux's per-socket table, in hex). A client that stops
  // reading (a refused response) is left after 5 s.
  void WaitUntilRead(uint16_t client_port) const {
    char want[32];
    std::snprintf(want, sizeof want, ":%04X 0100007F:%04X", client_port, port_);
    for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
         std::chrono::steady_clock::now() < end;) {
      std::ifstream table("/proc/net/tcp");
      bool unread = false;
      for (std::string line; std::getline(table, line);) {
        const size_t at = line.find(want);
        if (at == std::string::npos) continue;
        // "... rem_address st tx_queue:rx_queue ...": rx_queue is 8 hex digits after ':'.
        const size_t colon = line.find(':', at + std::strlen(want) + 4);
        unread = colon != std::string::npos &&
                 std::strtoul(line.substr(colon + 1, 8).c_str(), nullptr, 16) != 0;
      }
      if (!unread) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::vector<std::string> pieces_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

TEST(ImdsTokenSourceTest, ParsesAResponseSplitInsideItsHeaders) {
  RawPeer peer({"HTTP/1.1 200 OK\r\nContent-Ty", "pe: application/json\r\nContent-Le",
                "ngth: 18\r\n\r\n{\"signature\":", "\"ab\"}"});
  ImdsTokenSource source(peer.Url(), NullLogger());
  auto token = source.FetchOnce(Generous());
  ASSERT_TRUE(token.ok()) << token.status().message();
  EXPECT_EQ(token->reveal(), "ab");
  EXPECT_THAT(peer.request, HasSubstr("GET /metadata/attested/document HTTP/1.1\r\n"));
  EXPECT_THAT(peer.request, HasSubstr("Metadata: true\r\n"));
}

TEST(ImdsTokenSourceTest, ReadsABodyDelimitedByClose) {
  RawPeer peer({"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", "{\"signature\":\"cd\"}"});
  ImdsTokenSource source(peer.Url(), NullLogger());
  auto token = source.FetchOnce(Generous());
  ASSERT_TRUE(token.ok()) << token.status().message();
  EXPECT_EQ(token->reveal(), "cd");
}

TEST(ImdsTokenSourceTest, ReadsAChunkedBody) {
  RawPeer peer({"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "9\r\n{\"signatu\r\n",
                "9\r\nre\":\"ef\"}\r\n0\r\n\r\n"});
  ImdsTokenSource source(peer.Url(), NullLogger());
  auto token = source.FetchOnce(Generous());
  ASSERT_TRUE(token.ok()) << token.status().message();
  EXPECT_EQ(token->reveal(), "ef");
}

TEST(ImdsTokenSourceTest, AChunkedBodyOverTheCapIsRefused) {
  std::string chunk(64 * 1024, 'A');
  std::vector<std::string> pieces = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"};
  for (int i = 0; i < 17; ++i) pieces.push_back("10000\r\n" + chunk + "\r\n");
  RawPeer peer(pieces);
  ImdsTokenSource source(peer.Url(), NullLogger());
  auto token = source.FetchOnce(Generous());
  ASSERT_FALSE(token.ok());
  EXPECT_THAT(token.status().message(), HasSubstr("exceeds 1048576 bytes"));
}

TEST(ImdsTokenSourceTest, AMalformedResponseIsAnError) {
  RawPeer peer({"SSH-2.0-OpenSSH_9.2\r\n"});
  ImdsTokenSource source(peer.Url(), NullLogger());
  auto token = source.FetchOnce(Generous());
  ASSERT_FALSE(token.ok());
  EXPECT_THAT(token.status().message(), HasSubstr("malformed HTTP response"));
}

TEST(ParseImdsUrlTest, RejectsWhatIsNotAPlainHttpUrl) {
  for (const char* url :
       {"https://169.254.169.254/x", "http://user@host/x", "http:///x", "http://host:0/x",
        "http://host:99999/x", "http://[::1/x", "http://host/x#frag"}) {
    ImdsTokenSource source(url, NullLogger());
    auto token = source.FetchOnce(Generous());
    ASSERT_FALSE(token.ok()) << url;
    EXPECT_EQ(token.status().code(), Status::Code::kInvalidArgument) << url;
    EXPECT_THAT(token.status().message(), HasSubstr("imds url")) << url;
  }
}

// Found by the imds_response fuzz target: a peer that closes before sending a byte made the
// reader call Beast's put_eof on an untouched parser, whose assertion aborted the process (in
// any build with asserts, such as the test build) instead of failing the attempt.
TEST(ImdsTokenSourceTest, APeerThatClosesAtOnceIsAnErrorNotAnAbort) {
  RawPeer peer({});
  ImdsTokenSource source(peer.Url(), NullLogger());
  auto token = source.FetchOnce(Generous());
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(token.status().message(), HasSubstr("connection closed before any response"));
}

TEST(ReadAttestedResponseTest, ReadsFromAnyByteStream) {
  const std::atomic<bool> not_cancelled{false};
  wire::ScriptedByteStream ok("HTTP/1.1 200 OK\r\nContent-Length: 18\r\n\r\n{\"signature\":\"ab\"}",
                              /*max_chunk=*/3);
  auto token = ReadAttestedResponse(ok, Generous(), Generous(), not_cancelled, "GET x");
  ASSERT_TRUE(token.ok()) << token.status().message();
  EXPECT_EQ(token->reveal(), "ab");

  wire::ScriptedByteStream empty("");
  token = ReadAttestedResponse(empty, Generous(), Generous(), not_cancelled, "GET x");
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().message(), "GET x: connection closed before any response");
}

// IMDS's caps, deadlines and cancellation, in IMDS's words. How the reader holds to them
// whatever the reads (chunk framing, Beast 1.74's assertions) is wire_http_client_test's.
TEST(ReadAttestedResponseTest, CapsDeadlinesAndCancellationSpeakImds) {
  const std::atomic<bool> not_cancelled{false};
  auto read = [&](const std::string& bytes) {
    wire::ScriptedByteStream stream(bytes, /*max_chunk=*/4096);
    return ReadAttestedResponse(stream, Generous(), Generous(), not_cancelled, "GET x").status();
  };
  const std::string chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(read("HTTP/1.1 200 OK\r\nContent-Length: 1048577\r\n\r\n").message(),
            "imds response body exceeds 1048576 bytes");
  EXPECT_EQ(read("HTTP/1.1 200 OK\r\nX-A: " + std::string(16384, 'a') + "\r\n\r\n").message(),
            "imds response headers exceed 16384 bytes");
  EXPECT_EQ(read(chunked + "12;x=" + std::string(16384, 'a') + "\r\n").message(),
            "imds response chunk line or trailers exceed 16384 bytes");

  {
    auto [ours, peer] = wire::NewMemoryPipe();
    auto token = ReadAttestedResponse(*ours, Deadline::After(std::chrono::milliseconds(20)),
                                      Generous(), not_cancelled, "GET x");
    EXPECT_EQ(token.status().code(), Status::Code::kDeadlineExceeded);
    EXPECT_EQ(token.status().message(), "GET x: no response headers within 1000 ms");
  }
  {
    auto [ours, peer] = wire::NewMemoryPipe();
    ASSERT_TRUE(peer->WriteAll("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{", Generous()).ok());
    auto token = ReadAttestedResponse(
        *ours, Generous(), Deadline::After(std::chrono::milliseconds(100)), not_cancelled, "GET x");
    EXPECT_EQ(token.status().code(), Status::Code::kDeadlineExceeded);
    EXPECT_EQ(token.status().message(), "GET x: imds response body timed out");
  }
  {
    const std::atomic<bool> cancelled{true};
    auto [ours, peer] = wire::NewMemoryPipe();
    auto token = ReadAttestedResponse(*ours, Generous(), Generous(), cancelled, "GET x");
    EXPECT_EQ(token.status().code(), Status::Code::kUnavailable);
    EXPECT_EQ(token.status().message(), "GET x: imds request cancelled");
  }
}

}  // namespace
}  // namespace hotfix::node
