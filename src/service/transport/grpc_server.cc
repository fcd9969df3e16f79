#include "service/transport/grpc_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "common/openssl.h"
#include "common/unique_fd.h"
#include "service/transport/connection_memory.h"
#include "service/transport/listen_socket.h"
#include "service/transport/memory_budget.h"
#include "service/transport/peer_counts.h"
#include "service/transport/proxy_protocol.h"

namespace hotfix::service {
namespace {

// Descriptors kept free of connections: listeners, epoll and eventfd per loop, the log, the
// store's inotify and folder reads, the metrics server, the reserve below.
constexpr size_t kFdReserve = 128;
// Output queued for a peer that does not read: reading pauses past it (OutputBacklogged).
constexpr size_t kMaxPendingOutputBytes = 64 * 1024;
// One read: a TLS record's worth.
constexpr size_t kReadChunk = 16 * 1024;
// Frames nghttp2 may hold for a connection before it stops being read until they are out:
// a read of 16 KiB can hold a thousand PINGs, and nghttp2 queues an answer to each.
constexpr size_t kMaxQueuedOutputFrames = 64;
// Reads from one connection per turn of the loop: a peer that keeps its socket full cannot
// keep the loop from its other connections.
constexpr int kReadsPerTurn = 16;
// How often each loop looks at its connections' timers.
constexpr std::chrono::milliseconds kTick{50};
// Epoll ids below this are not connections.
constexpr uint64_t kWakeId = 0;
constexpr uint64_t kFirstListenerId = 1;
constexpr uint64_t kFirstConnectionId = 1 << 20;

struct Listener : ListenerSpec {
  explicit Listener(const ListenerSpec& spec) : ListenerSpec(spec) {}
  bool apart() const { return own_max_connections > 0; }
  UniqueFd fd;
  uint16_t port = 0;
  mutable std::atomic<size_t> own_connections{0};  // apart(): its connections, every loop's
};

// gRPC's peer spelling, which the access log has always used: "ipv4:10.0.0.1:5000",
// "ipv6:[::1]:5000". address: the address alone, its bytes.
std::string PeerName(const sockaddr_storage& addr, std::string* address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
    address->assign(reinterpret_cast<const char*>(&in.sin_addr), sizeof in.sin_addr);
    return std::string("ipv4:") + text + ":" + std::to_string(ntohs(in.sin_port));
  }
  const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
  inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
  address->assign(reinterpret_cast<const char*>(&in6.sin6_addr), sizeof in6.sin6_addr);
  return std::string("ipv6:[") + text + "]:" + std::to_string(ntohs(in6.sin6_port));
}

// Raises the soft descriptor limit to the hard one; returns the soft limit now in force.
size_t RaiseFdLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    const rlimit raised{.rlim_cur = limit.rlim_max, .rlim_max = limit.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? size_t{1} << 20 : static_cast<size_t>(limit.rlim_cur);
}

}  // namespace

struct GrpcServer::Impl {
  class Loop;

  // options.clock's time, or the steady clock's.
  SteadyClock::time_point Now() const {
    return options.clock ? options.clock() : SteadyClock::now();
  }

  GrpcServerOptions options;
  std::vector<std::unique_ptr<Listener>> listeners;
  std::vector<std::unique_ptr<Loop>> loops;
  size_t max_connections = 0;
  std::atomic<size_t> connections{0};
  PeerCounts peer_counts;  // open connections per source address, exactly
  std::atomic<bool> fd_exhausted{false};
  std::unique_ptr<RefusedPeers> refused_peers;  // when a listener takes PROXY headers
  // A descriptor held in reserve: closed to accept-and-shed one connection when accept()
  // fails with EMFILE, so the backlog drains instead of spinning the loop.
  std::mutex reserve_mu;
  int reserve_fd = -1;
  std::mutex drain_mu;
  bool drained = false;

