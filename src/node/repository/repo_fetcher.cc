#include "node/repository/repo_fetcher.h"

#include <fcntl.h>
#include <unistd.h>

#include "common/deadline.h"
#include "common/openssl.h"
#include "common/unique_fd.h"
#include "node/repository/repo_url.h"
#include "wire/http_download.h"

namespace hotfix::node::repository {
namespace {

// The body as it arrives: to the file, through the hash, counted.
class FileSink {
 public:
  explicit FileSink(int fd) : fd_(fd) {}
  Status Write(std::string_view piece) {
    hash_.Update(piece);
    size_ += piece.size();
    while (!piece.empty()) {
      ssize_t n = ::write(fd_, piece.data(), piece.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno("writing a repository file", errno);
      piece.remove_prefix(static_cast<size_t>(n));
    }
    return Status::Ok();
  }
  uint64_t size() const { return size_; }
  std::string FinishHex() { return hash_.FinishHex(); }

 private:
  int fd_;
  ossl::Sha256Stream hash_;
  uint64_t size_ = 0;
};

class HttpRepoFetcher final : public RepoFetcher {
 public:
  explicit HttpRepoFetcher(const HttpRepoFetcherOptions& options) : options_(options) {}

  StatusOr<FetchedFile> Fetch(const wire::Url& base, std::string_view relative, uint64_t max_bytes,
                              const std::string& dest,
                              const std::atomic<bool>* cancelled) override {
    auto is_cancelled = [cancelled] { return cancelled != nullptr && cancelled->load(); };
    StatusOr<wire::Url> url = RepositoryFileUrl(base, relative);
    if (!url.ok()) return url.status();
    const Deadline deadline = Deadline::After(options_.request_timeout);
    for (int redirects = 0;; ++redirects) {
      if (is_cancelled()) {
        return Status::Cancelled("download of " + url->ToString() + " cancelled");
      }
      UniqueFd fd(
          ::open(dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
      if (!fd.valid()) return Status::FromErrno("creating " + dest, errno);
      FileSink sink(fd.get());
      wire::HttpDownloadOptions get;
      get.user_agent = options_.user_agent;
      get.max_body_bytes = max_bytes;
      get.label = "repository";
      get.connect_timeout = options_.connect_timeout;
      get.tls_timeout = options_.tls_timeout;
      get.header_timeout = options_.header_timeout;
      get.cancelled = cancelled;
      get.body_sink = [&sink](std::string_view piece) { return sink.Write(piece); };
      StatusOr<wire::HttpDownloadResponse> response = wire::HttpDownload(*url, get, deadline);
      if (!response.ok()) return Classify(response.status(), max_bytes, is_cancelled());
      if (response->status == 200) {
        if (fd.Close() != 0) return Status::FromErrno("closing " + dest, errno);
        return FetchedFile{dest, sink.size(), sink.FinishHex()};
      }
      const bool redirect = response->status == 301 || response->status == 302 ||
                            response->status == 303 || response->status == 307 ||
                            response->status == 308;
      if (!redirect || response->location.empty()) {
        return Status::Unavailable("HTTP " + std::to_string(response->status) + " from " +
                                   url->ToString());
      }
      if (redirects >= options_.max_redirects) {
        return Status::Unavailable("stopped after " + std::to_string(options_.max_redirects) +
                                   " redirects from " + url->ToString());
      }
      StatusOr<wire::Url> next = wire::ResolveReference(*url, response->location);
      if (!next.ok() || !WithinRepository(base, *next)) {
        return Status::Unavailable("redirect from " + url->ToString() + " leaves the repository");
      }
      next->fragment.reset();
      url = std::move(next);
    }
  }

 private:
  // The transport's words for what the reference calls operational, and cancellation as such.
  static Status Classify(const Status& error, uint64_t max_bytes, bool cancelled) {
    if (cancelled) return Status::Cancelled(error.message());
    if (error.code() == Status::Code::kInvalidArgument &&
        error.message().find("body exceeds") != std::string::npos) {
      return Status::Unavailable("repository response exceeds " + std::to_string(max_bytes) +
                                 " bytes");
    }
    if (error.code() == Status::Code::kInvalidArgument) {
      return Status::Unavailable(error.message());  // a proxy variable, a header cap
    }
    return error;
  }

  HttpRepoFetcherOptions options_;
};

}  // namespace

std::unique_ptr<RepoFetcher> NewHttpRepoFetcher(const HttpRepoFetcherOptions& options) {
  return std::make_unique<HttpRepoFetcher>(options);
}

}  // namespace hotfix::node::repository
