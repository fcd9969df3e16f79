// What the live-patching service counts: calls by component and code, call latency, identity
// failures by reason, the store's generation and whether its last reload had errors. The
// interface keeps prometheus-cpp out of the service logic, so tests and builds without a
// metrics listener use the no-op implementation. Beside it: the names (metric_names.h), the
// families read at each scrape (scraped_metrics.h), and the HTTP listener (metrics_http.h).
//
//   PrometheusMetrics metrics;
//   metrics.RecordCall({"aksNodeController", wire::GrpcCode::kOk, 0.0012, "8d10..."});
//   Status st = metrics.Listen("0.0.0.0:9090");               // GET /metrics
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "contract/live_patching.h"
#include "service/identity/node_identity.h"
#include "service/ops/metric_names.h"
#include "service/ops/scraped_metrics.h"
#include "service/rollout/auto_halt.h"
#include "service/store/component_store.h"
#include "service/transport/transport_events.h"
#include "wire/grpc_status.h"

namespace hotfix::service {

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
                             contract::Outcome outcome) = 0;
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

class PrometheusMetrics : public Metrics {
 public:
  // Counts from now on; nothing is served until Listen().
  explicit PrometheusMetrics(PrometheusMetricsOptions options = {});
  ~PrometheusMetrics() override;

  // Serves the text format over HTTP at /metrics on listen ("ADDR:PORT"; port 0 picks one),
  // with the families of `sources` computed at each scrape, and the rollouts' JSON at /rollouts
  // when sources.rollouts is set (metrics_http.h). Fails when the address cannot be bound.
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
                     contract::Outcome outcome) override;
  void RecordReload(const ReloadReport& report) override;
  void RecordTransportEvent(TransportEvent event) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hotfix::service
