// A plain-HTTP/1.1 GET client: one request, one response, no TLS, no proxy, no redirects, no
// connection reuse. IMDS (node/call/imds.cc) and the service's Prometheus queries use it; what a
// status code means and whether to try again is theirs to decide.
//
// Responses are parsed by Boost.Beast 1.74 (header-only) under caps on everything the peer
// controls: header bytes, body bytes and the chunk framing Beast holds, plus a deadline for
// the headers, one for the whole read, and a cancel flag.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "wire/byte_stream.h"

namespace hotfix::wire {

struct HttpUrl {
  std::string host;  // without brackets
  uint16_t port = 80;
  // Path and query, starting with '/'; or, to a proxy, the absolute URL ("absolute-form").
  std::string target;
};

// http://host[:port][/path][?query]: no https, no userinfo, no fragment, and no space or
// control character anywhere (they would end the request line). Errors are InvalidArgument
// "<what> <url>: <why>", e.g. what = "imds url".
StatusOr<HttpUrl> ParseHttpUrl(std::string_view url, std::string_view what);

struct HttpHeader {
  std::string name;
  std::string value;
};

struct HttpRequestOptions {
  // Each omitted when empty.
  std::string user_agent;
  std::string accept = "application/json";
  // Sent right after Host, in this order, e.g. {"Metadata", "true"} for IMDS. Not Host,
  // Accept, User-Agent or Connection: those are set above or always.
  std::vector<HttpHeader> headers;
  // The Host header's value when set (an https:// URL's authority, or the origin's through a
  // proxy); otherwise the URL's host, with its port unless 80.
  std::string host;
};

// "GET <target> HTTP/1.1" with Host (the port only when not 80), the extra headers, Accept,
// User-Agent and "Connection: close". InvalidArgument for a header name that is not a token or
// a value holding a control character other than tab (the value is not echoed: it may be a
// credential).
StatusOr<std::string> BuildGetRequest(const HttpUrl& url, const HttpRequestOptions& options);

struct HttpResponseOptions {
  // Names the peer in the errors about its response: "<label> response body exceeds N
  // bytes", "... headers exceed N bytes", "... chunk line or trailers exceed N bytes",
  // "<label> response body timed out", "<label> request cancelled".
  std::string label = "http";
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 1 << 20;
  // A chunk's size line with its extensions, or the last chunk with the trailers: Beast 1.74
  // bounds neither. The line may be exactly this long, CRLF included; under 5 bytes no chunked
  // body can end ("0\r\n\r\n").
  size_t max_chunk_framing_bytes = 16 * 1024;
  // The wait for the headers once the request is sent (Go's ResponseHeaderTimeout); its error
  // reads "no response headers within <ms> ms". 0: no bound of its own.
  std::chrono::milliseconds header_timeout{0};
  // When set and true, the read gives up within 50 ms ("<label> request cancelled").
  const std::atomic<bool>* cancelled = nullptr;
  // When set, a 200's body is handed to it piece by piece as it arrives instead of being kept
  // in HttpResponse::body (a package of hundreds of MiB is never held whole), still under
  // max_body_bytes; another status's body is read and dropped. Its error ends the read.
  std::function<Status(std::string_view)> body_sink;
};

struct HttpResponse {
  int status = 0;            // any code, 1xx to 5xx: not an error here
  std::string content_type;  // empty when absent
  std::string location;      // a redirect's Location; empty when absent
  std::string body;          // de-chunked; empty when options.body_sink took it
};

// Reads one response from stream (a TCP connection in HttpGet; memory in tests and fuzzers)
// until it is complete, the peer closes, a deadline passes or the read is cancelled. The
// outcome does not depend on how the peer's bytes are split into reads.
// header_deadline bounds the wait for the headers (HttpGet: options.header_timeout after the
// request was sent), deadline the whole read. Errors:
//  - over a cap: InvalidArgument naming the cap, not the request (it names itself);
//  - headers late: DeadlineExceeded "no response headers within <header_timeout> ms" (or
//    "<label> response headers timed out" without a header_timeout); body late:
//    DeadlineExceeded "<label> response body timed out";
//  - Unavailable "malformed HTTP response: <Beast's reason>", "connection closed before any
//    response", "connection closed early", cancellation, and the stream's own errors.
// Only the caps' errors are complete: callers annotate the others with the request.
StatusOr<HttpResponse> ReadHttpResponse(ByteStream& stream, const HttpResponseOptions& options,
                                        Deadline header_deadline, Deadline deadline);

struct HttpGetOptions {
  // Names the URL in its errors: "<url_label> <url>: <why>".
  std::string url_label = "url";
  HttpRequestOptions request;
  HttpResponseOptions response;
  // Bounds the dial (resolution and connect) within deadline. 0: no bound of its own.
  std::chrono::milliseconds connect_timeout{0};
};

// One attempt: parse url, dial it with DialTcp (directly, whatever the proxy variables say),
// send the GET, read the response. Redirects are not followed: a 3xx is returned like any
// other status. URL, header and cap errors are InvalidArgument as above; every other error
// is annotated "GET <url>: ...".
StatusOr<HttpResponse> HttpGet(std::string_view url, const HttpGetOptions& options,
                               Deadline deadline);

}  // namespace hotfix::wire
