// Fetching the served config of a component from the live-patching service. The check-hotfix
// workflow sees only this interface; GrpcLpsFetcher is the real one.
#pragma once

#include <memory>
#include <string>

#include "common/log.h"
#include "node/call/imds.h"
#include "node/call/lps_client.h"
#include "wire/grpc_status.h"

namespace hotfix::node {

struct FetchResult {
  // The config string of the response (may be empty).
  std::string config;
  // OK on success; the service's status, or one this client made up (wire::UnaryResponse).
  wire::GrpcStatus status;
  // True when the failure never reached the gRPC layer (endpoint, CA, IMDS): the reference's
  // "not a gRPC status" row.
  bool local_error = false;
  bool ok() const { return status.ok() && !local_error; }
  std::string ErrorText() const;
};

class LpsFetcher {
 public:
  virtual ~LpsFetcher() = default;
  virtual FetchResult Fetch() = 0;
};

// The endpoint (node config, nbc-cmd, --connect-to, --server-name, user agent) and what to ask.
struct GrpcLpsFetcherOptions : LpsEndpoint {
  std::string component = "aksNodeController";
  int timeout_ms = 3000;  // one budget: resolve, connect, TLS, call
};

// GetComponentConfig through CallLpsUnary (node/call/lps_client.h): the endpoint and CA checked
// first, the attested token fetched while it connects and handshakes, then the call with the
// token as "authorization" metadata.
std::unique_ptr<LpsFetcher> NewGrpcLpsFetcher(GrpcLpsFetcherOptions options,
                                              AttestedTokenSource& tokens, Logger& log);

}  // namespace hotfix::node
