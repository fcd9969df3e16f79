#include "service/control/rollout_status.h"

#include "common/duration.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace hotfix::service {

RolloutTime RolloutNow() {
  return std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
}

std::shared_ptr<const RolloutStatus::Table> RolloutStatus::CurrentTable() const {
  std::shared_ptr<const StoreSnapshot> snapshot = store_->Current();
  std::lock_guard<std::mutex> lock(mu_);
  if (snapshot == nullptr) return nullptr;
  if (table_ != nullptr && table_->snapshot->generation >= snapshot->generation) return table_;
  auto next = std::make_shared<Table>();
  next->snapshot = snapshot;
  for (const auto& [component, config] : snapshot->components) {
    if (config->rollouts.empty()) continue;
    auto& counts = next->counts.try_emplace(component, config->rollouts.size()).first->second;
    if (table_ == nullptr) continue;
    auto old_counts = table_->counts.find(component);
    auto old_config = table_->snapshot->components.find(component);
    if (old_counts == table_->counts.end()) continue;
    const std::vector<Rollout>& old_rollouts = old_config->second->rollouts;
    for (size_t i = 0; i < config->rollouts.size(); ++i) {
      for (size_t j = 0; j < old_rollouts.size(); ++j) {
        if (old_rollouts[j].name == config->rollouts[i].name) {
          counts[i].store(old_counts->second[j].load(std::memory_order_relaxed),
                          std::memory_order_relaxed);
          break;
        }
      }
    }
  }
  table_ = std::move(next);
  return table_;
}

void RolloutStatus::RecordApplied(uint64_t generation, std::string_view component,
                                  const std::vector<size_t>& applied) {
  if (applied.empty()) return;
  std::shared_ptr<const Table> table;
  {
    std::lock_guard<std::mutex> lock(mu_);
    table = table_;
  }
  if (table == nullptr || table->snapshot->generation != generation) table = CurrentTable();
  if (table == nullptr || table->snapshot->generation != generation) return;
  auto counts = table->counts.find(component);
  if (counts == table->counts.end()) return;
  for (size_t i : applied) {
    if (i < counts->second.size()) counts->second[i].fetch_add(1, std::memory_order_relaxed);
  }
}

bool RolloutStatus::Served(const RolloutKey& key) const {
  std::shared_ptr<const Table> table = CurrentTable();
  if (table == nullptr) return false;
  auto config = table->snapshot->components.find(key.component);
  auto counts = table->counts.find(key.component);
  if (config == table->snapshot->components.end() || counts == table->counts.end()) return false;
  for (size_t i = 0; i < config->second->rollouts.size(); ++i) {
    if (config->second->rollouts[i].name == key.rollout) {
      return counts->second[i].load(std::memory_order_relaxed) > 0;
    }
  }
  return false;
}

