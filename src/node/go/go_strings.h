// Go's strings.TrimSpace and strconv.Quote: the reference (AgentBaker's aks-node-controller,
// in Go) trims the values it reads and quotes them in its error texts by these rules, so the
// node does too.
#pragma once

#include <string>
#include <string_view>

namespace hotfix::node {

// strings.TrimSpace: Unicode white space at both ends, as every Go reader of these values trims.
std::string_view TrimSpaceLikeGo(std::string_view s);

// strconv.Quote, for %q in error texts: double-quoted, Go's escapes, invalid UTF-8 as \xNN. Go's
// IsPrint is approximated: unassigned and private-use code points are written verbatim.
std::string QuoteLikeGo(std::string_view s);

}  // namespace hotfix::node
