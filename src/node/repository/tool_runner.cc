#include "node/repository/tool_runner.h"

#include "common/deadline.h"
#include "common/text.h"

namespace hotfix::node::repository {
namespace {

constexpr size_t kMaxToolOutput = 4 * 1024;

StatusOr<Child> Spawn(const std::vector<std::string>& argv, ChildStream err) {
  SpawnOptions spawn;
  spawn.argv = argv;
  spawn.out = ChildStream::kPipe;
  spawn.err = err;
  StatusOr<Child> child = Child::Spawn(spawn);
  if (!child.ok() && child.status().code() == Status::Code::kNotFound && !argv.empty()) {
    return Status::FailedPrecondition(argv[0] + " is not installed");
  }
  return child;
}

}  // namespace

Status ToolStatus(const std::string& tool, const ChildExit& exit, const std::string& output,
                  const ToolContext& context) {
  if (context.cancelled != nullptr && context.cancelled->load()) {
    return Status::Cancelled(tool + " cancelled");
  }
  if (exit.killed) {
    return Status::Unavailable(tool + " killed after " + std::to_string(context.timeout.count()) +
                               " ms");
  }
  if (exit.success()) return Status::Ok();
  std::string message = tool + " failed: " + exit.description;
  std::string said = OneLine(std::string(TrimBlanks(output)));
  if (!said.empty()) message += ": " + EscapeForMessage(said, 512);
  return Status::Unavailable(message);
}

StatusOr<ToolRun> RunTool(const std::vector<std::string>& argv, const ToolContext& context) {
  StatusOr<Child> child = Spawn(argv, ChildStream::kPipe);
  if (!child.ok()) return child.status();
  ToolRun run;
  std::string out;
  run.exit = child->Wait(Deadline::After(context.timeout), context.cancelled, &out, &run.output,
                         kMaxToolOutput);
  run.output += out;
  if (context.cancelled != nullptr && context.cancelled->load()) {
    return Status::Cancelled(argv[0] + " cancelled");
  }
  if (run.exit.killed) {
    return Status::Unavailable(argv[0] + " killed after " +
                               std::to_string(context.timeout.count()) + " ms");
  }
  return run;
}

StatusOr<Child> StartTool(const std::vector<std::string>& argv) {
  // stderr passes through (as the reference's do): a pipe nobody reads while the payload
  // streams could fill and stall the tool.
  return Spawn(argv, ChildStream::kInherit);
}

}  // namespace hotfix::node::repository
