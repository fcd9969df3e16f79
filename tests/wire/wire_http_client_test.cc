// The plain-HTTP/1.1 GET client: URLs, the request bytes, the response reader on in-memory
// streams (caps, read splits, deadlines, cancellation), and HttpGet against a real HTTP/1.1
// server (cpp-httplib) and a raw peer on loopback.
#include "wire/http_client.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "loopback_http_server.h"
#include "wire/memory_stream.h"

namespace hotfix::wire {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;

Deadline Generous() { return Deadline::After(std::chrono::seconds(10)); }

// Small caps, so that tests reach them with small inputs.
HttpResponseOptions SmallCaps() {
  HttpResponseOptions options;
  options.label = "test";
  options.max_header_bytes = 256;
  options.max_body_bytes = 1000;
  options.max_chunk_framing_bytes = 64;
  return options;
}

StatusOr<HttpResponse> ReadScripted(const std::string& bytes, size_t max_chunk,
                                    const HttpResponseOptions& options = SmallCaps()) {
  ScriptedByteStream stream(bytes, max_chunk);
  return ReadHttpResponse(stream, options, Generous(), Generous());
}

constexpr size_t kReadSizes[] = {1, 2, 3, 7, 64, 65, 4096, SIZE_MAX};

const std::string kChunkedHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

// ---- URLs ----

TEST(ParseHttpUrlTest, SplitsHostPortAndTarget) {
  struct Case {
    const char* url;
    const char* host;
    uint16_t port;
    const char* target;
  };
  for (const Case& c : {
           Case{"http://169.254.169.254/metadata/attested/document?api-version=2025-04-07",
                "169.254.169.254", 80, "/metadata/attested/document?api-version=2025-04-07"},
           Case{"http://prometheus.monitoring:9090/api/v1/query?query=up%7Bjob%3D%22x%22%7D",
                "prometheus.monitoring", 9090, "/api/v1/query?query=up%7Bjob%3D%22x%22%7D"},
           Case{"http://host", "host", 80, "/"},
           Case{"http://host:/x", "host", 80, "/x"},  // an empty port, as Go's url.Parse
           Case{"http://host:8080?x=1", "host", 8080, "/?x=1"},
           Case{"http://[::1]:9090/metrics", "::1", 9090, "/metrics"},
           Case{"http://[fe80::1]/", "fe80::1", 80, "/"},
       }) {
    auto url = ParseHttpUrl(c.url, "test url");
    ASSERT_TRUE(url.ok()) << c.url << ": " << url.status().message();
    EXPECT_EQ(url->host, c.host) << c.url;
    EXPECT_EQ(url->port, c.port) << c.url;
    EXPECT_EQ(url->target, c.target) << c.url;
  }
}

TEST(ParseHttpUrlTest, RefusesWhatIsNotAPlainHttpUrlNamingWhatItIsFor) {
  struct Case {
    const char* url;
    const char* why;
  };
  for (const Case& c : {
           Case{"https://127.0.0.1/x", "only http:// is supported"},
           Case{"HTTP://host/x", "only http:// is supported"},
           Case{"http://user@host/x", "userinfo is not allowed"},
           Case{"http:///x", "no host"},
           Case{"http://host:0/x", "bad port"},
           Case{"http://host:99999/x", "bad port"},
           Case{"http://[::1/x", "unterminated IPv6 address"},
           Case{"http://[::1]x/", "junk after the IPv6 address"},
           Case{"http://host/x#frag", "fragments are not allowed"},
           Case{"http://host/a b", "spaces and control characters must be percent-encoded"},
           Case{"http://host/x\r\nX-Injected: 1",
                "spaces and control characters must be percent-encoded"},
       }) {
    auto url = ParseHttpUrl(c.url, "test url");
    ASSERT_FALSE(url.ok()) << c.url;
    EXPECT_EQ(url.status().code(), Status::Code::kInvalidArgument) << c.url;
    EXPECT_EQ(url.status().message(), std::string("test url ") + c.url + ": " + c.why);
  }
}

// ---- The request ----

TEST(BuildGetRequestTest, WritesHostTheExtraHeadersAcceptUserAgentAndClose) {
  HttpRequestOptions options;
  options.user_agent = "hotfix-agent";
  options.headers = {{"Metadata", "true"}, {"X-Scope", "a b\tc"}};
  auto request = BuildGetRequest({"169.254.169.254", 80, "/metadata?api-version=1"}, options);
  ASSERT_TRUE(request.ok()) << request.status().message();
  EXPECT_EQ(*request,
            "GET /metadata?api-version=1 HTTP/1.1\r\n"
            "Host: 169.254.169.254\r\n"
            "Metadata: true\r\n"
            "X-Scope: a b\tc\r\n"
            "Accept: application/json\r\n"
            "User-Agent: hotfix-agent\r\n"
            "Connection: close\r\n\r\n");

  // A port other than 80 is in Host, an IPv6 host in brackets; empty values are left out.
  options = {};
  options.accept = "";
  request = BuildGetRequest({"::1", 9090, "/"}, options);
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(*request, "GET / HTTP/1.1\r\nHost: [::1]:9090\r\nConnection: close\r\n\r\n");
}

TEST(BuildGetRequestTest, RefusesHeadersThatWouldSplitTheRequest) {
  const HttpUrl url{"host", 80, "/"};
  HttpRequestOptions options;
  options.headers = {{"Authorization", "Bearer secret\r\nX-Injected: 1"}};
  auto request = BuildGetRequest(url, options);
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(request.status().code(), Status::Code::kInvalidArgument);
  // The value may be a credential: never echoed.
  EXPECT_EQ(request.status().message(),
            "request header Authorization: value holds a control "
            "character");

  options.headers = {{"Bad Name", "x"}};
  EXPECT_EQ(BuildGetRequest(url, options).status().message(), "request header name is not a token");
  options.headers = {};
  options.user_agent = "agent\n";
  EXPECT_FALSE(BuildGetRequest(url, options).ok());
  options.user_agent = "";
  EXPECT_FALSE(BuildGetRequest({"host", 80, "/a b"}, options).ok());
}

// ---- The response reader, on in-memory streams ----

TEST(ReadHttpResponseTest, ReadsLengthChunkedAndCloseDelimitedBodiesWhateverTheReads) {
  struct Case {
    std::string bytes;
    int status;
    std::string content_type;
    std::string body;
  };
  const std::vector<Case> cases = {
      {"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
       "{\"a\":\"bc\"}\n",
       200, "application/json", "{\"a\":\"bc\"}\n"},
      {kChunkedHead + "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: y\r\n\r\n", 200, "", "abcde"},
      {"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end", 200, "", "until the end"},
      {"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\nbusy", 503,
       "text/plain", "busy"},
  };
  for (const Case& c : cases) {
    for (size_t max_chunk : kReadSizes) {
      auto response = ReadScripted(c.bytes, max_chunk);
      ASSERT_TRUE(response.ok()) << max_chunk << ": " << response.status().message();
      EXPECT_EQ(response->status, c.status);
      EXPECT_EQ(response->content_type, c.content_type);
      EXPECT_EQ(response->body, c.body);
    }
  }
}

TEST(ReadHttpResponseTest, TheCapsNameTheLabelAndTheLimit) {
  for (size_t max_chunk : kReadSizes) {
    auto body = ReadScripted("HTTP/1.1 200 OK\r\nContent-Length: 1001\r\n\r\n", max_chunk);
    EXPECT_EQ(body.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(body.status().message(), "test response body exceeds 1000 bytes");

    std::string chunks;
    for (int i = 0; i < 11; ++i) chunks += "64\r\n" + std::string(100, 'a') + "\r\n";
    body = ReadScripted(kChunkedHead + chunks, max_chunk);
    EXPECT_EQ(body.status().message(), "test response body exceeds 1000 bytes") << max_chunk;

    auto headers =
        ReadScripted("HTTP/1.1 200 OK\r\nX-Big: " + std::string(300, 'a') + "\r\n\r\n", max_chunk);
    EXPECT_EQ(headers.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(headers.status().message(), "test response headers exceed 256 bytes");
  }
  // A framing cap too small for any chunk line refuses, rather than spinning.
  HttpResponseOptions no_framing = SmallCaps();
  no_framing.max_chunk_framing_bytes = 0;
  EXPECT_FALSE(
      ReadScripted("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc", SIZE_MAX, no_framing).ok());
  // A body exactly at the cap is read.
  auto at_cap = ReadScripted(
      "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + std::string(1000, 'b'), SIZE_MAX);
  ASSERT_TRUE(at_cap.ok()) << at_cap.status().message();
  EXPECT_EQ(at_cap->body.size(), 1000u);
}

// Found by the imds_response fuzz target in CI: a chunked body whose first chunk is the last
// ("0\r\n"), read a byte at a time, reached an assertion in Boost 1.74's parse_chunk_header
// that aborted any build with asserts (the test build) instead of reading on.
TEST(ReadHttpResponseTest, AnEmptyChunkedBodyReadAByteAtATimeIsReadNotAnAbort) {
  for (const std::string tail : {"0\r\n\r\n", "0\r\nX-Trailer: y\r\n\r\n"}) {
    auto response = ReadScripted(kChunkedHead + tail, /*max_chunk=*/1);
    ASSERT_TRUE(response.ok()) << tail << ": " << response.status().message();
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->body, "");
  }
  auto cut = ReadScripted(kChunkedHead + "0\r\n\r", /*max_chunk=*/1);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(cut.status().message(), "malformed HTTP response: partial message");
}

// Beast 1.74 puts no limit on a chunk's size line (extensions) or the trailers: without ours a
// peer that never ends the line makes the reader hold everything it sends until the deadline.
TEST(ReadHttpResponseTest, AnEndlessChunkLineOrTrailerIsRefusedAtTheCap) {
  HttpResponseOptions options = SmallCaps();
  options.max_body_bytes = 1 << 20;
  std::string extensions;
  while (extensions.size() < 1024 * 1024) extensions += ";a=b";
  std::string trailers;
  while (trailers.size() < 1024 * 1024) trailers += "X-A: b\r\n";
  for (const std::string& body :
       {"1" + extensions, "2\r\n{}\r\n0\r\n" + trailers, "0\r\n" + trailers}) {
    for (size_t max_chunk : {size_t{1}, size_t{4096}, SIZE_MAX}) {
      auto response = ReadScripted(kChunkedHead + body, max_chunk, options);
      ASSERT_FALSE(response.ok());
      EXPECT_EQ(response.status().code(), Status::Code::kInvalidArgument);
      EXPECT_EQ(response.status().message(),
                "test response chunk line or trailers exceed 64 bytes");
    }
  }
}

// The cap is on the line, not on the reads: a size line of exactly the cap (its CRLF included)
// is read, one byte longer is refused, whatever sizes the reads come in; and whether the caps
// are equal, the header's larger (the line may come in one read with the header) or smaller.
TEST(ReadHttpResponseTest, TheChunkLineCapIsExactWhateverTheReadsAndTheHeaderCap) {
  const std::string body = "{\"signature\":\"ab\"}";  // 0x12 bytes
  for (size_t header_cap : {size_t{128}, size_t{16384}, size_t{32768}}) {
    HttpResponseOptions options = SmallCaps();
    options.max_header_bytes = header_cap;
    options.max_chunk_framing_bytes = 16384;
    auto response = [&](size_t line_bytes) {
      std::string line = "12;x=";
      line.append(line_bytes - line.size() - 2, 'a');
      return kChunkedHead + line + "\r\n" + body + "\r\n0\r\n\r\n";
    };
    for (size_t max_chunk : {size_t{1}, size_t{7}, size_t{16384}, SIZE_MAX}) {
      auto at_cap = ReadScripted(response(16384), max_chunk, options);
      ASSERT_TRUE(at_cap.ok()) << header_cap << "/" << max_chunk << ": "
                               << at_cap.status().message();
      EXPECT_EQ(at_cap->body, body);

      auto over = ReadScripted(response(16385), max_chunk, options);
      ASSERT_FALSE(over.ok()) << header_cap << "/" << max_chunk;
      EXPECT_EQ(over.status().message(), "test response chunk line or trailers exceed 16384 bytes")
          << header_cap << "/" << max_chunk;
    }
  }
}

TEST(ReadHttpResponseTest, APeerThatClosesAtOnceOrMidwayIsUnavailable) {
  auto empty = ReadScripted("", SIZE_MAX);
  EXPECT_EQ(empty.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(empty.status().message(), "connection closed before any response");

  auto short_body = ReadScripted("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 2);
  EXPECT_EQ(short_body.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(short_body.status().message(), "malformed HTTP response: partial message");

  auto garbage = ReadScripted("SSH-2.0-OpenSSH_9.2\r\n", SIZE_MAX);
  EXPECT_EQ(garbage.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(garbage.status().message(), StartsWith("malformed HTTP response: "));
}

TEST(ReadHttpResponseTest, HeadersAndBodyHaveTheirOwnDeadlines) {
  HttpResponseOptions options = SmallCaps();
  options.header_timeout = milliseconds(1000);
  {
    auto [ours, peer] = NewMemoryPipe();
    auto response = ReadHttpResponse(*ours, options, Deadline::After(milliseconds(50)), Generous());
    EXPECT_EQ(response.status().code(), Status::Code::kDeadlineExceeded);
    // The timeout the caller derived the deadline from.
    EXPECT_EQ(response.status().message(), "no response headers within 1000 ms");
  }
  {
    auto [ours, peer] = NewMemoryPipe();
    ASSERT_TRUE(
        peer->WriteAll("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", Generous()).ok());
    // The header deadline has passed by the time the body is late: the body has the other.
    auto start = std::chrono::steady_clock::now();
    auto response = ReadHttpResponse(*ours, options, Deadline::After(milliseconds(20)),
                                     Deadline::After(milliseconds(300)));
    EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(250));
    EXPECT_EQ(response.status().code(), Status::Code::kDeadlineExceeded);
    EXPECT_EQ(response.status().message(), "test response body timed out");
  }
  {
    options.header_timeout = milliseconds(0);
    auto [ours, peer] = NewMemoryPipe();
    auto response = ReadHttpResponse(*ours, options, Deadline::After(milliseconds(20)),
                                     Deadline::After(milliseconds(20)));
    EXPECT_EQ(response.status().message(), "test response headers timed out");
  }
}

TEST(ReadHttpResponseTest, ACancelledReadGivesUpSoon) {
  std::atomic<bool> cancelled{false};
  HttpResponseOptions options = SmallCaps();
  options.cancelled = &cancelled;
  auto [ours, peer] = NewMemoryPipe();
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(100));
    cancelled = true;
  });
  auto start = std::chrono::steady_clock::now();
  auto response = ReadHttpResponse(*ours, options, Generous(), Generous());
  canceller.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
  EXPECT_EQ(response.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(response.status().message(), "test request cancelled");
}

// ---- HttpGet on loopback ----

HttpGetOptions GetOptions() {
  HttpGetOptions options;
  options.url_label = "test url";
  options.request.user_agent = "wire-test";
  options.response = SmallCaps();
  options.connect_timeout = milliseconds(1000);
  return options;
}

// A real HTTP/1.1 server; each test scripts its answer.
struct HttpServer : testsupport::LoopbackHttpServer {
  HttpServer() : LoopbackHttpServer("/api/v1/query") {}
  std::string Url() const { return LoopbackHttpServer::Url("?query=up%7Bjob%3D%22a%22%7D"); }
};

TEST(HttpGetTest, Returns200WithItsBodyAndContentType) {
  HttpServer server;
  server.handler = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"success"})", "application/json");
  };
  HttpGetOptions options = GetOptions();
  options.request.headers = {{"X-Scope-OrgID", "tenant-1"}};
  auto response = HttpGet(server.Url(), options, Generous());
  ASSERT_TRUE(response.ok()) << response.status().message();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->content_type, "application/json");
  EXPECT_EQ(response->body, R"({"status":"success"})");

