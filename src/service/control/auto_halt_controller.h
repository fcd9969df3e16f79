// The automatic halt, running (docs/ROLLOUTS.md, "Automatic halt"): a background thread reads
// the nodes' reports summed over every replica (an OutcomeSource: Prometheus) once per
// interval, judges each auto-halting rollout (auto_halt.h), and serves the component store as
// that judgement says: a halted rollout as `halted: true`, one whose evidence cannot be read
// held where it was when it last could. Never on a call's path: a call reads a snapshot.
//
// Replicas keep no state of their own that matters: the evidence lives in Prometheus, so a
// restarted replica judges the same history the same way (sticky), and what a replica
// remembers (a halt it saw) only ever keeps a rollout halted, never lets one go.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "service/control/node_evidence.h"
#include "service/rollout/auto_halt.h"
#include "service/store/component_store.h"

namespace hotfix::service {

struct RolloutKey {
  std::string component;
  std::string rollout;
  auto operator<=>(const RolloutKey&) const = default;
};

// What to read of one rollout's evidence: its key, its policy (the halt record's label), and
// how. A full read takes every series exported within `lookback` (long on a rollout's first
// read, a few intervals on the periodic re-read); otherwise only the series whose value changed
// within `lookback` (the time since the last good read, and a margin for late scrapes): a union
// needs nothing it already holds, so a quiet rollout costs nearly nothing to read.
struct EvidenceRequest {
  EvidenceKey key;
  std::string policy;  // PolicyLabel
  std::chrono::seconds lookback{0};
  bool full = true;
  // The gate labels of the rollout whose records (lp_rollout_gate_open, lp_rollout_step_start)
  // are wanted: every gated step's, so that a restarted replica takes back every start.
  std::set<std::string> gate_records;
};

// What the replicas exported about one rollout, merged: their sets, the earliest halt any of
// them recorded under the policy, the earliest time their evidence covers.
struct RolloutEvidenceRead {
  NodeSets sets;
  std::optional<RolloutTime> halted_at;
  std::optional<RolloutTime> from;
};

// A gated step's records as the replicas exported them: the earliest of each.
struct GateKey {
  std::string component;
  std::string rollout;
  size_t step = 0;
  std::string gate;  // GateLabel
  auto operator<=>(const GateKey&) const = default;
};
struct GateRecords {
  std::vector<RolloutTime> opens;         // lp_rollout_gate_open, each replica's
  std::optional<RolloutTime> started_at;  // lp_rollout_step_start, the earliest
  std::optional<RolloutTime> closed_at;   // lp_rollout_gate_closed, the latest
};

// What one read of the evidence found, for every rollout asked about.
struct OutcomeEvidence {
  std::map<EvidenceKey, RolloutEvidenceRead> rollouts;
  // The gate records of the rollouts asked about (any step, any label).
  std::map<GateKey, GateRecords> gates;
  // The rollouts the evidence knows were served (their lp_rollout_applied_total series exist):
  // a rollout this replica served that is not here means Prometheus does not see us.
  std::set<RolloutKey> known;
};

// Where the evidence comes from. Prometheus in production (prometheus_outcomes.h); tests
// swap in fakes.
class OutcomeSource {
 public:
  virtual ~OutcomeSource() = default;
  // One batch of requests for every rollout asked about.
  virtual StatusOr<OutcomeEvidence> Fetch(const std::vector<EvidenceRequest>& requests,
                                          RolloutTime now) = 0;
};

// One auto-halting rollout as the controller last judged it.
struct AutoHaltState {
  AutoHaltPolicy policy;
  RolloutTime since;
  bool signal_ok = false;                   // the last evaluation read the evidence
  std::string signal_error;                 // why not, when !signal_ok
  OutcomeTally tally;                       // nodes, at the last good evaluation
  std::optional<RolloutTime> evaluated_at;  // the last good evaluation
  std::optional<RolloutTime> halted_at;     // set once, kept while the policy stays
  std::string evidence;                     // HaltEvidence at the halt, or where it was read
  // The earliest time the evidence covers; after since + a grace, the window is truncated:
  // nodes that reported before `evidence_from` are not counted (every replica was gone longer
  // than the read-back lookback, or auto_halt was added with a `since` in the past).
  std::optional<RolloutTime> evidence_from;
  bool truncated = false;
};

// A gated step as the controller last judged it (docs/ROLLOUTS.md, "Advancing on evidence").
struct GateState {
  size_t step = 0;
  std::string label;         // GateLabel: a changed gate is judged afresh
  RolloutTime window_since;  // when the step before it began: its nodes count from here
  OutcomeTally tally;        // those nodes at the last good evaluation
  // First seen satisfied since it last failed (the earliest any replica saw after the latest
  // closed_at): the bake counts from here.
  std::optional<RolloutTime> open_at;
  std::optional<RolloutTime> closed_at;   // last seen failing after it had opened (the latest)
  std::optional<RolloutTime> started_at;  // max(at, open_at + bake): the step's start
  std::string missing;                    // GateMissing at the last good evaluation
};

// A rollout's gates: the gated steps judged so far, in step order, up to the first that has
// not started.
struct GatesState {
  std::vector<GateState> gates;
  bool signal_ok = false;
  std::string signal_error;
  std::optional<RolloutTime> evaluated_at;  // the last good evaluation
};

// The rollout as the judgement says it applies: halted once halted or before anything is
// known (state null, or judged under another policy; a gated rollout not yet evaluated); held
// at the last good evaluation while the evidence cannot be read; each gated step from its
// start once started, never before (kGateWaiting), and a step after it no earlier; as the file
// says otherwise.
Rollout JudgedRollout(const Rollout& rollout, const AutoHaltState* state,
                      const GatesState* gates = nullptr);
bool HasGates(const Rollout& rollout);
// When the step in force at `now` began, in a judged rollout (its first step's `at` before it):
// the window a gated rollout's reports are counted in.
RolloutTime CurrentStepStart(const Rollout& judged, RolloutTime now);

struct AutoHaltControllerOptions {
  // Null: there is no evidence (no --prometheus-url); every auto-halting rollout is held.
  OutcomeSource* source = nullptr;
  // The replica's own sets (fed by the reports it counts), merged with what is read back and
  // exported by the metrics. Required.
  NodeEvidence* evidence = nullptr;
  std::chrono::milliseconds interval{30000};
  // How far back the first read of a rollout's evidence looks (--evidence-lookback): what any
  // replica exported within it is taken back. Later reads look back a few intervals.
  std::chrono::seconds readback_lookback = std::chrono::hours(24);
  // Whether this replica has answered a call with the rollout (lp_rollout_applied_total > 0).
  std::function<bool(const RolloutKey&)> served;
  Logger* log = nullptr;  // one line per transition; null: none
  // "Now" for evaluations (tests); default RolloutNow().
  std::function<RolloutTime()> now;
};

// Evaluations that read (or tried to read) the evidence: none while no rollout has auto_halt.
struct AutoHaltStats {
  uint64_t ok = 0;           // the evidence was read
  uint64_t unavailable = 0;  // it could not be (no source, Prometheus down, a query failed)
  double seconds = 0;        // wall time spent reading and judging, all evaluations
};

// A ComponentStore: the files' store (borrowed, must outlive this) with the judgement applied.
class AutoHaltController : public ComponentStore {
 public:
  AutoHaltController(const ComponentStore* files, AutoHaltControllerOptions options);
  ~AutoHaltController() override;

