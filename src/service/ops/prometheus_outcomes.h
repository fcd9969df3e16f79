// The automatic halt's evidence from Prometheus (docs/ROLLOUTS.md, "Reading Prometheus"): every
// replica exports the nodes it knows of per auto-halting rollout as sketches
// (lp_rollout_node_sketch), the halts it knows of (lp_rollout_halt_record) and since when its
// evidence runs (lp_rollout_evidence_from); the Prometheus that scrapes them all is where each
// replica reads the others'. Per evaluation, with --prometheus-selector's matchers in every
// selector so that no other scrape target's series are read:
//
//   per rollout read in full (its first read, then every ten minutes):
//                 last_over_time(lp_rollout_node_sketch{SEL,component=..,rollout=..,since=..}[L])
//   per other rollout, the series that changed within W (since the last good read):
//                 (S != S offset W) or (S unless S offset W), S the selector above
//   once          last_over_time(lp_rollout_halt_record{SEL}[L])
//   once          last_over_time(lp_rollout_evidence_from{SEL}[L])
//   once          group by (component, rollout) (lp_rollout_applied_total{SEL})
//   with gates    last_over_time(lp_rollout_gate_open{SEL}[L]), lp_rollout_step_start and
//                 lp_rollout_gate_closed likewise
//
// L is the request's lookback: long on a rollout's first read (--evidence-lookback), a few
// minutes on a periodic full read. Every series read is merged as a union (sketches) or a minimum
// (times), so a series seen twice (two Prometheus servers behind one querier, a replica under two
// names) changes nothing. Series of rollouts not asked about are dropped as they are parsed.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "service/control/auto_halt_controller.h"
#include "service/ops/prometheus_client.h"

namespace hotfix::service {

struct PrometheusOutcomeOptions {
  PrometheusClientOptions client;
  // --prometheus-selector, as ParsePrometheusSelector returns it: required, so that a query can
  // never read every target's series by accident.
  std::string selector;
};

// Checks the options now (InvalidArgument naming the flag); queries nothing until Fetch.
StatusOr<std::unique_ptr<OutcomeSource>> NewPrometheusOutcomeSource(
    PrometheusOutcomeOptions options);

// The parsers of the answers, exposed for tests and the fuzzer. Each keeps only the series of
// the rollouts in `requests`, merging into `evidence`.
Status ParseSketchAnswer(std::string_view body, const std::vector<EvidenceRequest>& requests,
                         OutcomeEvidence* evidence);
Status ParseHaltRecords(std::string_view body, const std::vector<EvidenceRequest>& requests,
                        OutcomeEvidence* evidence);
Status ParseEvidenceFrom(std::string_view body, const std::vector<EvidenceRequest>& requests,
                         OutcomeEvidence* evidence);
Status ParseKnownRollouts(std::string_view body, OutcomeEvidence* evidence);
// A gate's records: lp_rollout_gate_open (every replica's, at most 64), lp_rollout_step_start
// (the earliest), lp_rollout_gate_closed (the latest), of each gate a request names in
// gate_records.
enum class GateRecordKind { kOpen, kStart, kClosed };
const char* GateMetric(GateRecordKind kind);
Status ParseGateRecords(std::string_view body, const std::vector<EvidenceRequest>& requests,
                        GateRecordKind kind, OutcomeEvidence* evidence);

}  // namespace hotfix::service
