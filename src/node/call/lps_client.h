// One unary call to the live-patching service, the way every node command reaches it: the
// endpoint and cluster CA from the node config (or nbc-cmd.sh), the attested token from IMDS
// fetched while the connection is dialed (straight to the apiserver: no proxy, as the reference
// dials with grpc.WithNoProxy), then the call with the token as "authorization" metadata.
// check-hotfix (GetComponentConfig) and download-hotfix (ReportHotfixOutcome) both call through
// here, so the transport, identity and order of work are one implementation.
#pragma once

#include <string>

#include "common/deadline.h"
#include "common/log.h"
#include "node/call/imds.h"
#include "wire/grpc_status.h"

namespace hotfix::node {

// Where the service is and what its certificate must say. The same for every method.
struct LpsEndpoint {
  std::string node_config_path;
  std::string nbc_cmd_path;
  std::string connect_to;  // "HOST:PORT" TCP override; SNI and :authority stay the apiserver's
  // The name the service's certificate must carry. Empty (the default): the apiserver host the
  // node dials, as the reference verifies since AgentBaker #9351 (the service presents a
  // certificate for the apiserver FQDN; an IP literal host is checked against the IP SANs).
  // --server-name sets it, e.g. to the name pinned before #9351,
  // aks-security-patch.data.mcr.microsoft.com. Never a way to skip the check.
  std::string server_name;
  std::string user_agent;
};

struct LpsUnaryCall {
  std::string method;   // a path of contract/live_patching.h
  std::string message;  // the serialized request
  // The INFO line logged as the dial starts (e.g. "check-hotfix LPS gRPC dial"), with the
  // component it is about.
  std::string dial_log;
  std::string component;
  // The connect and TLS handshake must finish by dial_deadline; the IMDS fetch and the call
  // by call_deadline. One deadline for both bounds the whole exchange by it.
  Deadline dial_deadline = Deadline::Infinite();
  Deadline call_deadline = Deadline::Infinite();
};

// A local error's own text, or "LPS gRPC call failed with code <Code>[: <grpc-message>]" (the
// reference stops at the code; the service's message says why).
std::string LpsErrorText(const wire::GrpcStatus& status, bool local_error);

struct LpsUnaryResult {
  std::string message;  // the serialized response; empty unless status is OK
  // OK on success; the service's status, or one this client made up (wire::UnaryResponse).
  wire::GrpcStatus status;
  // True when the failure never reached the gRPC layer (endpoint, CA, IMDS, dial).
  bool local_error = false;
  bool ok() const { return status.ok() && !local_error; }
  std::string ErrorText() const { return LpsErrorText(status, local_error); }
};

// Resolves the endpoint and checks the CA first (no IMDS request for a node that cannot
// connect), then fetches the token while it connects and handshakes (whichever fails first
// stops the other and is the error), then makes the call. Never throws on a network failure;
// every failure is in the result. The token is sent never-indexed and never logged.
LpsUnaryResult CallLpsUnary(const LpsEndpoint& endpoint, const LpsUnaryCall& call,
                            AttestedTokenSource& tokens, Logger& log);

}  // namespace hotfix::node
