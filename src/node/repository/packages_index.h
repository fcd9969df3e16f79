// A Debian Packages index (docs/DOWNLOAD-HOTFIX.md, "The repository fast path"),
// read as a stream: the index can be 128 MiB, and only the one stanza that names the hotfix
// package is ever kept.
#pragma once

#include <cstddef>
#include <istream>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix::node::repository {

// A longer line is kDataLoss: the index was authenticated by its size and SHA-256, so a line
// no Packages file has is a corrupt index, not a configuration to fall back from.
inline constexpr size_t kMaxPackagesLineBytes = 4 << 20;

struct DebPackageQuery {
  std::string package;       // "aks-node-controller"
  std::string version;       // "202608.21.1-ubuntu22.04u1"
  std::string architecture;  // "amd64"
};

struct DebStanza {
  std::string filename;  // Filename:, as the stanza has it (empty if absent)
  std::string sha256;    // SHA256:, as the stanza has it (empty if absent; any case)
  // The stanza's Package, Version and Architecture (equal to the query's), for messages.
  std::string package;
  std::string version;
  std::string architecture;
};

// The first stanza whose Package, Version and Architecture equal the query's exactly; nullopt
// when none does. Stanzas are "Key: value" lines (field names compared case-insensitively, as
// deb822 says; a repeated field keeps its first value, as apt's reader does) ended by a blank
// line or the end; continuation lines are ignored; CRLF is accepted. A line over
// kMaxPackagesLineBytes (without its "\n") is kDataLoss; a read error kIoError. Reads in
// 64 KiB blocks and stops at the match.
StatusOr<std::optional<DebStanza>> FindPackageStanza(std::istream& in,
                                                     const DebPackageQuery& query);

// The matching stanza's checks: Filename equals expected_filename ("Packages stanza for <p>
// <v> <a> has Filename \"...\", want \"...\"") and SHA256 is 64 hex digits ("... has no valid
// SHA256"); both kDataLoss.
Status CheckDebStanza(const DebStanza& stanza, std::string_view expected_filename);

}  // namespace hotfix::node::repository
