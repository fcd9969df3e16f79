// CallUnary against an in-process nghttp2 server session on another thread, connected by an
// in-memory pipe; each test scripts what the server does once the request is complete. A few
// tests feed hand-built frames through ScriptedByteStream, the seam a fuzzer uses.
#include "wire/grpc_unary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "h2_frames.h"
#include "raw_h2_server.h"
#include "wire/memory_stream.h"

namespace hotfix::wire {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

using testsupport::GrpcFrame;
using testsupport::GrpcTrailers;
using testsupport::HeaderList;
using testsupport::h2::ToNv;

const HeaderList kGrpcHeaders = {{":status", "200"}, {"content-type", "application/grpc"}};

HeaderList Concat(HeaderList a, const HeaderList& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct SeenHeader {
  std::string name;
  std::string value;
  uint8_t flags = 0;
};

// What the server received.
struct SeenRequest {
  std::vector<SeenHeader> headers;
  std::string body;
  bool end_stream = false;
  std::vector<nghttp2_settings_entry> settings;

  std::optional<SeenHeader> Find(const std::string& name) const {
    for (const auto& h : headers) {
      if (h.name == name) return h;
    }
    return std::nullopt;
  }
  std::string Value(const std::string& name) const {
    auto h = Find(name);
    return h ? h->value : "<absent>";
  }
  std::optional<uint32_t> Setting(int32_t id) const {
    for (const auto& s : settings) {
      if (s.settings_id == id) return s.value;
    }
    return std::nullopt;
  }
};

class FakeServer;
// Runs on the server thread once the whole request has arrived; may do nothing (hang).
using Script = std::function<void(FakeServer&)>;

class FakeServer {
 public:
  FakeServer(std::unique_ptr<MemoryPipeEnd> conn, Script script)
      : conn_(std::move(conn)), script_(std::move(script)), thread_([this] { Serve(); }) {}
  ~FakeServer() { Join(); }

  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  const SeenRequest& seen() {
    Join();
    return seen_;
  }

  // ---- Script actions, on the server thread. ----

  // Response headers, body as DATA, then trailers (or END_STREAM on the DATA without them).
  void Respond(const HeaderList& headers, std::string body, std::optional<HeaderList> trailers) {
    body_ = std::move(body);
    trailers_ = std::move(trailers);
    nghttp2_data_provider provider;
    provider.source.ptr = this;
    provider.read_callback = ReadBody;
    auto nv = ToNv(headers);
    ASSERT_EQ(nghttp2_submit_response(session_, 1, nv.data(), nv.size(), &provider), 0);
  }
  // One HEADERS frame with END_STREAM.
  void TrailersOnly(const HeaderList& headers) {
    auto nv = ToNv(headers);
    ASSERT_EQ(nghttp2_submit_response(session_, 1, nv.data(), nv.size(), nullptr), 0);
  }
  // HEADERS without END_STREAM (interim or the start of a response that goes nowhere).
  void SendHeaders(const HeaderList& headers) {
    auto nv = ToNv(headers);
    ASSERT_EQ(nghttp2_submit_headers(session_, NGHTTP2_FLAG_NONE, 1, nullptr, nv.data(), nv.size(),
                                     nullptr),
              0);
  }
  void ResetStream(uint32_t code) {
    ASSERT_EQ(nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, 1, code), 0);
  }
  void Goaway(int32_t last_stream_id, uint32_t code, const std::string& debug = "") {
    ASSERT_EQ(nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, last_stream_id, code,
                                    reinterpret_cast<const uint8_t*>(debug.data()), debug.size()),
              0);
  }
  // After what is queued has been sent.
  void CloseConnection() { close_ = true; }
  void ResetConnection() { reset_ = true; }

