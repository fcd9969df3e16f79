// live-patching-service: the gRPC service nodes reach through the kube-api-proxy's ALPN
// route. A thin main: flags in, Server out, signals to it. See docs/SERVICE.md.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "common/log.h"
#include "service/server.h"

namespace {

struct Flags {
  hotfix::service::ServerConfig config;
  std::string rate_limit;
  int tls_refresh_s = 10;
  int shutdown_grace_s = 10;
  int testing_response_delay_ms = 0;
};

void AddFlags(CLI::App& app, Flags& f) {
  auto& c = f.config;
  app.add_option("--listen", c.listen, "ADDR:PORT for gRPC over TLS (port 0: any free port)")
      ->required();
  app.add_option("--tls-cert", c.tls_cert_path,
                 "PEM certificate chain, leaf first (re-read "
                 "when the file changes)")
      ->required();
  app.add_option("--tls-key", c.tls_key_path, "PEM private key of --tls-cert")->required();
  app.add_option("--components-dir", c.components_dir,
                 "folder of <component>.json files (a ConfigMap volume); reloaded on change")
      ->required();
  auto* roots = app.add_option("--attestation-roots", c.attestation_roots_path,
                               "PEM bundle the IMDS attested-document signer must chain to");
  app.add_option("--attestation-signer-name", c.attestation_signer_name,
                 "DNS name the signer certificate must carry")
      ->capture_default_str();
  app.add_option("--allowed-subscriptions", c.allowed_subscriptions,
                 "comma-separated subscription IDs allowed to call (default: any)")
      ->delimiter(',');
  app.add_option("--rate-limit-per-node", f.rate_limit,
                 "N/s: calls per second per node (vmId), burst of one second (default: none)");
  app.add_option("--metrics-listen", c.metrics_listen, "ADDR:PORT for Prometheus /metrics");
  app.add_option("--health-listen", c.health_listen,
                 "ADDR:PORT for plaintext gRPC health only (kubelet's grpc probe cannot do TLS)");
  auto* insecure = app.add_flag("--insecure-accept-any-token", c.insecure_accept_any_token,
                                "DEVELOPMENT ONLY: accept any non-empty authorization unverified");
  app.add_option("--tls-refresh-seconds", f.tls_refresh_s,
                 "how often the TLS files are checked for changes")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  app.add_option("--threads", c.threads, "event-loop threads (0: one per core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  app.add_option("--max-connections", c.max_connections,
                 "open connections at most, TLS handshakes included; more are closed at once "
                 "(0: the file-descriptor limit less 128)")
      ->capture_default_str();
  app.add_option("--max-connections-per-peer", c.max_connections_per_peer,
                 "open connections at most from one source address (behind a proxy: the "
                 "proxy's); more are closed at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--shutdown-grace-seconds", f.shutdown_grace_s,
                 "on SIGTERM, how long in-flight calls may take before they are cancelled")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600));
  // Hidden from --help: a test hook, not an operator's setting (see docs/SERVICE.md).
  app.add_option("--testing-response-delay-ms", f.testing_response_delay_ms)
      ->check(CLI::Range(0, 600000))
      ->group("");
  // Identity must be verified unless the operator explicitly asked for the insecure mode.
  roots->excludes(insecure);
  insecure->excludes(roots);
}

// Blocked before any thread exists, so every thread inherits the mask and only sigwait sees
// these: no async-signal-safety puzzles in the handlers.
sigset_t BlockControlSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  CLI::App app{
      "live-patching-service: answers akslivepatching.v1.LivePatchingService/GetComponentConfig "
      "for nodes that prove their identity with an IMDS attested document."};
  Flags flags;
  AddFlags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  hotfix::Logger log;
  auto& config = flags.config;
  if (!config.insecure_accept_any_token && config.attestation_roots_path.empty()) {
    log.Error(
        "refusing to start: --attestation-roots is required (or, for development only, "
        "--insecure-accept-any-token)");
    return 2;
  }
  if (!flags.rate_limit.empty()) {
    auto rate = hotfix::service::ParseRatePerSecond(flags.rate_limit);
    if (!rate.ok()) {
      log.Error("refusing to start", {{"error", rate.status()}});
      return 2;
    }
    config.rate_limit_per_node = *rate;
  }
  config.tls_refresh = std::chrono::seconds(flags.tls_refresh_s);
  config.shutdown_grace = std::chrono::seconds(flags.shutdown_grace_s);
  config.testing_response_delay = std::chrono::milliseconds(flags.testing_response_delay_ms);

  sigset_t signals = BlockControlSignals();
  auto server = hotfix::service::Server::Start(std::move(config), &log);
  if (!server.ok()) {
    log.Error("refusing to start", {{"error", server.status()}});
    return 1;
  }
  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      log.Info("SIGHUP: reloading the component store");
      (*server)->ReloadStore();
      continue;
    }
    log.Info("termination signal received", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    (*server)->Drain();
    return 0;
  }
}
