#include "service/rollout/rollout.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "common/duration.h"
#include "common/text.h"
#include "service/rollout/json_message.h"

namespace hotfix::service {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxNameChars = 64;

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsAsciiDigit);
}

Status WrongType(std::string_view field, const json& value, std::string_view want) {
  return Status::InvalidArgument(std::string(field) + " is " + TypeName(value) + ", not " +
                                 std::string(want));
}

// Refuses keys not in `known`, then requires those in `required`; `where` prefixes errors.
Status CheckKeys(const json& object, std::initializer_list<std::string_view> known,
                 std::initializer_list<const char*> required, std::string_view where) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return Status::InvalidArgument(std::string(where) + "unknown key " + Quote(key) +
                                     " (known: " + list + ")");
    }
  }
  for (const char* key : required) {
    if (!object.contains(key)) {
      return Status::InvalidArgument(std::string(where) + "missing \"" + key + "\"");
    }
  }
  return Status::Ok();
}

// "FIELD has N entries, more than MAX".
Status TooMany(std::string_view field, size_t entries, size_t max) {
  return Status::InvalidArgument(std::string(field) + " has " + std::to_string(entries) +
                                 " entries, more than " + std::to_string(max));
}

// A list of strings, lower-cased and sorted (membership by binary search).
StatusOr<std::vector<std::string>> ParseStringList(const json& value, std::string_view field,
                                                   size_t max_entries, size_t max_chars) {
  if (!value.is_array()) return WrongType(field, value, "an array of strings");
  if (value.size() > max_entries) return TooMany(field, value.size(), max_entries);
  std::vector<std::string> out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string entry = std::string(field) + "[" + std::to_string(i) + "]";
    if (!value[i].is_string()) return WrongType(entry, value[i], "a string");
    const std::string& s = value[i].get_ref<const std::string&>();
    if (s.empty() || s.size() > max_chars) {
      return Status::InvalidArgument(entry + " " + QuoteJson(value[i]) + " must be 1 to " +
                                     std::to_string(max_chars) + " characters");
    }
    out.push_back(AsciiLower(s));
  }
  return out;
}

StatusOr<RolloutMatch> ParseMatch(const json& value) {
  if (!value.is_object()) return WrongType("match", value, "an object");
  Status known = CheckKeys(value, {"subscriptions", "exclude_subscriptions", "clusters", "vm_ids"},
                           {}, "match: ");
  if (!known.ok()) return known;
  RolloutMatch match;
  struct Field {
    const char* name;
    std::vector<std::string>* out;
    size_t max_entries;
    size_t max_chars;
    bool sorted;
  };
  const Field fields[] = {
      {"subscriptions", &match.subscriptions, kMaxMatchEntries, 64, true},
      {"exclude_subscriptions", &match.exclude_subscriptions, kMaxMatchEntries, 64, true},
      {"clusters", &match.clusters, kMaxClusterPatterns, kMaxClusterPatternChars, false},
      {"vm_ids", &match.vm_ids, kMaxMatchEntries, 64, true},
  };
  for (const Field& f : fields) {
    auto it = value.find(f.name);
    if (it == value.end()) continue;
    auto list = ParseStringList(*it, std::string("match.") + f.name, f.max_entries, f.max_chars);
    if (!list.ok()) return list.status();
    *f.out = std::move(list).value();
    if (f.sorted) std::sort(f.out->begin(), f.out->end());
  }
  return match;
}

// percent: a JSON number from 0 to 100 with at most two decimals -> percent * 100.
StatusOr<uint32_t> ParsePercent(const json& value, std::string_view field) {
  if (!value.is_number()) return WrongType(field, value, "a number");
  const double percent = value.get<double>();
  if (!(percent >= 0 && percent <= 100)) {
    return Status::InvalidArgument(std::string(field) + " " + QuoteJson(value) +
                                   " is not between 0 and 100");
  }
  const double scaled = percent * 100;
  const double rounded = std::round(scaled);
  // Doubles cannot hold 10.55 exactly; anything within a millionth of a hundredth is it.
  if (std::fabs(scaled - rounded) > 1e-6) {
    return Status::InvalidArgument(std::string(field) + " " + QuoteJson(value) +
                                   " has more than two decimals");
  }
  return static_cast<uint32_t>(rounded);
}

