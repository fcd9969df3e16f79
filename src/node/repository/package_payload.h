// The one file the fast path takes out of a verified package: usr/bin/aks-node-controller, read
// from the package's payload as a stream (dpkg-deb --fsys-tarfile for a .deb, rpm2cpio for an
// .rpm) by libarchive's tar and cpio readers, never unpacked onto the disk whole. And, for an
// rpm, its own signature checked by rpmkeys before anything is read from it.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "node/repository/tool_runner.h"

namespace hotfix::node::repository {

inline constexpr char kPayloadBinary[] = "usr/bin/aks-node-controller";
// The reference's cap on the extracted binary.
inline constexpr uint64_t kMaxPayloadBinaryBytes = 128ull << 20;

// Copies the first payload member named usr/bin/aks-node-controller (a leading "./" ignored)
// into `dest` (created 0755, replaced if it exists). The member must be a regular file of at
// most kMaxPayloadBinaryBytes: otherwise DataLoss. A package without it (or with an empty one)
// is Unavailable "deb package does not contain usr/bin/aks-node-controller" (or "rpm package
// ..."), as is a tool or payload failure; the tool is killed once the member is copied.
Status ExtractDebBinary(const std::string& package, const std::string& dest,
                        const ToolContext& context);
Status ExtractRpmBinary(const std::string& package, const std::string& dest,
                        const ToolContext& context);

// `rpmkeys --define "_pkgverify_level signature" --checksig --verbose [--dbpath D] <package>`:
// the package must carry a signature by a key imported into the rpm database (dbpath: the
// tests' own database, never the machine's; empty: the system's). DataLoss "RPM package
// signature verification failed" when rpmkeys says no.
Status CheckRpmSignature(const std::string& package, const std::string& rpm_dbpath,
                         const ToolContext& context);

}  // namespace hotfix::node::repository
