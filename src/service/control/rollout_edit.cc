#include "service/control/rollout_edit.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "common/duration.h"
#include "service/store/component_file.h"

namespace hotfix::service {
namespace {

using ordered_json = nlohmann::ordered_json;

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

ordered_json Note(const RolloutEdit& edit) {
  ordered_json note = {{"at", FormatRolloutTime(edit.at)}};
  if (!edit.by.empty()) note["by"] = edit.by;
  if (!edit.reason.empty()) note["reason"] = edit.reason;
  return note;
}

// A time field the validation will judge; nullopt when absent, null or not a time.
std::optional<RolloutTime> TimeIn(const ordered_json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return std::nullopt;
  auto t = ParseRolloutTime(it->get<std::string>());
  if (!t.ok()) return std::nullopt;
  return *t;
}

// When the percent stopped moving: the earlier of a hold and a noted halt, if already past.
std::optional<RolloutTime> FrozenAt(const ordered_json& rollout, RolloutTime now) {
  std::optional<RolloutTime> frozen;
  auto consider = [&](std::optional<RolloutTime> t) {
    if (t && *t <= now && (!frozen || *t < *frozen)) frozen = t;
  };
  consider(TimeIn(rollout, "hold_at"));
  if (auto note = rollout.find("halt_note"); note != rollout.end() && note->is_object()) {
    consider(TimeIn(*note, "at"));
  }
  return frozen;
}

void Resume(ordered_json* rollout, const RolloutEdit& edit) {
  if (std::optional<RolloutTime> frozen = FrozenAt(*rollout, edit.at)) {
    const auto shift = edit.at - *frozen;
    if (auto steps = rollout->find("steps"); steps != rollout->end() && steps->is_array()) {
      for (ordered_json& step : *steps) {
        if (!step.is_object()) continue;
        std::optional<RolloutTime> at = TimeIn(step, "at");
        if (at && *at > *frozen) step["at"] = FormatRolloutTime(*at + shift);
      }
    }
  }
  // "halted": false and "hold_at": null say the same as nothing: left as written.
  if (auto halted = rollout->find("halted"); halted != rollout->end() && *halted == true) {
    rollout->erase(halted);
  }
  if (auto hold = rollout->find("hold_at"); hold != rollout->end() && !hold->is_null()) {
    rollout->erase(hold);
  }
  rollout->erase("halt_note");
  // An automatic halt is sticky until `since` moves past the failures (ROLLOUTS.md).
  if (auto auto_halt = rollout->find("auto_halt");
      auto_halt != rollout->end() && auto_halt->is_object()) {
    (*auto_halt)["since"] = FormatRolloutTime(edit.at);
  }
}

// The named rollout of a component file as the service reads it, or nullopt.
std::optional<Rollout> ParsedRollout(std::string_view text, const std::string& name) {
  nlohmann::json file = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!file.is_object() || !file.contains("rollouts")) return std::nullopt;
  auto rollouts = ParseRollouts(file["rollouts"]);
  if (!rollouts.ok()) return std::nullopt;
  for (Rollout& r : *rollouts) {
    if (r.name == name) return std::move(r);
  }
  return std::nullopt;
}

// 100 -> "1", 1050 -> "10.5", 25 -> "0.25".
std::string Percent(uint32_t threshold) {
  std::string out = std::to_string(threshold / 100);
  if (uint32_t frac = threshold % 100; frac != 0) {
    out += "." + std::string(frac < 10 ? "0" : "") + std::to_string(frac);
    if (out.back() == '0') out.pop_back();
  }
  return out;
}

std::string State(const Rollout& r) {
  if (r.halted) return " (halted)";
  if (r.hold_at) return " (held at " + FormatRolloutTime(*r.hold_at) + ")";
  return "";
}

// The step NextStep (rollout.h) names, said for the operator.
std::string NextStepText(const Rollout& r, RolloutTime now) {
  std::optional<RolloutStep> next = NextStep(r, now);
  if (next) {
    std::string out = Percent(next->threshold) + " at " + FormatRolloutTime(next->at);
    if (next->gate) out += ", once its gate holds";
    return out;
  }
  if (r.halted) return "none while halted";
  if (r.hold_at) return "none while held";
  return "none: the last step has started";
}

}  // namespace