StatusOr<RolloutTime> ParseTimeField(const json& value, std::string_view field) {
  if (!value.is_string()) return WrongType(field, value, "an RFC 3339 string");
  StatusOr<RolloutTime> t = ParseRolloutTime(value.get_ref<const std::string&>());
  if (!t.ok()) return Status::InvalidArgument(std::string(field) + " " + t.status().message());
  return t;
}

StatusOr<uint64_t> ParseCount(const json& value, std::string_view field);

StatusOr<StepGate> ParseGate(const json& value, const std::string& where) {
  if (!value.is_object()) return WrongType(where, value, "an object");
  Status known = CheckKeys(value, {"min_nodes", "max_failure_percent", "bake"}, {}, where + ": ");
  if (!known.ok()) return known;
  if (value.empty()) {
    return Status::InvalidArgument(where +
                                   " is empty: give min_nodes, max_failure_percent or "
                                   "bake");
  }
  StepGate gate;
  if (auto it = value.find("min_nodes"); it != value.end()) {
    auto n = ParseCount(*it, where + ".min_nodes");
    if (!n.ok()) return n.status();
    gate.min_nodes = *n;
  }
  if (auto it = value.find("max_failure_percent"); it != value.end()) {
    auto percent = ParsePercent(*it, where + ".max_failure_percent");
    if (!percent.ok()) return percent.status();
    gate.max_failure_percent = *percent;
  }
  if (auto it = value.find("bake"); it != value.end()) {
    if (!it->is_string()) return WrongType(where + ".bake", *it, "a duration string");
    auto bake = ParseDurationWithin(it->get_ref<const std::string&>(), std::chrono::seconds(0),
                                    std::chrono::hours(24 * 30));
    if (!bake.ok()) return Status::InvalidArgument(where + ".bake " + bake.status().message());
    if (bake->count() % 1000 != 0) {
      return Status::InvalidArgument(where + ".bake " + QuoteJson(*it) + " is not whole seconds");
    }
    gate.bake = std::chrono::duration_cast<std::chrono::seconds>(*bake);
  }
  return gate;
}

StatusOr<std::vector<RolloutStep>> ParseSteps(const json& value) {
  if (!value.is_array()) return WrongType("steps", value, "an array");
  if (value.empty()) return Status::InvalidArgument("steps is empty");
  if (value.size() > kMaxRolloutSteps) return TooMany("steps", value.size(), kMaxRolloutSteps);
  std::vector<RolloutStep> steps;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string where = "steps[" + std::to_string(i) + "]";
    const json& step = value[i];
    if (!step.is_object()) return WrongType(where, step, "an object");
    Status known = CheckKeys(step, {"at", "percent", "gate"}, {"at", "percent"}, where + ": ");
    if (!known.ok()) return known;
    auto at = ParseTimeField(step["at"], where + ".at");
    if (!at.ok()) return at.status();
    auto threshold = ParsePercent(step["percent"], where + ".percent");
    if (!threshold.ok()) return threshold.status();
    if (!steps.empty() && *at <= steps.back().at) {
      return Status::InvalidArgument(where + ".at " + QuoteJson(step["at"]) +
                                     " is not after the step before it");
    }
    if (!steps.empty() && *threshold < steps.back().threshold) {
      return Status::InvalidArgument(where + ".percent " + QuoteJson(step["percent"]) +
                                     " is below the step before it (a ramp never shrinks; "
                                     "halt the rollout instead)");
    }
    std::optional<StepGate> gate;
    if (auto it = step.find("gate"); it != step.end()) {
      if (steps.empty()) {
        return Status::InvalidArgument(where +
                                       ".gate: the first step has no step before it whose "
                                       "nodes could open a gate");
      }
      auto parsed = ParseGate(*it, where + ".gate");
      if (!parsed.ok()) return parsed.status();
      gate = *parsed;
    }
    steps.push_back({*at, *threshold, gate});
  }
  return steps;
}

