#include "service/metrics.h"

#include <CivetServer.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <exception>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace hotfix::service {
namespace {

class NoopMetrics final : public Metrics {
 public:
  void RecordCall(const CallSample&) override {}
  void RecordIdentityFailure(IdentityFailure) override {}
  void RecordReload(const ReloadReport&) override {}
  void RecordTransportEvent(TransportEvent) override {}
};

// Calls are in-memory lookups plus, on a cache miss, one PKCS#7 verification: sub-millisecond
// to a few milliseconds. The upper buckets catch a starved process.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
  return kBuckets;
}

constexpr IdentityFailure kAllIdentityFailures[] = {
    IdentityFailure::kMissing,     IdentityFailure::kMalformed,  IdentityFailure::kUntrustedSigner,
    IdentityFailure::kWrongSigner, IdentityFailure::kBadContent, IdentityFailure::kExpired,
};

// lp_rollout_* computed when scraped: the percent moves with the clock, not with calls.
class RolloutCollectable final : public prometheus::Collectable {
 public:
  explicit RolloutCollectable(const RolloutStatus* status) : status_(status) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily applied{kMetricRolloutApplied,
                                     "Calls each rollout applied to, since this process started",
                                     prometheus::MetricType::Counter,
                                     {}};
    prometheus::MetricFamily percent{kMetricRolloutPercent,
                                     "Each rollout's percent now (0 when halted or scheduled)",
                                     prometheus::MetricType::Gauge,
                                     {}};
    for (const RolloutStatusRow& row : status_->Rows(RolloutNow())) {
      std::vector<prometheus::ClientMetric::Label> labels = {{"component", row.component},
                                                             {"rollout", row.name}};
      prometheus::ClientMetric a;
      a.label = labels;
      a.counter.value = static_cast<double>(row.applied_calls);
      applied.metric.push_back(std::move(a));
      prometheus::ClientMetric p;
      p.label = std::move(labels);
      p.gauge.value = row.threshold / 100.0;
      percent.metric.push_back(std::move(p));
    }
    return {std::move(applied), std::move(percent)};
  }

 private:
  const RolloutStatus* status_;
};

void Reply(mg_connection* conn, std::string_view content_type, const std::string& body) {
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n",
            static_cast<int>(content_type.size()), content_type.data(), body.size());
  mg_write(conn, body.data(), body.size());
}

// GET /metrics: the registry and the rollout families in the text format.
class MetricsHandler final : public CivetHandler {
 public:
  MetricsHandler(std::shared_ptr<prometheus::Registry> registry,
                 std::shared_ptr<RolloutCollectable> rollouts)
      : registry_(std::move(registry)), rollouts_(std::move(rollouts)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    std::vector<prometheus::MetricFamily> families = registry_->Collect();
    if (rollouts_) {
      for (auto& family : rollouts_->Collect()) families.push_back(std::move(family));
    }
    Reply(conn, "text/plain; version=0.0.4; charset=utf-8",
          prometheus::TextSerializer().Serialize(families));
    return true;
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<RolloutCollectable> rollouts_;
};

// GET /rollouts (docs/ROLLOUTS.md, "Status").
class RolloutsHandler final : public CivetHandler {
 public:
  explicit RolloutsHandler(const RolloutStatus* status) : status_(status) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    Reply(conn, "application/json", status_->Json(RolloutNow()));
    return true;
  }

 private:
  const RolloutStatus* status_;
};

}  // namespace

std::unique_ptr<Metrics> NewNoopMetrics() { return std::make_unique<NoopMetrics>(); }

