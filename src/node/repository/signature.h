// OpenPGP signatures on repository metadata, checked by gpgv as the reference checks them (and
// as apt does): against the keyrings the node's source names, never the user's. The text of a
// clear-signed InRelease is taken from gpgv's own verified output, so that nothing outside the
// signature is ever parsed (the reference re-reads the file after gpgv said yes).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "node/repository/tool_runner.h"

namespace hotfix::node::repository {

// The keyrings to hand gpgv: each path as it is, or, when the file is ASCII-armored (holds
// "-----BEGIN PGP PUBLIC KEY BLOCK-----"), a binary copy in work_dir made by `gpg --batch --yes
// --dearmor`. FailedPrecondition (the fast path does not apply): no keyring, one unreadable, gpg
// not installed or failing.
StatusOr<std::vector<std::string>> PrepareKeyrings(const std::vector<std::string>& paths,
                                                   const std::string& work_dir,
                                                   const ToolContext& context);

// `gpgv --keyring K... --output <work_dir>/<name> <file>`: the clear-signed file's signed text,
// dash-escapes removed, exactly as gpgv verified it (at most max_bytes). DataLoss "gpgv
// verification failed: ..." when gpgv says no; the tool's own errors otherwise (not installed:
// FailedPrecondition; cancelled; killed at its deadline: Unavailable).
StatusOr<std::string> VerifyClearsigned(const std::string& file,
                                        const std::vector<std::string>& keyrings,
                                        const std::string& work_dir, size_t max_bytes,
                                        const ToolContext& context);

// `gpgv --keyring K... <signature> <data>`: Ok when the detached signature is good, DataLoss
// "gpgv verification failed: ..." when not; the tool's own errors as above.
Status VerifyDetached(const std::string& signature, const std::string& data,
                      const std::vector<std::string>& keyrings, const ToolContext& context);

}  // namespace hotfix::node::repository