  ~Impl() {
    if (reserve_fd >= 0) close(reserve_fd);
  }
  void ShedWithReserve(int listen_fd);
  // Counts a connection against its source address; false (reported, uncounted) past
  // max_connections_per_peer.
  bool AdmitPeer(const std::string& address, const std::string& peer) {
    if (!peer_counts.Admit(address, options.max_connections_per_peer)) {
      Report(TransportEvent::kShedPerPeer, peer);
      return false;
    }
    return true;
  }
  void Report(TransportEvent event, std::string_view peer, std::string_view detail = {}) {
    if (options.events != nullptr) options.events->OnTransportEvent(event, peer, detail);
  }
};

class GrpcServer::Impl::Loop {
 public:
  Loop(Impl* server, int index) : server_(server), index_(index) {}
  ~Loop() { Join(); }

  Status Init();
  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  // From another thread: stop accepting, GOAWAY every connection, close at the deadline.
  void BeginDrain(SteadyClock::time_point deadline);
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Connection {
    uint64_t id = 0;
    UniqueFd fd;
    ossl::SslPtr ssl;  // null for h2c
    bool handshaking = false;
    SteadyClock::time_point handshake_deadline;
    const Listener* listener = nullptr;
    std::string peer;
    bool peer_counted = false;  // in server_->peer_counts, under `address`
    // --proxy-protocol: the header read so far. The peer's address (bytes): the proxy's
    // until the header names the node.
    bool awaiting_proxy_header = false;
    std::string proxy_header;
    std::string address;
    // The header's destination, the address the node dialed: a ClientHello without a server
    // name is served the certificate for it (TlsServerContext::SetArrivalAddress).
    std::optional<sockaddr_storage> arrived_on;
    // Its account of what it holds (connection_memory.h): from when its address is known, on
    // the call listeners, with a pool. Its ssl's and session's allocations name it, so it
    // outlives them whatever the order (ConnectionMemory::Close).
    ConnectionMemory* memory = nullptr;
    std::unique_ptr<H2Session> session;
    std::string out;  // bytes owed to the peer, from out_offset on
    size_t out_offset = 0;
    uint64_t out_charged = 0;              // out's capacity, charged to memory
    bool out_overdrawn = false;            // out's capacity did not fit memory's share
    SteadyClock::time_point output_since;  // when out last became non-empty or drained some
    // Waiting for the peer to take output: then EPOLLOUT alone, for a peer that sends
    // without reading must not wake a loop that will not read it (level-triggered EPOLLIN).
    bool epollout = false;
    bool closing = false;        // flush what is owed, then close
    bool at_fault = false;       // its TLS handshake failed or ran out (refused_peers.h)
    bool read_paused = false;    // stopped reading with bytes maybe left (in OpenSSL's buffer)
    bool resume_queued = false;  // in resume_
  };

  void Run();
  int WaitMs(SteadyClock::time_point next_tick) const;
  void Accept(Listener* listener);
  void OnEvent(Connection* conn, uint32_t events);
  // Reads no more than the header needs; then the peer is its source and TLS starts.
  void ReadProxyHeader(Connection* conn);
  void StartTls(Connection* conn);
  void Handshake(Connection* conn);
  void StartSession(Connection* conn);
  void ReadSome(Connection* conn);
  // Why reading pauses: output the peer has not taken, or too many frames queued in nghttp2.
  bool OutputBacklogged(const Connection* conn) const;
  void QueueResume(Connection* conn);
  void ResumeReading();
  void Flush(Connection* conn);
  void UpdateInterest(Connection* conn, bool want_out);
  void OpenAccount(Connection* conn);
  void ChargeOutput(Connection* conn);
  // Closes `id` if it still exists and holds more than its account could pay for.
  void CloseIfOverdrawn(uint64_t id);
  void Close(Connection* conn);
  void Tick(SteadyClock::time_point now);
  void DrainNow();
  size_t Pending(const Connection* conn) const { return conn->out.size() - conn->out_offset; }

  Impl* server_;
  int index_;
  UniqueFd epoll_;
  UniqueFd wake_;
  std::thread thread_;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
  size_t draining_connections_ = 0;  // of connections_, those a drain waits for
  // Connections to read again after this turn's events: epoll cannot see what OpenSSL has
  // buffered, nor a connection that paused for its turn's share or for its output.
  std::vector<uint64_t> resume_;
  uint64_t next_id_ = 0;
  std::shared_ptr<SSL_CTX> ssl_ctx_;
  uint64_t ssl_generation_ = 0;
  std::array<char, kReadChunk> buffer_{};
  SteadyClock::time_point next_tls_check_;
  // Set by BeginDrain (another thread), acted on by Run.
  std::atomic<bool> drain_requested_{false};
  std::atomic<int64_t> drain_deadline_ns_{0};
  bool draining_ = false;
  SteadyClock::time_point drain_deadline_;
};

