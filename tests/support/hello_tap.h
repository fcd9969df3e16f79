// HelloTap: a loopback TCP relay that records what each client offered in its TLS
// ClientHello (SNI and the ALPN list) and forwards the original bytes untouched to an
// upstream, then relays both ways. Put it between a proxy and a backend to see exactly what
// reached that backend, or between a client and a server to see what the client sent.
//
//   HelloTap tap("127.0.0.1", lps.port());
//   ... connect through 127.0.0.1:tap.port() ...
//   tap.WaitForConnections(1, 10s);  tap.connections()[0].alpn == {"aks-live-patching", "h2"}
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "recorder.h"

namespace hotfix::testsupport {

namespace net {
class ConnectionServer;
}

struct ClientHelloInfo {
  std::string sni;                // empty when no server_name extension was sent
  std::vector<std::string> alpn;  // offered protocols in order; empty when none
  bool has_alpn_extension = false;
};

enum class HelloParse { kComplete, kNeedMore, kNotTls };

// Parses the first bytes a TLS client sent with OpenSSL's ClientHello callback (the bytes
// are fed to a throw-away SSL server object, which is aborted in the callback).
HelloParse ParseClientHello(std::string_view bytes, ClientHelloInfo* info, std::string* error);

struct TappedConnection {
  bool parsed = false;  // false: not TLS, or the client closed before a full ClientHello
  std::string error;
  ClientHelloInfo hello;
  bool upstream_connected = false;
};

// Sets SIGPIPE to SIG_IGN process-wide, like every server here.
class HelloTap {
 public:
  // Listens on 127.0.0.1:listen_port (0 = any free port); throws if it cannot.
  HelloTap(std::string upstream_host, uint16_t upstream_port, uint16_t listen_port = 0);
  ~HelloTap();  // closes every relayed connection and joins its threads
  HelloTap(const HelloTap&) = delete;
  HelloTap& operator=(const HelloTap&) = delete;

  uint16_t port() const;
  // One entry per accepted connection, in the order their ClientHello was parsed.
  std::vector<TappedConnection> connections() const;
  size_t connection_count() const;
  bool WaitForConnections(size_t n, std::chrono::milliseconds timeout) const;
  void ClearConnections();

 private:
  void HandleConnection(int fd);

  std::string upstream_host_;
  uint16_t upstream_port_;
  Recorder<TappedConnection> connections_;
  std::unique_ptr<net::ConnectionServer> server_;  // last: stopped before the rest goes
};

}  // namespace hotfix::testsupport
