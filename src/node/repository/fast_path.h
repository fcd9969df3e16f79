// download-hotfix's repository fast path (AgentBaker #9451 for Ubuntu, #9505 for Azure Linux;
// docs/DOWNLOAD-HOTFIX.md, "The repository fast path"): the hotfix binary taken from the
// package repository the node already trusts, with no package manager run. The repository's
// signed metadata is checked with gpgv against the keyrings the node's source names, the
// package index and the package by size and SHA-256 (an rpm also by rpmkeys), and only
// usr/bin/aks-node-controller is taken out of the package.
//
// The caller decides by the error's code: DataLoss is an integrity failure (the reference
// deletes the staged hotfix binary and runs no package manager); anything else falls back to
// apt-get, dnf or tdnf.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "common/log.h"
#include "common/status.h"
#include "node/repository/platform.h"
#include "node/repository/repo_fetcher.h"

namespace hotfix::node::repository {

struct FastPathOptions {
  std::string os_release_path = "/etc/os-release";
  std::string apt_sources_dir = "/etc/apt/sources.list.d";
  // Where the Microsoft keyrings are when the apt source names none (microsoft*.gpg).
  std::string apt_trusted_dir = "/etc/apt/trusted.gpg.d";
  std::string yum_repos_dir = "/etc/yum.repos.d";
  // The folder the work happens in (the hotfix binary's): a private subfolder
  // .aks-node-controller-repository-XXXXXX, removed on every path.
  std::string staging_dir = "/opt/azure/containers";
  // rpmkeys --dbpath: the tests' own rpm database; empty: the system's.
  std::string rpm_dbpath;
  // GOARCH words ("amd64", "arm64"); empty: this build's (BuildArch()).
  std::string arch;
  std::chrono::milliseconds tool_timeout{60000};
  // download-hotfix's own cancellation (a signal): both branches stop.
  const std::atomic<bool>* cancelled = nullptr;
};

// The binary the fast path verified and extracted, in its private folder until this is
// destroyed: the caller stages it beside the VHD binary first.
class VerifiedBinary {
 public:
  VerifiedBinary(std::string work_dir, std::string path, PackageFormat format,
                 std::string package_url);
  VerifiedBinary(VerifiedBinary&& other) noexcept;
  VerifiedBinary& operator=(VerifiedBinary&&) = delete;
  ~VerifiedBinary();  // removes the work folder

  const std::string& path() const { return path_; }
  PackageFormat format() const { return format_; }
  const std::string& package_url() const { return package_url_; }

 private:
  std::string work_dir_;
  std::string path_;
  PackageFormat format_;
  std::string package_url_;
};

// The fast path for hotfix version `hotfix` (e.g. "202604.01.3"). DataLoss: integrity,
// terminal. FailedPrecondition: the platform or configuration is not one it supports.
// Cancelled, Unavailable, DeadlineExceeded, IoError: operational. The message says which
// branch failed: "download repository package: ..." or "resolve authenticated repository
// metadata: ...".
StatusOr<VerifiedBinary> TryRepositoryDownload(const FastPathOptions& options,
                                               std::string_view hotfix, RepoFetcher& fetcher,
                                               Logger& log);

}  // namespace hotfix::node::repository
