// The operator's tools behind `live-patching-service validate | plan | simulate`
// (docs/ROLLOUTS.md, "Tools"): pure functions over component files loaded exactly as
// the service loads them (LoadComponentFolder). Nothing here serves, and nothing throws:
// every failure is a Status. cmd/live-patching-service/main.cc only parses flags and prints.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "service/rollout/rollout.h"
#include "service/store/component_store.h"

namespace hotfix::service {

// `simulate` limits: a fleet of at most this many nodes, at most this many time rows, and at
// most this many node evaluations (nodes x distinct threshold settings across the times, each
// costing one comparison per rollout).
inline constexpr size_t kMaxFleetNodes = 1000000;
inline constexpr size_t kMaxSimulateTimes = 10000;
inline constexpr uint64_t kMaxSimulateWork = 2000000000;
// `simulate --against`: nodes listed per time (all of them are counted).
inline constexpr size_t kMaxDiffNodesListed = 20;

// A duration (common/duration.h: "90s", "30m", "6h", "1d", "1h30m") of whole seconds,
// positive, at most 3650 days.
StatusOr<std::chrono::seconds> ParseRolloutDuration(std::string_view text);

// One component's file from a folder, judged as the service judges it. NotFound when the
// folder has no `<component>.json`; InvalidArgument with the loader's message (file, rollout,
// field) when the file is refused; the listing error when the folder cannot be read.
StatusOr<std::shared_ptr<const ComponentConfig>> LoadComponentFromFolder(
    const std::string& dir, std::string_view component);

// ---- validate -----------------------------------------------------------------------------

struct ValidateReport {
  size_t ok = 0;                      // files loaded
  std::vector<std::string> problems;  // one line per refused file, sorted by file name
  bool passed() const { return problems.empty(); }
  // "3 files ok, 1 refused"
  std::string Summary() const;
};
// Fails only when the folder cannot be read.
StatusOr<ValidateReport> ValidateFolder(const std::string& dir);

// ---- plan ---------------------------------------------------------------------------------

// The plan for one node at one time, pretty JSON (2-space indent):
//   {"component", "at", "node": {"vm_id", "subscription", "cluster"} (as evaluated: lower-case,
//    port removed), "served": the config the node is served (a JSON value),
//    "rollouts": [{"name", "cohort", "applies", "why" (null, or "halted", the match field that
//    failed, "bucket B not under threshold T (P%)"), "bucket" (null when not computed),
//    "threshold", "percent", "enters_at" (RFC 3339 or null), "state", "hotfixes"}]}
StatusOr<std::string> PlanJson(const ComponentConfig& config, std::string_view component,
                               const RolloutNode& node, RolloutTime at);

// The `why` of one rollout for one node: empty when it applies.
std::string WhyNot(const RolloutOutcome& outcome);

// ---- simulate: the fleet ------------------------------------------------------------------

struct NodeList {
  std::vector<RolloutNode> nodes;  // as evaluated (MakeRolloutNode), file order
  size_t duplicates = 0;           // lines naming a node already listed (dropped)
};

// Lines `vmId,subscriptionId,clusterHost` (the cluster may carry `:port`); blank lines and
// lines starting with `#` ignored; spaces around fields trimmed; CRLF accepted. A bad line is
// InvalidArgument "line N: ...". More than kMaxFleetNodes nodes is InvalidArgument.
StatusOr<NodeList> ParseNodeList(std::string_view text);
// The same from a file: a file that cannot be read is an IoError/NotFound (not
// InvalidArgument, which always means a bad line or too many nodes).
StatusOr<NodeList> ReadNodeFile(const std::string& path);

struct RandomFleetOptions {
  size_t count = 0;  // 1 to kMaxFleetNodes
  uint64_t seed = 1;
  // Drawn from uniformly; empty: 5 made-up subscription GUIDs / 8 made-up AKS hosts
  // (`aks-xxxxxx-dns-xxxxxxxx.hcp.<region>.azmk8s.io` in eastus, westeurope, southeastasia,
  // westus2), themselves drawn from the seed.
  std::vector<std::string> subscriptions;
  std::vector<std::string> clusters;
};
// GUID-shaped random vmIds; the same options give the same fleet on every machine
// (std::mt19937_64's raw output only).
StatusOr<std::vector<RolloutNode>> RandomFleet(const RandomFleetOptions& options);

// ---- simulate: the table ------------------------------------------------------------------

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
