#include "service/server.h"

#include <atomic>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "service/control/auto_halt_controller.h"
#include "service/health.h"
#include "service/identity/attestation_roots.h"
#include "service/identity/authenticator_factory.h"
#include "service/identity/node_identity.h"
#include "service/identity/rate_limiter.h"
#include "service/identity/subscription_allow_list.h"
#include "service/live_patching_service.h"
#include "service/ops/metrics.h"
#include "service/ops/prometheus_outcomes.h"
#include "service/ops/transport_event_log.h"
#include "service/protobuf_log.h"
#include "service/recent_reports.h"
#include "service/store/component_store.h"
#include "service/transport/cgroup_limits.h"
#include "service/transport/connection_memory.h"
#include "service/transport/grpc_server.h"
#include "service/transport/memory_budget.h"
#include "service/transport/tls_server_context.h"

namespace hotfix::service {
namespace {

// Repeated reports dropped per replica: a node reports once per boot and result, so an hour
// covers any client retry; as many keys as the memory limit sizes (SizeTables: 100,000, about
// 25 MB, without one) cover a fleet's boot storm.
constexpr std::chrono::hours kRecentReportWindow{1};

}  // namespace

struct Server::Impl {
  ~Impl();
  void OnReload(const ReloadReport& report);
  bool Serving() const;
  void LogHaltChanges();
  Status StartStore();
  Status StartAutoHalt();
  // The memory limit (--memory-limit, else the cgroup's), and memory_limit_from.
  std::optional<uint64_t> ResolveMemoryLimit();
  Status StartGrpc();

  ServerConfig config;
  Logger* log = nullptr;
  std::atomic<bool> draining{false};
  std::atomic<bool> loaded{false};
  std::atomic<bool> complete{false};           // ReloadReport::complete, for Serving()
  std::atomic<bool> warned_incomplete{false};  // the "not ready" line, once
  // Each rollout's file-side halt at the last swap (LogHaltChanges; the store's reload thread).
  std::map<std::pair<std::string, std::string>, bool> halted_rollouts;
  std::once_flag drain_once;
  std::unique_ptr<ProtobufLogToJson> protobuf_log;  // from Start() on

