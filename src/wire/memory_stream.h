// In-memory ByteStreams: they let CallUnary run against raw bytes (fuzzers, canned server replies)
// or against an in-process HTTP/2 peer on another thread (unit tests), without sockets or TLS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "common/deadline.h"
#include "common/status.h"
#include "wire/byte_stream.h"

namespace hotfix::wire {

// Serves fixed bytes to the reader, then end of stream (ReadSome returns 0). Records writes.
// Not thread-safe: one caller drives it, as a fuzzer does.
class ScriptedByteStream : public ByteStream {
 public:
  // max_chunk bounds every read so that frames arrive split at arbitrary points.
  explicit ScriptedByteStream(std::string input, size_t max_chunk = SIZE_MAX)
      : input_(std::move(input)), max_chunk_(max_chunk == 0 ? 1 : max_chunk) {}

  Status WriteAll(std::string_view data, Deadline deadline) override;
  StatusOr<size_t> ReadSome(char* buf, size_t len, Deadline deadline) override;

  const std::string& written() const { return written_; }

 private:
  std::string input_;
  size_t offset_ = 0;
  size_t max_chunk_;
  std::string written_;
};

// One end of an in-memory duplex pipe with socket-like semantics. The two ends may be used
// from two threads. Buffers are unbounded: writes never block.
class MemoryPipeEnd : public ByteStream {
 public:
  struct Shared;
  MemoryPipeEnd(std::shared_ptr<Shared> shared, int side)
      : shared_(std::move(shared)), side_(side) {}
  ~MemoryPipeEnd() override { Close(); }
  MemoryPipeEnd(const MemoryPipeEnd&) = delete;
  MemoryPipeEnd& operator=(const MemoryPipeEnd&) = delete;

  // kUnavailable once the peer closed or reset.
  Status WriteAll(std::string_view data, Deadline deadline) override;
  // The peer's bytes; 0 once the peer closed and everything was read; kUnavailable after a
  // reset; kDeadlineExceeded when nothing arrived in time.
  StatusOr<size_t> ReadSome(char* buf, size_t len, Deadline deadline) override;

  // Like close(2): the peer reads what is buffered, then 0; its later writes fail.
  void Close();
  // Like a TCP RST: the peer's reads and writes fail from now on.
  void Reset();

 private:
  std::shared_ptr<Shared> shared_;
  int side_;
};

// Two connected ends.
std::pair<std::unique_ptr<MemoryPipeEnd>, std::unique_ptr<MemoryPipeEnd>> NewMemoryPipe();

}  // namespace hotfix::wire
