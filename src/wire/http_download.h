// One HTTP/1.1 GET of an http:// or https:// URL whose body is streamed to the caller: how the
// node downloads a package repository's files (node/repository/repo_fetcher.h). Unlike
// http_client.h's HttpGet (IMDS, Prometheus: never proxied, plain HTTP), it goes through the
// environment's proxy as Go's http.ProxyFromEnvironment would (http_proxy.h) and speaks TLS
// verified against the system's trust store and the URL's host. Redirects are not followed: a
// 3xx comes back with its Location, for the caller's own rules.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "common/deadline.h"
#include "common/status.h"
#include "wire/url.h"

namespace hotfix::wire {

struct HttpDownloadOptions {
  std::string user_agent;
  // The body's cap: a larger one is InvalidArgument "<label> response body exceeds N bytes".
  size_t max_body_bytes = 1 << 20;
  std::string label = "http";
  // Each bounded within the whole call's deadline: the TCP connect (to the proxy, when there is
  // one, and its CONNECT), the TLS handshake, the wait for the response headers.
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds tls_timeout{10000};
  std::chrono::milliseconds header_timeout{10000};
  // When set and true, the call gives up at its next step or within 50 ms of a read.
  const std::atomic<bool>* cancelled = nullptr;
  // A 200's body, piece by piece (required). Its error ends the call with that error.
  std::function<Status(std::string_view)> body_sink;
};

struct HttpDownloadResponse {
  int status = 0;
  std::string location;  // a 3xx's Location, as sent
};

// Errors: InvalidArgument for a URL that is not http(s), a bad proxy variable ("invalid
// HTTPS_PROXY: ..."; the value is not echoed) or a cap; DeadlineExceeded; Unavailable for the
// connection; the sink's own error. All but the caps' name the request ("GET <url>: ...").
StatusOr<HttpDownloadResponse> HttpDownload(const Url& url, const HttpDownloadOptions& options,
                                            Deadline deadline);

}  // namespace hotfix::wire