// A count in an auto_halt policy: a JSON integer from 1 to kMaxAutoHaltCount.
StatusOr<uint64_t> ParseCount(const json& value, std::string_view field) {
  if (!value.is_number_integer()) return WrongType(field, value, "an integer");
  // A negative integer reads as 2^63 or more, past the limit.
  if (value.get<uint64_t>() < 1 || value.get<uint64_t>() > kMaxAutoHaltCount) {
    return Status::InvalidArgument(std::string(field) + " " + QuoteJson(value) +
                                   " is not between 1 and " + std::to_string(kMaxAutoHaltCount));
  }
  return value.get<uint64_t>();
}

StatusOr<AutoHaltPolicy> ParseAutoHalt(const json& value) {
  if (!value.is_object()) return WrongType("auto_halt", value, "an object");
  Status known = CheckKeys(
      value,
      {"max_failure_percent", "min_reports", "max_failures", "min_failed_subscriptions", "since"},
      {"max_failure_percent", "min_reports"}, "auto_halt: ");
  if (!known.ok()) return known;
  AutoHaltPolicy policy;
  auto percent = ParsePercent(value["max_failure_percent"], "auto_halt.max_failure_percent");
  if (!percent.ok()) return percent.status();
  policy.max_failure_percent = *percent;
  auto min_reports = ParseCount(value["min_reports"], "auto_halt.min_reports");
  if (!min_reports.ok()) return min_reports.status();
  policy.min_reports = *min_reports;
  if (auto it = value.find("max_failures"); it != value.end()) {
    auto max_failures = ParseCount(*it, "auto_halt.max_failures");
    if (!max_failures.ok()) return max_failures.status();
    policy.max_failures = *max_failures;
  }
  if (auto it = value.find("min_failed_subscriptions"); it != value.end()) {
    auto subscriptions = ParseCount(*it, "auto_halt.min_failed_subscriptions");
    if (!subscriptions.ok()) return subscriptions.status();
    policy.min_failed_subscriptions = *subscriptions;
  }
  if (auto it = value.find("since"); it != value.end()) {
    auto since = ParseTimeField(*it, "auto_halt.since");
    if (!since.ok()) return since.status();
    policy.since = *since;
  }
  return policy;
}

// {"at": TIME, "by": TEXT, "reason": TEXT}: `at` required. `by` names a person or a job
// (printable ASCII), `reason` is free text (UTF-8, no control characters but none at all).
StatusOr<RolloutNote> ParseNote(const json& value, const std::string& field) {
  if (!value.is_object()) return WrongType(field, value, "an object");
  Status known = CheckKeys(value, {"at", "by", "reason"}, {"at"}, field + ": ");
  if (!known.ok()) return known;
  RolloutNote note;
  auto at = ParseTimeField(value["at"], field + ".at");
  if (!at.ok()) return at.status();
  note.at = *at;
  auto text = [&](const char* key, size_t max, bool ascii_only, std::string* out) -> Status {
    auto it = value.find(key);
    if (it == value.end()) return Status::Ok();
    const std::string where = field + "." + key;
    if (!it->is_string()) return WrongType(where, *it, "a string");
    const std::string& s = it->get_ref<const std::string&>();
    if (s.size() > max) {
      return Status::InvalidArgument(where + " has " + std::to_string(s.size()) +
                                     " bytes, more than " + std::to_string(max));
    }
    for (unsigned char c : s) {
      if (c < 0x20 || c == 0x7f || (ascii_only && c > 0x7e)) {
        return Status::InvalidArgument(
            where + " " + QuoteJson(*it) +
            (ascii_only ? " must be printable ASCII" : " must not hold control characters"));
      }
    }
    *out = s;
    return Status::Ok();
  };
  if (Status st = text("by", kMaxNoteByChars, true, &note.by); !st.ok()) return st;
  if (Status st = text("reason", kMaxNoteReasonChars, false, &note.reason); !st.ok()) return st;
  return note;
}

