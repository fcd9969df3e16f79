#include "common/status.h"

#include <cstring>

namespace hotfix {

Status Status::FromErrno(std::string_view what, int err) {
  Code code = Code::kIoError;
  if (err == ENOENT) code = Code::kNotFound;
  if (err == EACCES || err == EPERM) code = Code::kPermissionDenied;
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  return Status(code, std::move(msg));
}

Status Status::Annotate(std::string_view prefix) const {
  if (ok()) return *this;
  std::string msg(prefix);
  msg += ": ";
  msg += message_;
  return Status(code_, std::move(msg));
}

}  // namespace hotfix
