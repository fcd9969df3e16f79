// What an operator sees of the rollouts a running replica serves (docs/ROLLOUTS.md, "Status"):
// per component and rollout, its state, current percent, next step, and how many calls it
// applied to since this process started. Read by GET /rollouts and by the lp_rollout_*
// metrics; bounded by the rollouts in the current store snapshot, never by nodes.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "service/component_store.h"
#include "service/rollout.h"

namespace hotfix::service {

struct RolloutStatusRow {
  std::string component;
  std::string name;
  RolloutState state = RolloutState::kScheduled;
  uint32_t threshold = 0;  // the current percent * 100
  std::optional<RolloutStep> next_step;
  std::optional<RolloutTime> hold_at;
  bool halted = false;
  uint64_t applied_calls = 0;  // since this process started
};

class RolloutStatus {
 public:
  // store is borrowed and must outlive this.
  explicit RolloutStatus(const ComponentStore* store) : store_(store) {}

  // One call that the rollout applied to. Thread-safe.
  void RecordApplied(std::string_view component, std::string_view rollout);

  // Every rollout of the current snapshot at `now`, in file order per component. Counts of
  // rollouts no longer in the snapshot are dropped here, so they cannot accumulate.
  std::vector<RolloutStatusRow> Rows(RolloutTime now) const;

  // GET /rollouts: {"time":..., "generation":N, "components":{"<name>":[{...}]}}.
  std::string Json(RolloutTime now) const;

 private:
  const ComponentStore* store_;
  mutable std::mutex mu_;
  // component + '\0' + rollout name -> calls
  mutable std::map<std::string, uint64_t> applied_;
};

// "The time now" as rollouts see it: the system clock, whole seconds.
RolloutTime RolloutNow();

}  // namespace hotfix::service
