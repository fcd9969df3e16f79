#include "service/prometheus_outcomes.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "service/metrics.h"
#include "wire/http_client.h"

namespace hotfix::service {
namespace {

using json = nlohmann::json;

// RFC 3986 percent-encoding of a query parameter: Boost 1.74 has no URL library, and these
// are our own PromQL texts and numbers.
std::string QueryEscape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.append(1, '%').append(1, kHex[c >> 4]).append(1, kHex[c & 15]);
    }
  }
  return out;
}

std::string OutcomesQuery(std::chrono::seconds step) {
  const std::string m = kMetricRolloutOutcomes;
  const std::string offset = " offset " + std::to_string(step.count()) + "s";
  return "sum by (component, rollout, outcome) ((" + m + " - " + m + offset + ") >= 0 or " + m +
         ") > 0";
}

std::string KnownQuery() {
  return std::string("group by (component, rollout) (") + kMetricRolloutApplied + ")";
}

// The `data.result` array of a successful answer of resultType `want`.
StatusOr<json> Result(std::string_view body, std::string_view want) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::Unavailable("prometheus answer is not a JSON object");
  }
  auto status = doc.find("status");
  if (status == doc.end() || *status != "success") {
    auto error = doc.find("error");
    return Status::Unavailable("prometheus query failed: " +
                               EscapeForMessage(error != doc.end() && error->is_string()
                                                    ? error->get<std::string>()
                                                    : doc.dump(),
                                                256));
  }
  auto data = doc.find("data");
  if (data == doc.end() || !data->is_object() || !data->contains("resultType") ||
      (*data)["resultType"] != want || !data->contains("result") || !(*data)["result"].is_array()) {
    return Status::Unavailable("prometheus answer has no " + std::string(want) + " result");
  }
  return std::move((*data)["result"]);
}

std::optional<std::string> Label(const json& series, const char* name) {
  auto metric = series.find("metric");
  if (metric == series.end() || !metric->is_object()) return std::nullopt;
  auto value = metric->find(name);
  if (value == metric->end() || !value->is_string()) return std::nullopt;
  return value->get<std::string>();
}

// A sample's value: Prometheus writes floats as strings.
std::optional<double> SampleValue(const json& pair, double* time) {
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_string()) {
    return std::nullopt;
  }
  *time = pair[0].get<double>();
  const std::string& text = pair[1].get_ref<const std::string&>();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

class PrometheusOutcomeSource final : public OutcomeSource {
 public:
  explicit PrometheusOutcomeSource(PrometheusOutcomeOptions options)
      : options_(std::move(options)) {
    while (!options_.url.empty() && options_.url.back() == '/') options_.url.pop_back();
  }

  StatusOr<OutcomeEvidence> Fetch(RolloutTime from, RolloutTime now) override {
    using std::chrono::seconds;
    const seconds step =
        PrometheusStep(std::chrono::duration_cast<seconds>(now - from), options_.min_step);
    // Steps on multiples of `step`, the first one at or before `from`.
    const int64_t start = (from.time_since_epoch().count() / step.count()) * step.count();
    const std::string range = options_.url +
                              "/api/v1/query_range?query=" + QueryEscape(OutcomesQuery(step)) +
                              "&start=" + std::to_string(start) +
                              "&end=" + std::to_string(now.time_since_epoch().count()) +
                              "&step=" + std::to_string(step.count());
    StatusOr<std::string> matrix = Get(range);
    if (!matrix.ok()) return matrix.status();
    StatusOr<OutcomeEvidence> evidence = ParseOutcomeMatrix(*matrix, step);
    if (!evidence.ok()) return evidence;
    const std::string instant = options_.url + "/api/v1/query?query=" + QueryEscape(KnownQuery()) +
                                "&time=" + std::to_string(now.time_since_epoch().count());
    StatusOr<std::string> known = Get(instant);
    if (!known.ok()) return known.status();
    if (Status st = ParseKnownRollouts(*known, &*evidence); !st.ok()) return st;
    return evidence;
  }

