// ByteStream: the one seam between the HTTP/2 session and whatever carries its bytes. A TLS
// connection in production; an in-memory peer in tests and fuzzers.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/deadline.h"
#include "common/status.h"

namespace hotfix::wire {

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Writes all of data, or fails (kDeadlineExceeded at the deadline, kUnavailable on a reset).
  virtual Status WriteAll(std::string_view data, Deadline deadline) = 0;
  // Waits for and reads at least one byte into buf; 0 means the peer closed the stream.
  virtual StatusOr<size_t> ReadSome(char* buf, size_t len, Deadline deadline) = 0;
};

}  // namespace hotfix::wire
