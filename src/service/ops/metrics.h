// What the live-patching service counts: calls by component and code, call latency, identity
// failures by reason, the store's generation and whether its last reload had errors. The
// interface keeps prometheus-cpp out of the service logic, so tests and builds without a
// metrics listener use the no-op implementation.
//
//   PrometheusMetrics metrics;
//   metrics.RecordCall({"aksNodeController", wire::GrpcCode::kOk, 0.0012, "8d10..."});
//   Status st = metrics.Listen("0.0.0.0:9090");               // GET /metrics
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/log.h"
#include "common/status.h"
#include "service/control/auto_halt_controller.h"
#include "service/control/rollout_status.h"
#include "service/identity/node_identity.h"
#include "service/identity/rate_limiter.h"
#include "service/rollout/auto_halt.h"
#include "service/store/component_store.h"
#include "service/transport/transport_events.h"
#include "wire/grpc_status.h"

namespace hotfix::service {

class TlsServerContext;
class AttestationRoots;
class KeptBytesBudget;

// One finished call, as the metrics see it. Labels must stay bounded: the caller passes a
// component name only when the store knows it (anything else is "unknown"), and the
// subscription only once the identity was verified (else empty).
struct CallSample {
  std::string_view method = "GetComponentConfig";  // the RPC's name
  std::string_view component;
  wire::GrpcCode code = wire::GrpcCode::kOk;
  double seconds = 0;
  std::string_view subscription_id;
};

class Metrics {
 public:
  virtual ~Metrics() = default;
  virtual void RecordCall(const CallSample& sample) = 0;
  virtual void RecordIdentityFailure(IdentityFailure reason) = 0;
  // One counted node report (ReportHotfixOutcome): `rollout` is one it was attributed to, or
  // "" when it was attributed to none. Both names are bounded by the store (the component
  // known, the rollout in its file).
  virtual void RecordOutcome(std::string_view component, std::string_view rollout,
                             ReportedOutcome outcome) = 0;
  // After every store (re)load attempt, initial load included.
  virtual void RecordReload(const ReloadReport& report) = 0;
  // Connections and the limits peers ran into (kAccepted and kClosed also move the
  // open-connections gauge). Called from the event loops.
  virtual void RecordTransportEvent(TransportEvent event) = 0;
};

// Discards everything.
std::unique_ptr<Metrics> NewNoopMetrics();

struct PrometheusMetricsOptions {
  // Distinct subscription label values kept; later subscriptions are counted as "other", so a
  // fleet without an allow-list cannot blow up the series count.
  size_t max_subscription_labels = 256;
  // lp_build_info{version,revision} 1: which build a replica runs.
  std::string version = "dev";
  std::string revision = "unknown";
};

// The names, for docs/SERVICE.md and the tests.
inline constexpr char kMetricBuildInfo[] = "lp_build_info";
inline constexpr char kMetricAttestationRootsExpiry[] =
    "lp_attestation_roots_expiry_timestamp_seconds";
inline constexpr char kMetricAttestationRootsReloadSuccessful[] =
    "lp_attestation_roots_last_reload_successful";
inline constexpr char kMetricTlsCertificateExpiry[] = "lp_tls_certificate_expiry_timestamp_seconds";
inline constexpr char kMetricComponentFileInfo[] = "lp_component_file_info";
inline constexpr char kMetricRequests[] = "lp_requests_total";
inline constexpr char kMetricRequestsBySubscription[] = "lp_requests_by_subscription_total";
inline constexpr char kMetricLatency[] = "lp_request_duration_seconds";
inline constexpr char kMetricIdentityFailures[] = "lp_identity_failures_total";
inline constexpr char kMetricStoreGeneration[] = "lp_store_generation";
inline constexpr char kMetricStoreLastReloadSuccessful[] = "lp_store_last_reload_successful";
inline constexpr char kMetricStoreRejectedFiles[] = "lp_store_rejected_files";
inline constexpr char kMetricStoreReloads[] = "lp_store_reloads_total";
inline constexpr char kMetricTransportEvents[] = "lp_transport_events_total";
inline constexpr char kMetricOpenConnections[] = "lp_open_connections";
inline constexpr char kMetricMaxConnections[] = "lp_max_connections";
inline constexpr char kMetricMemoryLimit[] = "lp_memory_limit_bytes";
inline constexpr char kMetricRolloutApplied[] = "lp_rollout_applied_total";
inline constexpr char kMetricRolloutRatio[] = "lp_rollout_ratio";
inline constexpr char kMetricRolloutOutcomes[] = "lp_rollout_outcomes_total";
inline constexpr char kMetricRolloutAutoHalted[] = "lp_rollout_auto_halted";
inline constexpr char kMetricRolloutAutoHaltSignal[] = "lp_rollout_auto_halt_signal_ok";
inline constexpr char kMetricAutoHaltEvaluations[] = "lp_auto_halt_evaluations_total";
inline constexpr char kMetricAutoHaltSeconds[] = "lp_auto_halt_evaluation_seconds_total";
inline constexpr char kMetricIdentityVerifications[] = "lp_identity_verifications_total";
inline constexpr char kMetricIdentityCacheHits[] = "lp_identity_cache_hits_total";
inline constexpr char kMetricIdentityCacheEvictions[] = "lp_identity_cache_evictions_total";
inline constexpr char kMetricIdentityCacheEntries[] = "lp_identity_cache_entries";
inline constexpr char kMetricSignerCacheHits[] = "lp_signer_cache_hits_total";
inline constexpr char kMetricRefusalCacheHits[] = "lp_identity_refusal_cache_hits_total";
inline constexpr char kMetricSignerCacheEntries[] = "lp_signer_cache_entries";
inline constexpr char kMetricSignerRefusalCacheHits[] = "lp_signer_refusal_cache_hits_total";
inline constexpr char kMetricRateLimiterTrackedNodes[] = "lp_rate_limiter_tracked_nodes";
inline constexpr char kMetricLogLinesDropped[] = "lp_log_lines_dropped_total";
inline constexpr char kMetricKeptRequestBytes[] = "lp_kept_request_bytes";
inline constexpr char kMetricKeptRequestBytesBudget[] = "lp_kept_request_bytes_budget";

// What the metrics read when scraped rather than being told per call. Each is borrowed, may be
// null, and must outlive the metrics' HTTP server (PrometheusMetrics::StopListening).
struct ScrapedSources {
  const ComponentStore* store = nullptr;          // lp_component_file_info
  const TlsServerContext* tls = nullptr;          // lp_tls_certificate_expiry_timestamp_seconds
  const RolloutStatus* rollouts = nullptr;        // lp_rollout_*, and GET /rollouts
  const Authenticator* authenticator = nullptr;   // lp_identity_cache_*, lp_signer_cache_*
  const RateLimiter* rate_limiter = nullptr;      // lp_rate_limiter_tracked_nodes
  const AutoHaltController* auto_halt = nullptr;  // lp_auto_halt_*
  // lp_attestation_roots_expiry_timestamp_seconds, lp_attestation_roots_last_reload_successful
  const AttestationRoots* attestation_roots = nullptr;
  const Logger* log = nullptr;                  // lp_log_lines_dropped_total
  const KeptBytesBudget* kept_bytes = nullptr;  // lp_kept_request_bytes{,_budget}
};

class PrometheusMetrics : public Metrics {
 public:
  // Counts from now on; nothing is served until Listen().
  explicit PrometheusMetrics(PrometheusMetricsOptions options = {});
  ~PrometheusMetrics() override;

  // Serves the text format over HTTP at /metrics on listen ("ADDR:PORT"; port 0 picks one),
  // with the families of `sources` computed at each scrape, and the rollouts' JSON at
  // /rollouts when sources.rollouts is set. Fails
  // (instead of throwing, as civetweb's C++ API does) when the address cannot be bound. Call
  // it last at start-up: stopping the HTTP server (civetweb) can take up to 2 s.
  Status Listen(const std::string& listen, ScrapedSources sources = {});
  // lp_max_connections, and lp_memory_limit_bytes when memory_limit > 0: the connection cap
  // and the limit it derives from (memory_budget.h), once the listeners exist.
  void SetConnectionLimits(size_t max_connections, uint64_t memory_limit);
  // Stops the HTTP server (blocks until its threads are done). Idempotent.
  void StopListening();
  // The port /metrics is served on; 0 before Listen().
  uint16_t port() const;

  void RecordCall(const CallSample& sample) override;
  void RecordIdentityFailure(IdentityFailure reason) override;
  void RecordOutcome(std::string_view component, std::string_view rollout,
                     ReportedOutcome outcome) override;
  void RecordReload(const ReloadReport& report) override;
  void RecordTransportEvent(TransportEvent event) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hotfix::service
