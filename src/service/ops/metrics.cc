#include "service/ops/metrics.h"

#include <CivetServer.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <exception>
#include <fstream>
#include <iterator>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <string>
#include <unordered_map>

#include "service/identity/attestation_roots.h"
#include "service/transport/kept_bytes_budget.h"
#include "service/transport/tls_server_context.h"

namespace hotfix::service {
namespace {

class NoopMetrics final : public Metrics {
 public:
  void RecordCall(const CallSample&) override {}
  void RecordIdentityFailure(IdentityFailure) override {}
  void RecordOutcome(std::string_view, std::string_view, ReportedOutcome) override {}
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

prometheus::MetricFamily Family(const char* name, const char* help, prometheus::MetricType type) {
  return prometheus::MetricFamily{name, help, type, {}};
}

void AddValue(prometheus::MetricFamily* family, double value,
              std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  if (family->type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  family->metric.push_back(std::move(m));
}

// process_* in Prometheus' standard names (its client libraries' process collector), read
// from /proc at the scrape: prometheus-cpp has no process collector.
void AddProcessFamilies(std::vector<prometheus::MetricFamily>* out) {
  using prometheus::MetricType;
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // Fields after the command, which is in parentheses and may hold spaces: state is field 3.
  std::istringstream fields(stat.substr(std::min(stat.size(), stat.rfind(')') + 2)));
  std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
  auto field = [&](size_t n) { return n - 3 < f.size() ? std::stod(f[n - 3]) : 0.0; };
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  double boot = 0;
  std::ifstream proc_stat("/proc/stat");
  for (std::string key; proc_stat >> key;) {
    if (key == "btime") {
      proc_stat >> boot;
      break;
    }
  }
  size_t fds = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (const dirent* e = readdir(dir)) fds += e->d_name[0] != '.';
    closedir(dir);
    --fds;  // the folder's own descriptor
  }
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  const std::tuple<const char*, const char*, MetricType, double> values[] = {
      {"process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
       MetricType::Counter, (field(14) + field(15)) / ticks},
      {"process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
       field(24) * page},
      {"process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
       field(23)},
      {"process_open_fds", "Number of open file descriptors.", MetricType::Gauge,
       static_cast<double>(fds)},
      {"process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
       static_cast<double>(limit.rlim_cur)},
      {"process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
       MetricType::Gauge, boot + field(22) / ticks},
  };
  for (const auto& [name, help, type, value] : values) {
    auto family = Family(name, help, type);
    AddValue(&family, value);
    out->push_back(std::move(family));
  }
}

// The families read at each scrape: rollout percents move with the clock, and the identity
// cache and rate limiter keep their own counts.
class ScrapedCollectable final : public prometheus::Collectable {
 public:
  explicit ScrapedCollectable(ScrapedSources sources) : sources_(sources) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    using prometheus::MetricType;
    std::vector<prometheus::MetricFamily> out;
    AddProcessFamilies(&out);
    if (sources_.tls != nullptr) {
      auto expiry = Family(kMetricTlsCertificateExpiry,
                           "When the serving certificate in use (--tls-cert's leaf) expires, "
                           "Unix seconds",
                           MetricType::Gauge);
      AddValue(&expiry, static_cast<double>(sources_.tls->not_after()));
      out.push_back(std::move(expiry));
    }
    if (sources_.attestation_roots != nullptr) {
      auto expiry = Family(kMetricAttestationRootsExpiry,
                           "When the first --attestation-roots certificate in use expires, Unix "
                           "seconds",
                           MetricType::Gauge);
      AddValue(&expiry, static_cast<double>(sources_.attestation_roots->not_after()));
      out.push_back(std::move(expiry));
      auto reloaded = Family(kMetricAttestationRootsReloadSuccessful,
                             "0 after a changed --attestation-roots file failed to load (the "
                             "previous roots still verify), 1 otherwise",
                             MetricType::Gauge);
      AddValue(&reloaded, sources_.attestation_roots->last_reload_successful() ? 1 : 0);
      out.push_back(std::move(reloaded));
    }
    if (sources_.store != nullptr) {
      auto files = Family(kMetricComponentFileInfo,
                          "1 per component served, with the first 12 hex digits of the SHA-256 "
                          "of its file as loaded",
                          MetricType::Gauge);
      if (std::shared_ptr<const StoreSnapshot> snapshot = sources_.store->Current()) {
        for (const auto& [component, config] : snapshot->components) {
          AddValue(&files, 1, {{"component", component}, {"sha256", config->digest}});
        }
      }
      out.push_back(std::move(files));
    }
    if (sources_.rollouts != nullptr) {
      auto applied =
          Family(kMetricRolloutApplied, "Calls each rollout applied to, since this process started",
                 MetricType::Counter);
      auto percent =
          Family(kMetricRolloutRatio,
                 "Each rollout's share of its nodes now, 0 to 1 (0 when halted or scheduled)",
                 MetricType::Gauge);
      auto halted = Family(kMetricRolloutAutoHalted,
                           "1 while an auto-halting rollout is halted by its nodes' reports",
                           MetricType::Gauge);
      auto signal = Family(kMetricRolloutAutoHaltSignal,
                           "1 while an auto-halting rollout's evidence (Prometheus) was read at "
                           "the last evaluation; 0 while it is held for want of it",
                           MetricType::Gauge);
      for (const RolloutStatusRow& row : sources_.rollouts->Rows(RolloutNow())) {
        std::vector<prometheus::ClientMetric::Label> labels = {{"component", row.component},
                                                               {"rollout", row.name}};
        AddValue(&applied, static_cast<double>(row.applied_calls), labels);
        if (row.auto_halt) {
          const bool is_halted = row.state == RolloutState::kAutoHalted;
          const bool ok = row.auto_halt_state && row.auto_halt_state->signal_ok;
          AddValue(&halted, is_halted ? 1 : 0, labels);
          AddValue(&signal, ok ? 1 : 0, labels);
        }
        AddValue(&percent, row.threshold / 10000.0, std::move(labels));
      }
      out.push_back(std::move(applied));
      out.push_back(std::move(percent));
      out.push_back(std::move(halted));
      out.push_back(std::move(signal));
    }
    if (sources_.authenticator != nullptr) {
      const AuthenticatorStats s = sources_.authenticator->stats();
      const std::pair<const char*, std::pair<const char*, double>> counters[] = {
          {kMetricIdentityVerifications,
           {"Attested documents fully verified (identity-cache misses)",
            static_cast<double>(s.verifications)}},
          {kMetricIdentityCacheHits,
           {"Calls answered from the identity cache", static_cast<double>(s.cache_hits)}},
          {kMetricIdentityCacheEvictions,
           {"Identity-cache entries dropped (expired, then oldest when full)",
            static_cast<double>(s.cache_evictions)}},
          {kMetricSignerCacheHits,
           {"Verifications that reused a kept signer certificate",
            static_cast<double>(s.signer_cache_hits)}},
          {kMetricRefusalCacheHits,
           {"Refused tokens refused again from the refusal cache, without another check",
            static_cast<double>(s.refusal_cache_hits)}},
          {kMetricSignerRefusalCacheHits,
           {"Verifications refused for a kept signer certificate whose chain failed, without "
            "its parse and chain",
            static_cast<double>(s.signer_refusal_cache_hits)}},
      };
      for (const auto& [name, help_value] : counters) {
        auto family = Family(name, help_value.first, MetricType::Counter);
        AddValue(&family, help_value.second);
        out.push_back(std::move(family));
      }
      auto entries =
          Family(kMetricIdentityCacheEntries, "Verified documents held now", MetricType::Gauge);
      AddValue(&entries, static_cast<double>(s.cache_entries));
      out.push_back(std::move(entries));
      auto signers =
          Family(kMetricSignerCacheEntries, "Signer certificates held now", MetricType::Gauge);
      AddValue(&signers, static_cast<double>(s.signer_cache_entries));
      out.push_back(std::move(signers));
    }
    if (sources_.auto_halt != nullptr) {
      const AutoHaltStats s = sources_.auto_halt->stats();
      auto evaluations = Family(kMetricAutoHaltEvaluations,
                                "Automatic-halt evaluations by whether the evidence was read "
                                "(ok) or not (unavailable)",
                                MetricType::Counter);
      AddValue(&evaluations, static_cast<double>(s.ok), {{"result", "ok"}});
      AddValue(&evaluations, static_cast<double>(s.unavailable), {{"result", "unavailable"}});
      out.push_back(std::move(evaluations));
      auto seconds = Family(kMetricAutoHaltSeconds,
                            "Wall time the automatic-halt evaluations took, reading Prometheus "
                            "included",
                            MetricType::Counter);
      AddValue(&seconds, s.seconds);
      out.push_back(std::move(seconds));
    }
    if (sources_.rate_limiter != nullptr) {
      auto tracked = Family(kMetricRateLimiterTrackedNodes,
                            "Nodes (vmIds) with a rate-limit bucket now", MetricType::Gauge);
      AddValue(&tracked, static_cast<double>(sources_.rate_limiter->tracked_keys()));
      out.push_back(std::move(tracked));
    }
    if (sources_.log != nullptr) {
      auto dropped = Family(kMetricLogLinesDropped,
                            "Log lines stderr never got: its reader fell more than the queue "
                            "behind (common/log.h)",
                            MetricType::Counter);
      AddValue(&dropped, static_cast<double>(sources_.log->dropped_lines()));
      out.push_back(std::move(dropped));
    }
    if (sources_.kept_bytes != nullptr) {
      auto kept = Family(kMetricKeptRequestBytes,
                         "Request bytes streams keep now until they are answered "
                         "(kept_bytes_budget.h)",
                         MetricType::Gauge);
      AddValue(&kept, static_cast<double>(sources_.kept_bytes->used()));
      out.push_back(std::move(kept));
      auto budget = Family(kMetricKeptRequestBytesBudget,
                           "Request bytes streams may keep at once; a stream over it is refused",
                           MetricType::Gauge);
      AddValue(&budget, static_cast<double>(sources_.kept_bytes->limit()));
      out.push_back(std::move(budget));
    }
    return out;
  }

