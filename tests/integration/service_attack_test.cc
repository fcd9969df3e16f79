// live-patching-service against an unauthenticated attacker at the TLS and HTTP/2 layers.
// Every byte before the identity check is the attacker's, so these cases bound what such a
// client can make the service hold and whether real nodes are still served meanwhile.
//
// Each case starts the real binary afresh, warms it up with one call, reads its idle VmRSS,
// then for a few seconds runs one attack from raw TLS sockets (ALPN h2, frames written by
// hand: h2_frames.h) while a node-like libgrpc++ client calls GetComponentConfig every
// 100 ms on a new connection each time. It asserts that the peak RSS (sampled every 50 ms)
// stayed under idle + 64 MiB, that every one of the node's calls (about 35) returned OK, and that
// the service is alive and answers afterwards. An attack that takes the RSS past idle + 256 MiB is
// stopped early (and fails the bound): a server without limits would otherwise take the machine
// with it.
//
//   attacker (raw TLS, h2 frames) ---+
//                                     +--> live-patching-service (fresh per case)
//   node (libgrpc++, every 100 ms) ---+         VmRSS sampled every 50 ms
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "h2_frames.h"
#include "haproxy.h"
#include "raw_h2_server.h"
#include "service_fixture.h"
#include "socket_util.h"
#include "tls_client.h"

namespace hotfix::testsupport {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr char kServedMap[] = R"({"hotfixes":{"202604.01":"202604.01.3"}})";
// A component whose answer is nearly the largest a file may be (1 MiB): a version of 1,000,000
// digits, which the format allows.
constexpr char kBigComponent[] = "bigComponent";
std::string BigComponentJson() {
  return R"({"hotfixes":{"202604.01":"202604.01.)" + std::string(1000000, '7') + "\"}}";
}
constexpr uint64_t kMiB = 1024 * 1024;

// Long enough for every attack to reach its steady state (and ~30 node calls), short enough
// for the whole file to run in about a minute under ASan on two cores.
constexpr milliseconds kAttackDuration{3500};
constexpr milliseconds kLegitInterval{100};
// hotfix-agent's own budget for the call (--lps-timeout).
constexpr milliseconds kLegitDeadline{3000};
constexpr milliseconds kRssSampleInterval{50};
constexpr long kRssBoundKb = 64 * 1024;
constexpr long kRssAbortKb = 256 * 1024;
// A server that stops reading from a connection that does not read its answers is defending
// itself; the attacker then moves on to a new connection.
constexpr milliseconds kStallTimeout{500};
constexpr milliseconds kOpenTimeout{2000};

long MaxOpenFiles(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Max open files", 0) == 0) return std::stol(line.substr(26));
  }
  return -1;
}

std::string Tail(const std::string& text, size_t n) {
  return text.size() > n ? text.substr(text.size() - n) : text;
}

// ---- What an attack shares with the test -------------------------------------------------

struct AttackStats {
  std::atomic<uint64_t> connections{0};       // TLS + HTTP/2 set up
  std::atomic<uint64_t> connect_failures{0};  // TCP, TLS or the server's SETTINGS failed
  std::atomic<uint64_t> frames{0};            // abusive frames sent
  std::atomic<uint64_t> bytes{0};             // TLS plaintext sent
  std::atomic<uint64_t> goaways{0};
  std::atomic<uint64_t> resets{0};       // RST_STREAM received
  std::atomic<uint64_t> peer_closes{0};  // EOF or reset seen
  std::atomic<uint64_t> stalls{0};       // the server stopped reading for kStallTimeout

  std::string Summary() const {
    return "connections=" + std::to_string(connections) +
           " connect_failures=" + std::to_string(connect_failures) +
           " frames=" + std::to_string(frames) + " MiB_sent=" + std::to_string(bytes / kMiB) +
           " goaways=" + std::to_string(goaways) + " rst_received=" + std::to_string(resets) +
           " peer_closes=" + std::to_string(peer_closes) + " stalls=" + std::to_string(stalls);
  }
};

struct AttackCtl {
  uint16_t port = 0;
  // The loopback address its connections come from (another peer to the service); null:
  // 127.0.0.1.
  const char* source = nullptr;
  std::atomic<bool> stop{false};
  AttackStats stats;
  bool Running() const { return !stop.load(std::memory_order_relaxed); }
};

// ---- Raw sockets -------------------------------------------------------------------------

bool WaitFd(int fd, short events, milliseconds timeout) {
  pollfd p{fd, events, 0};
  return poll(&p, 1, static_cast<int>(timeout.count())) > 0;
}

// Non-blocking connects to 127.0.0.1:port (from `source`, another loopback address, if
// given), all in flight at once; the ones that completed within `timeout` (a full accept
// backlog drops SYNs, so some may never). Non-blocking fds.
std::vector<int> ConnectMany(uint16_t port, size_t n, milliseconds timeout,
                             const char* source = nullptr) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  if (source != nullptr) inet_pton(AF_INET, source, &from.sin_addr);
  std::vector<pollfd> pending;
  std::vector<int> done;
  for (size_t i = 0; i < n; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    if (source != nullptr && bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
      close(fd);
      break;
    }
    int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    if (rc == 0) {
      done.push_back(fd);
    } else if (errno == EINPROGRESS) {
      pending.push_back({fd, POLLOUT, 0});
    } else {
      close(fd);
    }
  }
  auto until = steady_clock::now() + timeout;
  while (!pending.empty() && steady_clock::now() < until) {
    auto left = std::chrono::duration_cast<milliseconds>(until - steady_clock::now());
    if (poll(pending.data(), pending.size(), static_cast<int>(left.count()) + 1) <= 0) continue;
    std::vector<pollfd> still;
    for (const pollfd& p : pending) {
      if (p.revents == 0) {
        still.push_back(p);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) {
        done.push_back(p.fd);
      } else {
        close(p.fd);
      }
    }
    pending = std::move(still);
  }
  for (const pollfd& p : pending) close(p.fd);
  return done;
}

int ConnectOne(uint16_t port, milliseconds timeout, const char* source = nullptr) {
  std::vector<int> fds = ConnectMany(port, 1, timeout, source);
  return fds.empty() ? -1 : fds[0];
}

// One client context for every attack connection: ALPN h2, no verification (the attacker
// does not care who answers; the node's client does).
SSL_CTX* AttackerTlsContext() {
  static SSL_CTX* ctx = [] {
    SSL_CTX* c = SSL_CTX_new(TLS_client_method());
    static const unsigned char kAlpn[] = {2, 'h', '2'};
    SSL_CTX_set_alpn_protos(c, kAlpn, sizeof kAlpn);
    SSL_CTX_set_verify(c, SSL_VERIFY_NONE, nullptr);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return c;
  }();
  return ctx;
}

// The first flight of a real TLS client (a ClientHello offering h2), for connections that
// start a handshake and never finish it.
std::string ClientHelloBytes() {
  SSL* ssl = SSL_new(AttackerTlsContext());
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  SSL_set_tlsext_host_name(ssl, kApiserverFqdn);
  SSL_connect(ssl);  // wants to read the ServerHello; the ClientHello is in `out`
  char* data = nullptr;
  long n = BIO_get_mem_data(out, &data);
  std::string hello(data, static_cast<size_t>(std::max(0L, n)));
  SSL_free(ssl);
  ERR_clear_error();
  return hello;
}

// An HTTP/2 connection over TLS whose every frame the caller writes. Non-blocking: no call
// waits longer than its timeout, and none past the attack's end. It reads the server's
// frames only when asked (Pump, or while a write is blocked if asked to), answering SETTINGS
// and PINGs and returning flow-control credit like a live client unless `respond` is false
// (then nothing is ever sent between the caller's frames, e.g. inside a header block).
class H2Conn {
 public:
  // TCP + TLS (ALPN h2) + preface and SETTINGS, then waits for the server's SETTINGS.
  // `before_tls`: bytes sent first (a PROXY header, as a proxy would).
  static std::unique_ptr<H2Conn> Open(uint16_t port, AttackCtl* ctl, bool respond = true,
                                      std::string_view before_tls = {}) {
    auto fail = [ctl]() -> std::unique_ptr<H2Conn> {
      if (ctl) ++ctl->stats.connect_failures;
      return nullptr;
    };
    auto until = steady_clock::now() + kOpenTimeout;
    int fd = ConnectOne(port, kOpenTimeout, ctl != nullptr ? ctl->source : nullptr);
    if (fd < 0) return fail();
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!before_tls.empty() && send(fd, before_tls.data(), before_tls.size(), MSG_NOSIGNAL) !=
                                   static_cast<ssize_t>(before_tls.size())) {
      close(fd);
      return fail();
    }
    std::unique_ptr<H2Conn> c(new H2Conn(fd, ctl, respond));
    SSL_set_tlsext_host_name(c->ssl_, kApiserverFqdn);
    for (;;) {
      int r = SSL_connect(c->ssl_);
      if (r == 1) break;
      int e = SSL_get_error(c->ssl_, r);
      if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) || !c->BeforeDeadline(until)) {
        ERR_clear_error();
        return fail();
      }
      WaitFd(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, milliseconds(50));
    }
    const unsigned char* alpn = nullptr;
    unsigned alpn_len = 0;
    SSL_get0_alpn_selected(c->ssl_, &alpn, &alpn_len);
    if (alpn_len != 2 || std::memcmp(alpn, "h2", 2) != 0) return fail();
    // The client's SETTINGS: no push, the rest default.
    if (!c->Send(h2::ClientPreface() + h2::Settings({{h2::kEnablePush, 0}}))) return fail();
    while (!c->peer_settings_ && c->BeforeDeadline(until)) {
      if (!c->ReadAvailable(milliseconds(50))) return fail();
    }
    if (!c->peer_settings_) return fail();
    // Acknowledged now even when `respond` is false: before any header block is open.
    if (!respond) c->outbox_ += h2::SettingsAck();
    if (!c->Send("")) return fail();
    if (ctl) ++ctl->stats.connections;
    return c;
  }

  ~H2Conn() {
    SSL_free(ssl_);
    close(fd_);
  }
  H2Conn(const H2Conn&) = delete;
  H2Conn& operator=(const H2Conn&) = delete;

  // Writes everything (after any pending SETTINGS/PING acks and window updates). False when
  // the peer closed or reset, or stopped reading for kStallTimeout. `read_while_blocked`
  // keeps reading the peer while waiting, so that a server blocked on writing to us is not
  // counted as a stall; floods that must never read pass false.
  bool Send(std::string_view bytes, bool read_while_blocked = true) {
    if (!outbox_.empty()) {
      std::string out = std::move(outbox_);
      outbox_.clear();
      if (!Write(out, read_while_blocked)) return false;
    }
    return Write(bytes, read_while_blocked);
  }

  // Reads what the peer sent (waiting up to `wait` for something) and sends the answers a
  // live client owes. False once the connection is closed.
  bool Pump(milliseconds wait = milliseconds(0)) {
    if (!ReadAvailable(wait)) return false;
    return outbox_.empty() || Send("");
  }

  // Connected, no GOAWAY seen, not stalled: worth another frame.
  bool Usable() const { return !closed_ && !goaway_ && !stalled_; }
  // The server's SETTINGS_MAX_CONCURRENT_STREAMS (unlimited when not sent).
  uint32_t peer_max_streams() const { return peer_max_streams_; }
  uint32_t peer_initial_window() const { return peer_initial_window_; }
  // Connection-level credit granted so far (65535 + WINDOW_UPDATEs on stream 0).
  int64_t window_granted() const { return window_granted_; }
  // grpc-status of a stream once a header block carrying it arrived.
  std::optional<int> GrpcStatus(uint32_t stream) const {
    auto it = grpc_status_.find(stream);
    return it == grpc_status_.end() ? std::nullopt : std::optional<int>(it->second);
  }
  std::optional<uint32_t> ResetCode(uint32_t stream) const {
    auto it = reset_code_.find(stream);
    return it == reset_code_.end() ? std::nullopt : std::optional<uint32_t>(it->second);
  }
  bool closed() const { return closed_; }
  int fd() const { return fd_; }

 private:
  H2Conn(int fd, AttackCtl* ctl, bool respond)
      : fd_(fd), ssl_(SSL_new(AttackerTlsContext())), ctl_(ctl), respond_(respond) {
    SSL_set_fd(ssl_, fd_);
  }

  bool BeforeDeadline(steady_clock::time_point until) const {
    return steady_clock::now() < until && (ctl_ == nullptr || ctl_->Running());
  }

  void MarkClosed() {
    if (!closed_ && ctl_) ++ctl_->stats.peer_closes;
    closed_ = true;
    ERR_clear_error();
  }

  bool Write(std::string_view data, bool read_while_blocked) {
    auto until = steady_clock::now() + kStallTimeout;
    size_t off = 0;
    while (off < data.size()) {
      if (closed_) return false;
      size_t n = 0;
      int r = SSL_write_ex(ssl_, data.data() + off, data.size() - off, &n);
      if (r == 1) {
        off += n;
        if (ctl_) ctl_->stats.bytes += n;
        until = steady_clock::now() + kStallTimeout;  // progress: the peer is reading
        continue;
      }
      int e = SSL_get_error(ssl_, r);
      if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) {
        MarkClosed();  // EPIPE, ECONNRESET, or a TLS alert
        return false;
      }
      if (!BeforeDeadline(until)) {
        if (steady_clock::now() >= until) {
          stalled_ = true;
          if (ctl_) ++ctl_->stats.stalls;
        }
        return false;
      }
      short events = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
      if (read_while_blocked) events |= POLLIN;
      pollfd p{fd_, events, 0};
      poll(&p, 1, 50);
      if (read_while_blocked && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
        if (!ReadAvailable(milliseconds(0))) return false;
      }
    }
    return true;
  }

  bool ReadAvailable(milliseconds wait) {
    if (closed_) return false;
    if (wait.count() > 0 && SSL_pending(ssl_) == 0) WaitFd(fd_, POLLIN, wait);
    char buf[16384];
    // Bounded: a peer that sends without pause must not keep the attacker from attacking.
    for (int i = 0; i < 64; ++i) {
      size_t n = 0;
      int r = SSL_read_ex(ssl_, buf, sizeof buf, &n);
      if (r == 1) {
        reader_.Feed(std::string_view(buf, n));
        continue;
      }
      int e = SSL_get_error(ssl_, r);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) MarkClosed();
      break;
    }
    while (std::optional<h2::ReceivedFrame> f = reader_.Next()) OnFrame(*f);
    return !closed_;
  }

  void OnFrame(const h2::ReceivedFrame& f) {
    switch (f.type) {
      case h2::kSettings:
        if (f.flags & h2::kAck) break;
        peer_settings_ = true;
        for (auto [id, value] : h2::SettingsParams(f.payload)) {
          if (id == h2::kMaxConcurrentStreams) peer_max_streams_ = value;
          if (id == h2::kInitialWindowSize) peer_initial_window_ = value;
        }
        if (respond_) outbox_ += h2::SettingsAck();
        break;
      case h2::kPing:
        if (!(f.flags & h2::kAck) && respond_) {
          outbox_ += h2::Frame(h2::kPing, h2::kAck, 0, f.payload);
        }
        break;
      case h2::kWindowUpdate:
        if (f.stream_id == 0) window_granted_ += h2::ReadUint32(f.payload, 0) & 0x7fffffff;
        break;
      case h2::kGoaway:
        goaway_ = true;
        if (ctl_) ++ctl_->stats.goaways;
        break;
      case h2::kRstStream:
        reset_code_[f.stream_id] = h2::ReadUint32(f.payload, 0);
        if (ctl_) ++ctl_->stats.resets;
        break;
      case h2::kData:
        if (respond_ && !f.payload.empty()) {
          uint32_t n = static_cast<uint32_t>(f.payload.size());
          outbox_ += h2::WindowUpdate(0, n) + h2::WindowUpdate(f.stream_id, n);
        }
        break;
      case h2::kHeaders:
      case h2::kContinuation: {
        std::optional<std::string_view> fragment = h2::HeaderBlockFragment(f);
        if (!fragment) break;
        header_block_.append(*fragment);
        if (!(f.flags & h2::kEndHeaders)) break;
        // Every block goes through the decoder, whoever it is for: the dynamic table is the
        // connection's.
        if (std::optional<h2::HeaderFields> fields = decoder_.Decode(header_block_)) {
          for (const auto& [name, value] : *fields) {
            if (name == "grpc-status") grpc_status_[f.stream_id] = std::atoi(value.c_str());
          }
        }
        header_block_.clear();
        break;
      }
      default:
        break;
    }
  }

  int fd_;
  SSL* ssl_;
  AttackCtl* ctl_;
  bool respond_;
  bool closed_ = false;
  bool goaway_ = false;
  bool stalled_ = false;
  bool peer_settings_ = false;
  uint32_t peer_max_streams_ = UINT32_MAX;
  uint32_t peer_initial_window_ = h2::kDefaultWindow;
  int64_t window_granted_ = h2::kDefaultWindow;
  std::string outbox_;
  std::string header_block_;
  h2::FrameReader reader_;
  h2::HpackDecoder decoder_;
  std::map<uint32_t, int> grpc_status_;
  std::map<uint32_t, uint32_t> reset_code_;
};

