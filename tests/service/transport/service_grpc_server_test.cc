// GrpcServer (transport/grpc_server.h), the event loops, on real loopback sockets with h2c
// listeners (TLS is tls_server_context's and the end-to-end tests'): a call reaches the
// handler and its answer comes back on the loop that accepted it, the connection caps close
// what is over them at once, a listener apart has a cap of its own, an idle connection is
// closed by its first-request bound, and a drain refuses new connections and sends GOAWAY.
// The deadlines are also run on a clock the test moves (GrpcServerOptions::clock): nothing
// happens while real time passes, and the bound acts once the clock passes it. Every wait is
// on a socket event with a bound, never a sleep.

#include "service/transport/grpc_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "h2_frames.h"
#include "socket_util.h"

namespace hotfix::service {
namespace {

namespace h2 = testsupport::h2;
using std::chrono::milliseconds;
using std::chrono::seconds;

class EchoHandler : public GrpcHandler {
 public:
  void Handle(const GrpcCall& call, GrpcReply* reply) override {
    std::lock_guard<std::mutex> lock(mu_);
    paths_.emplace_back(call.path);
    reply->message = "echo:" + std::string(call.message);
  }
  std::vector<std::string> paths() const {
    std::lock_guard<std::mutex> lock(mu_);
    return paths_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> paths_;
};

// One client connection speaking h2c frame by frame.
class Client {
 public:
  explicit Client(uint16_t port) : fd_(testsupport::net::ConnectTcp("127.0.0.1", port)) {}
  ~Client() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return fd_ >= 0; }

  bool Send(const std::string& bytes) {
    return testsupport::net::SendAll(fd_, bytes.data(), bytes.size());
  }
  bool SendCall(uint32_t stream, const std::string& message) {
    const std::string framed =
        std::string(1, '\0') + BigEndian32(static_cast<uint32_t>(message.size())) + message;
    return Send(Opening(stream) + h2::Data(stream, framed, true));
  }
  // A request's HEADERS without END_STREAM, and no DATA: a request that never ends.
  bool SendUnfinishedRequest() { return Send(Opening(1)); }

  // The next frame, or nullopt when the server closed the connection (or `limit` passed).
  std::optional<h2::ReceivedFrame> Next(milliseconds limit = seconds(10)) {
    for (;;) {
      if (auto frame = reader_.Next()) return frame;
      if (!testsupport::net::WaitReadable(fd_, limit)) return std::nullopt;
      char buf[16384];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return std::nullopt;
      reader_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  // True when the server closed the connection within `limit` (frames before it skipped).
  bool ClosedWithin(milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!testsupport::net::WaitReadable(fd_, milliseconds(100))) continue;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return true;
    }
    return false;
  }
  // The answer's message and grpc-status on `stream`: frames until its trailers.
  std::pair<std::string, std::string> Answer(uint32_t stream) {
    std::string message, status;
    while (auto frame = Next()) {
      if (frame->stream_id != stream) continue;
      if (frame->type == h2::kData && frame->payload.size() >= 5)
        message += frame->payload.substr(5);
      if (frame->type == h2::kHeaders) {
        auto block = h2::HeaderBlockFragment(*frame);
        if (!block) break;
        auto fields = hpack_.Decode(*block);
        if (!fields) break;
        for (const auto& [name, value] : *fields) {
          if (name == "grpc-status") status = value;
        }
        if (frame->flags & h2::kEndStream) break;
      }
    }
    return {message, status};
  }
  // Whether a GOAWAY arrives within `limit`.
  bool GoawayWithin(milliseconds limit) {
    while (auto frame = Next(limit)) {
      if (frame->type == h2::kGoaway) return true;
    }
    return false;
  }

 private:
  // The preface on the connection's first stream, then the stream's HEADERS (no END_STREAM).
  static std::string Opening(uint32_t stream) {
    return (stream == 1 ? h2::ClientPreface() + h2::Settings() : std::string()) +
           h2::Headers(stream, h2::HpackBlock(h2::GrpcRequestFields("/test.Echo/Call", "a")),
                       h2::kEndHeaders);
  }
  static std::string BigEndian32(uint32_t v) {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
            static_cast<char>(v)};
  }
  int fd_;
  h2::FrameReader reader_;
  h2::HpackDecoder hpack_;
};

// A plaintext (h2c) listener on a free loopback port.
ListenerSpec H2cListener(GrpcHandler* handler, const char* flag) {
  ListenerSpec listener;
  listener.address = "127.0.0.1:0";
  listener.tls = false;
  listener.handler = handler;
  listener.flag = flag;
  return listener;
}

// A clock the test moves (GrpcServerOptions::clock), read by the loops' threads.
class FakeClock {
 public:
  std::chrono::steady_clock::time_point Now() const {
    return start_ + std::chrono::nanoseconds(offset_ns_.load());
  }
  void Advance(std::chrono::nanoseconds by) { offset_ns_ += by.count(); }
  std::function<std::chrono::steady_clock::time_point()> Function() {
    return [this] { return Now(); };
  }

