#include "common/status.h"

#include <cstring>

namespace hotfix {

Status Status::FromErrno(std::string_view what, int err) {
  Code code = Code::kIoError;
  if (err == ENOENT) code = Code::kNotFound;
  if (err == EACCES || err == EPERM) code = Code::kPermissionDenied;
  return Status(code, std::string(what) + ": " + std::strerror(err));
}

Status Status::Annotate(std::string_view prefix) const {
  if (ok()) return *this;
  return Status(code_, std::string(prefix) + ": " + message_);
}

}  // namespace hotfix