// Runs `body` on one fresh connection after another until the attack ends; a connection the
// server closed, GOAWAYed or stopped reading is replaced, as an attacker would.
void OnEachConnection(AttackCtl& ctl, bool respond, const std::function<void(H2Conn&)>& body) {
  constexpr int kMaxConnections = 20000;  // a bound on the loop, far above what 4 s allow
  for (int i = 0; ctl.Running() && i < kMaxConnections; ++i) {
    std::unique_ptr<H2Conn> conn = H2Conn::Open(ctl.port, &ctl, respond);
    if (!conn) {
      std::this_thread::sleep_for(milliseconds(10));
      continue;
    }
    body(*conn);
  }
}

std::string RequestBlock(const h2::HeaderFields& extra = {}) {
  return h2::HpackBlock(h2::GrpcRequestFields(h2::kGetComponentConfigPath, kApiserverFqdn, extra));
}

// ---- The attacks -------------------------------------------------------------------------

// CVE-2023-44487: a stream opened and cancelled at once costs the client two frames and the
// server a call set-up, without ever counting against the concurrent-stream limit.
void RapidReset(AttackCtl& ctl) {
  constexpr int kPairsPerWrite = 64;
  const std::string block = RequestBlock();
  OnEachConnection(ctl, true, [&](H2Conn& c) {
    std::string batch;
    for (uint32_t id = 1; ctl.Running() && c.Usable() && id < (1u << 30);) {
      batch.clear();
      for (int i = 0; i < kPairsPerWrite; ++i, id += 2) {
        batch += h2::Headers(id, block, h2::kEndHeaders) + h2::RstStream(id, h2::kCancel);
      }
      if (!c.Send(batch)) return;
      ctl.stats.frames += 2 * kPairsPerWrite;
      c.Pump();
    }
  });
}

// A header block that never ends, each CONTINUATION adding a header with a new name.
void ContinuationFlood(AttackCtl& ctl) {
  constexpr int kFramesPerWrite = 64;
  constexpr uint64_t kMaxFramesPerConnection = 10'000'000;
  const std::string value(64, 'v');
  OnEachConnection(ctl, /*respond=*/false, [&](H2Conn& c) {
    if (!c.Send(h2::Headers(1, RequestBlock(), 0))) return;
    std::string batch;
    for (uint64_t n = 0; ctl.Running() && c.Usable() && n < kMaxFramesPerConnection;) {
      batch.clear();
      for (int i = 0; i < kFramesPerWrite; ++i, ++n) {
        batch +=
            h2::Continuation(1, h2::HpackLiteral("x-flood-" + std::to_string(n), value), false);
      }
      if (!c.Send(batch)) return;
      ctl.stats.frames += kFramesPerWrite;
      c.Pump();
    }
  });
}

// Streams a header block of `block_start` plus `literal_bytes` of `fill` in maximum-size
// CONTINUATION frames, ending the block only when `end` and every byte is sent.
bool StreamLiteral(AttackCtl& ctl, H2Conn& c, uint32_t stream, const std::string& block_start,
                   uint64_t literal_bytes, char fill, bool end) {
  if (!c.Send(h2::Headers(stream, block_start, 0))) return false;
  ++ctl.stats.frames;
  const std::string chunk(h2::kDefaultMaxFrameSize, fill);
  for (uint64_t sent = 0; sent < literal_bytes;) {
    if (!ctl.Running() || !c.Usable()) return false;
    std::string batch;
    for (int i = 0; i < 4 && sent < literal_bytes; ++i) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), literal_bytes - sent));
      sent += n;
      batch += h2::Continuation(stream, std::string_view(chunk).substr(0, n),
                                end && sent == literal_bytes);
      ++ctl.stats.frames;
    }
    if (!c.Send(batch)) return false;
    c.Pump();
  }
  return true;
}

// One 10 MiB header value, split over 640 CONTINUATION frames, then the same on the next
// stream.
void HeaderValueOverManyContinuations(AttackCtl& ctl) {
  constexpr uint64_t kValueBytes = 10 * kMiB;
  const std::string start = RequestBlock() + std::string(1, '\0') + h2::HpackString("x-split") +
                            h2::HpackStringLength(kValueBytes);
  OnEachConnection(ctl, false, [&](H2Conn& c) {
    for (uint32_t id = 1; id < 1000; id += 2) {
      if (!StreamLiteral(ctl, c, id, start, kValueBytes, 'a', /*end=*/true)) return;
    }
  });
}

// A literal that declares 100 MiB: a name on one connection, a Huffman-coded value on the
// next (0x00 bytes are valid Huffman code, so a decoder has no early reason to stop).
void HugeHpackLiteral(AttackCtl& ctl) {
  constexpr uint64_t kDeclared = 100 * kMiB;
  const std::string huge_name =
      RequestBlock() + std::string(1, '\0') + h2::HpackStringLength(kDeclared);
  const std::string huge_value = RequestBlock() + std::string(1, '\0') + h2::HpackString("x-huge") +
                                 h2::HpackStringLength(kDeclared, /*huffman=*/true);
  int n = 0;
  OnEachConnection(ctl, false, [&](H2Conn& c) {
    bool name = n++ % 2 == 0;
    StreamLiteral(ctl, c, 1, name ? huge_name : huge_value, kDeclared, name ? 'n' : '\0',
                  /*end=*/false);
  });
}

// HPACK integers stretched by runs of 0x80 continuation bytes, in each place a block holds
// one: a table size update, an indexed name, a name length, a value length.
void HpackVarintPadding(AttackCtl& ctl) {
  constexpr size_t kPadding = 15000;  // the block still fits one 16 KiB frame
  const std::string request = RequestBlock();
  const std::vector<std::string> blocks = {
      h2::HpackInteger(4096, 5, 0x20, kPadding) + request,
      request + h2::HpackInteger(16, 4, 0x00, kPadding) + h2::HpackString("gzip"),
      request + std::string(1, '\0') + h2::HpackStringLength(200, false, kPadding) +
          std::string(200, 'n') + h2::HpackString("v"),
      request + std::string(1, '\0') + h2::HpackString("x-pad") +
          h2::HpackStringLength(300, false, kPadding) + std::string(300, 'v'),
  };
  OnEachConnection(ctl, true, [&](H2Conn& c) {
    for (uint32_t id = 1; ctl.Running() && c.Usable() && id < (1u << 20); id += 2) {
      const std::string& block = blocks[(id / 2) % blocks.size()];
      if (!c.Send(h2::Headers(id, block, h2::kEndHeaders | h2::kEndStream))) return;
      ++ctl.stats.frames;
      c.Pump();
    }
  });
}

// The same control frame as fast as possible, never reading what the server owes for it.
void ControlFrameFlood(AttackCtl& ctl, const std::function<std::string(uint64_t)>& frame) {
  constexpr int kFramesPerWrite = 1000;
  constexpr uint64_t kMaxFramesPerConnection = 50'000'000;
  uint64_t n = 0;
  OnEachConnection(ctl, false, [&](H2Conn& c) {
    std::string batch;
    for (uint64_t sent = 0; ctl.Running() && sent < kMaxFramesPerConnection;
         sent += kFramesPerWrite) {
      batch.clear();
      for (int i = 0; i < kFramesPerWrite; ++i) batch += frame(n++);
      if (!c.Send(batch, /*read_while_blocked=*/false)) return;
      ctl.stats.frames += kFramesPerWrite;
    }
  });
}

// Connections take turns: thousands of 1-byte increments (connection and stream) then both
// windows overflowed; increments for streams never opened; zero increments.
void WindowUpdateAbuse(AttackCtl& ctl) {
  constexpr uint32_t kMaxIncrement = 0x7fffffff;
  const std::string request = RequestBlock();
  int kind = 0;
  OnEachConnection(ctl, true, [&](H2Conn& c) {
    if (!c.Send(h2::Headers(1, request, h2::kEndHeaders))) return;
    std::string batch;
    switch (kind++ % 3) {
      case 0:
        for (int round = 0; round < 20 && ctl.Running() && c.Usable(); ++round) {
          batch.clear();
          for (int i = 0; i < 500; ++i) batch += h2::WindowUpdate(0, 1) + h2::WindowUpdate(1, 1);
          if (!c.Send(batch)) return;
          ctl.stats.frames += 1000;
          c.Pump();
        }
        // Past 2^31-1: the stream's window (a stream error), then the connection's.
        c.Send(h2::WindowUpdate(1, kMaxIncrement) + h2::WindowUpdate(1, kMaxIncrement));
        c.Send(h2::WindowUpdate(0, kMaxIncrement) + h2::WindowUpdate(0, kMaxIncrement));
        ctl.stats.frames += 4;
        break;
      case 1:
        for (uint32_t id = 3; id < 3 + 2 * 2000; id += 2) batch += h2::WindowUpdate(id, 1000);
        c.Send(batch);
        ctl.stats.frames += 2000;
        break;
      default:
        for (int i = 0; i < 1000; ++i) batch += h2::WindowUpdate(1, 0) + h2::WindowUpdate(0, 0);
        c.Send(batch);
        ctl.stats.frames += 2000;
        break;
    }
    c.Pump(milliseconds(20));
  });
}