 private:
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::atomic<int64_t> offset_ns_{0};
};

// One h2c listener, two loops; on `clock` when one is given.
GrpcServerOptions H2cOptions(GrpcHandler* handler, FakeClock* clock = nullptr) {
  GrpcServerOptions options;
  options.listeners = {H2cListener(handler, "--test")};
  options.threads = 2;
  if (clock != nullptr) options.clock = clock->Function();
  return options;
}

TEST(GrpcServerTest, ACallReachesTheHandlerAndItsAnswerComesBack) {
  testsupport::net::IgnoreSigpipe();
  EchoHandler handler;
  auto server = GrpcServer::Start(H2cOptions(&handler));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Client client((*server)->port(0));
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.SendCall(1, "hello"));
  EXPECT_EQ(client.Answer(1), std::make_pair(std::string("echo:hello"), std::string("0")));
  // A second call on the same connection, a new stream.
  ASSERT_TRUE(client.SendCall(3, "again"));
  EXPECT_EQ(client.Answer(3).first, "echo:again");
  EXPECT_THAT(handler.paths(), ::testing::ElementsAre("/test.Echo/Call", "/test.Echo/Call"));
  EXPECT_EQ((*server)->open_connections(), 1u);
  EXPECT_TRUE((*server)->accepting());
}

TEST(GrpcServerTest, AConnectionOverTheCapIsClosedAtOnce) {
  testsupport::net::IgnoreSigpipe();
  EchoHandler handler;
  GrpcServerOptions options = H2cOptions(&handler);
  options.max_connections = 2;
  auto server = GrpcServer::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ((*server)->max_connections(), 2u);
  const uint16_t port = (*server)->port(0);
  Client first(port), second(port);
  // Each answered: both are held before the third arrives.
  ASSERT_TRUE(first.SendCall(1, "1"));
  ASSERT_EQ(first.Answer(1).second, "0");
  ASSERT_TRUE(second.SendCall(1, "2"));
  ASSERT_EQ(second.Answer(1).second, "0");
  Client third(port);
  ASSERT_TRUE(third.connected());  // accepted by the kernel, then closed by the loop
  EXPECT_TRUE(third.ClosedWithin(seconds(10)));
  EXPECT_EQ((*server)->open_connections(), 2u);
}

TEST(GrpcServerTest, OnePeerAddressMayHoldOnlyItsShare) {
  testsupport::net::IgnoreSigpipe();
  EchoHandler handler;
  GrpcServerOptions options = H2cOptions(&handler);
  options.max_connections_per_peer = 1;
  auto server = GrpcServer::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Client first((*server)->port(0));
  ASSERT_TRUE(first.SendCall(1, "1"));
  ASSERT_EQ(first.Answer(1).second, "0");
  Client second((*server)->port(0));
  EXPECT_TRUE(second.ClosedWithin(seconds(10)));
}

TEST(GrpcServerTest, AListenerApartHasItsOwnCap) {
  testsupport::net::IgnoreSigpipe();
  EchoHandler calls, health;
  GrpcServerOptions options = H2cOptions(&calls);
  options.max_connections = 1;
  ListenerSpec apart = H2cListener(&health, "--health-listen");
  apart.own_max_connections = 1;
  options.listeners.push_back(apart);
  auto server = GrpcServer::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Client call((*server)->port(0));
  ASSERT_TRUE(call.SendCall(1, "1"));
  ASSERT_EQ(call.Answer(1).second, "0");
  // The call listener is full; the health listener still answers, once.
  Client probe((*server)->port(1));
  ASSERT_TRUE(probe.SendCall(1, "ok?"));
  EXPECT_EQ(probe.Answer(1).first, "echo:ok?");
  Client second_probe((*server)->port(1));
  EXPECT_TRUE(second_probe.ClosedWithin(seconds(10)));
  EXPECT_EQ(health.paths().size(), 1u);
}

