// lps-trivial-bench-server: the ceiling for bench/service_bench.sh --trivial. The service's
// own server (service/transport/grpc_server.h: TLS from files, the same limits and loops) with a
// handler that does nothing: no identity check, no store, no metrics, no access log; it
// answers every call with the one config given on the command line. What this serves per
// second on the bench machine is as far as any work done in the handler could take the real
// service.
//
//   lps-trivial-bench-server --listen ADDR:PORT --tls-cert PEM --tls-key PEM --config JSON
#include <signal.h>

#include <cstdio>
#include <string>

#include "akslivepatching/v1/live_patching.pb.h"
#include "common/log.h"
#include "service/transport/grpc_server.h"
#include "service/transport/tls_server_context.h"

namespace {

class TrivialHandler final : public hotfix::service::GrpcHandler {
 public:
  explicit TrivialHandler(std::string config) : config_(std::move(config)) {}
  void Handle(const hotfix::service::GrpcCall& call, hotfix::service::GrpcReply* reply) override {
    akslivepatching::v1::GetComponentConfigRequest request;
    request.ParseFromArray(call.message.data(), static_cast<int>(call.message.size()));
    akslivepatching::v1::GetComponentConfigResponse response;
    response.set_component_name(request.component_name());
    response.set_config(config_);
    response.SerializeToString(&reply->message);
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
  signal(SIGPIPE, SIG_IGN);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  hotfix::Logger log;
  auto tls = hotfix::service::TlsServerContext::Load(cert, key);
  if (!tls.ok()) {
    log.Error("refusing to start", {{"error", tls.status()}});
    return 1;
  }
  TrivialHandler handler(config);
  hotfix::service::GrpcServerOptions options;  // the service's defaults, limits included
  // but the answers per connection: h2load, its load, never reconnects after a GOAWAY.
  options.limits.max_calls_per_connection = 1000000000;
  hotfix::service::ListenerSpec listener;
  listener.address = listen;
  listener.handler = &handler;
  listener.flag = "--listen";
  options.listeners.push_back(std::move(listener));
  options.tls = tls->get();
  // The bench connects everything from 127.0.0.1, idle connections included.
  options.max_connections_per_peer = 1000000;
  options.log = &log;
  auto server = hotfix::service::GrpcServer::Start(std::move(options));
  if (!server.ok()) {
    log.Error("refusing to start", {{"error", server.status()}});
    return 1;
  }
  std::fprintf(stderr, "lps-trivial-bench-server: listening on port %d\n", (*server)->port(0));
  int sig = 0;
  sigwait(&signals, &sig);
  (*server)->Drain(std::chrono::seconds(2));
  return 0;
}
