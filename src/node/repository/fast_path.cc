#include "node/repository/fast_path.h"

#include <stdlib.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/file_util.h"
#include "common/text.h"
#include "node/repository/apt_source.h"
#include "node/repository/gunzip.h"
#include "node/repository/package_payload.h"
#include "node/repository/packages_index.h"
#include "node/repository/release_file.h"
#include "node/repository/repo_metadata_xml.h"
#include "node/repository/repo_url.h"
#include "node/repository/signature.h"
#include "node/repository/source_files.h"
#include "node/repository/tool_runner.h"
#include "node/repository/yum_repo.h"

namespace hotfix::node::repository {
namespace {

// The reference's caps (AgentBaker aks-node-controller/repository_hotfix.go).
constexpr uint64_t kMaxPackageBytes = 512ull << 20;
constexpr uint64_t kMaxMetadataBytes = 128ull << 20;
constexpr uint64_t kMaxSignatureBytes = 1ull << 20;
constexpr char kPackageName[] = "aks-node-controller";
constexpr char kWorkPrefix[] = ".aks-node-controller-repository-";

bool IsCancelled(const std::atomic<bool>* flag) { return flag != nullptr && flag->load(); }

// What the node's configuration says about the repository, before anything is fetched.
struct Source {
  wire::Url base;
  std::vector<std::string> keyrings;  // as configured (armored ones dearmored later)
  std::string package_path;           // relative to base
  // deb
  std::string suite, component;
  DebPackageQuery deb;
  // rpm
  RpmQuery rpm;
};

StatusOr<Source> ReadDebSource(const FastPathOptions& options, const Platform& platform,
                               std::string_view hotfix) {
  StatusOr<std::string> path = ResolveMicrosoftProdSources(options.apt_sources_dir);
  if (!path.ok()) return Status::FailedPrecondition(path.status().message());
  StatusOr<std::string> text = ReadFileToString(*path, 1 << 20);
  if (!text.ok())
    return Status::FailedPrecondition(text.status().Annotate("reading " + *path).message());
  const bool deb822 = path->size() >= 8 && path->substr(path->size() - 8) == ".sources";
  StatusOr<AptSource> apt = deb822 ? ParseDeb822Sources(*text, platform.deb_arch)
                                   : ParseOneLineSources(*text, platform.deb_arch);
  if (!apt.ok()) return apt.status().Annotate(*path);
  Source source;
  StatusOr<wire::Url> base = ParseRepositoryBase(apt->uri);
  if (!base.ok()) return base.status();
  source.base = std::move(*base);
  source.keyrings = apt->signed_by;
  if (source.keyrings.empty()) source.keyrings = DefaultMicrosoftKeyrings(options.apt_trusted_dir);
  if (source.keyrings.empty()) {
    return Status::FailedPrecondition("APT source has no Signed-By and " + options.apt_trusted_dir +
                                      " has no Microsoft keyring");
  }
  source.suite = apt->suite;
  source.component = apt->component;
  source.package_path = DebPoolPath(platform, hotfix);
  source.deb = {kPackageName, DebPackageVersion(platform, hotfix), platform.deb_arch};
  return source;
}

StatusOr<Source> ReadRpmSource(const FastPathOptions& options, const Platform& platform,
                               std::string_view hotfix) {
  StatusOr<YumRepo> repo = FindMicrosoftYumRepo(ReadYumRepoFiles(options.yum_repos_dir));
  if (!repo.ok()) return repo.status();
  StatusOr<std::string> baseurl =
      SubstituteYumVariables(repo->baseurl, platform.releasever, platform.rpm_arch);
  if (!baseurl.ok()) return baseurl.status();
  Source source;
  StatusOr<wire::Url> base = ParseRepositoryBase(*baseurl);
  if (!base.ok()) return base.status();
  source.base = std::move(*base);
  source.keyrings = repo->gpgkey_paths;
  if (source.keyrings.empty()) {
    return Status::FailedPrecondition("yum repository [" + repo->section + "] names no gpgkey");
  }
  source.package_path = RpmPackagePath(platform, hotfix);
  source.rpm = {kPackageName, platform.rpm_arch, std::string(hotfix), RpmRelease(platform),
                source.package_path};
  return source;
}

// The private folder every downloaded and extracted file lives in; removed with everything in it.
class WorkDir {
 public:
  // Folders a killed run left behind go first: download-hotfix holds its lock.
  static StatusOr<WorkDir> Create(const std::string& parent) {
    if (Status made = MakeFolders(parent, 0755, "staging folder"); !made.ok()) return made;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
      if (entry.path().filename().string().rfind(kWorkPrefix, 0) == 0) {
        std::error_code ignored;
        std::filesystem::remove_all(entry.path(), ignored);
      }
    }
    std::string path = parent + "/" + kWorkPrefix + "XXXXXX";
    if (::mkdtemp(path.data()) == nullptr) {
      return Status::FromErrno("creating a folder in " + parent, errno);
    }
    return WorkDir(std::move(path));
  }
  WorkDir(WorkDir&& other) noexcept : path_(std::exchange(other.path_, "")) {}
  ~WorkDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  std::string File(std::string_view name) const { return path_ + "/" + std::string(name); }
  const std::string& path() const { return path_; }
  std::string Release() { return std::exchange(path_, ""); }

