#include "node/download/provision_report.h"

#include <unistd.h>

#include "common/file_util.h"
#include "node/host/hotfix_pointer.h"

namespace hotfix::node {

std::optional<HotfixReport> DecideProvisionReport(const ProvisionReportInput& input,
                                                  const std::string& component,
                                                  std::string* why_not, Logger& log) {
  // The flow selects the hotfix binary exactly when it is executable (AgentBaker's
  // aks-node-controller-hotfix.sh, docs/REFERENCE.md): otherwise the VHD binary provisioned,
  // and no hotfix is to be judged by it.
  if (::access(input.hotfix_binary.c_str(), X_OK) != 0) {
    *why_not = "no executable hotfix binary at " + input.hotfix_binary +
               ": the node provisioned with its VHD binary";
    return std::nullopt;
  }
  StatusOr<HotfixPointer> pointer = ReadHotfixPointer(input.pointer_path);
  if (!pointer.ok()) {
    *why_not = pointer.status().message();
    return std::nullopt;
  }
  const std::string version = ResolveVersion(*pointer, input.current_version, log);
  if (version.empty()) {
    *why_not = "the pointer names no hotfix for version " + input.current_version;
    return std::nullopt;
  }
  StatusOr<std::string> base = HotfixBaseFromVersion(input.current_version);
  if (!base.ok()) base = HotfixBaseFromVersion(version);
  if (!base.ok()) {
    *why_not = base.status().message();
    return std::nullopt;
  }
  HotfixReport report;
  report.component = component;
  report.base_version = *base;
  report.hotfix_version = version;
  report.outcome = input.succeeded ? contract::HOTFIX_OUTCOME_PROVISION_SUCCEEDED
                                   : contract::HOTFIX_OUTCOME_PROVISION_FAILED;
  report.detail = input.succeeded ? "" : ReportDetail(input.detail);
  return report;
}

std::string ProvisionReportMarkerPath(const std::string& pointer_path) {
  return DirName(pointer_path) + "/" + kProvisionReportMarkerName;
}

ReportStatus RunReportCommand(const ProvisionReportInput& input, const ReportHotfixOptions& options,
                              HotfixReportSender& sender, Logger& log) {
  std::string why_not;
  std::optional<HotfixReport> report =
      DecideProvisionReport(input, options.component, &why_not, log);
  if (!report) {
    log.Info("provisioning outcome not reported to LPS: nothing to report",
             {{"reason", why_not}, {"succeeded", input.succeeded}});
    return ReportStatus::kNothingToReport;
  }
  return SendHotfixReport(*report, options, sender, log);
}

}  // namespace hotfix::node
