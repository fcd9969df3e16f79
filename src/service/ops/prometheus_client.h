// The service's client of Prometheus' HTTP API (docs/ROLLOUTS.md, "Reading Prometheus"): one GET
// per query, over http:// or over https:// verified against --prometheus-ca for the URL's
// host, with a bearer token read from a file and read again whenever the file changes (the
// shape of a workload-identity sidecar's or Managed Prometheus' token writer). Answers are
// capped (4 MiB by default). Never proxied. The token goes only over TLS and is never logged.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"
#include "wire/tls_dialer.h"
#include "wire/url.h"

namespace hotfix::service {

struct PrometheusClientOptions {
  // http://HOST:PORT[/prefix] or https://HOST[:PORT][/prefix]: where /api/v1 is.
  std::string url;
  // https: the PEM CA bundle the server's certificate must chain to (required for https: there
  // is no unverified TLS). Read again when its modification time or size changes, so a
  // rotated CA is picked up.
  std::string ca_file;
  // A file holding the bearer token (surrounding white space ignored); empty: none. Only with
  // https. Read again when its modification time or size changes.
  std::string bearer_token_file;
  std::chrono::milliseconds timeout{10000};  // per request
  size_t max_body_bytes = 4u << 20;
};

class PrometheusClient {
 public:
  // Checks the URL and the options' combination now (InvalidArgument naming the flag), and
  // reads the token file once so that a missing one fails at start.
  static StatusOr<std::unique_ptr<PrometheusClient>> New(PrometheusClientOptions options);

  // GET <url><path_and_query>; the body of a 200, 400 or 422 (Prometheus' JSON errors, which
  // the caller reads); any other status is Unavailable.
  StatusOr<std::string> Get(const std::string& path_and_query);

 private:
  explicit PrometheusClient(PrometheusClientOptions options) : options_(std::move(options)) {}
  // The token and the CA as their files hold them now: read again only when a file's
  // modification time or size changed since the last read.
  StatusOr<std::string> Token();
  StatusOr<std::shared_ptr<const wire::TrustAnchors>> Anchors();

  PrometheusClientOptions options_;
  wire::Url url_;  // its path without a trailing '/': the prefix of /api/v1
  std::mutex files_mu_;
  std::string token_;                                  // guarded by files_mu_
  std::pair<int64_t, int64_t> token_stamp_{-1, -1};    // guarded by files_mu_
  std::shared_ptr<const wire::TrustAnchors> anchors_;  // guarded by files_mu_
  std::pair<int64_t, int64_t> anchors_stamp_{-1, -1};  // guarded by files_mu_
};

// RFC 3986 percent-encoding of a query parameter's value.
std::string QueryEscape(std::string_view s);

// Checks --prometheus-selector: one or more label matchers `name op "value"` (op one of =, !=,
// =~, !~; the value a PromQL double-quoted string), separated by commas, e.g.
// `job="live-patching-service",namespace="kube-system"`. Returns them as they go inside braces.
// Hand-written (no PromQL parser in Debian for C++) and fuzzed (tests/fuzz).
StatusOr<std::string> ParsePrometheusSelector(std::string_view selector);

}  // namespace hotfix::service
