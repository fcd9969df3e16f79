// The automatic halt's and the gates' evidence as Prometheus' HTTP API answers it
// (ParseSketchAnswer, ParseHaltRecords, ParseEvidenceFrom, ParseGateRecords, ParseKnownRollouts in
// src/service/ops/prometheus_outcomes.cc) and the node sketches it carries (NodeSketch::AddGauge,
// src/service/rollout/node_sketch.cc). Prometheus is the operator's, but its answers hold what
// every scrape target under the selector exported, and arrive over the network.
//
// Input: the answer's bytes.
//
// Properties:
// - every parse either fails or fills only the rollout asked about;
// - the sets' tally has failures <= reports and failed subscriptions <= failures, and is exact
//   (a count under 257) whenever the reporting set is;
// - a parse is idempotent: parsing the same answer again into the result changes nothing
//   (a union), so two Prometheus servers answering alike cannot double a count;
// - a halt record or `from` read back is a time within [0, 2^40] s;
// - gate records are kept only for the rollout and gate label asked about (ParseGateRecords).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "service/ops/prometheus_outcomes.h"

using namespace hotfix;
using namespace hotfix::service;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  const EvidenceKey key{"aksNodeController", "canary",
                        RolloutTime(std::chrono::seconds(1796342400))};  // 2026-12-04
  const std::vector<EvidenceRequest> requests = {
      {key, "6e085f236a23", std::chrono::seconds(60), true, {}}};

  OutcomeEvidence once;
  if (ParseSketchAnswer(body, requests, &once).ok()) {
    for (const auto& [k, read] : once.rollouts) FUZZ_CHECK(k == key);
    const NodeSets& sets = once.rollouts[key].sets;
    const OutcomeTally t = sets.Tally();
    FUZZ_CHECK(t.failures <= t.reports && t.failed_subscriptions <= t.failures);
    if (sets.reporting.exact()) FUZZ_CHECK(t.reports < NodeSketch::kMinValues);
    OutcomeEvidence twice = once;
    FUZZ_CHECK(ParseSketchAnswer(body, requests, &twice).ok());
    FUZZ_CHECK(twice.rollouts.at(key).sets == sets);
  }
  OutcomeEvidence records;
  if (ParseHaltRecords(body, requests, &records).ok()) {
    for (const auto& [k, read] : records.rollouts) {
      FUZZ_CHECK(k == key);
      if (read.halted_at) {
        const int64_t s = read.halted_at->time_since_epoch().count();
        FUZZ_CHECK(s >= 0 && s <= int64_t{1} << 40);
      }
    }
  }
  OutcomeEvidence from;
  if (ParseEvidenceFrom(body, requests, &from).ok()) {
    for (const auto& [k, read] : from.rollouts) FUZZ_CHECK(k == key);
  }
  // Gate records: only the rollout and gate asked about, a step of at most two digits.
  std::vector<EvidenceRequest> gated = requests;
  gated[0].gate_records = {"0123456789ab"};
  for (GateRecordKind kind :
       {GateRecordKind::kOpen, GateRecordKind::kStart, GateRecordKind::kClosed}) {
    OutcomeEvidence gates;
    if (ParseGateRecords(body, gated, kind, &gates).ok()) {
      for (const auto& [k, rec] : gates.gates) {
        FUZZ_CHECK(k.component == key.component && k.rollout == key.rollout);
        FUZZ_CHECK(k.gate == "0123456789ab" && k.step < 100);
        FUZZ_CHECK(rec.opens.size() <= 64);
        FUZZ_CHECK((kind == GateRecordKind::kOpen) == !rec.opens.empty());
        FUZZ_CHECK((kind == GateRecordKind::kStart) == rec.started_at.has_value());
        FUZZ_CHECK((kind == GateRecordKind::kClosed) == rec.closed_at.has_value());
      }
    }
  }
  OutcomeEvidence known;
  static_cast<void>(ParseKnownRollouts(body, &known));
  return 0;
}
