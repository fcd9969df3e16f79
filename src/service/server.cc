#include "service/server.h"

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "common/file_util.h"
#include "common/openssl.h"
#include "service/component_store.h"
#include "service/live_patching_service.h"
#include "service/metrics.h"
#include "service/node_identity.h"
#include "service/rate_limiter.h"

namespace hotfix::service {
namespace {

constexpr size_t kMaxPemBytes = 1 << 20;
// Requests carry one short name; anything bigger is not a node agent.
constexpr int kMaxRequestBytes = 16 * 1024;
// The attested document (a PKCS#7 with its certificate chain, base64) is several KiB; leave
// room up to the authenticator's own 64 KiB token cap so that it, not HPACK, says what is wrong.
constexpr int kMaxMetadataBytes = 80 * 1024;
// Nodes make one call per boot; an idle connection is not worth a slot for long.
constexpr int kMaxConnectionIdleMs = 5 * 60 * 1000;
// gRPC binds with SO_REUSEPORT by default, so a second server on a busy port starts "fine" and
// the kernel splits connections between the two (a stale instance keeps answering with its
// old certificate and store). Every listener here turns it off: a busy port is a refusal.

using ossl::BioPtr;
using ossl::PkeyPtr;
using ossl::X509Ptr;

std::string OpenSslErrors() {
  std::string errors = ossl::DrainErrors();
  return errors.empty() ? "no PEM data" : errors;
}

StatusOr<std::string> ReadFlagFile(const char* flag, const std::string& path) {
  if (path.empty()) return Status::InvalidArgument(std::string(flag) + " is required");
  StatusOr<std::string> text = ReadFileToString(path, kMaxPemBytes);
  if (!text.ok()) return text.status().Annotate(flag);
  return text;
}

// Every certificate in a PEM bundle, in order; none is an error.
StatusOr<std::vector<X509Ptr>> ParseCertificates(const std::string& pem) {
  ERR_clear_error();
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<X509Ptr> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  ERR_clear_error();  // the expected "no start line" at the end of the bundle
  if (certs.empty()) return Status::InvalidArgument("no PEM certificate found");
  return certs;
}

// The TLS pair must be usable now: gRPC's file watcher would otherwise start with no
// certificate and fail every handshake while logging to its own channel only.
Status CheckTlsPair(const ServerConfig& config, std::string* subject) {
  StatusOr<std::string> cert_pem = ReadFlagFile("--tls-cert", config.tls_cert_path);
  if (!cert_pem.ok()) return cert_pem.status();
  StatusOr<std::string> key_pem = ReadFlagFile("--tls-key", config.tls_key_path);
  if (!key_pem.ok()) return key_pem.status();
  StatusOr<std::vector<X509Ptr>> chain = ParseCertificates(*cert_pem);
  if (!chain.ok()) return chain.status().Annotate("--tls-cert " + config.tls_cert_path);
  ERR_clear_error();
  BioPtr bio(BIO_new_mem_buf(key_pem->data(), static_cast<int>(key_pem->size())));
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    return Status::InvalidArgument("--tls-key " + config.tls_key_path +
                                   ": no usable PEM private key: " + OpenSslErrors());
  }
  X509* leaf = chain->front().get();
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("--tls-key " + config.tls_key_path +
                                   " does not match the certificate in --tls-cert " +
                                   config.tls_cert_path);
  }
  char name[512];
  X509_NAME_oneline(X509_get_subject_name(leaf), name, sizeof name);
  *subject = name;
  return Status::Ok();
}

