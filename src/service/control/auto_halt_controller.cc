#include "service/control/auto_halt_controller.h"

#include <pthread.h>

#include <algorithm>

#include "service/control/rollout_status.h"

namespace hotfix::service {

RolloutTime CurrentStepStart(const Rollout& judged, RolloutTime now) {
  RolloutTime start = judged.steps.front().at;
  for (const RolloutStep& step : judged.steps) {
    if (step.at > now) break;
    start = step.at;
  }
  return start;
}

bool HasGates(const Rollout& rollout) {
  return std::any_of(rollout.steps.begin(), rollout.steps.end(),
                     [](const RolloutStep& s) { return s.gate.has_value(); });
}

namespace {

// The steps as the gates say: a gated step from its start once started, else kGateWaiting;
// any step no earlier than the one before it.
void ApplyGateStarts(const GatesState& gates, Rollout* out) {
  for (size_t k = 1; k < out->steps.size(); ++k) {
    RolloutStep& step = out->steps[k];
    if (step.gate) {
      step.at = kGateWaiting;
      for (const GateState& g : gates.gates) {
        if (g.step == k && g.started_at) step.at = *g.started_at;
      }
    }
    step.at = std::max(step.at, out->steps[k - 1].at);
  }
  if (!gates.signal_ok && gates.evaluated_at) {
    out->hold_at =
        out->hold_at ? std::min(*out->hold_at, *gates.evaluated_at) : *gates.evaluated_at;
  }
}

// The state of rollout.steps[k]'s gate in `st`, added (in step order) when it has none yet.
GateState& GateFor(const Rollout& rollout, size_t k, GatesState* st) {
  auto at = std::lower_bound(st->gates.begin(), st->gates.end(), k,
                             [](const GateState& g, size_t step) { return g.step < step; });
  if (at == st->gates.end() || at->step != k) {
    GateState added;
    added.step = k;
    added.label = GateLabel(rollout, k);
    at = st->gates.insert(at, std::move(added));
  }
  return *at;
}

}  // namespace

Rollout JudgedRollout(const Rollout& rollout, const AutoHaltState* state, const GatesState* gates) {
  Rollout out = rollout;
  if (rollout.halted) return out;
  if (HasGates(rollout)) {
    if (gates == nullptr || !gates->evaluated_at) {
      out.halted = true;  // nothing known of its gates yet: applied to no one
      return out;
    }
    ApplyGateStarts(*gates, &out);
  }
  if (!rollout.auto_halt) return out;
  const bool current = state != nullptr && state->policy == *rollout.auto_halt &&
                       state->since == AutoHaltSince(rollout);
  if (!current || state->halted_at || !state->evaluated_at) {
    out.halted = true;
  } else if (!state->signal_ok) {
    out.hold_at = out.hold_at ? std::min(*out.hold_at, *state->evaluated_at) : *state->evaluated_at;
  }
  return out;
}

AutoHaltController::AutoHaltController(const ComponentStore* files,
                                       AutoHaltControllerOptions options)
    : files_(files), options_(std::move(options)) {
  if (!options_.now) options_.now = RolloutNow;
}

AutoHaltController::~AutoHaltController() { Stop(); }

std::shared_ptr<const StoreSnapshot> AutoHaltController::Current() const {
  std::shared_ptr<const StoreSnapshot> files = files_->Current();
  std::lock_guard<std::mutex> lock(mu_);
  if (files == nullptr) return nullptr;
  if (files != served_files_ || version_ != served_version_) Rebuild(std::move(files));
  return served_;
}

// Makes served_ `files` as judged now. Called with mu_ held, only when either changed.
void AutoHaltController::Rebuild(std::shared_ptr<const StoreSnapshot> files) const {
  auto out = std::make_shared<StoreSnapshot>(*files);  // shares every config
  for (auto& [component, config] : out->components) {
    if (std::none_of(config->rollouts.begin(), config->rollouts.end(),
                     [](const Rollout& r) { return r.auto_halt.has_value() || HasGates(r); })) {
      continue;
    }
    auto judged = std::make_shared<ComponentConfig>(*config);
    judged->file = config;
    for (Rollout& rollout : judged->rollouts) {
      if (!rollout.auto_halt && !HasGates(rollout)) continue;
      auto it = states_.find({component, rollout.name});
      auto g = gates_.find({component, rollout.name});
      rollout = JudgedRollout(rollout, it == states_.end() ? nullptr : &it->second,
                              g == gates_.end() ? nullptr : &g->second);
    }
    config = std::move(judged);
  }
  served_ = std::move(out);
  served_files_ = std::move(files);
  served_version_ = version_;
}

void AutoHaltController::EvaluateNow() {
  std::shared_ptr<const StoreSnapshot> files = files_->Current();
  std::map<RolloutKey, std::pair<AutoHaltPolicy, RolloutTime>> wanted;
  if (files != nullptr) {
    for (const auto& [component, config] : files->components) {
      for (const Rollout& rollout : config->rollouts) {
        if (rollout.auto_halt && !rollout.halted) {
          wanted[{component, rollout.name}] = {*rollout.auto_halt, AutoHaltSince(rollout)};
        }
      }
    }
  }
  const RolloutTime now = options_.now();
  const auto started = std::chrono::steady_clock::now();
  std::set<EvidenceKey> keys;
  std::vector<EvidenceRequest> requests;
  for (const auto& [key, policy_since] : wanted) {
    EvidenceKey evidence_key{key.component, key.rollout, policy_since.second};
    keys.insert(evidence_key);
    requests.push_back(RequestFor(evidence_key, PolicyLabel(policy_since.first), now));
  }
  const std::map<RolloutKey, GateWanted> gated = WantedGates(files.get(), now);
  for (const auto& [key, want] : gated) {
    EvidenceKey evidence_key{key.component, key.rollout, want.window_since};
    if (!keys.insert(evidence_key).second) continue;        // the auto_halt's window: read once
    requests.push_back(RequestFor(evidence_key, "", now));  // no halt record to read
  }
  // Every gate's records, asked on whichever request reads the rollout.
  for (const auto& [key, want] : gated) {
    for (EvidenceRequest& r : requests) {
      if (r.key.component != key.component || r.key.rollout != key.rollout) continue;
      for (size_t k = 1; k < want.rollout->steps.size(); ++k) {
        if (want.rollout->steps[k].gate) r.gate_records.insert(GateLabel(*want.rollout, k));
      }
      break;
    }
  }
  options_.evidence->Retain(keys);
  std::erase_if(full_read_at_, [&](const auto& e) { return keys.count(e.first) == 0; });
  StatusOr<OutcomeEvidence> evidence = Status::Unavailable("no --prometheus-url");
  if ((!wanted.empty() || !gated.empty()) && options_.source != nullptr) {
    evidence = options_.source->Fetch(requests, now);
    if (evidence.ok()) {
      last_good_read_ = now;
      for (const EvidenceRequest& r : requests) {
        if (r.full) full_read_at_[r.key] = now;
      }
    }
  }
  Apply(wanted, evidence, now);
  ApplyGates(gated, evidence, now);
  std::lock_guard<std::mutex> lock(mu_);
  // Judged here, on the evaluation's thread, so that a call only ever copies a pointer (a
  // reload between evaluations is judged by the first call that sees it).
  if (files != nullptr) Rebuild(files);
  if (wanted.empty() && gated.empty()) return;
  ++(evidence.ok() ? stats_.ok : stats_.unavailable);
  stats_.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

AutoHaltStats AutoHaltController::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void AutoHaltController::Apply(
    const std::map<RolloutKey, std::pair<AutoHaltPolicy, RolloutTime>>& wanted,
    const StatusOr<OutcomeEvidence>& evidence, RolloutTime now) {
  Logger* log = options_.log;
  std::lock_guard<std::mutex> lock(mu_);
  std::map<RolloutKey, AutoHaltState> next;
  for (const auto& [key, policy_since] : wanted) {
    const auto& [policy, since] = policy_since;
    AutoHaltState st;
    if (auto old = states_.find(key);
        old != states_.end() && old->second.policy == policy && old->second.since == since) {
      st = old->second;  // a changed policy is a person acting: judged afresh
    } else {
      st.policy = policy;
      st.since = since;
    }
    const bool was_ok = st.signal_ok;
    const bool known_before = st.evaluated_at.has_value() || !st.signal_error.empty();
    std::string error;
    if (!evidence.ok()) {
      error = evidence.status().message();
    } else if (options_.served && options_.served(key) && evidence->known.count(key) == 0) {
      error =
          "Prometheus has no lp_rollout_applied_total series of the rollout, which this "
          "replica served: is it scraping every replica?";
    }
    if (!error.empty()) {
      st.signal_ok = false;
      const bool changed = st.signal_error != error;
      st.signal_error = error;
      if (log != nullptr && (was_ok || !known_before || changed)) {
        log->Warn("rollout auto-halt signal unavailable; holding the rollout where it was",
                  {{"component", key.component},
                   {"rollout", key.rollout},
                   {"error", error},
                   {"held_at", st.evaluated_at ? FormatRolloutTime(*st.evaluated_at)
                                               : std::string("not applied: no evaluation yet")}});
      }
      next.emplace(key, std::move(st));
      continue;
    }
    auto read = evidence->rollouts.find({key.component, key.rollout, since});
    Judge(key, read == evidence->rollouts.end() ? RolloutEvidenceRead{} : read->second, now, &st);
    next.emplace(key, std::move(st));
  }
  if (log != nullptr) {
    for (const auto& [key, st] : states_) {
      if (st.halted_at && (next.count(key) == 0 || !next.at(key).halted_at)) {
        log->Warn(
            "rollout auto-halt released by its file (auto_halt or since changed, or "
            "halted by hand)",
            {{"component", key.component}, {"rollout", key.rollout}});
      }
    }
  }
  states_ = std::move(next);
  ++version_;
}

// A key is read in full the first time (back as far as --evidence-lookback), every ten
// minutes (what a missed change would have cost is then healed), and after a read failed for
// long; otherwise only what changed since the last good read.
EvidenceRequest AutoHaltController::RequestFor(const EvidenceKey& key, std::string policy,
                                               RolloutTime now) {
  constexpr std::chrono::minutes kFullReadEvery{10};
  const std::chrono::seconds margin =
      std::chrono::minutes(1) + std::chrono::ceil<std::chrono::seconds>(options_.interval);
  EvidenceRequest request{key, std::move(policy), ShortLookback(), true, {}};
  if (!options_.evidence->ReadBack(key)) {
    request.lookback = options_.readback_lookback;
    return request;
  }
  auto full_at = full_read_at_.find(key);
  if (full_at == full_read_at_.end() || now - full_at->second >= kFullReadEvery ||
      !last_good_read_ || now - *last_good_read_ >= ShortLookback() - margin) {
    return request;
  }
  request.full = false;
  request.lookback = (now - *last_good_read_) + margin;
  return request;
}

std::chrono::seconds AutoHaltController::ShortLookback() const {
  // A few intervals, and at least a few minutes of scrapes: what was exported since the last
  // read, with room for a slow scrape.
  return std::max<std::chrono::seconds>(
      std::chrono::minutes(5), 4 * std::chrono::ceil<std::chrono::seconds>(options_.interval));
}

// Judges one rollout on what was read back and what this replica counted. Called with mu_.
void AutoHaltController::Judge(const RolloutKey& key, const RolloutEvidenceRead& read,
                               RolloutTime now, AutoHaltState* st) {
  Logger* log = options_.log;
  const bool was_ok = st->signal_ok;
  const bool known_before = st->evaluated_at.has_value() || !st->signal_error.empty();
  const EvidenceKey evidence_key{key.component, key.rollout, st->since};
  const NodeSets sets = options_.evidence->MergeReadBack(evidence_key, read.sets, read.from, now);
  st->signal_ok = true;
  st->signal_error.clear();
  st->tally = sets.Tally();
  st->evaluated_at = now;
  st->evidence_from = options_.evidence->From(evidence_key);
  st->truncated = st->evidence_from && *st->evidence_from > st->since + TruncationGrace();
  if (log != nullptr && !was_ok && known_before) {
    log->Info("rollout auto-halt signal back",
              {{"component", key.component},
               {"rollout", key.rollout},
               {"reports", static_cast<int64_t>(st->tally.reports)},
               {"failures", static_cast<int64_t>(st->tally.failures)}});
  }
  if (st->halted_at) {
    // Every replica takes the earliest halt any of them recorded, so all say the same time.
    if (read.halted_at && *read.halted_at < *st->halted_at) st->halted_at = read.halted_at;
    return;
  }
  if (read.halted_at) {
    st->halted_at = read.halted_at;
    st->evidence = "halted by a replica's record (lp_rollout_halt_record) at " +
                   FormatRolloutTime(*read.halted_at);
  } else if (HaltConditionHolds(st->policy, st->tally)) {
    st->halted_at = now;
    st->evidence = HaltEvidence(st->policy, st->tally);
  } else {
    return;
  }
  if (log != nullptr) {
    log->Error("rollout auto-halted", {{"component", key.component},
                                       {"rollout", key.rollout},
                                       {"evidence", st->evidence},
                                       {"reports", static_cast<int64_t>(st->tally.reports)},
                                       {"failures", static_cast<int64_t>(st->tally.failures)},
                                       {"since", FormatRolloutTime(st->since)},
                                       {"halted_at", FormatRolloutTime(*st->halted_at)}});
  }
}

std::chrono::seconds AutoHaltController::TruncationGrace() const {
  // A rollout's first evaluation comes within an interval of its file's load, and a file
  // loads a little after it is written: a minute and two intervals is not a lost window.
  return std::chrono::minutes(1) + 2 * std::chrono::ceil<std::chrono::seconds>(options_.interval);
}

std::map<RolloutKey, AutoHaltController::GateWanted> AutoHaltController::WantedGates(
    const StoreSnapshot* files, RolloutTime now) const {
  std::map<RolloutKey, GateWanted> out;
  if (files == nullptr) return out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [component, config] : files->components) {
    for (const Rollout& rollout : config->rollouts) {
      if (rollout.halted || !HasGates(rollout)) continue;
      const RolloutKey key{component, rollout.name};
      auto known = gates_.find(key);
      Rollout judged = rollout;
      GatesState none;
      none.signal_ok = true;
      ApplyGateStarts(known == gates_.end() ? none : known->second, &judged);
      // The window the service counts this rollout's reports in (live_patching_service.cc:
      // since the current step began), or the waiting gate's (since the step before it).
      GateWanted want{&rollout, std::nullopt, CurrentStepStart(judged, now)};
      for (size_t k = 1; k < judged.steps.size(); ++k) {
        if (rollout.steps[k].gate && judged.steps[k].at == kGateWaiting) {
          want.waiting = k;
          want.window_since = judged.steps[k - 1].at;
          break;
        }
      }
      out.emplace(key, want);
    }
  }
  return out;
}

void AutoHaltController::ApplyGates(const std::map<RolloutKey, GateWanted>& wanted,
                                    const StatusOr<OutcomeEvidence>& evidence, RolloutTime now) {
  Logger* log = options_.log;
  std::lock_guard<std::mutex> lock(mu_);
  std::map<RolloutKey, GatesState> next;
  for (const auto& [key, want] : wanted) {
    const Rollout& rollout = *want.rollout;
    GatesState st;
    if (auto old = gates_.find(key); old != gates_.end()) st = old->second;
    // Only the gates whose label still matches the file: a changed gate is judged afresh.
    std::erase_if(st.gates, [&](const GateState& g) {
      return g.step >= rollout.steps.size() || !rollout.steps[g.step].gate ||
             g.label != GateLabel(rollout, g.step);
    });
    if (!evidence.ok()) {
      st.signal_ok = false;
      st.signal_error = evidence.status().message();
      next.emplace(key, std::move(st));
      continue;
    }
    st.signal_ok = true;
    st.signal_error.clear();
    st.evaluated_at = now;
    // Records any replica exported: each gate's start (the earliest), its last close (the
    // latest) and its opens after that close (the earliest).
    for (size_t k = 1; k < rollout.steps.size(); ++k) {
      if (!rollout.steps[k].gate) continue;
      auto rec = evidence->gates.find({key.component, key.rollout, k, GateLabel(rollout, k)});
      if (rec == evidence->gates.end()) continue;
      GateState* g = &GateFor(rollout, k, &st);
      auto earliest = [](std::optional<RolloutTime>& mine, RolloutTime read) {
        if (!mine || read < *mine) mine = read;
      };
      if (rec->second.started_at) earliest(g->started_at, *rec->second.started_at);
      if (rec->second.closed_at && (!g->closed_at || *rec->second.closed_at > *g->closed_at)) {
        g->closed_at = rec->second.closed_at;
      }
      // An open counts only after the latest close any replica saw: the bake restarts then.
      for (RolloutTime open : rec->second.opens) {
        if (!g->closed_at || open > *g->closed_at) earliest(g->open_at, open);
      }
      if (g->open_at && g->closed_at && *g->open_at <= *g->closed_at) g->open_at.reset();
    }
    // The window's sets, read back and exported whether or not a gate waits on them.
    const EvidenceKey window{key.component, key.rollout, want.window_since};
    auto read = evidence->rollouts.find(window);
    const NodeSets sets = options_.evidence->MergeReadBack(
        window, read == evidence->rollouts.end() ? NodeSets{} : read->second.sets,
        read == evidence->rollouts.end() ? std::nullopt : read->second.from, now);
    if (want.waiting) {
      const size_t k = *want.waiting;
      const StepGate& gate = *rollout.steps[k].gate;
      GateState* g = &GateFor(rollout, k, &st);
      if (!g->started_at) {
        g->window_since = want.window_since;
        g->tally = sets.Tally();
        const bool holds = GateHolds(gate, g->tally);
        g->missing = GateMissing(gate, g->tally);
        // Satisfied for the whole bake: a replica that sees it fail after it opened closes it
        // for every replica (lp_rollout_gate_closed, the latest wins), and it opens again.
        if (!holds && g->open_at) {
          g->closed_at = now;
          g->open_at.reset();
        }
        if (holds && !g->open_at && (!g->closed_at || now > *g->closed_at)) g->open_at = now;
        if (g->open_at) {
          const RolloutTime due = std::max(rollout.steps[k].at, *g->open_at + gate.bake);
          if (holds && now >= due) {
            g->started_at = due;
            if (log != nullptr) {
              log->Info("rollout step started on its evidence",
                        {{"component", key.component},
                         {"rollout", key.rollout},
                         {"step", static_cast<int64_t>(k)},
                         {"started_at", FormatRolloutTime(due)},
                         {"reports", static_cast<int64_t>(g->tally.reports)},
                         {"failures", static_cast<int64_t>(g->tally.failures)}});
            }
          } else if (holds) {
            g->missing = "baking until " + FormatRolloutTime(due);
          }
        }
      }
    }
    next.emplace(key, std::move(st));
  }
  gates_ = std::move(next);
  ++version_;
}

std::map<RolloutKey, GatesState> AutoHaltController::Gates() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gates_;
}

std::map<RolloutKey, AutoHaltState> AutoHaltController::States() const {
  std::lock_guard<std::mutex> lock(mu_);
  return states_;
}

void AutoHaltController::Start() {
  std::lock_guard<std::mutex> lock(run_mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
  // Named, so that its CPU can be told apart in /proc/PID/task (bench/auto_halt_bench.sh).
  pthread_setname_np(thread_.native_handle(), "lp-auto-halt");
}

void AutoHaltController::Stop() {
  {
    std::lock_guard<std::mutex> lock(run_mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AutoHaltController::Wake() {
  {
    std::lock_guard<std::mutex> lock(run_mu_);
    woken_ = true;
  }
  wake_.notify_all();
}

void AutoHaltController::Run() {
  std::unique_lock<std::mutex> lock(run_mu_);
  while (!stop_) {
    woken_ = false;
    lock.unlock();
    EvaluateNow();
    lock.lock();
    wake_.wait_for(lock, options_.interval, [this] { return stop_ || woken_; });
  }
}

}  // namespace hotfix::service
