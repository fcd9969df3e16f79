// The service's HTTP/2 server session (service/transport/h2_session.h) fed arbitrary bytes, as an
// unauthenticated peer sends them after the TLS handshake: nghttp2's frame and HPACK
// parsing, our gRPC mapping for unary calls and every per-connection limit, with time moving
// between reads so the timers (request, idle, first-request, delayed replies) fire too.
//
// Input: byte 0 picks the handler's answers, byte 1 seeds the read sizes, the time steps and
// the connection's memory (an allowance of 16 to 79 KiB, and its address's share of the pool
// from nothing to 112 KiB, so nghttp2's allocations are refused at every point: NOMEM paths);
// the rest is what the peer sends (tests/fuzz/corpus/h2_server_session holds a real client
// preface, SETTINGS, a GetComponentConfig HEADERS and DATA, made by
// tests/fuzz/make_h2_seeds.py).
//
// Properties: the handler never sees a request message over the limit, more than 4 values of
// a kept key, or a path the peer did not send as :path; the session's output stays bounded
// by what it was asked to produce; a drained session with no streams finishes (unless its
// memory ran out: the server closes it then); the account never holds more of the pool than
// its share, and once the session is gone every byte charged to it has been given back.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "service/transport/connection_memory.h"
#include "service/transport/h2_session.h"

using namespace hotfix;
using namespace hotfix::service;

namespace {

class FuzzHandler : public GrpcHandler {
 public:
  explicit FuzzHandler(uint8_t mode) : mode_(mode) {}
  void Handle(const GrpcCall& call, GrpcReply* reply) override {
    FUZZ_CHECK(call.message.size() <= limits.max_request_bytes);
    size_t authorization = 0;
    for (const auto& [key, value] : call.metadata) {
      FUZZ_CHECK(key == "authorization");
      ++authorization;
    }
    FUZZ_CHECK(authorization <= 4);
    FUZZ_CHECK(call.peer == "ipv4:192.0.2.1:443");
    switch ((mode_ + calls_++) % 4) {
      case 0:
        reply->message = std::string(call.message);
        break;
      case 1:
        reply->code = wire::GrpcCode::kUnauthenticated;
        reply->error_message = "no: \xff\x01%" + std::string(call.path.substr(0, 16));
        break;
      case 2:
        reply->message = std::string(call.message) + std::string(call.authority);
        reply->delay = std::chrono::milliseconds(mode_ % 50);
        break;
      default:
        reply->code = wire::GrpcCode::kNotFound;
        break;
    }
  }
  H2Limits limits;

 private:
  uint8_t mode_;
  int calls_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  FuzzHandler handler(data[0]);
  uint32_t rng = data[1] * 2654435761u + 1;
  auto next = [&rng] {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
  };
  const uint64_t allowance = (16 + next() % 64) * 1024;
  const uint64_t share = (next() % 8) * 16 * 1024;
  auto pool = std::make_shared<MemoryPool>(1 << 20, share);
  ConnectionMemory* memory = ConnectionMemory::New(pool, "192.0.2.1", allowance);
  H2SessionOptions options;
  options.limits = handler.limits;
  options.handler = &handler;
  options.kept_metadata = {"authorization"};
  options.memory = memory;
  SteadyClock::time_point now{};
  {
    H2Session session(options, "ipv4:192.0.2.1:443", now);

    std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
    std::string out;
    bool open = true;  // false once the session ended the connection
    while (!rest.empty() && open) {
      size_t chunk = std::min<size_t>(rest.size(), 1 + next() % 4096);
      open = session.Receive(rest.substr(0, chunk), now);
      rest.remove_prefix(chunk);
      now += std::chrono::milliseconds(next() % 200);
      if (session.NextDeadline() <= now) session.OnTimer(now);
      out.clear();
      session.TakeOutput(&out, 64 * 1024);
      // One take is bounded by the limit plus at most one frame nghttp2 had ready.
      FUZZ_CHECK(out.size() <= 64 * 1024 + 16384 + 9);
      FUZZ_CHECK(pool->used() <= share);
    }
    // The drain: GOAWAY, then every timer; with no stream left, the session is done.
    session.Shutdown();
    for (int i = 0; i < 8; ++i) {
      now += std::chrono::seconds(15);
      session.OnTimer(now);
      out.clear();
      session.TakeOutput(&out, 1 << 20);
    }
    if (session.open_streams() == 0 && !memory->over()) FUZZ_CHECK(session.Finished());
  }
  FUZZ_CHECK(memory->used() == 0);
  memory->Close();
  FUZZ_CHECK(pool->used() == 0);
  return 0;
}