Status GrpcServer::Impl::Loop::Init() {
  epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
  wake_ = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (epoll_.get() < 0 || wake_.get() < 0) return Status::FromErrno("epoll/eventfd", errno);
  epoll_event ev{.events = EPOLLIN, .data = {.u64 = kWakeId}};
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  for (size_t i = 0; i < server_->listeners.size(); ++i) {
    epoll_event lev{.events = EPOLLIN | EPOLLEXCLUSIVE, .data = {.u64 = kFirstListenerId + i}};
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, server_->listeners[i]->fd.get(), &lev) != 0) {
      return Status::FromErrno("epoll_ctl(listener)", errno);
    }
  }
  next_id_ = kFirstConnectionId;
  if (server_->options.tls != nullptr) ssl_ctx_ = server_->options.tls->Current(&ssl_generation_);
  next_tls_check_ = server_->Now() + server_->options.tls_refresh;
  return Status::Ok();
}

void GrpcServer::Impl::Loop::BeginDrain(SteadyClock::time_point deadline) {
  drain_deadline_ns_.store(deadline.time_since_epoch().count());
  drain_requested_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t ignored = write(wake_.get(), &one, sizeof one);
}

void GrpcServer::Impl::Loop::Run() {
  std::array<epoll_event, 64> events;
  SteadyClock::time_point next_tick = server_->Now() + kTick;
  for (;;) {
    if (draining_ && (draining_connections_ == 0 || server_->Now() >= drain_deadline_)) {
      // Nothing left to wait for, or the grace is over: whatever is left is cut off.
      while (!connections_.empty()) Close(connections_.begin()->second.get());
      return;
    }
    int n =
        epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), WaitMs(next_tick));
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kWakeId) {
        uint64_t count = 0;
        [[maybe_unused]] ssize_t ignored = read(wake_.get(), &count, sizeof count);
        if (drain_requested_.load() && !draining_) DrainNow();
      } else if (id < kFirstConnectionId) {
        Accept(server_->listeners[id - kFirstListenerId].get());
      } else if (auto it = connections_.find(id); it != connections_.end()) {
        OnEvent(it->second.get(), events[i].events);
        CloseIfOverdrawn(id);
      }
    }
    ResumeReading();
    SteadyClock::time_point now = server_->Now();
    if (now >= next_tick) {
      Tick(now);
      next_tick = now + kTick;
    }
  }
}

// How long epoll_wait may sleep: until the next tick while there are connections to time out,
// else until this loop's next file check (loop 0) or, with nothing to wait for, until an event.
// Rounded up: a wait cut to whole milliseconds would wake before the tick is due and spin
// through its last fraction with a timeout of 0.
int GrpcServer::Impl::Loop::WaitMs(SteadyClock::time_point next_tick) const {
  if (!resume_.empty()) return 0;
  SteadyClock::time_point until = SteadyClock::time_point::max();
  if (!connections_.empty() || draining_) until = next_tick;
  if (draining_) until = std::min(until, drain_deadline_);
  if (index_ == 0 && server_->options.tls != nullptr) until = std::min(until, next_tls_check_);
  if (until == SteadyClock::time_point::max()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - server_->Now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 24 * 3600 * 1000));
}

void GrpcServer::Impl::Loop::DrainNow() {
  draining_ = true;
  drain_deadline_ = SteadyClock::time_point(SteadyClock::duration(drain_deadline_ns_.load()));
  for (const auto& listener : server_->listeners) {
    if (!listener->open_while_draining) {
      epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, listener->fd.get(), nullptr);
    }
  }
  std::vector<Connection*> all;
  for (auto& [id, conn] : connections_) {
    if (!conn->listener->open_while_draining) all.push_back(conn.get());
  }
  for (Connection* conn : all) {
    if (conn->session == nullptr) {
      Close(conn);  // still in the TLS handshake: nothing in flight
      continue;
    }
    conn->session->Shutdown();
    Flush(conn);
  }
}

