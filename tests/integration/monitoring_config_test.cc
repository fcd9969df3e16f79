// What the shipped monitoring reads is what the service exports: the dashboard
// (deploy/grafana/live-patching-service.json) and the alert rules (deploy/prometheus/alerts.yml)
// against the real service scraped by the real Prometheus (Debian's). Every metric either file
// names is one the service exports (a renamed metric would leave a dead panel or an alert
// that never fires), and every dashboard query is valid PromQL that Prometheus evaluates
// without error. promtool checks the rules themselves (CTest: promtool_alert_rules).
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "akslivepatching/v1/live_patching.grpc.pb.h"
#include "prometheus.h"
#include "service_fixture.h"

namespace hotfix::testsupport {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::string ReadSource(const std::string& relative) {
  std::ifstream in(SourceDir() + "/" + relative);
  EXPECT_TRUE(in.good()) << relative;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every lp_* and process_* name a text mentions.
std::set<std::string> MetricNames(const std::string& text) {
  std::set<std::string> names;
  static const std::regex kName("\\b((lp|process)_[a-z_]+)\\b");
  for (std::sregex_iterator it(text.begin(), text.end(), kName), end; it != end; ++it) {
    names.insert((*it)[1]);
  }
  return names;
}

// The families /metrics exports: sample names, and TYPE lines of families with no sample yet.
std::set<std::string> Exported(const std::string& metrics) {
  std::set<std::string> names;
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      names.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (!line.empty() && line[0] != '#') {
      names.insert(line.substr(0, line.find_first_of("{ ")));
    }
  }
  return names;
}

// A rollout with auto_halt, so that every rollout family has a series.
constexpr char kFile[] = R"({"hotfixes":{"202604.01":"202604.01.3"},"rollouts":[
  {"name":"canary","hotfixes":{"202604.01":"202604.01.4"},
   "steps":[{"at":"2026-01-01T00:00:00Z","percent":100}],
   "auto_halt":{"max_failure_percent":50,"min_reports":10},
   "resume_note":{"at":"2026-01-02T00:00:00Z","by":"ops","reason":"a test"}}]})";

TEST(MonitoringConfigTest, TheDashboardAndAlertsReadWhatTheServiceExports) {
  ServiceFiles files;
  files.WriteComponent(kAksNodeControllerComponent, kFile);
  const uint16_t metrics_port = PickFreePort();
  PrometheusOptions options;
  options.targets = {LoopbackAddress(metrics_port)};
  PrometheusServer prometheus(std::move(options));
  ServiceProcess lps(files.Args({"--metrics-listen", LoopbackAddress(metrics_port),
                                 "--prometheus-url", prometheus.url(), "--prometheus-selector",
                                 "job=\"live-patching-service\"", "--auto-halt-interval", "1s",
                                 // lp_memory_limit_bytes is exported only under a limit.
                                 "--memory-limit", "1Gi"}));
  // One call and one report, so the call and outcome families have series.
  ASSERT_TRUE(CallGetComponentConfig(lps.Channel(files), kAksNodeControllerComponent, files.Token())
                  .status.ok());
  {
    auto stub = akslivepatching::v1::LivePatchingService::NewStub(lps.Channel(files));
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", files.Token());
    akslivepatching::v1::ReportHotfixOutcomeRequest req;
    req.set_component_name(kAksNodeControllerComponent);
    req.set_base_version("202604.01");
    req.set_hotfix_version("202604.01.4");
    req.set_outcome(akslivepatching::v1::HOTFIX_OUTCOME_INSTALLED);
    akslivepatching::v1::ReportHotfixOutcomeResponse resp;
    ASSERT_TRUE(stub->ReportHotfixOutcome(&ctx, req, &resp).ok());
  }
  const std::set<std::string> exported = Exported(HttpGet(metrics_port, "/metrics"));

  const std::string dashboard_text = ReadSource("deploy/grafana/live-patching-service.json");
  const std::string alerts_text = ReadSource("deploy/prometheus/alerts.yml");
  for (const auto& [file, text] :
       {std::pair{"dashboard", dashboard_text}, std::pair{"alerts", alerts_text}}) {
    const std::set<std::string> named = MetricNames(text);
    EXPECT_GE(named.size(), 7u) << file;  // the scan found the names at all
    for (const std::string& name : named) {
      // A histogram's series are <name>_bucket/_sum/_count; its family is <name>.
      const std::string family = std::regex_replace(name, std::regex("_bucket$"), "");
      EXPECT_TRUE(exported.count(name) != 0 || exported.count(family) != 0)
          << file << " names " << name << ", which the service does not export";
    }
  }

  // Prometheus has scraped the service under the job the files select.
  std::optional<double> up;
  WaitFor([&] { return (up = prometheus.Scalar("up{job=\"live-patching-service\"}")) == 1.0; },
          60s);
  ASSERT_EQ(up, 1.0) << prometheus.Log();
  Json dashboard = Json::parse(dashboard_text);
  // Every query narrows to the replicas the $instance variable picks; Grafana puts its regex
  // there ("All" is .*), and this replica is one of them.
  bool has_instance_variable = false;
  for (const Json& v : dashboard["templating"]["list"]) {
    has_instance_variable = has_instance_variable || v.value("name", "") == "instance";
  }
  EXPECT_TRUE(has_instance_variable);
  auto as_grafana_sends = [](std::string expr) {
    return std::regex_replace(expr, std::regex(R"(\$instance)"), ".*");
  };
  size_t queries = 0;
  for (const Json& panel : dashboard["panels"]) {
    for (const Json& target : panel["targets"]) {
      const std::string expr = target["expr"];
      EXPECT_THAT(expr, HasSubstr(R"(instance=~"$instance")")) << panel["title"];
      Json result = prometheus.Query(as_grafana_sends(expr));
      EXPECT_TRUE(result.is_array())
          << "panel \"" << panel["title"].get<std::string>() << "\": " << expr;
      ++queries;
    }
  }
  EXPECT_GE(queries, 13u);
  // The halts' and reloads' annotations are queries too.
  size_t annotations = 0;
  for (const Json& a : dashboard["annotations"]["list"]) {
    EXPECT_TRUE(prometheus.Query(as_grafana_sends(a["expr"])).is_array()) << a["name"];
    ++annotations;
  }
  EXPECT_EQ(annotations, 2u);
  // The per-replica table of files: this replica's row, with the file's digest.
  std::string table_expr;
  for (const Json& panel : dashboard["panels"]) {
    if (panel["type"] == "table") table_expr = panel["targets"][0]["expr"];
  }
  ASSERT_FALSE(table_expr.empty());
  Json rows;
  WaitFor([&] { return (rows = prometheus.Query(as_grafana_sends(table_expr))).size() == 1; }, 60s);
  ASSERT_EQ(rows.size(), 1u) << rows.dump();
  EXPECT_EQ(rows[0]["metric"].value("component", ""), kAksNodeControllerComponent);
  EXPECT_EQ(rows[0]["metric"].value("sha256", "").size(), 12u);
}

}  // namespace
}  // namespace hotfix::testsupport
