// lps-trivial-bench-server: the ceiling for bench/service_bench.sh --trivial. The same
// libgrpc++ server set-up as live-patching-service (TLS from files, the same channel
// arguments, the callback API, health and reflection) with a GetComponentConfig that does
// nothing: no identity check, no store, no metrics, no access log; it answers every call
// with the one config given on the command line. What this serves per second on the bench
// machine is as far as any work done in the handler could take the real service.
//
//   lps-trivial-bench-server --listen ADDR:PORT --tls-cert PEM --tls-key PEM --config JSON
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "akslivepatching/v1/live_patching.grpc.pb.h"

namespace {

class TrivialService final : public akslivepatching::v1::LivePatchingService::CallbackService {
 public:
  explicit TrivialService(std::string config) : config_(std::move(config)) {}
  grpc::ServerUnaryReactor* GetComponentConfig(
      grpc::CallbackServerContext* context,
      const akslivepatching::v1::GetComponentConfigRequest* request,
      akslivepatching::v1::GetComponentConfigResponse* response) override {
    response->set_component_name(request->component_name());
    response->set_config(config_);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  std::string config_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string listen, cert, key, config;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--listen") {
      listen = argv[i + 1];
    } else if (flag == "--tls-cert") {
      cert = argv[i + 1];
    } else if (flag == "--tls-key") {
      key = argv[i + 1];
    } else if (flag == "--config") {
      config = argv[i + 1];
    } else {
      std::fprintf(stderr, "lps-trivial-bench-server: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (listen.empty() || cert.empty() || key.empty() || config.empty()) {
    std::fprintf(stderr,
                 "usage: lps-trivial-bench-server --listen ADDR:PORT --tls-cert PEM "
                 "--tls-key PEM --config JSON\n");
    return 2;
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // As in src/service/server.cc, so that only the handler differs.
  auto provider =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(key, cert, 10);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  TrivialService service(config);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::experimental::TlsServerCredentials(options), &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(16 * 1024);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, 80 * 1024);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 5 * 60 * 1000);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "lps-trivial-bench-server: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  std::fprintf(stderr, "lps-trivial-bench-server: listening on port %d\n", port);
  int sig = 0;
  sigwait(&signals, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}
