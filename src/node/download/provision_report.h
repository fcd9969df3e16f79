// `hotfix-agent report`: how the node's provisioning with its hotfix binary ended, told to the
// live-patching service (ReportHotfixOutcome, PROVISION_SUCCEEDED or PROVISION_FAILED), so that
// a rollout's gates and halts can see more than "installed" (docs/DOWNLOAD-HOTFIX.md,
// "Reporting provisioning"). deploy/node/aks-node-controller-hotfix.sh runs it after the
// selected binary's `provision`. Fail-open and bounded as download-hotfix's report: at most its
// budget (3 s, IMDS included), once per (base, version, outcome) by a marker of its own.
#pragma once

#include <optional>
#include <string>

#include "common/log.h"
#include "node/download/hotfix_report.h"

namespace hotfix::node {

struct ProvisionReportInput {
  std::string pointer_path;     // the pointer check-hotfix staged
  std::string current_version;  // the VHD binary's version (YYYYMM.DD.PATCH)
  std::string hotfix_binary;    // the staged hotfix binary: selected when executable
  bool succeeded = false;       // provision exited 0
  std::string detail;           // e.g. "provision exited 1"; kept to ReportDetail's 256 bytes
};

// The report, or nullopt and *why_not when the node did not provision with a hotfix: the
// hotfix binary is not executable (the flow selected the VHD binary), the pointer is unreadable
// or names no version for this node's base.
std::optional<HotfixReport> DecideProvisionReport(const ProvisionReportInput& input,
                                                  const std::string& component,
                                                  std::string* why_not, Logger& log);

// "<folder of the pointer>/aks-node-controller-provision-report.json": the install report's
// marker stays its own, so that neither report hides the other.
inline constexpr char kProvisionReportMarkerName[] = "aks-node-controller-provision-report.json";
std::string ProvisionReportMarkerPath(const std::string& pointer_path);

// The command: decide, then SendHotfixReport with options (whose marker_path should be
// ProvisionReportMarkerPath). One log line whatever happens; never throws on I/O or network.
ReportStatus RunReportCommand(const ProvisionReportInput& input, const ReportHotfixOptions& options,
                              HotfixReportSender& sender, Logger& log);

}  // namespace hotfix::node
