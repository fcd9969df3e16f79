// lps-dev-server: a stand-in for the live-patching gRPC service, for the local demo and the
// benchmarks until the real service exists. Serves --config-file's content as `config` for
// component aksNodeController and NOT_FOUND for any other component.
//
//   lps-dev-server --listen 127.0.0.1:8443 --tls-cert lps.crt --tls-key lps.key
//                  --config-file hotfix.json [--status UNAVAILABLE] [--delay-ms 500]
//
// Prints "lps-dev-server listening on 127.0.0.1:<port>" once ready (port 0 picks one), one
// line per call on stderr, and exits cleanly on SIGINT/SIGTERM.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <map>

#include "fake_lps_server.h"
#include "ports.h"
#include "text_util.h"

namespace ts = hotfix::testsupport;

namespace {

// Accepts a gRPC code name ("NOT_FOUND") or number ("5").
grpc::StatusCode ParseStatus(const std::string& text) {
  static const std::map<std::string, grpc::StatusCode> kNames = {
      {"OK", grpc::OK},
      {"CANCELLED", grpc::CANCELLED},
      {"UNKNOWN", grpc::UNKNOWN},
      {"INVALID_ARGUMENT", grpc::INVALID_ARGUMENT},
      {"DEADLINE_EXCEEDED", grpc::DEADLINE_EXCEEDED},
      {"NOT_FOUND", grpc::NOT_FOUND},
      {"ALREADY_EXISTS", grpc::ALREADY_EXISTS},
      {"PERMISSION_DENIED", grpc::PERMISSION_DENIED},
      {"RESOURCE_EXHAUSTED", grpc::RESOURCE_EXHAUSTED},
      {"FAILED_PRECONDITION", grpc::FAILED_PRECONDITION},
      {"ABORTED", grpc::ABORTED},
      {"OUT_OF_RANGE", grpc::OUT_OF_RANGE},
      {"UNIMPLEMENTED", grpc::UNIMPLEMENTED},
      {"INTERNAL", grpc::INTERNAL},
      {"UNAVAILABLE", grpc::UNAVAILABLE},
      {"DATA_LOSS", grpc::DATA_LOSS},
      {"UNAUTHENTICATED", grpc::UNAUTHENTICATED}};
  auto it = kNames.find(text);
  if (it != kNames.end()) return it->second;
  int code = std::stoi(text);
  if (code < 0 || code > 16) throw std::runtime_error("no gRPC status code " + text);
  return static_cast<grpc::StatusCode>(code);
}

// Blocks until SIGINT or SIGTERM; the signals were blocked before any thread started, so
// only this sigwait sees them.
void WaitForTermination(const sigset_t& signals) {
  int sig = 0;
  sigwait(&signals, &sig);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Live-patching service stand-in (GetComponentConfig) for demos and benchmarks"};
  std::string listen = "127.0.0.1:0", cert_path, key_path, config_path, status = "OK", message;
  int delay_ms = 0;
  bool quiet = false;
  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  app.add_option("--tls-cert", cert_path, "PEM certificate chain, leaf first")->required();
  app.add_option("--tls-key", key_path, "PEM private key")->required();
  app.add_option("--config-file", config_path, "served as `config` for aksNodeController");
  app.add_option("--status", status, "gRPC status to answer with (name or number)")
      ->capture_default_str();
  app.add_option("--status-message", message, "grpc-message for a non-OK --status");
  app.add_option("--delay-ms", delay_ms, "wait this long before answering")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--quiet", quiet, "no line per call on stderr (benchmarks)");
  CLI11_PARSE(app, argc, argv);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  try {
    ts::ListenAddress address = ts::ParseListenAddress(listen);
    ts::FakeLpsServerOptions options;
    options.cert = {ts::ReadFileOrThrow(cert_path), ts::ReadFileOrThrow(key_path)};
    options.host = address.host;
    options.port = address.port;
    options.behavior.code = ParseStatus(status);
    options.behavior.message = message;
    options.behavior.delay = std::chrono::milliseconds(delay_ms);
    options.behavior.config = config_path.empty() ? "" : ts::ReadFileOrThrow(config_path);
    options.behavior.only_component = ts::kAksNodeControllerComponent;
    options.max_recorded_calls = 16;  // only the log needs them; keep memory flat
    // The token is a credential: log its size, never its value.
    if (!quiet)
      options.on_call = [](const ts::LpsCall& call) {
        std::fprintf(stderr, "call component=%s authorization_bytes=%zu user_agent=\"%s\"\n",
                     call.component_name.c_str(), call.Authorization().size(),
                     call.UserAgent().c_str());
      };
    ts::FakeLpsServer server(std::move(options));
    std::cout << "lps-dev-server listening on " << server.address() << std::endl;
    WaitForTermination(signals);
  } catch (const std::exception& e) {
    std::cerr << "lps-dev-server: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
