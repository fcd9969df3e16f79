#include "node/repository/gunzip.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include "common/unique_fd.h"

namespace hotfix::node::repository {
namespace {

Status WriteAll(int fd, const char* data, size_t len, const std::string& path) {
  while (len > 0) {
    ssize_t n = ::write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("writing " + path, errno);
    data += n;
    len -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Gunzipped> GunzipFile(const std::string& source, const std::string& dest,
                               uint64_t max_bytes) {
  UniqueFd in(::open(source.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return Status::FromErrno("opening " + source, errno);
  UniqueFd out(::open(dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out.valid()) return Status::FromErrno("creating " + dest, errno);

  z_stream z{};
  // 16 + MAX_WBITS: a gzip wrapper, its CRC-32 and length checked by zlib.
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return Status::Internal("inflateInit2 failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};

  Gunzipped result;
  ossl::Sha256Stream hash;
  unsigned char in_buf[64 * 1024], out_buf[64 * 1024];
  bool member_done = false;  // the last member read ended cleanly
  bool any_input = false;
  for (;;) {
    ssize_t got = ::read(in.get(), in_buf, sizeof in_buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status::FromErrno("reading " + source, errno);
    if (got == 0) break;
    any_input = true;
    z.next_in = in_buf;
    z.avail_in = static_cast<uInt>(got);
    // Until this input is used up and zlib holds no more output for us (a full out_buf may
    // leave some inside it).
    for (bool full = true; z.avail_in > 0 || (full && !member_done);) {
      if (member_done) {  // another member follows: start it afresh
        if (inflateReset(&z) != Z_OK) return Status::Internal("inflateReset failed");
        member_done = false;
      }
      z.next_out = out_buf;
      z.avail_out = sizeof out_buf;
      const int rc = inflate(&z, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
        return Status::DataLoss(std::string("gzip: ") + (z.msg != nullptr ? z.msg : "corrupt"));
      }
      const size_t produced = sizeof out_buf - z.avail_out;
      full = z.avail_out == 0;
      result.size += produced;
      if (result.size > max_bytes) {
        return Status::DataLoss("gzip: decompressed data exceeds " + std::to_string(max_bytes) +
                                " bytes");
      }
      hash.Update(std::string_view(reinterpret_cast<char*>(out_buf), produced));
      if (Status st = WriteAll(out.get(), reinterpret_cast<char*>(out_buf), produced, dest);
          !st.ok()) {
        return st;
      }
      if (rc == Z_STREAM_END) member_done = true;
      if (rc == Z_BUF_ERROR && produced == 0) {
        if (z.avail_in > 0) return Status::DataLoss("gzip: no progress");
        break;  // needs more input
      }
    }
  }
  if (!any_input) return Status::DataLoss("gzip: empty input");
  if (!member_done) return Status::DataLoss("gzip: unexpected end of data");
  if (out.Close() != 0) return Status::FromErrno("closing " + dest, errno);
  result.sha256 = hash.FinishHex();
  return result;
}

}  // namespace hotfix::node::repository
