#include "service/transport/refused_peers.h"

#include <algorithm>
#include <cstring>
#include <functional>

namespace hotfix::service {

RefusedPeers::RefusedPeers(RefusedPeerLimit limit)
    : limit_(limit), slots_(std::max<size_t>(limit.slots, 1)) {}

size_t RefusedPeers::Index(std::string_view address) const {
  // An attacker can choose addresses that share a slot; that only evicts one of its own
  // refused addresses (less shedding), since a slot answers for the exact address it holds.
  return std::hash<std::string_view>()(address) % slots_.size();
}

bool RefusedPeers::Holds(const Slot& slot, std::string_view address) {
  return slot.size == address.size() &&
         std::memcmp(slot.address.data(), address.data(), address.size()) == 0;
}

void RefusedPeers::Record(std::string_view address, TimePoint now) {
  if (limit_.max_refusals == 0 || address.empty() || address.size() > 16) return;
  const size_t i = Index(address);
  std::lock_guard<std::mutex> lock(mu_[i % kShards]);
  Slot& slot = slots_[i];
  if (!Holds(slot, address) || now >= slot.window_end) {
    std::memcpy(slot.address.data(), address.data(), address.size());
    slot.size = static_cast<uint8_t>(address.size());
    slot.window_end = now + limit_.window;
    slot.refusals = 0;
    slot.shed_arrivals = 0;
  }
  if (slot.refusals < limit_.max_refusals) ++slot.refusals;
}

bool RefusedPeers::Shed(std::string_view address, TimePoint now) {
  if (limit_.max_refusals == 0 || address.empty() || address.size() > 16) return false;
  const size_t i = Index(address);
  std::lock_guard<std::mutex> lock(mu_[i % kShards]);
  Slot& slot = slots_[i];
  if (!Holds(slot, address) || now >= slot.window_end || slot.refusals < limit_.max_refusals) {
    return false;
  }
  // Every admit_one_in-th arrival while shed is let in: a node behind the same address keeps
  // a share of its calls, and the peer at fault a share of its cost.
  if (limit_.admit_one_in <= 1) return false;
  return ++slot.shed_arrivals % limit_.admit_one_in != 0;
}

}  // namespace hotfix::service
