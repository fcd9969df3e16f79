#include "wire/http_client.h"

#include <algorithm>
#include <boost/beast/http.hpp>
#include <functional>
#include <optional>
#include <sstream>

#include "common/host_port.h"
#include "wire/tcp.h"

namespace hotfix::wire {
namespace {

namespace http = boost::beast::http;
using std::chrono::milliseconds;

constexpr milliseconds kCancelPoll{50};  // how soon a cancelled read notices

// The response body as Beast parses it: kept in `text` (under the parser's body_limit), or,
// when the caller gave a sink, a 200's body handed to it as it arrives and any other status's
// read and dropped. The sink's error stops the parse.
struct KeptOrStreamedBody {
  struct value_type {
    std::string text;
    const std::function<Status(std::string_view)>* sink = nullptr;
    Status sink_error;
  };

  // Beast builds the reader with the parser, before any header arrives: what the body is
  // for is decided in init(), once the status is known.
  class reader {
   public:
    template <bool isRequest, class Fields>
    explicit reader(http::header<isRequest, Fields>& header, value_type& body) : body_(body) {
      if constexpr (!isRequest) status_ = [&header] { return header.result_int(); };
    }
    void init(const boost::optional<std::uint64_t>&, boost::beast::error_code& ec) {
      stream_ = body_.sink != nullptr && *body_.sink;
      ok_status_ = status_ && status_() == 200;
      ec = {};
    }
    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
      ec = {};
      size_t used = 0;
      for (const auto b : boost::beast::buffers_range_ref(buffers)) {
        std::string_view piece(static_cast<const char*>(b.data()), b.size());
        if (!stream_) {
          body_.text.append(piece);
        } else if (ok_status_) {
          if (Status sunk = (*body_.sink)(piece); !sunk.ok()) {
            body_.sink_error = std::move(sunk);
            ec = boost::system::errc::make_error_code(boost::system::errc::operation_canceled);
            return used;
          }
        }
        used += piece.size();
      }
      return used;
    }
    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    std::function<unsigned()> status_;  // the response's status, read once the header is in
    value_type& body_;
    bool stream_ = false;
    bool ok_status_ = false;
  };
};

using Parser = http::response_parser<KeptOrStreamedBody>;

// Bytes that may not appear in a request line or a field value unescaped: Go's url.Parse
// refuses the control characters (net/url/url.go stringContainsCTLByte); a space would end
// the request target.
bool HasCtlOrSpace(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto b = static_cast<unsigned char>(c);
    return b <= 0x20 || b == 0x7f;
  });
}

// RFC 9110 token characters, as Go's httpguts.ValidHeaderFieldName
// (golang.org/x/net/http/httpguts/httplex.go) checks before net/http sends a header.
bool IsToken(std::string_view s) {
  constexpr std::string_view kSpecials = "!#$%&'*+-.^_`|~";
  return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           kSpecials.find(c) != std::string_view::npos;
  });
}

// httpguts.ValidHeaderFieldValue: no control character but horizontal tab.
bool IsFieldValue(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char c) {
    const auto b = static_cast<unsigned char>(c);
    return (b < 0x20 && b != '\t') || b == 0x7f;
  });
}

// The value is not echoed: it may be a credential.
Status CheckField(std::string_view name, std::string_view value) {
  if (!IsToken(name)) return Status::InvalidArgument("request header name is not a token");
  if (!IsFieldValue(value)) {
    return Status::InvalidArgument("request header " + std::string(name) +
                                   ": value holds a control character");
  }
  return Status::Ok();
}

// True when Beast 1.74 must not be given `given` yet: a chunked body whose first chunk is
// the last, "0\r\n" given alone and then one byte more, trips the assertion `n >= 5` in
// parse_chunk_header (boost/beast/http/impl/basic_parser.ipp), which assumes a CRLF before the
// chunk. Four such bytes cannot end the message ("0\r\n\r\n" is five), so waiting for more
// changes no outcome: a build without asserts answers need_more here too.
bool TripsBeastFinalChunkAssert(const Parser& parser, std::string_view given) {
  return parser.is_header_done() && parser.chunked() && given.size() == 4 &&
         given.substr(0, 3) == "0\r\n";
}

// One response being read: Beast's parser, the bytes it has not consumed yet and the caps.
class ResponseReader {
 public:
  explicit ResponseReader(const HttpResponseOptions& options) : options_(options) {
    parser_.get().body().sink = &options.body_sink;
    parser_.header_limit(options.max_header_bytes);
    parser_.body_limit(options.max_body_bytes);
    // Not eager: Boost 1.74's parser skips the Content-Length body_limit check when eager.
    // Not eager also makes put() stop after each header, chunk line or chunk body, which
    // PutPending relies on to hold each chunk line to the cap.
  }

