// imds-standin: serves IMDS's attested-document contract for the local demo.
//
//   imds-standin --listen 127.0.0.1:8080 [--signer-cert s.crt --signer-key s.key]
//                [--write-signer-ca ca.pem] [--delay-ms N] [--status N] [--fail-first N]
//
// Without --signer-cert/--signer-key it generates a signer for metadata.azure.com under a
// fresh test root; --write-signer-ca saves that root so a verifier can trust it. Prints
// "imds-standin listening on http://127.0.0.1:<port>" once ready, one line per request on
// stderr, and exits cleanly on SIGINT/SIGTERM.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "imds_standin.h"
#include "ports.h"
#include "text_util.h"

namespace ts = hotfix::testsupport;

namespace {

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path);
}

// Logs requests that arrived since the last call; the stand-in records, this prints.
void LogNewRequests(const ts::ImdsStandin& imds, size_t* logged) {
  auto requests = imds.requests();
  for (; *logged < requests.size(); ++*logged) {
    const auto& r = requests[*logged];
    std::fprintf(stderr, "request %s %s metadata=\"%s\" proxied=%s\n", r.method.c_str(),
                 r.target.c_str(), r.Header("Metadata").c_str(), r.LooksProxied() ? "yes" : "no");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Azure IMDS attested-document stand-in for the local demo"};
  std::string listen = "127.0.0.1:0", signer_cert, signer_key, write_ca, vm_id;
  int delay_ms = 0, status = 0, fail_first = 0;
  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  auto* cert_opt = app.add_option("--signer-cert", signer_cert, "PEM certificate that signs");
  auto* key_opt = app.add_option("--signer-key", signer_key, "PEM key of --signer-cert");
  cert_opt->needs(key_opt);
  key_opt->needs(cert_opt);
  app.add_option("--write-signer-ca", write_ca, "write the generated signer's root CA here")
      ->excludes(cert_opt);
  app.add_option("--vm-id", vm_id, "the vmId of the node this IMDS answers for");
  app.add_option("--delay-ms", delay_ms, "wait before every answer")->check(CLI::NonNegativeNumber);
  app.add_option("--status", status, "answer this HTTP status instead of 200");
  app.add_option("--fail-first", fail_first, "answer 500 to the first N valid requests")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread: only sigwait sees them
  try {
    ts::ListenAddress address = ts::ParseListenAddress(listen);
    ts::ImdsStandinOptions options;
    options.host = address.host;
    options.port = address.port;
    if (!signer_cert.empty())
      options.signer = {ts::ReadFileOrThrow(signer_cert), ts::ReadFileOrThrow(signer_key)};
    if (!vm_id.empty()) options.vm_id = vm_id;
    options.behavior.delay = std::chrono::milliseconds(delay_ms);
    if (status != 0) options.behavior.status = status;
    options.behavior.failures_before_success = fail_first;
    ts::ImdsStandin imds(std::move(options));
    if (!write_ca.empty()) WriteFile(write_ca, imds.signer_ca_pem());
    std::cout << "imds-standin listening on " << imds.base_url() << std::endl;
    size_t logged = 0;
    timespec tick{0, 200 * 1000 * 1000};
    // Wake every 200 ms to log new requests until a termination signal arrives.
    while (sigtimedwait(&signals, nullptr, &tick) < 0) LogNewRequests(imds, &logged);
    LogNewRequests(imds, &logged);
  } catch (const std::exception& e) {
    std::cerr << "imds-standin: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
