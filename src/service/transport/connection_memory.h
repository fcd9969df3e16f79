// What a connection holds beyond its idle baseline, and who pays for it. The connection cap
// charges every connection its measured idle cost (memory_budget.h, kConnectionBaselineBytes);
// everything more that a peer can make it hold comes out of one process-wide pool, in which no
// one peer address may hold more than its share:
//   - OpenSSL's allocations made for the connection (record buffers while a record is partial,
//     handshake messages and transcript), seen through CRYPTO_set_mem_functions;
//   - nghttp2's (a header field being decoded, queued frames), through the session's
//     nghttp2_mem, which fails the allocation past the share (nghttp2 then ends the session);
//   - the output a peer has not read, and the request bytes its streams keep.
// An idle connection's own allocations fit its allowance and charge the pool nothing.
//
//   auto pool = std::make_shared<MemoryPool>(16 << 20, 2 << 20);   // process-wide; per address
//   ConnectionMemory* m = ConnectionMemory::New(pool, address, kConnectionAllowanceBytes);
//   { ConnectionMemoryScope scope(m); SSL_read(...); }   // OpenSSL's allocations charge m
//   if (m->over()) close the connection;
//   m->Close();                                   // with the connection; m is freed once the
//                                                 // last allocation it paid for is
#pragma once

#include <nghttp2/nghttp2.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace hotfix::service {

// The bytes every connection's extra holdings may take at once, and one key's share of them.
// Thread-safe: every event loop charges the one pool.
class MemoryPool {
 public:
  MemoryPool(uint64_t limit, uint64_t per_key_limit)
      : limit_(limit), per_key_limit_(per_key_limit) {}
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // Charges n bytes to `key`, or nothing (false) when the pool or the key's share would go over.
  bool TryCharge(const std::string& key, uint64_t n);
  void Release(const std::string& key, uint64_t n);

  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }
  uint64_t per_key_limit() const { return per_key_limit_; }
  // Keys holding something now (a test's window on the table's exactness).
  size_t keys() const;

 private:
  const uint64_t limit_;
  const uint64_t per_key_limit_;
  std::atomic<uint64_t> used_{0};
  mutable std::mutex mu_;
  std::unordered_map<std::string, uint64_t> by_key_;  // never a zero entry
};

// One connection's account. Charges beyond the allowance reserve the pool in chunks, so the
// pool's lock is taken once per chunk, not per allocation.
class ConnectionMemory {
 public:
  static constexpr uint64_t kChunkBytes = 4 * 1024;

  // pool may be null: then nothing is ever refused (the allowance is unused). The account
  // shares the pool's ownership: OpenSSL may free what it paid for after the server is gone
  // (its global caches, at exit), and the account then still gives back what it reserved.
  static ConnectionMemory* New(std::shared_ptr<MemoryPool> pool, std::string key,
                               uint64_t allowance);

  // Bytes the connection's own code holds (output, kept request bytes): false, with nothing
  // charged, when they do not fit with `headroom` bytes more beside them (room left for
  // nghttp2 to answer with).
  bool TryCharge(uint64_t n, uint64_t headroom = 0);
  void Release(uint64_t n);

  // An allocation made for the connection (OpenSSL's, nghttp2's). Allocate never refuses (OpenSSL
  // must not see a failed malloc mid-record) but marks the account over, and the loop closes
  // the connection; TryAllocate refuses (nghttp2 reports NGHTTP2_ERR_NOMEM and ends the session).
  void Allocate(uint64_t n);
  bool TryAllocate(uint64_t n);
  void Free(uint64_t n);

  // A charge or an allocation did not fit: the connection is to be closed.
  bool over() const { return over_.load(std::memory_order_relaxed); }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // Held from the pool now (a multiple of kChunkBytes).
  uint64_t reserved() const { return reserved_.load(std::memory_order_relaxed); }

  // The connection is gone: the account lives on until the last allocation charged to it is
  // freed (OpenSSL may keep a session past its connection), then deletes itself.
  void Close();

  // An nghttp2_mem whose allocations charge this account (TryAllocate); valid while it lives.
  nghttp2_mem* nghttp2_allocator() { return &nghttp2_mem_; }

 private:
  ConnectionMemory(std::shared_ptr<MemoryPool> pool, std::string key, uint64_t allowance);
  ~ConnectionMemory();
  // Reserves what used_ needs from the pool; false when it does not fit.
  bool Cover();
  void GiveBack();
  void Unref();

  const std::shared_ptr<MemoryPool> pool_;
  const std::string key_;
  const uint64_t allowance_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> reserved_{0};  // changed under mu_
  std::atomic<bool> over_{false};
  std::atomic<uint64_t> refs_{1};  // the connection, and every live allocation
  std::mutex mu_;
  nghttp2_mem nghttp2_mem_;
};

// While in scope on this thread, OpenSSL's allocations charge `memory` (may be null).
class ConnectionMemoryScope {
 public:
  explicit ConnectionMemoryScope(ConnectionMemory* memory);
  ~ConnectionMemoryScope();
  ConnectionMemoryScope(const ConnectionMemoryScope&) = delete;
  ConnectionMemoryScope& operator=(const ConnectionMemoryScope&) = delete;

 private:
  ConnectionMemory* previous_;
};

// Routes OpenSSL's allocations through the accounting above (CRYPTO_set_mem_functions). Must
// run before OpenSSL allocates anything, so first in main; true if in force (installed now or
// before). Without it, OpenSSL's holdings go uncounted and the pool bounds the rest.
bool InstallOpenSslMemoryAccounting();
bool OpenSslMemoryAccounted();

}  // namespace hotfix::service
