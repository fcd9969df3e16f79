// What an operator sees of the rollouts a running replica serves (docs/ROLLOUTS.md, "Status"):
// per component and rollout, its state, current percent, next step, and how many calls it
// applied to since this process started. Read by GET /rollouts and by the lp_rollout_*
// metrics; bounded by the rollouts in the current store snapshot, never by nodes.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "service/control/auto_halt_controller.h"
#include "service/rollout/rollout.h"
#include "service/store/component_store.h"

namespace hotfix::service {

struct RolloutStatusRow {
  std::string component;
  std::string name;
  RolloutState state = RolloutState::kScheduled;
  uint32_t threshold = 0;  // the current percent * 100
  std::optional<RolloutStep> next_step;
  std::optional<RolloutTime> hold_at;
  bool halted = false;
  std::optional<RolloutNote> halt_note, resume_note;  // the file's: who, when, why
  uint64_t applied_calls = 0;                         // since this process started
  // For a rollout with auto_halt (and an AutoHaltController set): its judgement; state,
  // threshold and next_step are then those of the rollout as judged (JudgedRollout).
  bool auto_halt = false;
  std::optional<AutoHaltState> auto_halt_state;  // nullopt: not evaluated yet
  // For a rollout with gates: their judgement (nullopt: not evaluated yet), and the file's
  // steps for the JSON (each gate's spec).
  bool gated = false;
  std::optional<GatesState> gates_state;
  std::vector<RolloutStep> file_steps;
  // What places a report in the rollout's evidence (EvidenceAttributionOf).
  EvidenceAttribution attribution = EvidenceAttribution::kSigned;
};

class RolloutStatus {
 public:
  // store is borrowed and must outlive this.
  explicit RolloutStatus(const ComponentStore* store) : store_(store) {}

  // Rows then show each auto-halting rollout as judged. Borrowed; set before serving.
  void set_auto_halt(const AutoHaltController* controller) { auto_halt_ = controller; }

  // Whether a call was answered with this rollout since this process started.
  bool Served(const RolloutKey& key) const;

  // One call answered from store generation `generation`, whose `component` rollouts at
  // `applied` (indexes into the file's list) applied. Thread-safe; a pointer copy under a
  // lock and an atomic add per rollout. A call answered from a generation that is no longer
  // current by the time it is counted (a reload in between) is not counted.
  void RecordApplied(uint64_t generation, std::string_view component,
                     const std::vector<size_t>& applied);

  // Every rollout of the current snapshot at `now`, in file order per component. Counts
  // carry over a reload by (component, name); a rollout that leaves the file leaves its count.
  std::vector<RolloutStatusRow> Rows(RolloutTime now) const;

  // GET /rollouts: {"time":..., "generation":N, "components":{"<name>":[{...}]}}.
  std::string Json(RolloutTime now) const;

 private:
  // The counters of one store generation: per component, one per rollout in file order.
  struct Table {
    std::shared_ptr<const StoreSnapshot> snapshot;
    // Counting is the one mutation of a published table.
    mutable std::map<std::string, std::vector<std::atomic<uint64_t>>, std::less<>> counts;
  };
  // The table of the store's current generation, rebuilt (counts carried by name) when the
  // store has moved on; null before the first load.
  std::shared_ptr<const Table> CurrentTable() const;

  const ComponentStore* store_;
  const AutoHaltController* auto_halt_ = nullptr;
  mutable std::mutex mu_;
  mutable std::shared_ptr<const Table> table_;  // guarded by mu_
};

// "The time now" as rollouts see it: the system clock, whole seconds.
RolloutTime RolloutNow();

}  // namespace hotfix::service
