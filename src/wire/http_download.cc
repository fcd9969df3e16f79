#include "wire/http_download.h"

#include <memory>

#include "wire/http_client.h"
#include "wire/http_proxy.h"
#include "wire/tcp.h"
#include "wire/tls_dialer.h"

namespace hotfix::wire {
namespace {

constexpr size_t kMaxHeaderBytes = 64 * 1024;

Deadline Within(Deadline deadline, std::chrono::milliseconds bound) {
  return deadline.Earlier(Deadline::After(bound));
}

// The connection the request goes over, and the request line's target and Host for it.
struct Connection {
  std::unique_ptr<ByteStream> stream;
  HttpUrl request_url;
  std::vector<HttpHeader> headers;
};

StatusOr<Connection> Connect(const Url& url, const std::optional<ProxyConfig>& proxy,
                             const HttpDownloadOptions& options, Deadline deadline) {
  const uint16_t port = url.EffectivePort();
  Connection c;
  c.request_url.host = url.host;
  c.request_url.port = port;
  c.request_url.target = url.RequestTarget();
  if (url.scheme == "https") {
    TlsDialOptions tls;
    tls.host = url.host;
    tls.port = port;
    tls.proxy = proxy;  // a CONNECT tunnel to the origin
    tls.sni = url.host;
    tls.alpn = {};  // HTTP/1.1, as the reference's Go client with its own dialer speaks
    tls.required_alpn = "";
    tls.verify_name = url.host;
    tls.system_trust_store = true;
    tls.cancelled = options.cancelled;
    auto stream = DialTls(tls, Within(deadline, options.connect_timeout + options.tls_timeout));
    if (!stream.ok()) return stream.status();
    c.stream = std::move(*stream);
    return c;
  }
  const std::string& host = proxy ? proxy->host : url.host;
  const uint16_t dial_port = proxy ? proxy->port : port;
  auto fd =
      DialTcp(host, dial_port, Within(deadline, options.connect_timeout), proxy ? "proxy " : "");
  if (!fd.ok()) return fd.status();
  c.stream = std::make_unique<TcpStream>(std::move(*fd));
  if (proxy) {
    // A plain-HTTP request to a proxy names the whole URL (RFC 9112 3.2.2, absolute-form).
    c.request_url.target = url.scheme + "://" + url.Authority() + url.RequestTarget();
    if (!proxy->proxy_authorization.empty()) {
      c.headers.push_back({"Proxy-Authorization", proxy->proxy_authorization});
    }
  }
  return c;
}

}  // namespace

StatusOr<HttpDownloadResponse> HttpDownload(const Url& url, const HttpDownloadOptions& options,
                                            Deadline deadline) {
  if (url.scheme != "http" && url.scheme != "https") {
    return Status::InvalidArgument("GET " + url.ToString() + ": not an http(s) URL");
  }
  if (!options.body_sink) return Status::InvalidArgument("HttpDownload needs a body sink");
  const std::string what = "GET " + url.ToString();
  auto proxy = ProxyFromEnvironment(url.scheme, url.host, url.EffectivePort());
  if (!proxy.ok()) return proxy.status();

  auto connection = Connect(url, *proxy, options, deadline);
  if (!connection.ok()) return connection.status().Annotate(what);
  HttpRequestOptions request;
  request.user_agent = options.user_agent;
  request.accept = "";
  request.host = url.Authority();
  request.headers = connection->headers;
  auto bytes = BuildGetRequest(connection->request_url, request);
  if (!bytes.ok()) return bytes.status();
  if (Status sent = connection->stream->WriteAll(*bytes, deadline); !sent.ok()) {
    return sent.Annotate(what);
  }
  HttpResponseOptions response;
  response.label = options.label;
  response.max_header_bytes = kMaxHeaderBytes;
  response.max_body_bytes = options.max_body_bytes;
  response.header_timeout = options.header_timeout;
  response.cancelled = options.cancelled;
  response.body_sink = options.body_sink;
  auto read = ReadHttpResponse(*connection->stream, response,
                               Within(deadline, options.header_timeout), deadline);
  if (!read.ok()) {
    // Caps name themselves; the sink's errors are the caller's own words.
    if (read.status().code() == Status::Code::kInvalidArgument) return read.status();
    return read.status().Annotate(what);
  }
  return HttpDownloadResponse{read->status, read->location};
}

}  // namespace hotfix::wire