  std::unique_ptr<RolloutStatus> rollout_status;  // read by metrics' HTTP threads
  std::unique_ptr<Metrics> metrics;
  PrometheusMetrics* prometheus = nullptr;  // metrics, when --metrics-listen is set
  uint16_t metrics_port = 0;
  std::unique_ptr<TlsServerContext> tls;
  std::unique_ptr<Authenticator> authenticator;
  AttestationRoots* attestation_roots = nullptr;  // authenticator, when it verifies documents
  std::unique_ptr<SubscriptionAllowList> allowed_subscriptions;
  std::unique_ptr<RateLimiter> limiter;
  std::unique_ptr<DirectoryStore> store;
  std::unique_ptr<OutcomeSource> outcome_source;
  std::unique_ptr<AutoHaltController> auto_halt;  // the store as the nodes' reports judge it
  std::atomic<AutoHaltController*> auto_halt_running{nullptr};  // for the store's watcher
  std::unique_ptr<RecentReports> recent_reports;
  // The nodes that reported, per auto-halting rollout (fed by calls, read by the controller).
  std::unique_ptr<NodeEvidence> node_evidence = std::make_unique<NodeEvidence>();
  std::unique_ptr<LivePatchingServiceImpl> service;
  std::unique_ptr<HealthHandler> health;
  std::unique_ptr<TlsPortHandler> tls_handler;
  std::unique_ptr<TransportEventLog> events;
  // What connections hold beyond their baseline (connection_memory.h); every one charges it.
  std::shared_ptr<MemoryPool> memory_pool;
  std::unique_ptr<GrpcServer> grpc_server;
  std::atomic<GrpcServer*> running{nullptr};  // grpc_server, for the loops' health checks
  uint16_t port = 0;
  uint16_t health_port = 0;
  std::optional<uint64_t> memory_limit;
  TableSizes tables;                       // from memory_limit
  std::optional<ConnectionBudget> budget;  // when there is a memory limit
  const char* memory_limit_from = "none";  // "flag", "cgroup" or "none"
  int threads = 0;                         // event loops
  const char* threads_from = "cpus";       // "flag", "cgroup" (the CPU quota) or "cpus"
};

// Also the clean-up of a Start() that failed half-way: nothing may outlive what it uses.
Server::Impl::~Impl() {
  draining = true;
  if (grpc_server) grpc_server->Drain(std::chrono::milliseconds(0));  // a no-op once drained
  // GET /rollouts reads the store: stop serving HTTP before the store goes.
  if (prometheus != nullptr) prometheus->StopListening();
  auto_halt_running = nullptr;
  if (auto_halt) auto_halt->Stop();  // reads the store
  store.reset();                     // stops its watcher thread
  protobuf_log.reset();
}

void Server::Impl::OnReload(const ReloadReport& report) {
  metrics->RecordReload(report);
  for (const auto& [file, why] : report.rejected) {
    log->Warn("component file refused; the component keeps its last good config",
              {{"file", file}, {"error", why}});
  }
  if (!report.error.ok() && report.generation == 0) {
    log->Error("component store could not be loaded", {{"error", report.error}});
  } else if (!report.error.ok()) {
    log->Error("component store reload failed; still serving the last snapshot",
               {{"error", report.error}, {"generation", static_cast<int64_t>(report.generation)}});
  } else if (report.swapped) {
    log->Info("component store loaded",
              {{"generation", static_cast<int64_t>(report.generation)},
               {"rejected_files", static_cast<int64_t>(report.rejected.size())}});
  }
  if (report.generation > 0) loaded = true;
  if (report.swapped) LogHaltChanges();
  // Ready means serving what the folder says: a replica whose first load refused a file stays
  // NOT_SERVING (so a rolling update stops at it, and the old replicas keep serving) until a
  // load refuses none. A later refused file keeps its last good text, and the replica Ready.
  const bool was_complete = complete.exchange(report.complete);
  if (report.complete && !was_complete && warned_incomplete.load()) {
    log->Info("store complete: every component file loads; health answers SERVING",
              {{"generation", static_cast<int64_t>(report.generation)}});
  } else if (!report.complete && report.error.ok() && !warned_incomplete.exchange(true)) {
    log->Warn(
        "not ready: a component file was refused before any load took every file; "
        "health answers NOT_SERVING until one does",
        {{"rejected_files", static_cast<int64_t>(report.rejected.size())}});
  }

  // A rollout that gained auto_halt is applied to no one until judged: judge it now.
  AutoHaltController* auto_halt_now = auto_halt_running.load();
  if (report.swapped && auto_halt_now != nullptr) auto_halt_now->Wake();
}

// One line per rollout whose file-side halt changed with this snapshot (and, at the first load,
// per halted rollout): who, when and why, from the file's notes (docs/ROLLOUTS.md). The
// replicas' own automatic halts are the controller's to log.
void Server::Impl::LogHaltChanges() {
  std::shared_ptr<const StoreSnapshot> snapshot = store ? store->Current() : nullptr;
  if (!snapshot) return;
  std::map<std::pair<std::string, std::string>, bool> now;
  for (const auto& [component, file] : snapshot->components) {
    for (const Rollout& rollout : file->rollouts) {
      const auto key = std::make_pair(component, rollout.name);
      now[key] = rollout.halted;
      auto before = halted_rollouts.find(key);
      const bool was = before != halted_rollouts.end() && before->second;
      if (rollout.halted == was) continue;
      const std::optional<RolloutNote>& note =
          rollout.halted ? rollout.halt_note : rollout.resume_note;
      const std::string at = note ? FormatRolloutTime(note->at) : "";
      const std::string by = note ? note->by : "";
      const std::string reason = note ? note->reason : "";
      log->Info(
          rollout.halted ? "rollout halted by its file" : "rollout no longer halted by its file",
          {{"component", component},
           {"rollout", rollout.name},
           {"at", at},
           {"by", by},
           {"reason", reason}});
    }
  }
  halted_rollouts = std::move(now);
}

// Health: SERVING once a load of the store took every file (ReloadReport::complete), while
// the listener can accept, and never again once draining.
bool Server::Impl::Serving() const {
  GrpcServer* server = running.load();
  return loaded.load() && complete.load() && !draining.load() &&
         (server == nullptr || server->accepting());
}

Status Server::Impl::StartStore() {
  DirectoryStoreOptions options;
  options.dir = config.components_dir;
  options.log = log;
  options.on_reload = [this](const ReloadReport& report) { OnReload(report); };
  auto started = DirectoryStore::Start(std::move(options));
  if (!started.ok()) return started.status().Annotate("--components-dir " + config.components_dir);
  store = std::move(*started);
  return Status::Ok();
}

Status Server::Impl::StartAutoHalt() {
  if (!config.prometheus_url.empty()) {
    PrometheusOutcomeOptions prometheus_options;
    prometheus_options.client.url = config.prometheus_url;
    prometheus_options.client.ca_file = config.prometheus_ca;
    prometheus_options.client.bearer_token_file = config.prometheus_bearer_token_file;
    prometheus_options.selector = config.prometheus_selector;
    auto source = NewPrometheusOutcomeSource(std::move(prometheus_options));
    if (!source.ok()) return source.status();
    outcome_source = std::move(*source);
  }
  AutoHaltControllerOptions options;
  options.source = outcome_source.get();
  options.evidence = node_evidence.get();
  options.interval = config.auto_halt_interval;
  options.readback_lookback = config.evidence_lookback;
  RolloutStatus* status = rollout_status.get();
  options.served = [status](const RolloutKey& key) { return status->Served(key); };
  options.log = log;
  auto_halt = std::make_unique<AutoHaltController>(store.get(), std::move(options));
  rollout_status->set_auto_halt(auto_halt.get());
  auto_halt->Start();
  auto_halt_running = auto_halt.get();
  return Status::Ok();
}

std::optional<uint64_t> Server::Impl::ResolveMemoryLimit() {
  std::optional<uint64_t> limit;
  if (config.memory_limit > 0) {
    limit = config.memory_limit;
    memory_limit_from = "flag";
  } else if ((limit = CgroupMemoryLimit())) {
    memory_limit_from = "cgroup";
  }
  return limit;
}

Status Server::Impl::StartGrpc() {
  GrpcServerOptions options;
  // The connection cap fits the memory limit (memory_budget.h), measured against what the
  // process holds now, with its store loaded: so it refuses before the kernel kills it.
  options.limits.max_calls_per_connection = config.max_calls_per_connection;
  size_t max_connections = config.max_connections;
  uint64_t pool = kUnlimitedPoolBytes;
  if (memory_limit) {
    StatusOr<ConnectionBudget> b = BudgetConnections(*memory_limit, ResidentBytes(), tables);
    if (!b.ok()) {
      return b.status().Annotate(std::string("the memory limit (from ") + memory_limit_from + ")");
    }
    budget = *b;
    pool = b->pool;
    if (max_connections == 0 || b->max_connections < max_connections) {
      max_connections = b->max_connections;
    }
  }
  memory_pool = std::make_shared<MemoryPool>(pool, pool / kPoolShares);
  options.memory_pool = memory_pool;
  options.connection_allowance = kConnectionAllowanceBytes;
  ListenerSpec tls_listener;
  tls_listener.address = config.listen;
  tls_listener.handler = tls_handler.get();
  tls_listener.flag = "--listen";
  tls_listener.proxy_protocol = config.proxy_protocol;
  options.listeners.push_back(std::move(tls_listener));
  if (config.proxy_protocol) {
    StatusOr<PeerNetworks> from =
        PeerNetworks::Parse(config.proxy_protocol_from, "--proxy-protocol-from");
    if (!from.ok()) {
      return from.status().Annotate(
          "--proxy-protocol believes a header only from the proxies' networks");
    }
    options.listeners.back().proxy_protocol_from = std::move(*from);
  } else if (!config.proxy_protocol_from.empty()) {
    return Status::InvalidArgument("--proxy-protocol-from is for --proxy-protocol");
  }
  if (!config.health_listen.empty()) {
    // kubelet's gRPC probe speaks plaintext only: this port answers health and nothing else,
    // so the token never travels unencrypted.
    // It stays open through a drain, answering NOT_SERVING, until the process exits.
    ListenerSpec health_listener;
    health_listener.address = config.health_listen;
    health_listener.tls = false;
    health_listener.handler = health.get();
    health_listener.flag = "--health-listen";
    health_listener.open_while_draining = true;
    health_listener.own_max_connections = kHealthConnections;
    options.listeners.push_back(std::move(health_listener));
  }
  options.tls = tls.get();
  options.tls_refresh = config.tls_refresh;
  // Files the operator edits while the service runs, read again when they change.
  options.refresh_files = [roots = attestation_roots, allowed = allowed_subscriptions.get(),
                           logger = log] {
    if (roots != nullptr) roots->ReloadIfChanged(logger);
    allowed->ReloadIfChanged(logger);
  };
  options.kept_metadata = {"authorization"};
  // A pod's CPU limit, not the node's cores: loops beyond the quota only add throttled time.
  if (config.threads > 0) {
    threads = config.threads;
    threads_from = "flag";
  } else {
    std::optional<double> cpu_limit = CgroupCpuLimit();
    threads = DefaultThreads(cpu_limit, UsableCpus());
    threads_from = cpu_limit ? "cgroup" : "cpus";
  }
  options.threads = threads;
  options.max_connections = max_connections;
  options.max_connections_per_peer = config.max_connections_per_peer;
  options.refused_peers.max_refusals = config.max_refusals_per_peer;
  options.refused_peers.window = config.refusal_window;
  options.events = events.get();
  options.log = log;
  auto server = GrpcServer::Start(std::move(options));
  if (!server.ok()) return server.status();
  grpc_server = std::move(*server);
  running = grpc_server.get();
  port = grpc_server->port(0);
  if (!config.health_listen.empty()) health_port = grpc_server->port(1);
  return Status::Ok();
}

StatusOr<std::unique_ptr<Server>> Server::Start(ServerConfig config, Logger* log) {
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  impl->log = log;
  const ServerConfig& c = impl->config;
  if (c.listen.empty()) return Status::InvalidArgument("--listen is required");
  if (c.components_dir.empty()) return Status::InvalidArgument("--components-dir is required");

  if (!c.tls_cert_dir.empty() && (!c.tls_cert_path.empty() || !c.tls_key_path.empty())) {
    return Status::InvalidArgument("give --tls-cert-dir or --tls-cert and --tls-key, not both");
  }
  auto tls = c.tls_cert_dir.empty() ? TlsServerContext::Load(c.tls_cert_path, c.tls_key_path)
                                    : TlsServerContext::LoadFolder(c.tls_cert_dir, log);
  if (!tls.ok()) return tls.status();
  impl->tls = std::move(*tls);
  AuthenticatorFlags identity;
  identity.insecure_accept_any_token = c.insecure_accept_any_token;
  identity.roots_path = c.attestation_roots_path;
  identity.issuers_path = c.attestation_issuers_path;
  identity.signer_name = c.attestation_signer_name;
  identity.max_token_age = c.max_token_age;
  impl->memory_limit = impl->ResolveMemoryLimit();
  impl->tables = SizeTables(impl->memory_limit);
  identity.identity_cache_entries = impl->tables.identity_cache_entries;
  auto authenticator = MakeAuthenticator(identity, log);
  if (!authenticator.ok()) return authenticator.status();
  impl->authenticator = std::move(authenticator->authenticator);
  impl->attestation_roots = authenticator->roots;
  if (c.metrics_listen.empty()) {
    impl->metrics = NewNoopMetrics();
  } else {
    auto metrics = std::make_unique<PrometheusMetrics>(
        PrometheusMetricsOptions{.version = c.version, .revision = c.revision});
    impl->prometheus = metrics.get();
    impl->metrics = std::move(metrics);
  }
  if (c.rate_limit_per_node > 0) {
    impl->limiter = NewTokenBucketLimiter(c.rate_limit_per_node, impl->tables.rate_limiter_keys);
  }
  if (!c.allowed_subscriptions_file.empty() && !c.allowed_subscriptions.empty()) {
    return Status::InvalidArgument(
        "give --allowed-subscriptions or --allowed-subscriptions-file, not both");
  }
  if (c.allowed_subscriptions_file.empty()) {
    impl->allowed_subscriptions = SubscriptionAllowList::Fixed(c.allowed_subscriptions);
  } else {
    auto allowed = SubscriptionAllowList::Load(c.allowed_subscriptions_file);
    if (!allowed.ok()) return allowed.status();
    impl->allowed_subscriptions = std::move(*allowed);
  }
  impl->protobuf_log = std::make_unique<ProtobufLogToJson>(log);
  if (Status st = impl->StartStore(); !st.ok()) return st;

  impl->rollout_status = std::make_unique<RolloutStatus>(impl->store.get());
  if (Status st = impl->StartAutoHalt(); !st.ok()) return st;

  LivePatchingServiceOptions options;
  options.authenticator = impl->authenticator.get();
  options.store = impl->auto_halt.get();
  options.rate_limiter = impl->limiter.get();
  options.metrics = impl->metrics.get();
  options.access_log = log;
  options.rollout_status = impl->rollout_status.get();
  impl->recent_reports =
      std::make_unique<RecentReports>(impl->tables.recent_reports, kRecentReportWindow);
  options.recent_reports = impl->recent_reports.get();
  options.node_evidence = impl->node_evidence.get();
  options.allowed_subscriptions = impl->allowed_subscriptions.get();
  options.allowed_authorities = c.allowed_authorities;
  options.testing_response_delay = c.testing_response_delay;
  if (c.testing_response_delay.count() > 0) {
    log->Warn(
        "TESTING: every answer is delayed (--testing-response-delay); never use this "
        "in production",
        {{"delay_ms", static_cast<int64_t>(c.testing_response_delay.count())}});
  }
  impl->service = std::make_unique<LivePatchingServiceImpl>(std::move(options));
  impl->health = std::make_unique<HealthHandler>([raw = impl.get()] { return raw->Serving(); });
  impl->tls_handler = std::make_unique<TlsPortHandler>(impl->health.get(), impl->service.get());
  impl->events = std::make_unique<TransportEventLog>(impl->metrics.get(), log);
  if (Status st = impl->StartGrpc(); !st.ok()) return st;
  if (impl->prometheus != nullptr) {
    impl->prometheus->SetConnectionLimits(impl->grpc_server->max_connections(),
                                          impl->budget ? impl->budget->memory_limit : 0);
    if (Status st = impl->prometheus->Listen(
            c.metrics_listen, {impl->store.get(), impl->tls.get(), impl->rollout_status.get(),
                               impl->authenticator.get(), impl->limiter.get(),
                               impl->auto_halt.get(), impl->attestation_roots, log,
                               impl->memory_pool.get(), impl->allowed_subscriptions.get()});
        !st.ok()) {
      return st;  // it names --metrics-listen
    }
    impl->metrics_port = impl->prometheus->port();
  }

  auto listed = [](const std::vector<std::string>& values) {
    std::string out;
    for (const std::string& v : values) out += (out.empty() ? "" : ",") + v;
    return out.empty() ? std::string("any") : out;
  };
  log->Info("live-patching-service serving",
            {{"version", c.version},
             {"revision", c.revision},
             {"listen", c.listen},
             {"port", static_cast<int>(impl->port)},
             {"health_port", static_cast<int>(impl->health_port)},
             {"metrics_port", static_cast<int>(impl->metrics_port)},
             {"tls_subject", impl->tls->subject()},
             {"tls_certificates", static_cast<int64_t>(impl->tls->certificates())},
             {"tls_selects_by_server_name", impl->tls->selects_by_server_name()},
             {"components_dir", c.components_dir},
             {"store_loaded", impl->loaded.load()},
             {"store_complete", impl->complete.load()},
             {"identity", c.insecure_accept_any_token ? "INSECURE-any-token" : "attested"},
             {"allowed_subscriptions", c.allowed_subscriptions_file.empty()
                                           ? listed(c.allowed_subscriptions)
                                           : std::to_string(impl->allowed_subscriptions->size()) +
                                                 " from " + c.allowed_subscriptions_file},
             {"allowed_authorities", listed(c.allowed_authorities)},
             {"proxy_protocol", c.proxy_protocol},
             {"proxy_protocol_from", c.proxy_protocol ? listed(c.proxy_protocol_from) : "none"},
             {"rate_limit_per_node", FormatRate(c.rate_limit_per_node)},
             {"prometheus_url", c.prometheus_url.empty() ? "none" : c.prometheus_url},
             {"auto_halt_interval_ms", static_cast<int64_t>(c.auto_halt_interval.count())},
             {"threads", static_cast<int64_t>(impl->threads)},
             {"threads_from", impl->threads_from},
             {"max_connections", static_cast<int64_t>(impl->grpc_server->max_connections())},
             {"memory_limit", impl->budget ? FormatByteSize(impl->budget->memory_limit) : "none"},
             {"memory_limit_from", impl->memory_limit_from},
             {"connection_baseline_bytes", static_cast<int64_t>(kConnectionBaselineBytes)},
             {"connection_memory_pool_bytes", static_cast<int64_t>(impl->memory_pool->limit())},
             {"connection_memory_per_address_bytes",
              static_cast<int64_t>(impl->memory_pool->per_key_limit())},
             {"openssl_memory_accounted", OpenSslMemoryAccounted()},
             {"identity_cache_entries", static_cast<int64_t>(impl->tables.identity_cache_entries)},
             {"max_connections_per_peer", static_cast<int64_t>(c.max_connections_per_peer)},
             {"max_refusals_per_peer",
              c.proxy_protocol ? static_cast<int64_t>(c.max_refusals_per_peer) : int64_t{0}},
             {"refusal_window_ms", static_cast<int64_t>(c.refusal_window.count())}});
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Drain(); }

uint16_t Server::port() const { return impl_->port; }
uint16_t Server::health_port() const { return impl_->health_port; }
uint16_t Server::metrics_port() const { return impl_->metrics_port; }

void Server::ReloadStore() { impl_->store->Reload(); }

void Server::Drain() {
  std::call_once(impl_->drain_once, [impl = impl_.get()] {
    impl->draining = true;
    impl->log->Info("draining: health NOT_SERVING, no new calls, in-flight calls may finish",
                    {{"grace_ms", static_cast<int64_t>(impl->config.shutdown_grace.count())}});
    if (impl->grpc_server) impl->grpc_server->Drain(impl->config.shutdown_grace);
    impl->log->Info("drained: every listener closed");
  });
}

}  // namespace hotfix::service