// As many streams as the server allows on a connection (at most 1000), each with a token-
// sized garbage authorization and the start of a request message that never completes, then
// the connection is held while the thread opens the next one.
void UnfinishedStreams(AttackCtl& ctl) {
  constexpr size_t kHeldConnections = 8;  // per thread
  constexpr uint32_t kMaxStreams = 1000;
  constexpr size_t kPartialMessage = 1024;  // of a declared 16000-byte message
  constexpr int kStreamsPerWrite = 50;
  // An attested document is a few KiB of base64; the attacker's is garbage of that size.
  const std::string block = RequestBlock({{"authorization", std::string(2048, 'A')}});
  const std::string partial = GrpcFrame(std::string(kPartialMessage, 'a'), 0, 16000);
  std::vector<std::unique_ptr<H2Conn>> held;
  while (ctl.Running()) {
    if (held.size() < kHeldConnections) {
      if (std::unique_ptr<H2Conn> c = H2Conn::Open(ctl.port, &ctl)) {
        uint32_t streams = std::min(c->peer_max_streams(), kMaxStreams);
        int64_t spent = 0;
        std::string batch;
        for (uint32_t s = 0; s < streams && ctl.Running() && c->Usable(); ++s) {
          uint32_t id = 1 + 2 * s;
          batch += h2::Headers(id, block, h2::kEndHeaders);
          ++ctl.stats.frames;
          // Within the flow-control credit the server gave: the abuse is in never finishing.
          if (c->window_granted() - spent >= static_cast<int64_t>(partial.size()) &&
              c->peer_initial_window() >= partial.size()) {
            batch += h2::Data(id, partial, false);
            spent += static_cast<int64_t>(partial.size());
            ++ctl.stats.frames;
          }
          if ((s + 1) % kStreamsPerWrite == 0 || s + 1 == streams) {
            if (!c->Send(batch)) break;
            batch.clear();
            c->Pump();  // credit that arrived meanwhile counts for the next streams
          }
        }
        held.push_back(std::move(c));
      }
    }
    for (auto& c : held) c->Pump();
    std::erase_if(held, [](const std::unique_ptr<H2Conn>& c) { return !c->Usable(); });
    std::this_thread::sleep_for(milliseconds(20));
  }
}

// Connections that never complete the TLS handshake: half send nothing, half the first half
// of a real ClientHello. Whatever the service closes is opened again.
void HandshakesNeverFinished(AttackCtl& ctl) {
  constexpr size_t kHeld = 500;
  constexpr size_t kMaxOpens = 5000;
  const std::string hello = ClientHelloBytes();
  const std::string half = hello.substr(0, hello.size() / 2);
  std::vector<int> fds;
  size_t opens = 0;
  while (ctl.Running()) {
    if (fds.size() < kHeld && opens < kMaxOpens) {
      std::vector<int> fresh = ConnectMany(ctl.port, kHeld - fds.size(), milliseconds(500));
      ctl.stats.connect_failures += kHeld - fds.size() - fresh.size();
      for (int fd : fresh) {
        if (opens++ % 2 == 1) net::SendAll(fd, half.data(), half.size());
        fds.push_back(fd);
      }
      ctl.stats.connections += fresh.size();
    }
    std::vector<pollfd> polls;
    for (int fd : fds) polls.push_back({fd, POLLIN, 0});
    poll(polls.data(), polls.size(), 50);
    std::vector<int> open;
    for (const pollfd& p : polls) {
      char buf[4096];
      if (p.revents != 0 && read(p.fd, buf, sizeof buf) <= 0) {
        ++ctl.stats.peer_closes;
        close(p.fd);
      } else {
        open.push_back(p.fd);
      }
    }
    fds = std::move(open);
  }
  for (int fd : fds) close(fd);
}

// gRPC requests whose message is a gzip bomb (15 MiB of zeros in under 16 KiB), the
// compressed flag set and grpc-encoding: gzip, from a client with no token, one after
// another within the flow-control credit the server grants.
void DecompressionBombs(AttackCtl& ctl, const std::string& message) {
  const std::string block = RequestBlock({{"grpc-encoding", "gzip"}});
  const auto size = static_cast<int64_t>(message.size());
  OnEachConnection(ctl, true, [&](H2Conn& c) {
    int64_t spent = 0;
    for (uint32_t id = 1; ctl.Running() && c.Usable() && id < 100000; id += 2) {
      // Wait (up to a second) for credit; a server that grants none is left for a new one.
      for (int i = 0; i < 20 && c.window_granted() - spent < size && c.Usable(); ++i) {
        c.Pump(milliseconds(50));
      }
      if (c.window_granted() - spent < size) return;
      if (!c.Send(h2::Headers(id, block, h2::kEndHeaders) + h2::Data(id, message, true))) return;
      spent += size;
      ctl.stats.frames += 2;
      c.Pump();
    }
  });
}

// Connections that each hold what one connection can make the service keep: every stream
// the server allows with a header list just under its 80 KiB cap (two authorization values,
// the kept metadata) and 16,000 bytes of a declared 16,384-byte message, never finished.
// Opened one after another until `count` were tried; those the service refused are counted in
// ctl.stats.connect_failures, the rest are held in `held` (the caller closes them).
void FullConnections(AttackCtl& ctl, size_t count, std::vector<std::unique_ptr<H2Conn>>* held,
                     std::mutex* mu) {
  const std::string block = RequestBlock(
      {{"authorization", std::string(60000, 'A')}, {"authorization", std::string(21000, 'B')}});
  const std::string partial = GrpcFrame(std::string(16000, 'a'), 0, 16384);
  for (size_t i = 0; i < count && ctl.Running(); ++i) {
    std::unique_ptr<H2Conn> c = H2Conn::Open(ctl.port, &ctl);
    if (!c) continue;
    const uint32_t streams = std::min<uint32_t>(c->peer_max_streams(), 4);
    for (uint32_t s = 0; s < streams && c->Usable(); ++s) {
      const uint32_t id = 1 + 2 * s;
      // HEADERS and CONTINUATIONs of at most the default frame size.
      std::string frames;
      for (size_t off = 0; off < block.size(); off += h2::kDefaultMaxFrameSize) {
        const std::string_view piece =
            std::string_view(block).substr(off, h2::kDefaultMaxFrameSize);
        const bool last = off + h2::kDefaultMaxFrameSize >= block.size();
        frames += off == 0 ? h2::Headers(id, piece, last ? h2::kEndHeaders : 0)
                           : h2::Continuation(id, piece, last);
      }
      frames += h2::Data(id, partial, false);
      ctl.stats.frames += 2;
      if (!c->Send(frames)) break;
    }
    c->Pump();
    std::lock_guard<std::mutex> lock(*mu);
    held->push_back(std::move(c));
  }
}

// Well-formed attested documents from a signer the service does not trust (each costs a
// PKCS#7 parse and a chain check), four requests pipelined on every connection, connection
// after connection. `answers_max` is the most grpc-status answers one connection got.
void BadTokenFlood(AttackCtl& ctl, const std::string& token, std::atomic<int>* answers_max,
                   std::atomic<int>* unclosed) {
  const std::string block = RequestBlock({{"authorization", token}});
  const std::string message = GrpcFrame(std::string("\x0a\x11") + "aksNodeController");
  OnEachConnection(ctl, true, [&](H2Conn& c) {
    std::string batch;
    for (uint32_t id = 1; id <= 7; id += 2) {
      batch += h2::Headers(id, block, h2::kEndHeaders) + h2::Data(id, message, true);
      ctl.stats.frames += 2;
    }
    if (!c.Send(batch)) return;
    for (int i = 0; i < 50 && !c.closed(); ++i) c.Pump(milliseconds(20));
    int answers = 0;
    for (uint32_t id = 1; id <= 7; id += 2) answers += c.GrpcStatus(id).has_value();
    int seen = answers_max->load();
    while (answers > seen && !answers_max->compare_exchange_weak(seen, answers)) {
    }
    if (!c.closed()) ++*unclosed;
  });
}

// --proxy-protocol: connections that send a PROXY v2 header a byte at a time, each byte
// 250 ms after the last, so none is whole before the attack ends: each is held, one read of
// one byte at a time, until the handshake timeout.
void SlowProxyHeaders(AttackCtl& ctl) {
  constexpr size_t kConnections = 200;
  const std::string prefix = std::string("\r\n\r\n\0\r\nQUIT\n", 12) + "\x21\x11" +
                             std::string("\x00\x0c", 2) + std::string(12, '\x01');
  std::vector<int> fds = ConnectMany(ctl.port, kConnections, kOpenTimeout);
  ctl.stats.connections += fds.size();
  for (size_t at = 0; ctl.Running() && at < prefix.size(); ++at) {
    for (int fd : fds) {
      if (send(fd, prefix.data() + at, 1, MSG_NOSIGNAL) == 1) ++ctl.stats.frames;
    }
    for (int i = 0; i < 25 && ctl.Running(); ++i) std::this_thread::sleep_for(milliseconds(10));
  }
  while (ctl.Running()) std::this_thread::sleep_for(milliseconds(20));
  for (int fd : fds) close(fd);
}

// Reads what the service sends on `fd` until it closes the connection or `timeout` passes:
// whether it closed, and in *answered whether any byte came first.
bool ClosedWithin(int fd, milliseconds timeout, bool* answered = nullptr) {
  char buf[256];
  for (auto until = steady_clock::now() + timeout; steady_clock::now() < until;) {
    if (!WaitFd(fd, POLLIN, milliseconds(50))) continue;
    const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0 && answered != nullptr) *answered = true;
    if (n == 0 || (n < 0 && errno != EAGAIN)) return true;
  }
  return false;
}

// --proxy-protocol: connection after connection opening with what is no PROXY header: a
// version 1 line with a bad address, TLS without a header, zeros, a version 2 header
// declaring 65,535 bytes to follow. Each must be closed at once; `unclosed` counts those that were
// not within a second.
void GarbageProxyHeaders(AttackCtl& ctl, std::atomic<int>* unclosed) {
  const std::string signature("\r\n\r\n\0\r\nQUIT\n", 12);
  const std::string openings[] = {
      "PROXY TCP4 not-an-address 10.0.0.5 40001 8443\r\n",
      ClientHelloBytes(),
      std::string(64, '\x00'),
      signature + "\x21\x11\xff\xff",
  };
  for (size_t i = 0; ctl.Running(); ++i) {
    int fd = ConnectOne(ctl.port, kOpenTimeout);
    if (fd < 0) {
      ++ctl.stats.connect_failures;
      continue;
    }
    ++ctl.stats.connections;
    const std::string& opening = openings[i % std::size(openings)];
    if (send(fd, opening.data(), opening.size(), MSG_NOSIGNAL) > 0) ++ctl.stats.frames;
    if (ClosedWithin(fd, seconds(1))) {
      ++ctl.stats.peer_closes;
    } else {
      ++*unclosed;
    }
    close(fd);
  }
}

// --proxy-protocol-from: connection after connection from a peer that is not the proxy, each
// opening with a well-formed PROXY v2 header that names another address (10.1.2.3) and then a
// ClientHello. Each must be closed before its handshake: `handshaken` counts connections that
// got any TLS bytes back, `unclosed` those not closed within a second.
void ProxyHeadersFromOutside(AttackCtl& ctl, std::atomic<int>* handshaken,
                             std::atomic<int>* unclosed) {
  const std::string header = std::string("\r\n\r\n\0\r\nQUIT\n", 12) + "\x21\x11" +
                             std::string("\x00\x0c", 2) + "\x0a\x01\x02\x03" + "\x7f\x00\x00\x01" +
                             "\x9c\x41" + "\x20\xfb";
  const std::string opening = header + ClientHelloBytes();
  while (ctl.Running()) {
    int fd = ConnectOne(ctl.port, kOpenTimeout);
    if (fd < 0) {
      ++ctl.stats.connect_failures;
      continue;
    }
    ++ctl.stats.connections;
    if (send(fd, opening.data(), opening.size(), MSG_NOSIGNAL) > 0) ++ctl.stats.frames;
    bool answered = false;
    const bool closed = ClosedWithin(fd, seconds(1), &answered);
    if (answered) ++*handshaken;
    if (closed) {
      ++ctl.stats.peer_closes;
    } else {
      ++*unclosed;
    }
    close(fd);
  }
}

// Calls with grpc-timeout 99999999H (the largest the header allows, 11,415 years: the deadline
// overflows a signed add unless clamped first) and a valid token, connection after
// connection; `answered` counts those answered OK, `other` the rest.
void OverflowingTimeouts(AttackCtl& ctl, const std::string& token, std::atomic<int>* answered,
                         std::atomic<int>* other) {
  const std::string block = RequestBlock({{"authorization", token}, {"grpc-timeout", "99999999H"}});
  const std::string message = GrpcFrame(std::string("\x0a\x11") + "aksNodeController");
  OnEachConnection(ctl, true, [&](H2Conn& c) {
    if (!c.Send(h2::Headers(1, block, h2::kEndHeaders) + h2::Data(1, message, true))) return;
    ctl.stats.frames += 2;
    for (int i = 0; i < 100 && !c.GrpcStatus(1) && !c.closed(); ++i) c.Pump(milliseconds(20));
    ++*(c.GrpcStatus(1) == 0 ? answered : other);
  });
}

// ---- The node's side ---------------------------------------------------------------------

// A node's call: a channel (so a TLS connection) of its own, the node's deadline.
GrpcReply NodeCall(const ServiceFiles& files, uint16_t port, const std::string& token,
                   milliseconds deadline = kLegitDeadline) {
  static std::atomic<int> channels{0};
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = files.tls_ca().cert_pem();
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(kApiserverFqdn);
  // gRPC shares a connection between channels with equal arguments; a node has its own.
  args.SetInt("lp.test.node", ++channels);
  auto channel = grpc::CreateCustomChannel(LoopbackAddress(port), grpc::SslCredentials(tls), args);
  auto stub = akslivepatching::v1::LivePatchingService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  ctx.AddMetadata("authorization", token);
  akslivepatching::v1::GetComponentConfigRequest request;
  request.set_component_name(kAksNodeControllerComponent);
  GrpcReply reply;
  reply.status = stub->GetComponentConfig(&ctx, request, &reply.response);
  return reply;
}