  // The files' snapshot with every auto-halting rollout as judged: halted once halted; held at
  // the last good evaluation while the evidence cannot be read; not applied at all before the
  // first good evaluation (nothing known yet must not advance it). Same generation numbers.
  std::shared_ptr<const StoreSnapshot> Current() const override;

  // Starts the background evaluations (the first at once). Stop() or the destructor ends them.
  void Start();
  void Stop();
  // Asks for an evaluation now (after a store reload: a new rollout is judged at once).
  void Wake();
  // One evaluation on the caller's thread (tests, and what the background thread runs).
  void EvaluateNow();

  std::map<RolloutKey, AutoHaltState> States() const;
  std::map<RolloutKey, GatesState> Gates() const;
  const NodeEvidence* evidence() const { return options_.evidence; }
  AutoHaltStats stats() const;

 private:
  void Rebuild(std::shared_ptr<const StoreSnapshot> files) const;
  void Apply(const std::map<RolloutKey, std::pair<AutoHaltPolicy, RolloutTime>>& wanted,
             const StatusOr<OutcomeEvidence>& evidence, RolloutTime now);
  void Judge(const RolloutKey& key, const RolloutEvidenceRead& read, RolloutTime now,
             AutoHaltState* st);
  // The gated rollouts' requests (the waiting gate's window), from what gates_ holds.
  struct GateWanted {
    const Rollout* rollout = nullptr;
    std::optional<size_t> waiting;  // the first gated step not started
    RolloutTime window_since;
  };
  std::map<RolloutKey, GateWanted> WantedGates(const StoreSnapshot* files, RolloutTime now) const;
  void ApplyGates(const std::map<RolloutKey, GateWanted>& wanted,
                  const StatusOr<OutcomeEvidence>& evidence, RolloutTime now);
  void Run();
  std::chrono::seconds ShortLookback() const;
  std::chrono::seconds TruncationGrace() const;
  // policy: the halt record's label (PolicyLabel), "" for a gate's window.
  EvidenceRequest RequestFor(const EvidenceKey& key, std::string policy, RolloutTime now);

  const ComponentStore* files_;
  AutoHaltControllerOptions options_;

  mutable std::mutex mu_;
  std::map<RolloutKey, AutoHaltState> states_;  // guarded by mu_
  std::map<RolloutKey, GatesState> gates_;      // guarded by mu_
  uint64_t version_ = 0;                        // guarded by mu_; +1 per change of states_
  AutoHaltStats stats_;                         // guarded by mu_
  // The evaluation thread's own: when each key was last read in full, and the last good read.
  std::map<EvidenceKey, RolloutTime> full_read_at_;
  std::optional<RolloutTime> last_good_read_;
  // The last snapshot served and what it was made from (guarded by mu_).
  mutable std::shared_ptr<const StoreSnapshot> served_files_;
  mutable uint64_t served_version_ = 0;
  mutable std::shared_ptr<const StoreSnapshot> served_;

  std::mutex run_mu_;
  std::condition_variable wake_;
  bool stop_ = false;   // guarded by run_mu_
  bool woken_ = false;  // guarded by run_mu_
  std::thread thread_;
};

}  // namespace hotfix::service