void GrpcServer::Impl::Loop::Accept(Listener* listener) {
  Impl& server = *server_;
  // A bounded batch per wake-up, so one busy listener cannot starve the connections.
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    int fd = accept4(listener->fd.get(), reinterpret_cast<sockaddr*>(&addr), &len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        server.fd_exhausted.store(true);
        server.ShedWithReserve(listener->fd.get());
        server.Report(TransportEvent::kShedFdExhausted, "");
        continue;
      }
      return;  // EAGAIN: the backlog is empty
    }
    UniqueFd owned(fd);
    server.fd_exhausted.store(false);
    std::string address;
    std::string peer = PeerName(addr, &address);
    if (listener->proxy_protocol_from && !listener->proxy_protocol_from->Contains(addr)) {
      // Not one of the proxies: its header would name whatever address it liked.
      server.Report(TransportEvent::kProxyPeerNotAllowed, peer);
      continue;  // closed by owned
    }
    if (listener->apart()) {
      if (listener->own_connections.fetch_add(1) >= listener->own_max_connections) {
        listener->own_connections.fetch_sub(1);
        server.Report(TransportEvent::kShedMaxConnections, peer);
        continue;
      }
    } else if (server.connections.load() >= server.max_connections) {
      server.Report(TransportEvent::kShedMaxConnections, peer);
      continue;  // closed by owned
    }
    // Behind a proxy every connection comes from the proxy: the peer is known, and counted,
    // once its PROXY header says who it is.
    const bool count_peer = !listener->proxy_protocol && !listener->apart();
    if (count_peer && !server.AdmitPeer(address, peer)) continue;
    if (!listener->apart()) server.connections.fetch_add(1);
    // TCP_NODELAY came with the socket, from the listener (listen_socket.h).

    auto conn = std::make_unique<Connection>();
    conn->id = next_id_++;
    conn->fd = std::move(owned);
    conn->listener = listener;
    conn->peer = std::move(peer);
    conn->address = std::move(address);
    conn->peer_counted = count_peer;
    Connection* c = conn.get();
    if (!listener->proxy_protocol) OpenAccount(c);
    connections_.emplace(c->id, std::move(conn));
    if (!listener->open_while_draining) ++draining_connections_;
    server.Report(TransportEvent::kAccepted, c->peer);
    epoll_event ev{.events = EPOLLIN, .data = {.u64 = c->id}};
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c->fd.get(), &ev);
    c->handshake_deadline = server.Now() + server.options.handshake_timeout;
    if (listener->proxy_protocol) {
      c->awaiting_proxy_header = true;
      continue;  // EPOLLIN: ReadProxyHeader
    }
    StartTls(c);
  }
}