StatusOr<Rollout> ParseRollout(const json& value) {
  if (!value.is_object()) return WrongType("the entry", value, "an object");
  Status known = CheckKeys(value,
                           {"name", "hotfixes", "match", "cohort", "steps", "hold_at", "halted",
                            "halt_note", "resume_note", "auto_halt"},
                           {"name", "hotfixes", "steps"}, "");
  if (!known.ok()) return known;
  Rollout rollout;
  auto hotfixes = ParseHotfixMap(value["hotfixes"], "hotfixes");
  if (!hotfixes.ok()) return hotfixes.status();
  rollout.hotfixes = std::move(hotfixes).value();
  if (rollout.hotfixes.size() > kMaxRolloutHotfixes) {
    return Status::InvalidArgument("hotfixes has more than " + std::to_string(kMaxRolloutHotfixes) +
                                   " entries");
  }
  if (auto it = value.find("match"); it != value.end()) {
    auto match = ParseMatch(*it);
    if (!match.ok()) return match.status();
    rollout.match = std::move(match).value();
  }
  if (auto it = value.find("cohort"); it != value.end()) {
    if (*it != "node" && *it != "cluster") {
      return Status::InvalidArgument("cohort " + QuoteJson(*it) +
                                     " is not \"node\" or \"cluster\"");
    }
    rollout.cohort = *it == "node" ? Cohort::kNode : Cohort::kCluster;
  }
  auto steps = ParseSteps(value["steps"]);
  if (!steps.ok()) return steps.status();
  rollout.steps = std::move(steps).value();
  if (auto it = value.find("hold_at"); it != value.end() && !it->is_null()) {
    auto hold = ParseTimeField(*it, "hold_at");
    if (!hold.ok()) return hold.status();
    rollout.hold_at = *hold;
  }
  if (auto it = value.find("halted"); it != value.end()) {
    if (!it->is_boolean()) return WrongType("halted", *it, "true or false");
    rollout.halted = it->get<bool>();
  }
  if (auto it = value.find("halt_note"); it != value.end()) {
    // A note of a halt beside a rollout that is not halted is a halt undone by hand (or by an
    // older copy of the file): refused, so the last good file, halted, stays served until
    // someone resumes it on purpose (`rollout resume` removes both).
    if (!rollout.halted) {
      return Status::InvalidArgument(
          "halt_note is only for a halted rollout (\"halted\": true); `live-patching-service "
          "rollout resume` removes both");
    }
    auto note = ParseNote(*it, "halt_note");
    if (!note.ok()) return note.status();
    rollout.halt_note = std::move(note).value();
  }
  if (auto it = value.find("resume_note"); it != value.end()) {
    auto note = ParseNote(*it, "resume_note");
    if (!note.ok()) return note.status();
    rollout.resume_note = std::move(note).value();
  }
  if (auto it = value.find("auto_halt"); it != value.end()) {
    auto policy = ParseAutoHalt(*it);
    if (!policy.ok()) return policy.status();
    rollout.auto_halt = *policy;
  }
  return rollout;
}

bool Listed(const std::vector<std::string>& sorted, const std::string& value) {
  return std::binary_search(sorted.begin(), sorted.end(), value);
}

const std::string& CohortKey(const Rollout& rollout, const RolloutNode& node) {
  return rollout.cohort == Cohort::kNode ? node.vm_id : node.cluster;
}

