// PrometheusMetrics (ops/metrics.h) and the families read at each scrape
// (ops/scraped_metrics.h), served by the metrics listener (ops/metrics_http.h): what the
// service records comes back from a real HTTP GET of /metrics as the text format's series,
// with the labels bounded as promised; /rollouts serves the rollouts' JSON; nothing else is
// served.

#include "service/ops/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "rollout_example.h"
#include "service/control/rollout_status.h"
#include "service/ops/metric_names.h"
#include "service/store/component_file.h"

namespace hotfix::service {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

constexpr char kAks[] = "aksNodeController";

// The text format's samples: "name{labels}" -> value (comments and blank lines skipped).
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

std::string Get(uint16_t port, const std::string& path, int* status) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  auto response = client.Get(path);
  if (!response) {
    ADD_FAILURE() << "GET " << path << ": " << httplib::to_string(response.error());
    *status = 0;
    return "";
  }
  *status = response->status;
  return response->body;
}

class MetricsTest : public ::testing::Test {
 protected:
  MetricsTest() : status_(&store_) { store_.Set(ExampleFile("anc-1")); }

  PrometheusMetrics metrics_{{.max_subscription_labels = 2, .version = "1.2.3", .revision = "abc"}};
  SwappableStore store_;
  RolloutStatus status_;
};

