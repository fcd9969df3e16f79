#include "service/control/operator_tools.h"

#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "common/file_util.h"
#include "service/control/fleet.h"
#include "service/control/plan.h"
#include "service/control/rollout_edit.h"
#include "service/control/rollout_status.h"
#include "service/control/simulate.h"
#include "service/control/validate.h"
#include "service/rollout/rollout.h"
#include "service/store/component_file.h"

namespace hotfix::service {
namespace {

int ToolError(std::ostream& err, std::string_view tool, const std::string& message, int code) {
  err << "live-patching-service " << tool << ": " << message << "\n";
  return code;
}

// A usage error unless `component` is a valid component name.
std::optional<int> BadComponent(std::ostream& err, std::string_view tool,
                                const std::string& component) {
  if (IsValidComponentName(component)) return std::nullopt;
  return ToolError(err, tool, "--component \"" + component + "\" is not a valid component name",
                   kToolUsage);
}

// --at: an RFC 3339 time, or now (as rollouts see it) when empty.
StatusOr<RolloutTime> AtOrNow(const std::string& text) {
  if (!text.empty()) return ParseRolloutTime(text);
  return RolloutNow();
}

// The fleet simulate counts: the node file's, or random nodes. nullopt with the exit status
// written to *code on an error.
std::optional<std::vector<RolloutNode>> SimulatedFleet(const SimulateToolOptions& options,
                                                       std::ostream& err, size_t* duplicates,
                                                       int* code) {
  constexpr std::string_view kTool = "simulate";
  if (!options.nodes_file.empty()) {
    auto list = ReadNodeFile(options.nodes_file);
    if (!list.ok()) {
      const bool usage = list.status().code() == Status::Code::kInvalidArgument;
      *code =
          ToolError(err, kTool, (usage ? options.nodes_file + ": " : "") + list.status().message(),
                    usage ? kToolUsage : kToolFailed);
      return std::nullopt;
    }
    if (list->nodes.empty()) {
      *code = ToolError(err, kTool, options.nodes_file + ": no nodes", kToolUsage);
      return std::nullopt;
    }
    *duplicates = list->duplicates;
    return std::move(list->nodes);
  }
  RandomFleetOptions random;
  random.count = *options.random_count;
  random.seed = options.seed;
  random.subscriptions = options.subscriptions;
  random.clusters = options.clusters;
  auto fleet = RandomFleet(random);
  if (!fleet.ok()) {
    *code = ToolError(err, kTool, fleet.status().message(), kToolUsage);
    return std::nullopt;
  }
  return std::move(fleet).value();
}

}  // namespace

int RunValidateTool(const ValidateToolOptions& options, std::ostream& out, std::ostream& err) {
  auto report = ValidateFolder(options.components_dir);
  if (!report.ok()) return ToolError(err, "validate", report.status().message(), kToolFailed);
  for (const std::string& problem : report->problems) out << problem << "\n";
  out << report->Summary() << "\n";
  return report->passed() ? kToolOk : kToolFailed;
}

int RunPlanTool(const PlanToolOptions& options, std::ostream& out, std::ostream& err) {
  if (auto code = BadComponent(err, "plan", options.component)) return *code;
  auto at = AtOrNow(options.at);
  if (!at.ok()) return ToolError(err, "plan", "--at " + at.status().message(), kToolUsage);
  const RolloutNode node = MakeRolloutNode(options.vm_id, options.subscription, options.cluster);
  if (node.cluster.empty()) {
    return ToolError(err, "plan", "--cluster \"" + options.cluster + "\" has no host", kToolUsage);
  }
  auto config = LoadComponentFromFolder(options.components_dir, options.component);
  if (!config.ok()) return ToolError(err, "plan", config.status().message(), kToolFailed);
  auto plan = PlanJson(**config, options.component, node, *at);
  if (!plan.ok()) return ToolError(err, "plan", plan.status().message(), kToolFailed);
  out << *plan << "\n";
  return kToolOk;
}

int RunSimulateTool(const SimulateToolOptions& options, std::ostream& out, std::ostream& err) {
  constexpr std::string_view kTool = "simulate";
  if (options.nodes_file.empty() == !options.random_count.has_value()) {
    return ToolError(err, kTool, "one of --nodes FILE or --random N is required", kToolUsage);
  }
  if (auto code = BadComponent(err, kTool, options.component)) return *code;
  auto from = ParseRolloutTime(options.from);
  if (!from.ok()) return ToolError(err, kTool, "--from " + from.status().message(), kToolUsage);
  auto to = ParseRolloutTime(options.to);
  if (!to.ok()) return ToolError(err, kTool, "--to " + to.status().message(), kToolUsage);
  auto every = ParseRolloutDuration(options.every);
  if (!every.ok()) return ToolError(err, kTool, "--every: " + every.status().message(), kToolUsage);
  auto times = SimulationTimes(*from, *to, *every);
  if (!times.ok()) return ToolError(err, kTool, times.status().message(), kToolUsage);

  auto config = LoadComponentFromFolder(options.components_dir, options.component);
  if (!config.ok()) return ToolError(err, kTool, config.status().message(), kToolFailed);
  std::shared_ptr<const ComponentConfig> against;
  if (!options.against.empty()) {
    auto loaded = LoadComponentFromFolder(options.against, options.component);
    if (!loaded.ok()) {
      return ToolError(err, kTool, "--against: " + loaded.status().message(), kToolFailed);
    }
    against = *loaded;
  }
  size_t duplicates = 0;
  int code = kToolOk;
  std::optional<std::vector<RolloutNode>> fleet = SimulatedFleet(options, err, &duplicates, &code);
  if (!fleet) return code;

  auto table = Simulate(**config, *fleet, *times);
  if (!table.ok()) return ToolError(err, kTool, table.status().message(), kToolUsage);
  std::string text = FormatSimulateTable(*table);
  if (against) {
    auto diff = SimulateAgainst(**config, *against, *fleet, *times);
    if (!diff.ok()) return ToolError(err, kTool, diff.status().message(), kToolUsage);
    text += "\n" + FormatDiffRows(*diff);
  }
  out << text;
  err << AutoHaltNote(**config);
  err << "simulated " << fleet->size() << " nodes";
  if (duplicates > 0) err << " (" << duplicates << " repeated lines counted once)";
  err << " at " << times->size() << (times->size() == 1 ? " time" : " times") << "\n";
  return kToolOk;
}

std::string WhoEdits() {
  std::string user;
  for (const char* var : {"USER", "LOGNAME"}) {
    if (const char* v = getenv(var); v != nullptr && *v != '\0') {
      user = v;
      break;
    }
  }
  if (user.empty()) {
    const passwd* pw = getpwuid(getuid());
    user = pw != nullptr ? pw->pw_name : "uid " + std::to_string(getuid());
  }
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return user + (host[0] != '\0' ? std::string("@") + host : std::string());
}

int RunRolloutTool(const RolloutToolOptions& options, std::ostream& out, std::ostream& err) {
  constexpr std::string_view kTool = "rollout";
  if (auto code = BadComponent(err, kTool, options.component)) return *code;
  RolloutEdit edit;
  if (options.action == "halt") {
    edit.kind = RolloutEditKind::kHalt;
  } else if (options.action == "hold") {
    edit.kind = RolloutEditKind::kHold;
  } else if (options.action == "resume") {
    edit.kind = RolloutEditKind::kResume;
  } else {
    return ToolError(err, kTool, "\"" + options.action + "\" is not halt, hold or resume",
                     kToolUsage);
  }
  if (edit.kind == RolloutEditKind::kHalt && options.reason.empty()) {
    return ToolError(err, kTool, "halt needs --reason TEXT: it is written into the file",
                     kToolUsage);
  }
  edit.rollout = options.rollout;
  auto at = AtOrNow(options.at);
  if (!at.ok()) return ToolError(err, kTool, "--at " + at.status().message(), kToolUsage);
  edit.at = *at;
  edit.by = options.by.empty() ? WhoEdits() : options.by;
  edit.reason = options.reason;
  const std::string path = options.components_dir + "/" + options.component + ".json";
  auto text = ReadFileToString(path, kMaxComponentFileBytes);
  if (!text.ok()) return ToolError(err, kTool, text.status().message(), kToolFailed);
  auto edited = EditRollout(options.component, *text, edit);
  if (!edited.ok())
    return ToolError(err, kTool, path + ": " + edited.status().message(), kToolFailed);
  if (*edited == *text) {
    out << DescribeRolloutEdit(*text, *text, edit) << path << ": rollout \"" << options.rollout
        << "\" is already so; nothing to change\n";
    return kToolOk;
  }
  out << DescribeRolloutEdit(*text, *edited, edit) << ChangedLines(*text, *edited);
  if (options.dry_run) return kToolOk;
  AtomicWriteOptions write;
  write.mode = ExistingMode(path).value_or(0644);
  if (Status st = WriteFileAtomically(path, *edited, write); !st.ok()) {
    return ToolError(err, kTool, st.message(), kToolFailed);
  }
  out << path << ": written\n";
  return kToolOk;
}

}  // namespace hotfix::service