 private:
  void Serve() {
    nghttp2_session_callbacks* callbacks;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_send_callback(callbacks, OnSend);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, OnData);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, OnFrame);
    nghttp2_session_server_new(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
    Loop();
    nghttp2_session_del(session_);
    conn_.reset();
  }

  void Loop() {
    // A safety net: a broken test must not hang the suite.
    Deadline give_up = Deadline::After(20s);
    char buf[16384];
    while (true) {
      if (nghttp2_session_send(session_) != 0) return;
      if (close_) return conn_->Close();
      if (reset_) return conn_->Reset();
      if (request_done_ && !script_ran_) {
        script_ran_ = true;
        script_(*this);
        continue;
      }
      auto n = conn_->ReadSome(buf, sizeof(buf), give_up);
      if (!n.ok() || *n == 0) return;
      if (nghttp2_session_mem_recv(session_, reinterpret_cast<uint8_t*>(buf), *n) < 0) return;
    }
  }

  static FakeServer& Self(void* ud) { return *static_cast<FakeServer*>(ud); }

  static ssize_t OnSend(nghttp2_session*, const uint8_t* data, size_t len, int, void* ud) {
    Status s = Self(ud).conn_->WriteAll(std::string_view(reinterpret_cast<const char*>(data), len),
                                        Deadline::After(5s));
    return s.ok() ? static_cast<ssize_t>(len) : ssize_t{NGHTTP2_ERR_CALLBACK_FAILURE};
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame*, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t flags, void* ud) {
    Self(ud).seen_.headers.push_back({std::string(reinterpret_cast<const char*>(name), namelen),
                                      std::string(reinterpret_cast<const char*>(value), valuelen),
                                      flags});
    return 0;
  }

  static int OnData(nghttp2_session*, uint8_t, int32_t, const uint8_t* data, size_t len, void* ud) {
    Self(ud).seen_.body.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }

  static int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* ud) {
    FakeServer& self = Self(ud);
    if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
      self.seen_.settings.assign(frame->settings.iv, frame->settings.iv + frame->settings.niv);
    }
    if (frame->hd.stream_id == 1 && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      self.seen_.end_stream = true;
      self.request_done_ = true;
    }
    return 0;
  }

  static ssize_t ReadBody(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                          uint32_t* data_flags, nghttp2_data_source*, void* ud) {
    FakeServer& self = Self(ud);
    size_t n = std::min(length, self.body_.size() - self.body_sent_);
    std::memcpy(buf, self.body_.data() + self.body_sent_, n);
    self.body_sent_ += n;
    if (self.body_sent_ == self.body_.size()) {
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
      if (self.trailers_) {
        *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        auto nv = ToNv(*self.trailers_);
        nghttp2_submit_trailer(session, stream_id, nv.data(), nv.size());
      }
    }
    return static_cast<ssize_t>(n);
  }

  std::unique_ptr<MemoryPipeEnd> conn_;
  Script script_;
  nghttp2_session* session_ = nullptr;
  SeenRequest seen_;
  bool request_done_ = false;
  bool script_ran_ = false;
  bool close_ = false;
  bool reset_ = false;
  std::string body_;
  size_t body_sent_ = 0;
  std::optional<HeaderList> trailers_;
  std::thread thread_;  // last: starts after every other member is ready
};

UnaryRequest DefaultRequest() {
  UnaryRequest request;
  request.authority = "myaks-dns.hcp.eastus.azmk8s.io:443";
  request.path = "/akslivepatching.v1.LivePatchingService/GetComponentConfig";
  request.user_agent = "hotfix-agent/test";
  request.metadata = {{"authorization", "c2lnbmF0dXJl", true}, {"x-trace", "abc", false}};
  request.message =
      "\x0a\x11"
      "aksNodeController";
  return request;
}

struct CallResult {
  UnaryResponse response;
  SeenRequest seen;
  std::chrono::milliseconds elapsed;
};

CallResult RunCall(Script script, const UnaryRequest& request = DefaultRequest(),
                   Deadline deadline = Deadline::After(5s)) {
  auto [client, server_end] = NewMemoryPipe();
  FakeServer server(std::move(server_end), std::move(script));
  auto start = std::chrono::steady_clock::now();
  UnaryResponse response = CallUnary(*client, request, deadline);
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  client.reset();  // the server sees the connection close and stops
  return {std::move(response), server.seen(), elapsed};
}

// ---- Success and the request on the wire. ----

TEST(CallUnary, OkResponseWithTrailers) {
  auto r = RunCall(
      [](FakeServer& s) { s.Respond(kGrpcHeaders, GrpcFrame("the-config"), GrpcTrailers(0)); });
  EXPECT_TRUE(r.response.status.ok()) << r.response.status.ToString();
  EXPECT_TRUE(r.response.from_server);
  EXPECT_EQ(r.response.message, "the-config");
}