void GrpcServer::Impl::Loop::ReadProxyHeader(Connection* conn) {
  std::array<char, kMaxProxyHeaderBytes> chunk;
  for (;;) {
    const ProxyHeader h = ParseProxyHeader(conn->proxy_header);
    if (h.state == ProxyHeader::kInvalid) {
      server_->Report(TransportEvent::kProxyHeaderInvalid, conn->peer, h.error.message());
      Close(conn);
      return;
    }
    if (h.state == ProxyHeader::kComplete) {
      if (h.source) conn->peer = PeerName(*h.source, &conn->address);
      conn->arrived_on = h.destination;
      if (h.azure_link_id) {
        // Private endpoints share the Private Link service's NAT addresses: the link ID is
        // the finer key (a 5-byte key, never an IPv4 or IPv6 address's 4 or 16 bytes).
        const uint32_t id = *h.azure_link_id;
        conn->address = {'\xee', static_cast<char>(id), static_cast<char>(id >> 8),
                         static_cast<char>(id >> 16), static_cast<char>(id >> 24)};
        conn->peer += ";azure-link-id=" + std::to_string(id);
      }
      if (server_->refused_peers->Shed(conn->address, server_->Now())) {
        server_->Report(TransportEvent::kShedRefusedPeer, conn->peer);
        Close(conn);
        return;
      }
      if (!server_->AdmitPeer(conn->address, conn->peer)) {
        Close(conn);
        return;
      }
      conn->peer_counted = true;
      conn->awaiting_proxy_header = false;
      OpenAccount(conn);
      std::string().swap(conn->proxy_header);
      StartTls(conn);
      return;
    }
    // Never more than the header still needs: what follows is the TLS handshake's.
    const size_t want = h.size - conn->proxy_header.size();
    ssize_t n = recv(conn->fd.get(), chunk.data(), want, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;  // EPOLLIN again when more arrives
    if (n <= 0) {
      Close(conn);  // closed or reset before its header was whole
      return;
    }
    conn->proxy_header.append(chunk.data(), static_cast<size_t>(n));
  }
}

void GrpcServer::Impl::Loop::StartTls(Connection* conn) {
  if (!conn->listener->tls) {
    StartSession(conn);
    return;
  }
  if (server_->options.tls->generation() != ssl_generation_) {
    ssl_ctx_ = server_->options.tls->Current(&ssl_generation_);
  }
  ConnectionMemoryScope scope(conn->memory);
  conn->ssl.reset(SSL_new(ssl_ctx_.get()));
  if (!conn->ssl || SSL_set_fd(conn->ssl.get(), conn->fd.get()) != 1) {
    ERR_clear_error();
    Close(conn);
    return;
  }
  if (conn->arrived_on && server_->options.tls->selects_by_server_name()) {
    TlsServerContext::SetArrivalAddress(conn->ssl.get(), *conn->arrived_on);
  }
  SSL_set_accept_state(conn->ssl.get());
  conn->handshaking = true;
  // After a PROXY header the ClientHello may already be here: epoll reports it, level-
  // triggered, but the handshake may as well start now.
  if (conn->listener->proxy_protocol) Handshake(conn);
}

void GrpcServer::Impl::ShedWithReserve(int listen_fd) {
  std::lock_guard<std::mutex> lock(reserve_mu);
  if (reserve_fd >= 0) {
    close(reserve_fd);
    reserve_fd = -1;
  }
  int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) close(fd);
  reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void GrpcServer::Impl::Loop::OnEvent(Connection* conn, uint32_t events) {
  if ((events & (EPOLLERR | EPOLLHUP)) != 0 && (events & EPOLLIN) == 0) {
    Close(conn);
    return;
  }
  if (conn->awaiting_proxy_header) {
    ReadProxyHeader(conn);
    return;
  }
  if (conn->handshaking) {
    Handshake(conn);
    return;
  }
  uint64_t id = conn->id;
  if ((events & EPOLLOUT) != 0) Flush(conn);
  if (connections_.count(id) == 0) return;  // Flush closed it
  if ((events & EPOLLIN) != 0) ReadSome(conn);
}

void GrpcServer::Impl::Loop::Handshake(Connection* conn) {
  ERR_clear_error();
  int rv;
  {
    ConnectionMemoryScope scope(conn->memory);
    rv = SSL_accept(conn->ssl.get());
  }
  if (rv == 1) {
    conn->handshaking = false;
    StartSession(conn);
    return;
  }
  int error = SSL_get_error(conn->ssl.get(), rv);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
    UpdateInterest(conn, error == SSL_ERROR_WANT_WRITE);
    return;
  }
  // A server name no certificate is for (--tls-cert-dir) is its own event: a cluster whose
  // pair is missing from the folder, not a peer that cannot speak TLS.
  if (std::optional<std::string> refused = TlsServerContext::RefusedServerName(conn->ssl.get())) {
    ERR_clear_error();
    server_->Report(TransportEvent::kUnknownServerName, conn->peer, *refused);
  } else {
    server_->Report(TransportEvent::kHandshakeFailed, conn->peer,
                    ossl::DrainErrorsOr("the peer closed the connection"));
    conn->at_fault = true;  // not TLS a node speaks: a handshake flood counts
  }
  Close(conn);
}

