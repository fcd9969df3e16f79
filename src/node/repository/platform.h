// Which repository fast path a node takes, from /etc/os-release and the architecture this
// binary was built for (AgentBaker: aks-node-controller/repository_hotfix.go;
// docs/DOWNLOAD-HOTFIX.md, "The repository fast path"): Ubuntu reads its apt source, Azure Linux 3
// its yum repository; anything else is unsupported and falls back to the package manager.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix::node::repository {

struct OsRelease {
  std::string id;          // lower-cased, '"' stripped
  std::string variant_id;  // lower-cased, '"' stripped
  std::string version_id;  // '"' stripped
};

// The first ID=, VARIANT_ID= and VERSION_ID= lines of os-release text (each trimmed; a key
// may be missing: its value is then empty).
OsRelease ParseOsRelease(std::string_view text);

// Reads and parses os-release (at most 64 KiB). A read error is kFailedPrecondition:
// without the OS the fast path cannot choose, and the package manager path decides on its own.
StatusOr<OsRelease> ReadOsRelease(const std::string& path);

enum class PackageFormat { kDeb, kRpm };
// "deb", "rpm"
const char* PackageFormatName(PackageFormat format);

struct Platform {
  PackageFormat format = PackageFormat::kDeb;
  std::string deb_arch;  // "amd64" or "arm64": Go's GOARCH, as the reference uses it
  // deb: VERSION_ID ("22.04"). rpm: "azl3".
  std::string distro_tag;
  // rpm only: the rpm architecture ("x86_64", "aarch64") and $releasever (VERSION_ID cut to
  // major.minor: "3.0.20260304" -> "3.0").
  std::string rpm_arch;
  std::string releasever;
};

// The architecture this binary runs as, in Go's GOARCH words ("amd64", "arm64"; another
// build's name otherwise, which no fast path supports).
std::string_view BuildArch();

// The fast path for this OS and architecture, or kFailedPrecondition naming why not:
// "unsupported repository platform <id>" (mariner included), "repository fast path is not
// supported on image-based OS <id> variant <variant>", "... has no VERSION_ID", "unsupported
// architecture <arch>", "unsupported Azure Linux version <v>".
StatusOr<Platform> ChoosePlatform(const OsRelease& os, std::string_view arch);

// The deb package's version and pool path for a hotfix version: "<hotfix>-ubuntu<VERSION_ID>u1"
// and "pool/main/a/aks-node-controller/aks-node-controller_<version>_<arch>.deb".
std::string DebPackageVersion(const Platform& platform, std::string_view hotfix);
std::string DebPoolPath(const Platform& platform, std::string_view hotfix);

// The rpm release ("1.azl3") and its path:
// "Packages/a/aks-node-controller-<hotfix>-1.azl3.<arch>.rpm".
std::string RpmRelease(const Platform& platform);
std::string RpmPackagePath(const Platform& platform, std::string_view hotfix);

}  // namespace hotfix::node::repository
