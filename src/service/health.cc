#include "service/health.h"

#include "contract/live_patching.h"
#include "grpc/health/v1/health.pb.h"
#include "service/live_patching_service.h"
#include "service/server.h"

namespace hotfix::service {

using wire::GrpcCode;

void HealthHandler::Handle(const GrpcCall& call, GrpcReply* reply) {
  if (call.path != kHealthCheckPath) {
    reply->code = GrpcCode::kUnimplemented;
    reply->error_message = "this port serves grpc.health.v1.Health/Check only";
    return;
  }
  grpc::health::v1::HealthCheckRequest request;
  if (!request.ParseFromArray(call.message.data(), static_cast<int>(call.message.size()))) {
    reply->code = GrpcCode::kInvalidArgument;
    reply->error_message = "the request is not a HealthCheckRequest";
    return;
  }
  if (!request.service().empty() && request.service() != contract::kServiceName) {
    reply->code = GrpcCode::kNotFound;
    reply->error_message = "unknown service";
    return;
  }
  grpc::health::v1::HealthCheckResponse response;
  response.set_status(serving_() ? grpc::health::v1::HealthCheckResponse::SERVING
                                 : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  response.SerializeToString(&reply->message);
}

void TlsPortHandler::Handle(const GrpcCall& call, GrpcReply* reply) {
  if (call.path == kHealthCheckPath) return health_->Handle(call, reply);
  service_->Handle(call, reply);
}

}  // namespace hotfix::service
