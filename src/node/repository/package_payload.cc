#include "node/repository/package_payload.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "common/deadline.h"
#include "common/unique_fd.h"

namespace hotfix::node::repository {
namespace {

constexpr int kCancelPollMs = 50;

// What libarchive reads: the tool's stdout, under the tool's deadline and the cancel flag.
struct PipeSource {
  int fd = -1;
  Deadline deadline = Deadline::Infinite();
  const std::atomic<bool>* cancelled = nullptr;
  Status error;  // why the read stopped early, for the message
  char buffer[64 * 1024];
};

la_ssize_t ReadPipe(struct archive* a, void* client, const void** out) {
  auto* source = static_cast<PipeSource*>(client);
  *out = source->buffer;
  for (;;) {
    if (source->cancelled != nullptr && source->cancelled->load()) {
      source->error = Status::Cancelled("package extraction cancelled");
    } else if (source->deadline.expired()) {
      source->error = Status::Unavailable("package extraction timed out");
    }
    if (!source->error.ok()) {
      archive_set_error(a, EINTR, "%s", source->error.message().c_str());
      return -1;
    }
    ssize_t n = ::read(source->fd, source->buffer, sizeof source->buffer);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      archive_set_error(a, errno, "reading the payload stream");
      return -1;
    }
    pollfd pfd{source->fd, POLLIN, 0};
    ::poll(&pfd, 1, std::min(source->deadline.PollTimeoutMs(), kCancelPollMs));
  }
}

using ArchivePtr = std::unique_ptr<struct archive, decltype(&archive_read_free)>;

// The member copied into dest, bounded by the size its header declares.
Status CopyMember(struct archive* a, struct archive_entry* entry, const std::string& dest) {
  const int64_t size = archive_entry_size(entry);
  if (!archive_entry_size_is_set(entry) || size < 0 ||
      static_cast<uint64_t>(size) > kMaxPayloadBinaryBytes) {
    return Status::DataLoss(std::string("package member ") + kPayloadBinary + " is larger than " +
                            std::to_string(kMaxPayloadBinaryBytes) + " bytes");
  }
  ::unlink(dest.c_str());
  UniqueFd out(::open(dest.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0755));
  if (!out.valid()) return Status::FromErrno("creating " + dest, errno);
  if (::fchmod(out.get(), 0755) != 0) return Status::FromErrno("chmod " + dest, errno);
  int64_t copied = 0;
  char buf[64 * 1024];
  while (copied < size) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(sizeof buf, size - copied));
    la_ssize_t n = archive_read_data(a, buf, want);
    if (n < 0)
      return Status::Unavailable(std::string("reading ") + kPayloadBinary + ": " +
                                 archive_error_string(a));
    if (n == 0) break;
    for (la_ssize_t done = 0; done < n;) {
      ssize_t w = ::write(out.get(), buf + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Status::FromErrno("writing " + dest, errno);
      done += w;
    }
    copied += n;
  }
  if (copied != size) {
    return Status::Unavailable(std::string("short read of ") + kPayloadBinary + ": " +
                               std::to_string(copied) + " of " + std::to_string(size) + " bytes");
  }
  if (out.Close() != 0) return Status::FromErrno("closing " + dest, errno);
  return Status::Ok();
}

// Finds the member in the archive libarchive reads from source. Ok once copied; NotFound when
// the archive ended without it.
Status FindAndCopy(PipeSource& source, bool tar, const std::string& dest) {
  ArchivePtr a(archive_read_new(), archive_read_free);
  if (!a) return Status::Internal("archive_read_new failed");
  // Only the one format the tool writes: no compression filters, nothing guessed.
  if (tar) {
    archive_read_support_format_tar(a.get());
  } else {
    archive_read_support_format_cpio(a.get());
  }
  if (archive_read_open(a.get(), &source, nullptr, ReadPipe, nullptr) != ARCHIVE_OK) {
    return source.error.ok() ? Status::Unavailable(std::string("reading the payload: ") +
                                                   archive_error_string(a.get()))
                             : source.error;
  }
  struct archive_entry* entry = nullptr;
  for (;;) {
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) return Status::NotFound("not in the payload");
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      if (!source.error.ok()) return source.error;
      return Status::Unavailable(std::string("reading the payload: ") +
                                 archive_error_string(a.get()));
    }
    std::string_view name = archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "";
    if (name.substr(0, 2) == "./") name.remove_prefix(2);
    if (name != kPayloadBinary) continue;  // libarchive skips its data at the next header
    if (archive_entry_filetype(entry) != AE_IFREG || archive_entry_hardlink(entry) != nullptr) {
      return Status::DataLoss(std::string("package member ") + kPayloadBinary +
                              " is not a regular file");
    }
    // An empty member is no binary: the reference falls back for rpm ("does not contain"), and
    // for deb too here rather than stage an empty executable.
    if (archive_entry_size_is_set(entry) && archive_entry_size(entry) == 0) {
      return Status::NotFound("empty in the payload");
    }
    Status copied = CopyMember(a.get(), entry, dest);
    if (!copied.ok() && !source.error.ok()) return source.error;
    return copied;
  }
}

Status Extract(const std::vector<std::string>& argv, bool tar, const char* format,
               const std::string& dest, const ToolContext& context) {
  StatusOr<Child> tool = StartTool(argv);
  if (!tool.ok()) return tool.status();
  PipeSource source;
  source.fd = tool->out_fd();
  source.deadline = Deadline::After(context.timeout);
  source.cancelled = context.cancelled;
  Status found = FindAndCopy(source, tar, dest);
  // Copied, or refused: the rest of the payload is not needed.
  if (found.ok() || found.code() == Status::Code::kDataLoss) tool->Kill();
  tool->CloseOut();
  const ChildExit exit = tool->Wait(source.deadline, context.cancelled, nullptr, nullptr, 0);
  if (found.ok() || found.code() == Status::Code::kDataLoss ||
      found.code() == Status::Code::kCancelled) {
    if (!found.ok()) ::unlink(dest.c_str());
    return found;
  }
  ::unlink(dest.c_str());
  // The tool's failure explains a payload that ended early or never began.
  if (Status ran = ToolStatus(argv[0], exit, "", context); !ran.ok()) return ran;
  if (found.IsNotFound()) {
    return Status::Unavailable(std::string(format) + " package does not contain " + kPayloadBinary);
  }
  return found;
}

}  // namespace

Status ExtractDebBinary(const std::string& package, const std::string& dest,
                        const ToolContext& context) {
  return Extract({"dpkg-deb", "--fsys-tarfile", package}, /*tar=*/true, "deb", dest, context);
}

Status ExtractRpmBinary(const std::string& package, const std::string& dest,
                        const ToolContext& context) {
  return Extract({"rpm2cpio", package}, /*tar=*/false, "rpm", dest, context);
}

Status CheckRpmSignature(const std::string& package, const std::string& rpm_dbpath,
                         const ToolContext& context) {
  std::vector<std::string> argv = {"rpmkeys", "--define", "_pkgverify_level signature"};
  if (!rpm_dbpath.empty()) argv.insert(argv.end(), {"--dbpath", rpm_dbpath});
  argv.insert(argv.end(), {"--checksig", "--verbose", package});
  StatusOr<ToolRun> run = RunTool(argv, context);
  if (!run.ok()) return run.status();
  if (run->exit.success()) return Status::Ok();
  Status failed = ToolStatus("rpmkeys", run->exit, run->output, context);
  if (failed.code() == Status::Code::kCancelled) return failed;
  return Status::DataLoss("RPM package signature verification failed: " + failed.message());
}

}  // namespace hotfix::node::repository
