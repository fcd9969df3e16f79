#include "common/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <functional>

#include "common/unique_fd.h"

namespace hotfix {
namespace {

Status WriteAllFd(int fd, std::string_view data, const std::string& what) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("writing " + what, errno);
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status FsyncDir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return Status::FromErrno("opening folder " + dir, errno);
  if (::fsync(fd.get()) != 0) return Status::FromErrno("fsync folder " + dir, errno);
  return Status::Ok();
}

}  // namespace

std::string DirName(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

FileStamp StampOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {};
  return {st.st_ino, st.st_size, st.st_mtim};
}

StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO that has no writer would otherwise wait forever, and these
  // reads run on the boot path. It changes nothing for the regular files read below.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return Status::FromErrno("open " + path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("stat " + path, errno);
  if (S_ISDIR(st.st_mode)) return Status::FromErrno("read " + path, EISDIR);
  // A FIFO, socket or device can block a read, or never end one.
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument("read " + path + ": not a regular file");
  }
  std::string out;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("read " + path, errno);
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return Status::InvalidArgument("read " + path + ": file is larger than " +
                                     std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

StatusOr<std::string> ReadFlagFile(const char* flag, const std::string& path) {
  constexpr size_t kMaxFlagFileBytes = 1 << 20;  // a certificate bundle is tens of KiB
  if (path.empty()) return Status::InvalidArgument(std::string(flag) + " is required");
  StatusOr<std::string> text = ReadFileToString(path, kMaxFlagFileBytes);
  if (!text.ok()) return text.status().Annotate(flag);
  return text;
}

std::optional<mode_t> ExistingMode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st.st_mode & 07777;
}

namespace {

// The temp file, filled by `fill`, then owner, mode, fsync, rename and the folder's fsync: what
// WriteFileAtomically and CopyFileAtomically share.
Status ReplaceAtomically(const std::string& path, const AtomicWriteOptions& options,
                         const std::function<Status(int fd, const std::string& tmp)>& fill) {
  const std::string dir = DirName(path);
  std::string tmp = dir + "/" + options.temp_prefix + "XXXXXX";  // mkostemp fills in the X's
  UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (fd.get() < 0) return Status::FromErrno("creating temp file in " + dir, errno);

  Status st = fill(fd.get(), tmp);
  if (st.ok() && (options.uid || options.gid) &&
      ::fchown(fd.get(), options.uid.value_or(static_cast<uid_t>(-1)),
               options.gid.value_or(static_cast<gid_t>(-1))) != 0) {
    st = Status::FromErrno("chown " + tmp, errno);
  }
  // After fchown, which clears set-id bits.
  if (st.ok() && ::fchmod(fd.get(), options.mode) != 0)
    st = Status::FromErrno("chmod " + tmp, errno);
  if (st.ok() && options.durable && ::fsync(fd.get()) != 0) {
    st = Status::FromErrno("fsync " + tmp, errno);
  }
  if (fd.Close() != 0 && st.ok()) st = Status::FromErrno("close " + tmp, errno);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = Status::FromErrno("rename " + tmp + " to " + path, errno);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  // The rename is only durable once the folder entry is on disk.
  return options.durable ? FsyncDir(dir) : Status::Ok();
}

}  // namespace

Status WriteFileAtomically(const std::string& path, std::string_view data,
                           const AtomicWriteOptions& options) {
  return ReplaceAtomically(
      path, options, [data](int fd, const std::string& tmp) { return WriteAllFd(fd, data, tmp); });
}

Status CopyFileAtomically(const std::string& source, const std::string& path, size_t max_bytes,
                          const AtomicWriteOptions& options) {
  UniqueFd in(::open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!in.valid()) return Status::FromErrno("reading " + source, errno);
  struct stat st {};
  if (::fstat(in.get(), &st) != 0) return Status::FromErrno("reading " + source, errno);
  if (!S_ISREG(st.st_mode))
    return Status::InvalidArgument("reading " + source + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return Status::InvalidArgument("reading " + source + ": larger than " +
                                   std::to_string(max_bytes) + " bytes");
  }
  return ReplaceAtomically(path, options, [&](int fd, const std::string& tmp) {
    char buf[64 * 1024];
    size_t copied = 0;
    for (;;) {
      ssize_t n = ::read(in.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno("reading " + source, errno);
      if (n == 0) return Status::Ok();
      copied += static_cast<size_t>(n);
      if (copied > max_bytes) {
        return Status::InvalidArgument("reading " + source + ": larger than " +
                                       std::to_string(max_bytes) + " bytes");
      }
      if (Status w = WriteAllFd(fd, std::string_view(buf, static_cast<size_t>(n)), tmp); !w.ok()) {
        return w;
      }
    }
  });
}

Status MakeFolders(const std::string& dir, mode_t mode, std::string_view what) {
  const std::string label = "creating " + std::string(what) + " ";
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string prefix = dir.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return Status::FromErrno(label + prefix, errno);
    }
    if (slash == std::string::npos) break;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(label + dir, errno);
  if (!S_ISDIR(st.st_mode)) return Status::FromErrno(label + dir, ENOTDIR);
  return Status::Ok();
}

int RemoveStaleTempFiles(const std::string& dir, const std::string& prefix) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name(e->d_name);
    if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) continue;
    std::string full = dir + "/" + std::string(name);
    struct stat st {};
    if (::lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (::unlink(full.c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace hotfix