 private:
  ScrapedSources sources_;
};

void Reply(mg_connection* conn, std::string_view content_type, const std::string& body) {
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n",
            static_cast<int>(content_type.size()), content_type.data(), body.size());
  mg_write(conn, body.data(), body.size());
}

// GET /metrics: the registry and the scraped families in the text format.
class MetricsHandler final : public CivetHandler {
 public:
  MetricsHandler(std::shared_ptr<prometheus::Registry> registry, ScrapedSources sources)
      : registry_(std::move(registry)), scraped_(sources) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    std::vector<prometheus::MetricFamily> families = registry_->Collect();
    for (auto& family : scraped_.Collect()) families.push_back(std::move(family));
    Reply(conn, "text/plain; version=0.0.4; charset=utf-8",
          prometheus::TextSerializer().Serialize(families));
    return true;
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  ScrapedCollectable scraped_;
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
  explicit Impl(const PrometheusMetricsOptions& options)
      : registry(std::make_shared<prometheus::Registry>()),
        requests(prometheus::BuildCounter()
                     .Name(kMetricRequests)
                     .Help("Calls by method, component and gRPC code")
                     .Register(*registry)),
        by_subscription(prometheus::BuildCounter()
                            .Name(kMetricRequestsBySubscription)
                            .Help("Calls by the caller's verified subscription (capped; the "
                                  "rest are \"other\")")
                            .Register(*registry)),
        latency(prometheus::BuildHistogram()
                    .Name(kMetricLatency)
                    .Help("Call handling time in seconds, arrival to status")
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
        last_reload_successful(
            prometheus::BuildGauge()
                .Name(kMetricStoreLastReloadSuccessful)
                .Help("1 if the last store reload loaded every file, 0 if it failed or "
                      "refused one")
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
        outcomes(prometheus::BuildCounter()
                     .Name(kMetricRolloutOutcomes)
                     .Help("Nodes' reports (ReportHotfixOutcome) by component, the rollout "
                           "they were attributed to (\"\" for none) and outcome")
                     .Register(*registry)),
        open_connections(prometheus::BuildGauge()
                             .Name(kMetricOpenConnections)
                             .Help("Connections open now, TLS handshakes included")
                             .Register(*registry)
                             .Add({})),
        max_subscription_labels(options.max_subscription_labels) {
    prometheus::BuildGauge()
        .Name(kMetricBuildInfo)
        .Help("1, with the version and git revision this replica was built as")
        .Register(*registry)
        .Add({{"version", options.version}, {"revision", options.revision}})
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
  prometheus::Histogram& latency;
  prometheus::Family<prometheus::Counter>& identity_failures;
  prometheus::Gauge& generation;
  prometheus::Gauge& last_reload_successful;
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
  std::unique_ptr<MetricsHandler> metrics_handler;
  std::unique_ptr<RolloutsHandler> rollouts_handler;
  std::unique_ptr<CivetServer> http;  // last: stops serving before the rest goes
};

PrometheusMetrics::PrometheusMetrics(PrometheusMetricsOptions options)
    : impl_(std::make_unique<Impl>(options)) {}
PrometheusMetrics::~PrometheusMetrics() = default;

Status PrometheusMetrics::Listen(const std::string& listen, ScrapedSources sources) {
  if (impl_->http) return Status::InvalidArgument("metrics endpoint already listening");
  impl_->metrics_handler = std::make_unique<MetricsHandler>(impl_->registry, sources);
  if (sources.rollouts)
    impl_->rollouts_handler = std::make_unique<RolloutsHandler>(sources.rollouts);
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
  impl_->RequestCounter(sample.method, sample.component, sample.code).Increment();
  impl_->latency.Observe(sample.seconds);
  if (!sample.subscription_id.empty()) {
    impl_->SubscriptionCounter(sample.subscription_id).Increment();
  }
}

void PrometheusMetrics::RecordOutcome(std::string_view component, std::string_view rollout,
                                      ReportedOutcome outcome) {
  // Reports are one per node per hotfix: the family's own lookup is cheap enough for them.
  impl_->outcomes
      .Add({{"component", std::string(component)},
            {"rollout", std::string(rollout)},
            {"outcome", ReportedOutcomeName(outcome)}})
      .Increment();
}

void PrometheusMetrics::RecordIdentityFailure(IdentityFailure reason) {
  impl_->identity_failures.Add({{"reason", IdentityFailureName(reason)}}).Increment();
}

void PrometheusMetrics::RecordReload(const ReloadReport& report) {
  impl_->generation.Set(static_cast<double>(report.generation));
  bool failed = !report.error.ok() || !report.rejected.empty();
  impl_->last_reload_successful.Set(failed ? 0 : 1);
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

void PrometheusMetrics::SetConnectionLimits(size_t max_connections, uint64_t memory_limit) {
  prometheus::BuildGauge()
      .Name(kMetricMaxConnections)
      .Help("Open connections at most (--max-connections, the memory limit and the fd limit)")
      .Register(*impl_->registry)
      .Add({})
      .Set(static_cast<double>(max_connections));
  if (memory_limit == 0) return;
  prometheus::BuildGauge()
      .Name(kMetricMemoryLimit)
      .Help("The memory limit the connection cap derives from (--memory-limit or the cgroup's)")
      .Register(*impl_->registry)
      .Add({})
      .Set(static_cast<double>(memory_limit));
}

}  // namespace hotfix::service