  EXPECT_EQ(server.last.get_param_value("query"), "up{job=\"a\"}");
  auto header = [&](const char* name) {
    auto it = server.last.headers.find(name);
    return it == server.last.headers.end() ? std::string("<none>") : it->second;
  };
  EXPECT_EQ(header("X-Scope-OrgID"), "tenant-1");
  EXPECT_EQ(header("User-Agent"), "wire-test");
  EXPECT_EQ(header("Accept"), "application/json");
  EXPECT_EQ(header("Connection"), "close");
}

TEST(HttpGetTest, ANon200StatusIsReturnedNotAnError) {
  HttpServer server;
  server.handler = [](const httplib::Request&, httplib::Response& res) {
    res.status = 422;
    res.set_content(R"({"status":"error","errorType":"execution"})", "application/json");
  };
  auto response = HttpGet(server.Url(), GetOptions(), Generous());
  ASSERT_TRUE(response.ok()) << response.status().message();
  EXPECT_EQ(response->status, 422);
  EXPECT_EQ(response->body, R"({"status":"error","errorType":"execution"})");

  // Nor is a redirect followed.
  server.handler = [](const httplib::Request&, httplib::Response& res) {
    res.set_redirect("http://127.0.0.1:1/elsewhere");
  };
  response = HttpGet(server.Url(), GetOptions(), Generous());
  ASSERT_TRUE(response.ok()) << response.status().message();
  EXPECT_EQ(response->status, 302);
}

