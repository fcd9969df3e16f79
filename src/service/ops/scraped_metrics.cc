#include "service/ops/scraped_metrics.h"

#include <prometheus/metric_family.h>

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <tuple>

#include "service/identity/attestation_roots.h"
#include "service/identity/subscription_allow_list.h"
#include "service/ops/metric_names.h"
#include "service/transport/connection_memory.h"
#include "service/transport/tls_server_context.h"

namespace hotfix::service {
namespace {

prometheus::MetricFamily Family(const char* name, const char* help, prometheus::MetricType type) {
  return prometheus::MetricFamily{name, help, type, {}};
}

void AddValue(prometheus::MetricFamily* family, double value,
              std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  (family->type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value) = value;
  family->metric.push_back(std::move(m));
}

// A family of one unlabelled value.
void AddSingle(std::vector<prometheus::MetricFamily>* out, const char* name, const char* help,
               prometheus::MetricType type, double value) {
  auto family = Family(name, help, type);
  AddValue(&family, value);
  out->push_back(std::move(family));
}

// What this replica knows of each auto-halting rollout's nodes and halts, for the other
// replicas (and itself, restarted) to read back (docs/ROLLOUTS.md, "Counting nodes"): the
// sketches, since when they run, the halts it knows of; and the counts, for people.
void AddEvidenceFamilies(const AutoHaltController& controller,
                         std::vector<prometheus::MetricFamily>* out) {
  using prometheus::MetricType;
  auto sketch = Family(kMetricRolloutNodeSketch,
                       "The nodes that reported on a rollout since `since`, as a mergeable "
                       "sketch: one value per slot (docs/ROLLOUTS.md)",
                       MetricType::Gauge);
  auto from =
      Family(kMetricRolloutEvidenceFrom,
             "Unix time from which this replica's evidence of the rollout runs", MetricType::Gauge);
  for (const ExportedEvidence& e : controller.evidence()->Exported()) {
    const std::string since = FormatRolloutTime(e.key.since);
    AddValue(&from, static_cast<double>(e.from.time_since_epoch().count()),
             {{"component", e.key.component}, {"rollout", e.key.rollout}, {"since", since}});
    for (const char* name : kNodeSetNames) {
      for (const NodeSketch::Gauge& g : e.sets.Named(name)->Gauges()) {
        AddValue(&sketch, static_cast<double>(g.value),
                 {{"component", e.key.component},
                  {"rollout", e.key.rollout},
                  {"since", since},
                  {"set", name},
                  {"slot", g.slot}});
      }
    }
  }
  auto record = Family(kMetricRolloutHaltRecord,
                       "Unix time an auto-halting rollout was halted by its evidence, under "
                       "the policy labelled: carried by every replica that knows it",
                       MetricType::Gauge);
  auto truncated = Family(kMetricRolloutEvidenceTruncated,
                          "1 when the rollout's evidence starts after its `since`: nodes that "
                          "reported before are not counted",
                          MetricType::Gauge);
  auto nodes = Family(kMetricRolloutNodes,
                      "Distinct nodes (and failed nodes' subscriptions) that reported on the "
                      "rollout since `since`, over every replica, at the last evaluation",
                      MetricType::Gauge);
  for (const auto& [key, st] : controller.States()) {
    const std::string since = FormatRolloutTime(st.since);
    if (st.halted_at) {
      AddValue(&record, static_cast<double>(st.halted_at->time_since_epoch().count()),
               {{"component", key.component},
                {"rollout", key.rollout},
                {"since", since},
                {"policy", PolicyLabel(st.policy)}});
    }
    if (!st.evaluated_at) continue;
    AddValue(&truncated, st.truncated ? 1 : 0,
             {{"component", key.component}, {"rollout", key.rollout}});
    const std::pair<const char*, uint64_t> counts[] = {
        {"reporting", st.tally.reports},
        {"failed", st.tally.failures},
        {"failed_subscriptions", st.tally.failed_subscriptions}};
    for (const auto& [set, count] : counts) {
      AddValue(&nodes, static_cast<double>(count),
               {{"component", key.component}, {"rollout", key.rollout}, {"set", set}});
    }
  }
  auto open = Family(kMetricRolloutGateOpen,
                     "Unix time a gated step's evidence first satisfied its gate, as the earliest "
                     "replica saw it (labels: the step's index and GateLabel)",
                     MetricType::Gauge);
  auto start = Family(kMetricRolloutStepStart,
                      "Unix time a gated step started on its evidence: max(at, open + bake)",
                      MetricType::Gauge);
  auto closed = Family(kMetricRolloutGateClosed,
                       "Unix time a gated step's evidence last failed its gate after it had "
                       "opened, as the latest replica saw it: its bake restarts",
                       MetricType::Gauge);
  for (const auto& [key, gates] : controller.Gates()) {
    for (const GateState& g : gates.gates) {
      std::vector<prometheus::ClientMetric::Label> labels = {{"component", key.component},
                                                             {"rollout", key.rollout},
                                                             {"step", std::to_string(g.step)},
                                                             {"gate", g.label}};
      if (g.open_at) {
        AddValue(&open, static_cast<double>(g.open_at->time_since_epoch().count()), labels);
      }
      if (g.started_at) {
        AddValue(&start, static_cast<double>(g.started_at->time_since_epoch().count()), labels);
      }
      if (g.closed_at) {
        AddValue(&closed, static_cast<double>(g.closed_at->time_since_epoch().count()), labels);
      }
    }
  }
  for (auto* family : {&sketch, &from, &record, &truncated, &nodes, &open, &start, &closed}) {
    out->push_back(std::move(*family));
  }
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
  for (const auto& [name, help, type, value] : values) AddSingle(out, name, help, type, value);
}

}  // namespace

std::vector<prometheus::MetricFamily> CollectScraped(const ScrapedSources& sources) {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  AddProcessFamilies(&out);
  if (const TlsServerContext* tls = sources.tls) {
    // Absent while an emptied --tls-cert-dir serves no pair: nothing expires (every
    // handshake is refused, and counted as unknown_server_name).
    if (tls->certificates() > 0) {
      AddSingle(&out, kMetricTlsCertificateExpiry,
                "When the serving certificate in use (--tls-cert's leaf; with --tls-cert-dir the "
                "first of its pairs to expire) expires, Unix seconds",
                MetricType::Gauge, static_cast<double>(tls->not_after()));
    }
    AddSingle(&out, kMetricTlsCertificates, "Certificate pairs served now (1 with --tls-cert)",
              MetricType::Gauge, static_cast<double>(tls->certificates()));
    AddSingle(&out, kMetricTlsRejectedCertificates,
              "Certificate pairs refused as their files are now, kept out or still serving "
              "their previous version",
              MetricType::Gauge, static_cast<double>(tls->rejected_certificates()));
    AddSingle(&out, kMetricTlsReloadSuccessful,
              "0 while a certificate pair does not load or --tls-cert-dir cannot be read (the "
              "previous pairs still serve), 1 otherwise",
              MetricType::Gauge, tls->last_reload_successful() ? 1 : 0);
    // One series per --tls-cert-dir pair (none with --tls-cert): bounded by the folder's cap
    // (certificate_folder.h), named by the operator's folders, never by a peer.
    auto expiries =
        Family(kMetricTlsPairExpiry, "When each --tls-cert-dir pair's leaf expires, Unix seconds",
               MetricType::Gauge);
    for (const auto& [pair, not_after] : tls->PairExpiries()) {
      AddValue(&expiries, static_cast<double>(not_after), {{"pair", pair}});
    }
    out.push_back(std::move(expiries));
  }
  if (sources.attestation_roots != nullptr) {
    AddSingle(&out, kMetricAttestationRootsExpiry,
              "When the first --attestation-roots certificate in use expires, Unix seconds",
              MetricType::Gauge, static_cast<double>(sources.attestation_roots->not_after()));
    AddSingle(&out, kMetricAttestationRootsReloadSuccessful,
              "0 after a changed --attestation-roots file failed to load (the "
              "previous roots still verify), 1 otherwise",
              MetricType::Gauge, sources.attestation_roots->last_reload_successful() ? 1 : 0);
  }
  if (sources.store != nullptr) {
    auto files = Family(kMetricComponentFileInfo,
                        "1 per component served, with the first 12 hex digits of the SHA-256 "
                        "of its file as loaded",
                        MetricType::Gauge);
    if (std::shared_ptr<const StoreSnapshot> snapshot = sources.store->Current()) {
      for (const auto& [component, config] : snapshot->components) {
        AddValue(&files, 1, {{"component", component}, {"sha256", config->digest}});
      }
    }
    out.push_back(std::move(files));
  }
  if (sources.rollouts != nullptr) {
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
    // From the file, so that a halt that disappears without a resume can be seen
    // (alert LivePatchingRolloutUnhalted).
    auto file_halted =
        Family(kMetricRolloutHalted, "1 while the component file says the rollout is halted",
               MetricType::Gauge);
    auto resumed = Family(kMetricRolloutResumedAt,
                          "When `rollout resume` last resumed the rollout (its resume_note.at), "
                          "Unix seconds",
                          MetricType::Gauge);
    auto signal = Family(kMetricRolloutAutoHaltSignal,
                         "1 while an auto-halting rollout's evidence (Prometheus) was read at "
                         "the last evaluation; 0 while it is held for want of it",
                         MetricType::Gauge);
    for (const RolloutStatusRow& row : sources.rollouts->Rows(RolloutNow())) {
      std::vector<prometheus::ClientMetric::Label> labels = {{"component", row.component},
                                                             {"rollout", row.name}};
      AddValue(&applied, static_cast<double>(row.applied_calls), labels);
      AddValue(&file_halted, row.halted ? 1 : 0, labels);
      if (row.resume_note) {
        AddValue(&resumed, static_cast<double>(row.resume_note->at.time_since_epoch().count()),
                 labels);
      }
      if (row.auto_halt) {
        AddValue(&halted, row.state == RolloutState::kAutoHalted ? 1 : 0, labels);
        AddValue(&signal, row.auto_halt_state && row.auto_halt_state->signal_ok ? 1 : 0, labels);
      }
      AddValue(&percent, row.threshold / 10000.0, std::move(labels));
    }
    out.push_back(std::move(applied));
    out.push_back(std::move(percent));
    out.push_back(std::move(halted));
    out.push_back(std::move(file_halted));
    out.push_back(std::move(resumed));
    out.push_back(std::move(signal));
  }
  if (sources.authenticator != nullptr) {
    const AuthenticatorStats s = sources.authenticator->stats();
    const std::tuple<const char*, const char*, uint64_t> counters[] = {
        {kMetricIdentityVerifications, "Attested documents fully verified (identity-cache misses)",
         s.verifications},
        {kMetricIdentityCacheHits, "Calls answered from the identity cache", s.cache_hits},
        {kMetricIdentityCacheEvictions,
         "Identity-cache entries dropped (expired, then oldest when full)", s.cache_evictions},
        {kMetricSignerCacheHits, "Verifications that reused a kept signer certificate",
         s.signer_cache_hits},
        {kMetricRefusalCacheHits,
         "Refused tokens refused again from the refusal cache, without another check",
         s.refusal_cache_hits},
        {kMetricSignerRefusalCacheHits,
         "Verifications refused for a kept signer certificate whose chain failed, without its "
         "parse and chain",
         s.signer_refusal_cache_hits},
    };
    for (const auto& [name, help, value] : counters) {
      AddSingle(&out, name, help, MetricType::Counter, static_cast<double>(value));
    }
    AddSingle(&out, kMetricIdentityCacheEntries, "Verified documents held now", MetricType::Gauge,
              static_cast<double>(s.cache_entries));
    AddSingle(&out, kMetricSignerCacheEntries, "Signer certificates held now", MetricType::Gauge,
              static_cast<double>(s.signer_cache_entries));
  }
  if (sources.auto_halt != nullptr) {
    const AutoHaltStats s = sources.auto_halt->stats();
    auto evaluations = Family(kMetricAutoHaltEvaluations,
                              "Automatic-halt evaluations by whether the evidence was read "
                              "(ok) or not (unavailable)",
                              MetricType::Counter);
    AddValue(&evaluations, static_cast<double>(s.ok), {{"result", "ok"}});
    AddValue(&evaluations, static_cast<double>(s.unavailable), {{"result", "unavailable"}});
    out.push_back(std::move(evaluations));
    AddSingle(&out, kMetricAutoHaltSeconds,
              "Wall time the automatic-halt evaluations took, reading Prometheus included",
              MetricType::Counter, s.seconds);
    AddEvidenceFamilies(*sources.auto_halt, &out);
  }
  if (sources.rate_limiter != nullptr) {
    AddSingle(&out, kMetricRateLimiterTrackedNodes, "Nodes (vmIds) with a rate-limit bucket now",
              MetricType::Gauge, static_cast<double>(sources.rate_limiter->tracked_keys()));
  }
  if (sources.log != nullptr) {
    AddSingle(&out, kMetricLogLinesDropped,
              "Log lines stderr never got: its reader fell more than the queue "
              "behind (common/log.h)",
              MetricType::Counter, static_cast<double>(sources.log->dropped_lines()));
  }
  if (sources.allowed_subscriptions != nullptr) {
    AddSingle(&out, kMetricAllowedSubscriptions,
              "Subscriptions allowed to call now (0: any verified subscription)", MetricType::Gauge,
              static_cast<double>(sources.allowed_subscriptions->size()));
    AddSingle(&out, kMetricAllowedSubscriptionsReloadSuccessful,
              "0 after a changed --allowed-subscriptions-file failed to load (the list before it "
              "stays), 1 otherwise",
              MetricType::Gauge, sources.allowed_subscriptions->last_reload_successful() ? 1 : 0);
  }
  if (sources.memory_pool != nullptr) {
    AddSingle(&out, kMetricConnectionMemory,
              "Bytes connections hold now beyond their idle baseline: TLS and HTTP/2 state, "
              "unread output, kept request bytes (connection_memory.h)",
              MetricType::Gauge, static_cast<double>(sources.memory_pool->used()));
    AddSingle(&out, kMetricConnectionMemoryPool,
              "Bytes connections may hold at once beyond their baseline; one peer address an "
              "eighth of it. Past it a request is refused or a connection closed",
              MetricType::Gauge, static_cast<double>(sources.memory_pool->limit()));
    AddSingle(&out, kMetricConnectionMemoryAddresses,
              "Peer addresses whose connections hold something beyond their baseline now",
              MetricType::Gauge, static_cast<double>(sources.memory_pool->keys()));
  }
  return out;
}

}  // namespace hotfix::service
