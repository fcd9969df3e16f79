#include "service/ops/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/labels.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "service/ops/metrics_http.h"

namespace hotfix::service {
namespace {

class NoopMetrics final : public Metrics {
 public:
  void RecordCall(const CallSample&) override {}
  void RecordIdentityFailure(IdentityFailure) override {}
  void RecordOutcome(std::string_view, std::string_view, contract::Outcome) override {}
  void RecordReload(const ReloadReport&) override {}
  void RecordTransportEvent(TransportEvent) override {}
};

prometheus::Family<prometheus::Counter>& Counters(prometheus::Registry& registry, const char* name,
                                                  const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

prometheus::Gauge& Gauge(prometheus::Registry& registry, const char* name, const char* help,
                         const prometheus::Labels& labels = {}) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(labels);
}

constexpr IdentityFailure kAllIdentityFailures[] = {
    IdentityFailure::kMissing,     IdentityFailure::kMalformed,  IdentityFailure::kUntrustedSigner,
    IdentityFailure::kWrongSigner, IdentityFailure::kBadContent, IdentityFailure::kExpired,
};

// Calls are in-memory lookups plus, on a cache miss, one PKCS#7 verification: sub-millisecond
// to a few milliseconds. The upper buckets catch a starved process.
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
}

}  // namespace

std::unique_ptr<Metrics> NewNoopMetrics() { return std::make_unique<NoopMetrics>(); }

struct PrometheusMetrics::Impl {
  explicit Impl(const PrometheusMetricsOptions& options)
      : registry(std::make_shared<prometheus::Registry>()),
        requests(Counters(*registry, kMetricRequests, "Calls by method, component and gRPC code")),
        by_subscription(Counters(*registry, kMetricRequestsBySubscription,
                                 "Calls by the caller's verified subscription (capped; the rest "
                                 "are \"other\")")),
        latency_family(prometheus::BuildHistogram()
                           .Name(kMetricLatency)
                           .Help("Call handling time in seconds, arrival to status, by method")
                           .Register(*registry)),
        // The service's two methods (live_patching_service.cc names no other), made up front
        // so that a dashboard sees both from the start.
        get_latency(latency_family.Add({{"method", "GetComponentConfig"}}, LatencyBuckets())),
        report_latency(latency_family.Add({{"method", "ReportHotfixOutcome"}}, LatencyBuckets())),
        identity_failures(Counters(*registry, kMetricIdentityFailures,
                                   "Calls refused as UNAUTHENTICATED, by reason")),
        generation(
            Gauge(*registry, kMetricStoreGeneration,
                  "Generation of the component store snapshot being served (0: not loaded)")),
        last_reload_successful(
            Gauge(*registry, kMetricStoreLastReloadSuccessful,
                  "1 if the last store reload loaded every file, 0 if it failed or refused one")),
        store_complete(Gauge(*registry, kMetricStoreComplete,
                             "1 once a store load since start refused no file; until then the "
                             "replica's health answers NOT_SERVING")),
        rejected_files(Gauge(*registry, kMetricStoreRejectedFiles,
                             "Files the last store reload refused (kept out of the store)")),
        reloads(Counters(*registry, kMetricStoreReloads,
                         "Store reload attempts by result: ok, rejected_files, error")),
        transport_events(Counters(*registry, kMetricTransportEvents,
                                  "Connections accepted and closed, and the limits peers ran into, "
                                  "by event (docs/SERVICE.md, \"Limits\")")),
        outcomes(Counters(*registry, kMetricRolloutOutcomes,
                          "Nodes' reports (ReportHotfixOutcome) by component, the rollout they "
                          "were attributed to (\"\" for none) and outcome")),
        open_connections(Gauge(*registry, kMetricOpenConnections,
                               "Connections open now, TLS handshakes included")),
        max_subscription_labels(options.max_subscription_labels) {
    Gauge(*registry, kMetricBuildInfo,
          "1, with the version and git revision this replica was built as",
          {{"version", options.version}, {"revision", options.revision}})
        .Set(1);
    for (int i = 0; i < static_cast<int>(TransportEvent::kCount); ++i) {
      transport_event_counters[i] =
          &transport_events.Add({{"event", TransportEventName(static_cast<TransportEvent>(i))}});
    }
    // Zero-valued series from the start, so rate() and alerts see them before the first event.
    for (IdentityFailure f : kAllIdentityFailures) {
      identity_failures.Add({{"reason", IdentityFailureName(f)}});
    }
    for (const char* result : {"ok", "rejected_files", "error"}) reloads.Add({{"result", result}});
  }

  // Family::Add builds a label map, hashes it and takes the family's lock; the series a call
  // can land in are few and never removed, so each is looked up once and its counter kept.
  prometheus::Counter& RequestCounter(std::string_view method, std::string_view component,
                                      wire::GrpcCode code) {
    thread_local std::string key;
    std::string code_name(wire::GrpcCodeUpperName(code));
    key.assign(method).push_back('\0');
    key.append(component).push_back('\0');
    key.append(code_name);
    {
      std::shared_lock lock(cache_mu);
      if (auto it = request_counters.find(key); it != request_counters.end()) return *it->second;
    }
    std::unique_lock lock(cache_mu);
    prometheus::Counter*& counter = request_counters[key];
    if (counter == nullptr) {
      counter = &requests.Add({{"method", std::string(method)},
                               {"component", std::string(component)},
                               {"code", code_name}});
    }
    return *counter;
  }

