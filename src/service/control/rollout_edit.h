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
  // "halted": true, and "halt_note": {at, by, reason}. Already halted with a note: no change.
  kHalt,
  // "hold_at": the edit's time. Already held: no change (a later hold would widen it).
  kHold,
  // Continues from where it stopped, as a paused Argo Rollout does: the steps after the moment
  // the percent froze (the earlier of hold_at and halt_note.at, when past) move later by the
  // time since, so the percent is the one it held and the schedule's spacing is kept; "halted",
  // "hold_at" and "halt_note" removed; "resume_note": {at, by, reason}; with auto_halt, "since"
  // moved to the edit's time (the failures before no longer count).
  kResume,
};

struct RolloutEdit {
  RolloutEditKind kind = RolloutEditKind::kHalt;
  std::string rollout;  // its name
  RolloutTime at;       // now, or the tool's --at
  std::string by;       // who: the notes' `by`
  std::string reason;   // why: the notes' `reason`
};

// The file with the edit made, as JSON indented by 2 with the keys in their order, or the
// text unchanged when the edit changes nothing. InvalidArgument when the file is not JSON,
// names no such rollout, or the edited file is one the service would refuse (its message).
StatusOr<std::string> EditRollout(std::string_view component, std::string_view text,
                                  const RolloutEdit& edit);

// What the edit did, for the operator, one line each:
//   rollout "anc-1": percent 1 -> 1 (held at 2026-12-04T05:30:00Z)
//   rollout "anc-1": next step: 10.5 at 2026-12-04T08:30:00Z (2 steps moved 1h30m later)
// The percent before and after at edit.at (by the schedule: gates and automatic halts, which
// only the replicas know, are not counted), and the step that comes next.
std::string DescribeRolloutEdit(std::string_view before_text, std::string_view after_text,
                                const RolloutEdit& edit);

// The lines that differ, as a unified diff's one hunk ("--- before", "+++ after", "@@ ... @@",
// then "-" and "+" lines between the common head and tail); "" for equal texts. A minimal
// diff for one edited place, not a general one: no library in Debian's C++ packages does it.
std::string ChangedLines(std::string_view before, std::string_view after);

}  // namespace hotfix::service
