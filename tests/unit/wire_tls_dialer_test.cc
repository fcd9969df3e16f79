// DialTls against real TLS on loopback: an in-process OpenSSL server thread that records the
// ClientHello (SNI, offered ALPN) and picks a protocol, an in-process HTTP CONNECT proxy, and a
// PKI built with the OpenSSL API at test start.
#include "wire/tls_dialer.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/openssl.h"

namespace hotfix::wire {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

constexpr char kLpsName[] = "aks-security-patch.data.mcr.microsoft.com";
constexpr char kApiServer[] = "myaks-dns.hcp.eastus.azmk8s.io";

// ---- A PKI built with the OpenSSL API. ----

struct Identity {
  ossl::PkeyPtr key;
  ossl::X509Ptr cert;

  std::string CertPem() const {
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(bio, cert.get());
    char* data = nullptr;
    long len = BIO_get_mem_data(bio, &data);
    std::string pem(data, static_cast<size_t>(len));
    BIO_free(bio);
    return pem;
  }
};

struct CertSpec {
  std::string cn = "";
  std::string sans = "";  // "DNS:a,IP:1.2.3.4"; empty: no SAN extension
  bool ca = false;
  long not_before_s = -3600;
  long not_after_s = 86400;
  std::string eku = "serverAuth";  // empty: no EKU extension
};

void AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
  ASSERT_NE(ext, nullptr) << value;
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// A P-256 key and a certificate for it, signed by issuer (self-signed when null).
Identity Issue(const CertSpec& spec, const Identity* issuer) {
  static std::atomic<long> serial{1};
  Identity id;
  id.key.reset(EVP_EC_gen("P-256"));
  id.cert.reset(X509_new());
  X509* cert = id.cert.get();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert), spec.not_before_s);
  X509_gmtime_adj(X509_getm_notAfter(cert), spec.not_after_s);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(spec.cn.c_str()), -1, -1, 0);
  X509* issuer_cert = issuer != nullptr ? issuer->cert.get() : cert;
  X509_set_issuer_name(cert, X509_get_subject_name(issuer_cert));
  X509_set_pubkey(cert, id.key.get());

  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer_cert, cert, nullptr, nullptr, 0);
  AddExtension(cert, &ctx, NID_basic_constraints, spec.ca ? "critical,CA:TRUE" : "CA:FALSE");
  AddExtension(cert, &ctx, NID_key_usage,
               spec.ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
  AddExtension(cert, &ctx, NID_subject_key_identifier, "hash");
  if (issuer != nullptr) AddExtension(cert, &ctx, NID_authority_key_identifier, "keyid:always");
  if (!spec.eku.empty()) AddExtension(cert, &ctx, NID_ext_key_usage, spec.eku);
  if (!spec.sans.empty()) AddExtension(cert, &ctx, NID_subject_alt_name, spec.sans);
  EVP_PKEY* signer = issuer != nullptr ? issuer->key.get() : id.key.get();
  EXPECT_GT(X509_sign(cert, signer, EVP_sha256()), 0);
  return id;
}

struct Pki {
  Identity ca = Issue({.cn = "cluster CA", .ca = true, .eku = ""}, nullptr);
  Identity other_ca = Issue({.cn = "someone else's CA", .ca = true, .eku = ""}, nullptr);
  Identity leaf = Issue({.cn = kLpsName, .sans = std::string("DNS:") + kLpsName}, &ca);
  Identity wrong_name = Issue({.cn = "other", .sans = "DNS:other.example.com"}, &ca);
  Identity untrusted = Issue({.cn = kLpsName, .sans = std::string("DNS:") + kLpsName}, &other_ca);
  Identity expired = Issue({.cn = kLpsName,
                            .sans = std::string("DNS:") + kLpsName,
                            .not_before_s = -2 * 86400,
                            .not_after_s = -86400},
                           &ca);
  Identity cn_only = Issue({.cn = kLpsName}, &ca);
  Identity client_eku =
      Issue({.cn = kLpsName, .sans = std::string("DNS:") + kLpsName, .eku = "clientAuth"}, &ca);
  Identity wildcard = Issue({.cn = "w", .sans = "DNS:*.data.mcr.microsoft.com"}, &ca);
  Identity partial_wildcard = Issue({.cn = "p", .sans = "DNS:aks-*.data.mcr.microsoft.com"}, &ca);
};

