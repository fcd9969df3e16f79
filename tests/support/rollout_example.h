// What the rollout tests share: a time from its text, the example rollout of
// docs/ROLLOUTS.md (1% at 00:00, 10.5% at 06:00, 100% on the 5th; one subscription, east US
// clusters), and a store of one component file a test replaces.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "service/rollout/rollout.h"
#include "service/store/component_file.h"
#include "service/store/component_store.h"

namespace hotfix::service {

inline RolloutTime T(std::string_view text) {
  StatusOr<RolloutTime> t = ParseRolloutTime(text);
  EXPECT_TRUE(t.ok()) << text;
  return t.ok() ? *t : RolloutTime{};
}

inline nlohmann::json ExampleRollout(const std::string& name = "anc-1") {
  nlohmann::json r = nlohmann::json::parse(R"({
    "hotfixes": {"202604.01": "202604.01.4"},
    "match": {
      "subscriptions": ["8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8"],
      "exclude_subscriptions": [],
      "clusters": ["*.hcp.eastus.azmk8s.io"],
      "vm_ids": []
    },
    "cohort": "node",
    "steps": [
      {"at": "2026-12-04T00:00:00Z", "percent": 1},
      {"at": "2026-12-04T06:00:00Z", "percent": 10.5},
      {"at": "2026-12-05T00:00:00Z", "percent": 100}
    ],
    "hold_at": null,
    "halted": false
  })");
  r["name"] = name;
  return r;
}

// A component file serving 202604.01.3 with the example rollout on top.
inline nlohmann::json ExampleFile(const std::string& name) {
  return {{"hotfixes", {{"202604.01", "202604.01.3"}}}, {"rollouts", {ExampleRollout(name)}}};
}

// A store serving one aksNodeController file that a test sets and replaces, one generation
// per Set.
class SwappableStore : public ComponentStore {
 public:
  void Set(const nlohmann::json& file) {
    auto parsed = ParseComponentConfig("aksNodeController", file.dump());
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto snapshot = std::make_shared<StoreSnapshot>();
    snapshot->generation = ++generation_;
    snapshot->components["aksNodeController"] =
        std::make_shared<const ComponentConfig>(std::move(*parsed));
    snapshot_ = snapshot;
  }
  uint64_t generation() const { return generation_; }
  std::shared_ptr<const StoreSnapshot> Current() const override { return snapshot_; }

 private:
  uint64_t generation_ = 0;
  std::shared_ptr<const StoreSnapshot> snapshot_;
};

}  // namespace hotfix::service