StatusOr<std::unique_ptr<Authenticator>> MakeAuthenticator(const ServerConfig& config,
                                                           Logger* log) {
  if (config.insecure_accept_any_token) {
    // Said at every start, loudly: a development setting must never pass unnoticed.
    log->Warn(
        "INSECURE: --insecure-accept-any-token is set: any non-empty authorization is accepted "
        "and no node identity is verified; never use this outside development");
    return NewInsecureAnyTokenAuthenticator();
  }
  StatusOr<std::string> roots = ReadFlagFile("--attestation-roots", config.attestation_roots_path);
  if (!roots.ok()) return roots.status();
  StatusOr<std::vector<X509Ptr>> parsed = ParseCertificates(*roots);
  if (!parsed.ok())
    return parsed.status().Annotate("--attestation-roots " + config.attestation_roots_path);
  AttestedDocumentOptions options;
  options.trust_roots_pem = std::move(*roots);
  options.signer_name = config.attestation_signer_name;
  auto auth = NewAttestedDocumentAuthenticator(std::move(options));
  if (!auth.ok()) return auth.status().Annotate("--attestation-roots");
  log->Info("verifying attested documents",
            {{"attestation_roots", config.attestation_roots_path},
             {"root_certificates", static_cast<int64_t>(parsed->size())},
             {"signer_name", config.attestation_signer_name}});
  return std::move(*auth);
}

std::shared_ptr<grpc::ServerCredentials> TlsCredentials(const ServerConfig& config) {
  unsigned refresh = static_cast<unsigned>(std::max<int64_t>(1, config.tls_refresh.count()));
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      config.tls_key_path, config.tls_cert_path, refresh);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  return grpc::experimental::TlsServerCredentials(options);
}

// gRPC's own messages, as JSON lines through the service's logger instead of gpr's format.
std::atomic<Logger*> g_grpc_log{nullptr};

void GrpcLogToJson(gpr_log_func_args* args) {
  // Nodes send the apiserver's FQDN as SNI by design (the proxy routes on ALPN, and the
  // certificate is checked against the pinned service name), so gRPC's "No match found for
  // server name" would be logged as an error for every node. Expected: dropped.
  if (std::strstr(args->message, "No match found for server name") != nullptr) return;
  Logger* log = g_grpc_log.load();
  if (log == nullptr) return;
  LogLevel level = args->severity == GPR_LOG_SEVERITY_ERROR  ? LogLevel::kError
                   : args->severity == GPR_LOG_SEVERITY_INFO ? LogLevel::kInfo
                                                             : LogLevel::kDebug;
  log->Log(level, "grpc",
           {{"message", args->message},
            {"source", std::string(args->file) + ":" + std::to_string(args->line)}});
}

// libprotobuf's complaints (a request whose string field is not UTF-8 is one per call) would
// otherwise reach stderr as "[libprotobuf ERROR ...]", the one non-JSON line in the log. They
// describe the peer's bytes, not a fault of ours, so they are warnings at most.
void ProtobufLogToJson(google::protobuf::LogLevel level, const char* file, int line,
                       const std::string& message) {
  Logger* log = g_grpc_log.load();
  if (log == nullptr) return;
  log->Log(level == google::protobuf::LOGLEVEL_INFO ? LogLevel::kInfo : LogLevel::kWarn, "protobuf",
           {{"message", message}, {"source", std::string(file) + ":" + std::to_string(line)}});
}

std::string FormatRate(double rate) {
  if (rate <= 0) return "unlimited";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g/s", rate);
  return buf;
}

}  // namespace

StatusOr<double> ParseRatePerSecond(std::string_view text) {
  std::string_view number = text;
  if (number.size() >= 2 && number.substr(number.size() - 2) == "/s") {
    number.remove_suffix(2);
  }
  double rate = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), rate);
  if (number.empty() || ec != std::errc() || end != number.data() + number.size() || rate < 0 ||
      !(rate < 1e9)) {
    return Status::InvalidArgument("--rate-limit-per-node \"" + std::string(text) +
                                   "\": want N/s with N >= 0, e.g. 5/s or 0.5/s");
  }
  return rate;
}

struct Server::Impl {
  ~Impl();
  void OnReload(const ReloadReport& report);
  void UpdateHealth();
  Status StartStore();
  Status StartGrpc();
  Status StartHealthPort();
  void DrainOnce();

