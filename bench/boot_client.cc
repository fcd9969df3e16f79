// boot-client: the node-boot load of bench/node_boot_bench.sh (--client cxx) made by the node's
// own client: every call is hotfix::node::NewGrpcLpsFetcher's Fetch(), the very path
// `hotfix-agent check-hotfix` takes (the node config read, the cluster CA checked, a new TCP
// connection and TLS handshake with SNI the apiserver's name and ALPN aks-live-patching,h2,
// one unary GetComponentConfig), with the next document of a pool where the node would ask
// IMDS. It prints the lines `benchclient boot` prints, so the bench reads either:
//
//   result ok=N failed=N grpc_non_ok=N transport_errors=N elapsed_s=X calls_per_s=X
//          client_cpu_s=X tokens_used=N exhausted=0|1 p50_ms=X p99_ms=X max_ms=X
//   codes NAME=N ...        (answers that did not count, by grpc code)
//   errors local=N          (calls that never reached a gRPC status)
//
//   boot-client --node-config F --connect-to HOST:PORT --tokens-file F [--skip K]
//               [--parallel P] [--seconds S] [--expect CONFIG] [--want-code N]
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/log.h"
#include "node/check/lps_fetcher.h"
#include "wire/grpc_status.h"

namespace {

using Clock = std::chrono::steady_clock;

// The pool's documents, one per call, in place of IMDS.
class PoolTokenSource : public hotfix::node::AttestedTokenSource {
 public:
  explicit PoolTokenSource(const std::string* token) : token_(token) {}
  hotfix::StatusOr<hotfix::Secret> Fetch(hotfix::Deadline) override {
    return hotfix::Secret(*token_);
  }

 private:
  const std::string* token_;
};

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Totals {
  std::mutex mu;
  int ok = 0, non_ok = 0, local = 0;
  std::map<std::string, int> codes;
  std::vector<double> ok_ms;
  std::vector<std::string> first_errors;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"boot-client: the node-boot load from the node's own client"};
  hotfix::node::GrpcLpsFetcherOptions options;
  std::string tokens_file, expect;
  size_t skip = 0;
  int parallel = 32, want_code = 0;
  double seconds = 10;
  app.add_option("--node-config", options.node_config_path)->required();
  app.add_option("--connect-to", options.connect_to)->required();
  app.add_option("--tokens-file", tokens_file)->required();
  app.add_option("--skip", skip);
  app.add_option("--parallel", parallel)->check(CLI::Range(1, 4096));
  app.add_option("--seconds", seconds);
  app.add_option("--expect", expect, "the config an OK answer must carry (empty: any)");
  app.add_option("--want-code", want_code, "the grpc code a call must end with to count");
  CLI11_PARSE(app, argc, argv);
  options.user_agent = "hotfix-agent/202604.01.0";

  std::vector<std::string> tokens;
  {
    std::ifstream in(tokens_file);
    for (std::string line; std::getline(in, line);) tokens.push_back(std::move(line));
  }
  if (skip >= tokens.size()) {
    std::fprintf(stderr, "boot: --skip %zu leaves no token of %zu\n", skip, tokens.size());
    return 2;
  }
  hotfix::Logger& log = hotfix::NullLogger();  // the agent's log lines are not the load
  std::atomic<size_t> next{skip};
  std::atomic<bool> exhausted{false};
  Totals totals;
  const double cpu0 = CpuSeconds();
  const auto start = Clock::now();
  const auto stop_at = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> workers;
  for (int w = 0; w < parallel; ++w) {
    workers.emplace_back([&] {
      while (Clock::now() < stop_at) {
        const size_t i = next.fetch_add(1);
        if (i >= tokens.size()) {
          exhausted = true;
          return;
        }
        PoolTokenSource source(&tokens[i]);
        auto fetcher = hotfix::node::NewGrpcLpsFetcher(options, source, log);
        const auto t0 = Clock::now();
        hotfix::node::FetchResult r = fetcher->Fetch();
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        std::lock_guard<std::mutex> lock(totals.mu);
        const bool counts = r.local_error    ? false
                            : want_code == 0 ? r.ok() && (expect.empty() || r.config == expect)
                                             : static_cast<int>(r.status.code) == want_code;
        if (counts) {
          ++totals.ok;
          totals.ok_ms.push_back(ms);
          continue;
        }
        if (r.local_error) {
          ++totals.local;
        } else {
          ++totals.non_ok;
          ++totals.codes[std::string(hotfix::wire::GrpcCodeUpperName(r.status.code))];
        }
        if (totals.first_errors.size() < 10) {
          totals.first_errors.push_back("token " + std::to_string(i) + ": " + r.ErrorText());
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = CpuSeconds() - cpu0;
  std::sort(totals.ok_ms.begin(), totals.ok_ms.end());
  auto pct = [&](double p) {  // nearest rank
    if (totals.ok_ms.empty()) return 0.0;
    size_t i = static_cast<size_t>(p * static_cast<double>(totals.ok_ms.size()) + 0.999999);
    return totals.ok_ms[std::clamp<size_t>(i, 1, totals.ok_ms.size()) - 1];
  };
  const size_t used = std::min(next.load(), tokens.size()) - skip;
  const int failed = totals.non_ok + totals.local;
  std::printf(
      "result ok=%d failed=%d grpc_non_ok=%d transport_errors=%d elapsed_s=%.3f "
      "calls_per_s=%.1f client_cpu_s=%.3f tokens_used=%zu exhausted=%d p50_ms=%.2f "
      "p99_ms=%.2f max_ms=%.2f\n",
      totals.ok, failed, totals.non_ok, totals.local, elapsed, totals.ok / elapsed, cpu, used,
      exhausted ? 1 : 0, pct(0.5), pct(0.99), pct(1));
  std::printf("codes");
  for (const auto& [name, n] : totals.codes) std::printf(" %s=%d", name.c_str(), n);
  std::printf("\nalpn\nerrors");
  if (totals.local > 0) std::printf(" local=%d", totals.local);
  std::printf("\n");
  for (const std::string& e : totals.first_errors)
    std::fprintf(stderr, "boot: failed call: %s\n", e.c_str());
  return failed > 0 ? 1 : 0;
}
