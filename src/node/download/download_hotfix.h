// download-hotfix: read the pointer check-hotfix staged, decide whether this node's agent version
// is targeted, take the hotfix binary from the package repository's signed metadata (the
// repository fast path, node/repository/fast_path.h) or else install the package with the
// package manager, and stage the binary next to the VHD one (AgentBaker:
// aks-node-controller/hotfix.go downloadHotfix; docs/DOWNLOAD-HOTFIX.md). Fail-open on the
// pointer; exit 1 when the repository fails an integrity check (the staged hotfix binary is
// then deleted and no package manager runs); the package manager's own exit code when its
// retries are exhausted.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "node/download/command_runner.h"
#include "node/host/default_paths.h"
#include "node/repository/repo_fetcher.h"

namespace hotfix::node {

struct DownloadHotfixOptions {
  std::string pointer_path = paths::kHotfixPointer;
  std::string current_version;
  std::string os_release_path = paths::kOsRelease;
  std::string apt_sources_dir = paths::kAptSourcesDir;
  std::string apt_trusted_dir = paths::kAptTrustedDir;
  std::string yum_repos_dir = paths::kYumReposDir;
  std::string package_binary = paths::kPackageBinary;
  std::string vhd_binary = paths::kVhdBinary;
  std::string hotfix_binary = paths::kHotfixBinary;
  std::string node_custom_data = paths::kNodeCustomData;
  std::chrono::milliseconds retry_backoff{3000};
  std::chrono::milliseconds command_timeout{60000};
  int max_attempts = 5;
  bool dry_run = false;  // decide and plan; run nothing, write nothing
  const std::atomic<bool>* cancelled = nullptr;
  // The repository fast path, tried before the package manager.
  bool repository_fast_path = true;
  // rpmkeys --dbpath for the fast path's rpm signature check: the tests' own rpm database
  // (the machine's is never written); empty: the system's.
  std::string rpm_dbpath;
  std::string user_agent;  // the repository requests'
  // The repository's HTTP client; null: the real one (node/repository/repo_fetcher.h).
  repository::RepoFetcher* repo_fetcher = nullptr;
};

// What happened to the binary hotfix.
enum class BinaryOutcome {
  kNoHotfix,           // nothing in the pointer for this version
  kNotTargeted,        // a target exists but the gate says no (or cannot compare)
  kInstalled,          // installed, confirmed and staged (in a dry run: would be)
  kPointerUnreadable,  // fail-open: the pointer could not be read or parsed
  kBusy,               // another download-hotfix run holds the lock
  kFailed,             // OS detection, install, confirmation or staging failed
};
// "noHotfix", "notTargeted", "installed", "pointerUnreadable", "busy", "failed"
const char* BinaryOutcomeName(BinaryOutcome outcome);

// Where a binary hotfix this node was targeted by failed (BinaryOutcome::kFailed): the kind the
// outcome report sends (docs/DOWNLOAD-HOTFIX.md, "Reporting the outcome"). kNone otherwise.
enum class BinaryFailure {
  kNone,
  kPlatformUnsupported,  // os-release names no supported OS, or apt has no Microsoft sources
  kInstallFailed,        // an install command still failed after its retries (or was killed)
  kVersionMismatch,      // the version query ran and shows another version, or none
  kStageFailed,          // the binary could not be staged beside the VHD one
  kOther,                // an exception, or the version query could not run at all
  // The repository's signed metadata, index or package failed a check (terminal: the staged
  // hotfix binary was deleted and no package manager ran).
  kIntegrity,
};
// "none", "platformUnsupported", "installFailed", "versionMismatch", "stageFailed", "other",
// "integrityFailed"
const char* BinaryFailureName(BinaryFailure failure);

enum class ScriptsOutcome { kNone, kNotTargeted, kApplied, kFailed, kSkipped };
// "none", "notTargeted", "applied", "failed", "skipped"
const char* ScriptsOutcomeName(ScriptsOutcome outcome);

struct DownloadHotfixResult {
  int exit_code = 0;  // 0, the package manager's code after its retries, or 1
  Status error;       // why exit_code is not 0 (or why the pointer was unreadable)

  BinaryOutcome binary = BinaryOutcome::kNoHotfix;
  BinaryFailure binary_failure = BinaryFailure::kNone;  // set with binary == kFailed
  // The gate let binary_target through: an install was attempted (in a dry run: would be).
  bool binary_targeted = false;
  std::string binary_target;  // the resolved hotfix version, "" if none
  std::string binary_reason;  // why targeted or not, in words
  ScriptsOutcome scripts = ScriptsOutcome::kNone;
  std::string scripts_target;
  std::string scripts_reason;
  Status scripts_error;

  // How the binary hotfix was sought: "fastPath" (the repository fast path, which staged it or
  // failed an integrity check), "packageManager" (apt-get, dnf or tdnf, after the fast path did
  // not apply or failed otherwise); "" when nothing was installed.
  std::string route;
  std::string fast_path_error;  // why the fast path fell back, "" if it did not

  // The plan: filled in a dry run, and in a real run with what was run and written.
  std::string package_manager;
  std::vector<Argv> commands;          // install commands, then the version query
  std::vector<std::string> files;      // node custom data files
  std::string staged_from, staged_to;  // binary staging
};

// The workflow, without the lock or the event.
DownloadHotfixResult DownloadHotfix(const DownloadHotfixOptions& options, CommandRunner& runner,
                                    Logger& log);

// What the command does with its result once the event is written, still under the lock (so
// that two runs cannot interleave it): the outcome report (node/download/hotfix_report.h). Not
// called in a dry run nor when another run holds the lock. Its exceptions are caught and logged.
using DownloadHotfixReporter = std::function<void(const DownloadHotfixResult&)>;

// The whole command: "started" log, the lock (`lock_path`; a second run while one holds it
// does nothing and says so), the workflow with every exception caught, one DownloadHotfix
// event in events_dir (none in a dry run), the reporter (if any), "finished" or "failed".
// The reporter cannot change the result.
DownloadHotfixResult RunDownloadHotfixCommand(const DownloadHotfixOptions& options,
                                              CommandRunner& runner, const std::string& lock_path,
                                              const std::string& events_dir, Logger& log,
                                              const DownloadHotfixReporter& reporter = {});

// One line for the event: "download-hotfix outcome=installed version=… scripts=…[ error=…]".
std::string DownloadHotfixEventMessage(const DownloadHotfixResult& result);

}  // namespace hotfix::node