const Pki& TestPki() {
  static const Pki* pki = new Pki();
  return *pki;
}

// ---- Sockets for the in-test peers. ----

// Server threads must not die of SIGPIPE; the client under test runs with SIGPIPE's default.
void BlockSigpipeInThisThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int ListenLoopback(uint16_t* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(listen(fd, 16), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

// Accepts one connection, or -1 once stop is set or 10 s passed.
int AcceptOne(int listen_fd, const std::atomic<bool>& stop) {
  for (int i = 0; i < 200 && !stop; ++i) {
    pollfd pfd{listen_fd, POLLIN, 0};
    if (poll(&pfd, 1, 50) == 1) {
      int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      timeval tv{10, 0};  // no peer thread may hang the suite
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      return fd;
    }
  }
  return -1;
}

void ResetAndClose(int fd) {
  linger abort_on_close{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
  close(fd);
}

// ---- The TLS server. ----

enum class Alpn { kH2, kNone, kHttp11, kAksLivePatching };
enum class After { kEcho, kCloseNotify, kReset, kSilent };

struct ServerBehavior {
  const Identity* leaf = nullptr;
  Alpn alpn = Alpn::kH2;
  int max_version = 0;  // e.g. TLS1_1_VERSION for a legacy-only server
  After after = After::kEcho;
};

struct ClientHello {
  bool seen = false;
  std::optional<std::string> sni;
  std::vector<std::string> alpn;
};

class TlsServer {
 public:
  explicit TlsServer(ServerBehavior behavior) : behavior_(behavior) {
    listen_fd_ = ListenLoopback(&port_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~TlsServer() {
    stop_ = true;
    Join();
    close(listen_fd_);
  }
  uint16_t port() const { return port_; }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  ClientHello hello() {
    Join();
    return hello_;
  }

 private:
  SSL_CTX* MakeContext() {
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    EXPECT_EQ(SSL_CTX_use_certificate(ctx, behavior_.leaf->cert.get()), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey(ctx, behavior_.leaf->key.get()), 1);
    SSL_CTX_set_client_hello_cb(ctx, OnClientHello, this);
    SSL_CTX_set_alpn_select_cb(ctx, OnAlpnSelect, this);
    if (behavior_.max_version != 0) {
      SSL_CTX_set_security_level(ctx, 0);
      SSL_CTX_set_cipher_list(ctx, "DEFAULT:@SECLEVEL=0");
      SSL_CTX_set_min_proto_version(ctx, TLS1_VERSION);
      SSL_CTX_set_max_proto_version(ctx, behavior_.max_version);
    }
    return ctx;
  }

  void Serve() {
    BlockSigpipeInThisThread();
    int fd = AcceptOne(listen_fd_, stop_);
    if (fd < 0) return;
    SSL_CTX* ctx = MakeContext();
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    bool closed = SSL_accept(ssl) == 1 && RunAfterHandshake(ssl, fd);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    if (!closed) close(fd);
    ERR_clear_error();
  }

  // True when it closed fd itself.
  bool RunAfterHandshake(SSL* ssl, int fd) {
    char buf[16384];
    switch (behavior_.after) {
      case After::kEcho:
        for (int n; (n = SSL_read(ssl, buf, sizeof(buf))) > 0;) {
          if (SSL_write(ssl, buf, n) <= 0) break;
        }
        break;
      case After::kCloseNotify:
        SSL_shutdown(ssl);
        break;
      case After::kReset:
        ResetAndClose(fd);
        return true;
      case After::kSilent:
        while (SSL_read(ssl, buf, sizeof(buf)) > 0) {
        }
        break;
    }
    return false;
  }

  static int OnClientHello(SSL* ssl, int*, void* arg) {
    auto* self = static_cast<TlsServer*>(arg);
    ClientHello hello;
    hello.seen = true;
    const unsigned char* p = nullptr;
    size_t len = 0;
    // server_name: list length (2), type (1), name length (2), name.
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &len) == 1 && len >= 5) {
      size_t name_len = (size_t{p[3]} << 8) | p[4];
      hello.sni = std::string(reinterpret_cast<const char*>(p + 5), std::min(name_len, len - 5));
    }
    // ALPN: list length (2), then (length (1), name)*.
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &p,
                                  &len) == 1) {
      for (size_t i = 2; i < len && i + 1 + p[i] <= len; i += 1 + p[i]) {
        hello.alpn.emplace_back(reinterpret_cast<const char*>(p + i + 1), p[i]);
      }
    }
    self->hello_ = hello;
    return SSL_CLIENT_HELLO_SUCCESS;
  }

  static int OnAlpnSelect(SSL*, const unsigned char** out, unsigned char* outlen,
                          const unsigned char* in, unsigned int inlen, void* arg) {
    auto* self = static_cast<TlsServer*>(arg);
    auto choose = [out, outlen](const char* proto) {
      *out = reinterpret_cast<const unsigned char*>(proto);
      *outlen = static_cast<unsigned char>(strlen(proto));
      return SSL_TLSEXT_ERR_OK;
    };
    switch (self->behavior_.alpn) {
      case Alpn::kH2:
        for (unsigned i = 0; i < inlen; i += 1 + in[i]) {
          if (in[i] == 2 && i + 3 <= inlen && memcmp(in + i + 1, "h2", 2) == 0) return choose("h2");
        }
        return SSL_TLSEXT_ERR_NOACK;
      case Alpn::kHttp11:
        return choose("http/1.1");  // not offered: a misbehaving server
      case Alpn::kAksLivePatching:
        return choose("aks-live-patching");
      case Alpn::kNone:
        break;
    }
    return SSL_TLSEXT_ERR_NOACK;
  }

  ServerBehavior behavior_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  ClientHello hello_;  // written on the server thread, read after Join()
  std::thread thread_;
};

// ---- The HTTP CONNECT proxy. ----

enum class ProxyMode { kTunnel, kForbidden, kSilent, kHugeHeader };

class ConnectProxy {
 public:
  ConnectProxy(ProxyMode mode, uint16_t upstream_port) : mode_(mode), upstream_(upstream_port) {
    listen_fd_ = ListenLoopback(&port_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ConnectProxy() {
    stop_ = true;
    Join();
    close(listen_fd_);
  }
  uint16_t port() const { return port_; }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  // The request head as received, "\r\n\r\n" included.
  std::string request() {
    Join();
    return request_;
  }

 private:
  void Serve() {
    BlockSigpipeInThisThread();
    int fd = AcceptOne(listen_fd_, stop_);
    if (fd < 0) return;
    char c;
    while (request_.find("\r\n\r\n") == std::string::npos && recv(fd, &c, 1, 0) == 1) {
      request_.push_back(c);
    }
    Respond(fd);
    close(fd);
  }

  void Respond(int fd) {
    char buf[1024];
    switch (mode_) {
      case ProxyMode::kTunnel:
        return Tunnel(fd);
      case ProxyMode::kForbidden:
        Send(fd, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
        return;
      case ProxyMode::kHugeHeader:
        Send(fd, "HTTP/1.1 200 OK\r\nX-Pad: " + std::string(20000, 'a'));
        break;
      case ProxyMode::kSilent:
        break;
    }
    while (recv(fd, buf, sizeof(buf), 0) > 0) {
    }
  }

  static void Send(int fd, const std::string& data) {
    send(fd, data.data(), data.size(), MSG_NOSIGNAL);
  }

  // The target in the CONNECT line is ignored: every tunnel goes to the upstream port, which
  // proves that the client left name resolution to the proxy.
  void Tunnel(int client) {
    int upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(upstream_);
    if (connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(upstream);
      return;
    }
    Send(client, "HTTP/1.1 200 Connection established\r\n\r\n");
    Relay(client, upstream);
    close(upstream);
  }

  static void Relay(int a, int b) {
    char buf[16384];
    pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    while (poll(fds, 2, 10000) > 0) {
      for (int i = 0; i < 2; ++i) {
        if (fds[i].revents == 0) continue;
        ssize_t n = recv(fds[i].fd, buf, sizeof(buf), 0);
        if (n <= 0 || send(fds[1 - i].fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) return;
      }
    }
  }

  ProxyMode mode_;
  uint16_t upstream_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::string request_;
  std::thread thread_;
};

// ---- Helpers. ----

TlsDialOptions Options(uint16_t port) {
  TlsDialOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.sni = kApiServer;
  o.alpn = {"aks-live-patching", "h2"};
  o.verify_name = kLpsName;
  o.ca_pem = TestPki().ca.CertPem();
  return o;
}

uint16_t UnusedPort() {
  uint16_t port = 0;
  close(ListenLoopback(&port));
  return port;
}

template <typename T>
std::string Describe(const StatusOr<T>& s) {
  return s.ok() ? "OK" : s.status().message();
}

// ---- Success: what goes on the wire. ----

TEST(DialTls, ACancelledDialStopsBeforeTheHandshake) {
  TlsServer server({.leaf = &TestPki().leaf});
  std::atomic<bool> cancelled{true};
  TlsDialOptions options = Options(server.port());
  options.cancelled = &cancelled;
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().message(), "dial cancelled");
  EXPECT_FALSE(server.hello().seen);  // no ClientHello was sent
}

TEST(DialTls, HandshakeSelectsH2AndSendsApiServerSni) {
  TlsServer server({.leaf = &TestPki().leaf});
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  EXPECT_EQ((*stream)->selected_alpn(), "h2");
  EXPECT_EQ((*stream)->protocol_version(), "TLSv1.3");
  stream->reset();
  ClientHello hello = server.hello();
  ASSERT_TRUE(hello.seen);
  EXPECT_EQ(hello.sni, std::optional<std::string>(kApiServer));
  EXPECT_THAT(hello.alpn, ElementsAre("aks-live-patching", "h2"));
}

TEST(DialTls, NoSniForIpLiteralOrEmpty) {
  for (const char* sni : {"127.0.0.1", "::1", ""}) {
    TlsServer server({.leaf = &TestPki().leaf});
    TlsDialOptions options = Options(server.port());
    options.sni = sni;
    auto stream = DialTls(options, Deadline::After(5s));
    ASSERT_TRUE(stream.ok()) << sni << ": " << Describe(stream);
    stream->reset();
    ClientHello hello = server.hello();
    EXPECT_TRUE(hello.seen);
    EXPECT_FALSE(hello.sni.has_value()) << sni << " sent SNI " << hello.sni.value_or("");
  }
}

TEST(DialTls, ResolvesHostNames) {
  TlsServer server({.leaf = &TestPki().leaf});
  TlsDialOptions options = Options(server.port());
  options.host = "localhost";  // may resolve to ::1 first, where nothing listens
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  EXPECT_EQ((*stream)->selected_alpn(), "h2");
}

TEST(DialTls, WholeLabelWildcardAccepted) {
  TlsServer server({.leaf = &TestPki().wildcard});
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  EXPECT_TRUE(stream.ok()) << Describe(stream);
}

// ---- Verification. ----

void ExpectVerificationFailure(const Identity& leaf, const std::string& reason) {
  TlsServer server({.leaf = &leaf});
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(stream.status().message(), "server certificate verification failed: " + reason);
}

TEST(DialTls, UntrustedCaRejected) {
  ExpectVerificationFailure(TestPki().untrusted, "unable to get local issuer certificate");
}

TEST(DialTls, WrongNameRejected) {
  ExpectVerificationFailure(TestPki().wrong_name, "hostname mismatch");
}

TEST(DialTls, ExpiredRejected) {
  ExpectVerificationFailure(TestPki().expired, "certificate has expired");
}

TEST(DialTls, CommonNameIsNotChecked) {
  // Go ignores the CN; a name only there does not verify.
  ExpectVerificationFailure(TestPki().cn_only, "hostname mismatch");
}

TEST(DialTls, PartialWildcardRejected) {
  ExpectVerificationFailure(TestPki().partial_wildcard, "hostname mismatch");
}

TEST(DialTls, ClientOnlyCertificateRejected) {
  ExpectVerificationFailure(TestPki().client_eku, "unsuitable certificate purpose");
}

TEST(DialTls, SystemRootsNotTrusted) {
  // The trust anchor is the other CA only: the leaf's own CA is unknown.
  TlsServer server({.leaf = &TestPki().leaf});
  TlsDialOptions options = Options(server.port());
  options.ca_pem = TestPki().other_ca.CertPem();
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kPermissionDenied);
}

TEST(DialTls, BundleTrustsEveryCertificate) {
  TlsServer server({.leaf = &TestPki().untrusted});
  TlsDialOptions options = Options(server.port());
  options.ca_pem = TestPki().ca.CertPem() + TestPki().other_ca.CertPem();
  auto stream = DialTls(options, Deadline::After(5s));
  EXPECT_TRUE(stream.ok()) << Describe(stream);
}

// ---- ALPN and protocol version. ----

TEST(DialTls, NoAlpnSelectedRejected) {
  TlsServer server({.leaf = &TestPki().leaf, .alpn = Alpn::kNone});
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(stream.status().message(), "server selected ALPN none, need h2");
}

TEST(DialTls, OtherOfferedAlpnRejected) {
  TlsServer server({.leaf = &TestPki().leaf, .alpn = Alpn::kAksLivePatching});
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(stream.status().message(), "server selected ALPN aks-live-patching, need h2");
}

TEST(DialTls, UnofferedHttp11Rejected) {
  TlsServer server({.leaf = &TestPki().leaf, .alpn = Alpn::kHttp11});
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  // OpenSSL itself refuses a protocol the client did not offer.
  EXPECT_THAT(stream.status().message(), HasSubstr("TLS handshake with 127.0.0.1:"));
}

TEST(DialTls, Tls11OnlyServerRejected) {
  TlsServer server({.leaf = &TestPki().leaf, .max_version = TLS1_1_VERSION});
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(stream.status().message(), StartsWith("TLS handshake with 127.0.0.1:"));
}

// ---- Deadlines and unreachable peers. ----

TEST(DialTls, SilentServerHitsDeadline) {
  uint16_t port = 0;
  int listener = ListenLoopback(&port);  // the kernel accepts; nobody ever answers
  auto start = std::chrono::steady_clock::now();
  auto stream = DialTls(Options(port), Deadline::After(300ms));
  auto elapsed = std::chrono::steady_clock::now() - start;
  close(listener);
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(stream.status().message(),
            "TLS handshake with 127.0.0.1:" + std::to_string(port) + " timed out");
  EXPECT_GE(elapsed, 250ms);
  EXPECT_LT(elapsed, 3s);
}

TEST(DialTls, ConnectionRefused) {
  uint16_t port = UnusedPort();
  auto stream = DialTls(Options(port), Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(stream.status().message(),
            "connecting to 127.0.0.1:" + std::to_string(port) + ": Connection refused");
}

TEST(DialTls, UnresolvableHost) {
  TlsDialOptions options = Options(443);
  options.host = "does-not-exist.invalid";
  auto stream = DialTls(options, Deadline::After(2s));
  ASSERT_FALSE(stream.ok());
  // Without DNS in the sandbox the lookup may also outlast the deadline.
  EXPECT_TRUE(stream.status().code() == Status::Code::kUnavailable ||
              stream.status().code() == Status::Code::kDeadlineExceeded)
      << stream.status().message();
  EXPECT_THAT(stream.status().message(), StartsWith("resolving does-not-exist.invalid"));
}

TEST(DialTls, ExpiredDeadlineFailsFast) {
  TlsServer server({.leaf = &TestPki().leaf});
  auto stream = DialTls(Options(server.port()), Deadline::After(-1ms));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kDeadlineExceeded);
}

// ---- Options and the CA bundle. ----

TEST(DialTls, EmptyCaRefused) {
  TlsDialOptions options = Options(UnusedPort());
  options.ca_pem = "";
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(stream.status().message(),
            "cluster CA unavailable; refusing to connect over unverified TLS");
}

TEST(DialTls, GarbageCaRefused) {
  TlsDialOptions options = Options(UnusedPort());
  options.ca_pem = "this is not a certificate";
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(stream.status().message(), "failed to parse cluster CA PEM");
}

TEST(DialTls, BadOptionsRefused) {
  TlsDialOptions no_name = Options(UnusedPort());
  no_name.verify_name = "";
  TlsDialOptions empty_alpn = Options(UnusedPort());
  empty_alpn.alpn = {"h2", ""};
  TlsDialOptions no_host = Options(UnusedPort());
  no_host.host = "";
  for (const auto& options : {no_name, empty_alpn, no_host}) {
    auto stream = DialTls(options, Deadline::After(5s));
    ASSERT_FALSE(stream.ok());
    EXPECT_EQ(stream.status().code(), Status::Code::kInvalidArgument) << stream.status().message();
  }
}

const char kBadBase64Block[] = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
const char kKeyBlock[] = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";

TEST(ValidateCaPem, CountsCertificatesSkippingOtherBlocks) {
  const Pki& pki = TestPki();
  auto one = ValidateCaPem(pki.ca.CertPem());
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(*one, 1);
  auto bundle = ValidateCaPem(std::string("comment\n") + kBadBase64Block + pki.ca.CertPem() +
                              kKeyBlock + pki.other_ca.CertPem() + "trailing text\n");
  ASSERT_TRUE(bundle.ok()) << bundle.status().message();
  EXPECT_EQ(*bundle, 2);
}

TEST(ValidateCaPem, Errors) {
  auto empty = ValidateCaPem("");
  EXPECT_EQ(empty.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(empty.status().message(),
            "cluster CA unavailable; refusing to connect over unverified TLS");
  for (std::string bad :
       {std::string("garbage"), std::string(kBadBase64Block), std::string(kKeyBlock)}) {
    auto parsed = ValidateCaPem(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), "failed to parse cluster CA PEM");
  }
}

// ---- The proxy path. ----

TEST(DialTls, ThroughConnectProxy) {
  TlsServer server({.leaf = &TestPki().leaf});
  ConnectProxy proxy(ProxyMode::kTunnel, server.port());
  TlsDialOptions options = Options(443);
  options.host = "lps.unresolvable.test";  // only the proxy resolves the target
  options.proxy = ProxyConfig{"127.0.0.1", proxy.port(), "Basic YWxpY2U6czNjcmV0"};
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  EXPECT_EQ((*stream)->selected_alpn(), "h2");
  stream->reset();
  EXPECT_EQ(proxy.request(),
            "CONNECT lps.unresolvable.test:443 HTTP/1.1\r\n"
            "Host: lps.unresolvable.test:443\r\n"
            "Proxy-Authorization: Basic YWxpY2U6czNjcmV0\r\n\r\n");
  EXPECT_EQ(server.hello().sni, std::optional<std::string>(kApiServer));
}

TEST(DialTls, ProxyWithoutCredentialsSendsNoAuthorization) {
  TlsServer server({.leaf = &TestPki().leaf});
  ConnectProxy proxy(ProxyMode::kTunnel, server.port());
  TlsDialOptions options = Options(6443);
  options.host = "2001:db8::7";
  options.proxy = ProxyConfig{"127.0.0.1", proxy.port(), ""};
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  stream->reset();
  EXPECT_EQ(proxy.request(),
            "CONNECT [2001:db8::7]:6443 HTTP/1.1\r\nHost: [2001:db8::7]:6443\r\n\r\n");
}

TEST(DialTls, ProxyRefusal) {
  ConnectProxy proxy(ProxyMode::kForbidden, 0);
  TlsDialOptions options = Options(443);
  options.proxy = ProxyConfig{"127.0.0.1", proxy.port(), ""};
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(stream.status().message(),
              StartsWith("proxy CONNECT to 127.0.0.1:443 via 127.0.0.1:"));
  EXPECT_THAT(stream.status().message(), HasSubstr("\"HTTP/1.1 403 Forbidden\""));
}

TEST(DialTls, SilentProxyHitsDeadline) {
  ConnectProxy proxy(ProxyMode::kSilent, 0);
  TlsDialOptions options = Options(443);
  options.proxy = ProxyConfig{"127.0.0.1", proxy.port(), ""};
  auto start = std::chrono::steady_clock::now();
  auto stream = DialTls(options, Deadline::After(300ms));
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kDeadlineExceeded);
  EXPECT_THAT(stream.status().message(), StartsWith("proxy CONNECT to 127.0.0.1:443"));
  EXPECT_LT(elapsed, 3s);
}

TEST(DialTls, ProxyHeaderCapped) {
  ConnectProxy proxy(ProxyMode::kHugeHeader, 0);
  TlsDialOptions options = Options(443);
  options.proxy = ProxyConfig{"127.0.0.1", proxy.port(), ""};
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(stream.status().message(), HasSubstr("exceeds 16 KiB"));
}

TEST(DialTls, ProxyUnreachable) {
  TlsDialOptions options = Options(443);
  uint16_t port = UnusedPort();
  options.proxy = ProxyConfig{"127.0.0.1", port, ""};
  auto stream = DialTls(options, Deadline::After(5s));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(stream.status().message(),
            "connecting to proxy 127.0.0.1:" + std::to_string(port) + ": Connection refused");
}

// ---- The established stream. ----

TEST(TlsStream, EchoRoundTrip) {
  TlsServer server({.leaf = &TestPki().leaf, .after = After::kEcho});
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  std::string payload(64 * 1024, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7);
  ASSERT_TRUE((*stream)->WriteAll(payload, Deadline::After(5s)).ok());
  std::string echoed;
  char buf[4096];
  while (echoed.size() < payload.size()) {
    auto n = (*stream)->ReadSome(buf, sizeof(buf), Deadline::After(5s));
    ASSERT_TRUE(n.ok()) << n.status().message();
    ASSERT_GT(*n, 0u);
    echoed.append(buf, *n);
  }
  EXPECT_EQ(echoed, payload);
}

TEST(TlsStream, CloseNotifyReadsAsEndOfStream) {
  TlsServer server({.leaf = &TestPki().leaf, .after = After::kCloseNotify});
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  char buf[64];
  auto n = (*stream)->ReadSome(buf, sizeof(buf), Deadline::After(5s));
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 0u);
}

TEST(TlsStream, ReadTimesOut) {
  TlsServer server({.leaf = &TestPki().leaf, .after = After::kSilent});
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  char buf[64];
  auto start = std::chrono::steady_clock::now();
  auto n = (*stream)->ReadSome(buf, sizeof(buf), Deadline::After(200ms));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), Status::Code::kDeadlineExceeded);
  EXPECT_THAT(n.status().message(), HasSubstr("timed out"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(TlsStream, ResetIsUnavailableAndNeverRaisesSigpipe) {
  // Default SIGPIPE disposition: a write to the reset socket without MSG_NOSIGNAL would kill
  // this test process.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  struct sigaction old {};
  sigaction(SIGPIPE, &dfl, &old);

  TlsServer server({.leaf = &TestPki().leaf, .after = After::kReset});
  auto stream = DialTls(Options(server.port()), Deadline::After(5s));
  ASSERT_TRUE(stream.ok()) << Describe(stream);
  server.Join();  // the RST is on its way
  char buf[64];
  auto n = (*stream)->ReadSome(buf, sizeof(buf), Deadline::After(5s));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(n.status().message(), HasSubstr("reading from 127.0.0.1:"));

  Status written;
  for (int i = 0; i < 20 && written.ok(); ++i) {
    written = (*stream)->WriteAll(std::string(4096, 'x'), Deadline::After(5s));
  }
  EXPECT_EQ(written.code(), Status::Code::kUnavailable) << written.message();
  stream->reset();  // close_notify on a dead socket must not raise SIGPIPE either
  sigaction(SIGPIPE, &old, nullptr);
}

}  // namespace
}  // namespace hotfix::wire
