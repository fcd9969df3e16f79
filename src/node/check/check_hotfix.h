// check-hotfix: ask the live-patching service for this node's hotfix map and stage it for
// download-hotfix. Fail-open: every outcome reports one event (a dry run none) and exits 0
// (AgentBaker: aks-node-controller/checkhotfix.go runCheckHotfixCommand; docs/CHECK-HOTFIX.md).
#pragma once

#include <optional>
#include <string>

#include "common/log.h"
#include "common/status.h"
#include "node/check/lps_fetcher.h"
#include "node/host/hotfix_pointer.h"

namespace hotfix::node {

enum class Outcome { kLpsRead, kNoHotfixForBase, kNoHotfixAvailable, kCustomDataFallback, kFailed };
// "lpsRead", "noHotfixForBase", "noHotfixAvailable", "customDataFallback", "failed".
const char* OutcomeName(Outcome outcome);

// How the workflow treats a failed fetch (docs/CHECK-HOTFIX.md "Outcomes"; AgentBaker:
// aks-node-controller/checkhotfix.go checkHotfix and checkhotfix_grpc.go).
enum class FetchClass {
  kBenign,                  // Unauthenticated, PermissionDenied, NotFound: nothing published
  kAuthoritativeRejection,  // InvalidArgument, ResourceExhausted: no cold-start fallback
  kFallbackEligible,        // everything else, including errors outside gRPC
};
FetchClass ClassifyFetchFailure(const FetchResult& result);

struct CheckHotfixOptions {
  std::string pointer_path;
  std::string node_config_path;  // also the cold-start source
  std::string current_version;
  bool dry_run = false;
  int lock_timeout_ms = 1000;
};

struct CheckHotfixResult {
  Outcome outcome = Outcome::kFailed;
  Status error;  // set only for kFailed
  // The pointer that was (or, in a dry run, would have been) written.
  std::optional<HotfixPointer> staged;
};

CheckHotfixResult CheckHotfix(const CheckHotfixOptions& options, LpsFetcher& fetcher, Logger& log);

// The whole command: the "started" log, the workflow with every exception caught, one
// CheckHotfix event in events_dir (none in a dry run), the "completed" log. Never throws; the
// caller exits 0 whatever it returns.
CheckHotfixResult RunCheckHotfixCommand(const CheckHotfixOptions& options, LpsFetcher& fetcher,
                                        const std::string& events_dir, Logger& log);

}  // namespace hotfix::node
