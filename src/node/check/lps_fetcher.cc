#include "node/check/lps_fetcher.h"

#include <chrono>

#include "contract/live_patching.h"

namespace hotfix::node {
namespace {

// One IMDS attempt: the call may wait this long past --lps-timeout for a token that needed
// IMDS's retry, so the worst case is lps-timeout + 2 s (5 s) rather than the reference's 7 s.
constexpr int kImdsAttemptMs = 2000;

class GrpcLpsFetcher : public LpsFetcher {
 public:
  GrpcLpsFetcher(GrpcLpsFetcherOptions options, AttestedTokenSource& tokens, Logger& log)
      : options_(std::move(options)), tokens_(tokens), log_(log) {}

  FetchResult Fetch() override {
    akslivepatching::v1::GetComponentConfigRequest request;
    request.set_component_name(options_.component);
    LpsUnaryCall call;
    call.method = contract::kGetComponentConfigPath;
    call.message = request.SerializeAsString();
    call.dial_log = "check-hotfix LPS gRPC dial";
    call.component = options_.component;
    call.dial_deadline = Deadline::After(std::chrono::milliseconds(options_.timeout_ms));
    call.call_deadline =
        Deadline::After(std::chrono::milliseconds(options_.timeout_ms + kImdsAttemptMs));

    LpsUnaryResult called = CallLpsUnary(options_, call, tokens_, log_);
    FetchResult result;
    result.status = std::move(called.status);
    result.local_error = called.local_error;
    if (!result.ok()) return result;
    akslivepatching::v1::GetComponentConfigResponse reply;
    if (!reply.ParseFromString(called.message)) {
      result.status = {wire::GrpcCode::kInternal,
                       "grpc: failed to unmarshal the received GetComponentConfigResponse"};
      return result;
    }
    result.config = reply.config();
    return result;
  }

 private:
  GrpcLpsFetcherOptions options_;
  AttestedTokenSource& tokens_;
  Logger& log_;
};

}  // namespace

std::string FetchResult::ErrorText() const { return LpsErrorText(status, local_error); }

std::unique_ptr<LpsFetcher> NewGrpcLpsFetcher(GrpcLpsFetcherOptions options,
                                              AttestedTokenSource& tokens, Logger& log) {
  return std::make_unique<GrpcLpsFetcher>(std::move(options), tokens, log);
}

}  // namespace hotfix::node
