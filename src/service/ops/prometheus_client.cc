#include "service/ops/prometheus_client.h"

#include <sys/stat.h>

#include <algorithm>

#include "common/deadline.h"
#include "common/file_util.h"
#include "common/text.h"
#include "wire/http_client.h"
#include "wire/tcp.h"
#include "wire/tls_dialer.h"
#include "wire/url.h"

namespace hotfix::service {
namespace {

constexpr size_t kMaxTokenBytes = 16 * 1024;
constexpr size_t kMaxCaBytes = 1 << 20;

std::string Trim(std::string_view s) {
  while (!s.empty() && IsAsciiSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsAsciiSpace(s.back())) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

std::string QueryEscape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (IsAsciiAlnum(static_cast<char>(c)) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.append(1, '%').append(1, kHex[c >> 4]).append(1, kHex[c & 15]);
    }
  }
  return out;
}

StatusOr<std::string> ParsePrometheusSelector(std::string_view selector) {
  auto bad = [&](std::string why) {
    return Status::InvalidArgument("--prometheus-selector: " + why +
                                   " (want name=\"value\" matchers separated by commas, e.g. "
                                   "job=\"live-patching-service\",namespace=\"kube-system\")");
  };
  if (selector.size() > 4096) return bad("longer than 4096 bytes");
  if (std::all_of(selector.begin(), selector.end(), IsAsciiBlank)) return bad("no matcher");
  std::string out;
  size_t i = 0;
  auto skip_blank = [&] {
    while (i < selector.size() && IsAsciiBlank(selector[i])) ++i;
  };
  int matchers = 0;
  while (true) {
    skip_blank();
    const size_t name_start = i;
    while (i < selector.size() && (IsAsciiAlnum(selector[i]) || selector[i] == '_') &&
           !(i == name_start && IsAsciiDigit(selector[i]))) {
      ++i;
    }
    if (i == name_start) return bad("a matcher has no label name at byte " + std::to_string(i));
    const std::string_view name = selector.substr(name_start, i - name_start);
    skip_blank();
    std::string_view op;
    for (std::string_view candidate : {"=~", "!~", "!=", "="}) {
      if (selector.substr(i, candidate.size()) == candidate) {
        op = candidate;
        break;
      }
    }
    if (op.empty()) return bad("label " + std::string(name) + " has no =, !=, =~ or !~");
    i += op.size();
    skip_blank();
    if (i >= selector.size() || selector[i] != '"') {
      return bad("label " + std::string(name) + "'s value is not a double-quoted string");
    }
    const size_t value_start = i++;
    while (i < selector.size() && selector[i] != '"') {
      const auto c = static_cast<unsigned char>(selector[i]);
      if (c < 0x20 || c == 0x7f) return bad("a control character in a value");
      if (selector[i] == '\\') {
        if (i + 1 >= selector.size()) break;
        ++i;
      }
      ++i;
    }
    if (i >= selector.size()) return bad("label " + std::string(name) + "'s value is unterminated");
    ++i;  // the closing quote
    if (!out.empty()) out.push_back(',');
    out.append(name).append(op).append(selector.substr(value_start, i - value_start));
    ++matchers;
    skip_blank();
    if (i == selector.size()) break;
    if (selector[i] != ',') return bad("expected a comma at byte " + std::to_string(i));
    ++i;
    skip_blank();
    if (i == selector.size()) break;  // a trailing comma, as PromQL allows
  }
  if (matchers == 0) return bad("no matcher");
  return out;
}

StatusOr<std::unique_ptr<PrometheusClient>> PrometheusClient::New(PrometheusClientOptions options) {
  StatusOr<wire::Url> url = wire::ParseAbsoluteUrl(options.url);
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("--prometheus-url: " + why);
  };
  if (!url.ok()) return bad(url.status().message());
  if (url->scheme != "http" && url->scheme != "https") return bad("not http:// or https://");
  if (url->has_userinfo) return bad("no user:password@ (use --prometheus-bearer-token-file)");
  if (url->query || url->fragment) return bad("no query or fragment allowed");
  if (url->scheme == "https" && options.ca_file.empty()) {
    return Status::InvalidArgument(
        "--prometheus-url is https:// but no --prometheus-ca: the server's certificate must be "
        "verified");
  }
  if (url->scheme == "http" && !options.ca_file.empty()) {
    return Status::InvalidArgument("--prometheus-ca needs an https:// --prometheus-url");
  }
  if (url->scheme == "http" && !options.bearer_token_file.empty()) {
    return Status::InvalidArgument(
        "--prometheus-bearer-token-file needs an https:// --prometheus-url: the token is never "
        "sent in clear text");
  }
  std::unique_ptr<PrometheusClient> client(new PrometheusClient(std::move(options)));
  client->url_ = std::move(url.value());
  std::string& prefix = client->url_.path;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!client->options_.bearer_token_file.empty()) {
    if (StatusOr<std::string> token = client->Token(); !token.ok()) return token.status();
  }
  if (!client->options_.ca_file.empty()) {
    if (auto anchors = client->Anchors(); !anchors.ok()) return anchors.status();
  }
  return client;
}

