#include "prometheus.h"

#include <httplib.h>

#include <stdexcept>
#include <thread>

#include "ports.h"
#include "subprocess.h"

namespace hotfix::testsupport {

std::string PrometheusServer::Config(const PrometheusOptions& options) {
  const std::string every = std::to_string(options.scrape_interval.count()) + "s";
  std::string out =
      "global:\n  scrape_interval: " + every + "\n  evaluation_interval: " + every + "\n";
  if (!options.external_labels.empty()) {
    out += "  external_labels:\n";
    for (const auto& [name, value] : options.external_labels) {
      out += "    " + name + ": '" + value + "'\n";
    }
  }
  out += "scrape_configs:\n";
  auto job = [&](const std::string& name, const std::vector<std::string>& list) {
    std::string t;
    for (const std::string& x : list) t += (t.empty() ? "" : ", ") + ("'" + x + "'");
    out += "  - job_name: " + name + "\n    static_configs:\n      - targets: [" + t + "]\n";
  };
  if (!options.targets.empty()) job("live-patching-service", options.targets);
  for (const auto& [name, list] : options.other_jobs) job(name, list);
  if (!options.remote_write.empty()) {
    out += "remote_write:\n";
    for (const std::string& url : options.remote_write) {
      out += "  - url: '" + url + "'\n    queue_config:\n      batch_send_deadline: 1s\n";
    }
  }
  return out;
}

PrometheusServer::PrometheusServer(PrometheusOptions options) : options_(std::move(options)) {
  if (options_.binary.empty()) {
    const char* env = std::getenv("LP_PROMETHEUS_BIN");
    options_.binary = env != nullptr ? env : "prometheus";
  }
  dir_.Write("prometheus.yml", Config(options_));
  Start();
}

PrometheusServer::~PrometheusServer() { Stop(); }

std::string PrometheusServer::url() const { return "http://" + LoopbackAddress(port_); }

bool PrometheusServer::running() const { return process_ != nullptr && process_->running(); }

std::string PrometheusServer::Log() const { return process_ ? process_->Stderr() : ""; }

void PrometheusServer::Start() {
  if (running()) return;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (port_ == 0 || attempt > 0) {
      port_ = options_.port != 0 && attempt == 0 ? options_.port : PickFreePort();
    }
    SpawnOptions spawn;
    spawn.argv = {options_.binary,
                  "--config.file=" + dir_.File("prometheus.yml").string(),
                  "--storage.tsdb.path=" + dir_.File("data").string(),
                  "--web.listen-address=" + LoopbackAddress(port_),
                  "--storage.tsdb.retention.time=1d",
                  "--log.level=warn"};
    if (options_.remote_write_receiver) spawn.argv.push_back("--web.enable-remote-write-receiver");
    process_ = std::make_unique<Subprocess>(std::move(spawn));
    const auto until = std::chrono::steady_clock::now() + options_.start_timeout;
    while (std::chrono::steady_clock::now() < until && process_->running()) {
      httplib::Client client("127.0.0.1", port_);
      client.set_connection_timeout(1);
      auto res = client.Get("/-/ready");
      if (res && res->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (process_->running()) break;  // alive but never ready: not a bind race
  }
  std::string log = Log();
  Stop();
  throw std::runtime_error("prometheus did not become ready:\n" + log);
}

void PrometheusServer::Stop() {
  if (process_ != nullptr && process_->running()) process_->Stop(std::chrono::seconds(20));
}

nlohmann::json PrometheusServer::Query(const std::string& promql) const {
  httplib::Client client("127.0.0.1", port_);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  auto res = client.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
  if (!res || res->status != 200) return nullptr;
  nlohmann::json doc = nlohmann::json::parse(res->body, nullptr, false);
  if (doc.is_discarded() || doc.value("status", "") != "success") return nullptr;
  return doc["data"]["result"];
}

std::optional<double> PrometheusServer::Scalar(const std::string& promql) const {
  nlohmann::json result = Query(promql);
  if (!result.is_array() || result.size() != 1) return std::nullopt;
  return std::stod(result[0]["value"][1].get<std::string>());
}

}  // namespace hotfix::testsupport
