#include "service/rollout_status.h"

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
    auto& counts = next->counts
                       .emplace(std::piecewise_construct, std::forward_as_tuple(component),
                                std::forward_as_tuple(config->rollouts.size()))
                       .first->second;
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

std::vector<RolloutStatusRow> RolloutStatus::Rows(RolloutTime now) const {
  std::vector<RolloutStatusRow> rows;
  std::shared_ptr<const Table> table = CurrentTable();
  if (table == nullptr) return rows;
  for (const auto& [component, config] : table->snapshot->components) {
    auto counts = table->counts.find(component);
    for (size_t i = 0; i < config->rollouts.size(); ++i) {
      const Rollout& rollout = config->rollouts[i];
      RolloutStatusRow row;
      row.component = component;
      row.name = rollout.name;
      row.state = StateAt(rollout, now);
      row.threshold = ThresholdAt(rollout, now);
      row.next_step = NextStep(rollout, now);
      row.hold_at = rollout.hold_at;
      row.halted = rollout.halted;
      if (counts != table->counts.end()) {
        row.applied_calls = counts->second[i].load(std::memory_order_relaxed);
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::string RolloutStatus::Json(RolloutTime now) const {
  std::shared_ptr<const StoreSnapshot> snapshot = store_->Current();
  nlohmann::json out;
  out["time"] = FormatRolloutTime(now);
  out["generation"] = snapshot ? snapshot->generation : 0;
  out["components"] = nlohmann::json::object();
  for (const RolloutStatusRow& row : Rows(now)) {
    nlohmann::json r;
    r["name"] = row.name;
    r["state"] = RolloutStateName(row.state);
    r["percent"] = row.threshold / 100.0;
    r["next_step"] = nullptr;
    if (row.next_step) {
      r["next_step"] = {{"at", FormatRolloutTime(row.next_step->at)},
                        {"percent", row.next_step->threshold / 100.0}};
    }
    r["hold_at"] = row.hold_at ? nlohmann::json(FormatRolloutTime(*row.hold_at)) : nullptr;
    r["halted"] = row.halted;
    r["applied_calls"] = row.applied_calls;
    out["components"][row.component].push_back(std::move(r));
  }
  return out.dump(2) + "\n";
}

}  // namespace hotfix::service
