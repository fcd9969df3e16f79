// What the identity tests share: an authenticator called as the service calls it for a call
// it lets in (LivePatchingServiceImpl::Decide, once the allow-list and the rate limit passed):
// the identity is admitted, so kept in the cache.
#pragma once

#include <string_view>

#include "service/identity/node_identity.h"

namespace hotfix::service {

inline AuthResult AuthenticateAndAdmit(Authenticator& auth, std::string_view token) {
  AuthResult result = auth.Authenticate(token);
  if (result.ok() && result.remember) auth.Admit(result.identity, *result.remember);
  return result;
}

}  // namespace hotfix::service
