// Downloading a repository's files: metadata and the package, each streamed to a file while its
// size and SHA-256 are computed, under the reference's caps and timeouts, through the proxy the
// environment names (cse_main.sh exports HTTP(S)_PROXY and NO_PROXY into the agent's
// environment). RepoFetcher is the seam the fast path's unit tests fake.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "wire/url.h"

namespace hotfix::node::repository {

struct FetchedFile {
  std::string path;
  uint64_t size = 0;
  std::string sha256;  // 64 lower-case hex digits
};

class RepoFetcher {
 public:
  virtual ~RepoFetcher() = default;
  // GETs `relative` under `base` (repo_url.h's rules: an escape is DataLoss) into `dest`
  // (created or truncated, mode 0600). Errors, all but the escape operational: Unavailable
  // "HTTP <n> from <url>", "repository response exceeds <max_bytes> bytes", "redirect from
  // <url> leaves the repository", the transport's own; DeadlineExceeded; Cancelled.
  // When *cancelled turns true the transfer stops within 50 ms.
  virtual StatusOr<FetchedFile> Fetch(const wire::Url& base, std::string_view relative,
                                      uint64_t max_bytes, const std::string& dest,
                                      const std::atomic<bool>* cancelled) = 0;
};

struct HttpRepoFetcherOptions {
  std::string user_agent;
  // The reference's client: 30 s per request, 10 s each to connect, finish TLS and see the
  // response headers; redirects followed (at most 10, as Go's client) only within the base.
  std::chrono::milliseconds request_timeout{30000};
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds tls_timeout{10000};
  std::chrono::milliseconds header_timeout{10000};
  int max_redirects = 10;
};

std::unique_ptr<RepoFetcher> NewHttpRepoFetcher(const HttpRepoFetcherOptions& options);

}  // namespace hotfix::node::repository