StatusOr<std::string> EditRollout(std::string_view component, std::string_view text,
                                  const RolloutEdit& edit) {
  ordered_json file = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (file.is_discarded()) return Status::InvalidArgument("the file is not JSON");
  auto rollouts = file.is_object() ? file.find("rollouts") : file.end();
  if (rollouts == file.end() || !rollouts->is_array()) {
    return Status::InvalidArgument("the file has no rollouts list");
  }
  ordered_json* rollout = nullptr;
  for (ordered_json& r : *rollouts) {
    if (r.is_object() && r.value("name", "") == edit.rollout) rollout = &r;
  }
  if (rollout == nullptr) {
    return Status::InvalidArgument("no rollout named \"" + edit.rollout + "\" in the file");
  }
  const ordered_json before = *rollout;
  switch (edit.kind) {
    case RolloutEditKind::kHalt:
      if (rollout->value("halted", false) && rollout->contains("halt_note")) break;
      (*rollout)["halted"] = true;
      (*rollout)["halt_note"] = Note(edit);
      break;
    case RolloutEditKind::kHold:
      if (TimeIn(*rollout, "hold_at")) break;
      (*rollout)["hold_at"] = FormatRolloutTime(edit.at);
      break;
    case RolloutEditKind::kResume:
      Resume(rollout, edit);
      // A resume of a rollout that was neither halted nor held changes nothing, and says so.
      if (*rollout != before) (*rollout)["resume_note"] = Note(edit);
      break;
  }
  if (*rollout == before) return std::string(text);
  std::string edited = file.dump(2) + "\n";
  if (Status valid = ValidateComponentConfig(component, edited); !valid.ok()) {
    return Status::InvalidArgument("the edited file would be refused: " + valid.message());
  }
  return edited;
}

std::string DescribeRolloutEdit(std::string_view before_text, std::string_view after_text,
                                const RolloutEdit& edit) {
  std::optional<Rollout> before = ParsedRollout(before_text, edit.rollout);
  std::optional<Rollout> after = ParsedRollout(after_text, edit.rollout);
  if (!after) return "";
  const std::string head = "rollout \"" + edit.rollout + "\": ";
  std::string out = head + "percent ";
  out += before ? Percent(ThresholdAt(*before, edit.at)) + State(*before) : "?";
  out += " -> " + Percent(ThresholdAt(*after, edit.at)) + State(*after) + " at " +
         FormatRolloutTime(edit.at) + "\n";
  out += head + "next step: " + NextStepText(*after, edit.at);
  if (before && before->steps.size() == after->steps.size()) {
    size_t moved = 0;
    std::chrono::seconds by{0};
    for (size_t i = 0; i < after->steps.size(); ++i) {
      if (after->steps[i].at != before->steps[i].at) {
        ++moved;
        by = after->steps[i].at - before->steps[i].at;
      }
    }
    if (moved > 0) {
      out += " (" + std::to_string(moved) + (moved == 1 ? " step" : " steps") + " moved " +
             FormatDuration(by) + " later, by the time it was stopped)";
    }
  }
  return out + "\n";
}

std::string ChangedLines(std::string_view before, std::string_view after) {
  if (before == after) return "";
  const std::vector<std::string_view> a = Lines(before), b = Lines(after);
  size_t head = 0;
  while (head < a.size() && head < b.size() && a[head] == b[head]) ++head;
  size_t tail = 0;
  while (tail < a.size() - head && tail < b.size() - head &&
         a[a.size() - 1 - tail] == b[b.size() - 1 - tail]) {
    ++tail;
  }
  std::string out = "--- before\n+++ after\n@@ -" + std::to_string(head + 1) + "," +
                    std::to_string(a.size() - head - tail) + " +" + std::to_string(head + 1) + "," +
                    std::to_string(b.size() - head - tail) + " @@\n";
  for (size_t i = head; i < a.size() - tail; ++i) out.append("-").append(a[i]).append("\n");
  for (size_t i = head; i < b.size() - tail; ++i) out.append("+").append(b[i]).append("\n");
  return out;
}

}  // namespace hotfix::service
