#include "service/control/simulate.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "common/text.h"

namespace hotfix::service {

namespace {

using ordered_json = nlohmann::ordered_json;

// "202604.01.9" before "202604.01.10": by base, then by the patch number.
struct VersionOrder {
  static auto Key(std::string_view v) {
    const std::string_view patch = v.substr(std::min<size_t>(v.size(), 10));
    return std::make_tuple(v.substr(0, 9), patch.size(), patch);
  }
  bool operator()(const std::string& a, const std::string& b) const { return Key(a) < Key(b); }
};

// What a node is served, in a form two files can be compared by and a TSV cell can hold.
std::string CompactText(const std::string& text) {
  ordered_json parsed = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return OneLine(text);  // unreachable for a loaded file
  return parsed.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// Evaluates one file for many nodes at many times. A node's answer depends on the time only
// through each rollout's threshold, so the times collapse into the distinct threshold
// vectors among them; and it depends on the node only through which rollouts apply, so
// answers are cached by that set. Evaluation is the service's rule (AnswerFor): rollout r
// applies when its threshold is above 0, its match passes and the node's bucket is under the
// threshold; each node's match and bucket are computed once (ExplainRollout).
class Evaluator {
 public:
  struct Answer {
    std::map<std::string, std::string> hotfixes;
    std::string served;  // compact JSON
  };

  Evaluator(const ComponentConfig& config, const std::vector<RolloutTime>& times)
      : config_(config) {
    std::map<std::vector<uint32_t>, size_t> seen;
    for (RolloutTime t : times) {
      std::vector<uint32_t> thresholds;
      thresholds.reserve(config.rollouts.size());
      for (const Rollout& r : config.rollouts) thresholds.push_back(ThresholdAt(r, t));
      auto [it, inserted] = seen.emplace(std::move(thresholds), vectors_.size());
      if (inserted) vectors_.push_back(it->first);
      vector_of_time_.push_back(it->second);
    }
  }

  size_t rollouts() const { return config_.rollouts.size(); }
  size_t distinct() const { return vectors_.size(); }
  size_t VectorOfTime(size_t time_index) const { return vector_of_time_[time_index]; }

  // The node's bucket in each rollout it matches; kBucketCount (never in) where the match
  // fails, the cohort key is missing or the rollout is halted (its threshold is 0 anyway).
  void Buckets(const RolloutNode& node, std::vector<uint32_t>* out) const {
    out->clear();
    for (const Rollout& r : config_.rollouts) {
      const RolloutOutcome o = ExplainRollout(r, node, RolloutTime{});
      const bool matched =
          o.verdict == RolloutVerdict::kApplies || o.verdict == RolloutVerdict::kNotUnderThreshold;
      out->push_back(matched ? o.bucket : kBucketCount);
    }
  }

  // The answer id for a node with these buckets under distinct threshold vector v.
  size_t AnswerOf(const std::vector<uint32_t>& buckets, size_t v) {
    const std::vector<uint32_t>& thresholds = vectors_[v];
    signature_.assign((buckets.size() + 7) / 8, '\0');
    for (size_t r = 0; r < buckets.size(); ++r) {
      if (thresholds[r] > 0 && buckets[r] < thresholds[r]) {
        signature_[r / 8] = static_cast<char>(signature_[r / 8] | (1 << (r % 8)));
      }
    }
    auto it = by_signature_.find(signature_);
    if (it != by_signature_.end()) return it->second;
    Answer answer;
    if (config_.hotfixes) {
      answer.hotfixes = *config_.hotfixes;
      for (size_t r = 0; r < buckets.size(); ++r) {
        if ((signature_[r / 8] >> (r % 8)) & 1) {
          for (const auto& [base, version] : config_.rollouts[r].hotfixes) {
            answer.hotfixes[base] = version;
          }
        }
      }
      answer.served = ServedHotfixesJson(answer.hotfixes);
    } else {
      answer.served = CompactText(config_.text);
    }
    answers_.push_back(std::move(answer));
    by_signature_.emplace(signature_, answers_.size() - 1);
    return answers_.size() - 1;
  }

  const Answer& answer(size_t id) const { return answers_[id]; }
  size_t answers() const { return answers_.size(); }

 private:
  const ComponentConfig& config_;
  std::vector<std::vector<uint32_t>> vectors_;
  std::vector<size_t> vector_of_time_;
  std::string signature_;
  std::unordered_map<std::string, size_t> by_signature_;
  std::vector<Answer> answers_;
};

Status CheckWork(size_t nodes, uint64_t settings, size_t rollouts) {
  const long double work = static_cast<long double>(nodes) * static_cast<long double>(settings) *
                           static_cast<long double>(rollouts + 1);
  if (work > static_cast<long double>(kMaxSimulateWork)) {
    return Status::InvalidArgument(
        "simulating " + std::to_string(nodes) + " nodes at " + std::to_string(settings) +
        " distinct ramp settings with " + std::to_string(rollouts) + " rollouts is more than " +
        std::to_string(kMaxSimulateWork) + " evaluations: use fewer nodes or fewer times");
  }
  return Status::Ok();
}

// The fleet and time limits Simulate and SimulateAgainst share.
Status CheckSimulateSize(const std::vector<RolloutNode>& fleet,
                         const std::vector<RolloutTime>& times) {
  if (fleet.size() > kMaxFleetNodes) {
    return Status::InvalidArgument("more than " + std::to_string(kMaxFleetNodes) + " nodes");
  }
  if (times.size() > kMaxSimulateTimes) {
    return Status::InvalidArgument("more than " + std::to_string(kMaxSimulateTimes) + " times");
  }
  return Status::Ok();
}

}  // namespace

std::string AutoHaltNote(const ComponentConfig& config) {
  std::string names;
  for (const Rollout& r : config.rollouts) {
    if (r.auto_halt) names += (names.empty() ? "" : ", ") + r.name;
  }
  std::string out;
  if (!names.empty()) {
    out = "can halt themselves on their nodes' reports (auto_halt): " + names +
          "; this table assumes none does\n";
  }
  std::string gated;
  for (const Rollout& r : config.rollouts) {
    for (size_t k = 0; k < r.steps.size(); ++k) {
      if (!r.steps[k].gate) continue;
      gated += (gated.empty() ? "" : ", ") + r.name + " step " + std::to_string(k) + " (at " +
               FormatRolloutTime(r.steps[k].at) + ")";
    }
  }
  if (!gated.empty()) {
    out += "wait on their nodes' evidence (gate): " + gated +
           "; this table starts each at its at, the earliest its evidence can (GET /rollouts "
           "shows which gate a running rollout waits on and what is missing)\n";
  }
  return out;
}

StatusOr<std::vector<RolloutTime>> SimulationTimes(RolloutTime from, RolloutTime to,
                                                   std::chrono::seconds every) {
  if (every.count() <= 0) return Status::InvalidArgument("--every must be positive");
  if (to < from) {
    return Status::InvalidArgument("--to " + FormatRolloutTime(to) + " is before --from " +
                                   FormatRolloutTime(from));
  }
  const int64_t rows = (to - from).count() / every.count() + 1;
  if (rows > static_cast<int64_t>(kMaxSimulateTimes)) {
    return Status::InvalidArgument("from " + FormatRolloutTime(from) + " to " +
                                   FormatRolloutTime(to) + " every " +
                                   std::to_string(every.count()) + "s is " + std::to_string(rows) +
                                   " times, more than " + std::to_string(kMaxSimulateTimes));
  }
  std::vector<RolloutTime> times;
  times.reserve(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) times.push_back(from + every * i);
  return times;
}

StatusOr<SimulateTable> Simulate(const ComponentConfig& config,
                                 const std::vector<RolloutNode>& fleet,
                                 const std::vector<RolloutTime>& times) {
  if (Status size = CheckSimulateSize(fleet, times); !size.ok()) return size;
  Evaluator eval(config, times);
  Status work = CheckWork(fleet.size(), eval.distinct(), eval.rollouts());
  if (!work.ok()) return work;

  SimulateTable table;
  table.times = times;
  table.nodes = fleet.size();

  // The columns: every version the file names, per base; "<base>:none" where a node can lack
  // the base.
  std::map<std::string, std::set<std::string, VersionOrder>> versions;
  std::map<std::string, size_t> version_column, none_column;
  if (config.hotfixes) {
    for (const auto& [base, version] : *config.hotfixes) versions[base].insert(version);
    for (const Rollout& r : config.rollouts) {
      for (const auto& [base, version] : r.hotfixes) versions[base].insert(version);
    }
    for (const auto& [base, list] : versions) {
      for (const std::string& version : list) {
        version_column[version] = table.columns.size();
        table.columns.push_back(version);
      }
      if (!config.hotfixes->count(base)) {
        none_column[base] = table.columns.size();
        table.columns.push_back(base + ":none");
      }
    }
  } else {
    table.columns.push_back("file");
  }

  // nodes per (distinct threshold vector, answer)
  std::vector<std::vector<uint64_t>> tally(eval.distinct());
  std::vector<uint32_t> buckets;
  for (const RolloutNode& node : fleet) {
    eval.Buckets(node, &buckets);
    for (size_t v = 0; v < eval.distinct(); ++v) {
      const size_t id = eval.AnswerOf(buckets, v);
      if (tally[v].size() <= id) tally[v].resize(id + 1, 0);
      ++tally[v][id];
    }
  }

  std::vector<std::vector<size_t>> answer_columns(eval.answers());
  for (size_t id = 0; id < eval.answers(); ++id) {
    if (!config.hotfixes) {
      answer_columns[id].push_back(0);
      continue;
    }
    const auto& hotfixes = eval.answer(id).hotfixes;
    for (const auto& [base, list] : versions) {
      auto it = hotfixes.find(base);
      answer_columns[id].push_back(it != hotfixes.end() ? version_column.at(it->second)
                                                        : none_column.at(base));
    }
  }
  std::vector<std::vector<uint64_t>> by_vector(eval.distinct(),
                                               std::vector<uint64_t>(table.columns.size(), 0));
  for (size_t v = 0; v < eval.distinct(); ++v) {
    for (size_t id = 0; id < tally[v].size(); ++id) {
      for (size_t column : answer_columns[id]) by_vector[v][column] += tally[v][id];
    }
  }
  for (size_t t = 0; t < times.size(); ++t) table.counts.push_back(by_vector[eval.VectorOfTime(t)]);
  return table;
}

StatusOr<std::vector<DiffRow>> SimulateAgainst(const ComponentConfig& config,
                                               const ComponentConfig& against,
                                               const std::vector<RolloutNode>& fleet,
                                               const std::vector<RolloutTime>& times) {
  if (Status size = CheckSimulateSize(fleet, times); !size.ok()) return size;
  Evaluator a(config, times), b(against, times);
  // The distinct (threshold vector in a, threshold vector in b) pairs among the times.
  std::map<std::pair<size_t, size_t>, size_t> pair_index;
  std::vector<std::pair<size_t, size_t>> pairs;
  std::vector<size_t> pair_of_time;
  for (size_t t = 0; t < times.size(); ++t) {
    auto key = std::make_pair(a.VectorOfTime(t), b.VectorOfTime(t));
    auto [it, inserted] = pair_index.emplace(key, pairs.size());
    if (inserted) pairs.push_back(key);
    pair_of_time.push_back(it->second);
  }
  Status work = CheckWork(fleet.size(), pairs.size(), a.rollouts() + b.rollouts());
  if (!work.ok()) return work;

  struct PairResult {
    uint64_t differing = 0;
    std::vector<DiffNode> first;
  };
  std::vector<PairResult> results(pairs.size());
  std::vector<uint32_t> buckets_a, buckets_b;
  for (const RolloutNode& node : fleet) {
    a.Buckets(node, &buckets_a);
    b.Buckets(node, &buckets_b);
    for (size_t p = 0; p < pairs.size(); ++p) {
      const Evaluator::Answer& answer_a = a.answer(a.AnswerOf(buckets_a, pairs[p].first));
      const Evaluator::Answer& answer_b = b.answer(b.AnswerOf(buckets_b, pairs[p].second));
      if (answer_a.served == answer_b.served) continue;
      PairResult& result = results[p];
      ++result.differing;
      if (result.first.size() < kMaxDiffNodesListed) {
        result.first.push_back({node, answer_a.served, answer_b.served});
      }
    }
  }

  std::vector<DiffRow> rows;
  std::optional<RolloutTime> listed_at;
  for (size_t t = 0; t < times.size(); ++t) {
    DiffRow row;
    row.at = times[t];
    const size_t p = pair_of_time[t];
    row.differing = results[p].differing;
    if (row.differing == 0) {
      listed_at.reset();
    } else if (t > 0 && pair_of_time[t - 1] == p && listed_at) {
      row.listed_at = listed_at;  // the same answers as the row before: listed there
    } else {
      row.listed = results[p].first;
      row.listed_at = listed_at = times[t];
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string FormatSimulateTable(const SimulateTable& table) {
  std::string out = "at";
  for (const std::string& column : table.columns) out += "\t" + column;
  out += "\n";
  for (size_t t = 0; t < table.times.size(); ++t) {
    out += FormatRolloutTime(table.times[t]);
    for (uint64_t count : table.counts[t]) out += "\t" + std::to_string(count);
    out += "\n";
  }
  return out;
}

std::string FormatDiffRows(const std::vector<DiffRow>& rows) {
  std::string out = "at\tdiffering\tlisted_at\n";
  bool any = false;
  for (const DiffRow& row : rows) {
    out += FormatRolloutTime(row.at) + "\t" + std::to_string(row.differing) + "\t" +
           (row.listed_at ? FormatRolloutTime(*row.listed_at) : "-") + "\n";
    any = any || !row.listed.empty();
  }
  if (!any) return out;
  out += "\nat\tvm_id\tsubscription\tcluster\tserved\tserved_against\n";
  for (const DiffRow& row : rows) {
    for (const DiffNode& d : row.listed) {
      out += FormatRolloutTime(row.at) + "\t" + d.node.vm_id + "\t" + d.node.subscription + "\t" +
             d.node.cluster + "\t" + d.served + "\t" + d.served_against + "\n";
    }
  }
  return out;
}

}  // namespace hotfix::service
