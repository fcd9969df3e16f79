// Makes grpc_response's seed corpus: a real libgrpc++ server (plaintext h2c on loopback, the
// same library and version the live-patching service runs) answers CallUnary's request in
// each way the node must handle, and every byte the server sent is written to one seed file.
//
//   grpc_seed_capture OUT_DIR
//
// Plaintext because the fuzzer feeds the HTTP/2 bytes TLS would carry. Not part of the fuzz
// run; rebuild the seeds with it when the server library changes.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "akslivepatching/v1/live_patching.grpc.pb.h"
#include "wire/grpc_unary.h"
#include "wire/tcp.h"

using namespace hotfix;
using akslivepatching::v1::GetComponentConfigRequest;
using akslivepatching::v1::GetComponentConfigResponse;

namespace {

struct Answer {
  std::string name;  // the seed file
  grpc::Status status;
  std::string config;
  std::string big_metadata;  // a trailing-metadata value, to grow the HPACK blocks
};

// The answer for the current call, set before each call from the one client thread.
Answer current;

class Service final : public akslivepatching::v1::LivePatchingService::Service {
  grpc::Status GetComponentConfig(grpc::ServerContext* context,
                                  const GetComponentConfigRequest* request,
                                  GetComponentConfigResponse* response) override {
    if (!current.big_metadata.empty()) context->AddTrailingMetadata("x-info", current.big_metadata);
    if (!current.status.ok()) return current.status;
    response->set_component_name(request->component_name());
    response->set_config(current.config);
    return grpc::Status::OK;
  }
};

// Records what the server sends.
class RecordingStream : public wire::ByteStream {
 public:
  explicit RecordingStream(UniqueFd fd) : tcp_(std::move(fd)) {}
  Status WriteAll(std::string_view data, Deadline deadline) override {
    return tcp_.WriteAll(data, deadline);
  }
  StatusOr<size_t> ReadSome(char* buf, size_t len, Deadline deadline) override {
    auto n = tcp_.ReadSome(buf, len, deadline);
    if (n.ok()) received.append(buf, *n);
    return n;
  }
  std::string received;

 private:
  wire::TcpStream tcp_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  Service service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();

  const Answer answers[] = {
      {"ok_hotfixes", grpc::Status::OK, R"({"hotfixes":{"202604.01":"202604.01.3"}})", ""},
      {"ok_empty_map", grpc::Status::OK, R"({"hotfixes":{}})", ""},
      {"ok_empty_config", grpc::Status::OK, "", ""},
      {"ok_legacy_version", grpc::Status::OK, R"({"version":"202604.01.2"})", ""},
      {"ok_many_bases", grpc::Status::OK,
       R"({"hotfixes":{"202603.15":"202603.15.1","202604.01":"202604.01.3","202604.08":"202604.08.9"}})",
       ""},
      {"ok_big_trailer", grpc::Status::OK, R"({"hotfixes":{}})", std::string(3000, 'x')},
      {"not_found",
       grpc::Status(grpc::StatusCode::NOT_FOUND, R"(component "aksNodeController" not found)"), "",
       ""},
      {"unauthenticated",
       grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                    "node identity not accepted (untrusted_signer): attested document signature "
                    "does not verify"),
       "", ""},
      {"permission_denied",
       grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                    "subscription 9999 is not allowed to use the live-patching service"),
       "", ""},
      {"resource_exhausted",
       grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                    "request rate limit exceeded for node vmId 02aa; retry later"),
       "", ""},
      {"invalid_argument_percent",
       grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                    "component_name \"../secret\" is invalid: 100% \xe2\x9c\x97\n"),
       "", ""},
      {"unavailable",
       grpc::Status(grpc::StatusCode::UNAVAILABLE,
                    "the component store is not loaded yet; retry later"),
       "", ""},
      {"internal", grpc::Status(grpc::StatusCode::INTERNAL, ""), "", ""},
  };
  for (const Answer& answer : answers) {
    current = answer;
    auto fd = wire::DialTcp("127.0.0.1", static_cast<uint16_t>(port),
                            Deadline::After(std::chrono::seconds(5)));
    if (!fd.ok()) return std::fprintf(stderr, "dial: %s\n", fd.status().ToString().c_str()), 1;
    RecordingStream stream(std::move(*fd));
    wire::UnaryRequest request;
    request.authority = "myaks-dns.hcp.eastus.azmk8s.io";
    request.path = "/akslivepatching.v1.LivePatchingService/GetComponentConfig";
    request.user_agent = "hotfix-agent/fuzz";
    request.metadata = {{"authorization", "c2lnbmF0dXJl", true}};
    GetComponentConfigRequest message;
    message.set_component_name("aksNodeController");
    request.message = message.SerializeAsString();
    wire::UnaryResponse response =
        wire::CallUnary(stream, request, Deadline::After(std::chrono::seconds(5)));
    std::fprintf(stderr, "%-26s %4zu bytes  %s\n", answer.name.c_str(), stream.received.size(),
                 response.status.ToString().c_str());
    std::ofstream(std::string(argv[1]) + "/" + answer.name, std::ios::binary) << stream.received;
  }
  server->Shutdown();
  return 0;
}
