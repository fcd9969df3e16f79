// The AKSNodeConfig JSON (aks-node-controller-config.json) as the reference decodes it, with
// protojson (google.golang.org/protobuf/encoding/protojson): only the fields check-hotfix
// reads. The encoding/json side of the node's Go compatibility is node/go/go_json.h.
#pragma once

#include <string>
#include <string_view>

namespace hotfix::node {

// The fields of AKSNodeConfig that check-hotfix reads, decoded with protojson's rules: each
// field under its proto name or its JSON name, unknown fields ignored, duplicates and type
// mismatches are errors. On an error, the fields decoded before it are kept (a sub-message
// only if it decoded completely) and parse_error says what was wrong.
struct NodeConfigFields {
  std::string api_server_name;
  std::string kubernetes_ca_cert;  // base64 of PEM, as stored
  std::string parse_error;         // empty when the document decoded cleanly
};
NodeConfigFields ParseNodeConfigFields(std::string_view json);

}  // namespace hotfix::node
