#include "service/control/rollout_tools.h"

#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/duration.h"

namespace hotfix::service {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kJsonSuffix = ".json";

std::string Trim(std::string_view s) {
  size_t begin = 0, end = s.size();
  while (begin < end && (s[begin] == ' ' || s[begin] == '\t')) ++begin;
  while (end > begin && (s[end - 1] == ' ' || s[end - 1] == '\t')) --end;
  return std::string(s.substr(begin, end - begin));
}

bool HasSpaceOrControl(std::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return true;
  }
  return false;
}

// A message is one line in `validate`'s output.
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

// 1050 -> "10.5", 100 -> "1", 5 -> "0.05".
std::string PercentText(uint32_t threshold) {
  std::string text = std::to_string(threshold / 100);
  const uint32_t cents = threshold % 100;
  if (cents != 0) {
    text += '.';
    text += static_cast<char>('0' + cents / 10);
    if (cents % 10 != 0) text += static_cast<char>('0' + cents % 10);
  }
  return text;
}

ordered_json PercentJson(uint32_t threshold) {
  if (threshold % 100 == 0) return threshold / 100;
  return static_cast<double>(threshold) / 100.0;
}

// "202604.01.9" before "202604.01.10": by base, then by the patch number.
struct VersionOrder {
  bool operator()(const std::string& a, const std::string& b) const {
    const std::string_view pa = std::string_view(a).substr(std::min<size_t>(a.size(), 10));
    const std::string_view pb = std::string_view(b).substr(std::min<size_t>(b.size(), 10));
    const std::string_view ba = std::string_view(a).substr(0, 9);
    const std::string_view bb = std::string_view(b).substr(0, 9);
    if (ba != bb) return ba < bb;
    if (pa.size() != pb.size()) return pa.size() < pb.size();
    return pa < pb;
  }
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

// Builds a NodeList line by line (from a string or a stream).
class NodeListBuilder {
 public:
  Status AddLine(size_t line_no, std::string_view raw) {
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    const std::string line = Trim(raw);
    if (line.empty() || line[0] == '#') return Status::Ok();
    const std::string where = "line " + std::to_string(line_no) + ": ";
    std::vector<std::string> fields;
    size_t start = 0;
    for (;;) {
      const size_t comma = line.find(',', start);
      fields.push_back(Trim(std::string_view(line).substr(start, comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (fields.size() != 3) {
      return Status::InvalidArgument(where + "expected vmId,subscriptionId,clusterHost, found " +
                                     std::to_string(fields.size()) + " field" +
                                     (fields.size() == 1 ? "" : "s"));
    }
    static constexpr const char* kNames[] = {"vmId", "subscriptionId", "clusterHost"};
    static constexpr size_t kMaxChars[] = {64, 64, 253 + 6};  // the host may carry :port
    for (size_t i = 0; i < 3; ++i) {
      if (fields[i].empty()) return Status::InvalidArgument(where + kNames[i] + " is empty");
      if (fields[i].size() > kMaxChars[i]) {
        return Status::InvalidArgument(where + kNames[i] + " is longer than " +
                                       std::to_string(kMaxChars[i]) + " characters");
      }
      if (HasSpaceOrControl(fields[i])) {
        return Status::InvalidArgument(where + kNames[i] +
                                       " contains a space or a control character");
      }
    }
    RolloutNode node = MakeRolloutNode(fields[0], fields[1], fields[2]);
    if (node.cluster.empty()) {
      return Status::InvalidArgument(where + "clusterHost " + fields[2] + " has no host");
    }
    std::string key = node.vm_id + '\n' + node.subscription + '\n' + node.cluster;
    if (!seen_.insert(std::move(key)).second) {
      ++list_.duplicates;
      return Status::Ok();
    }
    if (list_.nodes.size() >= kMaxFleetNodes) {
      return Status::InvalidArgument(where + "more than " + std::to_string(kMaxFleetNodes) +
                                     " nodes (the simulate limit)");
    }
    list_.nodes.push_back(std::move(node));
    return Status::Ok();
  }

  NodeList Take() { return std::move(list_); }

 private:
  NodeList list_;
  std::unordered_set<std::string> seen_;
};

std::string Guid(std::mt19937_64& rng) {
  uint64_t a = rng(), b = rng();
  a = (a & ~uint64_t{0xF000}) | uint64_t{0x4000};            // version 4
  b = (b & ~(uint64_t{0xC} << 60)) | (uint64_t{0x8} << 60);  // RFC 4122 variant
  char buf[40];
  std::snprintf(
      buf, sizeof buf, "%08llx-%04llx-%04llx-%04llx-%012llx",
      static_cast<unsigned long long>(a >> 32), static_cast<unsigned long long>((a >> 16) & 0xFFFF),
      static_cast<unsigned long long>(a & 0xFFFF), static_cast<unsigned long long>(b >> 48),
      static_cast<unsigned long long>(b & 0xFFFFFFFFFFFFULL));
  return buf;
}

}  // namespace

StatusOr<std::chrono::seconds> ParseRolloutDuration(std::string_view text) {
  StatusOr<std::chrono::milliseconds> d = ParseDuration(text);
  if (!d.ok()) return d.status();
  const std::string quoted = "duration \"" + std::string(text) + "\"";
  if (d->count() == 0) return Status::InvalidArgument(quoted + " is zero");
  if (d->count() % 1000 != 0) return Status::InvalidArgument(quoted + " is not whole seconds");
  return std::chrono::duration_cast<std::chrono::seconds>(*d);
}

StatusOr<std::shared_ptr<const ComponentConfig>> LoadComponentFromFolder(
    const std::string& dir, std::string_view component) {
  if (!IsValidComponentName(component)) {
    return Status::InvalidArgument("\"" + std::string(component) +
                                   "\" is not a valid component name");
  }
  StatusOr<FolderLoad> load = LoadComponentFolder(dir);
  if (!load.ok()) return load.status();
  const std::string name(component);
  if (auto it = load->valid.find(name); it != load->valid.end()) return it->second;
  const std::string file = name + std::string(kJsonSuffix);
  if (auto it = load->rejected.find(file); it != load->rejected.end()) {
    return Status::InvalidArgument(OneLine(it->second));
  }
  return Status::NotFound(dir + ": no " + file);
}

std::string ValidateReport::Summary() const {
  return std::to_string(ok) + (ok == 1 ? " file" : " files") + " ok, " +
         std::to_string(problems.size()) + " refused";
}

StatusOr<ValidateReport> ValidateFolder(const std::string& dir) {
  StatusOr<FolderLoad> load = LoadComponentFolder(dir);
  if (!load.ok()) return load.status();
  ValidateReport report;
  report.ok = load->valid.size();
  for (const auto& [file, why] : load->rejected) report.problems.push_back(OneLine(why));
  return report;
}

std::string WhyNot(const RolloutOutcome& outcome) {
  switch (outcome.verdict) {
    case RolloutVerdict::kApplies:
      return "";
    case RolloutVerdict::kNotUnderThreshold:
      return "bucket " + std::to_string(outcome.bucket) + " not under threshold " +
             std::to_string(outcome.threshold) + " (" + PercentText(outcome.threshold) + "%)";
    default:
      return RolloutVerdictName(outcome.verdict);
  }
}

StatusOr<std::string> PlanJson(const ComponentConfig& config, std::string_view component,
                               const RolloutNode& node, RolloutTime at) {
  std::vector<size_t> applied;
  const std::string served_text = config.ServedTo(node, at, &applied);
  ordered_json served = ordered_json::parse(served_text, nullptr, /*allow_exceptions=*/false);
  if (served.is_discarded()) return Status::Internal("the served config is not JSON");

  ordered_json out = ordered_json::object();
  out["component"] = std::string(component);
  out["at"] = FormatRolloutTime(at);
  out["node"] = {
      {"vm_id", node.vm_id}, {"subscription", node.subscription}, {"cluster", node.cluster}};
  out["served"] = std::move(served);
  ordered_json rollouts = ordered_json::array();
  for (size_t i = 0; i < config.rollouts.size(); ++i) {
    const Rollout& r = config.rollouts[i];
    const RolloutOutcome o = ExplainRollout(r, node, at);
    const bool applies = o.verdict == RolloutVerdict::kApplies;
    const bool in_answer = std::find(applied.begin(), applied.end(), i) != applied.end();
    if (applies != in_answer) {
      // The operator's view must never disagree with what the service serves.
      return Status::Internal("plan and the served answer disagree on rollout " + r.name);
    }
    ordered_json entry = ordered_json::object();
    entry["name"] = r.name;
    entry["cohort"] = r.cohort == Cohort::kNode ? "node" : "cluster";
    entry["applies"] = applies;
    entry["why"] = applies ? ordered_json(nullptr) : ordered_json(WhyNot(o));
    const bool bucketed = applies || o.verdict == RolloutVerdict::kNotUnderThreshold;
    entry["bucket"] = bucketed ? ordered_json(o.bucket) : ordered_json(nullptr);
    entry["threshold"] = o.threshold;
    entry["percent"] = PercentJson(o.threshold);
    entry["enters_at"] =
        o.enters_at ? ordered_json(FormatRolloutTime(*o.enters_at)) : ordered_json(nullptr);
    entry["state"] = RolloutStateName(StateAt(r, at));
    // The plan is the file's answer: a running replica also applies the evidence.
    entry["auto_halt"] = ordered_json(nullptr);
    if (r.auto_halt) {
      entry["auto_halt"] = {
          {"max_failure_percent", PercentJson(r.auto_halt->max_failure_percent)},
          {"min_reports", r.auto_halt->min_reports},
          {"max_failures", r.auto_halt->max_failures ? ordered_json(*r.auto_halt->max_failures)
                                                     : ordered_json(nullptr)},
          {"since", FormatRolloutTime(AutoHaltSince(r))},
          {"note",
           "applies only while its nodes' reports have not halted it and the service "
           "can read them (GET /rollouts shows the judgement)"}};
    }
    ordered_json hotfixes = ordered_json::object();
    for (const auto& [base, version] : r.hotfixes) hotfixes[base] = version;
    entry["hotfixes"] = std::move(hotfixes);
    rollouts.push_back(std::move(entry));
  }
  out["rollouts"] = std::move(rollouts);
  return out.dump(2, ' ', false, ordered_json::error_handler_t::replace);
}

std::string AutoHaltNote(const ComponentConfig& config) {
  std::string names;
  for (const Rollout& r : config.rollouts) {
    if (r.auto_halt) names += (names.empty() ? "" : ", ") + r.name;
  }
  if (names.empty()) return "";
  return "can halt themselves on their nodes' reports (auto_halt): " + names +
         "; this table assumes none does\n";
}

StatusOr<NodeList> ParseNodeList(std::string_view text) {
  NodeListBuilder builder;
  size_t line_no = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    Status st = builder.AddLine(++line_no, text.substr(start, end - start));
    if (!st.ok()) return st;
    start = end + 1;
  }
  return builder.Take();
}

StatusOr<NodeList> ReadNodeFile(const std::string& path) {
  // A stream, not a whole-file read: `--nodes <(grep ... access.log | ...)` is a FIFO.
  FILE* file = std::fopen(path.c_str(), "re");
  if (file == nullptr) return Status::FromErrno("reading " + path, errno);
  NodeListBuilder builder;
  char* line = nullptr;
  size_t capacity = 0;
  size_t line_no = 0;
  Status st;
  for (;;) {
    errno = 0;
    const ssize_t n = ::getline(&line, &capacity, file);
    if (n < 0) {
      if (errno != 0) st = Status::FromErrno("reading " + path, errno);
      break;
    }
    std::string_view text(line, static_cast<size_t>(n));
    if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    st = builder.AddLine(++line_no, text);
    if (!st.ok()) break;
  }
  std::free(line);
  std::fclose(file);
  if (!st.ok()) return st;
  return builder.Take();
}

StatusOr<std::vector<RolloutNode>> RandomFleet(const RandomFleetOptions& options) {
  if (options.count == 0 || options.count > kMaxFleetNodes) {
    return Status::InvalidArgument("a random fleet has 1 to " + std::to_string(kMaxFleetNodes) +
                                   " nodes, not " + std::to_string(options.count));
  }
  for (const auto* list : {&options.subscriptions, &options.clusters}) {
    for (const std::string& entry : *list) {
      if (entry.empty() || HasSpaceOrControl(entry)) {
        return Status::InvalidArgument("random fleet: \"" + entry +
                                       "\" is not a subscription or cluster host");
      }
    }
  }
  std::mt19937_64 rng(options.seed);
  std::vector<std::string> subscriptions = options.subscriptions;
  if (subscriptions.empty()) {
    for (int i = 0; i < 5; ++i) subscriptions.push_back(Guid(rng));
  }
  std::vector<std::string> clusters = options.clusters;
  if (clusters.empty()) {
    static constexpr const char* kRegions[] = {"eastus", "westeurope", "southeastasia", "westus2"};
    for (int i = 0; i < 8; ++i) {
      const uint64_t r = rng();
      char host[128];
      std::snprintf(host, sizeof host, "aks-%06llx-dns-%08llx.hcp.%s.azmk8s.io",
                    static_cast<unsigned long long>(r >> 40),
                    static_cast<unsigned long long>(r & 0xFFFFFFFFULL), kRegions[i % 4]);
      clusters.push_back(host);
    }
  }
  std::vector<RolloutNode> fleet;
  fleet.reserve(options.count);
  for (size_t i = 0; i < options.count; ++i) {
    const std::string vm_id = Guid(rng);
    const std::string& subscription = subscriptions[rng() % subscriptions.size()];
    const std::string& cluster = clusters[rng() % clusters.size()];
    fleet.push_back(MakeRolloutNode(vm_id, subscription, cluster));
  }
  return fleet;
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

namespace {

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

  // Each answer's columns.
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
