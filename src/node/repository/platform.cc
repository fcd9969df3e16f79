#include "node/repository/platform.h"

#include "common/file_util.h"
#include "common/text.h"

namespace hotfix::node::repository {
namespace {

constexpr size_t kMaxOsReleaseBytes = 64 * 1024;
constexpr char kPackage[] = "aks-node-controller";

std::string_view StripQuotes(std::string_view s) {
  while (!s.empty() && s.front() == '"') s.remove_prefix(1);
  while (!s.empty() && s.back() == '"') s.remove_suffix(1);
  return s;
}

// "3.0.20260304" -> "3.0"; "3" stays "3".
std::string MajorMinor(std::string_view version) {
  size_t first = version.find('.');
  if (first == std::string_view::npos) return std::string(version);
  size_t second = version.find('.', first + 1);
  return std::string(version.substr(0, second));
}

}  // namespace

OsRelease ParseOsRelease(std::string_view text) {
  OsRelease os;
  bool have_id = false, have_variant = false, have_version = false;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = TrimBlanks(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (!line.empty() && line.back() == '\r') line = TrimBlanks(line.substr(0, line.size() - 1));
    auto take = [&line](std::string_view key, bool* seen, std::string* value, bool lower) {
      if (*seen || line.substr(0, key.size()) != key) return;
      *seen = true;
      std::string_view v = StripQuotes(line.substr(key.size()));
      *value = lower ? AsciiLower(v) : std::string(v);
    };
    take("ID=", &have_id, &os.id, true);
    take("VARIANT_ID=", &have_variant, &os.variant_id, true);
    take("VERSION_ID=", &have_version, &os.version_id, false);
  }
  return os;
}

StatusOr<OsRelease> ReadOsRelease(const std::string& path) {
  StatusOr<std::string> text = ReadFileToString(path, kMaxOsReleaseBytes);
  if (!text.ok()) {
    return Status::FailedPrecondition(text.status().Annotate("reading " + path).message());
  }
  return ParseOsRelease(*text);
}

const char* PackageFormatName(PackageFormat format) {
  return format == PackageFormat::kDeb ? "deb" : "rpm";
}

std::string_view BuildArch() {
#if defined(__x86_64__)
  return "amd64";
#elif defined(__aarch64__)
  return "arm64";
#elif defined(__i386__)
  return "386";
#elif defined(__arm__)
  return "arm";
#else
  return "unknown";
#endif
}

StatusOr<Platform> ChoosePlatform(const OsRelease& os, std::string_view arch) {
  Platform platform;
  platform.deb_arch = std::string(arch);
  if (os.id == "ubuntu") {
    platform.format = PackageFormat::kDeb;
    if (os.version_id.empty()) {
      return Status::FailedPrecondition("repository fast path: os-release has no VERSION_ID");
    }
    if (arch != "amd64" && arch != "arm64") {
      return Status::FailedPrecondition("repository fast path: unsupported architecture " +
                                        std::string(arch));
    }
    platform.distro_tag = os.version_id;
    return platform;
  }
  if (os.id != "azurelinux") {
    return Status::FailedPrecondition("unsupported repository platform " +
                                      (os.id.empty() ? std::string("(no ID)") : os.id));
  }
  // Image-based Azure Linux (OS Guard, Azure Container Linux) has no package database to
  // update: AgentBaker refuses it here and in its package-manager path alike.
  if (os.variant_id == "osguard" || os.variant_id == "azurecontainerlinux") {
    return Status::FailedPrecondition("repository fast path is not supported on image-based OS " +
                                      os.id + " variant " + os.variant_id);
  }
  platform.format = PackageFormat::kRpm;
  std::string_view major = std::string_view(os.version_id).substr(0, os.version_id.find('.'));
  if (major != "3") {
    return Status::FailedPrecondition("repository fast path: unsupported Azure Linux version " +
                                      (os.version_id.empty() ? "(none)" : os.version_id));
  }
  if (arch == "amd64") {
    platform.rpm_arch = "x86_64";
  } else if (arch == "arm64") {
    platform.rpm_arch = "aarch64";
  } else {
    return Status::FailedPrecondition("repository fast path: unsupported architecture " +
                                      std::string(arch));
  }
  platform.distro_tag = "azl3";
  platform.releasever = MajorMinor(os.version_id);
  return platform;
}

std::string DebPackageVersion(const Platform& platform, std::string_view hotfix) {
  return std::string(hotfix) + "-ubuntu" + platform.distro_tag + "u1";
}

std::string DebPoolPath(const Platform& platform, std::string_view hotfix) {
  return std::string("pool/main/a/") + kPackage + "/" + kPackage + "_" +
         DebPackageVersion(platform, hotfix) + "_" + platform.deb_arch + ".deb";
}

std::string RpmRelease(const Platform& platform) { return "1." + platform.distro_tag; }

std::string RpmPackagePath(const Platform& platform, std::string_view hotfix) {
  return std::string("Packages/a/") + kPackage + "-" + std::string(hotfix) + "-" +
         RpmRelease(platform) + "." + platform.rpm_arch + ".rpm";
}

}  // namespace hotfix::node::repository