TEST(HttpGetTest, AContentLengthBodyOverTheCapIsRefused) {
  HttpServer server;
  server.handler = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(1001, 'x'), "application/json");
  };
  auto response = HttpGet(server.Url(), GetOptions(), Generous());
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), Status::Code::kInvalidArgument);
  // A cap names itself, not the request.
  EXPECT_EQ(response.status().message(), "test response body exceeds 1000 bytes");
}

// A raw HTTP/1.1 peer that answers one request with scripted pieces, a pause between each,
// then closes, or holds the connection open until the test ends.
class RawPeer {
 public:
  RawPeer(std::vector<std::string> pieces, bool hold_open)
      : pieces_(std::move(pieces)), hold_open_(hold_open) {
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
    done_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/x"; }

 private:
  void Serve() {
    int conn = ::accept(fd_, nullptr, nullptr);
    if (conn < 0) return;
    char buf[4096];
    static_cast<void>(::recv(conn, buf, sizeof buf, 0));
    for (const auto& piece : pieces_) {
      ::send(conn, piece.data(), piece.size(), MSG_NOSIGNAL);
      std::this_thread::sleep_for(milliseconds(30));
    }
    while (hold_open_ && !done_) std::this_thread::sleep_for(milliseconds(10));
    ::close(conn);
  }
  std::vector<std::string> pieces_;
  bool hold_open_;
  std::atomic<bool> done_{false};
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

TEST(HttpGetTest, ReadsAChunkedBody) {
  RawPeer peer({"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: ch",
                "unked\r\n\r\n5\r\n{\"a\":\r\n", "4\r\n\"b\"}\r\n0", "\r\n\r\n"},
               /*hold_open=*/true);
  auto response = HttpGet(peer.Url(), GetOptions(), Generous());
  ASSERT_TRUE(response.ok()) << response.status().message();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->content_type, "application/json");
  EXPECT_EQ(response->body, "{\"a\":\"b\"}");
}

TEST(HttpGetTest, HeadersThatDoNotComeFailAtTheHeaderTimeout) {
  RawPeer peer({}, /*hold_open=*/true);
  HttpGetOptions options = GetOptions();
  options.response.header_timeout = milliseconds(200);
  auto start = std::chrono::steady_clock::now();
  auto response = HttpGet(peer.Url(), options, Generous());
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(response.status().message(),
            "GET " + peer.Url() + ": no response headers within 200 ms");
  EXPECT_GE(took, milliseconds(150));
  EXPECT_LT(took, milliseconds(2000));
}

TEST(HttpGetTest, ABodyThatStallsFailsAtTheDeadlineNotTheHeaderTimeout) {
  RawPeer peer({"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"}, /*hold_open=*/true);
  HttpGetOptions options = GetOptions();
  options.response.header_timeout = milliseconds(100);
  auto start = std::chrono::steady_clock::now();
  auto response = HttpGet(peer.Url(), options, Deadline::After(milliseconds(600)));
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(response.status().message(), "GET " + peer.Url() + ": test response body timed out");
  EXPECT_GE(took, milliseconds(500));
  EXPECT_LT(took, milliseconds(2500));
}

TEST(HttpGetTest, ConnectionRefusedIsUnavailableNamingTheRequest) {
  // A port nothing listens on: bound, then closed without listen().
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/x";
  ::close(fd);

  auto response = HttpGet(url, GetOptions(), Generous());
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(response.status().message(), StartsWith("GET " + url + ": connecting to 127.0.0.1:"));
  EXPECT_THAT(response.status().message(), HasSubstr("refused"));
}

TEST(HttpGetTest, AnHttpsUrlIsRefusedBeforeDialling) {
  auto response = HttpGet("https://127.0.0.1:1/x", GetOptions(), Generous());
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(response.status().message(),
            "test url https://127.0.0.1:1/x: only http:// is supported");
}

}  // namespace
}  // namespace hotfix::wire