 private:
  StatusOr<std::string> Get(const std::string& url) {
    wire::HttpGetOptions get;
    get.url_label = "prometheus url";
    get.request.user_agent = "live-patching-service";
    get.response.label = "prometheus";
    get.response.max_body_bytes = options_.max_body_bytes;
    get.connect_timeout = options_.timeout;
    StatusOr<wire::HttpResponse> response =
        wire::HttpGet(url, get, Deadline::After(options_.timeout));
    if (!response.ok()) return response.status();
    // Prometheus answers a bad query with 400 or 422 and a JSON error, which Result reads.
    if (response->status != 200 && response->status != 400 && response->status != 422) {
      return Status::Unavailable("prometheus answered HTTP " + std::to_string(response->status));
    }
    return std::move(response->body);
  }

  PrometheusOutcomeOptions options_;
};

}  // namespace

std::chrono::seconds PrometheusStep(std::chrono::seconds window, std::chrono::seconds min_step) {
  static constexpr int64_t kSteps[] = {1,   2,   5,    10,   15,   30,    60,    120,  300,
                                       600, 900, 1800, 3600, 7200, 21600, 43200, 86400};
  const int64_t need = std::max<int64_t>({1, min_step.count(), (window.count() + 9999) / 10000});
  for (int64_t s : kSteps) {
    if (s >= need) return std::chrono::seconds(s);
  }
  return std::chrono::seconds(((need + 86399) / 86400) * 86400);
}

StatusOr<OutcomeEvidence> ParseOutcomeMatrix(std::string_view body, std::chrono::seconds step) {
  StatusOr<json> result = Result(body, "matrix");
  if (!result.ok()) return result.status();
  OutcomeEvidence evidence;
  for (const json& series : *result) {
    std::optional<std::string> component = Label(series, "component");
    std::optional<std::string> rollout = Label(series, "rollout");
    std::optional<std::string> outcome = Label(series, "outcome");
    auto values = series.find("values");
    if (!component || !rollout || rollout->empty() || values == series.end() ||
        !values->is_array()) {
      continue;  // unattributed reports, or not our series
    }
    // An outcome this service does not name (a newer replica's) counts as a failure.
    std::optional<ReportedOutcome> kind = ReportedOutcomeFromName(outcome.value_or(""));
    const bool failure = !kind || IsFailure(*kind);
    std::vector<TallyStep>& steps = evidence.steps[{*component, *rollout}];
    for (const json& pair : *values) {
      double time = 0;
      std::optional<double> v = SampleValue(pair, &time);
      if (!v) return Status::Unavailable("prometheus answer has a malformed sample");
      const auto added = static_cast<uint64_t>(std::llround(std::max(0.0, *v)));
      const RolloutTime end(std::chrono::seconds(std::llround(time)));
      TallyStep tally{end - step, end, {added, failure ? added : 0}};
      steps.push_back(tally);
    }
  }
  return evidence;
}

Status ParseKnownRollouts(std::string_view body, OutcomeEvidence* evidence) {
  StatusOr<json> result = Result(body, "vector");
  if (!result.ok()) return result.status();
  for (const json& series : *result) {
    std::optional<std::string> component = Label(series, "component");
    std::optional<std::string> rollout = Label(series, "rollout");
    if (component && rollout) evidence->known.insert({*component, *rollout});
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<OutcomeSource>> NewPrometheusOutcomeSource(
    PrometheusOutcomeOptions options) {
  StatusOr<wire::HttpUrl> url = wire::ParseHttpUrl(options.url, "--prometheus-url");
  if (!url.ok()) return url.status();
  if (url->target.find('?') != std::string::npos) {
    return Status::InvalidArgument("--prometheus-url " + options.url + ": no query allowed");
  }
  return std::unique_ptr<OutcomeSource>(new PrometheusOutcomeSource(std::move(options)));
}

}  // namespace hotfix::service
