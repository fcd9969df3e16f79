// TCP under a deadline: name resolution on a helper thread (getaddrinfo has no timeout),
// non-blocking connect to each address in turn, and deadline-bounded send/receive. Shared by
// the TLS dialer and by plain-HTTP clients (IMDS).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "common/deadline.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "wire/byte_stream.h"

namespace hotfix::wire {

bool IsIpLiteral(const std::string& host);

// Waits until fd is ready for events or the deadline passes (kDeadlineExceeded). Readiness
// includes errors: the next I/O call reports them.
Status WaitFd(int fd, short events, Deadline deadline);

// Resolves host (an IP literal is not looked up) and connects to each address in turn, sharing
// the time left like Go's dialSerial. The socket is non-blocking, close-on-exec, TCP_NODELAY.
// label prefixes messages ("proxy " -> "connecting to proxy 10.0.0.1:3128: ...").
StatusOr<UniqueFd> DialTcp(const std::string& host, uint16_t port, Deadline deadline,
                           const std::string& label = "");

// Sends everything (MSG_NOSIGNAL: a reset peer is an error, not SIGPIPE).
Status SendAll(int fd, std::string_view data, Deadline deadline);
// Waits for and reads at least one byte; 0 means the peer closed.
StatusOr<size_t> RecvSome(int fd, char* buf, size_t len, Deadline deadline);

class TcpStream : public ByteStream {
 public:
  explicit TcpStream(UniqueFd fd) : fd_(std::move(fd)) {}
  Status WriteAll(std::string_view data, Deadline deadline) override {
    return SendAll(fd_.get(), data, deadline);
  }
  StatusOr<size_t> ReadSome(char* buf, size_t len, Deadline deadline) override {
    return RecvSome(fd_.get(), buf, len, deadline);
  }

 private:
  UniqueFd fd_;
};

}  // namespace hotfix::wire
