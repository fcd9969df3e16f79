// The service's gRPC server: TCP listeners (TLS, or plaintext h2c for the health port), one
// event loop per thread, each with its own epoll waiting on every listener
// (EPOLLEXCLUSIVE: the kernel wakes one loop per connection), and H2Session for each
// connection. A connection lives on the loop that accepted it from accept to close: no
// lock and no hand-off between threads on the path of a call. The handler runs inline.
//
//   GrpcServerOptions options;  options.listeners = {{"0.0.0.0:8443", true, &handler}};
//   auto server = GrpcServer::Start(std::move(options));   // binds, or a Status
//   (*server)->port(0);  ...  (*server)->Drain(grace);
//
// Connection limits (docs/SERVICE.md, "Limits"): over max_connections, or over
// max_connections_per_peer for one source address, a new connection is accepted and closed at
// once (counted, never blocking the listener); when accept() fails for lack of file
// descriptors, one connection is shed with a reserved descriptor, the listener keeps
// accepting, and accepting() says false until an accept succeeds again. A listener apart (the
// health port) has a cap of its own. Behind a PROXY header, only the proxies' networks may
// connect, and an address whose peers keep being at fault is mostly shed before the handshake
// (refused_peers.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "service/transport/h2_session.h"
#include "service/transport/peer_networks.h"
#include "service/transport/refused_peers.h"
#include "service/transport/tls_server_context.h"

namespace hotfix::service {

class MemoryPool;

struct ListenerSpec {
  std::string address;             // "ADDR:PORT"; port 0 picks one
  bool tls = true;                 // false: h2c (the plaintext health port)
  GrpcHandler* handler = nullptr;  // borrowed
  std::string flag;                // for messages: "--listen"
  // Kept accepting through a drain (a health port that should say NOT_SERVING rather than
  // refuse); its connections do not hold the drain up and are closed at its end.
  bool open_while_draining = false;
  // Every connection starts with a PROXY protocol v2 header (proxy_protocol.h), read before
  // TLS within handshake_timeout: its source address is the connection's peer (the per-peer
  // limit, the access log); a connection without one is refused.
  bool proxy_protocol = false;
  // With proxy_protocol: the TCP peers (the proxies) whose header is believed; a connection
  // from any other address is closed at accept (proxy_peer_not_allowed). Required with
  // proxy_protocol: a header from anyone who reaches the port would let them be any node.
  std::optional<PeerNetworks> proxy_protocol_from;
  // A listener apart (the plaintext health port): its connections are counted against this
  // cap of its own, not the server's max_connections nor the per-peer cap, and keep no
  // metadata and no share of the kept-bytes budget. So a flood that fills the main listener
  // cannot fail kubelet's probes, and the probes take nothing the calls need. 0: shared.
  size_t own_max_connections = 0;
};

struct GrpcServerOptions {
  std::vector<ListenerSpec> listeners;
  TlsServerContext* tls = nullptr;  // borrowed; required when a listener is TLS
  std::chrono::seconds tls_refresh{10};
  // Called with the TLS pair's check, every tls_refresh, on one loop: other files to re-read
  // when they change (the attestation roots). May be empty.
  std::function<void()> refresh_files;
  H2Limits limits;
  std::vector<std::string> kept_metadata;  // see H2SessionOptions
  int threads = 0;                         // 0: one per core
  // 0: the file-descriptor limit less a reserve (RLIMIT_NOFILE is raised to its hard limit).
  size_t max_connections = 0;
  size_t max_connections_per_peer = 512;
  // On listeners with proxy_protocol only (elsewhere the peer is the proxy): an address whose
  // callers were refused max_refusals times in a window has its next connections closed after
  // their PROXY header, before TLS, until the window ends (refused_peers.h).
  RefusedPeerLimit refused_peers;
  std::chrono::milliseconds handshake_timeout{10000};
  // What connections on the call listeners may hold beyond their baseline, per peer address
  // (connection_memory.h), shared with the connections' accounts; null: nothing beyond each
  // connection's own limits. Each connection's first connection_allowance bytes of OpenSSL's
  // and nghttp2's allocations are its baseline, which the cap already charges.
  std::shared_ptr<MemoryPool> memory_pool;
  uint64_t connection_allowance = 0;
  // A peer that reads none of our output for this long is closed.
  std::chrono::milliseconds output_stall_timeout{10000};
  TransportEventSink* events = nullptr;  // borrowed; may be null
  Logger* log = nullptr;                 // borrowed
  // The loops' clock, on which every deadline is measured: the handshake, a connection's first
  // answer, a request, its idleness, an output stall, a drain's grace, the refused peers'
  // window. Empty: std::chrono::steady_clock. A test moves its own clock to pass a bound
  // without waiting it out; the loops read the clock at least every 50 ms of real time while
  // they hold connections.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

class GrpcServer {
 public:
  // Binds every listener (SO_REUSEPORT off: a busy port is a refusal, never a shared one)
  // and starts the loops.
  static StatusOr<std::unique_ptr<GrpcServer>> Start(GrpcServerOptions options);
  ~GrpcServer();  // Drain(0) if not drained
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  uint16_t port(size_t listener) const;
  // False while accept() fails for lack of file descriptors.
  bool accepting() const;
  size_t open_connections() const;
  size_t max_connections() const;

  // Closes the listeners (new connections are refused), sends every connection GOAWAY, lets
  // open streams finish for up to grace, closes what is left and stops the loops. Listeners
  // marked open_while_draining serve until the end. Idempotent.
  void Drain(std::chrono::milliseconds grace);

 private:
  struct Impl;
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hotfix::service
