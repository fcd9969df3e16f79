#include "service/ops/prometheus_outcomes.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "service/ops/metric_names.h"
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
    if (IsAsciiAlnum(static_cast<char>(c)) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.append(1, '%').append(1, kHex[c >> 4]).append(1, kHex[c & 15]);
    }
  }
  return out;
}

// The reports each step of `step` added, summed over replicas (prometheus_outcomes.h).
std::string OutcomesQuery(std::chrono::seconds step) {
  const std::string m = kMetricRolloutOutcomes;
  const std::string offset = " offset " + std::to_string(step.count()) + "s";
  return "sum by (component, rollout, outcome) ((" + m + " - " + m + offset + ") >= 0 or " + m +
         ") > 0";
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

// A sample's value: Prometheus writes floats as strings. The time must be a Unix time in
// seconds this side of year 36,812 (2^40 s), so that step arithmetic cannot overflow.
std::optional<double> SampleValue(const json& pair, double* time) {
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_string()) {
    return std::nullopt;
  }
  *time = pair[0].get<double>();
  if (!(*time >= 0 && *time <= static_cast<double>(kMaxAutoHaltCount))) return std::nullopt;
  const std::string& text = pair[1].get_ref<const std::string&>();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

// Requests of at most this many steps (Prometheus refuses more than 11,000 points a series).
constexpr int64_t kMaxStepsPerRequest = 10000;
// Steps read again at each evaluation: a scrape is stored some time after its timestamp, so
// the last steps read may have grown since.
constexpr int64_t kRereadSteps = 10;
constexpr std::chrono::seconds kRereadAtLeast{60};

int64_t Seconds(RolloutTime t) { return t.time_since_epoch().count(); }

void AppendSteps(const std::map<RolloutKey, std::vector<TallyStep>>& from,
                 std::map<RolloutKey, std::vector<TallyStep>>* to) {
  for (const auto& [key, steps] : from) {
    std::vector<TallyStep>& into = (*to)[key];
    into.insert(into.end(), steps.begin(), steps.end());
  }
}

class PrometheusOutcomeSource final : public OutcomeSource {
 public:
  explicit PrometheusOutcomeSource(PrometheusOutcomeOptions options)
      : options_(std::move(options)), step_(PrometheusStep(options_.step)) {
    while (!options_.url.empty() && options_.url.back() == '/') options_.url.pop_back();
  }

  StatusOr<OutcomeEvidence> Fetch(RolloutTime from, RolloutTime now) override {
    const int64_t step = step_.count();
    from = std::max(from, now - options_.max_window);
    // Steps end on multiples of the step; the first ends at or before `from`.
    const RolloutTime first(std::chrono::seconds(Seconds(from) / step * step));
    const RolloutTime last(std::chrono::seconds(Seconds(now) / step * step));
    RolloutTime read_from = first;
    if (kept_until_ && first >= kept_from_) {
      const auto reread = std::max<std::chrono::seconds>(step_ * kRereadSteps, kRereadAtLeast);
      read_from = std::max(kept_from_, *kept_until_ - reread);
      read_from = RolloutTime(std::chrono::seconds(Seconds(read_from) / step * step));
    }
    OutcomeEvidence read;
    for (RolloutTime chunk = read_from; chunk <= last; chunk += step_ * kMaxStepsPerRequest) {
      const RolloutTime chunk_end = std::min(last, chunk + step_ * (kMaxStepsPerRequest - 1));
      StatusOr<std::string> body =
          Get("/api/v1/query_range?query=" + QueryEscape(OutcomesQuery(step_)) +
              "&start=" + std::to_string(Seconds(chunk)) +
              "&end=" + std::to_string(Seconds(chunk_end)) + "&step=" + std::to_string(step));
      if (!body.ok()) return body.status();
      StatusOr<OutcomeEvidence> part = ParseOutcomeMatrix(*body, step_);
      if (!part.ok()) return part.status();
      AppendSteps(part->steps, &read.steps);
    }
    Keep(read, read_from, last);

    OutcomeEvidence evidence;
    evidence.steps = kept_;
    if (now > last) {  // the step in progress, read at `now`
      const std::chrono::seconds back = now - last;
      StatusOr<std::string> body = Get("/api/v1/query?query=" + QueryEscape(OutcomesQuery(back)) +
                                       "&time=" + std::to_string(Seconds(now)));
      if (!body.ok()) return body.status();
      StatusOr<OutcomeEvidence> partial = ParseOutcomeVector(*body, last, now);
      if (!partial.ok()) return partial.status();
      AppendSteps(partial->steps, &evidence.steps);
    }
    StatusOr<std::string> known = Get(
        "/api/v1/query?query=" +
        QueryEscape(std::string("group by (component, rollout) (") + kMetricRolloutApplied + ")") +
        "&time=" + std::to_string(Seconds(now)));
    if (!known.ok()) return known.status();
    if (Status st = ParseKnownRollouts(*known, &evidence); !st.ok()) return st;
    return evidence;
  }

 private:
  // Replaces what is kept from `read_from` on with `read`, steps ending in [read_from, last].
  void Keep(const OutcomeEvidence& read, RolloutTime read_from, RolloutTime last) {
    if (!kept_until_ || read_from < kept_from_) {
      kept_.clear();
      kept_from_ = read_from;
    }
    for (auto& [key, steps] : kept_) {
      std::erase_if(steps, [&](const TallyStep& s) { return s.end >= read_from; });
    }
    AppendSteps(read.steps, &kept_);
    std::erase_if(kept_, [](const auto& entry) { return entry.second.empty(); });
    kept_until_ = last;
  }

  StatusOr<std::string> Get(const std::string& path_and_query) {
    wire::HttpGetOptions get;
    get.url_label = "--prometheus-url";
    get.request.user_agent = "live-patching-service";
    get.response.label = "prometheus";
    get.response.max_body_bytes = options_.max_body_bytes;
    get.connect_timeout = options_.timeout;
    StatusOr<wire::HttpResponse> response =
        wire::HttpGet(options_.url + path_and_query, get, Deadline::After(options_.timeout));
    if (!response.ok()) return response.status();
    // Prometheus answers a bad query with 400 or 422 and a JSON error, which Result reads.
    if (response->status != 200 && response->status != 400 && response->status != 422) {
      return Status::Unavailable("prometheus answered HTTP " + std::to_string(response->status));
    }
    return std::move(response->body);
  }

  PrometheusOutcomeOptions options_;
  const std::chrono::seconds step_;
  // The steps read so far (ends in [kept_from_, *kept_until_]), per rollout. Only the
  // controller's thread calls Fetch.
  std::map<RolloutKey, std::vector<TallyStep>> kept_;
  RolloutTime kept_from_{};
  std::optional<RolloutTime> kept_until_;
};

// Reports and failures of one series' sample.
struct SeriesOf {
  RolloutKey key;
  bool failure = false;
};
std::optional<SeriesOf> OutcomeSeries(const json& series) {
  std::optional<std::string> component = Label(series, "component");
  std::optional<std::string> rollout = Label(series, "rollout");
  std::optional<std::string> outcome = Label(series, "outcome");
  if (!component || !rollout || rollout->empty()) return std::nullopt;  // unattributed
  // An outcome this service does not name (a newer replica's) counts as a failure.
  std::optional<ReportedOutcome> kind = ReportedOutcomeFromName(outcome.value_or(""));
  return SeriesOf{{*component, *rollout}, !kind || IsFailure(*kind)};
}

TallyStep StepOf(RolloutTime start, RolloutTime end, double value, bool failure) {
  // A count past what any fleet reports is clamped, so that sums cannot wrap.
  const double clamped = std::min(std::max(0.0, value), static_cast<double>(kMaxAutoHaltCount));
  const auto added = static_cast<uint64_t>(std::llround(clamped));
  return {start, end, {added, failure ? added : 0}};
}

}  // namespace

