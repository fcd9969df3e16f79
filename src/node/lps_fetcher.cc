#include "node/lps_fetcher.h"

#include <future>
#include <thread>

#include "akslivepatching/v1/live_patching.pb.h"
#include "common/host_port.h"
#include "node/lps_target.h"
#include "wire/grpc_unary.h"
#include "wire/http_proxy.h"
#include "wire/tls_dialer.h"

namespace hotfix::node {
namespace {

// The reference always dials 443 (lpsAPIServerPort, AgentBaker's
// aks-node-controller/checkhotfix_grpc.go dialLPSGRPC).
constexpr uint16_t kApiServerPort = 443;
constexpr char kAlpnLivePatching[] = "aks-live-patching";
constexpr char kAlpnH2[] = "h2";
constexpr char kMethodPath[] = "/akslivepatching.v1.LivePatchingService/GetComponentConfig";
constexpr char kAuthorizationKey[] = "authorization";
// One IMDS attempt: the call may wait this long past --lps-timeout-ms for a token that needed
// IMDS's retry, so the worst case is lps-timeout + 2 s (5 s) rather than the reference's 7 s.
constexpr int kImdsAttemptMs = 2000;

FetchResult LocalError(const Status& status) {
  FetchResult r;
  r.local_error = true;
  r.status.code = wire::GrpcCode::kUnknown;
  r.status.message = status.message();
  return r;
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

class GrpcLpsFetcher : public LpsFetcher {
 public:
  GrpcLpsFetcher(GrpcLpsFetcherOptions options, AttestedTokenSource& tokens, Logger& log)
      : options_(std::move(options)), tokens_(tokens), log_(log) {}

  FetchResult Fetch() override {
    const Deadline dial_deadline = Deadline::After(std::chrono::milliseconds(options_.timeout_ms));
    const Deadline call_deadline =
        Deadline::After(std::chrono::milliseconds(options_.timeout_ms + kImdsAttemptMs));

    // Everything local is checked before IMDS is asked: a node that cannot connect
    // should not spend seconds on its identity first.
    auto target = ResolveLpsTarget(options_.node_config_path, options_.nbc_cmd_path, log_);
    if (!target.ok()) return LocalError(target.status().Annotate("resolving LPS endpoint"));
    auto dial = DialOptions(*target);
    if (!dial.ok()) return LocalError(dial.status().Annotate("dialing LPS gRPC"));

    // The token is fetched while we connect and handshake; without one there is nothing to
    // send, so a failed fetch stops the dial at its next step.
    std::atomic<bool> token_failed{false};
    dial->cancelled = &token_failed;
    std::promise<StatusOr<Secret>> token_promise;
    auto token_future = token_promise.get_future();
    std::thread imds([&] {
      StatusOr<Secret> token = tokens_.Fetch(call_deadline);
      if (!token.ok()) token_failed = true;
      token_promise.set_value(std::move(token));
    });

    log_.Info("check-hotfix LPS gRPC dial", {{"dialHost", target->api_server_name},
                                             {"alpn", kAlpnLivePatching},
                                             {"component", options_.component}});
    auto stream = wire::DialTls(*dial, dial_deadline);
    // Report what failed first: a dial cancelled for want of a token is IMDS's failure; an
    // IMDS request cancelled because the dial failed is the dial's.
    const bool imds_failed_first = token_failed;
    if (!stream.ok()) tokens_.Cancel();
    StatusOr<Secret> token = token_future.get();
    imds.join();
    if (!stream.ok() && !imds_failed_first) {
      return LocalError(stream.status().Annotate("dialing LPS gRPC"));
    }
    if (!token.ok()) return LocalError(token.status());

    return Call(**stream, ApiServerHost(target->api_server_name), *token, call_deadline);
  }

 private:
  StatusOr<wire::TlsDialOptions> DialOptions(const LpsTarget& target) {
    if (target.ca_pem.empty()) {
      return Status::InvalidArgument(
          "cluster CA unavailable from provision-config; refusing to fetch over unverified TLS");
    }
    // Parsed here, before IMDS is asked, so that a CA without a usable certificate stops the
    // fetch without a request for the node's identity. The dial reuses the parsed anchors and
    // still builds its TLS context (OpenSSL's costly first use) while it connects, in
    // parallel with the IMDS request.
    StatusOr<wire::TrustAnchors> anchors = wire::ParseTrustAnchors(target.ca_pem);
    if (!anchors.ok()) return anchors.status();

    wire::TlsDialOptions dial;
    const std::string host = ApiServerHost(target.api_server_name);
    dial.host = host;
    dial.port = kApiServerPort;
    if (!options_.connect_to.empty()) {
      auto dest = ParseConnectTo(options_.connect_to);
      if (!dest.ok()) return dest.status();
      dial.host = dest->first;
      dial.port = dest->second;
    }
    // The proxy is chosen for the apiserver (so NO_PROXY=<fqdn> bypasses it, as in grpc-go);
    // the CONNECT names the TCP destination, which --connect-to may override.
    auto proxy = wire::ProxyFromEnvironment(host, kApiServerPort);
    if (!proxy.ok()) return proxy.status();
    dial.proxy = *proxy;
    dial.sni = host;
    dial.alpn = {kAlpnLivePatching, kAlpnH2};
    dial.required_alpn = kAlpnH2;
    dial.verify_name = options_.server_name;
    dial.trust_anchors = std::make_shared<const wire::TrustAnchors>(std::move(*anchors));
    return dial;
  }

  FetchResult Call(wire::ByteStream& stream, const std::string& host, const Secret& token,
                   Deadline deadline) {
    akslivepatching::v1::GetComponentConfigRequest request;
    request.set_component_name(options_.component);
    wire::UnaryRequest call;
    // The port is always 443, which :authority leaves out; an IPv6 host is bracketed.
    call.authority = BracketHost(host);
    call.path = kMethodPath;
    call.user_agent = options_.user_agent;
    call.metadata.push_back({kAuthorizationKey, token.reveal(), /*sensitive=*/true});
    call.message = request.SerializeAsString();

    wire::UnaryResponse response = wire::CallUnary(stream, call, deadline);
    FetchResult result;
    result.status = response.status;
    if (!response.status.ok()) return result;
    akslivepatching::v1::GetComponentConfigResponse reply;
    if (!reply.ParseFromString(response.message)) {
      result.status = {wire::GrpcCode::kInternal,
                       "grpc: failed to unmarshal the received GetComponentConfigResponse", false};
      return result;
    }
    result.config = reply.config();
    return result;
  }

  GrpcLpsFetcherOptions options_;
  AttestedTokenSource& tokens_;
  Logger& log_;
};

}  // namespace

std::string FetchResult::ErrorText() const {
  if (local_error) return status.message;
  std::string text =
      "LPS gRPC call failed with code " + std::string(wire::GrpcCodeName(status.code));
  if (!status.message.empty()) text += ": " + status.message;
  return text;
}

std::unique_ptr<LpsFetcher> NewGrpcLpsFetcher(GrpcLpsFetcherOptions options,
                                              AttestedTokenSource& tokens, Logger& log) {
  return std::make_unique<GrpcLpsFetcher>(std::move(options), tokens, log);
}

}  // namespace hotfix::node
