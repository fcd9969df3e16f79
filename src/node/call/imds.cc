#include "node/call/imds.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <string_view>

#include "common/text.h"
#include "wire/http_client.h"

namespace hotfix::node {
namespace {

using std::chrono::milliseconds;

constexpr int kMaxAttempts = 2;
constexpr milliseconds kAttemptTimeout{2000};
constexpr milliseconds kConnectTimeout{1000};
constexpr milliseconds kHeaderTimeout{1000};  // after connecting, as Go's ResponseHeaderTimeout

// The caps and the names in IMDS's errors: "imds response body exceeds 1048576 bytes", "imds
// request cancelled", "no response headers within 1000 ms".
wire::HttpResponseOptions ResponseOptions(const std::atomic<bool>& cancelled) {
  wire::HttpResponseOptions options;
  options.label = "imds";
  options.max_header_bytes = 16 * 1024;
  options.max_body_bytes = 1 << 20;
  options.max_chunk_framing_bytes = options.max_header_bytes;
  options.header_timeout = kHeaderTimeout;
  options.cancelled = &cancelled;
  return options;
}

// Anything but 200 is an error, redirects included: Go's client would follow them (the
// reference sets no CheckRedirect), but IMDS never redirects, and a redirect away from the
// link-local address is not IMDS (docs/CHECK-HOTFIX.md, "Intentional differences").
StatusOr<Secret> AttestedToken(const wire::HttpResponse& response) {
  if (response.status != 200) {
    return Status::Unavailable("imds returned status " + std::to_string(response.status));
  }
  return ParseAttestedDocument(response.body);
}

}  // namespace

StatusOr<Secret> ParseAttestedDocument(std::string_view body) {
  auto doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::InvalidArgument("decoding imds response: invalid JSON");
  if (!doc.is_object()) return Status::InvalidArgument("decoding imds response: not a JSON object");
  // Go's encoding/json matches keys case-insensitively; the last match wins.
  const nlohmann::json* signature = nullptr;
  for (const auto& [key, value] : doc.items()) {
    if (AsciiLower(key) == "signature") signature = &value;
  }
  if (signature != nullptr && !signature->is_null() && !signature->is_string()) {
    return Status::InvalidArgument("decoding imds response: signature is not a string");
  }
  if (signature == nullptr || signature->is_null() || signature->get<std::string>().empty()) {
    return Status::InvalidArgument("imds attested document had empty signature");
  }
  return Secret(signature->get<std::string>());
}

StatusOr<Secret> ReadAttestedResponse(wire::ByteStream& stream, Deadline header_deadline,
                                      Deadline attempt, const std::atomic<bool>& cancelled,
                                      const std::string& what) {
  auto response =
      wire::ReadHttpResponse(stream, ResponseOptions(cancelled), header_deadline, attempt);
  if (!response.ok()) {
    // Caps name themselves; transport failures name the request (as wire::HttpGet does).
    const Status& read = response.status();
    return read.code() == Status::Code::kInvalidArgument ? read : read.Annotate(what);
  }
  return AttestedToken(*response);
}

StatusOr<Secret> ImdsTokenSource::FetchOnce(Deadline deadline) {
  wire::HttpGetOptions options;
  options.url_label = "imds url";
  options.request.user_agent = "hotfix-agent";
  options.request.headers = {{"Metadata", "true"}};
  options.response = ResponseOptions(cancelled_);
  options.connect_timeout = kConnectTimeout;
  // IMDS is link-local: HttpGet dials it directly, whatever the proxy variables say.
  auto response = wire::HttpGet(url_, options, deadline.Earlier(Deadline::After(kAttemptTimeout)));
  if (!response.ok()) return response.status();
  return AttestedToken(*response);
}

StatusOr<Secret> ImdsTokenSource::Fetch(Deadline deadline) {
  Status last;
  for (int attempt = 1; attempt <= kMaxAttempts; ++attempt) {
    auto token = FetchOnce(deadline);
    if (token.ok()) return token;
    last = token.status();
    if (cancelled_) break;
    if (attempt < kMaxAttempts && !deadline.expired()) {
      log_.Warn("fetch attempt failed, retrying",
                {{"attempt", attempt}, {"maxAttempts", kMaxAttempts}, {"error", last}});
    }
  }
  return last.Annotate("imds attested token");
}

}  // namespace hotfix::node
