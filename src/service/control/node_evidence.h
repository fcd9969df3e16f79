// The nodes that reported on each auto-halting rollout, as this replica knows them
// (docs/ROLLOUTS.md, "Counting nodes"): three sketches per (component, rollout, since), fed by
// the reports this replica counts and by what every replica exported to Prometheus, and
// exported again for the others to read. Because a sketch only grows and merging is a union,
// the replicas converge on the same sets without knowing each other, a restarted replica
// takes back what it and the others had counted, and what any replica still carries outlives
// Prometheus' retention. Thread-safe: calls add, the controller merges, the scrape reads.
#pragma once

#include <compare>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "service/rollout/auto_halt.h"
#include "service/rollout/node_sketch.h"
#include "service/rollout/rollout.h"

namespace hotfix::service {

// Whose evidence: a rollout's reports count from its `since` on; moving `since` starts a new
// count under a new key.
struct EvidenceKey {
  std::string component;
  std::string rollout;
  RolloutTime since;
  auto operator<=>(const EvidenceKey&) const = default;
};

// The three sets, by their label `set` in lp_rollout_node_sketch.
struct NodeSets {
  NodeSketch reporting;             // "reporting": vmIds of every report
  NodeSketch failed;                // "failed": vmIds of failure reports
  NodeSketch failed_subscriptions;  // "failed_subscriptions": their subscriptionIds

  void Merge(const NodeSets& other);
  // The sets' counts, failures never above reports (two estimates beyond 256 nodes).
  OutcomeTally Tally() const;
  // The sketch a `set` label names; null for another name.
  NodeSketch* Named(std::string_view set);
  const NodeSketch* Named(std::string_view set) const;
  bool operator==(const NodeSets&) const = default;
};
inline constexpr const char* kNodeSetNames[] = {"reporting", "failed", "failed_subscriptions"};

// One key's sets as exported: `from` is the earliest time they cover (lp_rollout_evidence_from).
struct ExportedEvidence {
  EvidenceKey key;
  NodeSets sets;
  RolloutTime from;
};

class NodeEvidence {
 public:
  // A reporting node as the sets hash it: its vmId and subscription as verified (lower-cased
  // here). Hashed once per report, whatever the number of rollouts it counts toward.
  struct Reporter {
    uint64_t vm = 0;
    uint64_t subscription = 0;
  };
  static Reporter HashReporter(std::string_view vm_id, std::string_view subscription);

  // One report counted toward a rollout.
  void Add(const EvidenceKey& key, const Reporter& reporter, bool failure);
  // The same for a vmId and subscription; a report without a vmId (insecure mode) names no
  // node and counts nothing.
  void Add(const EvidenceKey& key, std::string_view vm_id, std::string_view subscription,
           bool failure);

  // What the replicas exported (every series read back, already merged), and from when it
  // covers (nullopt: nothing was read back; the evidence covers from max(since, now)). The key
  // is exported from then on: never before, so a starting replica cannot replace its earlier
  // series with an empty set before it has read them back. Returns the merged sets.
  NodeSets MergeReadBack(const EvidenceKey& key, const NodeSets& read,
                         std::optional<RolloutTime> read_from, RolloutTime now);
  // Whether the key has been read back (later reads need only a short lookback).
  bool ReadBack(const EvidenceKey& key) const;
  // When the key's evidence starts (nullopt before it was read back).
  std::optional<RolloutTime> From(const EvidenceKey& key) const;

  // Forgets every key not in `keep` (a rollout gone from the file, halted by hand, or its
  // `since` moved). Bounds memory by the file's rollouts.
  void Retain(const std::set<EvidenceKey>& keep);

  // The read-back keys, for the scrape.
  std::vector<ExportedEvidence> Exported() const;

 private:
  struct Entry {
    NodeSets sets;
    std::optional<RolloutTime> from;  // set once read back
  };
  mutable std::mutex mu_;
  std::map<EvidenceKey, Entry> entries_;  // guarded by mu_
};

}  // namespace hotfix::service
