// The contract between the node and the service, taken from the one .proto
// (proto/akslivepatching/v1/live_patching.proto): the names a call carries and the outcomes a
// node reports. Both sides include this header: the node built against protobuf-lite's
// generated code, the service against full protobuf's. "akslivepatching/v1/live_patching.pb.h"
// is whichever the includer links; both are generated from the same file, so the enum, its
// values and its names are the same on either side.
#pragma once

#include <cctype>
#include <optional>
#include <string>
#include <string_view>

#include "akslivepatching/v1/live_patching.pb.h"

namespace hotfix::contract {

// The service's full name and its two methods' HTTP/2 paths. protobuf-lite has no service
// descriptors, so they are spelled here once; contract_test checks them against the full
// protobuf's descriptor of the .proto.
inline constexpr char kServiceName[] = "akslivepatching.v1.LivePatchingService";
inline constexpr char kGetComponentConfigPath[] =
    "/akslivepatching.v1.LivePatchingService/GetComponentConfig";
inline constexpr char kReportHotfixOutcomePath[] =
    "/akslivepatching.v1.LivePatchingService/ReportHotfixOutcome";

// What acting on a hotfix came to on a node: the proto's enum itself, so that
// contract::HOTFIX_OUTCOME_INSTALLED is the proto's value 1.
using Outcome = ::akslivepatching::v1::HotfixOutcome;
using enum ::akslivepatching::v1::HotfixOutcome;

// The outcomes a node may report: every value the proto defines but UNSPECIFIED (which the
// service refuses), in the proto's order.
inline constexpr int kFirstReportedOutcome = HOTFIX_OUTCOME_UNSPECIFIED + 1;
inline constexpr int kLastReportedOutcome = ::akslivepatching::v1::HotfixOutcome_MAX;
inline bool IsReportedOutcome(int value) {
  return value != HOTFIX_OUTCOME_UNSPECIFIED && ::akslivepatching::v1::HotfixOutcome_IsValid(value);
}

// Every value but INSTALLED and PROVISION_SUCCEEDED is a failure (the proto says so).
inline bool IsFailure(Outcome outcome) {
  return outcome != HOTFIX_OUTCOME_INSTALLED && outcome != HOTFIX_OUTCOME_PROVISION_SUCCEEDED;
}

// The proto's name without its "HOTFIX_OUTCOME_" prefix: "INSTALLED", "PROVISION_FAILED"
// (the node's log and its report marker).
inline std::string OutcomeName(Outcome outcome) {
  constexpr std::string_view kPrefix = "HOTFIX_OUTCOME_";
  const std::string& full = ::akslivepatching::v1::HotfixOutcome_Name(outcome);
  return full.rfind(kPrefix, 0) == 0 ? full.substr(kPrefix.size()) : full;
}

// OutcomeName in lower case: "installed", "provision_failed" (the service's metric labels,
// access log and Prometheus queries).
inline std::string OutcomeLabel(Outcome outcome) {
  std::string label = OutcomeName(outcome);
  for (char& c : label) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return label;
}

// The reported outcome whose OutcomeLabel is `label`; nullopt for any other text.
inline std::optional<Outcome> OutcomeFromLabel(std::string_view label) {
  for (int value = kFirstReportedOutcome; value <= kLastReportedOutcome; ++value) {
    if (IsReportedOutcome(value) && OutcomeLabel(static_cast<Outcome>(value)) == label) {
      return static_cast<Outcome>(value);
    }
  }
  return std::nullopt;
}

}  // namespace hotfix::contract