void GrpcServer::Impl::Loop::StartSession(Connection* conn) {
  H2SessionOptions session_options;
  session_options.limits = server_->options.limits;
  session_options.handler = conn->listener->handler;
  session_options.events = server_->options.events;
  if (!conn->listener->apart()) session_options.kept_metadata = server_->options.kept_metadata;
  session_options.memory = conn->memory;
  conn->session = std::make_unique<H2Session>(session_options, conn->peer, server_->Now());
  if (draining_ && !conn->listener->open_while_draining) conn->session->Shutdown();
  // TLS 1.3 clients send their preface, and often the call, with the handshake's last flight:
  // it may already sit in OpenSSL's buffer, where epoll cannot see it. Reading it first lets
  // our SETTINGS leave in the same record and segment as the answer.
  ReadSome(conn);
}

bool GrpcServer::Impl::Loop::OutputBacklogged(const Connection* conn) const {
  return Pending(conn) > 0 || conn->session->queued_output_frames() > kMaxQueuedOutputFrames;
}

void GrpcServer::Impl::Loop::QueueResume(Connection* conn) {
  if (conn->resume_queued) return;
  conn->resume_queued = true;
  resume_.push_back(conn->id);
}

void GrpcServer::Impl::Loop::ResumeReading() {
  std::vector<uint64_t> ids;
  ids.swap(resume_);
  for (uint64_t id : ids) {
    auto it = connections_.find(id);
    if (it == connections_.end()) continue;
    Connection* conn = it->second.get();
    conn->resume_queued = false;
    // Not while the peer owes us a read: Flush queues it again once it drained.
    if (conn->read_paused && !conn->epollout) ReadSome(conn);
    CloseIfOverdrawn(id);
  }
  // What this reading queued waits for the next turn: others' events come first.
}

void GrpcServer::Impl::Loop::ReadSome(Connection* conn) {
  if (conn->closing) return;
  conn->read_paused = false;
  for (int reads = 0;; ++reads) {
    if (OutputBacklogged(conn)) {
      // Flush below sends what it can; reading resumes once nothing is left (Flush), so a
      // peer that never reads parks its connection here at no cost until the stall timeout.
      conn->read_paused = true;
      break;
    }
    if (reads == kReadsPerTurn) {
      conn->read_paused = true;
      QueueResume(conn);
      break;
    }
    ssize_t n;
    if (conn->ssl) {
      ERR_clear_error();
      int rv;
      {
        ConnectionMemoryScope scope(conn->memory);
        rv = SSL_read(conn->ssl.get(), buffer_.data(), static_cast<int>(buffer_.size()));
      }
      if (rv <= 0) {
        int error = SSL_get_error(conn->ssl.get(), rv);
        ERR_clear_error();
        if (error == SSL_ERROR_WANT_READ) break;
        if (error == SSL_ERROR_WANT_WRITE) {
          conn->read_paused = true;
          UpdateInterest(conn, true);
          break;
        }
        Close(conn);  // EOF, a reset, or a TLS error
        return;
      }
      n = rv;
    } else {
      n = recv(conn->fd.get(), buffer_.data(), buffer_.size(), 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
      if (n <= 0) {
        Close(conn);
        return;
      }
    }
    if (!conn->session->Receive(std::string_view(buffer_.data(), static_cast<size_t>(n)),
                                server_->Now())) {
      conn->closing = true;  // the GOAWAY goes out, then the connection closes
      break;
    }
  }
  Flush(conn);
}

void GrpcServer::Impl::Loop::Flush(Connection* conn) {
  for (;;) {
    if (Pending(conn) == 0) {
      conn->out_offset = 0;
      // An idle connection keeps no output buffer (docs/SERVICE.md: memory per connection).
      if (conn->out.capacity() > 4096) std::string().swap(conn->out);
      conn->out.clear();
      if (conn->session) conn->session->TakeOutput(&conn->out, kMaxPendingOutputBytes);
      ChargeOutput(conn);
      if (conn->out.empty()) break;
      conn->output_since = server_->Now();
    }
    const char* data = conn->out.data() + conn->out_offset;
    size_t size = Pending(conn);
    ssize_t n;
    if (conn->ssl) {
      ERR_clear_error();
      int rv;
      {
        ConnectionMemoryScope scope(conn->memory);
        rv = SSL_write(conn->ssl.get(), data, static_cast<int>(size));
      }
      if (rv <= 0) {
        int error = SSL_get_error(conn->ssl.get(), rv);
        ERR_clear_error();
        if (error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_WANT_READ) {
          UpdateInterest(conn, true);
          return;
        }
        Close(conn);
        return;
      }
      n = rv;
    } else {
      n = send(conn->fd.get(), data, size, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        UpdateInterest(conn, true);
        return;
      }
      if (n < 0) {
        Close(conn);
        return;
      }
    }
    conn->out_offset += static_cast<size_t>(n);
    conn->output_since = server_->Now();
  }
  UpdateInterest(conn, false);
  if (conn->session == nullptr) return;
  if (conn->closing || conn->session->Finished()) {
    Close(conn);
    return;
  }
  if (conn->read_paused) QueueResume(conn);
}

void GrpcServer::Impl::Loop::UpdateInterest(Connection* conn, bool want_out) {
  if (conn->epollout == want_out) return;
  conn->epollout = want_out;
  epoll_event ev{.events = want_out ? EPOLLOUT : EPOLLIN, .data = {.u64 = conn->id}};
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, conn->fd.get(), &ev);
}

