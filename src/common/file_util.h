// Durable file primitives. Every file a node depends on is replaced atomically: readers see
// the old content or the new, never a partial one, even across a power cut.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix {

// Reads a whole regular file (symlinks followed), refusing larger files than max_bytes and anything
// else (a FIFO, socket or device: kInvalidArgument) without blocking. ENOENT gives kNotFound.
StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes);

// Reads the file a flag names (PEM and the like, at most 1 MiB): "<flag> is required" when
// the path is empty, and the flag named in every error.
StatusOr<std::string> ReadFlagFile(const char* flag, const std::string& path);

// What says a file changed without reading it (symlinks followed): a rename over it changes
// the inode, an edit in place the size or the modification time. All zero when stat fails.
struct FileStamp {
  ino_t inode = 0;
  off_t size = 0;
  timespec mtime{};
  bool operator==(const FileStamp& o) const {
    return inode == o.inode && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec;
  }
};
FileStamp StampOf(const std::string& path);

struct AtomicWriteOptions {
  // Permission bits of the new file, applied with fchmod so umask does not interfere.
  mode_t mode = 0644;
  // Temp files are "<dir>/<temp_prefix><random>"; RemoveStaleTempFiles() recognises them.
  std::string temp_prefix = ".tmp-";
  // fsync the file before and the folder after the rename, so that a power cut leaves the old
  // or the new content. false keeps the all-or-nothing rename without the flushes, for files
  // whose loss is harmless (telemetry): each fsync can cost milliseconds on a busy disk.
  bool durable = true;
  // Owner of the new file (fchown), e.g. to keep an existing file's owner across the rename.
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
};

// Writes data to a temp file in path's folder, fsyncs it (if durable), renames it over path and
// fsyncs the folder (if durable). On any failure the temp file is removed and path is untouched.
Status WriteFileAtomically(const std::string& path, std::string_view data,
                           const AtomicWriteOptions& options);

// The same for a copy of the regular file `source` (symlinks followed), streamed through a fixed
// buffer so that a large file is never held in memory. A source larger than max_bytes, or one
// that is not a regular file (nothing blocks on a FIFO), is InvalidArgument "reading <source>:
// ..."; its read errors read "reading <source>: ...".
Status CopyFileAtomically(const std::string& source, const std::string& path, size_t max_bytes,
                          const AtomicWriteOptions& options);

// Permission bits of an existing file, nullopt if it does not exist (other errors too:
// the caller falls back to its default mode).
std::optional<mode_t> ExistingMode(const std::string& path);

// Removes "<dir>/<prefix>*" regular files left by a run that was killed mid-write. Call it
// only while holding the folder's lock (FolderLock). Returns how many were removed.
int RemoveStaleTempFiles(const std::string& dir, const std::string& prefix);

// os.MkdirAll(dir, mode): every missing component is created (the umask applies, as in Go);
// an existing non-folder is an error "creating <what> <component>: ...".
Status MakeFolders(const std::string& dir, mode_t mode, std::string_view what = "folder");

// The folder part of a path ("." for a bare name).
std::string DirName(const std::string& path);

}  // namespace hotfix
