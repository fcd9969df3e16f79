// TlsPeer: raw OpenSSL servers that misbehave in one specific way, for the client's failure
// tests, and a well-behaved-looking "apiserver" that records who reached it.
//
//   TlsPeerOptions options;
//   options.mode = TlsPeerMode::kSelectH2Silent;
//   options.cert = IssueLocalServerCert(ca, {"api.example"});
//   TlsPeer apiserver(std::move(options));
//   ... apiserver.WaitForConnections(1, 10s); apiserver.connections()[0].offered_alpn ...
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "recorder.h"
#include "test_certs.h"

namespace hotfix::testsupport {

namespace net {
class ConnectionServer;
}

enum class TlsPeerMode {
  // Accepts TCP, reads and discards, never sends a byte (not even a ServerHello).
  kAcceptOnly,
  // Completes the TLS handshake without selecting any ALPN protocol, then stays silent.
  kNoAlpn,
  // Selects "http/1.1" whatever the client offered (a misbehaving server: an OpenSSL client
  // rejects a protocol it did not offer during the handshake), then stays silent.
  kSelectHttp11,
  // Speaks only TLS 1.0/1.1 (SECLEVEL 0): a client requiring TLS 1.2 fails the handshake.
  // A client that allows TLS 1.1 at SECLEVEL 0 completes it (see the self-test).
  kTls11Only,
  // Selects "aks-live-patching" whatever the client offered, then stays silent.
  kSelectAksLivePatching,
  // Selects "h2" when offered (no ALPN otherwise) and completes TLS, then never sends
  // HTTP/2: no SETTINGS, no response. Also the apiserver stand-in for routing tests.
  kSelectH2Silent,
  // kSelectH2Silent, at most TLS 1.2 (the last version with renegotiation).
  kSelectH2Tls12,
};

// What a peer does once its handshake succeeded ("stays silent" above is kDrain).
enum class TlsPeerAfterHandshake {
  kDrain,        // reads and drops everything until the client closes
  kEcho,         // writes back every byte it reads
  kCloseNotify,  // sends close_notify, then closes the connection
  kReset,        // resets the TCP connection (SO_LINGER 0, then close), no close_notify
  // Asks for a renegotiation (a TLS 1.2 HelloRequest), then reads: a client that refuses
  // answers with an alert, which ends the connection; one that renegotiates leaves both ends
  // waiting for data until the client closes.
  kRenegotiate,
};

struct TlsPeerOptions {
  TlsPeerMode mode = TlsPeerMode::kSelectH2Silent;
  TlsPeerAfterHandshake after = TlsPeerAfterHandshake::kDrain;
  // Required for every mode but kAcceptOnly.
  CertAndKey cert;
  uint16_t port = 0;  // 0: any free port on 127.0.0.1
};

// The apiserver stand-in of the routing tests: TLS for `fqdn` from `ca`, selects h2 and then
// never answers.
TlsPeerOptions SilentApiserverOptions(const TestCa& ca, const std::string& fqdn);

struct TlsPeerConnection {
  bool client_hello = false;  // a ClientHello arrived (false: the client sent no TLS at all)
  bool handshake_ok = false;
  std::string error;  // why the handshake failed, as OpenSSL says
  std::string sni;    // empty: the client sent no server_name
  std::vector<std::string> offered_alpn;
  std::string selected_alpn;
  std::string protocol_version;  // "TLSv1.3"
};

// Like every server here, sets SIGPIPE to SIG_IGN process-wide (OpenSSL writes with write()).
class TlsPeer {
 public:
  explicit TlsPeer(TlsPeerOptions options);  // listening when this returns
  ~TlsPeer();                                // closes every connection, joins every thread
  TlsPeer(const TlsPeer&) = delete;
  TlsPeer& operator=(const TlsPeer&) = delete;

  uint16_t port() const;
  // TCP connections accepted so far (counted before any TLS).
  size_t accepted_count() const;
  // One entry per connection whose handshake finished (or failed); none in kAcceptOnly.
  std::vector<TlsPeerConnection> connections() const;
  size_t connection_count() const;
  bool WaitForConnections(size_t n, std::chrono::milliseconds timeout) const;
  bool WaitForAccepted(size_t n, std::chrono::milliseconds timeout) const;

 private:
  void HandleConnection(int fd);

  TlsPeerMode mode_;
  TlsPeerAfterHandshake after_;
  struct SslContext;
  std::unique_ptr<SslContext> ctx_;
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  Recorder<TlsPeerConnection> connections_;
  std::unique_ptr<net::ConnectionServer> server_;  // last: stopped before the rest goes
};

}  // namespace hotfix::testsupport