void GrpcServer::Impl::Loop::OpenAccount(Connection* conn) {
  if (conn->listener->apart() || server_->options.memory_pool == nullptr) return;
  conn->memory = ConnectionMemory::New(server_->options.memory_pool, conn->address,
                                       server_->options.connection_allowance);
}

void GrpcServer::Impl::Loop::ChargeOutput(Connection* conn) {
  if (conn->memory == nullptr) return;
  const uint64_t capacity = conn->out.capacity();
  if (capacity > conn->out_charged) {
    if (!conn->memory->TryCharge(capacity - conn->out_charged)) {
      conn->out_overdrawn = true;  // CloseIfOverdrawn ends it after this turn
      return;
    }
  } else if (capacity < conn->out_charged) {
    conn->memory->Release(conn->out_charged - capacity);
  }
  conn->out_charged = capacity;
}

void GrpcServer::Impl::Loop::CloseIfOverdrawn(uint64_t id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection* conn = it->second.get();
  if (conn->memory == nullptr || !(conn->memory->over() || conn->out_overdrawn)) return;
  server_->Report(TransportEvent::kMemoryOverShare, conn->peer);
  Close(conn);
}

void GrpcServer::Impl::Loop::Close(Connection* conn) {
  server_->Report(TransportEvent::kClosed, conn->peer);
  // Evidence that is this peer's own (refused_peers.h), once its PROXY header named it.
  const bool at_fault = conn->at_fault || (conn->session && conn->session->peer_at_fault());
  if (conn->listener->proxy_protocol && !conn->awaiting_proxy_header && at_fault) {
    server_->refused_peers->Record(conn->address, server_->Now());
  }
  if (conn->peer_counted) server_->peer_counts.Release(conn->address);
  if (conn->listener->apart()) {
    conn->listener->own_connections.fetch_sub(1);
  } else {
    server_->connections.fetch_sub(1);
  }
  // No EPOLL_CTL_DEL: the descriptor is never duplicated, so closing it removes it from the
  // epoll set (epoll(7), "Will closing a file descriptor cause it to be removed").
  if (!conn->listener->open_while_draining) --draining_connections_;
  ConnectionMemory* memory = conn->memory;
  if (memory != nullptr && conn->out_charged > 0) memory->Release(conn->out_charged);
  connections_.erase(conn->id);  // SSL_free, then close
  if (memory != nullptr) memory->Close();
}