// Calls every kLegitInterval on its own thread until stopped, counting what came back OK.
class NodeClient {
 public:
  NodeClient(const ServiceFiles& files, uint16_t port, std::string token)
      : thread_([this, &files, port, token = std::move(token)] {
          for (auto next = steady_clock::now(); !stop_; next += kLegitInterval) {
            std::this_thread::sleep_until(next);
            GrpcReply r = NodeCall(files, port, token);
            std::lock_guard<std::mutex> lock(mu_);
            ++total_;
            if (r.status.ok()) {
              ++ok_;
            } else if (failures_.size() < 5) {
              failures_.push_back(std::to_string(r.code()) + " " + r.status.error_message());
            }
            next = std::max(next, steady_clock::now() - kLegitInterval);  // no catch-up burst
          }
        }) {}
  ~NodeClient() { Stop(); }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int ok() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ok_;
  }
  int total() const {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }
  std::vector<std::string> failures() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_;
  }

 private:
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  int ok_ = 0;
  int total_ = 0;
  std::vector<std::string> failures_;
  std::thread thread_;  // last: started once everything it uses exists
};

// Samples VmRSS every kRssSampleInterval; stops the attack when the service is gone or past
// idle + kRssAbortKb.
class RssWatch {
 public:
  RssWatch(pid_t pid, long idle_kb, AttackCtl* ctl)
      : peak_kb_(idle_kb), thread_([this, pid, idle_kb, ctl] {
          while (!stop_) {
            long kb = RssKb(pid);
            if (kb < 0) {
              gone_ = true;
              ctl->stop = true;
              return;
            }
            peak_kb_ = std::max(peak_kb_.load(), kb);
            if (kb > idle_kb + kRssAbortKb) {
              aborted_ = true;
              ctl->stop = true;
            }
            std::this_thread::sleep_for(kRssSampleInterval);
          }
        }) {}
  ~RssWatch() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  long peak_kb() const { return peak_kb_; }
  bool aborted() const { return aborted_; }
  bool gone() const { return gone_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<long> peak_kb_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> gone_{false};
  std::thread thread_;
};

struct CaseResult {
  long idle_kb = 0;
  long peak_kb = 0;
  int node_ok = 0;
  int node_total = 0;
  std::vector<std::string> node_failures;
  bool rss_aborted = false;
  bool service_gone = false;
  double seconds = 0;
  uint64_t connections = 0;  // the attack's, from AttackStats
  uint64_t frames = 0;
  std::string stats;
};

// CPU time (user + system) the process has used, from /proc/PID/stat.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));  // after "(comm) "
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // fields 14 and 15 (proc(5))
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// One end of a loopback TCP connection, from its /proc/PID/net/tcp row (proc(5)): the
// socket's inode, the bytes written to it and not yet acknowledged by the other end (sent or
// not), and the bytes it received that its owner has not read.
struct TcpSocket {
  std::string inode;
  unsigned long unacked = 0;
  unsigned long unread = 0;
};
std::optional<TcpSocket> TcpSocketFor(pid_t pid, uint16_t local_port, uint16_t remote_port) {
  char local[32], remote[32];
  snprintf(local, sizeof local, "0100007F:%04X", local_port);
  snprintf(remote, sizeof remote, "0100007F:%04X", remote_port);
  std::ifstream tcp("/proc/" + std::to_string(pid) + "/net/tcp");
  for (std::string line; std::getline(tcp, line);) {
    std::istringstream f(line);
    std::string sl, l, r, st, queues, timer, retr, uid, timeout, node;
    f >> sl >> l >> r >> st >> queues >> timer >> retr >> uid >> timeout >> node;
    if (l != local || r != remote) continue;
    const size_t colon = queues.find(':');  // "tx_queue:rx_queue", hexadecimal
    return TcpSocket{node, std::stoul(queues.substr(0, colon), nullptr, 16),
                     std::stoul(queues.substr(colon + 1), nullptr, 16)};
  }
  return std::nullopt;
}

// The events the service's epoll watches on that socket: its descriptor from /proc/PID/fd,
// the mask from the "tfd:" line of an epoll descriptor's /proc/PID/fdinfo (proc(5)).
// nullopt when not found.
std::optional<uint32_t> EpollEventsFor(pid_t pid, uint16_t service_port, uint16_t client_port) {
  const std::string proc = "/proc/" + std::to_string(pid);
  const std::optional<TcpSocket> socket = TcpSocketFor(pid, service_port, client_port);
  if (!socket) return std::nullopt;
  const std::string& inode = socket->inode;
  std::string fd;
  for (const auto& entry : std::filesystem::directory_iterator(proc + "/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(entry.path(), ec).string() == "socket:[" + inode + "]") {
      fd = entry.path().filename().string();
    }
  }
  if (fd.empty()) return std::nullopt;
  for (const auto& entry : std::filesystem::directory_iterator(proc + "/fdinfo")) {
    std::ifstream info(entry.path());
    for (std::string line; std::getline(info, line);) {
      std::istringstream f(line);
      std::string tag, tfd, events_tag, events;
      f >> tag >> tfd >> events_tag >> events;
      if (tag == "tfd:" && tfd == fd && events_tag == "events:") {
        return static_cast<uint32_t>(std::stoul(events, nullptr, 16));
      }
    }
  }
  return std::nullopt;
}

// TLS 1.2 handshakes offering only CBC suites and RSA key exchange, one after another: each is
// refused in the handshake (no suite in common); `accepted` counts any that were not.
void CbcOnlyHandshakes(AttackCtl& ctl, std::atomic<int>* accepted) {
  TlsClientOptions o;
  o.port = ctl.port;
  o.sni = kApiserverFqdn;
  o.alpn = {"h2"};
  o.max_version = TLS1_2_VERSION;
  o.cipher_list =
      "ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA:ECDHE-RSA-AES128-SHA256:AES128-SHA:AES256-SHA:"
      "AES128-SHA256:AES128-GCM-SHA256:AES256-GCM-SHA384";
  o.timeout = kOpenTimeout;
  while (ctl.Running()) {
    TlsClientResult r = TlsHandshake(o);
    ++ctl.stats.connections;
    if (r.handshake_ok) {
      ++*accepted;
    } else {
      ++ctl.stats.connect_failures;
    }
  }
}

// The end of a case: the node's calls and the memory watch stopped, their figures into `r`.
void StopAndRecord(NodeClient& node, RssWatch& rss, CaseResult* r) {
  node.Stop();
  rss.Stop();
  r->peak_kb = rss.peak_kb();
  r->rss_aborted = rss.aborted();
  r->service_gone = rss.gone();
  r->node_ok = node.ok();
  r->node_total = node.total();
  r->node_failures = node.failures();
}

// ---- The fixture -------------------------------------------------------------------------

class ServiceAttackTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LimitAsanQuarantine();
    net::IgnoreSigpipe();  // OpenSSL writes to sockets the service may have reset
    files_ = new ServiceFiles();
    files_->WriteComponent(kAksNodeControllerComponent, kServedMap);
    files_->WriteComponent(kBigComponent, BigComponentJson());
    token_ = new std::string(files_->Token());
  }
  static void TearDownTestSuite() {
    delete token_;
    delete files_;
  }

  // The service's log minus the access-log lines (one per node call), which say nothing
  // about the attack.
  void TearDown() override {
    if (!HasFailure() || !lps_) return;
    std::istringstream in(lps_->Stderr());
    std::string other;
    for (std::string line; std::getline(in, line);) {
      if (line.find(R"("msg":"GetComponentConfig")") == std::string::npos) other += line + "\n";
    }
    ADD_FAILURE() << "service stderr without access-log lines (tail):\n" << Tail(other, 4000);
  }

  // `wrapper` runs the service under another program that execs it (prlimit), so the pid
  // stays the service's.
  void StartService(const std::vector<std::string>& wrapper = {},
                    const std::vector<std::string>& flags = {}) {
    std::vector<std::string> argv = wrapper;
    // A short drain: whatever an attack leaves open must not hold the next case up.
    std::vector<std::string> all = {"--shutdown-grace", "1s"};
    all.insert(all.end(), flags.begin(), flags.end());
    for (auto& a : files_->Args(all)) argv.push_back(a);
    lps_ = std::make_unique<ServiceProcess>(std::move(argv));
  }

  pid_t pid() { return lps_->process().pid(); }

  // The service with metrics and --proxy-protocol behind StartNodeProxy's HAProxy, shedding
  // scaled to a 2 s window: --max-refusals-per-peer 6 is 3 faults a second, the default's rate.
  // lp_transport_events_total{event} once it is `expected`, or what it is after 10 s: the
  // service counts a connection's event as it closes it, which may follow the client's end.
  std::optional<double> EventCountOnceAt(const std::string& event, double expected) {
    std::optional<double> count;
    WaitFor(
        [&] {
          count = MetricValue(HttpGet(lps_->metrics_port(), "/metrics"),
                              "lp_transport_events_total", {{"event", event}});
          return count == expected;
        },
        seconds(10));
    return count;
  }

  // `token` replayed, 4 calls pipelined on each of connection after connection: each
  // connection gets one answer, the refusal, and is closed after it.
  CaseResult RunReplay(const std::string& name, const std::string& token) {
    std::atomic<int> answers_max{0}, unclosed{0};
    CaseResult r = RunAttack(
        name, 2, [&](AttackCtl& ctl) { BadTokenFlood(ctl, token, &answers_max, &unclosed); });
    ExpectWithstood(r);
    EXPECT_EQ(answers_max.load(), 1) << "answers on one connection after its identity was refused";
    EXPECT_EQ(unclosed.load(), 0) << "connections the service left open after the refusal";
    EXPECT_GE(r.connections, 10u) << r.stats;
    return r;
  }

  void StartShedServiceBehindHaproxy() {
    std::vector<std::string> flags = kMetricsFlags;
    flags.insert(flags.end(), {"--proxy-protocol", "--proxy-protocol-from", "127.0.0.0/8",
                               "--max-refusals-per-peer", "6", "--refusal-window", "2s"});
    StartService({}, flags);
    StartNodeProxy();
  }

  // Where the node's calls go: the service, or (--proxy-protocol cases) a real HAProxy that
  // forwards TCP to it with send-proxy-v2, as Envoy does (libgrpc++ offers ALPN h2 alone,
  // so the shipped ALPN-routing config would send it to the apiserver; this one routes all).
  uint16_t node_port() const { return node_proxy_ ? node_proxy_->frontend_port() : lps_->port(); }
  // `source`: the address HAProxy connects to the service from (a loopback address of its own,
  // so --proxy-protocol-from can tell it from the attacker's 127.0.0.1).
  void StartNodeProxy(const std::string& source = "") {
    node_proxy_dir_ = std::make_unique<TempDir>("node-proxy");
    const TempDir* dir = node_proxy_dir_.get();
    HaproxyOptions options;
    options.service_addr = LoopbackAddress(lps_->port());
    options.apiserver_addr = LoopbackAddress(lps_->port());  // unused by this config
    options.send_proxy_v2 = true;
    options.config_path = dir->Write("haproxy.cfg", R"(defaults
    mode tcp
    timeout connect 5s
    timeout client 1h
    timeout server 1h
frontend nodes
    bind "${LP_FRONTEND_BIND}"
    default_backend lps
backend lps
    server lps "${LP_SERVICE_ADDR}" send-proxy-v2)" + (source.empty() ? "" : " source " + source) +
                                                        "\n");
    node_proxy_ = std::make_unique<Haproxy>(std::move(options));
  }

  // The warm-up call that brings the serving path's one-off allocations in, then idle RSS.
  long WarmUpAndIdleRss() {
    GrpcReply r = NodeCall(*files_, node_port(), *token_, seconds(20));
    EXPECT_TRUE(r.status.ok()) << "warm-up: " << r.status.error_message();
    std::this_thread::sleep_for(milliseconds(200));
    return RssKb(pid());
  }

  // One case: fresh service (StartService() first), warm-up, then `attack` on `threads`
  // threads for kAttackDuration while a node calls every 100 ms and RSS is sampled.
  CaseResult RunAttack(const std::string& name, int threads,
                       const std::function<void(AttackCtl&)>& attack) {
    CaseResult r;
    r.idle_kb = WarmUpAndIdleRss();
    AttackCtl ctl;
    ctl.port = lps_->port();
    auto started = steady_clock::now();
    {
      RssWatch rss(pid(), r.idle_kb, &ctl);
      NodeClient node(*files_, node_port(), *token_);
      std::vector<std::thread> attackers;
      for (int i = 0; i < threads; ++i) attackers.emplace_back([&] { attack(ctl); });
      while (ctl.Running() && steady_clock::now() - started < kAttackDuration) {
        std::this_thread::sleep_for(milliseconds(20));
      }
      ctl.stop = true;
      for (auto& t : attackers) t.join();
      StopAndRecord(node, rss, &r);
    }
    r.seconds = std::chrono::duration<double>(steady_clock::now() - started).count();
    r.connections = ctl.stats.connections;
    r.frames = ctl.stats.frames;
    r.stats = ctl.stats.Summary();
    std::cout << "[attack] " << name << ": idle " << r.idle_kb / 1024 << " MiB, peak "
              << r.peak_kb / 1024 << " MiB (+" << (r.peak_kb - r.idle_kb) / 1024
              << " MiB), node calls OK " << r.node_ok << "/" << r.node_total << " ("
              << (r.node_total ? 100.0 * r.node_ok / r.node_total : 0.0) << "%), "
              << (r.rss_aborted ? "ABORTED at idle + 256 MiB, " : "")
              << (r.service_gone ? "SERVICE GONE, " : "") << r.seconds << " s; " << r.stats
              << std::endl;
    return r;
  }

  void ExpectBoundedMemory(const CaseResult& r) {
    EXPECT_FALSE(r.service_gone) << "the service exited during the attack";
    EXPECT_FALSE(r.rss_aborted) << "stopped early: VmRSS passed idle + 256 MiB";
    EXPECT_LT(r.peak_kb - r.idle_kb, kRssBoundKb)
        << "peak VmRSS " << r.peak_kb << " kB, idle " << r.idle_kb << " kB";
  }

  // Every node call made during the attack, each within hotfix-agent's own deadline: a node
  // boots once, so one refused boot is a node without its hotfix (with about 35 calls, any
  // percentage short of 100 would allow none either).
  void ExpectNodesServed(const CaseResult& r) {
    ASSERT_GT(r.node_total, 0);
    std::string failures;
    for (const auto& f : r.node_failures) failures += "\n  " + f;
    EXPECT_EQ(r.node_ok, r.node_total)
        << r.node_ok << " of " << r.node_total << " node calls OK; first failures:" << failures;
  }

  // Alive, and a node's call (a generous deadline: the attack has just stopped) is served.
  void ExpectStillServing() {
    ASSERT_TRUE(lps_->process().running()) << "the service exited";
    GrpcReply r = NodeCall(*files_, node_port(), *token_, seconds(10));
    ASSERT_TRUE(r.status.ok()) << r.code() << " " << r.status.error_message();
    EXPECT_EQ(r.response.config(), kServedMap);
  }

  // The attack reached the service: without this, an attacker that never connected (or was
  // never given flow-control credit) would leave a service that passes every check below.
  enum class Sends { kFrames, kConnectionsOnly };
  void ExpectWithstood(const CaseResult& r, Sends sends = Sends::kFrames) {
    EXPECT_GT(r.connections, 0u) << "the attacker never connected: " << r.stats;
    if (sends == Sends::kFrames) {
      EXPECT_GT(r.frames, 0u) << "the attacker sent no frame: " << r.stats;
    }
    ExpectBoundedMemory(r);
    ExpectNodesServed(r);
    ExpectStillServing();
  }

  static ServiceFiles* files_;
  static std::string* token_;
  std::unique_ptr<ServiceProcess> lps_;
  std::unique_ptr<TempDir> node_proxy_dir_;
  std::unique_ptr<Haproxy> node_proxy_;
};

