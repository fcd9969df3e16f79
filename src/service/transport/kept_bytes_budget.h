// One budget, for the whole process, of the request bytes streams keep until they are answered: the
// metadata values the handler reads (the attested document, up to 64 KiB) and message bodies. Each
// connection is already bounded (H2Limits, memory_budget.h); this bounds their sum, so that many
// connections each holding their most cannot together take what the rest of the process needs. A
// stream that would go over is answered RESOURCE_EXHAUSTED at once and keeps nothing
// (docs/SERVICE.md, "Limits"). Thread-safe: every event loop charges the one budget.
//
//   KeptBytesBudget budget(64 << 20);
//   if (!budget.TryCharge(n)) refuse;  ...  budget.Release(n);   // when the stream ends
#pragma once

#include <atomic>
#include <cstdint>

namespace hotfix::service {

class KeptBytesBudget {
 public:
  explicit KeptBytesBudget(uint64_t limit) : limit_(limit) {}
  KeptBytesBudget(const KeptBytesBudget&) = delete;
  KeptBytesBudget& operator=(const KeptBytesBudget&) = delete;

  // Charges n bytes, or nothing (false) when that would pass the limit.
  bool TryCharge(uint64_t n) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (n > limit_ - used) return false;
    } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
    return true;
  }
  void Release(uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }

  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace hotfix::service
