// What the service's call-level fuzz targets share: a store that never changes, holding the
// given component files, and the service deciding calls against it in development mode (any
// non-empty token is an identity), with no-op metrics and no access log.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "fuzz_util.h"
#include "service/identity/node_identity.h"
#include "service/live_patching_service.h"
#include "service/ops/metrics.h"
#include "service/store/component_store.h"

namespace hotfix::service {

class FixedStore : public ComponentStore {
 public:
  // component name -> file text; each must be a file the store would load.
  explicit FixedStore(const std::vector<std::pair<std::string, std::string>>& files) {
    auto snapshot = std::make_shared<StoreSnapshot>();
    snapshot->generation = 1;
    for (const auto& [component, text] : files) {
      auto parsed = ParseComponentConfig(component, text);
      FUZZ_CHECK(parsed.ok());
      snapshot->components[component] =
          std::make_shared<const ComponentConfig>(std::move(parsed).value());
    }
    snapshot_ = snapshot;
  }
  std::shared_ptr<const StoreSnapshot> Current() const override { return snapshot_; }

 private:
  std::shared_ptr<const StoreSnapshot> snapshot_;
};

struct FixedService {
  explicit FixedService(const std::vector<std::pair<std::string, std::string>>& files)
      : store(files) {
    LivePatchingServiceOptions options;
    options.authenticator = auth.get();
    options.store = &store;
    options.metrics = metrics.get();
    options.access_log = &NullLogger();
    service = std::make_unique<LivePatchingServiceImpl>(std::move(options));
  }

  FixedStore store;
  std::unique_ptr<Authenticator> auth = NewInsecureAnyTokenAuthenticator();
  std::unique_ptr<Metrics> metrics = NewNoopMetrics();
  std::unique_ptr<LivePatchingServiceImpl> service;
};

}  // namespace hotfix::service
