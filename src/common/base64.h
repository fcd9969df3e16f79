// Standard base64 (RFC 4648, with padding) as Go's encoding/base64.StdEncoding decodes it:
// CR and LF are skipped, every other character outside the alphabet is an error, padding is
// required. OpenSSL does the decoding; this only adds Go's strictness on top.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix {

StatusOr<std::string> DecodeStdBase64(std::string_view encoded);
std::string EncodeStdBase64(std::string_view raw);

}  // namespace hotfix
