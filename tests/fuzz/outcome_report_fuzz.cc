// ReportHotfixOutcome as the service decides it (LivePatchingServiceImpl::Decide with a report,
// src/service/live_patching_service.cc): every field a node controls, checked and attributed,
// then written into the access-log line (FormatAccessLogLine, src/service/ops/access_log.cc).
//
// Input: fields separated by NUL bytes: component name, base_version, hotfix_version, the
// outcome (its first byte, as the enum's number), detail, :authority. Missing fields are empty.
//
// Properties:
// - OK only for a known component, a base of the shape YYYYMM.DD, a version of that base of the
//   shape YYYYMM.DD.PATCH, an outcome from 1 to 6 and a detail of at most 256 printable bytes
//   (each checked by a reference written apart); a known component with any of them wrong is
//   INVALID_ARGUMENT;
// - every rollout a report is attributed to names that version for that base;
// - the access-log line is valid JSON and carries the detail only if it was accepted whole.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fixed_service.h"
#include "fuzz_util.h"
#include "service/live_patching_service.h"
#include "service/ops/access_log.h"

using namespace hotfix;
using namespace hotfix::service;

namespace {

bool Digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool ReferenceValid(std::string_view base, std::string_view version, int outcome,
                    std::string_view detail) {
  const bool base_ok =
      base.size() == 9 && Digits(base.substr(0, 6)) && base[6] == '.' && Digits(base.substr(7, 2));
  const bool version_ok = version.size() > 10 && version.substr(0, 9) == base &&
                          version[9] == '.' && Digits(version.substr(10));
  bool printable = detail.size() <= 256;
  for (char c : detail) printable = printable && c >= 0x20 && c <= 0x7e;
  return base_ok && version_ok && outcome >= 1 && outcome <= 6 && printable;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Never destroyed: libFuzzer exits without unwinding. Development mode: any token is a node
  // (with no vmId to bucket), so the report's own checks are reached. The file has a rollout
  // for everyone (by cluster) naming 202604.01.4, and one naming 202604.01.5 for nobody.
  static FixedService* world =
      new FixedService({{"aksNodeController",
                         R"({"hotfixes":{"202604.01":"202604.01.3"},"rollouts":[
          {"name":"all","hotfixes":{"202604.01":"202604.01.4"},"cohort":"cluster",
           "steps":[{"at":"2020-01-01T00:00:00Z","percent":100}]},
          {"name":"none","hotfixes":{"202604.01":"202604.01.5"},"cohort":"cluster",
           "steps":[{"at":"2020-01-01T00:00:00Z","percent":0}]}]})"},
                        {"other", "{}"}});
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> fields = SplitAtNul(input);
  fields.resize(6);
  const int outcome = fields[3].empty() ? 0 : static_cast<unsigned char>(fields[3][0]);

  CallInput call;
  call.authorization = {"token"};
  call.component_name = fields[0];
  call.report = OutcomeReport{fields[1], fields[2], outcome, fields[4]};
  call.authority = fields[5];
  call.peer = "ipv4:127.0.0.1:1";
  CallDecision decision = world->service->Decide(call);

  const bool known = call.component_name == "aksNodeController" || call.component_name == "other";
  const bool valid = ReferenceValid(fields[1], fields[2], outcome, fields[4]);
  FUZZ_CHECK(decision.status.ok() == (known && valid));
  if (known && !valid) FUZZ_CHECK(decision.status.code == wire::GrpcCode::kInvalidArgument);
  for (size_t i : decision.applied_rollouts) {
    const Rollout& r = decision.rollout_config->rollouts.at(i);
    auto it = r.hotfixes.find(std::string(fields[1]));
    FUZZ_CHECK(it != r.hotfixes.end() && it->second == fields[2]);
    FUZZ_CHECK(r.name == "all");
  }

  AccessLogEntry entry;
  entry.method = "ReportHotfixOutcome";
  entry.report = true;
  entry.component = "x";
  entry.base_version = fields[1];
  entry.hotfix_version = fields[2];
  entry.detail = fields[4];
  entry.code = wire::GrpcCodeUpperName(decision.status.code);
  entry.error = decision.status.message;
  const std::string line =
      FormatAccessLogLine(LogLevel::kInfo, entry, std::chrono::system_clock::time_point{});
  nlohmann::json parsed = nlohmann::json::parse(line, nullptr, false);
  FUZZ_CHECK(!parsed.is_discarded());
  FUZZ_CHECK(parsed["msg"] == "ReportHotfixOutcome");
  return 0;
}
