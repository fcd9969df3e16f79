#include "service/transport/connection_memory.h"

#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace hotfix::service {
namespace {

// Every accounted allocation carries who paid for it and how much, so a free (on whatever
// thread, whenever) credits the right account. 16 bytes keep malloc's alignment.
struct alignas(16) Header {
  ConnectionMemory* account;
  uint64_t size;
};
static_assert(sizeof(Header) == 16);

Header* HeaderOf(void* p) { return static_cast<Header*>(p) - 1; }

thread_local ConnectionMemory* t_current = nullptr;
std::atomic<bool> g_openssl_accounted{false};

uint64_t RoundUpToChunk(uint64_t n) {
  const uint64_t c = ConnectionMemory::kChunkBytes;
  return (n + c - 1) / c * c;
}

void* AllocateFor(ConnectionMemory* account, size_t n, bool may_refuse) {
  if (account != nullptr) {
    if (may_refuse) {
      if (!account->TryAllocate(n)) return nullptr;
    } else {
      account->Allocate(n);
    }
  }
  auto* h = static_cast<Header*>(std::malloc(sizeof(Header) + n));
  if (h == nullptr) {
    if (account != nullptr) account->Free(n);
    return nullptr;
  }
  h->account = account;
  h->size = n;
  return h + 1;
}

void FreeAccounted(void* p) {
  if (p == nullptr) return;
  Header* h = HeaderOf(p);
  ConnectionMemory* account = h->account;
  const uint64_t size = h->size;
  std::free(h);
  if (account != nullptr) account->Free(size);  // may delete the account: last
}

void* ReallocAccounted(void* p, size_t n, bool may_refuse) {
  Header* old = HeaderOf(p);
  ConnectionMemory* account = old->account;
  const uint64_t old_size = old->size;
  // The account is charged the new size before the old is credited, so it stays alive.
  if (account != nullptr) {
    if (may_refuse) {
      if (!account->TryAllocate(n)) return nullptr;
    } else {
      account->Allocate(n);
    }
  }
  auto* h = static_cast<Header*>(std::realloc(old, sizeof(Header) + n));
  if (h == nullptr) {
    if (account != nullptr) account->Free(n);
    return nullptr;
  }
  h->size = n;
  if (account != nullptr) account->Free(old_size);
  return h + 1;
}

// OpenSSL's memory functions (CRYPTO_set_mem_functions(3)): CRYPTO_malloc and CRYPTO_realloc
// call these directly, so they keep the defaults' edge cases (0 bytes: NULL; realloc to 0 frees).
void* OpenSslMalloc(size_t n, const char*, int) {
  if (n == 0) return nullptr;
  return AllocateFor(t_current, n, /*may_refuse=*/false);
}
void OpenSslFree(void* p, const char*, int) { FreeAccounted(p); }
void* OpenSslRealloc(void* p, size_t n, const char* file, int line) {
  if (p == nullptr) return OpenSslMalloc(n, file, line);
  if (n == 0) {
    FreeAccounted(p);
    return nullptr;
  }
  return ReallocAccounted(p, n, /*may_refuse=*/false);
}

// nghttp2's (nghttp2_mem): the account is the session's; past its share, NULL.
void* NgMalloc(size_t n, void* user) {
  return AllocateFor(static_cast<ConnectionMemory*>(user), n, /*may_refuse=*/true);
}
void NgFree(void* p, void*) { FreeAccounted(p); }
void* NgCalloc(size_t count, size_t size, void* user) {
  if (size != 0 && count > SIZE_MAX / size) return nullptr;
  void* p = NgMalloc(count * size, user);
  if (p != nullptr) std::memset(p, 0, count * size);
  return p;
}
void* NgRealloc(void* p, size_t n, void* user) {
  if (p == nullptr) return NgMalloc(n, user);
  if (n == 0) {
    FreeAccounted(p);
    return nullptr;
  }
  return ReallocAccounted(p, n, /*may_refuse=*/true);
}

}  // namespace

bool MemoryPool::TryCharge(const std::string& key, uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t used = used_.load(std::memory_order_relaxed);
  if (n > limit_ - used) return false;
  uint64_t& mine = by_key_[key];
  if (n > per_key_limit_ - mine) {
    if (mine == 0) by_key_.erase(key);
    return false;
  }
  mine += n;
  used_.store(used + n, std::memory_order_relaxed);
  return true;
}

