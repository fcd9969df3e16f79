// The service's request handling without a gRPC server: LivePatchingServiceImpl::Decide, the
// whole decision GetComponentConfig makes (authenticate, allow-list, rate limit, the
// component-name check, the store lookup) from what a call carried, which is all a caller
// controls. Handle() around it only parses the request and copies the decision out (the
// transport is fuzzed by h2_server_session_fuzz.cc). Also the pure pieces: IsValidComponentName,
// ValidateComponentConfig (store files) and the access log's JSON line with the caller's strings in
// it.
//
// Input: fields separated by NUL bytes: the component name, then zero or more authorization
// values (in development mode, so a token gets through to the name check).
//
// Properties: OK only for a valid name the store holds, answering that component's config;
// a non-empty invalid name is INVALID_ARGUMENT once authenticated; the answer does not depend
// on the tokens' bytes (so never echoes one); the access-log line is valid JSON whatever the caller
// sent.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "fixed_service.h"
#include "fuzz_util.h"
#include "service/live_patching_service.h"
#include "service/store/component_store.h"

using namespace hotfix;
using namespace hotfix::service;

namespace {

// The spec of a component name, written independently of the implementation.
bool NameMatchesSpec(std::string_view name) {
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (name.empty() || name.size() > 64 || !alpha(name[0])) return false;
  for (char c : name.substr(1)) {
    if (!alpha(c) && !digit(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Never destroyed: libFuzzer exits without unwinding.
  static FixedService* world =
      new FixedService({{"aksNodeController", R"({"hotfixes":{"202604.01":"202604.01.3"}})"},
                        {"other.component-1_x", "{}"}});
  std::string_view input(reinterpret_cast<const char*>(data), size);

  std::vector<std::string_view> fields = SplitAtNul(input);
  CallInput call;
  call.component_name = fields[0];
  call.authorization.assign(fields.begin() + 1, fields.end());
  call.peer = "ipv4:127.0.0.1:1";

  const bool valid = IsValidComponentName(call.component_name);
  FUZZ_CHECK(valid == NameMatchesSpec(call.component_name));

  CallDecision decision = world->service->Decide(call);
  const std::string& message = decision.status.message;
  if (decision.status.ok()) {
    FUZZ_CHECK(valid);
    auto snapshot = world->store.Current();
    auto it = snapshot->components.find(std::string(call.component_name));
    FUZZ_CHECK(it != snapshot->components.end() && decision.config == it->second->text);
    FUZZ_CHECK(decision.metric_component == call.component_name);
  } else {
    FUZZ_CHECK(decision.config.empty());
    FUZZ_CHECK(decision.metric_component == "unknown");
  }
  if (decision.authenticated && !call.component_name.empty() && !valid) {
    FUZZ_CHECK(decision.status.code == wire::GrpcCode::kInvalidArgument);
  }
  // The tokens' bytes never reach the answer: the same call with other tokens of the same
  // sizes gets the same answer (so no token is echoed, whatever it holds).
  std::vector<std::string> others;
  for (std::string_view token : call.authorization) others.emplace_back(token.size(), '#');
  CallInput other_call = call;
  other_call.authorization.assign(others.begin(), others.end());
  CallDecision other = world->service->Decide(other_call);
  FUZZ_CHECK(other.status.code == decision.status.code);
  FUZZ_CHECK(other.status.message == message);

  const std::string line =
      Logger::FormatLine(LogLevel::kWarn, "GetComponentConfig",
                         {{"component", std::string(call.component_name)}, {"error", message}});
  FUZZ_CHECK(!nlohmann::json::parse(line, nullptr, false).is_discarded());

  // The same bytes as a store file of either kind of component.
  static_cast<void>(ValidateComponentConfig("aksNodeController", input));
  static_cast<void>(ValidateComponentConfig("other", input));
  return 0;
}