TEST(GrpcServerTest, AConnectionWithoutACallIsClosedAfterItsBound) {
  testsupport::net::IgnoreSigpipe();
  EchoHandler handler;
  GrpcServerOptions options = H2cOptions(&handler);
  options.limits.first_request_timeout = milliseconds(300);
  auto server = GrpcServer::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Client idle((*server)->port(0));
  ASSERT_TRUE(idle.Send(h2::ClientPreface() + h2::Settings()));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(idle.ClosedWithin(seconds(10)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(250));
  EXPECT_TRUE(handler.paths().empty());
}

TEST(GrpcServerTest, ADrainSendsGoawayAndRefusesNewConnections) {
  testsupport::net::IgnoreSigpipe();
  EchoHandler handler;
  auto server = GrpcServer::Start(H2cOptions(&handler));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const uint16_t port = (*server)->port(0);
  Client open(port);
  ASSERT_TRUE(open.SendCall(1, "1"));
  ASSERT_EQ(open.Answer(1).second, "0");
  (*server)->Drain(milliseconds(200));
  EXPECT_TRUE(open.GoawayWithin(seconds(10)));
  EXPECT_LT(testsupport::net::ConnectTcp("127.0.0.1", port), 0);  // the listener is closed
  (*server)->Drain(milliseconds(0));                              // idempotent
}

TEST(GrpcServerClockTest, AConnectionWithoutACallIsClosedWhenItsClockPassesTheBound) {
  testsupport::net::IgnoreSigpipe();
  EchoHandler handler;
  FakeClock clock;
  GrpcServerOptions options = H2cOptions(&handler, &clock);
  options.limits.first_request_timeout = seconds(10);
  auto server = GrpcServer::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Client idle((*server)->port(0));
  ASSERT_TRUE(idle.Send(h2::ClientPreface() + h2::Settings()));
  // Real time passes, the server's clock does not: the connection stays.
  EXPECT_FALSE(idle.ClosedWithin(milliseconds(300)));
  clock.Advance(seconds(11));
  EXPECT_TRUE(idle.ClosedWithin(seconds(10)));
}

TEST(GrpcServerClockTest, ARequestThatDoesNotFinishIsResetWhenItsClockPassesTheBound) {
  testsupport::net::IgnoreSigpipe();
  EchoHandler handler;
  FakeClock clock;
  GrpcServerOptions options = H2cOptions(&handler, &clock);
  options.limits.first_request_timeout = seconds(60);
  options.limits.request_timeout = seconds(5);
  auto server = GrpcServer::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Client slow((*server)->port(0));
  ASSERT_TRUE(slow.SendUnfinishedRequest());
  auto reset_or_goaway = [&](milliseconds within) {
    while (auto frame = slow.Next(within)) {
      if (frame->type == h2::kRstStream || frame->type == h2::kGoaway) return true;
    }
    return false;
  };
  EXPECT_FALSE(reset_or_goaway(milliseconds(300)));
  clock.Advance(seconds(6));
  EXPECT_TRUE(reset_or_goaway(seconds(10)));
  EXPECT_TRUE(handler.paths().empty());
}

TEST(GrpcServerClockTest, ADrainWaitsForItsGraceOnTheClock) {
  testsupport::net::IgnoreSigpipe();
  EchoHandler handler;
  FakeClock clock;
  GrpcServerOptions options = H2cOptions(&handler, &clock);
  options.limits.first_request_timeout = seconds(600);
  options.limits.request_timeout = seconds(600);
  auto server = GrpcServer::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Client busy((*server)->port(0));
  // A stream left open holds the drain for its grace.
  ASSERT_TRUE(busy.SendUnfinishedRequest());
  std::atomic<bool> drained{false};
  std::thread drain([&] {
    (*server)->Drain(seconds(30));
    drained = true;
  });
  EXPECT_TRUE(busy.GoawayWithin(seconds(10)));
  EXPECT_FALSE(busy.ClosedWithin(milliseconds(300)));
  EXPECT_FALSE(drained.load());
  clock.Advance(seconds(31));
  EXPECT_TRUE(busy.ClosedWithin(seconds(10)));
  drain.join();
  EXPECT_TRUE(drained.load());
}

TEST(GrpcServerTest, ABusyPortIsARefusalNotAShare) {
  EchoHandler handler;
  auto first = GrpcServer::Start(H2cOptions(&handler));
  ASSERT_TRUE(first.ok());
  GrpcServerOptions options = H2cOptions(&handler);
  options.listeners[0].address = "127.0.0.1:" + std::to_string((*first)->port(0));
  auto second = GrpcServer::Start(std::move(options));
  EXPECT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), ::testing::HasSubstr("--test"));
}

}  // namespace
}  // namespace hotfix::service