ServiceFiles* ServiceAttackTest::files_ = nullptr;
std::string* ServiceAttackTest::token_ = nullptr;

TEST_F(ServiceAttackTest, RapidResetOnOneConnection) {
  StartService();
  ExpectWithstood(RunAttack("rapid reset, 1 connection", 1, RapidReset));
}

TEST_F(ServiceAttackTest, RapidResetOnFourConnections) {
  StartService();
  ExpectWithstood(RunAttack("rapid reset, 4 connections", 4, RapidReset));
}

TEST_F(ServiceAttackTest, ContinuationFloodWithNewHeaderNames) {
  StartService();
  ExpectWithstood(RunAttack("CONTINUATION flood", 1, ContinuationFlood));
}

TEST_F(ServiceAttackTest, OneHeaderValueOverManyContinuations) {
  StartService();
  ExpectWithstood(
      RunAttack("10 MiB value in 16 KiB CONTINUATIONs", 1, HeaderValueOverManyContinuations));
}

TEST_F(ServiceAttackTest, HpackLiteralDeclaring100MiB) {
  StartService();
  ExpectWithstood(RunAttack("100 MiB HPACK literals", 1, HugeHpackLiteral));
}

TEST_F(ServiceAttackTest, HpackIntegersPaddedWithContinuationBytes) {
  StartService();
  ExpectWithstood(RunAttack("HPACK varint padding", 1, HpackVarintPadding));
}

TEST_F(ServiceAttackTest, SettingsFloodNeverReadingTheAcks) {
  StartService();
  const std::string settings = h2::Settings({{h2::kEnablePush, 0},
                                             {h2::kMaxConcurrentStreams, 100},
                                             {h2::kInitialWindowSize, 65535},
                                             {h2::kMaxHeaderListSize, 16384}});
  ExpectWithstood(RunAttack("SETTINGS flood", 1, [&](AttackCtl& ctl) {
    ControlFrameFlood(ctl, [&](uint64_t) { return settings; });
  }));
}

TEST_F(ServiceAttackTest, PingFloodNeverReadingTheAcks) {
  StartService();
  ExpectWithstood(RunAttack("PING flood", 1, [](AttackCtl& ctl) {
    ControlFrameFlood(ctl, [](uint64_t n) { return h2::Ping(n); });
  }));
}

TEST_F(ServiceAttackTest, WindowUpdatesThatOverflowAndThousandsOfThem) {
  StartService();
  ExpectWithstood(RunAttack("WINDOW_UPDATE abuse", 1, WindowUpdateAbuse));
}

TEST_F(ServiceAttackTest, StreamsThatNeverEndOnManyConnections) {
  StartService();
  ExpectWithstood(RunAttack("unfinished streams, 4 x 8 connections", 4, UnfinishedStreams));
}

TEST_F(ServiceAttackTest, FiveHundredHandshakesNeverFinished) {
  StartService();
  ExpectWithstood(RunAttack("500 unfinished TLS handshakes", 1, HandshakesNeverFinished),
                  Sends::kConnectionsOnly);
}

TEST_F(ServiceAttackTest, BadTokensGetOneAnswerPerConnection) {
  TestCa foreign = TestCa::Create("test-imds-root");  // the same name, another key
  CertAndKey signer = IssueImdsSigner(foreign);
  const std::string token = files_->Token({}, &signer);
  StartService({}, {"--metrics-listen", "127.0.0.1:0"});
  CaseResult r = RunReplay("untrusted tokens, 4 calls pipelined per connection", token);
  // The repeated token was checked once (the legit node's is another) and then refused for
  // the price of its hash.
  const std::string metrics = HttpGet(lps_->metrics_port(), "/metrics");
  EXPECT_LE(MetricValue(metrics, "lp_identity_verifications_total").value_or(1e9), 3);
  EXPECT_GE(MetricValue(metrics, "lp_identity_refusal_cache_hits_total").value_or(0),
            static_cast<double>(r.connections) - 3);
  // At most 20 refused calls' lines a second, the rest counted in them.
  uint64_t lines = 0, not_logged = 0;
  for (const auto& line : lps_->AccessLog()) {
    if (line.value("code", "") == "OK") continue;
    ++lines;
    not_logged += line.value("refusals_not_logged", uint64_t{0});
  }
  EXPECT_LE(lines, static_cast<uint64_t>(20 * (r.seconds + 2))) << lines << " refused lines";
  EXPECT_GT(not_logged, 0u);
}

// A document the trusted signer made 2 hours ago, valid 4 hours more, replayed on connection
// after connection: refused as too old (--max-token-age 10m), checked once and then refused
// from the refusal cache for the price of its hash, one answer per connection.
TEST_F(ServiceAttackTest, AStaleTokenReplayedIsRefusedForAHash) {
  AttestedDocumentFields old;
  old.created_on = std::chrono::system_clock::now() - std::chrono::hours(2);
  old.expires_on = old.created_on + std::chrono::hours(6);
  const std::string token = files_->Token(old);
  StartService({}, {"--metrics-listen", "127.0.0.1:0"});
  CaseResult r = RunReplay("a stale token replayed, 4 calls pipelined per connection", token);
  const std::string metrics = HttpGet(lps_->metrics_port(), "/metrics");
  EXPECT_GE(MetricValue(metrics, "lp_identity_failures_total", {{"reason", "expired"}}).value_or(0),
            static_cast<double>(r.connections));
  EXPECT_LE(MetricValue(metrics, "lp_identity_verifications_total").value_or(1e9), 3);
  bool said_too_old = false;
  for (const auto& line : lps_->AccessLog()) {
    said_too_old |= line.value("identity_failure", "") == "expired" &&
                    line.value("error", "").find("--max-token-age") != std::string::npos;
  }
  EXPECT_TRUE(said_too_old) << "no refused line naming --max-token-age";
}

// TLS 1.2 with only CBC suites or RSA key exchange on offer: no handshake completes, each
// is counted as a failed handshake, and a TLS 1.2 client offering an ECDHE AEAD suite (what
// the node's dialer offers) is still served.
TEST_F(ServiceAttackTest, Tls12ClientsOfferingOnlyCbcSuitesAreRefused) {
  StartService({}, kMetricsFlags);
  std::atomic<int> accepted{0};
  CaseResult r = RunAttack("TLS 1.2 handshakes offering CBC and RSA key exchange only", 1,
                           [&](AttackCtl& ctl) { CbcOnlyHandshakes(ctl, &accepted); });
  ExpectWithstood(r, Sends::kConnectionsOnly);
  EXPECT_EQ(accepted.load(), 0) << "handshakes the service completed with a CBC or RSA suite";
  EXPECT_GE(r.connections, 10u) << r.stats;
  std::optional<double> failed;
  WaitFor(
      [&] {
        failed = MetricValue(HttpGet(lps_->metrics_port(), "/metrics"), "lp_transport_events_total",
                             {{"event", "handshake_failed"}});
        return failed >= static_cast<double>(r.connections);
      },
      seconds(10));
  EXPECT_GE(failed.value_or(0), static_cast<double>(r.connections));

  TlsClientOptions aead;
  aead.port = lps_->port();
  aead.sni = kApiserverFqdn;
  aead.alpn = {"aks-live-patching", "h2"};
  aead.ca_pem = files_->tls_ca().cert_pem();
  aead.max_version = TLS1_2_VERSION;
  aead.cipher_list = "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256";
  TlsClientResult ok = TlsHandshake(aead);
  EXPECT_TRUE(ok.handshake_ok) << ok.error;
  EXPECT_EQ(ok.protocol_version, "TLSv1.2");
  EXPECT_EQ(ok.selected_alpn, "h2");
}

// Any Azure VM's document is validly signed; one from a subscription off the allow-list,
// replayed on connection after connection, is PERMISSION_DENIED once per connection, and
// after its first check costs a hash and a lookup: the identity is kept, the allow-list
// applied afresh.
TEST_F(ServiceAttackTest, APermissionDeniedDocumentReplayedCostsAHash) {
  AttestedDocumentFields foreign;
  foreign.subscription_id = "99999999-0000-0000-0000-000000000000";
  const std::string token = files_->Token(foreign);
  std::vector<std::string> flags = kMetricsFlags;
  flags.insert(flags.end(), {"--allowed-subscriptions", AttestedDocumentFields{}.subscription_id});
  StartService({}, flags);
  CaseResult r = RunReplay("a foreign subscription's document replayed, 4 calls pipelined", token);
  const std::string metrics = HttpGet(lps_->metrics_port(), "/metrics");
  EXPECT_LE(MetricValue(metrics, "lp_identity_verifications_total").value_or(1e9), 3);
  EXPECT_GE(MetricValue(metrics, "lp_identity_cache_hits_total").value_or(0),
            static_cast<double>(r.connections) - 3);
  EXPECT_GE(MetricValue(metrics, "lp_requests_total", {{"code", "PERMISSION_DENIED"}}).value_or(0),
            static_cast<double>(r.connections));
}

// Deadlines past the clock's range, on calls that are otherwise a node's: each is answered OK
// (the deadline clamped to the request timeout), nothing overflows (UBSan in this build).
TEST_F(ServiceAttackTest, OverflowingGrpcTimeoutsAreClampedAndAnswered) {
  StartService();
  std::atomic<int> answered{0}, other{0};
  CaseResult r = RunAttack("grpc-timeout 99999999H with a valid token", 2, [&](AttackCtl& ctl) {
    OverflowingTimeouts(ctl, *token_, &answered, &other);
  });
  ExpectWithstood(r);
  EXPECT_GE(answered.load(), 10) << r.stats;
  EXPECT_EQ(other.load(), 0) << "calls with a huge grpc-timeout not answered OK";
}

TEST_F(ServiceAttackTest, GzipBombIsRefusedUninflated) {
  // 15 MiB inflated in one message under the 16 KiB request cap and one 16 KiB DATA frame:
  // the cap cannot protect a server that inflates before it counts.
  const std::string message = GrpcFrame(h2::GzipOfZeros(15 * kMiB), /*flags=*/1);
  ASSERT_LT(message.size(), 16u * 1024);
  StartService();

  ExpectWithstood(
      RunAttack("gzip bombs", 1, [&](AttackCtl& ctl) { DecompressionBombs(ctl, message); }));

  // Then the verdict for a bomb from an attested node, whose only fault is the encoding:
  // gRPC's answer for an encoding the server does not take. (After the flood, not before:
  // a server that inflates it would otherwise enter the flood with that memory counted as
  // idle.)
  std::unique_ptr<H2Conn> c = H2Conn::Open(lps_->port(), nullptr);
  ASSERT_NE(c, nullptr);
  const std::string block = RequestBlock({{"authorization", *token_}, {"grpc-encoding", "gzip"}});
  ASSERT_TRUE(c->Send(h2::Headers(1, block, h2::kEndHeaders) + h2::Data(1, message, true)));
  for (auto until = steady_clock::now() + seconds(10);
       !c->GrpcStatus(1) && !c->ResetCode(1) && !c->closed() && steady_clock::now() < until;) {
    c->Pump(milliseconds(50));
  }
  ASSERT_TRUE(c->GrpcStatus(1).has_value())
      << "no grpc-status for the bomb; RST_STREAM "
      << (c->ResetCode(1) ? std::to_string(*c->ResetCode(1)) : "none")
      << (c->closed() ? ", connection closed" : "");
  EXPECT_EQ(*c->GrpcStatus(1), static_cast<int>(grpc::StatusCode::UNIMPLEMENTED));
}

