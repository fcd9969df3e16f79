// The AKSNodeConfig JSON (aks-node-controller-config.json, written by the provisioning
// pipeline) and what check-hotfix derives from it: the apiserver name -> host -> dial target,
// the base64 CA, and the cold-start hotfixes map. The same steps as ResolveLpsTarget and
// ReadColdStartHotfixes, without their file reads.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/base64.h"
#include "common/host_port.h"
#include "fuzz_util.h"
#include "node/call/lps_target.h"
#include "node/host/hotfix_pointer.h"

using namespace hotfix::node;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);

  NodeConfigFields fields = ParseNodeConfigFields(input);
  const std::string host = ApiServerHost(fields.api_server_name);
  const std::string target = hotfix::JoinHostPort(host, uint16_t{443});
  FUZZ_CHECK(target.size() >= host.size() + 4);
  if (!fields.kubernetes_ca_cert.empty()) {
    auto pem = hotfix::DecodeStdBase64(fields.kubernetes_ca_cert);
    if (pem.ok())
      FUZZ_CHECK(hotfix::EncodeStdBase64(*pem).size() <= fields.kubernetes_ca_cert.size());
  }
  static_cast<void>(DecodeLenientHotfixes(input));

  // The raw bytes as an apiserver name too: the name reaches SNI and the dial unchecked.
  hotfix::JoinHostPort(ApiServerHost(input), uint16_t{443});
  return 0;
}
