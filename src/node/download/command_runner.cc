#include "node/download/command_runner.h"

#include <thread>

#include "common/deadline.h"
#include "common/process.h"

namespace hotfix::node {
namespace {

bool Cancelled(const std::atomic<bool>* flag) { return flag != nullptr && flag->load(); }

CommandResult Failure(Status status) {
  CommandResult result;
  result.status = std::move(status);
  return result;
}

class ProcessRunner final : public CommandRunner {
 public:
  CommandResult Run(const Argv& argv, const RunOptions& options) override {
    SpawnOptions spawn;
    spawn.argv = argv;
    if (options.capture_output) spawn.out = ChildStream::kPipe;
    StatusOr<Child> child = Child::Spawn(spawn);
    if (!child.ok()) return Failure(child.status());
    CommandResult result;
    const ChildExit exit =
        child->Wait(Deadline::After(options.timeout), options.cancelled,
                    options.capture_output ? &result.output : nullptr, nullptr, options.max_output);
    result.exit_code = exit.exit_code;
    if (exit.killed) {
      const bool timed_out = !Cancelled(options.cancelled);
      result.status = timed_out ? Status::DeadlineExceeded("killed after " +
                                                           std::to_string(options.timeout.count()) +
                                                           " ms timeout (" + exit.description + ")")
                                : Status::DeadlineExceeded("cancelled (" + exit.description + ")");
    } else if (!exit.success()) {
      result.status = Status::IoError(exit.description);
    }
    return result;
  }
};

// Sleeps for d unless cancelled first (checked every 50 ms: a signal handler only sets a flag).
bool SleepUnlessCancelled(std::chrono::milliseconds d, const std::atomic<bool>* cancelled) {
  const Deadline until = Deadline::After(d);
  while (!until.expired()) {
    if (Cancelled(cancelled)) return false;
    std::this_thread::sleep_for(std::min(until.remaining(), std::chrono::milliseconds(50)));
  }
  return !Cancelled(cancelled);
}

}  // namespace

std::string JoinArgv(const Argv& argv) {
  std::string joined;
  for (const auto& a : argv) joined += (joined.empty() ? "" : " ") + a;
  return joined;
}

std::unique_ptr<CommandRunner> NewProcessRunner() { return std::make_unique<ProcessRunner>(); }

CommandResult RunWithRetries(CommandRunner& runner, const Argv& argv, const RetryPolicy& policy,
                             Logger& log) {
  RunOptions run;
  run.timeout = policy.timeout;
  run.cancelled = policy.cancelled;
  CommandResult last;
  const auto cancelled = [&] {
    last.status = Status::DeadlineExceeded("command " + JoinArgv(argv) + " cancelled");
    last.exit_code = -1;
    return last;
  };
  const int attempts = std::max(policy.max_attempts, 1);
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    if (Cancelled(policy.cancelled)) return cancelled();
    last = runner.Run(argv, run);
    if (last.status.ok()) return last;
    log.Warn("command failed, retrying",
             {{"command", argv.empty() ? "" : argv[0]},
              {"args", JoinArgv(Argv(argv.begin() + (argv.empty() ? 0 : 1), argv.end()))},
              {"attempt", attempt},
              {"maxRetries", attempts},
              {"error", last.status}});
    if (attempt < attempts && !SleepUnlessCancelled(policy.backoff, policy.cancelled)) {
      return cancelled();
    }
  }
  last.status = last.status.Annotate("command " + JoinArgv(argv) + " failed after " +
                                     std::to_string(attempts) + " attempts");
  return last;
}

}  // namespace hotfix::node