// A client that asks for answers of 1 MB, four at a time, and never reads them, then keeps
// writing. Once the sockets between hold all they will, the service parks the connection:
// nothing more is read from it (its epoll interest is EPOLLOUT alone, so a level-triggered
// EPOLLIN cannot spin the loop on bytes it will not read) and it costs no CPU, until the peer
// reads or the output-stall timeout (10 s) closes it. Meanwhile nodes are served.
TEST_F(ServiceAttackTest, AClientThatNeverReadsIsParkedAtNoCost) {
  StartService();
  const long idle_kb = WarmUpAndIdleRss();
  std::unique_ptr<H2Conn> c = H2Conn::Open(lps_->port(), nullptr, /*respond=*/false);
  ASSERT_NE(c, nullptr);
  sockaddr_in me{};
  socklen_t len = sizeof me;
  ASSERT_EQ(getsockname(c->fd(), reinterpret_cast<sockaddr*>(&me), &len), 0);
  const uint16_t client_port = ntohs(me.sin_port);

  // All the flow-control credit there is: only the sockets hold the answers back.
  std::string frames = h2::Settings({{h2::kInitialWindowSize, 0x7fffffff}}) +
                       h2::WindowUpdate(0, 0x7fffffff - 65535);
  const std::string block = RequestBlock({{"authorization", *token_}});
  const std::string message = GrpcFrame(std::string("\x0a\x0c") + kBigComponent);
  uint32_t next_id = 1;
  // Four requests: the service's max_concurrent_streams (h2_session.h), so none is refused.
  auto four_requests = [&] {
    std::string out;
    for (int i = 0; i < 4; ++i, next_id += 2) {
      out += h2::Headers(next_id, block, h2::kEndHeaders) + h2::Data(next_id, message, true);
    }
    return out;
  };
  ASSERT_TRUE(c->Send(frames + four_requests(), /*read_while_blocked=*/false));

  // How much the sockets hold is the kernel's: the service's send buffer grows with the
  // connection up to net.ipv4.tcp_wmem's maximum (4 MiB by default), so four answers may fit.
  // Four more each time the service has read all we sent and written all it answered, until it
  // waits to write. Not before: a fifth stream open is a connection error (RFC 9113, 5.1.2).
  std::optional<uint32_t> events;
  int batches = 1;
  for (auto until = steady_clock::now() + seconds(20); steady_clock::now() < until;) {
    events = EpollEventsFor(pid(), lps_->port(), client_port);
    if (events && (*events & EPOLLOUT) != 0) break;
    const std::optional<TcpSocket> service = TcpSocketFor(pid(), lps_->port(), client_port);
    const std::optional<TcpSocket> client = TcpSocketFor(getpid(), client_port, lps_->port());
    ASSERT_TRUE(service && client) << "the connection closed";
    // The answers' bytes the service has written that we have not read: at least 1 MB each
    // once all of them are out (their streams then closed).
    const uint64_t written = service->unacked + client->unread;
    if (service->unread == 0 && written >= uint64_t{1000000} * 4 * batches) {
      ASSERT_TRUE(c->Send(four_requests(), /*read_while_blocked=*/false));
      ++batches;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_TRUE(events.has_value()) << "the connection is not in the service's epoll";
  ASSERT_NE(*events & EPOLLOUT, 0u)
      << "the service never waited to write: " << batches * 4 << " answers of 1 MB asked";
  EXPECT_EQ(*events & EPOLLIN, 0u) << "still watching a connection it will not read";

  // More from the client, which the service leaves unread (for a few KB: a window update).
  c->Send(h2::WindowUpdate(0, 1) + h2::Ping(1), /*read_while_blocked=*/false);
  const double cpu_before = CpuSeconds(pid());
  int served = 0;
  for (int i = 0; i < 5; ++i) {
    served += NodeCall(*files_, node_port(), *token_, seconds(10)).status.ok();
    std::this_thread::sleep_for(milliseconds(200));
  }
  const double cpu = CpuSeconds(pid()) - cpu_before;
  EXPECT_EQ(served, 5);
  // Five node calls (each a few ms under ASan) in about 1.2 s; a loop spinning on the parked
  // connection would add most of that second.
  EXPECT_LT(cpu, 0.5) << "service CPU while the connection was parked";
  EXPECT_EQ(EpollEventsFor(pid(), lps_->port(), client_port), events) << "no longer parked";
  EXPECT_LT(RssKb(pid()) - idle_kb, kRssBoundKb);
  std::cout << "[attack] never-reading client: parked with epoll events 0x" << std::hex << *events
            << std::dec << ", service CPU " << cpu << " s over 5 node calls, RSS +"
            << (RssKb(pid()) - idle_kb) / 1024 << " MiB, " << batches * 4 << " answers asked"
            << std::endl;
  c.reset();
  ExpectStillServing();
}

TEST_F(ServiceAttackTest, SlowProxyHeadersOnTwoHundredConnections) {
  StartService({}, {"--proxy-protocol", "--proxy-protocol-from", "127.0.0.0/8"});
  StartNodeProxy();
  ExpectWithstood(RunAttack("slow PROXY headers, 200 connections", 1, SlowProxyHeaders));
}

TEST_F(ServiceAttackTest, GarbageProxyHeadersAreRefusedAtOnce) {
  std::vector<std::string> flags = kMetricsFlags;
  flags.insert(flags.end(), {"--proxy-protocol", "--proxy-protocol-from", "127.0.0.0/8"});
  StartService({}, flags);
  StartNodeProxy();
  std::atomic<int> unclosed{0};
  CaseResult r = RunAttack("garbage PROXY headers", 2,
                           [&](AttackCtl& ctl) { GarbageProxyHeaders(ctl, &unclosed); });
  ExpectWithstood(r);
  EXPECT_EQ(unclosed.load(), 0) << "connections not closed within a second of their opening";
  // Each refused connection counted once (the node's, through HAProxy, are not refused).
  EXPECT_EQ(EventCountOnceAt("proxy_header_invalid", static_cast<double>(r.connections)),
            static_cast<double>(r.connections));
}

// Only the proxy's address may send a PROXY header (--proxy-protocol-from 127.0.0.2/32, where
// HAProxy connects from): an attacker at 127.0.0.1 sending well-formed headers that claim
// another node's address is closed at accept, before TLS, and counted; nodes through HAProxy
// are served throughout.
TEST_F(ServiceAttackTest, AProxyHeaderFromOutsideTheProxiesNetworksIsRefused) {
  std::vector<std::string> flags = kMetricsFlags;
  flags.insert(flags.end(), {"--proxy-protocol", "--proxy-protocol-from", "127.0.0.2/32"});
  StartService({}, flags);
  StartNodeProxy("127.0.0.2");
  std::atomic<int> handshaken{0}, unclosed{0};
  CaseResult r =
      RunAttack("PROXY headers from outside --proxy-protocol-from", 2,
                [&](AttackCtl& ctl) { ProxyHeadersFromOutside(ctl, &handshaken, &unclosed); });
  ExpectWithstood(r);
  EXPECT_GE(r.connections, 10u) << r.stats;
  EXPECT_EQ(handshaken.load(), 0) << "connections from outside that got TLS bytes back";
  EXPECT_EQ(unclosed.load(), 0) << "connections from outside not closed within a second";
  EXPECT_EQ(EventCountOnceAt("proxy_peer_not_allowed", static_cast<double>(r.connections)),
            static_cast<double>(r.connections));
  // No call was ever made as 10.1.2.3: every access-log line is the node's, through HAProxy.
  for (const auto& line : lps_->AccessLog()) {
    EXPECT_EQ(line.value("peer", "").rfind("ipv4:10.1.2.3:", 0), std::string::npos) << line.dump();
  }
}

// The TLS port full (--max-connections 40, and 100 connections that never start TLS): the
// plaintext health port has a cap of its own (kHealthConnections), so kubelet's probes are
// still answered SERVING, on new connections each, while the main port sheds.
TEST_F(ServiceAttackTest, AFullMainListenerLeavesTheHealthPortAnswering) {
  std::vector<std::string> flags = kMetricsFlags;
  flags.insert(flags.end(), {"--max-connections", "40"});
  StartService({}, flags);
  std::vector<int> held = ConnectMany(lps_->port(), 100, seconds(2));
  std::optional<double> shed;
  ASSERT_TRUE(WaitFor([&] {
    shed = MetricValue(HttpGet(lps_->metrics_port(), "/metrics"), "lp_transport_events_total",
                       {{"event", "shed_max_connections"}});
    return shed >= 50.0;
  })) << "the main listener never filled: shed_max_connections "
      << shed.value_or(-1);
  int serving = 0;
  for (int i = 0; i < 10; ++i) {
    // A channel of its own each time: a new connection, as each kubelet probe makes.
    grpc::ChannelArguments args;
    args.SetInt("lp.test.probe", i);
    auto channel = grpc::CreateCustomChannel(LoopbackAddress(lps_->health_port()),
                                             grpc::InsecureChannelCredentials(), args);
    serving += HealthCheck(channel, "") == 1;
  }
  EXPECT_EQ(serving, 10) << "health probes answered SERVING while the TLS port was full";
  std::cout << "[attack] main listener full (cap 40, 100 held, " << shed.value_or(0)
            << " shed): health probes SERVING " << serving << "/10" << std::endl;
  for (int fd : held) close(fd);
  ExpectStillServing();
}

// The patient attacker (issue 31): connections each holding unfinished streams that carry as
// much metadata as they may keep (4 values of 16 KiB), a new stream opened on each every 2 s
// for 14 s, past every timeout. Before, one HEADERS frame every 40 s held a connection for
// ever and 300 such connections took the process's whole kept-bytes budget. Now a connection
// with nothing answered ends at the first-request timeout (10 s) whatever it holds, so none
// lives past it, and nodes are served throughout.
TEST_F(ServiceAttackTest, APatientAttackerHoldsNoConnectionPastTheFirstRequestTimeout) {
  constexpr size_t kConnections = 60;
  constexpr seconds kRefresh{2};
  constexpr seconds kHold{14};
  constexpr seconds kFirstRequestTimeout{10};  // H2Limits::first_request_timeout
  StartService({}, kMetricsFlags);
  const long idle_kb = WarmUpAndIdleRss();
  const std::string value(16 * 1024 - 64, 'A');
  const std::string block = RequestBlock({{"authorization", value},
                                          {"authorization", value},
                                          {"authorization", value},
                                          {"authorization", value}});
  struct Held {
    std::unique_ptr<H2Conn> conn;
    steady_clock::time_point opened;
    std::optional<steady_clock::time_point> closed;
    uint32_t next_id = 1;
  };
  AttackCtl ctl;
  ctl.port = lps_->port();
  std::vector<Held> held;
  CaseResult r;
  r.idle_kb = idle_kb;
  const auto started = steady_clock::now();
  {
    RssWatch rss(pid(), idle_kb, &ctl);
    NodeClient node(*files_, node_port(), *token_);
    for (size_t i = 0; i < kConnections; ++i) {
      if (std::unique_ptr<H2Conn> c = H2Conn::Open(ctl.port, &ctl)) {
        held.push_back({std::move(c), steady_clock::now(), std::nullopt, 1});
      }
    }
    auto next_refresh = steady_clock::now();
    while (steady_clock::now() - started < kHold) {
      const bool refresh = steady_clock::now() >= next_refresh;
      if (refresh) next_refresh += kRefresh;
      for (Held& h : held) {
        if (h.closed) continue;
        if (refresh && h.next_id < 2 * 4) {  // at most the 4 streams the service allows
          // In frames of the 16 KiB SETTINGS_MAX_FRAME_SIZE allows: HEADERS, then CONTINUATIONs.
          constexpr size_t kChunk = 16000;
          std::string frames = h2::Headers(h.next_id, block.substr(0, kChunk),
                                           block.size() <= kChunk ? h2::kEndHeaders : 0);
          for (size_t at = kChunk; at < block.size(); at += kChunk) {
            frames +=
                h2::Continuation(h.next_id, block.substr(at, kChunk), at + kChunk >= block.size());
          }
          h.conn->Send(frames);
          h.next_id += 2;
          ++ctl.stats.frames;
        }
        h.conn->Pump(milliseconds(1));
        if (h.conn->closed()) h.closed = steady_clock::now();
      }
      // The polling pace: each close is timed to within 20 ms (a figure, not a wait).
      std::this_thread::sleep_for(milliseconds(20));
    }
    StopAndRecord(node, rss, &r);
  }
  size_t closed = 0;
  double longest = 0;
  for (const Held& h : held) {
    if (!h.closed) continue;
    ++closed;
    longest = std::max(longest, std::chrono::duration<double>(*h.closed - h.opened).count());
  }
  std::cout << "[attack] patient attacker, " << held.size() << " connections x 4 unfinished "
            << "streams of 64 KiB metadata, refreshed every 2 s: " << closed << " closed by the "
            << "service, the longest after " << longest << " s; idle " << idle_kb / 1024
            << " MiB, peak " << r.peak_kb / 1024 << " MiB, node calls OK " << r.node_ok << "/"
            << r.node_total << std::endl;
  ASSERT_GE(held.size(), kConnections / 2) << ctl.stats.Summary();
  EXPECT_EQ(closed, held.size()) << "connections still open after " << kHold.count() << " s";
  // The first-request timeout, and the service's 50 ms tick and our 20 ms polling.
  EXPECT_LT(longest, std::chrono::duration<double>(kFirstRequestTimeout).count() + 1.5);
  ExpectBoundedMemory(r);
  ExpectNodesServed(r);
  const std::string metrics = HttpGet(lps_->metrics_port(), "/metrics");
  EXPECT_GE(MetricValue(metrics, "lp_transport_events_total", {{"event", "first_request_timeout"}})
                .value_or(0),
            static_cast<double>(held.size()));
  ExpectStillServing();
}

// A NAT neighbour (issue 31): a pod and the nodes of its cluster reach the service from one
// egress address, so the PROXY header names the same address for both. Here HAProxy sends
// 127.0.0.1 for the node and the attacker alike, with the limit scaled to a 2 s window
// (--max-refusals-per-peer 6: 3 faults a second, the default's rate).
//  1. The issue's pod: garbage tokens at one a second ("ten every ten seconds"). Under the
//     limit, so the address is never shed: the node is answered on at least 90% of its
//     calls (all of them: nothing is shed).
//  2. A flood of garbage tokens: the address is shed, one connection in four still let in.
//     The flood's connections mostly end before TLS, and the node still gets some calls
//     through (one arrival in four, so 35 calls all failing has odds of 4e-5).
TEST_F(ServiceAttackTest, ANatNeighbourOfAGarbageTokenSenderIsStillAnswered) {
  StartShedServiceBehindHaproxy();
  const std::string garbage = "bm90IGEgZG9jdW1lbnQ=";
  const uint16_t through_proxy = node_port();
  std::atomic<int> answers_max{0}, unclosed{0};
  CaseResult slow = RunAttack("NAT neighbour: one garbage token a second", 1, [&](AttackCtl& ctl) {
    ctl.port = through_proxy;
    const std::string block = RequestBlock({{"authorization", garbage}});
    const std::string message = GrpcFrame(std::string("\x0a\x11") + "aksNodeController");
    while (ctl.Running()) {
      if (std::unique_ptr<H2Conn> c = H2Conn::Open(ctl.port, &ctl)) {
        c->Send(h2::Headers(1, block, h2::kEndHeaders) + h2::Data(1, message, true));
        ctl.stats.frames += 2;
        for (int i = 0; i < 50 && !c->closed(); ++i) c->Pump(milliseconds(20));
      }
      // The attacker's pace, one call a second (not a wait for anything).
      for (int i = 0; i < 50 && ctl.Running(); ++i) std::this_thread::sleep_for(milliseconds(20));
    }
  });
  ExpectWithstood(slow);
  EXPECT_GE(slow.node_ok * 10, slow.node_total * 9) << "the neighbour under 90%";
  const std::string before = HttpGet(lps_->metrics_port(), "/metrics");
  EXPECT_EQ(MetricValue(before, "lp_transport_events_total", {{"event", "shed_refused_peer"}})
                .value_or(0),
            0)
      << "shed for a rate under the limit";

  CaseResult flood = RunAttack("NAT neighbour: a flood of garbage tokens", 2, [&](AttackCtl& ctl) {
    ctl.port = through_proxy;
    BadTokenFlood(ctl, garbage, &answers_max, &unclosed);
  });
  std::cout << "[attack] NAT neighbour: node calls OK " << slow.node_ok << "/" << slow.node_total
            << " under one garbage token a second, " << flood.node_ok << "/" << flood.node_total
            << " under a flood" << std::endl;
  ExpectBoundedMemory(flood);
  EXPECT_GT(flood.node_ok, 0) << "the neighbour got nothing through while its address was shed";
  const std::string after = HttpGet(lps_->metrics_port(), "/metrics");
  const double shed =
      MetricValue(after, "lp_transport_events_total", {{"event", "shed_refused_peer"}}).value_or(0);
  const double refused =
      MetricValue(after, "lp_requests_total", {{"code", "UNAUTHENTICATED"}}).value_or(0);
  EXPECT_GT(shed, 0) << "the flood was never shed";
  // Of the flood's connections that reached the service, most ended before TLS.
  EXPECT_GT(shed, refused) << "shed " << shed << ", answered UNAUTHENTICATED " << refused;
  // Within one window (2 s) of the flood's end the address is let in again.
  EXPECT_TRUE(WaitFor(
      [&] { return NodeCall(*files_, node_port(), *token_, seconds(2)).status.ok(); }, seconds(10)))
      << "the neighbour still shed after the flood ended";
}

// Azure's Private Link service NATs every private endpoint's connections to its own few
// addresses and says which endpoint in the PROXY header (TLV 0xEE, the link ID). Two endpoints
// behind one address (10.0.0.9, as the test, the proxy here, says): the one whose peer sends
// garbage tokens is shed once past --max-refusals-per-peer 3, the other is answered, because
// the link ID, not the shared address, is the key.
TEST_F(ServiceAttackTest, TwoPrivateEndpointsBehindOneAddressAreCountedApart) {
  std::vector<std::string> flags = kMetricsFlags;
  flags.insert(flags.end(), {"--proxy-protocol", "--proxy-protocol-from", "127.0.0.0/8",
                             "--max-refusals-per-peer", "3", "--refusal-window", "1h"});
  StartService({}, flags);
  auto header = [](uint32_t link_id) {
    const std::string addresses =
        std::string("\x0a\x00\x00\x09\x7f\x00\x00\x01", 8) + "\x9c\x41\x20\xfb";
    const std::string tlv =
        std::string("\xee\x00\x05\x01", 4) +
        std::string{static_cast<char>(link_id), static_cast<char>(link_id >> 8),
                    static_cast<char>(link_id >> 16), static_cast<char>(link_id >> 24)};
    const std::string block = addresses + tlv;
    return std::string("\r\n\r\n\0\r\nQUIT\n", 12) + "\x21\x11" +
           std::string{static_cast<char>(block.size() >> 8), static_cast<char>(block.size())} +
           block;
  };
  const std::string message = GrpcFrame(std::string("\x0a\x11") + "aksNodeController");
  auto call = [&](uint32_t link_id, const std::string& token) -> std::optional<int> {
    std::unique_ptr<H2Conn> c = H2Conn::Open(lps_->port(), nullptr, true, header(link_id));
    if (!c) return std::nullopt;  // closed before TLS
    c->Send(h2::Headers(1, RequestBlock({{"authorization", token}}), h2::kEndHeaders) +
            h2::Data(1, message, true));
    for (auto until = steady_clock::now() + seconds(10);
         !c->GrpcStatus(1) && !c->closed() && steady_clock::now() < until;) {
      c->Pump(milliseconds(20));
    }
    // A refusal ends the connection, and the service counts it as it closes: read to the end
    // so that the next connection comes after the count, not racing it.
    for (auto until = steady_clock::now() + seconds(10);
         c->GrpcStatus(1) != 0 && !c->closed() && steady_clock::now() < until;) {
      c->Pump(milliseconds(20));
    }
    return c->GrpcStatus(1);
  };
  constexpr uint32_t kAttacker = 0x0a0b0c0d, kNode = 0x01020304;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(call(kAttacker, "bm90IGEgZG9jdW1lbnQ="),
              static_cast<int>(grpc::StatusCode::UNAUTHENTICATED));
  }
  EXPECT_EQ(call(kAttacker, "bm90IGEgZG9jdW1lbnQ="), std::nullopt)
      << "the attacker's endpoint not shed";
  EXPECT_EQ(call(kNode, *token_), 0) << "the other endpoint behind the same address was shed";
  bool named = false;
  for (const auto& line : lps_->AccessLog()) {
    named |= line.value("peer", "").find(";azure-link-id=16909060") != std::string::npos;
  }
  EXPECT_TRUE(named) << "no access-log line names the node's link ID";
}

// A blocking TCP connection to 127.0.0.1:port from `source` (a loopback address of its own,
// so the service sees another peer), or -1.
int ConnectFrom(const char* source, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{}, to{};
  from.sin_family = to.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  to.sin_port = htons(port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A scrape of /metrics as Prometheus makes it, from `source`: the HTTP status, or -1 when it
// was not answered within `timeout`.
int ScrapeFrom(const char* source, uint16_t port, milliseconds timeout, std::string* body) {
  int fd = ConnectFrom(source, port);
  if (fd < 0) return -1;
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: lps\r\nConnection: close\r\n\r\n";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buf[65536];
  for (auto until = steady_clock::now() + timeout; steady_clock::now() < until;) {
    if (!WaitFd(fd, POLLIN, milliseconds(50))) continue;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (response.rfind("HTTP/1.1 ", 0) != 0) return -1;
  const size_t head_end = response.find("\r\n\r\n");
  if (body != nullptr && head_end != std::string::npos) *body = response.substr(head_end + 4);
  return std::stoi(response.substr(9, 3));
}

// The metrics listener (issue 31): civetweb gave each connection one of 2 threads, so two slow
// peers stalled every scrape and the replica's counts never reached Prometheus. Now one epoll
// thread holds connections as slots: two peers trickling a request a byte at a time, and 60
// more connections held idle from the same address (past its 8), leave scrapes from another
// address answered, each whole, while they last.
TEST_F(ServiceAttackTest, SlowMetricsClientsNeverStarveAScrape) {
  StartService({}, kMetricsFlags);
  const uint16_t port = lps_->metrics_port();
  std::vector<int> slow = ConnectMany(port, 2, seconds(2));
  ASSERT_EQ(slow.size(), 2u);
  std::vector<int> idle = ConnectMany(port, 60, seconds(2));
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: lps\r\nX-Slow: ";
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    for (size_t at = 0; !stop; ++at) {
      for (int fd : slow) send(fd, request.data() + at % request.size(), 1, MSG_NOSIGNAL);
      // The trickle's pace, a byte every 200 ms (not a wait for anything).
      for (int i = 0; i < 10 && !stop; ++i) std::this_thread::sleep_for(milliseconds(20));
    }
  });
  int answered = 0;
  double slowest = 0;
  for (int i = 0; i < 10; ++i) {
    std::string body;
    const auto started = steady_clock::now();
    answered += ScrapeFrom("127.0.0.2", port, seconds(2), &body) == 200 &&
                body.find("lp_open_connections") != std::string::npos;
    slowest =
        std::max(slowest, std::chrono::duration<double>(steady_clock::now() - started).count());
    // Spreads the scrapes over the trickle's bytes (pace, not a wait for anything).
    std::this_thread::sleep_for(milliseconds(100));
  }
  // The slow peers are still being held (their requests unfinished), not closed to make room.
  int slow_open = 0;
  for (int fd : slow) {
    char c;
    slow_open += recv(fd, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;
  }
  stop = true;
  trickle.join();
  for (int fd : slow) close(fd);
  for (int fd : idle) close(fd);
  std::cout << "[attack] metrics listener: 2 trickling peers and 60 idle connections from one "
            << "address; scrapes from another answered " << answered << "/10, the slowest in "
            << slowest << " s" << std::endl;
  EXPECT_EQ(answered, 10);
  EXPECT_LT(slowest, 2.0);
  EXPECT_EQ(slow_open, 2) << "the trickling peers were closed: the test held nothing";
  ExpectStillServing();
}

// A handshake flood (issue 31): connection after connection from 127.0.0.3, through HAProxy
// (which names 127.0.0.3 in its PROXY header), sending bytes that are no ClientHello. Each
// failed handshake is the peer's own fault and counts against its address (scaled:
// --max-refusals-per-peer 6 in 2 s), so the address is shed before TLS; the node at 127.0.0.1,
// through the same HAProxy, is served on every call.
TEST_F(ServiceAttackTest, AHandshakeFloodShedsItsAddressNotTheNodes) {
  StartShedServiceBehindHaproxy();
  const uint16_t through_proxy = node_port();
  CaseResult r =
      RunAttack("handshake flood from 127.0.0.3 through HAProxy", 2, [&](AttackCtl& ctl) {
        const std::string junk = "GET / HTTP/1.1\r\nHost: lps\r\n\r\n";
        while (ctl.Running()) {
          int fd = ConnectFrom("127.0.0.3", through_proxy);
          if (fd < 0) {
            ++ctl.stats.connect_failures;
            continue;
          }
          ++ctl.stats.connections;
          if (send(fd, junk.data(), junk.size(), MSG_NOSIGNAL) > 0) ++ctl.stats.frames;
          ClosedWithin(fd, seconds(1));
          close(fd);
        }
      });
  ExpectWithstood(r);
  const std::string metrics = HttpGet(lps_->metrics_port(), "/metrics");
  const double failed =
      MetricValue(metrics, "lp_transport_events_total", {{"event", "handshake_failed"}})
          .value_or(0);
  const double shed =
      MetricValue(metrics, "lp_transport_events_total", {{"event", "shed_refused_peer"}})
          .value_or(0);
  std::cout << "[attack] handshake flood: " << failed << " handshakes failed, " << shed
            << " connections shed before TLS" << std::endl;
  EXPECT_GE(failed, 6);
  EXPECT_GT(shed, failed) << "the flooding address was not shed";
}

TEST_F(ServiceAttackTest, IdleConnectionsPastTheFdLimitThenServingAgain) {
  constexpr long kFdLimit = 256;
  constexpr size_t kIdleConnections = 2 * kFdLimit;
  constexpr milliseconds kHold{2000};
  constexpr milliseconds kRecovery{5000};
  StartService(
      {"prlimit", "--nofile=" + std::to_string(kFdLimit) + ":" + std::to_string(kFdLimit)});
  ASSERT_EQ(MaxOpenFiles(pid()), kFdLimit) << "prlimit did not apply to the service's pid";

  CaseResult r;
  r.idle_kb = WarmUpAndIdleRss();
  AttackCtl ctl;
  RssWatch rss(pid(), r.idle_kb, &ctl);
  std::vector<int> idle;
  {
    // While the fds are exhausted a node may well be refused: counted, not asserted.
    NodeClient node(*files_, node_port(), *token_);
    idle = ConnectMany(lps_->port(), kIdleConnections, seconds(1));
    std::this_thread::sleep_for(kHold);
    node.Stop();
    r.node_ok = node.ok();
    r.node_total = node.total();
  }
  for (int fd : idle) close(fd);

  // Once they are gone the listener accepts again: a node is served within a few seconds,
  // and every node after it.
  auto recovered_by = steady_clock::now() + kRecovery;
  GrpcReply first;
  do {
    auto left = std::chrono::duration_cast<milliseconds>(recovered_by - steady_clock::now());
    first = NodeCall(*files_, node_port(), *token_,
                     std::clamp(left, milliseconds(100), kLegitDeadline));
  } while (!first.status.ok() && steady_clock::now() < recovered_by);
  int ok_after = 0;
  if (first.status.ok()) {
    for (int i = 0; i < 10; ++i) ok_after += NodeCall(*files_, node_port(), *token_).status.ok();
  }
  rss.Stop();
  r.peak_kb = rss.peak_kb();
  r.rss_aborted = rss.aborted();
  r.service_gone = rss.gone();
  std::cout << "[attack] " << kIdleConnections << " idle connections, fd limit " << kFdLimit << ": "
            << idle.size() << " connected, idle " << r.idle_kb / 1024 << " MiB, peak "
            << r.peak_kb / 1024 << " MiB (+" << (r.peak_kb - r.idle_kb) / 1024
            << " MiB), node calls OK while held " << r.node_ok << "/" << r.node_total
            << ", after: " << (first.status.ok() ? "served" : "NOT served") << ", then " << ok_after
            << "/10 OK" << std::endl;

  // More than the service could take: the kernel's backlog holds what it did not accept.
  EXPECT_GT(idle.size(), static_cast<size_t>(kFdLimit));
  ExpectBoundedMemory(r);
  ASSERT_TRUE(first.status.ok()) << "not serving " << kRecovery.count()
                                 << " ms after the idle connections closed: " << first.code() << " "
                                 << first.status.error_message();
  EXPECT_EQ(ok_after, 10) << "calls after recovery";
  ExpectStillServing();
}

// Under a memory limit, what connections hold beyond their baseline comes out of one pool
// (connection_memory.h), of which one address may hold an eighth. A flood from one address
// (127.0.0.2) of connections that each try to hold what one connection can (every stream's
// header list near its cap, a body, never finished), more of them than the cap: the address's
// share refuses what they try to hold past it (a stream answered RESOURCE_EXHAUSTED, or a
// connection closed when nghttp2 or OpenSSL needs more), resident memory stays under the
// limit, and a node at another address is served throughout (the per-address connection cap
// leaves it a slot). The cap
// itself, 2,000 and more idle connections in 128Mi, is a Release build's figure:
// bench/density.sh, which scripts/test.sh runs.
TEST_F(ServiceAttackTest, AMemoryLimitBoundsWhatConnectionsHoldAndNeighboursKeepTheirShare) {
  constexpr uint64_t kLimit = 256ull << 20;
  constexpr size_t kCap = 200;
  StartService({}, {"--memory-limit", "256Mi", "--max-connections", std::to_string(kCap),
                    "--max-connections-per-peer", "150", "--metrics-listen", "127.0.0.1:0"});
  double pool = 0, per_address = 0;
  for (const auto& line : lps_->LogLines()) {
    if (line.value("msg", "") == "live-patching-service serving") {
      EXPECT_EQ(line.value("max_connections", 0), static_cast<int>(kCap));
      pool = line.value("connection_memory_pool_bytes", 0.0);
      per_address = line.value("connection_memory_per_address_bytes", 0.0);
      EXPECT_EQ(line.value("memory_limit", ""), "256Mi");
      EXPECT_EQ(line.value("memory_limit_from", ""), "flag");
      EXPECT_TRUE(line.value("openssl_memory_accounted", false));
    }
  }
  ASSERT_GT(pool, 0);
  ASSERT_EQ(per_address, std::floor(pool / 8));
  const long idle_kb = WarmUpAndIdleRss();

  AttackCtl ctl;
  ctl.port = lps_->port();
  ctl.source = "127.0.0.2";
  std::vector<std::unique_ptr<H2Conn>> held;
  std::mutex mu;
  long peak_kb = idle_kb;
  int node_ok = 0, node_total = 0;
  double pool_used_held = -1;
  {
    RssWatch rss(pid(), idle_kb, &ctl);
    constexpr size_t kThreads = 4;
    const size_t per_thread = (kCap + 64 + kThreads - 1) / kThreads;
    std::vector<std::thread> attackers;
    for (size_t i = 0; i < kThreads; ++i) {
      attackers.emplace_back([&] { FullConnections(ctl, per_thread, &held, &mu); });
    }
    for (auto& t : attackers) t.join();
    pool_used_held =
        MetricValue(HttpGet(lps_->metrics_port(), "/metrics"), "lp_connection_memory_bytes")
            .value_or(-1);
    // Held a moment, still answering what the service sends (acks, window updates), while a
    // node at 127.0.0.1 calls.
    for (int i = 0; i < 5; ++i) {
      for (auto& c : held) c->Pump();
      ++node_total;
      node_ok += NodeCall(*files_, node_port(), *token_, seconds(10)).status.ok() ? 1 : 0;
    }
    rss.Stop();
    peak_kb = rss.peak_kb();
    EXPECT_FALSE(rss.gone()) << "the service exited during the flood";
  }
  const std::string metrics = HttpGet(lps_->metrics_port(), "/metrics");
  auto event = [&](const char* name) {
    return MetricValue(metrics, "lp_transport_events_total", {{"event", name}}).value_or(0);
  };
  std::cout << "[attack] memory flood from one address: cap " << kCap << " (150 per address), pool "
            << pool / (1 << 20) << " MiB (" << per_address / (1 << 20)
            << " MiB per address), in use while held " << pool_used_held / (1 << 20)
            << " MiB; idle " << idle_kb / 1024 << " MiB, peak " << peak_kb / 1024
            << " MiB; shed_per_peer " << event("shed_per_peer") << ", memory_over_share "
            << event("memory_over_share") << ", kept_bytes_over_budget "
            << event("kept_bytes_over_budget") << "; node calls from another address OK " << node_ok
            << "/" << node_total << "; " << ctl.stats.Summary() << std::endl;
  EXPECT_LT(static_cast<uint64_t>(peak_kb) * 1024, kLimit)
      << "resident " << peak_kb << " kB under a 256Mi limit";
  EXPECT_EQ(node_ok, node_total) << "the node's address has its own share";
  // What the flood could make the service hold: its address's share, and the node's calls.
  EXPECT_GT(pool_used_held, 0);
  EXPECT_LE(pool_used_held, per_address + 256 * 1024);
  EXPECT_GT(event("memory_over_share") + event("kept_bytes_over_budget"), 0)
      << "the flood never ran into its share";
  EXPECT_EQ(MetricValue(metrics, "lp_max_connections").value_or(0), static_cast<double>(kCap));
  EXPECT_EQ(MetricValue(metrics, "lp_memory_limit_bytes").value_or(0), static_cast<double>(kLimit));
  EXPECT_EQ(MetricValue(metrics, "lp_connection_memory_pool_bytes").value_or(0), pool);
  EXPECT_LE(MetricValue(metrics, "lp_open_connections").value_or(1e9), static_cast<double>(kCap));
  bool logged = false;
  for (const auto& line : lps_->LogLines()) {
    logged |= line.value("msg", "") == "connection limit" &&
              (line.value("event", "") == "memory_over_share" ||
               line.value("event", "") == "kept_bytes_over_budget");
  }
  EXPECT_TRUE(logged) << "no \"connection limit\" line for the flood's refusals";

  // The flood ends: every connection gave back what it held.
  held.clear();
  std::optional<double> used;
  EXPECT_TRUE(WaitFor([&] {
    used = MetricValue(HttpGet(lps_->metrics_port(), "/metrics"), "lp_connection_memory_bytes");
    return used == 0.0;
  })) << "connection memory still in use: "
      << used.value_or(-1);
  GrpcReply r = NodeCall(*files_, node_port(), *token_, seconds(10));
  ASSERT_TRUE(r.status.ok()) << r.code() << " " << r.status.error_message();
  EXPECT_EQ(r.response.config(), kServedMap);
}

// OpenSSL's allocations for a connection are charged to it (CRYPTO_set_mem_functions, which
// the service installs first thing: connection_memory.h). Connections from one address that
// each leave a TLS record unfinished (the header of a 16 KiB record and a few of its bytes)
// make OpenSSL hold a read buffer for each, beyond what an idle connection is allowed: the
// pool holds them until the address's share is used up; from then on the address's new
// connections are closed in their handshake, which needs more than the allowance for a moment
// (memory_over_share), while a node at another address is served. Under 128Mi the pool is its
// least, so the share is a few dozen such connections.
TEST_F(ServiceAttackTest, PartialTlsRecordsAreChargedToTheirAddress) {
  StartService({}, {"--memory-limit", "128Mi", "--metrics-listen", "127.0.0.1:0"});
  double per_address = 0;
  for (const auto& line : lps_->LogLines()) {
    if (line.value("msg", "") == "live-patching-service serving") {
      ASSERT_TRUE(line.value("openssl_memory_accounted", false)) << line.dump();
      per_address = line.value("connection_memory_per_address_bytes", 0.0);
    }
  }
  ASSERT_GT(per_address, 0);
  WarmUpAndIdleRss();
  auto pool_used = [&] {
    return MetricValue(HttpGet(lps_->metrics_port(), "/metrics"), "lp_connection_memory_bytes")
        .value_or(-1);
  };
  EXPECT_TRUE(WaitFor([&] { return pool_used() == 0.0; })) << "before: " << pool_used();

  AttackCtl ctl;
  ctl.port = lps_->port();
  ctl.source = "127.0.0.2";
  // A record header for 16,384 bytes of application data, and the first 100 of them.
  const std::string partial = std::string("\x17\x03\x03\x40\x00", 5) + std::string(100, 'x');
  std::vector<std::unique_ptr<H2Conn>> held;
  double most = 0;
  size_t opened = 0;
  for (int i = 0; i < 200; ++i) {
    std::unique_ptr<H2Conn> c = H2Conn::Open(ctl.port, &ctl);
    if (!c) continue;
    ++opened;
    c->Pump();  // the server's SETTINGS and its ack: nothing of ours in flight
    ASSERT_EQ(send(c->fd(), partial.data(), partial.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(partial.size()));
    held.push_back(std::move(c));
    if (i % 20 == 19) most = std::max(most, pool_used());
  }
  // The service has read every partial record it will (each connection's first read).
  double used = 0;
  WaitFor([&] {
    used = pool_used();
    most = std::max(most, used);
    return used > 0 && used == pool_used();
  });
  const std::string metrics = HttpGet(lps_->metrics_port(), "/metrics");
  const double over =
      MetricValue(metrics, "lp_transport_events_total", {{"event", "memory_over_share"}})
          .value_or(0);
  size_t still_open = 0;
  for (auto& c : held) {
    c->Pump();
    still_open += c->closed() ? 0 : 1;
  }
  GrpcReply node = NodeCall(*files_, node_port(), *token_, seconds(10));
  std::cout << "[attack] partial TLS records from one address: " << opened << " opened, "
            << still_open << " still open, pool in use " << used / 1024 << " KiB (most "
            << most / 1024 << " KiB, share " << per_address / 1024 << " KiB), memory_over_share "
            << over << "; node from another address: " << (node.status.ok() ? "served" : "NOT")
            << std::endl;
  EXPECT_GT(used, 16 * 1024) << "OpenSSL's read buffers are not charged";
  EXPECT_LE(most, per_address) << "one address held more than its share";
  EXPECT_GE(over, 1) << "no connection was closed past the share";
  EXPECT_LT(opened, 200u) << "the share never refused a handshake";
  EXPECT_GT(still_open, 0u);
  ASSERT_TRUE(node.status.ok()) << node.code() << " " << node.status.error_message();
  held.clear();
  EXPECT_TRUE(WaitFor([&] { return pool_used() == 0.0; }))
      << "after the connections closed: " << pool_used();
}

}  // namespace
}  // namespace hotfix::testsupport
