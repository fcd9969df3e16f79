#include "node/imds.h"

#include <algorithm>
#include <boost/beast/http.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "common/host_port.h"
#include "common/text.h"
#include "wire/tcp.h"

namespace hotfix::node {
namespace {

namespace http = boost::beast::http;
using std::chrono::milliseconds;

constexpr int kMaxAttempts = 2;
constexpr milliseconds kAttemptTimeout{2000};
constexpr milliseconds kConnectTimeout{1000};
constexpr milliseconds kHeaderTimeout{1000};  // after connecting, as Go's ResponseHeaderTimeout
constexpr milliseconds kCancelPoll{50};       // how soon a cancelled fetch notices
constexpr size_t kMaxBodyBytes = 1 << 20;
constexpr size_t kMaxHeaderBytes = 16 * 1024;
// Bytes Beast holds back once the headers are read: a chunk's size line with its extensions,
// or the last chunk with its trailers. Beast 1.74 bounds neither; Beast's header cap is ours.
constexpr size_t kMaxChunkFramingBytes = kMaxHeaderBytes;

struct HttpUrl {
  std::string host;  // without brackets
  uint16_t port = 80;
  std::string target;  // path and query
};

using Parser = http::response_parser<http::string_body>;

// Boost 1.74 has no URL parser and this takes only what an IMDS URL looks like:
// http://host[:port][/path][?query], no userinfo, no fragment.
StatusOr<HttpUrl> ParseHttpUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("imds url " + std::string(url) + ": " + why);
  };
  if (url.substr(0, kScheme.size()) != kScheme) return bad("only http:// is supported");
  std::string_view rest = url.substr(kScheme.size());
  size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  HttpUrl out;
  out.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (out.target[0] == '?') out.target = "/" + out.target;
  if (out.target.find('#') != std::string::npos) return bad("fragments are not allowed");
  if (authority.find('@') != std::string_view::npos) return bad("userinfo is not allowed");
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unterminated IPv6 address");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') return bad("junk after the IPv6 address");
    if (!after.empty()) port = after.substr(1);
  } else {
    size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return bad("no host");
  if (!port.empty()) {
    const std::optional<uint16_t> value = ParsePort(port);
    if (!value) return bad("bad port");
    out.port = *value;
  }
  return out;
}

std::string RequestBytes(const HttpUrl& url) {
  http::request<http::empty_body> req{http::verb::get, url.target, 11};
  req.set(http::field::host,
          url.port != 80 ? JoinHostPort(url.host, url.port) : BracketHost(url.host));
  req.set("Metadata", "true");
  req.set(http::field::accept, "application/json");
  req.set(http::field::user_agent, "hotfix-agent");
  req.set(http::field::connection, "close");
  std::ostringstream out;
  out << req;
  return out.str();
}

// True when Beast 1.74 must not be given `pending` yet: a chunked body whose first chunk is
// the last, "0\r\n" given alone and then one byte more, trips the assertion `n >= 5` in
// parse_chunk_header (boost/beast/http/impl/basic_parser.ipp), which assumes a CRLF before the
// chunk. Four such bytes cannot end the message ("0\r\n\r\n" is five), so waiting for more
// changes no outcome: a build without asserts answers need_more here too.
bool TripsBeastFinalChunkAssert(const Parser& parser, const std::string& pending) {
  return parser.is_header_done() && parser.chunked() && pending.size() == 4 &&
         pending.compare(0, 3, "0\r\n") == 0;
}

Status FromBeast(boost::beast::error_code ec) {
  if (!ec) return Status::Ok();
  if (ec == http::error::body_limit) {
    return Status::InvalidArgument("imds response body exceeds " + std::to_string(kMaxBodyBytes) +
                                   " bytes");
  }
  if (ec == http::error::header_limit) {
    return Status::InvalidArgument("imds response headers exceed " +
                                   std::to_string(kMaxHeaderBytes) + " bytes");
  }
  return Status::Unavailable("malformed HTTP response: " + ec.message());
}

// Gives Beast what it has not consumed yet (`pending`: it wants those bytes again with more).
Status PutPending(Parser& parser, std::string& pending) {
  while (!pending.empty() && !parser.is_done()) {
    if (TripsBeastFinalChunkAssert(parser, pending)) return Status::Ok();
    boost::beast::error_code ec;
    size_t used = parser.put(boost::asio::buffer(pending.data(), pending.size()), ec);
    pending.erase(0, used);
    if (ec == http::error::need_more) return Status::Ok();
    if (ec) return FromBeast(ec);
  }
  return Status::Ok();
}