void GrpcServer::Impl::Loop::Tick(SteadyClock::time_point now) {
  if (index_ == 0 && server_->options.tls != nullptr && now >= next_tls_check_) {
    server_->options.tls->ReloadIfChanged(server_->options.log);
    if (server_->options.refresh_files) server_->options.refresh_files();
    next_tls_check_ = now + server_->options.tls_refresh;
  }
  std::vector<Connection*> due;
  for (auto& [id, conn] : connections_) {
    if (conn->handshaking || conn->awaiting_proxy_header) {
      if (now >= conn->handshake_deadline) due.push_back(conn.get());
    } else if ((Pending(conn.get()) > 0 &&
                now - conn->output_since >= server_->options.output_stall_timeout) ||
               (conn->session && conn->session->NextDeadline() <= now)) {
      due.push_back(conn.get());
    }
  }
  for (Connection* conn : due) {
    if (conn->awaiting_proxy_header) {
      server_->Report(TransportEvent::kProxyHeaderTimeout, conn->peer);
      Close(conn);
    } else if (conn->handshaking) {
      server_->Report(TransportEvent::kHandshakeTimeout, conn->peer);
      conn->at_fault = true;
      Close(conn);
    } else if (Pending(conn) > 0 &&
               now - conn->output_since >= server_->options.output_stall_timeout) {
      server_->Report(TransportEvent::kOutputStalled, conn->peer);
      Close(conn);
    } else {
      const uint64_t id = conn->id;
      conn->session->OnTimer(now);
      Flush(conn);
      CloseIfOverdrawn(id);
    }
  }
}

StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(GrpcServerOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  GrpcServerOptions& o = impl->options;
  // Only listeners with a PROXY header know a node's address (its table is 4,096 slots).
  if (std::any_of(o.listeners.begin(), o.listeners.end(),
                  [](const ListenerSpec& l) { return l.proxy_protocol; })) {
    impl->refused_peers = std::make_unique<RefusedPeers>(o.refused_peers);
  }
  for (const ListenerSpec& spec : o.listeners) {
    if (spec.tls && o.tls == nullptr) return Status::Internal("a TLS listener needs a context");
    if (spec.proxy_protocol && !spec.proxy_protocol_from) {
      return Status::InvalidArgument(spec.flag +
                                     " with a PROXY header needs the proxies' "
                                     "networks (--proxy-protocol-from)");
    }
    auto listener = std::make_unique<Listener>(spec);
    StatusOr<UniqueFd> fd = ListenTcp(spec.address, spec.flag, &listener->port);
    if (!fd.ok()) return fd.status();
    listener->fd = std::move(*fd);
    impl->listeners.push_back(std::move(listener));
  }
  size_t fd_limit = RaiseFdLimit();
  // Listeners apart hold descriptors beside the cap: kept free of it as the reserve is.
  size_t reserve = kFdReserve;
  for (const auto& listener : impl->listeners) reserve += listener->own_max_connections;
  size_t ceiling = fd_limit > 2 * reserve ? fd_limit - reserve : fd_limit / 2;
  impl->max_connections = o.max_connections == 0 ? ceiling : std::min(o.max_connections, ceiling);
  impl->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int threads = o.threads > 0 ? o.threads
                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 0; i < threads; ++i) {
    auto loop = std::make_unique<Impl::Loop>(impl.get(), i);
    if (Status st = loop->Init(); !st.ok()) return st;
    impl->loops.push_back(std::move(loop));
  }
  for (auto& loop : impl->loops) loop->Start();
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl)));
}

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcServer::~GrpcServer() { Drain(std::chrono::milliseconds(0)); }

uint16_t GrpcServer::port(size_t listener) const { return impl_->listeners.at(listener)->port; }
bool GrpcServer::accepting() const { return !impl_->fd_exhausted.load(); }
size_t GrpcServer::open_connections() const { return impl_->connections.load(); }
size_t GrpcServer::max_connections() const { return impl_->max_connections; }

void GrpcServer::Drain(std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> lock(impl_->drain_mu);
  if (impl_->drained) return;
  impl_->drained = true;
  SteadyClock::time_point deadline = impl_->Now() + grace;
  for (auto& loop : impl_->loops) loop->BeginDrain(deadline);
  // Each loop takes the listeners out of its epoll first thing; closing them here as well
  // makes the kernel refuse new connections at once.
  for (auto& listener : impl_->listeners) {
    if (!listener->open_while_draining) shutdown(listener->fd.get(), SHUT_RDWR);
  }
  for (auto& loop : impl_->loops) loop->Join();
  impl_->listeners.clear();
}

}  // namespace hotfix::service
