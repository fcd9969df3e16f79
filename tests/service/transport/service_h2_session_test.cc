// H2Session on its own, with a fake clock and no sockets: wire::CallUnary (the node's
// client) talks to it through a ByteStream that feeds the session in the same thread. The
// interop with libgrpc++ and grpc-go clients, TLS and the event loops is
// tests/integration/service_e2e_test.cc; the limits under attack are
// tests/integration/service_attack_test.cc.
#include "service/transport/h2_session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "h2_frames.h"
#include "service/transport/connection_memory.h"
#include "wire/grpc_unary.h"

namespace hotfix::service {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using wire::GrpcCode;

constexpr char kPath[] = "/akslivepatching.v1.LivePatchingService/GetComponentConfig";

// Echoes what it saw, or what the test tells it to answer.
class RecordingHandler : public GrpcHandler {
 public:
  void Handle(const GrpcCall& call, GrpcReply* reply) override {
    paths.emplace_back(call.path);
    peers.emplace_back(call.peer);
    authority.assign(call.authority);
    metadata.clear();
    for (const auto& [k, v] : call.metadata) metadata.emplace_back(std::string(k), std::string(v));
    *reply = next;
    if (reply->code == GrpcCode::kOk && reply->message.empty()) {
      reply->message = "echo:" + std::string(call.message);
    }
  }
  GrpcReply next;
  std::vector<std::string> paths, peers;
  std::string authority;
  std::vector<std::pair<std::string, std::string>> metadata;
};

class CountingEvents : public TransportEventSink {
 public:
  void OnTransportEvent(TransportEvent event, std::string_view, std::string_view detail) override {
    events.push_back(event);
    details.emplace_back(detail);
  }
  std::vector<TransportEvent> events;
  std::vector<std::string> details;
};

// The client's bytes go straight into the session; the session's output is what the client
// reads. When the client waits for more and the session has nothing, time moves on (the
// fake clock) so that timers fire; the session ending the connection reads as end of stream.
// `after_write`, if set, runs after each of the client's writes has reached the session.
class SessionStream : public wire::ByteStream {
 public:
  SessionStream(H2Session* session, SteadyClock::time_point* now,
                std::function<void()> after_write = {})
      : session_(session), now_(now), after_write_(std::move(after_write)) {}

  Status WriteAll(std::string_view data, Deadline) override {
    if (!session_->Receive(data, *now_)) closed_ = true;
    if (after_write_) after_write_();
    return Status::Ok();
  }
  StatusOr<size_t> ReadSome(char* buf, size_t len, Deadline) override {
    for (int i = 0; pending_.empty() && i < 100; ++i) {
      session_->TakeOutput(&pending_, 1 << 20);
      if (!pending_.empty() || closed_ || session_->Finished()) break;
      *now_ += milliseconds(100);
      session_->OnTimer(*now_);
    }
    if (pending_.empty()) return size_t{0};
    size_t n = std::min(len, pending_.size());
    pending_.copy(buf, n);
    pending_.erase(0, n);
    return n;
  }

 private:
  H2Session* session_;
  SteadyClock::time_point* now_;
  std::function<void()> after_write_;
  std::string pending_;
  bool closed_ = false;
};

class H2SessionTest : public ::testing::Test {
 protected:
  H2SessionTest() {
    options_.handler = &handler_;
    options_.events = &events_;
    options_.kept_metadata = {"authorization"};
  }

  wire::UnaryResponse Call(H2Session& session, const std::string& message,
                           std::vector<wire::Metadata> metadata = {},
                           std::function<void()> after_write = {}) {
    SessionStream stream(&session, &now_, std::move(after_write));
    wire::UnaryRequest request;
    request.authority = "myaks.hcp.eastus.azmk8s.io";
    request.path = kPath;
    request.user_agent = "test";
    request.metadata = std::move(metadata);
    request.message = message;
    return wire::CallUnary(stream, request, Deadline::After(seconds(5)));
  }

  bool Saw(TransportEvent event) const {
    return std::find(events_.events.begin(), events_.events.end(), event) != events_.events.end();
  }

