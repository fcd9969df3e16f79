#include "node/imds.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>

namespace hotfix::node {
namespace {

constexpr int kMaxAttempts = 2;
constexpr auto kAttemptTimeout = std::chrono::milliseconds(2000);
constexpr long kConnectTimeoutMs = 1000;
constexpr long kHeaderTimeoutMs = 1000;  // after connecting, as Go's ResponseHeaderTimeout
constexpr size_t kMaxBodyBytes = 1 << 20;

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_NOTHING); });
}

struct Transfer {
  std::string body;
  bool too_large = false;
  bool got_status_line = false;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool header_timeout = false;
  const std::atomic<bool>* cancelled = nullptr;
  CURL* curl = nullptr;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  if (t->body.size() + n > kMaxBodyBytes) {
    t->too_large = true;
    return 0;  // Aborts the transfer with CURLE_WRITE_ERROR.
  }
  t->body.append(data, n);
  return n;
}

size_t OnHeader(char* /*data*/, size_t size, size_t count, void* user) {
  static_cast<Transfer*>(user)->got_status_line = true;
  return size * count;
}

// libcurl has no response-header timeout: enforce it from the progress callback.
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (*t->cancelled) return 1;
  if (t->got_status_line) return 0;
  curl_off_t connect_us = 0;
  if (curl_easy_getinfo(t->curl, CURLINFO_CONNECT_TIME_T, &connect_us) != CURLE_OK ||
      connect_us == 0) {
    return 0;  // Still connecting: CONNECTTIMEOUT covers this phase.
  }
  auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::steady_clock::now() - t->started)
                     .count();
  if (elapsed - connect_us > kHeaderTimeoutMs * 1000) {
    t->header_timeout = true;
    return 1;  // Aborts with CURLE_ABORTED_BY_CALLBACK.
  }
  return 0;
}

Status TransferError(CURLcode rc, const Transfer& t, const std::string& url) {
  if (t.too_large) {
    return Status::InvalidArgument("imds response body exceeds " + std::to_string(kMaxBodyBytes) +
                                   " bytes");
  }
  if (*t.cancelled) return Status::Unavailable("imds request cancelled");
  if (t.header_timeout) {
    return Status::DeadlineExceeded("GET " + url + ": no response headers within " +
                                    std::to_string(kHeaderTimeoutMs) + " ms");
  }
  std::string msg = "GET " + url + ": " + curl_easy_strerror(rc);
  if (rc == CURLE_OPERATION_TIMEDOUT) return Status::DeadlineExceeded(msg);
  return Status::Unavailable(msg);
}

}  // namespace

StatusOr<Secret> ParseAttestedDocument(std::string_view body) {
  auto doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::InvalidArgument("decoding imds response: invalid JSON");
  if (!doc.is_object()) return Status::InvalidArgument("decoding imds response: not a JSON object");
  // Go's encoding/json matches keys case-insensitively; the last match wins.
  const nlohmann::json* signature = nullptr;
  for (const auto& [key, value] : doc.items()) {
    std::string lower(key);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == "signature") signature = &value;
  }
  if (signature != nullptr && !signature->is_null() && !signature->is_string()) {
    return Status::InvalidArgument("decoding imds response: signature is not a string");
  }
  if (signature == nullptr || signature->is_null() || signature->get<std::string>().empty()) {
    return Status::InvalidArgument("imds attested document had empty signature");
  }
  return Secret(signature->get<std::string>());
}

StatusOr<Secret> ImdsTokenSource::FetchOnce(Deadline deadline) {
  InitCurlOnce();
  Deadline attempt = deadline.Earlier(Deadline::After(kAttemptTimeout));
  if (attempt.expired()) return Status::DeadlineExceeded("imds: no time left for an attempt");

  CURL* curl = curl_easy_init();
  if (curl == nullptr) return Status::Internal("curl_easy_init failed");
  Transfer t;
  t.curl = curl;
  t.cancelled = &cancelled_;
  curl_slist* headers = curl_slist_append(nullptr, "Metadata: true");
  curl_easy_setopt(curl, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http");
  // IMDS is link-local: a proxy can only get in the way (reference: proxy disabled).
  curl_easy_setopt(curl, CURLOPT_PROXY, "");
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // We run on a worker thread.
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, kConnectTimeoutMs);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(attempt.remaining().count()));
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(kMaxBodyBytes));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  CURLcode rc = curl_easy_perform(curl);
  long http_status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);

  if (rc == CURLE_FILESIZE_EXCEEDED) t.too_large = true;
  if (rc != CURLE_OK) return TransferError(rc, t, url_);
  if (http_status != 200) {
    return Status::Unavailable("imds returned status " + std::to_string(http_status));
  }
  return ParseAttestedDocument(t.body);
}

StatusOr<Secret> ImdsTokenSource::Fetch(Deadline deadline) {
  Status last;
  for (int attempt = 1; attempt <= kMaxAttempts; ++attempt) {
    auto token = FetchOnce(deadline);
    if (token.ok()) return token;
    last = token.status();
    if (cancelled_) break;
    if (attempt < kMaxAttempts && !deadline.expired() && !cancelled_) {
      log_.Warn("fetch attempt failed, retrying",
                {{"attempt", attempt}, {"maxAttempts", kMaxAttempts}, {"error", last}});
    }
  }
  return last.Annotate("imds attested token");
}

}  // namespace hotfix::node