// The match and the cohort key, before any bucket.
RolloutVerdict CheckMatch(const Rollout& rollout, const RolloutNode& node) {
  if (rollout.halted) return RolloutVerdict::kHalted;
  const RolloutMatch& m = rollout.match;
  if (!m.subscriptions.empty() &&
      (node.subscription.empty() || !Listed(m.subscriptions, node.subscription))) {
    return RolloutVerdict::kSubscriptionNotListed;
  }
  if (!node.subscription.empty() && Listed(m.exclude_subscriptions, node.subscription)) {
    return RolloutVerdict::kSubscriptionExcluded;
  }
  if (!m.clusters.empty() &&
      std::none_of(m.clusters.begin(), m.clusters.end(),
                   [&](const std::string& p) { return MatchesClusterPattern(p, node.cluster); })) {
    return RolloutVerdict::kClusterNotMatched;
  }
  if (!m.vm_ids.empty() && (node.vm_id.empty() || !Listed(m.vm_ids, node.vm_id))) {
    return RolloutVerdict::kVmIdNotListed;
  }
  if (CohortKey(rollout, node).empty()) return RolloutVerdict::kNoCohortKey;
  return RolloutVerdict::kApplies;
}

}  // namespace

// The pattern is literal segments between stars: the first must start the host, the last end
// it, and those between are found left to right, each after the one before (leftmost is never
// wrong for `*` alone). Linear in the host, with no backtracking.
bool MatchesClusterPattern(std::string_view pattern, std::string_view host) {
  const size_t first_star = pattern.find('*');
  if (first_star == std::string_view::npos) return pattern == host;
  const size_t last_star = pattern.rfind('*');
  const std::string_view prefix = pattern.substr(0, first_star);
  const std::string_view suffix = pattern.substr(last_star + 1);
  if (host.size() < prefix.size() + suffix.size() || host.substr(0, prefix.size()) != prefix ||
      host.substr(host.size() - suffix.size()) != suffix) {
    return false;
  }
  std::string_view middle = host.substr(prefix.size(), host.size() - prefix.size() - suffix.size());
  std::string_view stars = pattern.substr(first_star + 1, last_star - first_star);
  while (!stars.empty()) {
    const size_t next = stars.find('*');
    const std::string_view segment = stars.substr(0, next);
    stars.remove_prefix(next + 1);
    if (segment.empty()) continue;
    const size_t at = middle.find(segment);
    if (at == std::string_view::npos) return false;
    middle.remove_prefix(at + segment.size());
  }
  return true;
}

bool IsHotfixBase(std::string_view s) {
  return s.size() == 9 && AllDigits(s.substr(0, 6)) && s[6] == '.' && AllDigits(s.substr(7));
}

bool IsHotfixVersion(std::string_view s) {
  return s.size() > 10 && IsHotfixBase(s.substr(0, 9)) && s[9] == '.' && AllDigits(s.substr(10));
}

StatusOr<std::map<std::string, std::string>> ParseHotfixMap(const json& hotfixes,
                                                            std::string_view where) {
  if (!hotfixes.is_object()) return WrongType(where, hotfixes, "an object");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : hotfixes.items()) {
    const std::string entry = std::string(where) + "[" + Quote(key) + "]";
    if (!IsHotfixBase(key)) return Status::InvalidArgument(entry + ": key is not YYYYMM.DD");
    if (!value.is_string()) {
      return WrongType(entry + ": value " + QuoteJson(value), value, "a string");
    }
    const std::string& version = value.get_ref<const std::string&>();
    if (!IsHotfixVersion(version)) {
      return Status::InvalidArgument(entry + ": value " + QuoteJson(value) +
                                     " is not YYYYMM.DD.PATCH");
    }
    // download-hotfix installs a version only on a node of its base.
    if (version.compare(0, key.size(), key) != 0) {
      return Status::InvalidArgument(entry + ": value " + QuoteJson(value) + " is for base " +
                                     Quote(version.substr(0, 9)) + ", not " + Quote(key));
    }
    out.emplace(key, version);
  }
  return out;
}

