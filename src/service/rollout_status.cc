#include "service/rollout_status.h"

#include <nlohmann/json.hpp>

namespace hotfix::service {

RolloutTime RolloutNow() {
  return std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
}

void RolloutStatus::RecordApplied(std::string_view component, std::string_view rollout) {
  std::string key;
  key.reserve(component.size() + 1 + rollout.size());
  key.append(component).append(1, '\0').append(rollout);
  std::lock_guard<std::mutex> lock(mu_);
  ++applied_[key];
}

std::vector<RolloutStatusRow> RolloutStatus::Rows(RolloutTime now) const {
  std::vector<RolloutStatusRow> rows;
  std::shared_ptr<const StoreSnapshot> snapshot = store_->Current();
  if (snapshot == nullptr) return rows;
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, uint64_t> kept;
  for (const auto& [component, config] : snapshot->components) {
    for (const Rollout& rollout : config->rollouts) {
      RolloutStatusRow row;
      row.component = component;
      row.name = rollout.name;
      row.state = StateAt(rollout, now);
      row.threshold = ThresholdAt(rollout, now);
      row.next_step = NextStep(rollout, now);
      row.hold_at = rollout.hold_at;
      row.halted = rollout.halted;
      std::string key = component + '\0' + rollout.name;
      if (auto it = applied_.find(key); it != applied_.end()) {
        row.applied_calls = it->second;
        kept.emplace(std::move(key), it->second);
      }
      rows.push_back(std::move(row));
    }
  }
  applied_ = std::move(kept);
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
