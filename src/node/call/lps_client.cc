#include "node/call/lps_client.h"

#include <atomic>
#include <future>
#include <optional>
#include <thread>
#include <utility>

#include "common/host_port.h"
#include "node/call/lps_target.h"
#include "wire/grpc_unary.h"
#include "wire/tls_dialer.h"

namespace hotfix::node {
namespace {

// The reference always dials 443 (lpsAPIServerPort, AgentBaker's
// aks-node-controller/checkhotfix_grpc.go dialLPSGRPC).
constexpr uint16_t kApiServerPort = 443;
constexpr char kAlpnLivePatching[] = "aks-live-patching";
constexpr char kAlpnH2[] = "h2";
constexpr char kAuthorizationKey[] = "authorization";

LpsUnaryResult LocalError(const Status& status) {
  return {
      .message = {}, .status = {wire::GrpcCode::kUnknown, status.message()}, .local_error = true};
}

// "HOST:PORT" (or "[v6]:PORT") of --connect-to, split as Go's net.SplitHostPort.
StatusOr<std::pair<std::string, uint16_t>> ParseConnectTo(const std::string& value) {
  const std::optional<HostPort> split = SplitHostPort(value);
  if (!split || split->host.empty() || split->port.empty()) {
    return Status::InvalidArgument("--connect-to " + value + ": want HOST:PORT");
  }
  const std::optional<uint16_t> port = ParsePort(split->port);
  if (!port) return Status::InvalidArgument("--connect-to " + value + ": bad port");
  return std::make_pair(std::string(split->host), *port);
}

StatusOr<wire::TlsDialOptions> DialOptions(const LpsEndpoint& endpoint, const LpsTarget& target) {
  if (target.ca_pem.empty()) {
    return Status::InvalidArgument(
        "cluster CA unavailable from provision-config; refusing to fetch over unverified TLS");
  }
  // Parsed here, before IMDS is asked, so a CA without a usable certificate stops the call without
  // a request for the node's identity. The dial reuses the parsed anchors and still builds its TLS
  // context (OpenSSL's costly first use) while it connects, in parallel with IMDS.
  StatusOr<wire::TrustAnchors> anchors = wire::ParseTrustAnchors(target.ca_pem);
  if (!anchors.ok()) return anchors.status();

  wire::TlsDialOptions dial;
  const std::string host = ApiServerHost(target.api_server_name);
  dial.host = host;
  dial.port = kApiServerPort;
  if (!endpoint.connect_to.empty()) {
    auto dest = ParseConnectTo(endpoint.connect_to);
    if (!dest.ok()) return dest.status();
    dial.host = dest->first;
    dial.port = dest->second;
  }
  // No proxy, whatever HTTPS_PROXY says: the reference dials with grpc.WithNoProxy() (AgentBaker
  // aks-node-controller/checkhotfix_grpc.go), so the apiserver's private address needs no
  // NO_PROXY entry. The same host is the SNI (none for an IP literal) and, unless --server-name
  // overrides it, the name the certificate is verified for.
  dial.sni = host;
  dial.alpn = {kAlpnLivePatching, kAlpnH2};
  dial.required_alpn = kAlpnH2;
  dial.verify_name = endpoint.server_name.empty() ? host : endpoint.server_name;
  dial.trust_anchors = std::make_shared<const wire::TrustAnchors>(std::move(*anchors));
  return dial;
}

LpsUnaryResult Call(wire::ByteStream& stream, const LpsEndpoint& endpoint, const LpsUnaryCall& call,
                    const std::string& host, const Secret& token) {
  wire::UnaryRequest request;
  // The port is always 443, which :authority leaves out; an IPv6 host is bracketed.
  request.authority = BracketHost(host);
  request.path = call.method;
  request.user_agent = endpoint.user_agent;
  request.metadata.push_back({kAuthorizationKey, token.reveal(), /*sensitive=*/true});
  request.message = call.message;

  wire::UnaryResponse response = wire::CallUnary(stream, request, call.call_deadline);
  return {.message = std::move(response.message),
          .status = std::move(response.status),
          .local_error = false};
}

}  // namespace

std::string LpsErrorText(const wire::GrpcStatus& status, bool local_error) {
  if (local_error) return status.message;
  std::string text =
      "LPS gRPC call failed with code " + std::string(wire::GrpcCodeName(status.code));
  if (!status.message.empty()) text += ": " + status.message;
  return text;
}

LpsUnaryResult CallLpsUnary(const LpsEndpoint& endpoint, const LpsUnaryCall& call,
                            AttestedTokenSource& tokens, Logger& log) {
  // Everything local is checked before IMDS is asked: a node that cannot connect should not
  // spend seconds on its identity first.
  auto target = ResolveLpsTarget(endpoint.node_config_path, endpoint.nbc_cmd_path, log);
  if (!target.ok()) return LocalError(target.status().Annotate("resolving LPS endpoint"));
  auto dial = DialOptions(endpoint, *target);
  if (!dial.ok()) return LocalError(dial.status().Annotate("dialing LPS gRPC"));

  // The token is fetched while we connect and handshake; without one there is nothing to
  // send, so a failed fetch stops the dial at its next step.
  std::atomic<bool> token_failed{false};
  dial->cancelled = &token_failed;
  std::promise<StatusOr<Secret>> token_promise;
  auto token_future = token_promise.get_future();
  std::thread imds([&tokens, &token_failed, &token_promise, &call] {
    StatusOr<Secret> token = tokens.Fetch(call.call_deadline);
    if (!token.ok()) token_failed = true;
    token_promise.set_value(std::move(token));
  });

  log.Info(call.dial_log, {{"dialHost", target->api_server_name},
                           {"alpn", kAlpnLivePatching},
                           {"component", call.component}});
  auto stream = wire::DialTls(*dial, call.dial_deadline);
  // Report what failed first: a dial cancelled for want of a token is IMDS's failure; an IMDS
  // request cancelled because the dial failed is the dial's.
  const bool imds_failed_first = token_failed;
  if (!stream.ok()) tokens.Cancel();
  StatusOr<Secret> token = token_future.get();
  imds.join();
  if (!stream.ok() && !imds_failed_first) {
    return LocalError(stream.status().Annotate("dialing LPS gRPC"));
  }
  if (!token.ok()) return LocalError(token.status());

  return Call(**stream, endpoint, call, ApiServerHost(target->api_server_name), *token);
}

}  // namespace hotfix::node
