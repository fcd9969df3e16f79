#include "wire/memory_stream.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>

namespace hotfix::wire {

Status ScriptedByteStream::WriteAll(std::string_view data, Deadline /*deadline*/) {
  written_.append(data);
  return Status::Ok();
}

StatusOr<size_t> ScriptedByteStream::ReadSome(char* buf, size_t len, Deadline /*deadline*/) {
  size_t n = std::min({len, max_chunk_, input_.size() - offset_});
  std::memcpy(buf, input_.data() + offset_, n);
  offset_ += n;
  return n;
}

// Direction i carries bytes written by side 1-i to side i.
struct MemoryPipeEnd::Shared {
  std::mutex mu;
  std::condition_variable cv;
  std::string data[2];
  size_t read_offset[2] = {0, 0};
  bool closed[2] = {false, false};  // side i called Close(): no more reads or writes from it
  bool reset = false;
};

Status MemoryPipeEnd::WriteAll(std::string_view data, Deadline /*deadline*/) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  int peer = 1 - side_;
  if (shared_->reset) return Status::Unavailable("connection reset by peer");
  if (shared_->closed[side_]) return Status::Unavailable("write on a closed stream");
  if (shared_->closed[peer]) return Status::Unavailable("broken pipe: peer closed the stream");
  shared_->data[peer].append(data);
  shared_->cv.notify_all();
  return Status::Ok();
}

StatusOr<size_t> MemoryPipeEnd::ReadSome(char* buf, size_t len, Deadline deadline) {
  std::unique_lock<std::mutex> lock(shared_->mu);
  std::string& in = shared_->data[side_];
  size_t& offset = shared_->read_offset[side_];
  auto ready = [&] {
    return shared_->reset || offset < in.size() || shared_->closed[1 - side_] ||
           shared_->closed[side_];
  };
  if (deadline.infinite()) {
    shared_->cv.wait(lock, ready);
  } else if (!shared_->cv.wait_until(lock, deadline.when(), ready)) {
    return Status::DeadlineExceeded("no data before the deadline");
  }
  if (shared_->reset) return Status::Unavailable("connection reset by peer");
  if (shared_->closed[side_]) return Status::Unavailable("read on a closed stream");
  size_t n = std::min(len, in.size() - offset);
  std::memcpy(buf, in.data() + offset, n);
  offset += n;
  // Compact now and then so that a long transfer does not keep every byte.
  if (offset == in.size() || offset > (1u << 20)) {
    in.erase(0, offset);
    offset = 0;
  }
  return n;
}

void MemoryPipeEnd::Close() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->closed[side_] = true;
  shared_->cv.notify_all();
}

void MemoryPipeEnd::Reset() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->reset = true;
  shared_->cv.notify_all();
}

std::pair<std::unique_ptr<MemoryPipeEnd>, std::unique_ptr<MemoryPipeEnd>> NewMemoryPipe() {
  auto shared = std::make_shared<MemoryPipeEnd::Shared>();
  return {std::make_unique<MemoryPipeEnd>(shared, 0), std::make_unique<MemoryPipeEnd>(shared, 1)};
}

}  // namespace hotfix::wire