  Status Read(ByteStream& stream, Deadline header_deadline, Deadline deadline);
  HttpResponse Release();

 private:
  Status FromBeast(boost::beast::error_code ec) const;
  // How many unconsumed bytes we hold for Beast: the whole header while it is incomplete (its
  // own header_limit answers first), then one piece of chunk framing.
  size_t Cap() const {
    return parser_.is_header_done() ? options_.max_chunk_framing_bytes : options_.max_header_bytes;
  }
  Status PutPending();
  Status Feed(std::string_view data);

  const HttpResponseOptions& options_;
  Parser parser_;
  // What Beast has not consumed yet: it wants those bytes again with more.
  std::string pending_;
};

Status ResponseReader::FromBeast(boost::beast::error_code ec) const {
  if (!ec) return Status::Ok();
  if (!parser_.get().body().sink_error.ok()) return parser_.get().body().sink_error;
  if (ec == http::error::body_limit) {
    return Status::InvalidArgument(options_.label + " response body exceeds " +
                                   std::to_string(options_.max_body_bytes) + " bytes");
  }
  if (ec == http::error::header_limit) {
    return Status::InvalidArgument(options_.label + " response headers exceed " +
                                   std::to_string(options_.max_header_bytes) + " bytes");
  }
  return Status::Unavailable("malformed HTTP response: " + ec.message());
}

// Gives Beast what it has not consumed yet. Once the header is done it is given at most the
// framing cap at a time, so that a chunk line longer than the cap is never parsed, even when
// it came in with the header under the (larger) header cap.
Status ResponseReader::PutPending() {
  while (!pending_.empty() && !parser_.is_done()) {
    std::string_view given = pending_;
    if (parser_.is_header_done()) given = given.substr(0, options_.max_chunk_framing_bytes);
    // An empty buffer (a framing cap of 0) would make no progress: Feed refuses at the cap.
    if (given.empty() || TripsBeastFinalChunkAssert(parser_, given)) return Status::Ok();
    boost::beast::error_code ec;
    size_t used = parser_.put(boost::asio::buffer(given.data(), given.size()), ec);
    pending_.erase(0, used);
    if (ec == http::error::need_more) return Status::Ok();
    if (ec) return FromBeast(ec);
  }
  return Status::Ok();
}

// Feeds `data` to Beast holding at most the cap unconsumed, so that a chunk line or trailer
// section longer than the cap is refused however the peer's bytes split into reads. Beast holds
// the headers under the header cap itself (its header_limit answers first).
Status ResponseReader::Feed(std::string_view data) {
  while (!data.empty() && !parser_.is_done()) {
    const size_t room = pending_.size() < Cap() ? Cap() - pending_.size() : 0;
    pending_.append(data.substr(0, room));
    data.remove_prefix(std::min(room, data.size()));
    if (Status put = PutPending(); !put.ok()) return put;
    if (pending_.size() >= Cap()) {  // full, and Beast wants more
      if (!parser_.is_header_done()) return FromBeast(http::error::header_limit);
      return Status::InvalidArgument(options_.label + " response chunk line or trailers exceed " +
                                     std::to_string(options_.max_chunk_framing_bytes) + " bytes");
    }
  }
  return Status::Ok();
}

// Reads until the response is complete, the peer closes, the deadline passes or the read is
// cancelled. Beast parses; we only move bytes.
Status ResponseReader::Read(ByteStream& stream, Deadline header_deadline, Deadline deadline) {
  char buf[16384];
  while (!parser_.is_done()) {
    Deadline phase = parser_.is_header_done() ? deadline : header_deadline;
    if (options_.cancelled != nullptr && *options_.cancelled) {
      return Status::Unavailable(options_.label + " request cancelled");
    }
    const Deadline wait =
        options_.cancelled != nullptr ? phase.Earlier(Deadline::After(kCancelPoll)) : phase;
    auto n = stream.ReadSome(buf, sizeof buf, wait);
    if (!n.ok() && n.status().code() == Status::Code::kDeadlineExceeded && !phase.expired()) {
      continue;  // a cancellation check, not the deadline
    }
    if (!n.ok() && n.status().code() == Status::Code::kDeadlineExceeded) {
      if (parser_.is_header_done()) {
        return Status::DeadlineExceeded(options_.label + " response body timed out");
      }
      if (options_.header_timeout.count() > 0) {
        return Status::DeadlineExceeded("no response headers within " +
                                        std::to_string(options_.header_timeout.count()) + " ms");
      }
      return Status::DeadlineExceeded(options_.label + " response headers timed out");
    }
    if (!n.ok()) return n.status();
    if (*n > 0) {
      if (Status fed = Feed(std::string_view(buf, *n)); !fed.ok()) return fed;
      continue;
    }
    // Beast requires input before put_eof (an assertion aborts a build with asserts on).
    if (!parser_.got_some()) return Status::Unavailable("connection closed before any response");
    boost::beast::error_code ec;
    parser_.put_eof(ec);
    if (ec) return FromBeast(ec);
    if (!parser_.is_done()) return Status::Unavailable("connection closed early");
  }
  return Status::Ok();
}

