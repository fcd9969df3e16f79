// The live-patching-service process minus its flags: checks its inputs, loads the component
// store, and serves GetComponentConfig over TLS (h2, picked from the node's
// ["aks-live-patching","h2"]) on our own HTTP/2 server (grpc_server.h, on nghttp2) with
// grpc.health.v1.Health/Check, Prometheus metrics on their own port, and a plaintext health
// port for kubelet's gRPC probes (which cannot speak TLS).
//
//   ServerConfig config;  config.listen = "0.0.0.0:8443";  ...
//   auto server = Server::Start(std::move(config), &log);   // refuses with a clear Status
//   ... SIGHUP: (*server)->ReloadStore();  SIGTERM: (*server)->Drain();
//
// Lifecycle. Health is NOT_SERVING until the store holds a snapshot, and while the listener
// cannot accept for lack of file descriptors. The TLS certificate and key (or the folder of
// pairs) are re-read when their files change (checked every tls_refresh); new handshakes get
// the new pairs, a broken pair is ignored and the old one kept. Drain() turns health
// NOT_SERVING, closes the listeners, sends GOAWAY, lets open calls finish within
// shutdown_grace and cuts off the rest.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "service/transport/h2_session.h"

namespace hotfix::service {

struct ServerConfig {
  // What the binary was built as (lp_build_info, the start-up line).
  std::string version = "dev";
  std::string revision = "unknown";
  std::string listen;  // "ADDR:PORT"; port 0 picks one (see Server::port())
  // One pair for every client (one cluster: its apiserver FQDN, issued by its CA), or
  // tls_cert_dir: a folder of pairs, each handshake given the one for the server name it sent
  // (many clusters; transport/tls_server_context.h). Exactly one of the two shapes.
  std::string tls_cert_path;
  std::string tls_key_path;
  std::string tls_cert_dir;
  std::chrono::seconds tls_refresh{10};
  std::string components_dir;
  std::string attestation_roots_path;    // one of the two, unless insecure_accept_any_token
  std::string attestation_issuers_path;  // trusted as anchors themselves (partial chain)
  std::string attestation_signer_name = "metadata.azure.com";
  std::chrono::seconds max_token_age{600};         // 0: no limit (AttestedDocumentOptions)
  std::vector<std::string> allowed_subscriptions;  // empty: every verified subscription
  // Or from this file, read again when it changes (subscription_allow_list.h); not both.
  std::string allowed_subscriptions_file;
  std::vector<std::string> allowed_authorities;  // cluster patterns; empty: any :authority
  double rate_limit_per_node = 0;                // requests per second; 0: unlimited
  std::string metrics_listen;                    // empty: no metrics endpoint
  // The Prometheus that scrapes every replica: the automatic halt's evidence. Empty: every
  // rollout with auto_halt is held, applied to no new node (docs/ROLLOUTS.md).
  std::string prometheus_url;
  // Label matchers added to every query (required with prometheus_url): only the series of
  // this service's own scrape job count as evidence.
  std::string prometheus_selector;
  std::string prometheus_ca;                 // https: the CA to verify Prometheus with
  std::string prometheus_bearer_token_file;  // https: sent as a bearer token, re-read on change
  // How far back a rollout's first read of the evidence looks (docs/ROLLOUTS.md).
  std::chrono::seconds evidence_lookback = std::chrono::hours(24);
  std::chrono::milliseconds auto_halt_interval{30000};
  std::string health_listen;  // empty: no plaintext health port
  // Every connection to `listen` starts with a PROXY protocol v2 header (grpc_server.h).
  bool proxy_protocol = false;
  // With proxy_protocol (required): the proxies' networks, CIDRs; a connection from any other
  // address is closed before its header is read.
  std::vector<std::string> proxy_protocol_from;
  bool insecure_accept_any_token = false;
  std::chrono::milliseconds shutdown_grace{10000};
  int threads = 0;             // event loops; 0: one per core
  size_t max_connections = 0;  // 0: the fd limit less a reserve
  // Bytes the process may use; the connection cap derives from it (memory_budget.h). 0: the
  // cgroup's limit, if there is one.
  uint64_t memory_limit = 0;
  // Per source address: with proxy_protocol the node's, else (behind a proxy) the proxy's.
  size_t max_connections_per_peer = 512;
  // Answers per connection before GOAWAY (H2Limits::max_calls_per_connection).
  uint32_t max_calls_per_connection = H2Limits{}.max_calls_per_connection;
  // With proxy_protocol: an address refused this many times within refusal_window is shed
  // before TLS for the rest of that window (refused_peers.h). 0: never.
  uint32_t max_refusals_per_peer = 30;
  std::chrono::milliseconds refusal_window{10000};
  // A test hook (hidden flag): hold every answer this long, so a drain has a call in flight.
  std::chrono::milliseconds testing_response_delay{0};
};

// The plaintext health port's connections at most, apart from the TLS port's cap
// (ListenerSpec::own_max_connections): kubelet probes over one connection at a time per probe.
inline constexpr size_t kHealthConnections = 32;

class Server {
 public:
  // Everything is checked before anything listens: a missing or unreadable certificate, key,
  // trust-root bundle or component folder is refused with a Status naming the flag and file.
  static StatusOr<std::unique_ptr<Server>> Start(ServerConfig config, Logger* log);
  ~Server();  // Drain() if still serving
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const;
  uint16_t health_port() const;   // 0 without health_listen
  uint16_t metrics_port() const;  // 0 without metrics_listen

  // Re-reads the component folder now (also done on every change by the store's watcher).
  void ReloadStore();
  // Returns once every listener is closed. Idempotent.
  void Drain();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hotfix::service
