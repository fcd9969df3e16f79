// HttpDownload: an http(s) GET whose body streams to a sink, against a real HTTP/1.1 server
// (cpp-httplib) on loopback, TLS verified against a test CA the process trusts through
// SSL_CERT_FILE (the system trust store's override), and an HTTP proxy.
#include "wire/http_download.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "loopback_http_server.h"
#include "temp_dir.h"
#include "test_certs.h"
#include "tls_peer.h"

namespace hotfix::wire {
namespace {

using ::testing::HasSubstr;
using testsupport::LoopbackHttpServer;

Deadline Generous() { return Deadline::After(std::chrono::seconds(20)); }

Url MustParse(const std::string& text) {
  StatusOr<Url> url = ParseAbsoluteUrl(text);
  EXPECT_TRUE(url.ok()) << text;
  return *url;
}

// Downloads into a string through the sink.
struct Collected {
  StatusOr<HttpDownloadResponse> response = Status::Internal("not run");
  std::string body;
  int pieces = 0;
};
Collected Download(const std::string& url, HttpDownloadOptions options = {}) {
  Collected c;
  options.body_sink = [&c](std::string_view piece) {
    c.body.append(piece);
    ++c.pieces;
    return Status::Ok();
  };
  if (options.max_body_bytes == (1 << 20)) options.max_body_bytes = 64 << 20;
  c.response = HttpDownload(MustParse(url), options, Generous());
  return c;
}

class HttpDownloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v :
         {"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"}) {
      unsetenv(v);
    }
  }
};

TEST_F(HttpDownloadTest, ABigBodyArrivesInPiecesThroughTheSink) {
  LoopbackHttpServer server("/pool/x.deb");
  const std::string body(5 << 20, 'p');
  server.handler = [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(body, "application/octet-stream");
  };
  Collected c = Download(server.Url());
  ASSERT_TRUE(c.response.ok()) << c.response.status().ToString();
  EXPECT_EQ(c.response->status, 200);
  EXPECT_EQ(c.body.size(), body.size());
  EXPECT_TRUE(c.body == body);  // not EXPECT_EQ: 5 MiB in a failure message
  EXPECT_GT(c.pieces, 1) << "the body was handed over whole";
}

TEST_F(HttpDownloadTest, TheRequestNamesTheHostAndTheAgent) {
  LoopbackHttpServer server("/dists/jammy/InRelease");
  server.handler = [](const httplib::Request&, httplib::Response& res) {
    res.set_content("signed", "text/plain");
  };
  HttpDownloadOptions options;
  options.user_agent = "hotfix-agent/202604.01.0";
  Collected c = Download(server.Url(), options);
  ASSERT_TRUE(c.response.ok());
  EXPECT_EQ(c.body, "signed");
  EXPECT_EQ(server.last.get_header_value("User-Agent"), "hotfix-agent/202604.01.0");
  EXPECT_EQ(server.last.get_header_value("Host"), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_FALSE(server.last.has_header("Accept-Encoding")) << "compression stays off, as Go's";
}

TEST_F(HttpDownloadTest, ARedirectComesBackWithItsLocationAndNoBodyReachesTheSink) {
  LoopbackHttpServer server("/old");
  server.handler = [](const httplib::Request&, httplib::Response& res) {
    res.status = 302;
    res.set_header("Location", "/new/file");
    res.set_content("moved, see /new/file", "text/plain");
  };
  Collected c = Download(server.Url());
  ASSERT_TRUE(c.response.ok());
  EXPECT_EQ(c.response->status, 302);
  EXPECT_EQ(c.response->location, "/new/file");
  EXPECT_EQ(c.body, "") << "a non-200 body must never be taken for the file";
}

TEST_F(HttpDownloadTest, AnErrorStatusIsReturnedNotWritten) {
  LoopbackHttpServer server("/missing");
  server.handler = [](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content("not here", "text/plain");
  };
  Collected c = Download(server.Url());
  ASSERT_TRUE(c.response.ok());
  EXPECT_EQ(c.response->status, 404);
  EXPECT_EQ(c.body, "");
}

TEST_F(HttpDownloadTest, MoreThanTheCapStopsTheDownload) {
  LoopbackHttpServer server("/big");
  server.handler = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(100000, 'x'), "application/octet-stream");
  };
  HttpDownloadOptions options;
  options.max_body_bytes = 65536;
  options.label = "repository";
  Collected c = Download(server.Url(), options);
  ASSERT_FALSE(c.response.ok());
  EXPECT_EQ(c.response.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(c.response.status().message(), "repository response body exceeds 65536 bytes");
  EXPECT_LE(c.body.size(), 65536u);
}

TEST_F(HttpDownloadTest, TheSinksErrorEndsTheDownload) {
  LoopbackHttpServer server("/x");
  server.handler = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(1 << 20, 'x'), "application/octet-stream");
  };
  HttpDownloadOptions options;
  options.body_sink = [](std::string_view) { return Status::IoError("disk full"); };
  StatusOr<HttpDownloadResponse> r = HttpDownload(MustParse(server.Url()), options, Generous());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kIoError);
  EXPECT_THAT(r.status().message(), HasSubstr("disk full"));
}

