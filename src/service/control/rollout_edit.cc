#include "service/control/rollout_edit.h"

#include <nlohmann/json.hpp>
#include <vector>

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
      (*rollout)["halted"] = true;
      break;
    case RolloutEditKind::kHold:
      (*rollout)["hold_at"] = FormatRolloutTime(edit.at);
      break;
    case RolloutEditKind::kResume:
      rollout->erase("halted");
      rollout->erase("hold_at");
      // An automatic halt is sticky until `since` moves past the failures (ROLLOUTS.md).
      if (auto auto_halt = rollout->find("auto_halt");
          auto_halt != rollout->end() && auto_halt->is_object()) {
        (*auto_halt)["since"] = FormatRolloutTime(edit.at);
      }
      break;
  }
  if (*rollout == before) return std::string(text);
  std::string edited = file.dump(2) + "\n";
  if (Status valid = ValidateComponentConfig(component, edited); !valid.ok()) {
    return Status::InvalidArgument("the edited file would be refused: " + valid.message());
  }
  return edited;
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