StatusOr<std::vector<Rollout>> ParseRollouts(const json& rollouts) {
  if (!rollouts.is_array()) return WrongType("rollouts", rollouts, "an array");
  if (rollouts.size() > kMaxRollouts) return TooMany("rollouts", rollouts.size(), kMaxRollouts);
  std::vector<Rollout> out;
  std::set<std::string> names;
  for (size_t i = 0; i < rollouts.size(); ++i) {
    std::string where = "rollouts[" + std::to_string(i) + "]";
    const json& entry = rollouts[i];
    auto name = entry.is_object() ? entry.find("name") : entry.end();
    const bool valid_name = name != entry.end() && name->is_string() &&
                            IsAsciiName(name->get_ref<const std::string&>(), kMaxNameChars,
                                        /*digit_first=*/true);
    // A valid name is quoted whole (at most 64 characters), so the log names the rollout.
    if (name != entry.end()) where += " " + (valid_name ? name->dump() : QuoteJson(*name));
    if (name != entry.end() && !valid_name) {
      return Status::InvalidArgument(where + ": name must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}");
    }
    StatusOr<Rollout> rollout = ParseRollout(entry);
    if (!rollout.ok()) return rollout.status().Annotate(where);
    if (!names.insert(rollout->name = name->get<std::string>()).second) {
      return Status::InvalidArgument(where + ": name is used by an earlier rollout");
    }
    out.push_back(std::move(rollout).value());
  }
  return out;
}

StatusOr<RolloutTime> ParseRolloutTime(std::string_view text) {
  // By hand: C++20's std::chrono::parse is not in libstdc++ 12, and strptime is lenient
  // (one-digit fields, skipped spaces). Exactly "YYYY-MM-DDTHH:MM:SSZ".
  const Status not_rfc3339 =
      Status::InvalidArgument(Quote(text) + " is not RFC 3339 in UTC (\"2026-12-04T06:00:00Z\")");
  constexpr std::string_view kShape = "0000-00-00T00:00:00Z";
  if (text.size() != kShape.size()) return not_rfc3339;
  for (size_t i = 0; i < kShape.size(); ++i) {
    if (kShape[i] == '0' ? !IsAsciiDigit(text[i]) : text[i] != kShape[i]) return not_rfc3339;
  }
  auto number = [&](size_t at, size_t len) {
    int n = 0;
    for (size_t i = at; i < at + len; ++i) n = n * 10 + (text[i] - '0');
    return n;
  };
  using namespace std::chrono;
  year_month_day day{year(number(0, 4)), month(static_cast<unsigned>(number(5, 2))),
                     std::chrono::day(static_cast<unsigned>(number(8, 2)))};
  const int hh = number(11, 2), mm = number(14, 2), ss = number(17, 2);
  if (!day.ok() || hh > 23 || mm > 59 || ss > 59) return not_rfc3339;
  return RolloutTime(sys_days(day)) + hours(hh) + minutes(mm) + seconds(ss);
}

std::string FormatRolloutTime(RolloutTime t) {
  using namespace std::chrono;
  const sys_days day = floor<days>(t);
  const year_month_day ymd(day);
  const hh_mm_ss<seconds> tod(t - day);
  char buf[64];  // 20 characters; room for what -Wformat-truncation cannot rule out
  snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
           static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
           static_cast<int>(tod.hours().count()), static_cast<int>(tod.minutes().count()),
           static_cast<int>(tod.seconds().count()));
  return buf;
}

uint32_t RolloutBucket(std::string_view name, std::string_view key) {
  // One EVP_MD for the process and one digest context per thread, reused: an implicit fetch
  // and a context allocation per call cost more than the hash (docs/BENCHMARKS.md, "the cost
  // of 64 rollouts").
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  thread_local std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                                           &EVP_MD_CTX_free);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (sha256 == nullptr || !ctx || EVP_DigestInit_ex2(ctx.get(), sha256, nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), name.data(), name.size()) != 1 ||
      EVP_DigestUpdate(ctx.get(), ":", 1) != 1 ||
      EVP_DigestUpdate(ctx.get(), key.data(), key.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest, &size) != 1 || size < 8) {
    // Unreachable with a working libcrypto. The last bucket: the node then enters only at
    // 100 percent, as AnswerFor (which hashes nothing at 100) lets every node in.
    return kBucketCount - 1;
  }
  uint64_t head = 0;
  for (int i = 0; i < 8; ++i) head = (head << 8) | digest[i];
  return static_cast<uint32_t>(head % kBucketCount);
}

