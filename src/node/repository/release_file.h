// A Debian repository's InRelease (docs/DOWNLOAD-HOTFIX.md, "The repository fast path"): the
// clear-signed file's shape, checked before gpgv, and the SHA256 entry of the index the node
// fetches, read from the text gpgv verified.
//
// Both failures are kDataLoss: InRelease is what authenticates everything after it, so a file
// that does not read as one signed message, or a signed one without the entry, is terminal.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix::node::repository {

// Exactly one clear-signed message and nothing else: "-----BEGIN PGP SIGNED MESSAGE-----" at
// byte 0, "Hash: ..." armor headers, a blank line, the dash-escaped text (a line starting with
// '-' must start with "- "), "-----BEGIN PGP SIGNATURE-----", the signature's lines,
// "-----END PGP SIGNATURE-----", then only whitespace. CRLF is accepted. Otherwise kDataLoss
// "malformed clear-signed InRelease: <why>". gpgv would verify one message of several, or
// ignore text around it; refusing those shapes keeps the text we read the text it verified.
Status CheckClearsignedLayout(std::string_view file);

struct ReleaseEntry {
  std::string path;
  uint64_t size = 0;
  std::string sha256;  // 64 lower-case hex digits
};

// The entry for path in the SHA256 section of signed_text (gpgv --output's bytes, already
// dash-unescaped): the indented "hash size path" lines after a line equal to "SHA256:", until
// the next line that is not indented (a later "SHA256:" line starts another section). Fields
// are separated by runs of spaces and tabs; CRLF is accepted. The first line of exactly three
// fields whose path equals path decides: its size must be decimal digits that fit uint64 and
// its hash 64 hex digits of either case. Otherwise, or without such a line, kDataLoss
// "InRelease has no SHA256 entry for <path>".
StatusOr<ReleaseEntry> FindReleaseSha256(std::string_view signed_text, std::string_view path);

}  // namespace hotfix::node::repository
