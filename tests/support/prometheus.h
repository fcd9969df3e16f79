// Prometheus: the real Prometheus server from Debian's `prometheus` package, on loopback, with
// a generated config scraping the given targets, its data in a folder that survives Stop()
// and Start() (a restart keeps the history, as a production Prometheus does).
//
//   PrometheusServer prom({.targets = {"127.0.0.1:9101", "127.0.0.1:9102"}});
//   ... prom.url() is "http://127.0.0.1:<port>" ...
//   nlohmann::json v = prom.Query("sum(lp_rollout_outcomes_total)");   // data.result
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace hotfix::testsupport {

class Subprocess;

struct PrometheusOptions {
  // "host:port" of /metrics endpoints, job "live-patching-service" (deploy/prometheus selects
  // it)
  std::vector<std::string> targets;
  // Other scrape jobs: name -> targets (a foreign exporter the selector must leave out).
  std::vector<std::pair<std::string, std::vector<std::string>>> other_jobs;
  std::chrono::seconds scrape_interval{1};
  // global.external_labels, e.g. {"replica", "a"} for one of an HA pair.
  std::vector<std::pair<std::string, std::string>> external_labels;
  // remote_write to these URLs (an HA pair writing into one store).
  std::vector<std::string> remote_write;
  // --web.enable-remote-write-receiver: the store an HA pair writes into, which keeps both
  // copies apart by their external labels (what a querier without deduplication sees).
  bool remote_write_receiver = false;
  // A port to listen on (0: a free one): a new Prometheus where an old one was.
  uint16_t port = 0;
  // Empty: $LP_PROMETHEUS_BIN, else "prometheus" from PATH (Debian: /usr/bin/prometheus).
  std::string binary;
  std::chrono::milliseconds start_timeout = std::chrono::seconds(30);
};

class PrometheusServer {
 public:
  // Starts it and returns once /-/ready answers 200; throws std::runtime_error with its
  // output otherwise.
  explicit PrometheusServer(PrometheusOptions options);
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  uint16_t port() const { return port_; }
  std::string url() const;  // http://127.0.0.1:<port>
  bool running() const;
  // SIGTERM and wait (Prometheus flushes its head block). Idempotent.
  void Stop();
  // Starts again on the same port with the same data.
  void Start();
  std::string Log() const;

  // GET /api/v1/query: the answer's data.result, or null when the query failed.
  nlohmann::json Query(const std::string& promql) const;
  // The value of a query whose answer is one sample; nullopt when it has none.
  std::optional<double> Scalar(const std::string& promql) const;

  // The prometheus.yml it runs with: one job, these targets, this scrape interval.
  static std::string Config(const PrometheusOptions& options);

 private:
  PrometheusOptions options_;
  TempDir dir_{"prometheus"};
  uint16_t port_ = 0;
  std::unique_ptr<Subprocess> process_;
};

}  // namespace hotfix::testsupport
