// Emergency edits of a rollout as commands (`live-patching-service rollout halt|hold|resume`,
// docs/ROLLOUTS.md "Operating a rollout"): the component file's text in, the edited text out,
// judged by the same validation the service loads it with. No I/O: the tool reads and writes.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "service/rollout/rollout.h"

namespace hotfix::service {

enum class RolloutEditKind {
  kHalt,    // "halted": true
  kHold,    // "hold_at": the edit's time
  kResume,  // "halted" and "hold_at" removed; with auto_halt, "since" moved to the edit's time
};

struct RolloutEdit {
  RolloutEditKind kind = RolloutEditKind::kHalt;
  std::string rollout;  // its name
  RolloutTime at;       // hold_at for kHold, auto_halt.since for kResume
};

// The file with the edit made, as JSON indented by 2 with the keys in their order, or the
// text unchanged when the edit changes nothing. InvalidArgument when the file is not JSON,
// names no such rollout, or the edited file is one the service would refuse (its message).
StatusOr<std::string> EditRollout(std::string_view component, std::string_view text,
                                  const RolloutEdit& edit);

// The lines that differ, as a unified diff's one hunk ("--- before", "+++ after", "@@ ... @@",
// then "-" and "+" lines between the common head and tail); "" for equal texts. A minimal
// diff for one edited place, not a general one: no library in Debian's C++ packages does it.
std::string ChangedLines(std::string_view before, std::string_view after);

}  // namespace hotfix::service
