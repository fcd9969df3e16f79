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
  client->scheme_ = url->scheme;
  client->host_ = url->host;
  client->port_ = url->EffectivePort();
  client->prefix_ = url->path;
  while (!client->prefix_.empty() && client->prefix_.back() == '/') client->prefix_.pop_back();
  if (!client->options_.bearer_token_file.empty()) {
    if (StatusOr<std::string> token = client->Token(); !token.ok()) return token.status();
  }
  if (!client->options_.ca_file.empty()) {
    StatusOr<std::string> ca = ReadFileToString(client->options_.ca_file, kMaxCaBytes);
    if (!ca.ok()) return ca.status().Annotate("--prometheus-ca");
    if (StatusOr<wire::TrustAnchors> anchors = wire::ParseTrustAnchors(*ca); !anchors.ok()) {
      return anchors.status().Annotate("--prometheus-ca " + client->options_.ca_file);
    }
  }
  return client;
}

StatusOr<std::string> PrometheusClient::Token() {
  struct stat st {};
  const std::string& path = options_.bearer_token_file;
  if (::stat(path.c_str(), &st) != 0) {
    return Status::Unavailable("--prometheus-bearer-token-file " + path + ": cannot stat");
  }
  const int64_t mtime = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  std::lock_guard<std::mutex> lock(token_mu_);
  if (mtime == token_mtime_ns_ && st.st_size == token_size_ && !token_.empty()) return token_;
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
  token_mtime_ns_ = mtime;
  token_size_ = st.st_size;
  return token_;
}

StatusOr<std::string> PrometheusClient::Get(const std::string& path_and_query) {
  const Deadline deadline = Deadline::After(options_.timeout);
  wire::HttpUrl target{host_, port_, prefix_ + path_and_query};
  wire::HttpRequestOptions request;
  request.user_agent = "live-patching-service";
  if (port_ != (scheme_ == "https" ? 443 : 80)) {
    request.host = (host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_) + ":" +
                   std::to_string(port_);
  } else {
    request.host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  }
  if (!options_.bearer_token_file.empty()) {
    StatusOr<std::string> token = Token();
    if (!token.ok()) return token.status();
    request.headers.push_back({"Authorization", "Bearer " + *token});
  }
  StatusOr<std::string> bytes = wire::BuildGetRequest(target, request);
  if (!bytes.ok()) return bytes.status();
  const std::string what = "GET " + scheme_ + "://" + request.host + prefix_ + "/api/v1/...";

  std::unique_ptr<wire::ByteStream> stream;
  if (scheme_ == "https") {
    StatusOr<std::string> ca = ReadFileToString(options_.ca_file, kMaxCaBytes);
    if (!ca.ok()) return ca.status().Annotate("--prometheus-ca");
    wire::TlsDialOptions dial;
    dial.host = host_;
    dial.port = port_;
    dial.sni = host_;
    dial.verify_name = host_;
    dial.ca_pem = std::move(ca.value());
    dial.required_alpn = "";
    StatusOr<std::unique_ptr<wire::TlsStream>> tls = wire::DialTls(dial, deadline);
    if (!tls.ok()) return tls.status().Annotate(what);
    stream = std::move(tls.value());
  } else {
    StatusOr<UniqueFd> fd = wire::DialTcp(host_, port_, deadline);
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
