// The repository's external tools (gpg, gpgv, dpkg-deb, rpm2cpio, rpmkeys), as the reference
// runs them: each under a kill deadline (60 s), never through a shell (common/process.h). One
// that is not installed makes the fast path unsupported (fall back); one killed because the
// other branch failed first is a cancellation, never an integrity failure.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "common/process.h"
#include "common/status.h"

namespace hotfix::node::repository {

struct ToolContext {
  std::chrono::milliseconds timeout{60000};
  // Set when the other branch failed or the command was cancelled: a running tool is killed.
  const std::atomic<bool>* cancelled = nullptr;
};

struct ToolRun {
  ChildExit exit;
  // What it wrote to stderr and stdout, at most 4 KiB each (for the error message).
  std::string output;
};

// Runs argv to its end. FailedPrecondition "<tool> is not installed"; Cancelled "<tool>
// cancelled"; Unavailable "<tool> killed after <n> ms"; otherwise the run, whatever its exit.
StatusOr<ToolRun> RunTool(const std::vector<std::string>& argv, const ToolContext& context);

// Starts argv with its stdout piped to the caller (a package's payload, streamed) and its
// stderr ours. FailedPrecondition "<tool> is not installed" as RunTool.
StatusOr<Child> StartTool(const std::vector<std::string>& argv);

// What a finished or killed tool says: Cancelled when context.cancelled is set, Unavailable
// "<tool> killed after <n> ms" when it was killed otherwise, Unavailable "<tool> failed: <exit>
// [: <output>]" for a non-zero exit, Ok for exit 0.
Status ToolStatus(const std::string& tool, const ChildExit& exit, const std::string& output,
                  const ToolContext& context);

}  // namespace hotfix::node::repository
