// download-hotfix tells the live-patching service how acting on a binary hotfix went
// (LivePatchingService/ReportHotfixOutcome), so that a rollout can see its failures
// (docs/DOWNLOAD-HOTFIX.md, "Reporting the outcome"). Once per node per (base, version, outcome): a
// marker beside the pointer remembers the last report the service accepted. Fail-open and bounded:
// a report never changes the run's result and takes at most its budget (3 s), IMDS included.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/deadline.h"
#include "common/log.h"
#include "common/status.h"
#include "contract/live_patching.h"
#include "node/call/imds.h"
#include "node/call/lps_client.h"
#include "node/download/download_hotfix.h"

namespace hotfix::node {

struct HotfixReport {
  std::string component;       // e.g. "aksNodeController"
  std::string base_version;    // "YYYYMM.DD" of the version the node runs
  std::string hotfix_version;  // "YYYYMM.DD.PATCH", installed or tried
  contract::Outcome outcome = contract::HOTFIX_OUTCOME_FAILED_OTHER;  // never UNSPECIFIED
  std::string detail;  // ReportDetail(error); empty for kInstalled
};

// At most 256 bytes of printable ASCII, as the service takes: the message with every byte
// outside 0x20-0x7e (and '"', '\') escaped as \xNN (EscapeForMessage's rules), cut at a whole
// byte's escape, "..." marking a cut.
inline constexpr size_t kMaxReportDetailBytes = 256;
std::string ReportDetail(std::string_view message);

// What a run reports: only a binary hotfix the gate let through and a real run acted on,
// installed (kInstalled) or failed (each BinaryFailure its outcome; an exception
// FAILED_OTHER). nullopt for noHotfix, notTargeted, pointerUnreadable and busy. The base is
// current_version's (the target's if current_version has no YYYYMM.DD.PATCH form).
std::optional<HotfixReport> DecideHotfixReport(const DownloadHotfixResult& result,
                                               std::string_view current_version,
                                               const std::string& component);

// Sends one report; OK only when the service answered OK.
class HotfixReportSender {
 public:
  virtual ~HotfixReportSender() = default;
  virtual Status Send(const HotfixReport& report, Deadline deadline) = 0;
};

// ReportHotfixOutcome through CallLpsUnary: the endpoint, CA, IMDS token and transport
// exactly as check-hotfix's, with `deadline` for everything (dial, IMDS, call).
std::unique_ptr<HotfixReportSender> NewGrpcHotfixReportSender(LpsEndpoint endpoint,
                                                              AttestedTokenSource& tokens,
                                                              Logger& log);

// "<folder of the pointer>/aks-node-controller-hotfix-report.json".
inline constexpr char kHotfixReportMarkerName[] = "aks-node-controller-hotfix-report.json";
std::string HotfixReportMarkerPath(const std::string& pointer_path);
// The marker's temp files, removed under the folder's lock when a killed run left them.
inline constexpr char kReportMarkerTempPrefix[] = ".aks-node-controller-report-";

struct ReportHotfixOptions {
  std::string marker_path;
  std::string component = "aksNodeController";
  bool enabled = true;  // false: --no-report
  // Everything (marker, IMDS, dial, call, marker write) within this of the start.
  std::chrono::milliseconds budget{3000};
  // A run stopped by SIGTERM/SIGINT reports nothing: its failure is not the hotfix's.
  const std::atomic<bool>* cancelled = nullptr;
};

enum class ReportStatus {
  kNothingToReport,  // DecideHotfixReport said nothing
  kDisabled,         // --no-report
  kCancelled,        // the run was cancelled
  kAlreadyReported,  // the marker holds the same (base, version, outcome)
  kSent,             // the service answered OK (the marker written, or a WARN saying why not)
  kFailed,           // not sent, or not OK: the marker is left as it was
};

// The whole step, logged in one line (sent, already reported, failed with the error, or not
// reported and why; never the token). Never throws on I/O or network failures.
ReportStatus ReportHotfixOutcome(const DownloadHotfixResult& result,
                                 std::string_view current_version,
                                 const ReportHotfixOptions& options, HotfixReportSender& sender,
                                 Logger& log);

// The same step for a report already decided: --no-report, cancellation, the marker, the send,
// the marker written.
ReportStatus SendHotfixReport(const HotfixReport& report, const ReportHotfixOptions& options,
                              HotfixReportSender& sender, Logger& log);

}  // namespace hotfix::node