std::chrono::seconds PrometheusStep(std::chrono::seconds interval) {
  static constexpr int64_t kSteps[] = {1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600};
  for (int64_t s : kSteps) {
    if (s >= interval.count()) return std::chrono::seconds(s);
  }
  return std::chrono::seconds(3600);
}

StatusOr<OutcomeEvidence> ParseOutcomeVector(std::string_view body, RolloutTime start,
                                             RolloutTime end) {
  StatusOr<json> result = Result(body, "vector");
  if (!result.ok()) return result.status();
  OutcomeEvidence evidence;
  for (const json& series : *result) {
    std::optional<SeriesOf> of = OutcomeSeries(series);
    auto value = series.find("value");
    if (!of || value == series.end()) continue;
    double time = 0;
    std::optional<double> v = SampleValue(*value, &time);
    if (!v) return Status::Unavailable("prometheus answer has a malformed sample");
    evidence.steps[of->key].push_back(StepOf(start, end, *v, of->failure));
  }
  return evidence;
}

StatusOr<OutcomeEvidence> ParseOutcomeMatrix(std::string_view body, std::chrono::seconds step) {
  StatusOr<json> result = Result(body, "matrix");
  if (!result.ok()) return result.status();
  OutcomeEvidence evidence;
  for (const json& series : *result) {
    std::optional<SeriesOf> of = OutcomeSeries(series);
    auto values = series.find("values");
    if (!of || values == series.end() || !values->is_array()) continue;
    std::vector<TallyStep>& steps = evidence.steps[of->key];
    for (const json& pair : *values) {
      double time = 0;
      std::optional<double> v = SampleValue(pair, &time);
      if (!v) return Status::Unavailable("prometheus answer has a malformed sample");
      const RolloutTime end(std::chrono::seconds(std::llround(time)));
      steps.push_back(StepOf(end - step, end, *v, of->failure));
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
