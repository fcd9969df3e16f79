// The nbc-cmd.sh reader: AgentBaker's parseEnvVarsFromNBCCmdContent (aks-node-controller/app.go),
// byte for byte. It scans the flattened CSE command for KEY=VALUE assignments without evaluating
// shell. Hand-written because it must reproduce the reference's quirks exactly (values cut at an
// unquoted "UPPER=" run, no escapes), which no shell-lexing library does.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace hotfix::node {

// Last assignment wins for a repeated key.
std::map<std::string, std::string> ParseEnvVarsFromNbcCmd(std::string_view content);

}  // namespace hotfix::node