HttpResponse ResponseReader::Release() {
  auto message = parser_.release();
  HttpResponse out;
  out.status = static_cast<int>(message.result_int());
  out.content_type = std::string(message[http::field::content_type]);
  out.location = std::string(message[http::field::location]);
  out.body = std::move(message.body().text);
  return out;
}

// A bound of its own within deadline, or deadline when the bound is 0.
Deadline Within(Deadline deadline, milliseconds bound) {
  return bound.count() > 0 ? deadline.Earlier(Deadline::After(bound)) : deadline;
}

}  // namespace

// Boost 1.74 has no URL parser, and this takes only what a plain-HTTP API's URL looks like.
StatusOr<HttpUrl> ParseHttpUrl(std::string_view url, std::string_view what) {
  constexpr std::string_view kScheme = "http://";
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string(what) + " " + std::string(url) + ": " + why);
  };
  if (url.substr(0, kScheme.size()) != kScheme) return bad("only http:// is supported");
  if (HasCtlOrSpace(url)) return bad("spaces and control characters must be percent-encoded");
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

StatusOr<std::string> BuildGetRequest(const HttpUrl& url, const HttpRequestOptions& options) {
  // Beast 1.74 writes names and values as given: a line break in one would start a header or
  // a request of the caller's bytes' choosing. Go's Transport.roundTrip (net/http/transport.go)
  // refuses the same ones.
  for (const HttpHeader& header : options.headers) {
    if (Status field = CheckField(header.name, header.value); !field.ok()) return field;
  }
  Status valid = CheckField("Accept", options.accept);
  if (valid.ok()) valid = CheckField("User-Agent", options.user_agent);
  if (!valid.ok()) return valid;
  if (HasCtlOrSpace(url.host) || HasCtlOrSpace(url.target)) {
    return Status::InvalidArgument("request host or target holds a space or control character");
  }

  http::request<http::empty_body> req{http::verb::get, url.target, 11};
  if (!options.host.empty()) {
    if (HasCtlOrSpace(options.host)) {
      return Status::InvalidArgument("request host holds a space or control character");
    }
    req.set(http::field::host, options.host);
  } else {
    req.set(http::field::host,
            url.port != 80 ? JoinHostPort(url.host, url.port) : BracketHost(url.host));
  }
  for (const HttpHeader& header : options.headers) req.insert(header.name, header.value);
  if (!options.accept.empty()) req.set(http::field::accept, options.accept);
  if (!options.user_agent.empty()) req.set(http::field::user_agent, options.user_agent);
  req.set(http::field::connection, "close");
  std::ostringstream out;
  out << req;
  return out.str();
}

StatusOr<HttpResponse> ReadHttpResponse(ByteStream& stream, const HttpResponseOptions& options,
                                        Deadline header_deadline, Deadline deadline) {
  ResponseReader reader(options);
  if (Status read = reader.Read(stream, header_deadline, deadline); !read.ok()) return read;
  return reader.Release();
}

StatusOr<HttpResponse> HttpGet(std::string_view url, const HttpGetOptions& options,
                               Deadline deadline) {
  auto parsed = ParseHttpUrl(url, options.url_label);
  if (!parsed.ok()) return parsed.status();
  auto request = BuildGetRequest(*parsed, options.request);
  if (!request.ok()) return request.status();
  const std::string what = "GET " + std::string(url);

  // Never through a proxy: the callers' endpoints are link-local (IMDS) or in-cluster.
  auto fd = DialTcp(parsed->host, parsed->port, Within(deadline, options.connect_timeout));
  if (!fd.ok()) return fd.status().Annotate(what);
  TcpStream stream(std::move(*fd));
  Status sent = stream.WriteAll(*request, deadline);
  if (!sent.ok()) return sent.Annotate(what);
  auto response = ReadHttpResponse(stream, options.response,
                                   Within(deadline, options.response.header_timeout), deadline);
  // Caps name themselves; transport failures name the request.
  if (!response.ok() && response.status().code() != Status::Code::kInvalidArgument) {
    return response.status().Annotate(what);
  }
  return response;
}

}  // namespace hotfix::wire