  ServerConfig config;
  Logger* log = nullptr;
  // Declared before everything the store's callback touches, destroyed after it.
  std::mutex mu;
  bool draining = false;  // guarded by mu
  std::atomic<bool> loaded{false};
  std::once_flag drain_once;

  std::unique_ptr<Metrics> metrics;
  PrometheusMetrics* prometheus = nullptr;  // metrics, when --metrics-listen is set
  uint16_t metrics_port = 0;
  std::unique_ptr<Authenticator> authenticator;
  std::unique_ptr<RateLimiter> limiter;
  std::unique_ptr<DirectoryStore> store;
  std::unique_ptr<LivePatchingServiceImpl> service;
  std::unique_ptr<grpc::Server> grpc_server;    // guarded by mu once started
  std::unique_ptr<grpc::Server> health_server;  // guarded by mu once started
  int port = 0;
  int health_port = 0;
};

// Also the clean-up of a Start() that failed half-way: nothing may outlive what it uses.
Server::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(mu);
    draining = true;  // the store's callback leaves the servers alone from here on
  }
  auto now = std::chrono::system_clock::now();
  if (grpc_server) grpc_server->Shutdown(now);  // a no-op once drained
  if (health_server) health_server->Shutdown(now);
  store.reset();  // stops its watcher thread, the only other thread that calls in here
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
  UpdateHealth();
}

// Health follows the store: NOT_SERVING until a snapshot exists, and for good once draining.
void Server::Impl::UpdateHealth() {
  std::lock_guard<std::mutex> lock(mu);
  if (draining) return;
  bool serving = loaded;
  for (grpc::Server* s : {grpc_server.get(), health_server.get()}) {
    if (s == nullptr || s->GetHealthCheckService() == nullptr) continue;
    s->GetHealthCheckService()->SetServingStatus(serving);
    s->GetHealthCheckService()->SetServingStatus(kLivePatchingServiceName, serving);
  }
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

Status Server::Impl::StartGrpc() {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.listen, TlsCredentials(config), &port);
  builder.RegisterService(service.get());
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, kMaxMetadataBytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, kMaxConnectionIdleMs);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return Status::Unavailable("--listen " + config.listen +
                               ": cannot listen there (in use, or not a local address)");
  }
  std::lock_guard<std::mutex> lock(mu);
  grpc_server = std::move(server);
  return Status::Ok();
}

// kubelet's gRPC probe speaks plaintext only: this port serves health (and reflection) and
// nothing else, so the token never travels unencrypted.
Status Server::Impl::StartHealthPort() {
  if (config.health_listen.empty()) return Status::Ok();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.health_listen, grpc::InsecureServerCredentials(), &health_port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || health_port == 0) {
    return Status::Unavailable("--health-listen " + config.health_listen +
                               ": cannot listen there (in use, or not a local address)");
  }
  std::lock_guard<std::mutex> lock(mu);
  health_server = std::move(server);
  return Status::Ok();
}

void Server::Impl::DrainOnce() {
  grpc::Server* main_server;
  grpc::Server* health;
  {
    std::lock_guard<std::mutex> lock(mu);
    draining = true;
    main_server = grpc_server.get();
    health = health_server.get();
  }
  log->Info("draining: health NOT_SERVING, no new calls, in-flight calls may finish",
            {{"grace_ms", static_cast<int64_t>(config.shutdown_grace.count())}});
  for (grpc::Server* s : {main_server, health}) {
    if (s != nullptr && s->GetHealthCheckService() != nullptr) {
      s->GetHealthCheckService()->Shutdown();  // NOT_SERVING for every service, for good
    }
  }
  if (main_server != nullptr) {
    main_server->Shutdown(std::chrono::system_clock::now() + config.shutdown_grace);
    main_server->Wait();
  }
  if (health != nullptr) {
    health->Shutdown(std::chrono::system_clock::now());
    health->Wait();
  }
  log->Info("drained: every listener closed");
}

