// A credential (the IMDS attested signature). It has no conversion to string or to a log
// field, so it cannot reach a log line by accident: only reveal() gets at it, at the one place
// that puts it on the wire.
#pragma once

#include <string>
#include <utility>

namespace hotfix {

class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string value) : value_(std::move(value)) {}
  const std::string& reveal() const { return value_; }

 private:
  std::string value_;
};

}  // namespace hotfix