  // The subscription's own series while under the cap, "other" after.
  prometheus::Counter& SubscriptionCounter(std::string_view subscription) {
    thread_local std::string key;
    key.assign(subscription);
    {
      std::shared_lock lock(cache_mu);
      if (auto it = subscription_counters.find(key); it != subscription_counters.end()) {
        return *it->second;
      }
    }
    std::unique_lock lock(cache_mu);
    if (auto it = subscription_counters.find(key); it != subscription_counters.end()) {
      return *it->second;
    }
    if (subscription_counters.size() >= max_subscription_labels) {
      if (other_subscriptions == nullptr) {
        other_subscriptions = &by_subscription.Add({{"subscription", "other"}});
      }
      return *other_subscriptions;
    }
    prometheus::Counter& counter = by_subscription.Add({{"subscription", key}});
    subscription_counters.emplace(key, &counter);
    return counter;
  }

  std::shared_ptr<prometheus::Registry> registry;
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Counter>& by_subscription;
  prometheus::Family<prometheus::Histogram>& latency_family;
  prometheus::Histogram& get_latency;
  prometheus::Histogram& report_latency;
  prometheus::Family<prometheus::Counter>& identity_failures;
  prometheus::Gauge& generation;
  prometheus::Gauge& last_reload_successful;
  prometheus::Gauge& store_complete;
  prometheus::Gauge& rejected_files;
  prometheus::Family<prometheus::Counter>& reloads;
  prometheus::Family<prometheus::Counter>& transport_events;
  prometheus::Family<prometheus::Counter>& outcomes;
  prometheus::Gauge& open_connections;
  prometheus::Counter* transport_event_counters[static_cast<int>(TransportEvent::kCount)] = {};
  size_t max_subscription_labels;
  std::shared_mutex cache_mu;
  // method + '\0' + component + '\0' + code name -> its lp_requests_total series
  std::unordered_map<std::string, prometheus::Counter*> request_counters;
  // at most max_subscription_labels entries
  std::unordered_map<std::string, prometheus::Counter*> subscription_counters;
  prometheus::Counter* other_subscriptions = nullptr;
  std::unique_ptr<MetricsHttpServer> http;  // last: stops serving before the rest goes
};

PrometheusMetrics::PrometheusMetrics(PrometheusMetricsOptions options)
    : impl_(std::make_unique<Impl>(options)) {}
PrometheusMetrics::~PrometheusMetrics() = default;

Status PrometheusMetrics::Listen(const std::string& listen, ScrapedSources sources) {
  if (impl_->http) return Status::InvalidArgument("metrics endpoint already listening");
  auto text = [registry = impl_->registry, sources] {
    std::vector<prometheus::MetricFamily> families = registry->Collect();
    for (auto& family : CollectScraped(sources)) families.push_back(std::move(family));
    return prometheus::TextSerializer().Serialize(families);
  };
  auto http = MetricsHttpServer::Start(listen, std::move(text), sources.rollouts);
  if (!http.ok()) return http.status();
  impl_->http = std::move(*http);
  return Status::Ok();
}

void PrometheusMetrics::StopListening() { impl_->http.reset(); }

uint16_t PrometheusMetrics::port() const { return impl_->http ? impl_->http->port() : 0; }

void PrometheusMetrics::RecordCall(const CallSample& sample) {
  impl_->RequestCounter(sample.method, sample.component, sample.code).Increment();
  (sample.method == "ReportHotfixOutcome" ? impl_->report_latency : impl_->get_latency)
      .Observe(sample.seconds);
  if (!sample.subscription_id.empty()) {
    impl_->SubscriptionCounter(sample.subscription_id).Increment();
  }
}

void PrometheusMetrics::RecordOutcome(std::string_view component, std::string_view rollout,
                                      contract::Outcome outcome) {
  // Reports are one per node per hotfix: the family's own lookup is cheap enough for them.
  impl_->outcomes
      .Add({{"component", std::string(component)},
            {"rollout", std::string(rollout)},
            {"outcome", contract::OutcomeLabel(outcome)}})
      .Increment();
}

void PrometheusMetrics::RecordIdentityFailure(IdentityFailure reason) {
  impl_->identity_failures.Add({{"reason", IdentityFailureName(reason)}}).Increment();
}

void PrometheusMetrics::RecordReload(const ReloadReport& report) {
  impl_->generation.Set(static_cast<double>(report.generation));
  impl_->last_reload_successful.Set(report.error.ok() && report.rejected.empty() ? 1 : 0);
  impl_->rejected_files.Set(static_cast<double>(report.rejected.size()));
  impl_->store_complete.Set(report.complete ? 1 : 0);
  const char* result = !report.error.ok()        ? "error"
                       : report.rejected.empty() ? "ok"
                                                 : "rejected_files";
  impl_->reloads.Add({{"result", result}}).Increment();
}

void PrometheusMetrics::RecordTransportEvent(TransportEvent event) {
  int index = static_cast<int>(event);
  if (index < 0 || index >= static_cast<int>(TransportEvent::kCount)) return;
  impl_->transport_event_counters[index]->Increment();
  if (event == TransportEvent::kAccepted) impl_->open_connections.Increment();
  if (event == TransportEvent::kClosed) impl_->open_connections.Decrement();
}

void PrometheusMetrics::SetConnectionLimits(size_t max_connections, uint64_t memory_limit) {
  Gauge(*impl_->registry, kMetricMaxConnections,
        "Open connections at most (--max-connections, the memory limit and the fd limit)")
      .Set(static_cast<double>(max_connections));
  if (memory_limit == 0) return;
  Gauge(*impl_->registry, kMetricMemoryLimit,
        "The memory limit the connection cap derives from (--memory-limit or the cgroup's)")
      .Set(static_cast<double>(memory_limit));
}

}  // namespace hotfix::service
