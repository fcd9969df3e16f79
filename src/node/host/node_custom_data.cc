#include "node/host/node_custom_data.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>
#include <zlib.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <memory>

#include "common/base64.h"
#include "common/file_lock.h"
#include "common/file_util.h"

namespace hotfix::node {
namespace {

// Custom data is at most 64 KiB on Azure; the caps only stop a corrupt file or a gzip bomb
// from exhausting memory on the node.
constexpr size_t kMaxCustomDataBytes = 16u << 20;
constexpr size_t kMaxDecodedFileBytes = 64u << 20;
constexpr char kBinaryTag[] = "tag:yaml.org,2002:binary";
// Other writers (check-hotfix, the binary staging) hold a folder lock for milliseconds.
constexpr auto kFolderLockWait = std::chrono::seconds(10);

const char* KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "!!map";
    case YAML::NodeType::Sequence:
      return "!!seq";
    default:
      return "!!str";
  }
}

// yaml.v3 decodes any scalar into a string field by its text, and null into "".
StatusOr<std::string> ScalarField(const YAML::Node& entry, const char* key, size_t index) {
  const YAML::Node field = entry[key];
  if (!field.IsDefined() || field.IsNull()) return std::string();
  const std::string where = "write_files[" + std::to_string(index) + "]." + key;
  if (!field.IsScalar()) {
    return Status::InvalidArgument(where + ": cannot unmarshal " + KindName(field) +
                                   " into string");
  }
  if (field.Tag() == kBinaryTag || field.Tag() == "!!binary") {
    StatusOr<std::string> decoded = DecodeStdBase64(field.Scalar());
    if (!decoded.ok()) return decoded.status().Annotate(where + ": !!binary");
    return *decoded;
  }
  return field.Scalar();
}

StatusOr<std::string> Gunzip(std::string_view compressed) {
  z_stream zs{};
  // 16 + MAX_WBITS: a gzip header, not a zlib one.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return Status::Internal("inflateInit2 failed");
  const std::unique_ptr<z_stream, decltype(&inflateEnd)> inflate_end(&zs, &inflateEnd);
  std::string out;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs.avail_in = static_cast<uInt>(compressed.size());
  char buf[16384];
  for (;;) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    const int ret = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
    if (out.size() > kMaxDecodedFileBytes) {
      return Status::InvalidArgument("gzip content is larger than " +
                                     std::to_string(kMaxDecodedFileBytes) + " bytes");
    }
    if (ret == Z_STREAM_END && zs.avail_in > 0) {
      // Concatenated members are one stream to Go's gzip.Reader.
      inflateReset(&zs);
      continue;
    }
    if (ret == Z_STREAM_END) return out;
    if (ret == Z_BUF_ERROR && zs.avail_in == 0) {
      return Status::InvalidArgument("gzip content: unexpected EOF");
    }
    if (ret != Z_OK) {
      return Status::InvalidArgument(std::string("gzip content: ") +
                                     (zs.msg != nullptr ? zs.msg : "invalid data"));
    }
  }
}

// strconv.ParseUint(s, 8, 32).
StatusOr<uint32_t> ParseOctal(std::string_view s) {
  uint32_t value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, 8);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
    return Status::InvalidArgument("invalid permissions \"" + std::string(s) +
                                   "\": not a 32-bit octal number");
  }
  return value;
}

mode_t CurrentUmask() {
  mode_t mask = ::umask(0);
  ::umask(mask);
  return mask;
}

// os.WriteFile follows a symlink to its target; a rename would replace the link instead.
std::string FollowSymlink(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (resolved == nullptr) return path;
  std::string target(resolved);
  std::free(resolved);
  return target;
}

Status WriteOne(const FileToWrite& file) {
  const std::string path = FollowSymlink(file.path);
  const std::string dir = DirName(path);
  if (Status st = MakeFolders(dir, 0755, "folder"); !st.ok()) return st;
  StatusOr<FileLock> lock = FileLock::OnFolder(dir, Deadline::After(kFolderLockWait));
  if (!lock.ok()) return lock.status().Annotate("writing " + path);
  // Under the lock a temp file can only be a killed run's: nothing else would ever remove it.
  RemoveStaleTempFiles(dir, kWriteFilesTempPrefix);
  AtomicWriteOptions options;
  options.temp_prefix = kWriteFilesTempPrefix;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::IoError("writing " + path + ": is a directory");
    options.mode = st.st_mode & 07777;
    options.uid = st.st_uid;
    options.gid = st.st_gid;
  } else {
    options.mode = file.mode & ~CurrentUmask();
  }
  return WriteFileAtomically(path, file.data, options).Annotate("writing " + path);
}

}  // namespace

