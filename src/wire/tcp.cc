#include "wire/tcp.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "common/host_port.h"

namespace hotfix::wire {

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

Status WaitFd(int fd, short events, Deadline deadline) {
  while (true) {
    pollfd pfd{fd, events, 0};
    int rv = poll(&pfd, 1, deadline.PollTimeoutMs());
    if (rv > 0) return Status::Ok();
    if (rv < 0 && errno != EINTR)
      return Status::Unavailable(std::string("poll: ") + strerror(errno));
    if (rv == 0 && deadline.expired()) return Status::DeadlineExceeded("deadline exceeded");
  }
}

namespace {

// ---- Resolution, on a helper thread because getaddrinfo has no timeout. ----

struct Address {
  sockaddr_storage storage{};
  socklen_t len = 0;

  std::string ToString() const {
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (storage.ss_family == AF_INET) {
      auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
      inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
      port = ntohs(in->sin_port);
    } else if (storage.ss_family == AF_INET6) {
      auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
      inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
      port = ntohs(in6->sin6_port);
    }
    return JoinHostPort(host, port);
  }
};

// Shared with the resolver thread, which may outlive the wait: the last owner frees it.
struct Resolution {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int rc = 0;
  int sys_errno = 0;
  std::vector<Address> addresses;
};

void RunGetaddrinfo(const std::string& host, uint16_t port, int flags, Resolution& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | flags;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  int sys_errno = errno;
  std::vector<Address> addresses;
  for (addrinfo* ai = list; rc == 0 && ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    Address a;
    std::memcpy(&a.storage, ai->ai_addr, ai->ai_addrlen);
    a.len = ai->ai_addrlen;
    addresses.push_back(a);
  }
  if (list != nullptr) freeaddrinfo(list);
  std::lock_guard<std::mutex> lock(out.mu);
  out.rc = rc;
  out.sys_errno = sys_errno;
  out.addresses = std::move(addresses);
  out.done = true;
  out.cv.notify_all();
}

StatusOr<std::vector<Address>> Resolve(const std::string& host, uint16_t port, Deadline deadline) {
  auto state = std::make_shared<Resolution>();
  if (IsIpLiteral(host)) {
    RunGetaddrinfo(host, port, AI_NUMERICHOST, *state);
  } else {
    try {
      std::thread([state, host, port] { RunGetaddrinfo(host, port, 0, *state); }).detach();
    } catch (const std::system_error& e) {
      return Status::Unavailable("resolving " + host + ": cannot start resolver: " + e.what());
    }
  }
  std::unique_lock<std::mutex> lock(state->mu);
  auto done = [&state] { return state->done; };
  if (deadline.infinite()) {
    state->cv.wait(lock, done);
  } else if (!state->cv.wait_until(lock, deadline.when(), done)) {
    return Status::DeadlineExceeded("resolving " + host + " timed out");
  }
  if (state->rc != 0) {
    std::string why =
        state->rc == EAI_SYSTEM ? strerror(state->sys_errno) : gai_strerror(state->rc);
    return Status::Unavailable("resolving " + host + ": " + why);
  }
  if (state->addresses.empty()) return Status::Unavailable("resolving " + host + ": no addresses");
  return state->addresses;
}

// ---- TCP connect: each address in turn, sharing the time like Go's dialSerial. ----

// Go's partialDeadline: an equal share of what is left per remaining address, at least 2 s.
Deadline PartialDeadline(Deadline deadline, size_t remaining_addresses) {
  if (deadline.infinite()) return deadline;
  auto left = deadline.remaining();
  auto share = left / static_cast<int64_t>(remaining_addresses);
  auto sane_minimum = std::min<std::chrono::milliseconds>(left, std::chrono::seconds(2));
  return Deadline::After(std::max(share, sane_minimum));
}

StatusOr<UniqueFd> ConnectOne(const Address& address, Deadline deadline, const std::string& label) {
  std::string what = "connecting to " + label + address.ToString();
  UniqueFd fd(socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return Status::Unavailable(what + ": socket: " + strerror(errno));
  int rv = connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.len);
  if (rv != 0 && errno != EINPROGRESS) return Status::Unavailable(what + ": " + strerror(errno));
  if (rv != 0) {
    Status ready = WaitFd(fd.get(), POLLOUT, deadline);
    if (ready.code() == Status::Code::kDeadlineExceeded) {
      return Status::DeadlineExceeded(what + " timed out");
    }
    if (!ready.ok()) return ready.Annotate(what);
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) return Status::Unavailable(what + ": " + strerror(err));
  }
  int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // as Go; best effort
  return fd;
}

StatusOr<UniqueFd> ConnectAny(const std::vector<Address>& addresses, Deadline deadline,
                              const std::string& label) {
  Status first_error;
  for (size_t i = 0; i < addresses.size() && !deadline.expired(); ++i) {
    auto fd = ConnectOne(addresses[i], PartialDeadline(deadline, addresses.size() - i), label);
    if (fd.ok()) return fd;
    if (first_error.ok()) first_error = fd.status();
  }
  if (deadline.expired()) {
    return Status::DeadlineExceeded("connecting to " + label + addresses.front().ToString() +
                                    " timed out");
  }
  return first_error;
}

}  // namespace

StatusOr<UniqueFd> DialTcp(const std::string& host, uint16_t port, Deadline deadline,
                           const std::string& label) {
  auto addresses = Resolve(host, port, deadline);
  if (!addresses.ok()) return addresses.status();
  return ConnectAny(*addresses, deadline, label);
}

Status SendAll(int fd, std::string_view data, Deadline deadline) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (Status ready = WaitFd(fd, POLLOUT, deadline); !ready.ok()) return ready;
    } else if (n < 0 && errno != EINTR) {
      return Status::Unavailable(strerror(errno));
    }
  }
  return Status::Ok();
}

StatusOr<size_t> RecvSome(int fd, char* buf, size_t len, Deadline deadline) {
  while (true) {
    ssize_t n = recv(fd, buf, len, 0);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (Status ready = WaitFd(fd, POLLIN, deadline); !ready.ok()) return ready;
    } else if (errno != EINTR) {
      return Status::Unavailable(strerror(errno));
    }
  }
}

}  // namespace hotfix::wire
