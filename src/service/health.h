// The gRPC health service (grpc.health.v1.Health/Check) kubelet's probes and the proxies call,
// and the TLS port's routing between it and the live-patching call. docs/SERVICE.md, "Health".
#pragma once

#include <functional>

#include "service/transport/h2_session.h"

namespace hotfix::service {

class LivePatchingServiceImpl;

inline constexpr char kHealthCheckPath[] = "/grpc.health.v1.Health/Check";

// Check, answered from one flag: "" and the service's own name are SERVING while serving()
// says so; any other name is NOT_FOUND (as gRPC's default health service answers). Watch is a
// streaming RPC no probe here uses: UNIMPLEMENTED, as is every other path (the plaintext
// health port serves this alone).
class HealthHandler final : public GrpcHandler {
 public:
  explicit HealthHandler(std::function<bool()> serving) : serving_(std::move(serving)) {}
  void Handle(const GrpcCall& call, GrpcReply* reply) override;

 private:
  std::function<bool()> serving_;
};

// The TLS port: health, and everything else to the service (which refuses unknown paths).
class TlsPortHandler final : public GrpcHandler {
 public:
  TlsPortHandler(HealthHandler* health, LivePatchingServiceImpl* service)
      : health_(health), service_(service) {}
  void Handle(const GrpcCall& call, GrpcReply* reply) override;

 private:
  HealthHandler* health_;
  LivePatchingServiceImpl* service_;
};

}  // namespace hotfix::service