TEST(CallUnary, EmptyMessageIsAMessage) {
  auto r = RunCall([](FakeServer& s) { s.Respond(kGrpcHeaders, GrpcFrame(""), GrpcTrailers(0)); });
  EXPECT_TRUE(r.response.status.ok()) << r.response.status.ToString();
  EXPECT_EQ(r.response.message, "");
}

TEST(CallUnary, RequestAsTheServerSawIt) {
  auto r = RunCall([](FakeServer& s) { s.Respond(kGrpcHeaders, GrpcFrame("x"), GrpcTrailers(0)); },
                   DefaultRequest(), Deadline::After(3000ms));
  const SeenRequest& seen = r.seen;
  EXPECT_EQ(seen.Value(":method"), "POST");
  EXPECT_EQ(seen.Value(":scheme"), "https");
  EXPECT_EQ(seen.Value(":path"), "/akslivepatching.v1.LivePatchingService/GetComponentConfig");
  EXPECT_EQ(seen.Value(":authority"), "myaks-dns.hcp.eastus.azmk8s.io:443");
  EXPECT_EQ(seen.Value("content-type"), "application/grpc");
  EXPECT_EQ(seen.Value("te"), "trailers");
  EXPECT_EQ(seen.Value("user-agent"), "hotfix-agent/test");
  EXPECT_EQ(seen.Value("x-trace"), "abc");

  std::string timeout = seen.Value("grpc-timeout");
  ASSERT_THAT(timeout, ::testing::MatchesRegex("[0-9]{1,8}m"));
  int64_t ms = std::stoll(timeout.substr(0, timeout.size() - 1));
  EXPECT_LE(ms, 3000);
  EXPECT_GT(ms, 0);

  auto auth = seen.Find("authorization");
  ASSERT_TRUE(auth.has_value());
  EXPECT_EQ(auth->value, "c2lnbmF0dXJl");
  EXPECT_TRUE(auth->flags & NGHTTP2_NV_FLAG_NO_INDEX) << "credential must be never-indexed";
  auto trace = seen.Find("x-trace");
  ASSERT_TRUE(trace.has_value());
  EXPECT_FALSE(trace->flags & NGHTTP2_NV_FLAG_NO_INDEX);

  // Pseudo-headers first, as HTTP/2 requires.
  ASSERT_GE(seen.headers.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(seen.headers[i].name[0], ':');

  EXPECT_EQ(seen.body, GrpcFrame(DefaultRequest().message));
  EXPECT_TRUE(seen.end_stream);
  EXPECT_EQ(seen.Setting(NGHTTP2_SETTINGS_ENABLE_PUSH), 0u);
  ASSERT_TRUE(seen.Setting(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE).has_value());
  EXPECT_GE(*seen.Setting(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE), 4u << 20);
}

TEST(CallUnary, NoTimeoutHeaderWithoutDeadlineAndNoEmptyUserAgent) {
  UnaryRequest request = DefaultRequest();
  request.user_agent.clear();
  auto r = RunCall([](FakeServer& s) { s.Respond(kGrpcHeaders, GrpcFrame("x"), GrpcTrailers(0)); },
                   request, Deadline::Infinite());
  EXPECT_TRUE(r.response.status.ok()) << r.response.status.ToString();
  EXPECT_FALSE(r.seen.Find("grpc-timeout").has_value());
  EXPECT_FALSE(r.seen.Find("user-agent").has_value());
}

TEST(CallUnary, InterimResponseIsSkipped) {
  auto r = RunCall([](FakeServer& s) {
    s.SendHeaders({{":status", "100"}});
    s.Respond(kGrpcHeaders, GrpcFrame("x"), GrpcTrailers(0));
  });
  EXPECT_TRUE(r.response.status.ok()) << r.response.status.ToString();
  EXPECT_EQ(r.response.message, "x");
}

TEST(CallUnary, GrpcContentSubtypeAccepted) {
  auto r = RunCall([](FakeServer& s) {
    s.Respond({{":status", "200"}, {"content-type", "application/grpc+proto"}}, GrpcFrame("x"),
              GrpcTrailers(0));
  });
  EXPECT_TRUE(r.response.status.ok()) << r.response.status.ToString();
}

TEST(CallUnary, FourMiBResponseArrives) {
  std::string big(4 << 20, 'z');
  auto r =
      RunCall([&big](FakeServer& s) { s.Respond(kGrpcHeaders, GrpcFrame(big), GrpcTrailers(0)); });
  ASSERT_TRUE(r.response.status.ok()) << r.response.status.ToString();
  EXPECT_EQ(r.response.message.size(), big.size());
  EXPECT_EQ(r.response.message, big);
}

// ---- Status from the server. ----

TEST(CallUnary, TrailersOnlyErrorWithPercentEncodedMessage) {
  auto r = RunCall([](FakeServer& s) {
    s.TrailersOnly(Concat(kGrpcHeaders, GrpcTrailers(5, "no%20hotfix%3A caf%C3%A9 %zz")));
  });
  EXPECT_EQ(r.response.status.code, GrpcCode::kNotFound);
  EXPECT_EQ(r.response.status.message, "no hotfix: caf\xC3\xA9 %zz");
  EXPECT_TRUE(r.response.from_server);
  EXPECT_EQ(r.response.message, "");
}

TEST(CallUnary, EveryCodeRoundTripsTrailersOnly) {
  for (int code = 1; code <= 16; ++code) {
    auto r = RunCall([code](FakeServer& s) {
      s.TrailersOnly(Concat(kGrpcHeaders, GrpcTrailers(code, "msg%20" + std::to_string(code))));
    });
    EXPECT_EQ(static_cast<int>(r.response.status.code), code);
    EXPECT_EQ(r.response.status.message, "msg " + std::to_string(code));
    EXPECT_TRUE(r.response.from_server);
  }
}

TEST(CallUnary, EveryCodeRoundTripsInTrailers) {
  for (int code = 0; code <= 16; ++code) {
    auto r = RunCall([code](FakeServer& s) {
      s.Respond(kGrpcHeaders, GrpcFrame("body"), GrpcTrailers(code, "m"));
    });
    EXPECT_EQ(static_cast<int>(r.response.status.code), code);
    EXPECT_TRUE(r.response.from_server);
    // The message is returned only with OK.
    EXPECT_EQ(r.response.message, code == 0 ? "body" : "");
  }
}

TEST(CallUnary, HttpStatusWithoutGrpcStatusMapsByTable) {
  const std::vector<std::pair<int, GrpcCode>> cases = {
      {400, GrpcCode::kInternal},         {401, GrpcCode::kUnauthenticated},
      {403, GrpcCode::kPermissionDenied}, {404, GrpcCode::kUnimplemented},
      {429, GrpcCode::kUnavailable},      {502, GrpcCode::kUnavailable},
      {503, GrpcCode::kUnavailable},      {504, GrpcCode::kUnavailable},
      {500, GrpcCode::kUnknown},          {418, GrpcCode::kUnknown}};
  for (const auto& [http, code] : cases) {
    auto r = RunCall([http = http](FakeServer& s) {
      s.TrailersOnly({{":status", std::to_string(http)}});
    });
    EXPECT_EQ(r.response.status.code, code) << http;
    EXPECT_THAT(r.response.status.message, HasSubstr(std::to_string(http)));
    EXPECT_TRUE(r.response.from_server);
  }
}

TEST(CallUnary, HttpErrorWithHtmlBodyDecidedAtHeaders) {
  for (int http : {404, 503}) {
    auto r = RunCall([http](FakeServer& s) {
      s.Respond({{":status", std::to_string(http)}, {"content-type", "text/html"}},
                "<html>nope</html>", std::nullopt);
    });
    EXPECT_EQ(r.response.status.code, GrpcCodeFromHttpStatus(http));
    EXPECT_THAT(
        r.response.status.message,
        HasSubstr("unexpected HTTP status code received from server: " + std::to_string(http)));
  }
}

TEST(CallUnary, GrpcStatusWinsOverHttpStatus) {
  auto r = RunCall([](FakeServer& s) {
    s.TrailersOnly({{":status", "404"},
                    {"content-type", "application/grpc"},
                    {"grpc-status", "5"},
                    {"grpc-message", "gone"}});
  });
  EXPECT_EQ(r.response.status.code, GrpcCode::kNotFound);
  EXPECT_EQ(r.response.status.message, "gone");

  r = RunCall([](FakeServer& s) {
    s.TrailersOnly({{":status", "503"}, {"grpc-status", "14"}, {"grpc-message", "draining"}});
  });
  EXPECT_EQ(r.response.status.code, GrpcCode::kUnavailable);
  EXPECT_EQ(r.response.status.message, "draining");
  EXPECT_TRUE(r.response.from_server);
}

TEST(CallUnary, NonGrpcContentTypeIsUnknown) {
  auto r = RunCall([](FakeServer& s) {
    s.Respond({{":status", "200"}, {"content-type", "text/html"}}, "<html/>", std::nullopt);
  });
  EXPECT_EQ(r.response.status.code, GrpcCode::kUnknown);
  EXPECT_THAT(r.response.status.message, HasSubstr("text/html"));

  r = RunCall([](FakeServer& s) {
    s.Respond({{":status", "200"}, {"content-type", "application/grpcx"}}, GrpcFrame("x"),
              GrpcTrailers(0));
  });
  EXPECT_EQ(r.response.status.code, GrpcCode::kUnknown);

  r = RunCall([](FakeServer& s) {
    s.Respond({{":status", "200"}}, GrpcFrame("x"), GrpcTrailers(0));
  });
  EXPECT_EQ(r.response.status.code, GrpcCode::kUnknown);
  EXPECT_THAT(r.response.status.message, HasSubstr("no content-type"));
}

// ---- Missing or malformed status. ----

TEST(CallUnary, MissingTrailers) {
  auto r = RunCall([](FakeServer& s) { s.Respond(kGrpcHeaders, GrpcFrame("x"), std::nullopt); });
  EXPECT_EQ(r.response.status.code, GrpcCode::kInternal);
  EXPECT_EQ(r.response.status.message, "server closed the stream without sending trailers");
  EXPECT_FALSE(r.response.from_server);
  EXPECT_EQ(r.response.message, "");
}

TEST(CallUnary, HeadersOnlyWithoutGrpcStatus) {
  auto r = RunCall([](FakeServer& s) { s.TrailersOnly(kGrpcHeaders); });
  EXPECT_EQ(r.response.status.code, GrpcCode::kInternal);
  EXPECT_EQ(r.response.status.message, "server closed the stream without sending trailers");
}

TEST(CallUnary, TrailersWithoutGrpcStatus) {
  auto r = RunCall([](FakeServer& s) {
    s.Respond(kGrpcHeaders, GrpcFrame("x"), HeaderList{{"x-other", "1"}});
  });
  EXPECT_EQ(r.response.status.code, GrpcCode::kInternal);
  EXPECT_THAT(r.response.status.message, HasSubstr("without grpc-status"));
}

TEST(CallUnary, MalformedGrpcStatus) {
  for (const char* bad : {"abc", "17", "-1", ""}) {
    auto r = RunCall([bad](FakeServer& s) {
      s.Respond(kGrpcHeaders, GrpcFrame("x"), HeaderList{{"grpc-status", bad}});
    });
    EXPECT_EQ(r.response.status.code, GrpcCode::kInternal) << bad;
    EXPECT_THAT(r.response.status.message, HasSubstr("malformed grpc-status"));
    EXPECT_FALSE(r.response.from_server);
  }
}

// ---- The message framing. ----

TEST(CallUnary, CompressedFlagRejected) {
  auto r =
      RunCall([](FakeServer& s) { s.Respond(kGrpcHeaders, GrpcFrame("x", 1), GrpcTrailers(0)); });
  EXPECT_EQ(r.response.status.code, GrpcCode::kInternal);
  EXPECT_EQ(r.response.status.message, "compressed response not supported");
  EXPECT_FALSE(r.response.from_server);
}

TEST(CallUnary, UnknownFlagRejected) {
  auto r =
      RunCall([](FakeServer& s) { s.Respond(kGrpcHeaders, GrpcFrame("x", 7), GrpcTrailers(0)); });
  EXPECT_EQ(r.response.status.code, GrpcCode::kInternal);
  EXPECT_THAT(r.response.status.message, HasSubstr("unexpected payload format"));
}

TEST(CallUnary, TwoMessagesRejected) {
  auto r = RunCall([](FakeServer& s) {
    s.Respond(kGrpcHeaders, GrpcFrame("one") + GrpcFrame("two"), GrpcTrailers(0));
  });
  EXPECT_EQ(r.response.status.code, GrpcCode::kInternal);
  EXPECT_THAT(r.response.status.message, HasSubstr("cardinality violation"));
  EXPECT_EQ(r.response.message, "");
}

TEST(CallUnary, NoMessageWithOkRejected) {
  auto r = RunCall([](FakeServer& s) { s.TrailersOnly(Concat(kGrpcHeaders, GrpcTrailers(0))); });
  EXPECT_EQ(r.response.status.code, GrpcCode::kInternal);
  EXPECT_THAT(r.response.status.message, HasSubstr("received no response message"));
}

TEST(CallUnary, LengthPrefixLongerThanData) {
  auto r = RunCall(
      [](FakeServer& s) { s.Respond(kGrpcHeaders, GrpcFrame("hello", 0, 10), GrpcTrailers(0)); });
  EXPECT_EQ(r.response.status.code, GrpcCode::kInternal);
  EXPECT_THAT(r.response.status.message, HasSubstr("truncated message: 5 of 10"));
}

TEST(CallUnary, LengthPrefixShorterThanData) {
  auto r = RunCall(
      [](FakeServer& s) { s.Respond(kGrpcHeaders, GrpcFrame("hello", 0, 2), GrpcTrailers(0)); });
  EXPECT_EQ(r.response.status.code, GrpcCode::kInternal);
  EXPECT_THAT(r.response.status.message, HasSubstr("3 stray bytes"));
}

TEST(CallUnary, PartialPrefixOnly) {
  auto r = RunCall(
      [](FakeServer& s) { s.Respond(kGrpcHeaders, std::string("\0\0", 2), GrpcTrailers(0)); });
  EXPECT_EQ(r.response.status.code, GrpcCode::kInternal);
  EXPECT_EQ(r.response.status.message, "server sent a truncated length prefix");
}

TEST(CallUnary, ErrorStatusIgnoresBrokenBody) {
  auto r = RunCall([](FakeServer& s) {
    s.Respond(kGrpcHeaders, GrpcFrame("hello", 0, 10), GrpcTrailers(9, "precondition"));
  });
  EXPECT_EQ(r.response.status.code, GrpcCode::kFailedPrecondition);
  EXPECT_EQ(r.response.status.message, "precondition");
}

TEST(CallUnary, FiveMiBOverDefaultMax) {
  std::string big(5 << 20, 'q');
  auto r =
      RunCall([&big](FakeServer& s) { s.Respond(kGrpcHeaders, GrpcFrame(big), GrpcTrailers(0)); });
  EXPECT_EQ(r.response.status.code, GrpcCode::kResourceExhausted);
  EXPECT_EQ(r.response.status.message,
            "grpc: received message larger than max (5242880 vs. 4194304)");
  EXPECT_FALSE(r.response.from_server);
  EXPECT_EQ(r.response.message, "");
}

TEST(CallUnary, MaxIsInclusive) {
  UnaryRequest request = DefaultRequest();
  request.max_response_bytes = 1000;
  auto at_max = RunCall(
      [](FakeServer& s) {
        s.Respond(kGrpcHeaders, GrpcFrame(std::string(1000, 'a')), GrpcTrailers(0));
      },
      request);
  EXPECT_TRUE(at_max.response.status.ok()) << at_max.response.status.ToString();
  EXPECT_EQ(at_max.response.message.size(), 1000u);

  auto over = RunCall(
      [](FakeServer& s) {
        s.Respond(kGrpcHeaders, GrpcFrame(std::string(1001, 'a')), GrpcTrailers(0));
      },
      request);
  EXPECT_EQ(over.response.status.code, GrpcCode::kResourceExhausted);
  EXPECT_THAT(over.response.status.message, HasSubstr("(1001 vs. 1000)"));
}

// ---- HTTP/2 and transport failures. ----

TEST(CallUnary, RstStreamMapsLikeGrpcGo) {
  const std::vector<std::pair<uint32_t, GrpcCode>> cases = {
      {NGHTTP2_REFUSED_STREAM, GrpcCode::kUnavailable},
      {NGHTTP2_CANCEL, GrpcCode::kCanceled},
      {NGHTTP2_PROTOCOL_ERROR, GrpcCode::kInternal},
      {NGHTTP2_INTERNAL_ERROR, GrpcCode::kInternal},
      {NGHTTP2_NO_ERROR, GrpcCode::kInternal},
      {NGHTTP2_ENHANCE_YOUR_CALM, GrpcCode::kResourceExhausted},
      {NGHTTP2_INADEQUATE_SECURITY, GrpcCode::kPermissionDenied},
      {0x77, GrpcCode::kUnknown}};
  for (const auto& [h2, code] : cases) {
    auto r = RunCall([h2 = h2](FakeServer& s) { s.ResetStream(h2); });
    EXPECT_EQ(r.response.status.code, code) << h2;
    EXPECT_THAT(r.response.status.message,
                HasSubstr("stream terminated by RST_STREAM with error code: "));
    EXPECT_FALSE(r.response.from_server);
  }
}

TEST(CallUnary, RstStreamAfterHeaders) {
  auto r = RunCall([](FakeServer& s) {
    s.SendHeaders(kGrpcHeaders);
    s.ResetStream(NGHTTP2_CANCEL);
  });
  EXPECT_EQ(r.response.status.code, GrpcCode::kCanceled);
  EXPECT_THAT(r.response.status.message, HasSubstr("CANCEL"));
}

TEST(CallUnary, GoawayBeforeResponse) {
  auto r = RunCall([](FakeServer& s) { s.Goaway(0, NGHTTP2_NO_ERROR, "shutting down"); });
  EXPECT_EQ(r.response.status.code, GrpcCode::kUnavailable);
  EXPECT_THAT(r.response.status.message, HasSubstr("GOAWAY"));
  EXPECT_THAT(r.response.status.message, HasSubstr("shutting down"));
  EXPECT_FALSE(r.response.from_server);
}

TEST(CallUnary, GracefulGoawayStillAnswers) {
  auto r = RunCall([](FakeServer& s) {
    s.Goaway(1, NGHTTP2_NO_ERROR);
    s.Respond(kGrpcHeaders, GrpcFrame("x"), GrpcTrailers(0));
  });
  EXPECT_TRUE(r.response.status.ok()) << r.response.status.ToString();
  EXPECT_EQ(r.response.message, "x");
}

TEST(CallUnary, GoawayThenCloseMidResponse) {
  auto r = RunCall([](FakeServer& s) {
    s.SendHeaders(kGrpcHeaders);
    s.Goaway(1, NGHTTP2_NO_ERROR);
    s.CloseConnection();
  });
  EXPECT_EQ(r.response.status.code, GrpcCode::kUnavailable);
  EXPECT_THAT(r.response.status.message, HasSubstr("after GOAWAY"));
}

TEST(CallUnary, AnswerThenImmediateCloseStillDelivered) {
  // The answer spans several reads; writing our SETTINGS ACK fails meanwhile.
  std::string message(200 * 1024, 'm');
  auto r = RunCall([&message](FakeServer& s) {
    s.Respond(kGrpcHeaders, GrpcFrame(message), GrpcTrailers(0));
    s.CloseConnection();
  });
  ASSERT_TRUE(r.response.status.ok()) << r.response.status.ToString();
  EXPECT_EQ(r.response.message, message);
}

TEST(CallUnary, PeerClosesConnection) {
  auto r = RunCall([](FakeServer& s) { s.CloseConnection(); });
  EXPECT_EQ(r.response.status.code, GrpcCode::kUnavailable);
  EXPECT_THAT(r.response.status.message, HasSubstr("connection closed"));
  EXPECT_FALSE(r.response.from_server);
}

TEST(CallUnary, PeerResetsConnection) {
  auto r = RunCall([](FakeServer& s) { s.ResetConnection(); });
  EXPECT_EQ(r.response.status.code, GrpcCode::kUnavailable);
  EXPECT_THAT(r.response.status.message, HasSubstr("connection reset"));
}

TEST(CallUnary, PeerNeverAnswersHitsDeadline) {
  auto r = RunCall([](FakeServer&) {}, DefaultRequest(), Deadline::After(300ms));
  EXPECT_EQ(r.response.status.code, GrpcCode::kDeadlineExceeded);
  EXPECT_EQ(r.response.status.message, "context deadline exceeded");
  EXPECT_FALSE(r.response.from_server);
  EXPECT_GE(r.elapsed, 250ms);
  EXPECT_LT(r.elapsed, 3s);
}

TEST(CallUnary, ExpiredDeadlineSendsNothing) {
  ScriptedByteStream stream("");
  auto response = CallUnary(stream, DefaultRequest(), Deadline::After(-1ms));
  EXPECT_EQ(response.status.code, GrpcCode::kDeadlineExceeded);
  EXPECT_EQ(stream.written(), "");
}

TEST(CallUnary, InvalidRequestSendsNothing) {
  std::vector<UnaryRequest> bad(6, DefaultRequest());
  bad[0].path = "no-slash";
  bad[1].authority = "";
  bad[2].metadata = {{"Authorization", "x", true}};
  bad[3].metadata = {{"te", "x", false}};
  bad[4].metadata = {{"authorization", "line\r\nbreak", true}};
  bad[5].metadata = {{"trace-bin", "x", false}};
  for (const auto& request : bad) {
    ScriptedByteStream stream("");
    auto response = CallUnary(stream, request, Deadline::After(1s));
    EXPECT_EQ(response.status.code, GrpcCode::kInternal);
    EXPECT_THAT(response.status.message, StartsWith("invalid request"));
    EXPECT_EQ(response.status.message.find("line"), std::string::npos) << "value echoed";
    EXPECT_EQ(stream.written(), "");
  }
}

// ---- Raw server bytes through ScriptedByteStream: the fuzzer's entry point. ----

std::string Hpack(nghttp2_hd_deflater* deflater, const HeaderList& headers) {
  auto nv = ToNv(headers);
  std::string out(nghttp2_hd_deflate_bound(deflater, nv.data(), nv.size()), '\0');
  ssize_t n = nghttp2_hd_deflate_hd(deflater, reinterpret_cast<uint8_t*>(out.data()), out.size(),
                                    nv.data(), nv.size());
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

// A complete server reply: SETTINGS, response HEADERS, one DATA, trailers.
std::string CannedOkReply(const std::string& message) {
  nghttp2_hd_deflater* deflater;
  nghttp2_hd_deflate_new(&deflater, 4096);
  std::string headers = Hpack(deflater, kGrpcHeaders);
  std::string trailers = Hpack(deflater, GrpcTrailers(0));
  nghttp2_hd_deflate_del(deflater);
  namespace h2 = testsupport::h2;
  return h2::Settings() + h2::Headers(1, headers, h2::kEndHeaders) +
         h2::Data(1, GrpcFrame(message), /*end_stream=*/false) +
         h2::Headers(1, trailers, h2::kEndHeaders | h2::kEndStream);
}

TEST(CallUnaryRawBytes, CannedReply) {
  for (size_t chunk : {size_t{1}, size_t{7}, SIZE_MAX}) {
    ScriptedByteStream stream(CannedOkReply("canned"), chunk);
    auto response = CallUnary(stream, DefaultRequest(), Deadline::After(5s));
    EXPECT_TRUE(response.status.ok()) << chunk << ": " << response.status.ToString();
    EXPECT_EQ(response.message, "canned");
    EXPECT_THAT(stream.written(), StartsWith("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
  }
}

TEST(CallUnaryRawBytes, EveryTruncationFailsCleanly) {
  std::string reply = CannedOkReply("canned");
  for (size_t cut = 0; cut < reply.size(); ++cut) {
    ScriptedByteStream stream(reply.substr(0, cut));
    auto response = CallUnary(stream, DefaultRequest(), Deadline::After(5s));
    EXPECT_EQ(response.status.code, GrpcCode::kUnavailable) << cut;
  }
}

TEST(CallUnaryRawBytes, GarbageIsAConnectionError) {
  ScriptedByteStream stream(std::string(64, '\xff'));
  auto response = CallUnary(stream, DefaultRequest(), Deadline::After(5s));
  EXPECT_FALSE(response.status.ok());
  EXPECT_FALSE(response.from_server);
}

}  // namespace
}  // namespace hotfix::wire