std::vector<RolloutStatusRow> RolloutStatus::Rows(RolloutTime now) const {
  std::vector<RolloutStatusRow> rows;
  std::shared_ptr<const Table> table = CurrentTable();
  if (table == nullptr) return rows;
  std::map<RolloutKey, AutoHaltState> judged;
  std::map<RolloutKey, GatesState> gates;
  if (auto_halt_ != nullptr) {
    judged = auto_halt_->States();
    gates = auto_halt_->Gates();
  }
  for (const auto& [component, config] : table->snapshot->components) {
    auto counts = table->counts.find(component);
    for (size_t i = 0; i < config->rollouts.size(); ++i) {
      RolloutStatusRow row;
      Rollout as_judged;
      const Rollout* file_rollout = &config->rollouts[i];
      if (auto_halt_ != nullptr && file_rollout->auto_halt && !file_rollout->halted) {
        auto st = judged.find({component, file_rollout->name});
        if (st != judged.end()) row.auto_halt_state = st->second;
        row.auto_halt = true;
      }
      if (auto_halt_ != nullptr && HasGates(*file_rollout) && !file_rollout->halted) {
        auto g = gates.find({component, file_rollout->name});
        if (g != gates.end()) row.gates_state = g->second;
        row.gated = true;
        row.file_steps = file_rollout->steps;
      }
      if (row.auto_halt || row.gated) {
        as_judged =
            JudgedRollout(*file_rollout, row.auto_halt_state ? &*row.auto_halt_state : nullptr,
                          row.gates_state ? &*row.gates_state : nullptr);
      }
      const Rollout& rollout = row.auto_halt || row.gated ? as_judged : *file_rollout;
      row.component = component;
      row.name = rollout.name;
      row.attribution = EvidenceAttributionOf(*file_rollout);
      row.state = StateAt(rollout, now);
      if (row.auto_halt_state && row.auto_halt_state->halted_at) {
        row.state = RolloutState::kAutoHalted;
      } else if ((row.auto_halt || row.gated) && rollout.halted) {
        row.state = RolloutState::kHeld;  // not evaluated yet: applied to no one
      }
      row.threshold = ThresholdAt(rollout, now);
      row.next_step = NextStep(rollout, now);
      row.hold_at = file_rollout->hold_at;
      row.halted = file_rollout->halted;
      row.halt_note = file_rollout->halt_note;
      row.resume_note = file_rollout->resume_note;
      if (counts != table->counts.end()) {
        row.applied_calls = counts->second[i].load(std::memory_order_relaxed);
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

namespace {

nlohmann::json TimeOrNull(const std::optional<RolloutTime>& t) {
  return t ? nlohmann::json(FormatRolloutTime(*t)) : nlohmann::json(nullptr);
}

// GET /rollouts' `auto_halt` object (docs/ROLLOUTS.md, "Automatic halt").
// {"at", "by", "reason"} as the file has them, or null.
nlohmann::json NoteJson(const std::optional<RolloutNote>& note) {
  if (!note) return nullptr;
  return {{"at", FormatRolloutTime(note->at)}, {"by", note->by}, {"reason", note->reason}};
}

nlohmann::json AutoHaltJson(const RolloutStatusRow& row) {
  nlohmann::json out;
  const std::optional<AutoHaltState>& st = row.auto_halt_state;
  out["signal"] = st && st->signal_ok ? "ok" : "unavailable";
  out["error"] = st && !st->signal_ok ? nlohmann::json(st->signal_error) : nlohmann::json(nullptr);
  // Nodes, not reports (docs/ROLLOUTS.md, "Counting nodes").
  out["reports"] = st ? st->tally.reports : 0;
  out["failures"] = st ? st->tally.failures : 0;
  out["failed_subscriptions"] = st ? st->tally.failed_subscriptions : 0;
  out["failure_percent"] =
      st && st->tally.reports > 0
          ? nlohmann::json(std::round(10000.0 * static_cast<double>(st->tally.failures) /
                                      static_cast<double>(st->tally.reports)) /
                           100.0)
          : nlohmann::json(nullptr);
  out["since"] = st ? nlohmann::json(FormatRolloutTime(st->since)) : nlohmann::json(nullptr);
  out["evaluated_at"] = st ? TimeOrNull(st->evaluated_at) : nullptr;
  out["halted_at"] = st ? TimeOrNull(st->halted_at) : nullptr;
  out["evidence"] = st && st->halted_at ? nlohmann::json(st->evidence) : nlohmann::json(nullptr);
  out["evidence_from"] = st ? TimeOrNull(st->evidence_from) : nullptr;
  out["truncated"] = st && st->truncated;
  out["attribution"] = EvidenceAttributionName(row.attribution);
  out["attribution_note"] = EvidenceAttributionNote(row.attribution);
  return out;
}

// GET /rollouts' `gates` array (docs/ROLLOUTS.md, "Advancing on evidence"): each gated step
// with its gate, its state, and what it still misses.
nlohmann::json GatesJson(const RolloutStatusRow& row) {
  nlohmann::json out = nlohmann::json::array();
  bool waiting_seen = false;
  for (size_t k = 0; k < row.file_steps.size(); ++k) {
    const RolloutStep& step = row.file_steps[k];
    if (!step.gate) continue;
    const GateState* g = nullptr;
    if (row.gates_state) {
      for (const GateState& x : row.gates_state->gates) {
        if (x.step == k) g = &x;
      }
    }
    nlohmann::json j;
    j["step"] = k;
    j["at"] = FormatRolloutTime(step.at);
    j["percent"] = step.threshold / 100.0;
    j["min_nodes"] = step.gate->min_nodes;
    j["max_failure_percent"] = step.gate->max_failure_percent
                                   ? nlohmann::json(*step.gate->max_failure_percent / 100.0)
                                   : nlohmann::json(nullptr);
    j["bake"] = FormatDuration(step.gate->bake);
    std::string state = "pending";  // a gate after the one the rollout waits on
    if (g != nullptr && g->started_at) {
      state = "started";
    } else if (!waiting_seen) {
      waiting_seen = true;
      state = row.gates_state && row.gates_state->evaluated_at ? "waiting" : "unknown";
    }
    j["state"] = state;
    j["open_at"] = g != nullptr ? TimeOrNull(g->open_at) : nullptr;
    j["started_at"] = g != nullptr ? TimeOrNull(g->started_at) : nullptr;
    if (state == "waiting" && g != nullptr) {
      j["window_since"] = FormatRolloutTime(g->window_since);
      j["reports"] = g->tally.reports;
      j["failures"] = g->tally.failures;
      j["missing"] = g->missing;
    } else if (state == "waiting" || state == "unknown") {
      j["missing"] = state == "unknown" ? "no evaluation yet" : "no evidence read yet";
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

std::string RolloutStatus::Json(RolloutTime now) const {
  std::shared_ptr<const StoreSnapshot> snapshot = store_->Current();
  nlohmann::json out;
  out["time"] = FormatRolloutTime(now);
  out["generation"] = snapshot ? snapshot->generation : 0;
  // Which file of each component this replica serves (the first 12 hex digits of its SHA-256).
  out["files"] = nlohmann::json::object();
  if (snapshot != nullptr) {
    for (const auto& [component, config] : snapshot->components) {
      out["files"][component] = config->digest;
    }
  }
  out["components"] = nlohmann::json::object();
  for (const RolloutStatusRow& row : Rows(now)) {
    nlohmann::json r;
    r["name"] = row.name;
    r["state"] = RolloutStateName(row.state);
    r["percent"] = row.threshold / 100.0;
    r["next_step"] = nullptr;
    if (row.next_step && row.next_step->at != kGateWaiting) {
      r["next_step"] = {{"at", FormatRolloutTime(row.next_step->at)},
                        {"percent", row.next_step->threshold / 100.0}};
    }
    r["hold_at"] = row.hold_at ? nlohmann::json(FormatRolloutTime(*row.hold_at)) : nullptr;
    r["halted"] = row.halted;
    r["halt_note"] = NoteJson(row.halt_note);
    r["resume_note"] = NoteJson(row.resume_note);
    r["applied_calls"] = row.applied_calls;
    if (row.auto_halt) r["auto_halt"] = AutoHaltJson(row);
    if (row.gated) {
      r["gates"] = GatesJson(row);
      r["waiting_on"] = nullptr;
      for (const auto& g : r["gates"]) {
        if (g["state"] == "waiting" || g["state"] == "unknown") {
          r["waiting_on"] = {{"step", g["step"]}, {"missing", g.value("missing", "")}};
          break;
        }
      }
      if (row.gates_state && !row.gates_state->signal_ok && row.gates_state->evaluated_at) {
        r["gates_error"] = row.gates_state->signal_error;
      }
    }
    out["components"][row.component].push_back(std::move(r));
  }
  return out.dump(2) + "\n";
}

}  // namespace hotfix::service
