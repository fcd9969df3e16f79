#include "node/repository/signature.h"

#include <stdlib.h>
#include <unistd.h>

#include "common/file_util.h"
#include "common/text.h"

namespace hotfix::node::repository {
namespace {

// A keyring file is read whole to look for armor; distribution keyrings are a few KiB.
constexpr size_t kMaxKeyringBytes = 16 << 20;
constexpr char kArmoredKeyMarker[] = "-----BEGIN PGP PUBLIC KEY BLOCK-----";

std::vector<std::string> GpgvArgs(const std::vector<std::string>& keyrings) {
  // With --keyring given, gpgv reads nothing else (not root's ~/.gnupg: checked with strace).
  std::vector<std::string> argv = {"gpgv", "--quiet"};
  for (const std::string& keyring : keyrings) {
    argv.push_back("--keyring");
    argv.push_back(keyring);
  }
  return argv;
}

// gpgv's verdict: DataLoss when it ran and said no, the tool's own error when it did not run.
Status Verdict(const StatusOr<ToolRun>& run, const ToolContext& context) {
  if (!run.ok()) return run.status();
  if (run->exit.success()) return Status::Ok();
  Status failed = ToolStatus("gpgv", run->exit, run->output, context);
  if (failed.code() == Status::Code::kCancelled) return failed;
  return Status::DataLoss("gpgv verification failed: " + failed.message());
}

}  // namespace

StatusOr<std::vector<std::string>> PrepareKeyrings(const std::vector<std::string>& paths,
                                                   const std::string& work_dir,
                                                   const ToolContext& context) {
  if (paths.empty()) return Status::FailedPrecondition("no keyring configured");
  std::vector<std::string> keyrings;
  for (const std::string& path : paths) {
    StatusOr<std::string> text = ReadFileToString(path, kMaxKeyringBytes);
    if (!text.ok()) {
      return Status::FailedPrecondition("reading keyring " + path + ": " + text.status().message());
    }
    if (text->find(kArmoredKeyMarker) == std::string::npos) {
      keyrings.push_back(path);
      continue;
    }
    std::string temp = work_dir + "/.aks-node-controller-keyring-XXXXXX";
    const int fd = ::mkstemp(temp.data());
    if (fd < 0) return Status::FromErrno("creating a keyring file in " + work_dir, errno);
    ::close(fd);
    StatusOr<ToolRun> run = RunTool({"gpg", "--batch", "--yes", "--no-options", "--homedir",
                                     work_dir, "--dearmor", "--output", temp, path},
                                    context);
    if (!run.ok()) return run.status();
    if (Status st = ToolStatus("gpg --dearmor", run->exit, run->output, context); !st.ok()) {
      if (st.code() == Status::Code::kCancelled) return st;
      return Status::FailedPrecondition("dearmoring keyring " + path + ": " + st.message());
    }
    keyrings.push_back(temp);
  }
  return keyrings;
}

StatusOr<std::string> VerifyClearsigned(const std::string& file,
                                        const std::vector<std::string>& keyrings,
                                        const std::string& work_dir, size_t max_bytes,
                                        const ToolContext& context) {
  const std::string verified = work_dir + "/.aks-node-controller-verified-text";
  ::unlink(verified.c_str());
  std::vector<std::string> argv = GpgvArgs(keyrings);
  argv.insert(argv.end(), {"--output", verified, file});
  if (Status st = Verdict(RunTool(argv, context), context); !st.ok()) return st;
  StatusOr<std::string> text = ReadFileToString(verified, max_bytes);
  ::unlink(verified.c_str());
  if (!text.ok()) return text.status().Annotate("reading gpgv's verified text");
  return text;
}

Status VerifyDetached(const std::string& signature, const std::string& data,
                      const std::vector<std::string>& keyrings, const ToolContext& context) {
  std::vector<std::string> argv = GpgvArgs(keyrings);
  argv.insert(argv.end(), {signature, data});
  return Verdict(RunTool(argv, context), context);
}

}  // namespace hotfix::node::repository