StatusOr<std::unique_ptr<Server>> Server::Start(ServerConfig config, Logger* log) {
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  impl->log = log;
  const ServerConfig& c = impl->config;
  if (c.listen.empty()) return Status::InvalidArgument("--listen is required");
  if (c.components_dir.empty()) return Status::InvalidArgument("--components-dir is required");

  std::string subject;
  if (Status st = CheckTlsPair(c, &subject); !st.ok()) return st;
  auto authenticator = MakeAuthenticator(c, log);
  if (!authenticator.ok()) return authenticator.status();
  impl->authenticator = std::move(*authenticator);
  if (c.metrics_listen.empty()) {
    impl->metrics = NewNoopMetrics();
  } else {
    auto metrics = std::make_unique<PrometheusMetrics>();
    impl->prometheus = metrics.get();
    impl->metrics = std::move(metrics);
  }
  if (c.rate_limit_per_node > 0) impl->limiter = NewTokenBucketLimiter(c.rate_limit_per_node);
  if (Status st = impl->StartStore(); !st.ok()) return st;

  LivePatchingServiceOptions options;
  options.authenticator = impl->authenticator.get();
  options.store = impl->store.get();
  options.rate_limiter = impl->limiter.get();
  options.metrics = impl->metrics.get();
  options.access_log = log;
  options.allowed_subscriptions = c.allowed_subscriptions;
  options.testing_response_delay = c.testing_response_delay;
  if (c.testing_response_delay.count() > 0) {
    log->Warn(
        "TESTING: every answer is delayed (--testing-response-delay-ms); never use this "
        "in production",
        {{"delay_ms", static_cast<int64_t>(c.testing_response_delay.count())}});
  }
  impl->service = std::make_unique<LivePatchingServiceImpl>(std::move(options));

  // Process-wide switches, read by every ServerBuilder made after them.
  g_grpc_log = log;
  gpr_set_log_function(GrpcLogToJson);
  google::protobuf::SetLogHandler(ProtobufLogToJson);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  if (Status st = impl->StartGrpc(); !st.ok()) return st;
  if (Status st = impl->StartHealthPort(); !st.ok()) return st;
  if (impl->prometheus != nullptr) {
    if (Status st = impl->prometheus->Listen(c.metrics_listen); !st.ok()) {
      return st.Annotate("--metrics-listen");
    }
    impl->metrics_port = impl->prometheus->port();
  }
  // A fresh health service says SERVING; correct it before anyone has had reason to ask.
  impl->UpdateHealth();

  std::string allowed;
  for (const auto& s : c.allowed_subscriptions) allowed += (allowed.empty() ? "" : ",") + s;
  log->Info("live-patching-service serving",
            {{"listen", c.listen},
             {"port", impl->port},
             {"health_port", impl->health_port},
             {"metrics_port", static_cast<int>(impl->metrics_port)},
             {"tls_subject", subject},
             {"components_dir", c.components_dir},
             {"store_loaded", impl->loaded.load()},
             {"identity", c.insecure_accept_any_token ? "INSECURE-any-token" : "attested"},
             {"allowed_subscriptions", allowed.empty() ? "any" : allowed},
             {"rate_limit_per_node", FormatRate(c.rate_limit_per_node)}});
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  Drain();
  g_grpc_log = nullptr;  // gRPC may still log while it tears down; the logger may be gone
}

uint16_t Server::port() const { return static_cast<uint16_t>(impl_->port); }
uint16_t Server::health_port() const { return static_cast<uint16_t>(impl_->health_port); }
uint16_t Server::metrics_port() const { return impl_->metrics_port; }

void Server::ReloadStore() { impl_->store->Reload(); }

void Server::Drain() {
  std::call_once(impl_->drain_once, [this] { impl_->DrainOnce(); });
}

}  // namespace hotfix::service