void MemoryPool::Release(const std::string& key, uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  n = std::min(n, it->second);
  it->second -= n;
  if (it->second == 0) by_key_.erase(it);
  used_.store(used_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
}

size_t MemoryPool::keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_key_.size();
}

ConnectionMemory* ConnectionMemory::New(std::shared_ptr<MemoryPool> pool, std::string key,
                                        uint64_t allowance) {
  return new ConnectionMemory(std::move(pool), std::move(key), allowance);
}

ConnectionMemory::ConnectionMemory(std::shared_ptr<MemoryPool> pool, std::string key,
                                   uint64_t allowance)
    : pool_(std::move(pool)),
      key_(std::move(key)),
      allowance_(allowance),
      nghttp2_mem_{this, NgMalloc, NgFree, NgCalloc, NgRealloc} {}

ConnectionMemory::~ConnectionMemory() {
  if (pool_ != nullptr && reserved_.load() > 0) pool_->Release(key_, reserved_.load());
}

bool ConnectionMemory::Cover() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t used = used_.load(std::memory_order_relaxed);
  if (used <= allowance_) return true;
  const uint64_t want = RoundUpToChunk(used - allowance_);
  const uint64_t have = reserved_.load(std::memory_order_relaxed);
  if (want <= have) return true;
  if (pool_ != nullptr && !pool_->TryCharge(key_, want - have)) return false;
  reserved_.store(want, std::memory_order_relaxed);
  return true;
}

void ConnectionMemory::GiveBack() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t used = used_.load(std::memory_order_relaxed);
  // One chunk of slack stays, so a connection that allocates and frees around a chunk's
  // edge does not take the pool's lock each time.
  const uint64_t keep = used <= allowance_ ? 0 : RoundUpToChunk(used - allowance_) + kChunkBytes;
  const uint64_t have = reserved_.load(std::memory_order_relaxed);
  if (have <= keep) return;
  if (pool_ != nullptr) pool_->Release(key_, have - keep);
  reserved_.store(keep, std::memory_order_relaxed);
}

bool ConnectionMemory::TryCharge(uint64_t n, uint64_t headroom) {
  const uint64_t want = n + headroom;
  const uint64_t used = used_.fetch_add(want, std::memory_order_relaxed) + want;
  if (used > allowance_ + reserved_.load(std::memory_order_relaxed) && !Cover()) {
    used_.fetch_sub(want, std::memory_order_relaxed);
    return false;
  }
  if (headroom > 0) Release(headroom);
  return true;
}

void ConnectionMemory::Release(uint64_t n) {
  const uint64_t used = used_.fetch_sub(n, std::memory_order_relaxed) - n;
  const uint64_t reserved = reserved_.load(std::memory_order_relaxed);
  if (reserved > 0 && allowance_ + reserved >= used + 2 * kChunkBytes) GiveBack();
}

void ConnectionMemory::Allocate(uint64_t n) {
  refs_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t used = used_.fetch_add(n, std::memory_order_relaxed) + n;
  if (used > allowance_ + reserved_.load(std::memory_order_relaxed) && !Cover()) {
    over_.store(true, std::memory_order_relaxed);
  }
}

bool ConnectionMemory::TryAllocate(uint64_t n) {
  if (!TryCharge(n)) {
    over_.store(true, std::memory_order_relaxed);
    return false;
  }
  refs_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ConnectionMemory::Free(uint64_t n) {
  Release(n);
  Unref();
}

void ConnectionMemory::Close() { Unref(); }

void ConnectionMemory::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

ConnectionMemoryScope::ConnectionMemoryScope(ConnectionMemory* memory) : previous_(t_current) {
  t_current = memory;
}

ConnectionMemoryScope::~ConnectionMemoryScope() { t_current = previous_; }

bool InstallOpenSslMemoryAccounting() {
  if (g_openssl_accounted.load()) return true;
  if (CRYPTO_set_mem_functions(OpenSslMalloc, OpenSslRealloc, OpenSslFree) != 1) return false;
  g_openssl_accounted.store(true);
  return true;
}

bool OpenSslMemoryAccounted() { return g_openssl_accounted.load(); }

}  // namespace hotfix::service