EvidenceAttribution EvidenceAttributionOf(const Rollout& rollout) {
  if (rollout.match.clusters.empty() && rollout.cohort == Cohort::kNode) {
    return EvidenceAttribution::kSigned;
  }
  return rollout.match.subscriptions.empty() && rollout.match.vm_ids.empty()
             ? EvidenceAttribution::kAuthority
             : EvidenceAttribution::kSubscription;
}

const char* EvidenceAttributionName(EvidenceAttribution a) {
  switch (a) {
    case EvidenceAttribution::kSigned:
      return "signed";
    case EvidenceAttribution::kSubscription:
      return "subscription";
    case EvidenceAttribution::kAuthority:
      return "authority";
  }
  return "authority";
}

const char* EvidenceAttributionNote(EvidenceAttribution a) {
  switch (a) {
    case EvidenceAttribution::kSigned:
      return "reports count by the signed vmId and subscription only";
    case EvidenceAttribution::kSubscription:
      return "the cluster is the caller's own :authority, but only nodes of the named "
             "subscriptions (or vmIds) count: one of them can count itself in another of their "
             "clusters, once";
    case EvidenceAttribution::kAuthority:
      return "the cluster is the caller's own :authority: any admitted node can count itself "
             "in this rollout, once per vmId; set min_failed_subscriptions, or name "
             "subscriptions in match";
  }
  return "";
}

RolloutTime AutoHaltSince(const Rollout& rollout) {
  return rollout.auto_halt && rollout.auto_halt->since ? *rollout.auto_halt->since
                                                       : rollout.steps.front().at;
}

uint32_t ThresholdAt(const Rollout& rollout, RolloutTime t) {
  if (rollout.halted) return 0;
  const RolloutTime when = rollout.hold_at ? std::min(t, *rollout.hold_at) : t;
  uint32_t threshold = 0;
  for (const RolloutStep& step : rollout.steps) {
    if (step.at > when) break;
    threshold = step.threshold;
  }
  return threshold;
}

RolloutNode MakeRolloutNode(std::string_view vm_id, std::string_view subscription,
                            std::string_view authority) {
  std::string_view host = authority;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    host = close == std::string_view::npos ? std::string_view() : host.substr(1, close - 1);
  } else if (const size_t colon = host.rfind(':');
             colon != std::string_view::npos && host.find(':') == colon) {
    host = host.substr(0, colon);  // one colon: host:port; more would be a bare IPv6 address
  }
  return {AsciiLower(vm_id), AsciiLower(subscription), AsciiLower(host)};
}

const char* RolloutVerdictName(RolloutVerdict verdict) {
  switch (verdict) {
    case RolloutVerdict::kApplies:
      return "applies";
    case RolloutVerdict::kHalted:
      return "halted";
    case RolloutVerdict::kSubscriptionNotListed:
      return "subscription not in match.subscriptions";
    case RolloutVerdict::kSubscriptionExcluded:
      return "subscription in match.exclude_subscriptions";
    case RolloutVerdict::kClusterNotMatched:
      return "cluster matches no pattern in match.clusters";
    case RolloutVerdict::kVmIdNotListed:
      return "vmId not in match.vm_ids";
    case RolloutVerdict::kNoCohortKey:
      return "no vmId to bucket by (node cohort)";
    case RolloutVerdict::kNotUnderThreshold:
      return "bucket not under threshold";
  }
  return "unknown";
}

RolloutAnswer AnswerFor(const std::map<std::string, std::string>& base,
                        const std::vector<Rollout>& rollouts, const RolloutNode& node,
                        RolloutTime now) {
  RolloutAnswer answer;
  answer.hotfixes = base;
  for (size_t i = 0; i < rollouts.size(); ++i) {
    const Rollout& rollout = rollouts[i];
    const uint32_t threshold = ThresholdAt(rollout, now);
    if (threshold == 0 || CheckMatch(rollout, node) != RolloutVerdict::kApplies) continue;
    if (threshold < kBucketCount &&
        RolloutBucket(rollout.name, CohortKey(rollout, node)) >= threshold) {
      continue;
    }
    for (const auto& [key, version] : rollout.hotfixes) answer.hotfixes[key] = version;
    answer.applied.push_back(i);
  }
  return answer;
}

