#include "service/store/component_file.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/file_util.h"
#include "common/json_error.h"
#include "common/openssl.h"
#include "common/text.h"
#include "service/rollout/json_message.h"

namespace hotfix::service {
namespace {

using json = nlohmann::json;

constexpr std::string_view kAksNodeController = "aksNodeController";
constexpr std::string_view kJsonSuffix = ".json";

// Parses text, refusing duplicate object keys: nlohmann keeps the last, other parsers the
// first, so a node could act on a value that was never validated.
Status ParseJson(std::string_view text, json* out) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto on_event = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == json::parse_event_t::object_end) open_objects.pop_back();
    if (event == json::parse_event_t::key && duplicate.empty() &&
        !open_objects.back().insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  try {
    *out = json::parse(text.begin(), text.end(), on_event);
  } catch (const json::exception& e) {
    return Status::InvalidArgument("invalid JSON: " + JsonErrorText(e));
  }
  if (!duplicate.empty()) return Status::InvalidArgument("duplicate key " + Quote(duplicate));
  return Status::Ok();
}

// The hotfixes shape: `hotfixes` (required unless there are rollouts) and `rollouts`.
Status ParseHotfixShape(const json& root, ComponentConfig* out) {
  for (const auto& [key, value] : root.items()) {
    if (key != "hotfixes" && key != "rollouts") {
      return Status::InvalidArgument("top-level key " + Quote(key) +
                                     " is not allowed (only \"hotfixes\" and \"rollouts\")");
    }
  }
  auto rollouts = root.find("rollouts");
  auto hotfixes = root.find("hotfixes");
  if (hotfixes == root.end() && rollouts == root.end()) {
    return Status::InvalidArgument("missing \"hotfixes\"");
  }
  out->hotfixes.emplace();
  if (hotfixes != root.end()) {
    auto parsed = ParseHotfixMap(*hotfixes, "hotfixes");
    if (!parsed.ok()) return parsed.status();
    out->hotfixes = std::move(parsed).value();
  }
  out->hotfixes_json = ServedHotfixesJson(*out->hotfixes);
  if (rollouts != root.end()) {
    auto parsed = ParseRollouts(*rollouts);
    if (!parsed.ok()) return parsed.status();
    out->has_rollouts = true;
    out->rollouts = std::move(parsed).value();
  }
  return Status::Ok();
}

StatusOr<ComponentConfig> CheckComponentConfig(std::string_view component, std::string_view text) {
  json root;
  Status st = ParseJson(text, &root);
  if (!st.ok()) return st;
  if (!root.is_object()) {
    return Status::InvalidArgument(std::string("top level is ") + TypeName(root) +
                                   ", not an object");
  }
  ComponentConfig config;
  config.text = std::string(text);
  if (component == kAksNodeController || root.contains("rollouts")) {
    st = ParseHotfixShape(root, &config);
    if (!st.ok()) return st;
  }
  return config;
}

// The component a folder entry holds: nullopt for entries that are not ours at all.
std::optional<std::string> ComponentOfEntry(std::string_view name) {
  if (name.empty() || name[0] == '.') return std::nullopt;  // hidden, ..data, temp files
  if (name.size() <= kJsonSuffix.size() || !name.ends_with(kJsonSuffix)) return std::nullopt;
  return std::string(name.substr(0, name.size() - kJsonSuffix.size()));
}

// Reads and validates one `<component>.json`, following symlinks. NotFound: the file vanished
// since readdir (a ConfigMap key removed, its symlink left dangling for a moment), so it is
// gone, not refused; any other error refuses it.
StatusOr<ComponentConfig> LoadEntry(const std::string& dir, size_t max_file_bytes,
                                    const std::string& file, const std::string& component) {
  const std::string path = dir + "/" + file;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": gone");
    return Status::FromErrno("stat " + path, errno);
  }
  // A FIFO or device would block or stream forever on the watcher thread.
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + ": not a regular file");
  StatusOr<std::string> read = ReadFileToString(path, max_file_bytes);
  if (!read.ok()) return read.status();
  return ParseComponentConfig(component, *read);
}

void ScanEntry(const std::string& dir, size_t max_file_bytes, const std::string& file,
               FolderLoad* scan) {
  std::optional<std::string> component = ComponentOfEntry(file);
  if (!component) return;
  if (!IsValidComponentName(*component)) {
    scan->rejected[file] = file + ": " + Quote(*component) + " is not a valid component name";
    return;
  }
  StatusOr<ComponentConfig> config = LoadEntry(dir, max_file_bytes, file, *component);
  if (config.ok()) {
    scan->valid[*component] = std::make_shared<const ComponentConfig>(std::move(config).value());
  } else if (!config.status().IsNotFound()) {
    scan->refused.insert(*component);
    scan->rejected[file] = config.status().message();
  }
}

}  // namespace

bool IsValidComponentName(std::string_view name) {
  return IsAsciiName(name, 64, /*digit_first=*/false);
}

StatusOr<ComponentConfig> ParseComponentConfig(std::string_view component,
                                               std::string_view json_text) {
  StatusOr<ComponentConfig> config = CheckComponentConfig(component, json_text);
  if (!config.ok()) {
    return config.status().Annotate(std::string(component) + std::string(kJsonSuffix));
  }
  config->digest = ossl::Sha256Hex(json_text).substr(0, kFileDigestHexDigits);
  return config;
}

// Lists and loads the folder. Any listing error fails the whole scan: a partial listing
// would read as "those components were removed".
StatusOr<FolderLoad> LoadComponentFolder(const std::string& dir_path, size_t max_file_bytes) {
  if (dir_path.empty()) return Status::InvalidArgument("component folder not set");
  DIR* dir = ::opendir(dir_path.c_str());
  if (dir == nullptr) return Status::FromErrno("reading component folder " + dir_path, errno);
  std::vector<std::string> names;
  for (;;) {
    errno = 0;  // readdir reports an error only through errno; the allocations may touch it
    struct dirent* entry = ::readdir(dir);
    if (entry == nullptr) break;
    names.emplace_back(entry->d_name);
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0) return Status::FromErrno("reading component folder " + dir_path, err);

  FolderLoad scan;
  for (const std::string& name : names) ScanEntry(dir_path, max_file_bytes, name, &scan);
  return scan;
}

Status ValidateComponentConfig(std::string_view component, std::string_view json_text) {
  return ParseComponentConfig(component, json_text).status();
}

std::string ComponentConfig::ServedTo(const RolloutNode& node, RolloutTime now,
                                      std::vector<size_t>* applied) const {
  if (!has_rollouts) return text;
  RolloutAnswer answer = AnswerFor(*hotfixes, rollouts, node, now);
  if (applied != nullptr) *applied = std::move(answer.applied);
  return ServedHotfixesJson(answer.hotfixes);
}

}  // namespace hotfix::service
