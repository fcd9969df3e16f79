#include "common/openssl.h"

#include <openssl/err.h>

namespace hotfix::ossl {

std::string DrainErrors() {
  std::string out;
  const char* data = nullptr;
  int flags = 0;
  while (unsigned long err = ERR_get_error_all(nullptr, nullptr, nullptr, &data, &flags)) {
    char buf[256];
    ERR_error_string_n(err, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
    if ((flags & ERR_TXT_STRING) != 0 && data != nullptr && *data != '\0') {
      out += std::string(" (") + data + ")";
    }
  }
  return out;
}

}  // namespace hotfix::ossl