TEST_F(MetricsTest, WhatIsRecordedIsScrapedWithBoundedLabels) {
  metrics_.RecordCall({.component = kAks, .seconds = 0.002, .subscription_id = "s1"});
  metrics_.RecordCall({.component = kAks, .seconds = 0.003, .subscription_id = "s1"});
  metrics_.RecordCall({.component = "unknown",
                       .code = wire::GrpcCode::kNotFound,
                       .seconds = 0.001,
                       .subscription_id = ""});
  // A third and fourth subscription go past the cap of 2: counted as "other".
  metrics_.RecordCall({.component = kAks, .seconds = 0.002, .subscription_id = "s2"});
  metrics_.RecordCall({.component = kAks, .seconds = 0.002, .subscription_id = "s3"});
  metrics_.RecordCall({.component = kAks, .seconds = 0.002, .subscription_id = "s4"});
  metrics_.RecordCall({.method = "ReportHotfixOutcome",
                       .component = kAks,
                       .code = wire::GrpcCode::kInvalidArgument,
                       .seconds = 0.004,
                       .subscription_id = ""});
  metrics_.RecordOutcome(kAks, "anc-1", contract::HOTFIX_OUTCOME_INSTALL_FAILED);
  ReloadReport reload;
  reload.swapped = true;
  reload.generation = 3;
  reload.rejected = {{"other.json", "other.json: cut short"}};
  reload.complete = true;
  metrics_.RecordReload(reload);
  metrics_.RecordTransportEvent(TransportEvent::kAccepted);
  metrics_.RecordTransportEvent(TransportEvent::kAccepted);
  metrics_.RecordTransportEvent(TransportEvent::kClosed);
  metrics_.SetConnectionLimits(2163, 128u << 20);
  status_.RecordApplied(1, kAks, {0});

  ASSERT_TRUE(metrics_.Listen("127.0.0.1:0", {.store = &store_, .rollouts = &status_}).ok());
  ASSERT_NE(metrics_.port(), 0);
  int code = 0;
  const std::string text = Get(metrics_.port(), "/metrics", &code);
  ASSERT_EQ(code, 200);
  const std::map<std::string, double> s = Samples(text);
  auto at = [&](const std::string& series) {
    auto it = s.find(series);
    EXPECT_NE(it, s.end()) << series << " not in:\n" << text;
    return it == s.end() ? -1 : it->second;
  };
  EXPECT_EQ(at(R"(lp_build_info{revision="abc",version="1.2.3"})"), 1);
  EXPECT_EQ(
      at(R"(lp_requests_total{code="OK",component="aksNodeController",method="GetComponentConfig"})"),
      5);
  EXPECT_EQ(
      at(R"(lp_requests_total{code="NOT_FOUND",component="unknown",method="GetComponentConfig"})"),
      1);
  EXPECT_EQ(
      at(R"(lp_requests_total{code="INVALID_ARGUMENT",component="aksNodeController",method="ReportHotfixOutcome"})"),
      1);
  EXPECT_EQ(at(R"(lp_requests_by_subscription_total{subscription="s1"})"), 2);
  EXPECT_EQ(at(R"(lp_requests_by_subscription_total{subscription="s2"})"), 1);
  EXPECT_EQ(at(R"(lp_requests_by_subscription_total{subscription="other"})"), 2);
  EXPECT_EQ(s.count(R"(lp_requests_by_subscription_total{subscription="s3"})"), 0u);
  EXPECT_EQ(
      at(R"(lp_rollout_outcomes_total{component="aksNodeController",outcome="install_failed",rollout="anc-1"})"),
      1);
  EXPECT_EQ(at("lp_store_generation"), 3);
  EXPECT_EQ(at("lp_store_last_reload_successful"), 0);  // a file was refused
  EXPECT_EQ(at("lp_store_rejected_files"), 1);
  EXPECT_EQ(at("lp_store_complete"), 1);
  EXPECT_EQ(at(R"(lp_store_reloads_total{result="rejected_files"})"), 1);
  EXPECT_EQ(at(R"(lp_store_reloads_total{result="error"})"), 0);  // there from the start
  EXPECT_EQ(at(R"(lp_transport_events_total{event="accepted"})"), 2);
  EXPECT_EQ(at("lp_open_connections"), 1);
  EXPECT_EQ(at("lp_max_connections"), 2163);
  EXPECT_EQ(at("lp_memory_limit_bytes"), 128u << 20);
  // Read at the scrape: the store's file and the rollout (complete since the 5th).
  EXPECT_EQ(at(R"(lp_component_file_info{component="aksNodeController",sha256=")" +
               store_.Current()->components.at(kAks)->digest + "\"}"),
            1);
  EXPECT_EQ(at(R"(lp_rollout_applied_total{component="aksNodeController",rollout="anc-1"})"), 1);
  EXPECT_EQ(at(R"(lp_rollout_ratio{component="aksNodeController",rollout="anc-1"})"), 1);
  EXPECT_EQ(at(R"(lp_rollout_halted{component="aksNodeController",rollout="anc-1"})"), 0);
  // The latency histograms, one per method.
  EXPECT_EQ(at(R"(lp_request_duration_seconds_count{method="GetComponentConfig"})"), 6);
  EXPECT_EQ(at(R"(lp_request_duration_seconds_count{method="ReportHotfixOutcome"})"), 1);
}

TEST_F(MetricsTest, RolloutsAreServedAsJsonAndNothingElseIs) {
  ASSERT_TRUE(metrics_.Listen("127.0.0.1:0", {.store = &store_, .rollouts = &status_}).ok());
  int code = 0;
  const std::string body = Get(metrics_.port(), "/rollouts", &code);
  ASSERT_EQ(code, 200);
  const nlohmann::json rollouts = nlohmann::json::parse(body);
  EXPECT_EQ(rollouts.at("components").at(kAks).at(0).at("name"), "anc-1");
  Get(metrics_.port(), "/elsewhere", &code);
  EXPECT_EQ(code, 404);
  // A second Listen is refused; StopListening stops serving.
  EXPECT_FALSE(metrics_.Listen("127.0.0.1:0").ok());
  const uint16_t port = metrics_.port();
  metrics_.StopListening();
  EXPECT_EQ(metrics_.port(), 0);
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  EXPECT_FALSE(client.Get("/metrics"));
}

TEST(MetricsNoListenTest, ABadAddressIsRefused) {
  PrometheusMetrics metrics;
  EXPECT_FALSE(metrics.Listen("not an address").ok());
  EXPECT_EQ(metrics.port(), 0);
}

}  // namespace
}  // namespace hotfix::service