RolloutOutcome ExplainRollout(const Rollout& rollout, const RolloutNode& node, RolloutTime now) {
  RolloutOutcome outcome;
  outcome.verdict = CheckMatch(rollout, node);
  outcome.threshold = ThresholdAt(rollout, now);
  if (outcome.verdict != RolloutVerdict::kApplies) return outcome;
  outcome.bucket = RolloutBucket(rollout.name, CohortKey(rollout, node));
  if (outcome.bucket >= outcome.threshold) outcome.verdict = RolloutVerdict::kNotUnderThreshold;
  for (const RolloutStep& step : rollout.steps) {
    if (rollout.hold_at && step.at > *rollout.hold_at) break;  // frozen before this step
    if (outcome.bucket < step.threshold) {
      outcome.enters_at = step.at;
      break;
    }
  }
  return outcome;
}

std::string ServedHotfixesJson(const std::map<std::string, std::string>& hotfixes) {
  // Keys and versions passed ParseHotfixMap (digits and dots), so they need no escaping and the
  // text is written directly, as nlohmann would write it; anything else goes through nlohmann.
  auto plain = [](const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return IsAsciiDigit(c) || c == '.'; });
  };
  std::string out = "{\"hotfixes\":{";
  for (const auto& [key, version] : hotfixes) {
    if (!plain(key) || !plain(version)) return json{{"hotfixes", json(hotfixes)}}.dump();
    if (out.back() != '{') out.push_back(',');
    out.append(1, '"').append(key).append("\":\"").append(version).append(1, '"');
  }
  return out.append("}}");
}

const char* RolloutStateName(RolloutState state) {
  switch (state) {
    case RolloutState::kScheduled:
      return "scheduled";
    case RolloutState::kRamping:
      return "ramping";
    case RolloutState::kComplete:
      return "complete";
    case RolloutState::kHeld:
      return "held";
    case RolloutState::kHalted:
      return "halted";
    case RolloutState::kAutoHalted:
      return "auto-halted";
  }
  return "unknown";
}

RolloutState StateAt(const Rollout& rollout, RolloutTime now) {
  if (rollout.halted) return RolloutState::kHalted;
  const uint32_t threshold = ThresholdAt(rollout, now);
  if (threshold >= kBucketCount) return RolloutState::kComplete;
  // Held: the hold has passed and it is keeping back a step that would widen the ramp.
  if (rollout.hold_at && now >= *rollout.hold_at &&
      std::any_of(rollout.steps.begin(), rollout.steps.end(), [&](const RolloutStep& step) {
        return step.at > *rollout.hold_at && step.threshold > threshold;
      })) {
    return RolloutState::kHeld;
  }
  if (now < rollout.steps.front().at) return RolloutState::kScheduled;
  if (now >= rollout.steps.back().at) return RolloutState::kComplete;  // last step below 100
  return RolloutState::kRamping;
}

std::optional<RolloutStep> NextStep(const Rollout& rollout, RolloutTime now) {
  if (rollout.halted) return std::nullopt;
  const uint32_t current = ThresholdAt(rollout, now);
  for (const RolloutStep& step : rollout.steps) {
    if (step.at <= now || step.threshold <= current) continue;
    if (rollout.hold_at && step.at > *rollout.hold_at) return std::nullopt;
    return step;
  }
  return std::nullopt;
}

StatusOr<std::chrono::seconds> ParseRolloutDuration(std::string_view text) {
  StatusOr<std::chrono::milliseconds> d = ParseDuration(text);
  if (!d.ok()) return d.status();
  const std::string quoted = "duration \"" + std::string(text) + "\"";
  if (d->count() == 0) return Status::InvalidArgument(quoted + " is zero");
  if (d->count() % 1000 != 0) return Status::InvalidArgument(quoted + " is not whole seconds");
  return std::chrono::duration_cast<std::chrono::seconds>(*d);
}

}  // namespace hotfix::service
