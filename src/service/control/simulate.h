// `live-patching-service simulate` (docs/ROLLOUTS.md, "Tools"): how many nodes of a fleet are
// served each version at each time, and with --against which nodes a change would move; TSV
// out. One evaluation per node and distinct ramp setting, not per node and time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "service/control/fleet.h"
#include "service/rollout/rollout.h"
#include "service/store/component_file.h"

namespace hotfix::service {

// At most this many time rows, and at most this many node evaluations (nodes x distinct
// threshold settings across the times, each costing one comparison per rollout).
inline constexpr size_t kMaxSimulateTimes = 10000;
inline constexpr uint64_t kMaxSimulateWork = 2000000000;
// `simulate --against`: nodes listed per time (all of them are counted).
inline constexpr size_t kMaxDiffNodesListed = 20;

// from, from + every, ... up to and including to. At most kMaxSimulateTimes.
StatusOr<std::vector<RolloutTime>> SimulationTimes(RolloutTime from, RolloutTime to,
                                                   std::chrono::seconds every);

struct SimulateTable {
  // One column per version any hotfixes map of the file names ("202604.01.4"), sorted by base
  // then patch number, plus "<base>:none" for a base the top-level map lacks (nodes no rollout
  // gives it). A file of another shape (no hotfixes map) has the single column "file".
  std::vector<std::string> columns;
  std::vector<RolloutTime> times;
  std::vector<std::vector<uint64_t>> counts;  // counts[time][column]: nodes served it
  size_t nodes = 0;
};
StatusOr<SimulateTable> Simulate(const ComponentConfig& config,
                                 const std::vector<RolloutNode>& fleet,
                                 const std::vector<RolloutTime>& times);

struct DiffNode {
  RolloutNode node;
  std::string served;          // compact JSON under the first folder
  std::string served_against;  // under the second
};
struct DiffRow {
  RolloutTime at;
  uint64_t differing = 0;
  // The first kMaxDiffNodesListed differing nodes, in fleet order. Empty when the row has the
  // same nodes as the row before (listed_at names the row that lists them) or none differ.
  std::vector<DiffNode> listed;
  std::optional<RolloutTime> listed_at;  // the row listing this row's nodes; nullopt if none
};
// The nodes whose answer differs between two versions of a component: a different hotfixes
// map (or, for files of another shape, different bytes).
StatusOr<std::vector<DiffRow>> SimulateAgainst(const ComponentConfig& config,
                                               const ComponentConfig& against,
                                               const std::vector<RolloutNode>& fleet,
                                               const std::vector<RolloutTime>& times);

// "" without auto-halting rollouts; else one line naming them: simulate's table is the file's
// answer, which a running replica narrows by the evidence (docs/ROLLOUTS.md).
std::string AutoHaltNote(const ComponentConfig& config);

// TSV, one header line, then one line per time:
//   at<TAB><column>...          2026-12-04T00:00:00Z<TAB>990<TAB>10
std::string FormatSimulateTable(const SimulateTable& table);
// Two TSV blocks separated by a blank line (the second only when some node differs):
//   at<TAB>differing<TAB>listed_at      (listed_at: the time whose lines list them, or -)
//   at<TAB>vm_id<TAB>subscription<TAB>cluster<TAB>served<TAB>served_against
std::string FormatDiffRows(const std::vector<DiffRow>& rows);

}  // namespace hotfix::service