struct PrometheusMetrics::Impl {
  explicit Impl(size_t max_subscriptions)
      : registry(std::make_shared<prometheus::Registry>()),
        requests(prometheus::BuildCounter()
                     .Name(kMetricRequests)
                     .Help("GetComponentConfig calls by component and gRPC code")
                     .Register(*registry)),
        by_subscription(prometheus::BuildCounter()
                            .Name(kMetricRequestsBySubscription)
                            .Help("Calls by the caller's verified subscription (capped; the "
                                  "rest are \"other\")")
                            .Register(*registry)),
        latency(prometheus::BuildHistogram()
                    .Name(kMetricLatency)
                    .Help("GetComponentConfig handling time in seconds, arrival to status")
                    .Register(*registry)
                    .Add({}, LatencyBuckets())),
        identity_failures(prometheus::BuildCounter()
                              .Name(kMetricIdentityFailures)
                              .Help("Calls refused as UNAUTHENTICATED, by reason")
                              .Register(*registry)),
        generation(prometheus::BuildGauge()
                       .Name(kMetricStoreGeneration)
                       .Help("Generation of the component store snapshot being served "
                             "(0: not loaded)")
                       .Register(*registry)
                       .Add({})),
        last_reload_error(prometheus::BuildGauge()
                              .Name(kMetricStoreLastReloadError)
                              .Help("1 if the last store reload failed or refused a file, else 0")
                              .Register(*registry)
                              .Add({})),
        rejected_files(prometheus::BuildGauge()
                           .Name(kMetricStoreRejectedFiles)
                           .Help("Files the last store reload refused (kept out of the store)")
                           .Register(*registry)
                           .Add({})),
        reloads(prometheus::BuildCounter()
                    .Name(kMetricStoreReloads)
                    .Help("Store reload attempts by result: ok, rejected_files, error")
                    .Register(*registry)),
        transport_events(prometheus::BuildCounter()
                             .Name(kMetricTransportEvents)
                             .Help("Connections accepted and closed, and the limits peers ran "
                                   "into, by event (docs/SERVICE.md, \"Limits\")")
                             .Register(*registry)),
        open_connections(prometheus::BuildGauge()
                             .Name(kMetricOpenConnections)
                             .Help("Connections open now, TLS handshakes included")
                             .Register(*registry)
                             .Add({})),
        max_subscription_labels(max_subscriptions) {
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
  prometheus::Counter& RequestCounter(std::string_view component, wire::GrpcCode code) {
    thread_local std::string key;
    std::string code_name(wire::GrpcCodeUpperName(code));
    key.assign(component).push_back('\0');
    key.append(code_name);
    {
      std::shared_lock lock(cache_mu);
      if (auto it = request_counters.find(key); it != request_counters.end()) return *it->second;
    }
    std::unique_lock lock(cache_mu);
    prometheus::Counter*& counter = request_counters[key];
    if (counter == nullptr) {
      counter = &requests.Add({{"component", std::string(component)}, {"code", code_name}});
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
  prometheus::Histogram& latency;
  prometheus::Family<prometheus::Counter>& identity_failures;
  prometheus::Gauge& generation;
  prometheus::Gauge& last_reload_error;
  prometheus::Gauge& rejected_files;
  prometheus::Family<prometheus::Counter>& reloads;
  prometheus::Family<prometheus::Counter>& transport_events;
  prometheus::Gauge& open_connections;
  prometheus::Counter* transport_event_counters[static_cast<int>(TransportEvent::kCount)] = {};
  size_t max_subscription_labels;
  std::shared_mutex cache_mu;
  // component + '\0' + code name -> its lp_requests_total series
  std::unordered_map<std::string, prometheus::Counter*> request_counters;
  // at most max_subscription_labels entries
  std::unordered_map<std::string, prometheus::Counter*> subscription_counters;
  prometheus::Counter* other_subscriptions = nullptr;
  const RolloutStatus* rollouts = nullptr;
  std::unique_ptr<MetricsHandler> metrics_handler;
  std::unique_ptr<RolloutsHandler> rollouts_handler;
  std::unique_ptr<CivetServer> http;  // last: stops serving before the rest goes
};

PrometheusMetrics::PrometheusMetrics(PrometheusMetricsOptions options)
    : impl_(std::make_unique<Impl>(options.max_subscription_labels)) {}
PrometheusMetrics::~PrometheusMetrics() = default;

Status PrometheusMetrics::Listen(const std::string& listen, const RolloutStatus* rollouts) {
  if (impl_->http) return Status::InvalidArgument("metrics endpoint already listening");
  impl_->rollouts = rollouts;
  impl_->metrics_handler = std::make_unique<MetricsHandler>(
      impl_->registry,
      impl_->rollouts ? std::make_shared<RolloutCollectable>(impl_->rollouts) : nullptr);
  if (impl_->rollouts) impl_->rollouts_handler = std::make_unique<RolloutsHandler>(impl_->rollouts);
  try {
    // As prometheus::Exposer configures civetweb (prometheus-cpp pull/src/exposer.cc).
    impl_->http = std::make_unique<CivetServer>(
        std::vector<std::string>{"listening_ports", listen, "num_threads", "2"});
  } catch (const std::exception& e) {
    return Status::Unavailable("cannot serve metrics on " + listen + ": " + e.what());
  }
  impl_->http->addHandler("/metrics", impl_->metrics_handler.get());
  if (impl_->rollouts_handler) impl_->http->addHandler("/rollouts", impl_->rollouts_handler.get());
  return Status::Ok();
}

void PrometheusMetrics::StopListening() { impl_->http.reset(); }

uint16_t PrometheusMetrics::port() const {
  if (!impl_->http) return 0;
  std::vector<int> ports = impl_->http->getListeningPorts();
  return ports.empty() ? 0 : static_cast<uint16_t>(ports.front());
}

void PrometheusMetrics::RecordCall(const CallSample& sample) {
  impl_->RequestCounter(sample.component, sample.code).Increment();
  impl_->latency.Observe(sample.seconds);
  if (!sample.subscription_id.empty()) {
    impl_->SubscriptionCounter(sample.subscription_id).Increment();
  }
}

void PrometheusMetrics::RecordIdentityFailure(IdentityFailure reason) {
  impl_->identity_failures.Add({{"reason", IdentityFailureName(reason)}}).Increment();
}

void PrometheusMetrics::RecordReload(const ReloadReport& report) {
  impl_->generation.Set(static_cast<double>(report.generation));
  bool failed = !report.error.ok() || !report.rejected.empty();
  impl_->last_reload_error.Set(failed ? 1 : 0);
  impl_->rejected_files.Set(static_cast<double>(report.rejected.size()));
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

}  // namespace hotfix::service
