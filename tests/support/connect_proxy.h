// ConnectProxy: an in-process HTTP CONNECT proxy on 127.0.0.1 that records each request head
// and then tunnels, refuses, stays silent or answers with an endless header.
//
//   ConnectProxy proxy(ConnectProxyMode::kTunnel, upstream.port());
//   ... dial through 127.0.0.1:proxy.port() ...
//   proxy.requests().at(0)   // "CONNECT host:443 HTTP/1.1\r\nHost: host:443\r\n\r\n"
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hotfix::testsupport {

namespace net {
class ConnectionServer;
}

enum class ConnectProxyMode {
  // "200 Connection established", then bytes both ways to 127.0.0.1:<upstream port>, whatever
  // the CONNECT line named: a tunnel that works proves the client left name resolution to
  // the proxy.
  kTunnel,
  // "403 Forbidden".
  kForbidden,
  // Never answers.
  kSilent,
  // "HTTP/1.1 200 OK" and a 20,000-byte header line that never ends.
  kHugeHeader,
};

// Like every server here, sets SIGPIPE to SIG_IGN process-wide.
class ConnectProxy {
 public:
  explicit ConnectProxy(ConnectProxyMode mode, uint16_t upstream_port = 0);  // listening
  ~ConnectProxy();  // closes every connection, joins every thread
  ConnectProxy(const ConnectProxy&) = delete;
  ConnectProxy& operator=(const ConnectProxy&) = delete;

  uint16_t port() const;
  // Each connection's request head as received ("\r\n\r\n" included), recorded before the
  // proxy answers.
  std::vector<std::string> requests() const;

 private:
  void HandleConnection(int fd);

  ConnectProxyMode mode_;
  uint16_t upstream_port_;
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
  std::unique_ptr<net::ConnectionServer> server_;  // last: stopped before the rest goes
};

}  // namespace hotfix::testsupport
