// aks-node-controller-nbc-cmd.sh, the flattened CSE command the node falls back to for the
// apiserver name and CA: ParseEnvVarsFromNbcCmd, then what TargetFromNbcCmd does with it.
//
// Property: keys are what the reference's scanner accepts ([A-Z_][A-Z0-9_]*); a key, its '='
// and its value never hold more bytes than the input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/base64.h"
#include "common/host_port.h"
#include "fuzz_util.h"
#include "node/call/lps_target.h"
#include "node/host/nbc_cmd.h"

using namespace hotfix::node;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);

  auto vars = ParseEnvVarsFromNbcCmd(input);
  for (const auto& [key, value] : vars) {
    FUZZ_CHECK(!key.empty() && (key[0] == '_' || (key[0] >= 'A' && key[0] <= 'Z')));
    for (char c : key) FUZZ_CHECK(c == '_' || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'));
    FUZZ_CHECK(key.size() + value.size() < size);
  }
  if (auto it = vars.find("API_SERVER_NAME"); it != vars.end()) {
    hotfix::JoinHostPort(ApiServerHost(it->second), uint16_t{443});
  }
  if (auto it = vars.find("KUBE_CA_CRT"); it != vars.end()) {
    static_cast<void>(hotfix::DecodeStdBase64(it->second));
  }
  return 0;
}