namespace {

// A file's modification time and size: what "read again when it changes" compares.
StatusOr<std::pair<int64_t, int64_t>> FileStamp(const std::string& path, const char* flag) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::Unavailable(std::string(flag) + " " + path + ": cannot stat");
  }
  return std::pair<int64_t, int64_t>{int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec,
                                     int64_t{st.st_size}};
}

}  // namespace

StatusOr<std::shared_ptr<const wire::TrustAnchors>> PrometheusClient::Anchors() {
  StatusOr<std::pair<int64_t, int64_t>> stamp = FileStamp(options_.ca_file, "--prometheus-ca");
  if (!stamp.ok()) return stamp.status();
  std::lock_guard<std::mutex> lock(files_mu_);
  if (anchors_ != nullptr && *stamp == anchors_stamp_) return anchors_;
  StatusOr<std::string> ca = ReadFileToString(options_.ca_file, kMaxCaBytes);
  if (!ca.ok()) return ca.status().Annotate("--prometheus-ca");
  StatusOr<wire::TrustAnchors> anchors = wire::ParseTrustAnchors(*ca);
  if (!anchors.ok()) return anchors.status().Annotate("--prometheus-ca " + options_.ca_file);
  anchors_ = std::make_shared<const wire::TrustAnchors>(std::move(anchors.value()));
  anchors_stamp_ = *stamp;
  return anchors_;
}

StatusOr<std::string> PrometheusClient::Token() {
  const std::string& path = options_.bearer_token_file;
  StatusOr<std::pair<int64_t, int64_t>> stamp = FileStamp(path, "--prometheus-bearer-token-file");
  if (!stamp.ok()) return stamp.status();
  std::lock_guard<std::mutex> lock(files_mu_);
  if (*stamp == token_stamp_ && !token_.empty()) return token_;
  StatusOr<std::string> text = ReadFileToString(path, kMaxTokenBytes);
  if (!text.ok()) return text.status().Annotate("--prometheus-bearer-token-file");
  std::string token = Trim(*text);
  if (token.empty()) {
    return Status::Unavailable("--prometheus-bearer-token-file " + path + " is empty");
  }
  for (char c : token) {
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e) {
      // The token is not echoed.
      return Status::Unavailable("--prometheus-bearer-token-file " + path +
                                 " holds a character a bearer token cannot have");
    }
  }
  token_ = std::move(token);
  token_stamp_ = *stamp;
  return token_;
}

StatusOr<std::string> PrometheusClient::Get(const std::string& path_and_query) {
  const Deadline deadline = Deadline::After(options_.timeout);
  const std::string& host = url_.host;
  const uint16_t port = url_.EffectivePort();
  wire::HttpUrl target{host, port, url_.path + path_and_query};
  wire::HttpRequestOptions request;
  request.user_agent = "live-patching-service";
  request.host = url_.Authority();
  if (!options_.bearer_token_file.empty()) {
    StatusOr<std::string> token = Token();
    if (!token.ok()) return token.status();
    request.headers.push_back({"Authorization", "Bearer " + *token});
  }
  StatusOr<std::string> bytes = wire::BuildGetRequest(target, request);
  if (!bytes.ok()) return bytes.status();
  const std::string what = "GET " + url_.ToString() + "/api/v1/...";

  std::unique_ptr<wire::ByteStream> stream;
  if (url_.scheme == "https") {
    StatusOr<std::shared_ptr<const wire::TrustAnchors>> anchors = Anchors();
    if (!anchors.ok()) return anchors.status();
    wire::TlsDialOptions dial;
    dial.host = host;
    dial.port = port;
    dial.sni = host;
    dial.verify_name = host;
    dial.trust_anchors = std::move(anchors.value());
    dial.required_alpn = "";
    StatusOr<std::unique_ptr<wire::TlsStream>> tls = wire::DialTls(dial, deadline);
    if (!tls.ok()) return tls.status().Annotate(what);
    stream = std::move(tls.value());
  } else {
    StatusOr<UniqueFd> fd = wire::DialTcp(host, port, deadline);
    if (!fd.ok()) return fd.status().Annotate(what);
    stream = std::make_unique<wire::TcpStream>(std::move(fd.value()));
  }
  if (Status sent = stream->WriteAll(*bytes, deadline); !sent.ok()) return sent.Annotate(what);
  wire::HttpResponseOptions response_options;
  response_options.label = "prometheus";
  response_options.max_body_bytes = options_.max_body_bytes;
  StatusOr<wire::HttpResponse> response =
      wire::ReadHttpResponse(*stream, response_options, deadline, deadline);
  if (!response.ok()) {
    if (response.status().code() == Status::Code::kInvalidArgument) {
      return Status::Unavailable(response.status().message());  // a cap: names itself
    }
    return response.status().Annotate(what);
  }
  // Prometheus answers a bad query with 400 or 422 and a JSON error, which the caller reads.
  if (response->status != 200 && response->status != 400 && response->status != 422) {
    return Status::Unavailable("prometheus answered HTTP " + std::to_string(response->status));
  }
  return std::move(response->body);
}

}  // namespace hotfix::service
