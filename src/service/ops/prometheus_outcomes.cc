#include "service/ops/prometheus_outcomes.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "service/ops/metric_names.h"

namespace hotfix::service {
namespace {

using json = nlohmann::json;

// A PromQL double-quoted string.
std::string Quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

std::optional<std::string> Label(const json& series, const char* name) {
  auto metric = series.find("metric");
  if (metric == series.end() || !metric->is_object()) return std::nullopt;
  auto value = metric->find(name);
  if (value == metric->end() || !value->is_string()) return std::nullopt;
  return value->get<std::string>();
}

// The instant vector's series, each kept only if `keep` says so as it is parsed: the
// others never reach memory as a whole.
StatusOr<json> Vector(std::string_view body, const std::function<bool(const json&)>& keep) {
  json::parser_callback_t callback = [&](int, json::parse_event_t event, json& parsed) {
    if (event != json::parse_event_t::object_end || !parsed.is_object()) return true;
    if (!parsed.contains("metric") || !parsed.contains("value")) return true;
    return keep(parsed);
  };
  json doc = json::parse(body, callback, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::Unavailable("prometheus answer is not a JSON object");
  }
  auto status = doc.find("status");
  if (status == doc.end() || *status != "success") {
    auto error = doc.find("error");
    return Status::Unavailable("prometheus query failed: " +
                               EscapeForMessage(error != doc.end() && error->is_string()
                                                    ? error->get<std::string>()
                                                    : std::string("no error given"),
                                                256));
  }
  auto data = doc.find("data");
  if (data == doc.end() || !data->is_object() || !data->contains("resultType") ||
      (*data)["resultType"] != "vector" || !data->contains("result") ||
      !(*data)["result"].is_array()) {
    return Status::Unavailable("prometheus answer has no vector result");
  }
  return std::move((*data)["result"]);
}

// A sample's value: Prometheus writes floats as strings.
std::optional<double> SampleValue(const json& series) {
  auto pair = series.find("value");
  if (pair == series.end() || !pair->is_array() || pair->size() != 2 || !(*pair)[1].is_string()) {
    return std::nullopt;
  }
  const std::string& text = (*pair)[1].get_ref<const std::string&>();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

// A Unix time in seconds this side of year 36,812 (2^40 s).
std::optional<RolloutTime> TimeValue(double v) {
  if (!(v >= 0 && v <= static_cast<double>(kMaxAutoHaltCount))) return std::nullopt;
  return RolloutTime(std::chrono::seconds(static_cast<int64_t>(v)));
}

bool SameRollout(const json& series, const EvidenceKey& key) {
  return Label(series, "component") == key.component && Label(series, "rollout") == key.rollout &&
         Label(series, "since") == FormatRolloutTime(key.since);
}

const EvidenceRequest* RequestOf(const json& series, const std::vector<EvidenceRequest>& requests) {
  for (const EvidenceRequest& r : requests) {
    if (SameRollout(series, r.key)) return &r;
  }
  return nullptr;
}

// Built by appending: GCC 12 at -O2 warns falsely (a huge memcpy) on "[" + std::to_string(n).
std::string Lookback(std::chrono::seconds s) {
  std::string out = "[";
  out += std::to_string(s.count());
  out += "s]";
  return out;
}

class PrometheusOutcomeSource final : public OutcomeSource {
 public:
  PrometheusOutcomeSource(std::unique_ptr<PrometheusClient> client, std::string selector)
      : client_(std::move(client)), selector_(std::move(selector)) {}

  // lp_rollout_node_sketch under the selector, of one rollout's window.
  std::string SketchSelector(const EvidenceRequest& r) const {
    return std::string(kMetricRolloutNodeSketch) + "{" + selector_ +
           ",component=" + Quoted(r.key.component) + ",rollout=" + Quoted(r.key.rollout) +
           ",since=" + Quoted(FormatRolloutTime(r.key.since)) + "}";
  }

  // The sketches `s` selects: every series exported within r.lookback (r.full), or only those
  // whose value changed within it.
  Status ReadSketches(const EvidenceRequest& r, const std::string& s, const std::string& time,
                      OutcomeEvidence* evidence) {
    std::string query;
    if (r.full) {
      query = "last_over_time(" + s + Lookback(r.lookback) + ")";
    } else {
      // A series whose value differs from its value a while ago, or that was not there then.
      const std::string then = s + " offset " + std::to_string(r.lookback.count()) + "s";
      query = "(" + s + " != " + then + ") or (" + s + " unless " + then + ")";
    }
    StatusOr<std::string> body = client_->Get("/api/v1/query?query=" + QueryEscape(query) + time);
    if (!body.ok()) return body.status();
    return ParseSketchAnswer(*body, {r}, evidence);
  }

  StatusOr<OutcomeEvidence> Fetch(const std::vector<EvidenceRequest>& requests,
                                  RolloutTime now) override {
    OutcomeEvidence evidence;
    const std::string time = "&time=" + std::to_string(now.time_since_epoch().count());
    std::chrono::seconds longest{60};
    // One query per rollout: an answer is at most every replica's sketches of one rollout,
    // under the cap however many rollouts change at once, and each query's selector is
    // narrow (one query over every rollout's series cost Prometheus twice the CPU:
    // docs/BENCHMARKS.md, "Service: counting nodes").
    for (const EvidenceRequest& r : requests) {
      longest = std::max(longest, r.lookback);
      evidence.rollouts[r.key];  // asked about: present even when nothing was exported
      if (Status st = ReadSketches(r, SketchSelector(r), time, &evidence); !st.ok()) return st;
    }
    auto instant = [&](const std::string& query) {
      return client_->Get("/api/v1/query?query=" + QueryEscape(query) + time);
    };
    StatusOr<std::string> records =
        instant("last_over_time(" + std::string(kMetricRolloutHaltRecord) + "{" + selector_ + "}" +
                Lookback(longest) + ")");
    if (!records.ok()) return records.status();
    if (Status st = ParseHaltRecords(*records, requests, &evidence); !st.ok()) return st;
    StatusOr<std::string> from =
        instant("last_over_time(" + std::string(kMetricRolloutEvidenceFrom) + "{" + selector_ +
                "}" + Lookback(longest) + ")");
    if (!from.ok()) return from.status();
    if (Status st = ParseEvidenceFrom(*from, requests, &evidence); !st.ok()) return st;
    if (std::any_of(requests.begin(), requests.end(),
                    [](const EvidenceRequest& r) { return !r.gate_records.empty(); })) {
      for (GateRecordKind kind :
           {GateRecordKind::kOpen, GateRecordKind::kStart, GateRecordKind::kClosed}) {
        StatusOr<std::string> body = instant("last_over_time(" + std::string(GateMetric(kind)) +
                                             "{" + selector_ + "}" + Lookback(longest) + ")");
        if (!body.ok()) return body.status();
        if (Status st = ParseGateRecords(*body, requests, kind, &evidence); !st.ok()) return st;
      }
    }
    StatusOr<std::string> known =
        instant("group by (component, rollout) (" + std::string(kMetricRolloutApplied) + "{" +
                selector_ + "})");
    if (!known.ok()) return known.status();
    if (Status st = ParseKnownRollouts(*known, &evidence); !st.ok()) return st;
    return evidence;
  }

 private:
  std::unique_ptr<PrometheusClient> client_;
  const std::string selector_;
};

}  // namespace

Status ParseSketchAnswer(std::string_view body, const std::vector<EvidenceRequest>& requests,
                         OutcomeEvidence* evidence) {
  StatusOr<json> result =
      Vector(body, [&](const json& series) { return RequestOf(series, requests) != nullptr; });
  if (!result.ok()) return result.status();
  for (const json& series : *result) {
    const EvidenceRequest* request = RequestOf(series, requests);
    if (request == nullptr) continue;  // dropped as parsed; kept only by a lenient parser
    NodeSets& sets = evidence->rollouts[request->key].sets;
    std::optional<std::string> set = Label(series, "set");
    std::optional<std::string> slot = Label(series, "slot");
    std::optional<double> value = SampleValue(series);
    NodeSketch* sketch = set ? sets.Named(*set) : nullptr;
    if (sketch == nullptr || !slot || !value) {
      return Status::Unavailable("prometheus answer has a malformed node sketch series");
    }
    if (Status st = sketch->AddGauge(*slot, *value); !st.ok()) {
      return Status::Unavailable("prometheus answer: " + st.message());
    }
  }
  return Status::Ok();
}

Status ParseHaltRecords(std::string_view body, const std::vector<EvidenceRequest>& requests,
                        OutcomeEvidence* evidence) {
  auto request_of = [&](const json& series) -> const EvidenceRequest* {
    const EvidenceRequest* r = RequestOf(series, requests);
    return r != nullptr && Label(series, "policy") == r->policy ? r : nullptr;
  };
  StatusOr<json> result =
      Vector(body, [&](const json& series) { return request_of(series) != nullptr; });
  if (!result.ok()) return result.status();
  for (const json& series : *result) {
    const EvidenceRequest* r = request_of(series);
    std::optional<double> value = SampleValue(series);
    std::optional<RolloutTime> at = value ? TimeValue(*value) : std::nullopt;
    if (r == nullptr || !at)
      return Status::Unavailable("prometheus answer has a malformed halt record");
    std::optional<RolloutTime>& halted_at = evidence->rollouts[r->key].halted_at;
    halted_at = halted_at ? std::min(*halted_at, *at) : *at;
  }
  return Status::Ok();
}

Status ParseEvidenceFrom(std::string_view body, const std::vector<EvidenceRequest>& requests,
                         OutcomeEvidence* evidence) {
  StatusOr<json> result =
      Vector(body, [&](const json& series) { return RequestOf(series, requests) != nullptr; });
  if (!result.ok()) return result.status();
  for (const json& series : *result) {
    const EvidenceRequest* r = RequestOf(series, requests);
    std::optional<double> value = SampleValue(series);
    std::optional<RolloutTime> at = value ? TimeValue(*value) : std::nullopt;
    if (r == nullptr || !at) {
      return Status::Unavailable("prometheus answer has a malformed evidence_from series");
    }
    std::optional<RolloutTime>& from = evidence->rollouts[r->key].from;
    from = from ? std::min(*from, *at) : *at;
  }
  return Status::Ok();
}

const char* GateMetric(GateRecordKind kind) {
  switch (kind) {
    case GateRecordKind::kOpen:
      return kMetricRolloutGateOpen;
    case GateRecordKind::kStart:
      return kMetricRolloutStepStart;
    case GateRecordKind::kClosed:
      return kMetricRolloutGateClosed;
  }
  return kMetricRolloutGateOpen;
}

Status ParseGateRecords(std::string_view body, const std::vector<EvidenceRequest>& requests,
                        GateRecordKind kind, OutcomeEvidence* evidence) {
  auto wanted = [&](const json& series) {
    std::optional<std::string> component = Label(series, "component");
    std::optional<std::string> rollout = Label(series, "rollout");
    std::optional<std::string> gate = Label(series, "gate");
    return component && rollout && gate &&
           std::any_of(requests.begin(), requests.end(), [&](const EvidenceRequest& r) {
             return r.key.component == *component && r.key.rollout == *rollout &&
                    r.gate_records.count(*gate) != 0;
           });
  };
  StatusOr<json> result = Vector(body, wanted);
  if (!result.ok()) return result.status();
  for (const json& series : *result) {
    if (!wanted(series)) continue;
    std::optional<std::string> step = Label(series, "step");
    std::optional<double> value = SampleValue(series);
    std::optional<RolloutTime> at = value ? TimeValue(*value) : std::nullopt;
    size_t index = 0;
    if (!step || step->empty() || step->size() > 2 ||
        !std::all_of(step->begin(), step->end(), IsAsciiDigit) || !at) {
      return Status::Unavailable("prometheus answer has a malformed gate record");
    }
    index = std::stoul(*step);
    GateRecords& rec = evidence->gates[{*Label(series, "component"), *Label(series, "rollout"),
                                        index, *Label(series, "gate")}];
    switch (kind) {
      case GateRecordKind::kOpen:
        if (rec.opens.size() < 64) rec.opens.push_back(*at);  // a few per replica at most
        break;
      case GateRecordKind::kStart:
        if (!rec.started_at || *at < *rec.started_at) rec.started_at = at;
        break;
      case GateRecordKind::kClosed:
        if (!rec.closed_at || *at > *rec.closed_at) rec.closed_at = at;
        break;
    }
  }
  return Status::Ok();
}

Status ParseKnownRollouts(std::string_view body, OutcomeEvidence* evidence) {
  StatusOr<json> result = Vector(body, [](const json&) { return true; });
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
  StatusOr<std::string> selector = ParsePrometheusSelector(options.selector);
  if (!selector.ok()) return selector.status();
  StatusOr<std::unique_ptr<PrometheusClient>> client =
      PrometheusClient::New(std::move(options.client));
  if (!client.ok()) return client.status();
  return std::unique_ptr<OutcomeSource>(
      new PrometheusOutcomeSource(std::move(client.value()), std::move(selector.value())));
}

}  // namespace hotfix::service
