#include "service/control/node_evidence.h"

#include <algorithm>
#include <utility>

#include "common/text.h"

namespace hotfix::service {

void NodeSets::Merge(const NodeSets& other) {
  reporting.Merge(other.reporting);
  failed.Merge(other.failed);
  failed_subscriptions.Merge(other.failed_subscriptions);
}

OutcomeTally NodeSets::Tally() const {
  OutcomeTally tally;
  tally.reports = reporting.Count();
  tally.failures = std::min(failed.Count(), tally.reports);
  tally.failed_subscriptions = std::min(failed_subscriptions.Count(), tally.failures);
  return tally;
}

const NodeSketch* NodeSets::Named(std::string_view set) const {
  if (set == kNodeSetNames[0]) return &reporting;
  if (set == kNodeSetNames[1]) return &failed;
  if (set == kNodeSetNames[2]) return &failed_subscriptions;
  return nullptr;
}

NodeSketch* NodeSets::Named(std::string_view set) {
  return const_cast<NodeSketch*>(std::as_const(*this).Named(set));
}

NodeEvidence::Reporter NodeEvidence::HashReporter(std::string_view vm_id,
                                                  std::string_view subscription) {
  return {NodeSketch::Hash("vm", AsciiLower(vm_id)),
          NodeSketch::Hash("subscription", AsciiLower(subscription))};
}

void NodeEvidence::Add(const EvidenceKey& key, const Reporter& reporter, bool failure) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = entries_[key];
  entry.sets.reporting.Add(reporter.vm);
  if (failure) {
    entry.sets.failed.Add(reporter.vm);
    entry.sets.failed_subscriptions.Add(reporter.subscription);
  }
}

void NodeEvidence::Add(const EvidenceKey& key, std::string_view vm_id,
                       std::string_view subscription, bool failure) {
  if (vm_id.empty()) return;
  Add(key, HashReporter(vm_id, subscription), failure);
}

NodeSets NodeEvidence::MergeReadBack(const EvidenceKey& key, const NodeSets& read,
                                     std::optional<RolloutTime> read_from, RolloutTime now) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = entries_[key];
  entry.sets.Merge(read);
  if (!entry.from) {
    entry.from =
        read_from ? std::min(*read_from, std::max(key.since, now)) : std::max(key.since, now);
  } else if (read_from && *read_from < *entry.from) {
    entry.from = *read_from;  // a replica that carried older evidence
  }
  return entry.sets;
}

bool NodeEvidence::ReadBack(const EvidenceKey& key) const { return From(key).has_value(); }

std::optional<RolloutTime> NodeEvidence::From(const EvidenceKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? std::nullopt : it->second.from;
}

void NodeEvidence::Retain(const std::set<EvidenceKey>& keep) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(entries_, [&](const auto& entry) { return keep.count(entry.first) == 0; });
}

std::vector<ExportedEvidence> NodeEvidence::Exported() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ExportedEvidence> out;
  for (const auto& [key, entry] : entries_) {
    if (entry.from) out.push_back({key, entry.sets, *entry.from});
  }
  return out;
}

}  // namespace hotfix::service
