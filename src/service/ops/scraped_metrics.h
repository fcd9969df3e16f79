// The metric families read when Prometheus scrapes rather than counted per call: the process,
// the certificates' expiry, the files served, the rollouts' percents (they move with the
// clock), the caches and the rate limiter's own counts, the kept-bytes budget.
#pragma once

#include <vector>

#include "common/log.h"
#include "service/control/auto_halt_controller.h"
#include "service/control/rollout_status.h"
#include "service/identity/node_identity.h"
#include "service/identity/rate_limiter.h"
#include "service/store/component_store.h"

namespace prometheus {
struct MetricFamily;
}  // namespace prometheus

namespace hotfix::service {

class TlsServerContext;
class AttestationRoots;
class MemoryPool;
class SubscriptionAllowList;

// What the metrics read when scraped rather than being told per call. Each is borrowed, may be
// null, and must outlive the metrics' HTTP server (PrometheusMetrics::StopListening).
struct ScrapedSources {
  const ComponentStore* store = nullptr;          // lp_component_file_info
  const TlsServerContext* tls = nullptr;          // lp_tls_*
  const RolloutStatus* rollouts = nullptr;        // lp_rollout_*, and GET /rollouts
  const Authenticator* authenticator = nullptr;   // lp_identity_cache_*, lp_signer_cache_*
  const RateLimiter* rate_limiter = nullptr;      // lp_rate_limiter_tracked_nodes
  const AutoHaltController* auto_halt = nullptr;  // lp_auto_halt_*
  // lp_attestation_roots_expiry_timestamp_seconds, lp_attestation_roots_last_reload_successful
  const AttestationRoots* attestation_roots = nullptr;
  const Logger* log = nullptr;              // lp_log_lines_dropped_total
  const MemoryPool* memory_pool = nullptr;  // lp_connection_memory_{bytes,pool_bytes,addresses}
  // lp_allowed_subscriptions, lp_allowed_subscriptions_last_reload_successful
  const SubscriptionAllowList* allowed_subscriptions = nullptr;
};

// The families of `sources` now, with Prometheus' standard process_* families first (the
// caller includes <prometheus/metric_family.h>).
std::vector<prometheus::MetricFamily> CollectScraped(const ScrapedSources& sources);

}  // namespace hotfix::service