TEST_F(HttpDownloadTest, CancellationStopsAStalledTransfer) {
  std::atomic<bool> release{false};  // outlives the server, whose handler reads it
  LoopbackHttpServer server("/slow");
  server.handler = [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/octet-stream",
                                     [&](size_t, httplib::DataSink& sink) {
                                       sink.write("x", 1);
                                       while (!release) {
                                         std::this_thread::sleep_for(std::chrono::milliseconds(5));
                                       }
                                       sink.done();
                                       return true;
                                     });
  };
  std::atomic<bool> cancelled{false};
  HttpDownloadOptions options;
  options.cancelled = &cancelled;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancelled = true;
  });
  const auto start = std::chrono::steady_clock::now();
  Collected c = Download(server.Url(), options);
  canceller.join();
  release = true;
  ASSERT_FALSE(c.response.ok());
  EXPECT_THAT(c.response.status().message(), HasSubstr("cancelled"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// A forward proxy that answers every request itself with what it was asked: the request head.
class EchoProxy {
 public:
  EchoProxy() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      const int conn = ::accept(fd_, nullptr, nullptr);
      if (conn < 0) return;
      std::string head;
      char buf[1024];
      while (head.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::recv(conn, buf, sizeof buf, 0);
        if (n <= 0) break;
        head.append(buf, static_cast<size_t>(n));
      }
      head_ = head;
      const std::string response =
          "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(head.size()) +
          "\r\nConnection: close\r\n\r\n" + head;
      ::send(conn, response.data(), response.size(), MSG_NOSIGNAL);
      ::close(conn);
    });
  }
  ~EchoProxy() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::string head_;
  std::thread thread_;
};

TEST_F(HttpDownloadTest, PlainHttpGoesThroughHttpProxyInAbsoluteForm) {
  EchoProxy proxy;
  setenv("HTTP_PROXY", ("http://user:pw@127.0.0.1:" + std::to_string(proxy.port())).c_str(), 1);
  // Not loopback (Go never proxies it) and never dialed: the proxy answers for it.
  Collected c = Download("http://10.255.255.1:8080/repo/InRelease");
  unsetenv("HTTP_PROXY");
  ASSERT_TRUE(c.response.ok()) << c.response.status().ToString();
  EXPECT_THAT(c.body,
              ::testing::StartsWith("GET http://10.255.255.1:8080/repo/InRelease HTTP/1.1\r\n"));
  EXPECT_THAT(c.body, HasSubstr("\r\nHost: 10.255.255.1:8080\r\n"));
  EXPECT_THAT(c.body, HasSubstr("\r\nProxy-Authorization: Basic dXNlcjpwdw==\r\n"));
}

TEST_F(HttpDownloadTest, AnUnsupportedProxyIsAnErrorNotADirectConnection) {
  setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080", 1);
  Collected c = Download("https://packages.example.com/x");
  unsetenv("HTTPS_PROXY");
  ASSERT_FALSE(c.response.ok());
  EXPECT_THAT(c.response.status().message(), HasSubstr("invalid HTTPS_PROXY"));
}

// HTTPS against a real TLS server: the test CA trusted only through SSL_CERT_FILE, the name
// checked against the URL's host.
class HttpsDownloadTest : public HttpDownloadTest {
 protected:
  void SetUp() override {
    HttpDownloadTest::SetUp();
    ca_file_ = testsupport::WritePemFile(dir_.path(), "ca.pem", ca_.cert_pem());
    testsupport::LeafOptions leaf;
    leaf.dns_names = {"localhost"};  // no IP SAN: 127.0.0.1 is not a name it carries
    tls_ = testsupport::WritePemFiles(dir_.path(), "server", ca_.IssueLeaf(leaf));
    server_ = std::make_unique<httplib::SSLServer>(tls_.cert.c_str(), tls_.key.c_str());
    server_->Get("/InRelease", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("signed over TLS", "text/plain");
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_->stop();
    thread_.join();
    unsetenv("SSL_CERT_FILE");
  }
  std::string Url(const std::string& host) const {
    return "https://" + host + ":" + std::to_string(port_) + "/InRelease";
  }

  testsupport::TempDir dir_;
  testsupport::TestCa ca_ = testsupport::TestCa::Create("repo-ca");
  std::filesystem::path ca_file_;
  testsupport::PemPaths tls_;
  std::unique_ptr<httplib::SSLServer> server_;
  int port_ = 0;
  std::thread thread_;
};

TEST_F(HttpsDownloadTest, TrustedThroughTheSystemStore) {
  setenv("SSL_CERT_FILE", ca_file_.c_str(), 1);
  Collected c = Download(Url("localhost"));
  ASSERT_TRUE(c.response.ok()) << c.response.status().ToString();
  EXPECT_EQ(c.body, "signed over TLS");
}

TEST_F(HttpsDownloadTest, AnUntrustedCertificateIsRefused) {
  Collected c = Download(Url("localhost"));  // the test CA is not in the system's store
  ASSERT_FALSE(c.response.ok());
  EXPECT_THAT(c.response.status().message(), HasSubstr("certificate verif"));
}

TEST_F(HttpsDownloadTest, TheCertificateMustNameTheHost) {
  setenv("SSL_CERT_FILE", ca_file_.c_str(), 1);
  // The same server dialed by an address the certificate does not carry.
  Collected wrong = Download(Url("127.0.0.1"));
  ASSERT_FALSE(wrong.response.ok());
  EXPECT_THAT(wrong.response.status().message(), HasSubstr("certificate verif"));
}

}  // namespace
}  // namespace hotfix::wire