StatusOr<std::vector<WriteFileEntry>> ParseNodeCustomData(std::string_view yaml) {
  const auto fail = [](const std::string& what) {
    return Status::InvalidArgument("parsing node custom data: " + what);
  };
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return fail(e.what());
  }
  std::vector<WriteFileEntry> entries;
  if (!doc.IsDefined() || doc.IsNull()) return entries;
  if (!doc.IsMap()) return fail(std::string("cannot unmarshal ") + KindName(doc) + " into a map");
  try {
    const YAML::Node files = doc["write_files"];
    if (!files.IsDefined() || files.IsNull()) return entries;
    if (!files.IsSequence()) {
      return fail(std::string("write_files: cannot unmarshal ") + KindName(files) + " into a list");
    }
    for (size_t i = 0; i < files.size(); ++i) {
      const YAML::Node item = files[i];
      if (item.IsNull()) {
        entries.emplace_back();
        continue;
      }
      if (!item.IsMap()) {
        return fail("write_files[" + std::to_string(i) + "]: cannot unmarshal " + KindName(item) +
                    " into a write_files entry");
      }
      WriteFileEntry entry;
      std::pair<const char*, std::string*> fields[] = {{"path", &entry.path},
                                                       {"permissions", &entry.permissions},
                                                       {"encoding", &entry.encoding},
                                                       {"owner", &entry.owner},
                                                       {"content", &entry.content}};
      for (auto& [key, out] : fields) {
        StatusOr<std::string> value = ScalarField(item, key, i);
        if (!value.ok()) return fail(value.status().message());
        *out = std::move(value).value();
      }
      entries.push_back(std::move(entry));
    }
  } catch (const YAML::Exception& e) {
    return fail(e.what());
  }
  return entries;
}

StatusOr<FileToWrite> PrepareWriteFile(const WriteFileEntry& entry, size_t index) {
  const std::string where = "write_files[" + std::to_string(index) + "]" +
                            (entry.path.empty() ? "" : " (" + entry.path + ")");
  const auto fail = [&](const std::string& what) {
    return Status::InvalidArgument(where + ": " + what);
  };
  if (entry.path.empty()) return fail("path is required");
  if (!entry.owner.empty() && entry.owner != "root") {
    return fail("unsupported owner \"" + entry.owner + "\" (only root)");
  }
  FileToWrite file;
  file.path = entry.path;
  if (!entry.permissions.empty()) {
    StatusOr<uint32_t> perm = ParseOctal(entry.permissions);
    if (!perm.ok()) return fail(perm.status().message());
    // Go's os.FileMode keeps only the permission bits of a Unix mode number.
    file.mode = static_cast<mode_t>(*perm & 0777);
  }
  if (entry.encoding.empty()) {
    file.data = entry.content;
  } else if (entry.encoding == "gzip") {
    StatusOr<std::string> raw = Gunzip(entry.content);
    if (!raw.ok()) return fail(raw.status().message());
    file.data = std::move(raw).value();
  } else if (entry.encoding == "base64") {
    StatusOr<std::string> raw = DecodeStdBase64(entry.content);
    if (!raw.ok()) return fail("base64 content: " + raw.status().message());
    file.data = std::move(raw).value();
  } else {
    return fail("unsupported encoding \"" + entry.encoding + "\" (\"\", gzip or base64)");
  }
  return file;
}

StatusOr<ApplyNodeCustomDataResult> ApplyNodeCustomData(const std::string& path, bool dry_run,
                                                        Logger& log) {
  ApplyNodeCustomDataResult result;
  StatusOr<std::string> yaml = ReadFileToString(path, kMaxCustomDataBytes);
  if (!yaml.ok()) {
    if (yaml.status().IsNotFound()) {
      log.Info("no node custom data, nothing to apply", {{"path", path}});
      return result;
    }
    return yaml.status().Annotate("reading node custom data");
  }
  StatusOr<std::vector<WriteFileEntry>> entries = ParseNodeCustomData(*yaml);
  if (!entries.ok()) return entries.status().Annotate(path);
  std::vector<FileToWrite> files;
  for (size_t i = 0; i < entries->size(); ++i) {
    StatusOr<FileToWrite> file = PrepareWriteFile((*entries)[i], i);
    if (!file.ok()) return file.status().Annotate(path);
    files.push_back(std::move(file).value());
  }
  for (const FileToWrite& file : files) {
    if (!dry_run) {
      if (Status st = WriteOne(file); !st.ok()) return st;
      log.Info("wrote node custom data file", {{"path", file.path}});
    }
    result.paths.push_back(file.path);
  }
  return result;
}

}  // namespace hotfix::node
