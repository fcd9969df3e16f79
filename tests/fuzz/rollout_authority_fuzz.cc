// The network's way into staged rollouts: the `:authority` any caller sends becomes the
// cluster a rollout's `match.clusters` patterns are matched against and, for a cluster cohort,
// the bucket key (MakeRolloutNode, MatchesClusterPattern and AnswerFor in
// src/service/rollout/rollout.cc; docs/ROLLOUTS.md). The service's answer to a call is checked end
// to end through LivePatchingServiceImpl::Decide with a file that ramps a cluster cohort.
//
// Input: the `:authority` bytes, then optionally a NUL and a cluster pattern (an operator's
// input, fuzzed here to drive the matcher: the host it meets is the network's).
//
// Properties:
// - the cluster is lower-case, the same for any ASCII case of the authority, and the same with
//   a ":443" added to a host that has no colon;
// - a rollout whose only condition is that pattern applies exactly when a reference matcher
//   (dynamic programming, written apart from the linear one) says the pattern matches a
//   non-empty cluster (an empty one is no cohort key);
// - a call with that authority is answered OK with one of the two configs the file can give,
//   the rollout's exactly when the reference matcher and the bucket put the cluster inside.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/text.h"
#include "fixed_service.h"
#include "fuzz_util.h"
#include "service/rollout/rollout.h"

using namespace hotfix;
using namespace hotfix::service;

namespace {

constexpr char kEastPattern[] = "*.hcp.eastus.azmk8s.io";
constexpr char kRolloutName[] = "east-half";
// Half of the east US clusters, by cluster, since 2020: the whole ramp is in the past.
constexpr char kFile[] = R"({"hotfixes":{"202604.01":"202604.01.3"},"rollouts":[{
  "name":"east-half","hotfixes":{"202604.01":"202604.01.4"},
  "match":{"clusters":["*.hcp.eastus.azmk8s.io"]},"cohort":"cluster",
  "steps":[{"at":"2020-01-01T00:00:00Z","percent":50}]}]})";
constexpr char kBaseAnswer[] = R"({"hotfixes":{"202604.01":"202604.01.3"}})";
constexpr char kRolloutAnswer[] = R"({"hotfixes":{"202604.01":"202604.01.4"}})";

// `*` is any run of characters, everything else itself, the whole host: the textbook table
// over (pattern prefix, host prefix), quadratic where the product's matcher is linear.
bool ReferenceMatch(std::string_view pattern, std::string_view host) {
  std::vector<bool> row(host.size() + 1, false), next(host.size() + 1);
  row[0] = true;
  for (char p : pattern) {
    next.assign(host.size() + 1, false);
    if (p == '*') {
      bool any = false;
      for (size_t j = 0; j <= host.size(); ++j) next[j] = any = any || row[j];
    } else {
      for (size_t j = 1; j <= host.size(); ++j) next[j] = row[j - 1] && host[j - 1] == p;
    }
    row.swap(next);
  }
  return row[host.size()];
}

std::string AsciiUpper(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

// A pattern reaches the service inside a JSON file, which nlohmann::json has checked to be
// UTF-8; other bytes would only test how this target builds its JSON.
bool IsUtf8(std::string_view text) {
  try {
    static_cast<void>(nlohmann::json(std::string(text)).dump());
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// Bounds the reference's quadratic table; the product's matcher runs on every length.
constexpr size_t kMaxReferenceHost = 1024;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Never destroyed: libFuzzer exits without unwinding. Development mode: a cluster cohort
  // still applies (docs/ROLLOUTS.md, "Development mode").
  static FixedService* world = new FixedService({{"aksNodeController", kFile}});
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view authority = input.substr(0, nul);

  const std::string cluster = MakeRolloutNode("", "", authority).cluster;
  FUZZ_CHECK(cluster == AsciiLower(cluster));
  FUZZ_CHECK(MakeRolloutNode("", "", AsciiUpper(authority)).cluster == cluster);
  if (authority.find(':') == std::string_view::npos &&
      (authority.empty() || authority.front() != '[')) {
    FUZZ_CHECK(cluster == AsciiLower(authority));
    FUZZ_CHECK(MakeRolloutNode("", "", std::string(authority) + ":443").cluster == cluster);
  }
  const bool reference_fits = cluster.size() <= kMaxReferenceHost;

  // The operator's pattern against this cluster, alone in a rollout at 100%.
  if (nul != std::string_view::npos && IsUtf8(input.substr(nul + 1))) {
    const std::string pattern(input.substr(nul + 1));
    nlohmann::json rollout = {{"name", "only-the-pattern"},
                              {"hotfixes", {{"202604.01", "202604.01.9"}}},
                              {"match", {{"clusters", {pattern}}}},
                              {"cohort", "cluster"},
                              {"steps", {{{"at", "2020-01-01T00:00:00Z"}, {"percent", 100}}}}};
    StatusOr<std::vector<Rollout>> parsed = ParseRollouts(nlohmann::json::array({rollout}));
    if (parsed.ok() && reference_fits) {
      const RolloutOutcome outcome =
          ExplainRollout(parsed->front(), {"", "", cluster},
                         std::chrono::time_point_cast<std::chrono::seconds>(RolloutClock::now()));
      // An empty cluster is no cohort key: a cluster cohort never applies to it.
      FUZZ_CHECK((outcome.verdict == RolloutVerdict::kApplies) ==
                 (!cluster.empty() && ReferenceMatch(AsciiLower(pattern), cluster)));
    }
  }

  // The service's answer to a node that sent this authority.
  CallInput call;
  const std::string_view token = "any";
  call.authorization = {token};
  call.component_name = "aksNodeController";
  call.authority = authority;
  call.peer = "ipv4:127.0.0.1:1";
  const CallDecision decision = world->service->Decide(call);
  FUZZ_CHECK(decision.status.ok());
  FUZZ_CHECK(decision.config == kBaseAnswer || decision.config == kRolloutAnswer);
  if (reference_fits) {
    const bool inside =
        ReferenceMatch(kEastPattern, cluster) && RolloutBucket(kRolloutName, cluster) < 5000;
    FUZZ_CHECK((decision.config == kRolloutAnswer) == inside);
  }
  return 0;
}
