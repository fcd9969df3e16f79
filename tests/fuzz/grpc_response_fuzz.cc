// Bytes from the server, as check-hotfix's call reads them after TLS: the HTTP/2 session
// (nghttp2, our callbacks and flow), gRPC's framing and status decoding (CallUnary), then the
// response message and its config as lps_fetcher.cc and check_hotfix.cc decode them.
//
// Seeds are whole server byte streams captured from a real libgrpc++ server
// (grpc_seed_capture.cc): they start with the server's SETTINGS, which the client must see.
//
// Property: what the server said does not depend on how its bytes are split into reads (TLS
// records and TCP segments cut anywhere).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "akslivepatching/v1/live_patching.pb.h"
#include "common/deadline.h"
#include "fuzz_util.h"
#include "node/host/hotfix_pointer.h"
#include "wire/grpc_unary.h"
#include "wire/memory_stream.h"

using namespace hotfix;
using namespace hotfix::wire;

namespace {

UnaryRequest Request() {
  UnaryRequest request;
  request.authority = "myaks-dns.hcp.eastus.azmk8s.io";
  request.path = "/akslivepatching.v1.LivePatchingService/GetComponentConfig";
  request.user_agent = "hotfix-agent/fuzz";
  request.metadata = {{"authorization", "c2lnbmF0dXJl", true}};
  akslivepatching::v1::GetComponentConfigRequest message;
  message.set_component_name("aksNodeController");
  request.message = message.SerializeAsString();
  return request;
}

UnaryResponse Call(std::string input, size_t max_chunk) {
  static const UnaryRequest request = Request();
  ScriptedByteStream stream(std::move(input), max_chunk);
  // Scripted reads never wait: the deadline only has to outlast the bytes.
  return CallUnary(stream, request, Deadline::After(std::chrono::seconds(60)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);

  UnaryResponse whole = Call(input, SIZE_MAX);
  UnaryResponse split = Call(input, 1 + size % 61);
  if (std::getenv("FUZZ_VERBOSE") != nullptr) {  // when reproducing a crash by hand
    std::fprintf(stderr, "whole: %s\nsplit (%zu-byte reads): %s\n", whole.status.ToString().c_str(),
                 1 + size % 61, split.status.ToString().c_str());
  }
  // What the server said (a status, a message) cannot depend on the split. A failure this
  // client decides itself may: a stream error nghttp2 answers with RST_STREAM is only
  // reported once that is sent, so a connection error in the same read can come first.
  if (whole.from_server || split.from_server || whole.status.ok() || split.status.ok()) {
    FUZZ_CHECK(whole.status.code == split.status.code);
    FUZZ_CHECK(whole.status.message == split.status.message);
    FUZZ_CHECK(whole.message == split.message);
  } else {
    FUZZ_CHECK(!whole.status.ok() && !split.status.ok());
  }
  FUZZ_CHECK(whole.status.ok() || whole.message.empty());

  if (whole.status.ok()) {
    akslivepatching::v1::GetComponentConfigResponse reply;
    if (reply.ParseFromString(whole.message)) {
      static_cast<void>(node::ParseHotfixPointer(reply.config()));
    }
  }
  return 0;
}