// Feeds `data` to Beast holding at most the cap unconsumed, so that a chunk line or trailer
// section longer than the cap is refused however the peer's bytes split into reads. Beast holds
// the headers under the same cap itself (its header_limit answers first).
Status Feed(Parser& parser, std::string& pending, std::string_view data) {
  while (!data.empty() && !parser.is_done()) {
    size_t room = kMaxChunkFramingBytes - pending.size();
    pending.append(data.substr(0, room));
    data.remove_prefix(std::min(room, data.size()));
    Status put = PutPending(parser, pending);
    if (!put.ok()) return put;
    if (pending.size() >= kMaxChunkFramingBytes) {  // full, and Beast wants more
      if (!parser.is_header_done()) return FromBeast(http::error::header_limit);
      return Status::InvalidArgument("imds response chunk line or trailers exceed " +
                                     std::to_string(kMaxChunkFramingBytes) + " bytes");
    }
  }
  return Status::Ok();
}

// Reads until the response is complete, the peer closes, the deadline passes or the fetch is
// cancelled. Beast parses; we only move bytes.
Status ReadResponse(wire::ByteStream& stream, Parser& parser, Deadline header_deadline,
                    Deadline attempt, const std::atomic<bool>& cancelled) {
  char buf[16384];
  std::string pending;
  while (!parser.is_done()) {
    Deadline phase = parser.is_header_done() ? attempt : header_deadline;
    if (cancelled) return Status::Unavailable("imds request cancelled");
    auto n = stream.ReadSome(buf, sizeof buf, phase.Earlier(Deadline::After(kCancelPoll)));
    if (!n.ok() && n.status().code() == Status::Code::kDeadlineExceeded && !phase.expired()) {
      continue;  // a cancellation check, not the deadline
    }
    if (!n.ok() && n.status().code() == Status::Code::kDeadlineExceeded) {
      return Status::DeadlineExceeded(parser.is_header_done()
                                          ? "imds response body timed out"
                                          : "no response headers within " +
                                                std::to_string(kHeaderTimeout.count()) + " ms");
    }
    if (!n.ok()) return n.status();
    if (*n > 0) {
      Status fed = Feed(parser, pending, std::string_view(buf, *n));
      if (!fed.ok()) return fed;
      continue;
    }
    // Beast requires input before put_eof (an assertion aborts a build with asserts on).
    if (!parser.got_some()) return Status::Unavailable("connection closed before any response");
    boost::beast::error_code ec;
    parser.put_eof(ec);
    if (ec) return FromBeast(ec);
    if (!parser.is_done()) return Status::Unavailable("connection closed early");
  }
  return Status::Ok();
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
  Parser parser;
  parser.header_limit(kMaxHeaderBytes);
  parser.body_limit(kMaxBodyBytes);
  // Not eager: Boost 1.74's parser skips the Content-Length body_limit check when eager.
  Status read = ReadResponse(stream, parser, header_deadline, attempt, cancelled);
  if (!read.ok()) {
    // Limits name themselves; transport failures name the request.
    return read.code() == Status::Code::kInvalidArgument ? read : read.Annotate(what);
  }
  // Redirects are not followed: anything but 200 is an error, as in the reference.
  const auto& response = parser.get();
  if (response.result_int() != 200) {
    return Status::Unavailable("imds returned status " + std::to_string(response.result_int()));
  }
  return ParseAttestedDocument(response.body());
}

StatusOr<Secret> ImdsTokenSource::FetchOnce(Deadline deadline) {
  auto url = ParseHttpUrl(url_);
  if (!url.ok()) return url.status();
  const Deadline attempt = deadline.Earlier(Deadline::After(kAttemptTimeout));
  const std::string what = "GET " + url_;

  // IMDS is link-local: it is dialed directly, whatever the proxy variables say.
  auto fd = wire::DialTcp(url->host, url->port, attempt.Earlier(Deadline::After(kConnectTimeout)));
  if (!fd.ok()) return fd.status().Annotate(what);
  wire::TcpStream stream(std::move(*fd));
  Status sent = stream.WriteAll(RequestBytes(*url), attempt);
  if (!sent.ok()) return sent.Annotate(what);
  return ReadAttestedResponse(stream, attempt.Earlier(Deadline::After(kHeaderTimeout)), attempt,
                              cancelled_, what);
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
