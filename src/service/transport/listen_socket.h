// A listening TCP socket on exactly the address given, for every listener the service opens:
// the gRPC ports (grpc_server.cc) and the metrics port (ops/metrics_http.cc).
//
//   StatusOr<UniqueFd> fd = ListenTcp("127.0.0.1:0", "--listen", &port);   // port: the bound one
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"

namespace hotfix::service {

// "ADDR:PORT" ("[v6]:PORT"; an empty ADDR: every address; port 0 picks one), non-blocking,
// SO_REUSEADDR and never SO_REUSEPORT (a busy port is a refusal, never a shared one), and
// TCP_NODELAY, which the connections it accepts inherit. A Status
// naming `flag` and the address when it cannot be parsed or bound.
StatusOr<UniqueFd> ListenTcp(const std::string& address, const std::string& flag, uint16_t* port);

}  // namespace hotfix::service