 private:
  explicit WorkDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// ---- The metadata branch: the package's SHA-256 as the repository's signed metadata states it.

Status CheckFetched(const FetchedFile& got, std::optional<uint64_t> size, const std::string& sha256,
                    std::string_view what) {
  if ((size && got.size != *size) || AsciiLower(got.sha256) != AsciiLower(sha256)) {
    return Status::DataLoss(std::string(what) + ": want " +
                            (size ? std::to_string(*size) + " bytes, " : std::string()) +
                            "SHA-256 " + AsciiLower(sha256) + ", got " + std::to_string(got.size) +
                            " bytes, SHA-256 " + got.sha256);
  }
  return Status::Ok();
}

StatusOr<std::string> ResolveDebMetadata(const Source& source, const WorkDir& work,
                                         RepoFetcher& fetcher, const ToolContext& tools) {
  const std::string dists = "dists/" + source.suite + "/";
  StatusOr<FetchedFile> in_release = fetcher.Fetch(
      source.base, dists + "InRelease", kMaxMetadataBytes, work.File("InRelease"), tools.cancelled);
  if (!in_release.ok()) return in_release.status();
  StatusOr<std::string> file = ReadFileToString(in_release->path, kMaxMetadataBytes);
  if (!file.ok()) return file.status();
  if (Status layout = CheckClearsignedLayout(*file); !layout.ok()) return layout;
  StatusOr<std::vector<std::string>> keyrings =
      PrepareKeyrings(source.keyrings, work.path(), tools);
  if (!keyrings.ok()) return keyrings.status();
  // Only gpgv's own output is parsed: nothing outside the signature can reach the parser.
  StatusOr<std::string> signed_text =
      VerifyClearsigned(in_release->path, *keyrings, work.path(), kMaxMetadataBytes, tools);
  if (!signed_text.ok()) return signed_text.status();

  const std::string index = source.component + "/binary-" + source.deb.architecture + "/Packages";
  std::string index_path = index + ".gz";
  StatusOr<ReleaseEntry> entry = FindReleaseSha256(*signed_text, index_path);
  if (!entry.ok()) {
    index_path = index;
    entry = FindReleaseSha256(*signed_text, index_path);
    if (!entry.ok()) return entry.status();
  }
  StatusOr<FetchedFile> packages = fetcher.Fetch(source.base, dists + index_path, kMaxMetadataBytes,
                                                 work.File("Packages.fetched"), tools.cancelled);
  if (!packages.ok()) return packages.status();
  if (Status st = CheckFetched(*packages, entry->size, entry->sha256,
                               "Packages metadata mismatch for " + index_path);
      !st.ok()) {
    return st;
  }
  std::string plain = packages->path;
  if (index_path.size() > 3 && index_path.substr(index_path.size() - 3) == ".gz") {
    plain = work.File("Packages");
    StatusOr<Gunzipped> unpacked = GunzipFile(packages->path, plain, kMaxMetadataBytes);
    if (!unpacked.ok()) return unpacked.status().Annotate(index_path);
  }
  std::ifstream in(plain, std::ios::binary);
  if (!in) return Status::IoError("opening " + plain);
  StatusOr<std::optional<DebStanza>> stanza = FindPackageStanza(in, source.deb);
  if (!stanza.ok()) return stanza.status().Annotate(index_path);
  if (!stanza->has_value()) {
    return Status::FailedPrecondition(source.deb.package + " " + source.deb.version + " " +
                                      source.deb.architecture + " is not in " + index_path);
  }
  if (Status st = CheckDebStanza(**stanza, source.package_path); !st.ok()) return st;
  return AsciiLower((*stanza)->sha256);
}

StatusOr<std::string> ResolveRpmMetadata(const Source& source, const WorkDir& work,
                                         RepoFetcher& fetcher, const ToolContext& tools) {
  StatusOr<FetchedFile> repomd =
      fetcher.Fetch(source.base, "repodata/repomd.xml", kMaxMetadataBytes, work.File("repomd.xml"),
                    tools.cancelled);
  if (!repomd.ok()) return repomd.status();
  StatusOr<FetchedFile> signature =
      fetcher.Fetch(source.base, "repodata/repomd.xml.asc", kMaxSignatureBytes,
                    work.File("repomd.xml.asc"), tools.cancelled);
  if (!signature.ok()) return signature.status();
  StatusOr<std::vector<std::string>> keyrings =
      PrepareKeyrings(source.keyrings, work.path(), tools);
  if (!keyrings.ok()) return keyrings.status();
  if (Status st = VerifyDetached(signature->path, repomd->path, *keyrings, tools); !st.ok()) {
    return st;
  }
  // The bytes gpgv verified: the file in our private folder, read once.
  StatusOr<std::string> repomd_xml = ReadFileToString(repomd->path, kMaxMetadataBytes);
  if (!repomd_xml.ok()) return repomd_xml.status();
  StatusOr<RepomdData> primary = ParseRepomdPrimary(*repomd_xml);
  if (!primary.ok()) return primary.status().Annotate("repodata/repomd.xml");

  StatusOr<FetchedFile> fetched = fetcher.Fetch(source.base, primary->href, kMaxMetadataBytes,
                                                work.File("primary.fetched"), tools.cancelled);
  if (!fetched.ok()) return fetched.status();
  std::optional<uint64_t> size = primary->size;
  if (size && *size == 0) size.reset();  // the reference checks a declared size above 0
  if (Status st = CheckFetched(*fetched, size, primary->sha256,
                               "primary metadata mismatch for " + primary->href);
      !st.ok()) {
    return st;
  }
  std::string plain = fetched->path;
  FetchedFile opened = *fetched;
  const std::string& href = primary->href;
  if (href.size() > 3 && href.substr(href.size() - 3) == ".gz") {
    plain = work.File("primary.xml");
    StatusOr<Gunzipped> unpacked = GunzipFile(fetched->path, plain, kMaxMetadataBytes);
    if (!unpacked.ok()) return unpacked.status().Annotate(href);
    opened = {plain, unpacked->size, unpacked->sha256};
  } else if (href.size() < 4 || href.substr(href.size() - 4) != ".xml") {
    return Status::FailedPrecondition("unsupported primary metadata compression: " + href);
  }
  if (primary->open_sha256 || primary->open_size) {
    if ((primary->open_size && opened.size != *primary->open_size) ||
        (primary->open_sha256 && AsciiLower(*primary->open_sha256) != opened.sha256)) {
      return Status::DataLoss("primary metadata mismatch for " + href + " once decompressed");
    }
  }
  std::ifstream in(plain, std::ios::binary);
  if (!in) return Status::IoError("opening " + plain);
  StatusOr<std::optional<RpmPackageEntry>> package = FindPrimaryPackage(in, source.rpm);
  if (!package.ok()) return package.status().Annotate(href);
  if (!package->has_value()) {
    return Status::FailedPrecondition(source.rpm.name + "-" + source.rpm.version + "-" +
                                      source.rpm.release + "." + source.rpm.arch + " is not in " +
                                      href);
  }
  return AsciiLower((*package)->sha256);
}

// The reference's choice when both branches have ended: an integrity failure from either, else
// a failure that is not a cancellation, else the cancellation (a branch stopped because the
// other failed must never pass for the cause).
Status ChooseFailure(const Status& metadata, const Status& package) {
  const Status meta = metadata.Annotate("resolve authenticated repository metadata");
  const Status pkg = package.Annotate("download repository package");
  for (const Status* s : {&meta, &pkg}) {
    if (s->code() == Status::Code::kDataLoss) return *s;
  }
  for (const Status* s : {&meta, &pkg}) {
    if (!s->ok() && s->code() != Status::Code::kCancelled) return *s;
  }
  return meta.ok() ? pkg : meta;
}

// Sets `stop` once download-hotfix itself is cancelled, while the branches run. The parent
// flag is set by a signal handler, which can only store to it: it is looked at every 50 ms.
// The relay's own end wakes it at once.
class CancelRelay {
 public:
  CancelRelay(const std::atomic<bool>* parent, std::atomic<bool>* stop) {
    if (parent == nullptr) return;
    thread_ = std::thread([this, parent, stop] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!done_) {
        if (parent->load()) stop->store(true);
        wake_.wait_for(lock, std::chrono::milliseconds(50));
      }
    });
  }
  ~CancelRelay() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace

VerifiedBinary::VerifiedBinary(std::string work_dir, std::string path, PackageFormat format,
                               std::string package_url)
    : work_dir_(std::move(work_dir)),
      path_(std::move(path)),
      format_(format),
      package_url_(std::move(package_url)) {}

VerifiedBinary::VerifiedBinary(VerifiedBinary&& other) noexcept
    : work_dir_(std::exchange(other.work_dir_, "")),
      path_(std::move(other.path_)),
      format_(other.format_),
      package_url_(std::move(other.package_url_)) {}

VerifiedBinary::~VerifiedBinary() {
  std::error_code ignored;
  if (!work_dir_.empty()) std::filesystem::remove_all(work_dir_, ignored);
}

StatusOr<VerifiedBinary> TryRepositoryDownload(const FastPathOptions& options,
                                               std::string_view hotfix, RepoFetcher& fetcher,
                                               Logger& log) {
  StatusOr<OsRelease> os = ReadOsRelease(options.os_release_path);
  if (!os.ok()) return os.status();
  StatusOr<Platform> platform =
      ChoosePlatform(*os, options.arch.empty() ? BuildArch() : std::string_view(options.arch));
  if (!platform.ok()) return platform.status();
  const bool deb = platform->format == PackageFormat::kDeb;
  StatusOr<Source> source =
      deb ? ReadDebSource(options, *platform, hotfix) : ReadRpmSource(options, *platform, hotfix);
  if (!source.ok()) return source.status();
  StatusOr<wire::Url> package_url = RepositoryFileUrl(source->base, source->package_path);
  if (!package_url.ok()) return package_url.status();
  StatusOr<WorkDir> work = WorkDir::Create(options.staging_dir);
  if (!work.ok()) return work.status();
  log.Info("trying the authenticated repository fast path",
           {{"target", std::string(hotfix)},
            {"format", PackageFormatName(platform->format)},
            {"package", package_url->ToString()}});

  // The package downloads while the metadata that authenticates it is resolved; the first
  // failure stops the other.
  std::atomic<bool> stop{false};
  CancelRelay relay(options.cancelled, &stop);
  ToolContext tools{options.tool_timeout, &stop};
  const std::string package_file = work->File(deb ? "package.deb" : "package.rpm");
  Status package_status;
  std::optional<FetchedFile> package;
  std::thread download([&] {
    StatusOr<FetchedFile> got =
        fetcher.Fetch(source->base, source->package_path, kMaxPackageBytes, package_file, &stop);
    if (got.ok()) {
      package = std::move(*got);
    } else {
      package_status = got.status();
      stop = true;
    }
  });
  StatusOr<std::string> expected = deb ? ResolveDebMetadata(*source, *work, fetcher, tools)
                                       : ResolveRpmMetadata(*source, *work, fetcher, tools);
  if (!expected.ok()) stop = true;
  download.join();
  if (IsCancelled(options.cancelled)) {
    return Status::Cancelled("repository fast path cancelled");
  }
  if (!expected.ok() || !package_status.ok()) {
    return ChooseFailure(expected.ok() ? Status::Ok() : expected.status(), package_status);
  }

  // Nothing of the package is read before its digest matches the signed one.
  if (package->sha256 != *expected) {
    return Status::DataLoss("package SHA-256 mismatch: expected " + *expected + ", got " +
                            package->sha256);
  }
  tools.cancelled = options.cancelled;
  if (!deb) {
    if (Status signed_rpm = CheckRpmSignature(package_file, options.rpm_dbpath, tools);
        !signed_rpm.ok()) {
      return signed_rpm;
    }
  }
  const std::string binary = work->File("aks-node-controller");
  Status extracted = deb ? ExtractDebBinary(package_file, binary, tools)
                         : ExtractRpmBinary(package_file, binary, tools);
  if (!extracted.ok()) return extracted;
  ::unlink(package_file.c_str());  // hundreds of MiB at most: not kept while the caller stages
  return VerifiedBinary(work->Release(), binary, platform->format, package_url->ToString());
}

}  // namespace hotfix::node::repository
