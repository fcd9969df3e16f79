#include "socket_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace hotfix::testsupport::net {
namespace {

// Fills a sockaddr for a numeric IPv4 or IPv6 address.
socklen_t MakeAddress(const std::string& host, uint16_t port, sockaddr_storage* out) {
  std::memset(out, 0, sizeof(*out));
  auto* v4 = reinterpret_cast<sockaddr_in*>(out);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    return sizeof(sockaddr_in);
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    return sizeof(sockaddr_in6);
  }
  throw std::runtime_error("not a numeric IP address: " + host);
}

uint16_t LocalPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return addr.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
                                   : ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
}

}  // namespace

ConnectionServer::ConnectionServer(const std::string& host, uint16_t port, Handler handler)
    : handler_(std::move(handler)) {
  IgnoreSigpipe();
  sockaddr_storage addr;
  socklen_t len = MakeAddress(host, port, &addr);
  listen_fd_ = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      listen(listen_fd_, 64) != 0) {
    int err = errno;
    if (listen_fd_ >= 0) close(listen_fd_);
    throw std::runtime_error("listening on " + host + ":" + std::to_string(port) + ": " +
                             std::strerror(err));
  }
  port_ = LocalPort(listen_fd_);
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

ConnectionServer::~ConnectionServer() { Stop(); }

void ConnectionServer::AcceptLoop() {
  while (!stopping_) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (stopping_ || fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ++accepted_;
    std::lock_guard<std::mutex> lock(mu_);
    open_fds_.insert(fd);
    workers_.emplace_back([this, fd] { Serve(fd); });
  }
}

void ConnectionServer::Serve(int fd) {
  // A test may restore SIGPIPE's default to prove its client never raises it; a handler
  // writing to a peer that hung up must still not kill the process.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  handler_(fd);
  // Close under the lock so Stop() never shuts down a recycled descriptor number.
  std::lock_guard<std::mutex> lock(mu_);
  open_fds_.erase(fd);
  close(fd);
}

void ConnectionServer::Stop() {
  if (stopping_.exchange(true)) return;
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    // eventfd writes only fail on overflow, which one write cannot cause.
  }
  accept_thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
    workers.swap(workers_);
  }
  for (auto& t : workers) t.join();
}

void IgnoreSigpipe() {
  static const bool done = [] {
    signal(SIGPIPE, SIG_IGN);
    return true;
  }();
  (void)done;
}

int ConnectTcp(const std::string& host, uint16_t port) {
  sockaddr_storage addr;
  socklen_t len = MakeAddress(host, port, &addr);
  int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool WaitReadable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, static_cast<int>(timeout.count()));
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

void Relay(int a, int b, const std::atomic<bool>& stop) {
  bool open[2] = {true, true};  // whether each side may still send to us
  const int fds[2] = {a, b};
  while ((open[0] || open[1]) && !stop) {
    // A closed direction gets fd -1 so poll ignores its POLLHUP; the timeout lets `stop` end
    // relays whose peers never close.
    pollfd p[2] = {{open[0] ? a : -1, POLLIN, 0}, {open[1] ? b : -1, POLLIN, 0}};
    int r = poll(p, 2, 100);
    if (r < 0 && errno != EINTR) return;
    for (int i = 0; i < 2 && r > 0; ++i) {
      if (!p[i].revents) continue;
      char buf[16384];
      ssize_t n = recv(fds[i], buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0 && SendAll(fds[1 - i], buf, static_cast<size_t>(n))) continue;
      if (n != 0) return;             // a reset, or the other side is gone: tear both down
      shutdown(fds[1 - i], SHUT_WR);  // orderly EOF: pass the half-close on
      open[i] = false;
    }
  }
}

}  // namespace hotfix::testsupport::net