  RecordingHandler handler_;
  CountingEvents events_;
  H2SessionOptions options_;
  SteadyClock::time_point now_ = SteadyClock::time_point{} + std::chrono::hours(1);
};

TEST_F(H2SessionTest, AnswersAUnaryCallWithTheHandlersMessage) {
  H2Session session(options_, "ipv4:10.1.2.3:4567", now_);
  wire::UnaryResponse r = Call(session, "hello", {{"authorization", "tok", true}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.message, "echo:hello");
  ASSERT_EQ(handler_.paths.size(), 1u);
  EXPECT_EQ(handler_.paths[0], kPath);
  EXPECT_EQ(handler_.peers[0], "ipv4:10.1.2.3:4567");
  EXPECT_EQ(handler_.authority, "myaks.hcp.eastus.azmk8s.io");
  EXPECT_THAT(handler_.metadata, ::testing::ElementsAre(std::make_pair(std::string("authorization"),
                                                                       std::string("tok"))));
}

TEST_F(H2SessionTest, AnErrorIsATrailersOnlyStatusWithThePercentEncodedMessage) {
  H2Session session(options_, "ipv4:10.1.2.3:4567", now_);
  handler_.next.code = GrpcCode::kUnauthenticated;
  handler_.next.error_message = "node identity not accepted: 100% \xc3\xa9";
  wire::UnaryResponse r = Call(session, "x");
  EXPECT_EQ(r.status.code, GrpcCode::kUnauthenticated);
  EXPECT_TRUE(r.from_server);
  EXPECT_EQ(r.status.message, "node identity not accepted: 100% \xc3\xa9");
}

TEST_F(H2SessionTest, OnlyKeptMetadataReachesTheHandlerAndAtMostFourValuesOfIt) {
  H2Session session(options_, "p", now_);
  std::vector<wire::Metadata> md = {{"x-other", "a", false}};
  for (int i = 0; i < 6; ++i) md.push_back({"authorization", "t" + std::to_string(i), true});
  ASSERT_TRUE(Call(session, "m", md).status.ok());
  EXPECT_EQ(handler_.metadata.size(), 4u);
  for (const auto& [k, v] : handler_.metadata) EXPECT_EQ(k, "authorization");
}

TEST_F(H2SessionTest, ARequestOverTheLimitIsResourceExhaustedAndNeverHandled) {
  options_.limits.max_request_bytes = 1024;
  H2Session session(options_, "p", now_);
  wire::UnaryResponse r = Call(session, std::string(2000, 'x'));
  EXPECT_EQ(r.status.code, GrpcCode::kResourceExhausted);
  EXPECT_THAT(r.status.message, ::testing::HasSubstr("larger than max (1024 bytes)"));
  EXPECT_TRUE(handler_.paths.empty());
  EXPECT_TRUE(Saw(TransportEvent::kRequestTooLarge));
}

TEST_F(H2SessionTest, AHeaderListOverTheLimitIsResourceExhaustedAndNeverHandled) {
  options_.limits.max_header_list_bytes = 4096;
  H2Session session(options_, "p", now_);
  wire::UnaryResponse r = Call(session, "m", {{"authorization", std::string(5000, 'a'), true}});
  EXPECT_EQ(r.status.code, GrpcCode::kResourceExhausted);
  EXPECT_THAT(r.status.message, ::testing::HasSubstr("header list larger than max"));
  EXPECT_TRUE(handler_.paths.empty());
  EXPECT_TRUE(Saw(TransportEvent::kHeaderListTooLarge));
}

// The memory connections hold beyond their baseline, one address's share of it shared by that
// address's connections: while others hold it (charged here by hand), a call whose document
// does not fit is refused at once and never handled, and the session can still answer; once
// they let go, the same call is served, and its bytes are released at its end.
TEST_F(H2SessionTest, ACallOverItsAddresssMemoryShareIsResourceExhausted) {
  auto pool = std::make_shared<MemoryPool>(1 << 20, 96 * 1024);
  ConnectionMemory* others = ConnectionMemory::New(pool, "10.0.0.1", 0);
  const std::vector<wire::Metadata> document = {{"authorization", std::string(2000, 'd'), true}};
  {
    ConnectionMemory* memory = ConnectionMemory::New(pool, "10.0.0.1", 0);
    options_.memory = memory;
    H2Session session(options_, "p", now_);
    // Room for nghttp2 to read the call and answer it, not for the document and the headroom
    // a stream must leave.
    ASSERT_TRUE(others->TryCharge(pool->per_key_limit() - pool->used() - 12 * 1024));
    wire::UnaryResponse r = Call(session, "m", document);
    EXPECT_EQ(r.status.code, GrpcCode::kResourceExhausted);
    EXPECT_EQ(r.status.message,
              "the service holds as much request memory as it may for this address or in all; "
              "retry later");
    EXPECT_TRUE(handler_.paths.empty());
    EXPECT_TRUE(Saw(TransportEvent::kKeptBytesOverBudget));
    EXPECT_FALSE(memory->over()) << "nghttp2 had what it needed";
    memory->Close();
  }
  others->Release(others->used());
  EXPECT_EQ(pool->used(), 0u) << "nothing of the refused call is left charged";
  ConnectionMemory* memory = ConnectionMemory::New(pool, "10.0.0.1", 0);
  options_.memory = memory;
  {
    H2Session session(options_, "p", now_);
    ASSERT_TRUE(Call(session, "m", document).status.ok());
    EXPECT_EQ(handler_.paths.size(), 1u);
  }
  memory->Close();
  others->Close();
  EXPECT_EQ(pool->used(), 0u) << "released when the stream ended";
}

TEST_F(H2SessionTest, ADelayedReplyLeavesAtItsTimeAndNotBefore) {
  H2Session session(options_, "p", now_);
  handler_.next.delay = milliseconds(1500);
  SteadyClock::time_point start = now_;
  wire::UnaryResponse r = Call(session, "slow");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_GE(now_ - start, milliseconds(1500));
  EXPECT_LT(now_ - start, milliseconds(1700));
}

// "99999999H" is 3.6e20 ns: added to the clock as it is, a signed overflow (UBSan stops the
// test); clamped, the request's own limit.
TEST_F(H2SessionTest, AGrpcTimeoutPastTheClocksRangeIsClampedToTheRequestTimeout) {
  namespace h2 = testsupport::h2;
  H2Session session(options_, "p", now_);
  const std::string block = h2::HpackBlock(
      h2::GrpcRequestFields(h2::kGetComponentConfigPath, "a", {{"grpc-timeout", "99999999H"}}));
  ASSERT_TRUE(session.Receive(
      h2::ClientPreface() + h2::Settings() + h2::Headers(1, block, h2::kEndHeaders), now_));
  EXPECT_EQ(session.NextDeadline(), now_ + options_.limits.request_timeout);
  // A short one still shortens it.
  H2Session other(options_, "p", now_);
  const std::string short_block = h2::HpackBlock(
      h2::GrpcRequestFields(h2::kGetComponentConfigPath, "a", {{"grpc-timeout", "250m"}}));
  ASSERT_TRUE(other.Receive(
      h2::ClientPreface() + h2::Settings() + h2::Headers(1, short_block, h2::kEndHeaders), now_));
  EXPECT_EQ(other.NextDeadline(), now_ + milliseconds(250));
}

TEST_F(H2SessionTest, AConnectionThatNeverSendsARequestIsClosedAfterTheFirstRequestTimeout) {
  H2Session session(options_, "p", now_);
  std::string out;
  session.TakeOutput(&out, 1 << 20);  // our SETTINGS
  EXPECT_FALSE(out.empty());
  EXPECT_EQ(session.NextDeadline(), now_ + options_.limits.first_request_timeout);
  session.OnTimer(now_ + options_.limits.first_request_timeout - milliseconds(1));
  EXPECT_FALSE(Saw(TransportEvent::kFirstRequestTimeout));
  session.OnTimer(now_ + options_.limits.first_request_timeout);
  EXPECT_TRUE(Saw(TransportEvent::kFirstRequestTimeout));
  out.clear();
  session.TakeOutput(&out, 1 << 20);
  ASSERT_GE(out.size(), 9u);
  EXPECT_EQ(out[3], 0x07);  // GOAWAY
  EXPECT_TRUE(session.Finished());
}

// The patient attacker: a stream opened just before the first-request timeout and never
// finished does not buy the connection more time. Nothing answered by the timeout: the
// connection ends, the open stream with it.
TEST_F(H2SessionTest, AConnectionWithNothingAnsweredEndsAtTheFirstRequestTimeout) {
  namespace h2 = testsupport::h2;
  H2Session session(options_, "p", now_);
  const std::string block =
      h2::HpackBlock(h2::GrpcRequestFields(h2::kGetComponentConfigPath, "a", {}));
  const auto late = now_ + options_.limits.first_request_timeout - milliseconds(100);
  ASSERT_TRUE(session.Receive(h2::ClientPreface() + h2::Settings(), now_));
  ASSERT_TRUE(session.Receive(h2::Headers(1, block, h2::kEndHeaders), late));
  EXPECT_EQ(session.NextDeadline(), now_ + options_.limits.first_request_timeout);
  session.OnTimer(now_ + options_.limits.first_request_timeout);
  EXPECT_TRUE(Saw(TransportEvent::kFirstRequestTimeout));
  std::string out;
  session.TakeOutput(&out, 1 << 20);
  EXPECT_TRUE(session.Finished()) << "still open with an unfinished stream";
  EXPECT_TRUE(handler_.paths.empty());
}

// After a call answered, a request that runs out is reset and the connection gets GOAWAY: a
// new stream opened later never reaches the handler, so holding streams open cannot keep the
// connection.
TEST_F(H2SessionTest, ARequestThatRunsOutEndsItsConnection) {
  namespace h2 = testsupport::h2;
  H2Session session(options_, "p", now_);
  const std::string block =
      h2::HpackBlock(h2::GrpcRequestFields(h2::kGetComponentConfigPath, "a", {}));
  const std::string message = std::string("\0\0\0\0\x02", 5) + "hi";
  ASSERT_TRUE(session.Receive(
      h2::ClientPreface() + h2::Settings() + h2::Headers(1, block, h2::kEndHeaders) +
          h2::Data(1, message, true) + h2::Headers(3, block, h2::kEndHeaders),
      now_));
  ASSERT_EQ(handler_.paths.size(), 1u);
  std::string out;
  session.TakeOutput(&out, 1 << 20);
  session.OnTimer(now_ + options_.limits.request_timeout);
  EXPECT_TRUE(Saw(TransportEvent::kRequestTimeout));
  session.Receive(h2::Headers(5, block, h2::kEndHeaders) + h2::Data(5, message, true),
                  now_ + options_.limits.request_timeout);
  EXPECT_EQ(handler_.paths.size(), 1u) << "a stream after the GOAWAY reached the handler";
  out.clear();
  session.TakeOutput(&out, 1 << 20);
  std::optional<uint32_t> goaway_last, reset3;
  h2::FrameReader reader;
  reader.Feed(out);
  while (std::optional<h2::ReceivedFrame> f = reader.Next()) {
    if (f->type == h2::kGoaway) goaway_last = h2::ReadUint32(f->payload, 0);
    if (f->type == h2::kRstStream && f->stream_id == 3) reset3 = h2::ReadUint32(f->payload, 0);
  }
  EXPECT_EQ(reset3, 8u);  // CANCEL: the request ran out
  EXPECT_EQ(goaway_last, 3u);
  EXPECT_TRUE(session.Finished());
}

// A connection is answered max_calls_per_connection times; the last answer is followed by
// GOAWAY naming it, and a stream after it is refused for the client to retry elsewhere.
TEST_F(H2SessionTest, AConnectionGetsABoundedNumberOfAnswers) {
  namespace h2 = testsupport::h2;
  options_.limits.max_calls_per_connection = 3;
  H2Session session(options_, "p", now_);
  const std::string block =
      h2::HpackBlock(h2::GrpcRequestFields(h2::kGetComponentConfigPath, "a", {}));
  const std::string message = std::string("\0\0\0\0\x02", 5) + "hi";
  std::string bytes = h2::ClientPreface() + h2::Settings();
  for (uint32_t id = 1; id <= 7; id += 2) {
    bytes += h2::Headers(id, block, h2::kEndHeaders) + h2::Data(id, message, true);
  }
  ASSERT_TRUE(session.Receive(bytes, now_));
  EXPECT_EQ(handler_.paths.size(), 3u);
  std::string out;
  session.TakeOutput(&out, 1 << 20);
  std::optional<uint32_t> goaway_last;
  int answers = 0;
  bool answered_before_goaway = true;
  h2::FrameReader reader;
  reader.Feed(out);
  while (std::optional<h2::ReceivedFrame> f = reader.Next()) {
    if (f->type == h2::kGoaway) {
      goaway_last = h2::ReadUint32(f->payload, 0);
      answered_before_goaway = answers == 3;
    }
    answers += f->type == h2::kHeaders && (f->flags & h2::kEndStream) != 0;
  }
  EXPECT_EQ(goaway_last, 5u);
  EXPECT_TRUE(answered_before_goaway);
  EXPECT_TRUE(session.Finished());
}

TEST_F(H2SessionTest, AnIdleConnectionIsClosedAfterTheIdleTimeout) {
  H2Session session(options_, "p", now_);
  ASSERT_TRUE(Call(session, "m").status.ok());
  EXPECT_FALSE(session.Finished());
  session.OnTimer(now_ + options_.limits.idle_timeout);
  EXPECT_TRUE(Saw(TransportEvent::kIdleTimeout));
  std::string out;
  session.TakeOutput(&out, 1 << 20);
  EXPECT_TRUE(session.Finished());
}

TEST_F(H2SessionTest, ABadPrefaceEndsTheSession) {
  H2Session session(options_, "p", now_);
  EXPECT_FALSE(session.Receive("GET / HTTP/1.1\r\nHost: x\r\n\r\n", now_));
  EXPECT_TRUE(Saw(TransportEvent::kProtocolError));
  std::string out;
  session.TakeOutput(&out, 1 << 20);
  EXPECT_TRUE(session.Finished());
  EXPECT_FALSE(session.Receive("more", now_));
}

// A refusal that closes the connection: its answer goes out, then a GOAWAY naming it the last
// stream (in that order: Python's h2 raises on an answer that follows a GOAWAY), a second
// request already on the connection never reaches the handler, and the session ends.
TEST_F(H2SessionTest, AnAnswerThatClosesTheConnectionRefusesTheRest) {
  namespace h2 = testsupport::h2;
  H2Session session(options_, "p", now_);
  handler_.next.code = GrpcCode::kUnauthenticated;
  handler_.next.error_message = "no";
  handler_.next.close_connection = true;
  const std::string block =
      h2::HpackBlock(h2::GrpcRequestFields(h2::kGetComponentConfigPath, "a", {}));
  const std::string message = std::string("\0\0\0\0\x02", 5) + "hi";
  ASSERT_TRUE(session.Receive(h2::ClientPreface() + h2::Settings() +
                                  h2::Headers(1, block, h2::kEndHeaders) +
                                  h2::Headers(3, block, h2::kEndHeaders) +
                                  h2::Data(1, message, true) + h2::Data(3, message, true),
                              now_));
  EXPECT_EQ(handler_.paths.size(), 1u);
  std::string out;
  session.TakeOutput(&out, 1 << 20);
  bool answered = false;
  bool answered_before_goaway = false;
  std::optional<uint32_t> goaway_last;
  h2::FrameReader reader;
  reader.Feed(out);
  while (std::optional<h2::ReceivedFrame> f = reader.Next()) {
    if (f->type == h2::kGoaway) {
      goaway_last = h2::ReadUint32(f->payload, 0);
      answered_before_goaway = answered;
    }
    answered |= f->type == h2::kHeaders && f->stream_id == 1;
  }
  EXPECT_TRUE(answered);
  EXPECT_TRUE(answered_before_goaway);
  // Stream 3 is past the GOAWAY's last stream: unprocessed, for the client to retry.
  EXPECT_EQ(goaway_last, 1u);
  EXPECT_EQ(handler_.paths.size(), 1u);
  EXPECT_TRUE(session.Finished());
}

// A connection error nghttp2 answers itself (RFC 9113, 5.1.2: a stream past the acknowledged
// SETTINGS_MAX_CONCURRENT_STREAMS) is reported once its GOAWAY is out, with nghttp2's reason,
// and the session ends; the stream before it was handled.
TEST_F(H2SessionTest, AStreamPastTheAcknowledgedLimitIsAReportedConnectionError) {
  namespace h2 = testsupport::h2;
  options_.limits.max_concurrent_streams = 1;
  H2Session session(options_, "p", now_);
  std::string out;
  ASSERT_TRUE(session.Receive(h2::ClientPreface() + h2::Settings(), now_));
  session.TakeOutput(&out, 1 << 20);  // the service's SETTINGS, acknowledged below
  const std::string block =
      h2::HpackBlock(h2::GrpcRequestFields(h2::kGetComponentConfigPath, "a", {}));
  const std::string message = std::string("\0\0\0\0\x02", 5) + "hi";
  ASSERT_TRUE(session.Receive(
      h2::SettingsAck() + h2::Headers(1, block, h2::kEndHeaders) + h2::Data(1, message, true) +
          h2::Headers(3, block, h2::kEndHeaders) + h2::Data(3, message, true),
      now_));
  EXPECT_EQ(handler_.paths.size(), 1u);
  EXPECT_FALSE(Saw(TransportEvent::kProtocolError)) << "reported before the GOAWAY is out";
  out.clear();
  session.TakeOutput(&out, 1 << 20);
  std::optional<uint32_t> goaway_code;
  h2::FrameReader reader;
  reader.Feed(out);
  while (std::optional<h2::ReceivedFrame> f = reader.Next()) {
    if (f->type == h2::kGoaway) goaway_code = h2::ReadUint32(f->payload, 4);
  }
  EXPECT_EQ(goaway_code, 1u);  // PROTOCOL_ERROR
  ASSERT_TRUE(Saw(TransportEvent::kProtocolError));
  EXPECT_THAT(events_.details.back(), ::testing::HasSubstr("max concurrent streams exceeded"));
  EXPECT_TRUE(session.Finished());
}

// Frames that make nghttp2 read and do nothing else pay from the control-frame budget: DATA
// carrying only padding (a frame's length up to 256 bytes with no data in it), and frame types
// nghttp2 reads past (an unknown type, here 0xfa). Past the burst, GOAWAY ENHANCE_YOUR_CALM.
TEST_F(H2SessionTest, PaddingOnlyDataAndUnknownFramesPayAsControlFrames) {
  namespace h2 = testsupport::h2;
  const std::string block =
      h2::HpackBlock(h2::GrpcRequestFields(h2::kGetComponentConfigPath, "a", {}));
  const std::string padding_only =
      h2::Frame(h2::kData, h2::kPadded, 1, std::string(1, '\x20') + std::string(0x20, '\0'));
  const std::string unknown = h2::Frame(0xfa, 0, 0, "12345678");
  for (const std::string* frame : {&padding_only, &unknown}) {
    events_.events.clear();
    H2Session session(options_, "p", now_);
    std::string bytes =
        h2::ClientPreface() + h2::Settings() + h2::Headers(1, block, h2::kEndHeaders);
    // Fewer than the burst: nothing happens.
    for (uint32_t i = 0; i + 10 < options_.limits.control_frame_burst; ++i) bytes += *frame;
    ASSERT_TRUE(session.Receive(bytes, now_));
    EXPECT_FALSE(Saw(TransportEvent::kControlFrameFlood));
    // As many again at once: past it.
    bytes.clear();
    for (uint32_t i = 0; i < options_.limits.control_frame_burst; ++i) bytes += *frame;
    EXPECT_FALSE(session.Receive(bytes, now_));
    EXPECT_TRUE(Saw(TransportEvent::kControlFrameFlood))
        << (frame == &unknown ? "unknown" : "DATA");
    std::string out;
    session.TakeOutput(&out, 1 << 20);
    EXPECT_TRUE(session.Finished());
  }
}

TEST_F(H2SessionTest, ShutdownLetsTheOpenCallFinishThenEnds) {
  H2Session session(options_, "p", now_);
  handler_.next.delay = milliseconds(1500);  // the reply is still held when Shutdown lands
  size_t open_at_shutdown = 0;
  bool finished_at_shutdown = true;
  auto shut_down_once_open = [&] {
    if (open_at_shutdown != 0 || session.open_streams() == 0) return;
    open_at_shutdown = session.open_streams();
    session.Shutdown();
    finished_at_shutdown = session.Finished();
  };
  wire::UnaryResponse r = Call(session, "m", {}, shut_down_once_open);
  EXPECT_EQ(open_at_shutdown, 1u);
  EXPECT_FALSE(finished_at_shutdown);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.message, "echo:m");
  std::string out;
  session.TakeOutput(&out, 1 << 20);
  EXPECT_TRUE(session.Finished());
  EXPECT_EQ(session.open_streams(), 0u);
}

}  // namespace
}  // namespace hotfix::service
