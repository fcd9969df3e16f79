// The scripts hotfix: the cloud-init `write_files` entries of
// /opt/azure/containers/nodecustomdata.yml, applied when the pointer's scripts_version targets
// this node (AgentBaker: aks-node-controller/nodecustomdata.go applyNodeCustomData). Only
// write_files is read; every other key is ignored.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "common/status.h"

namespace hotfix::node {

// Temp files of write_files entries: "<target folder>/.aks-node-controller-write-XXXXXX".
inline constexpr char kWriteFilesTempPrefix[] = ".aks-node-controller-write-";

// One write_files entry as YAML gives it. `content` is already base64-decoded when the YAML
// node is tagged !!binary (how cloud-init carries gzip bytes).
struct WriteFileEntry {
  std::string path;
  std::string permissions;  // octal text; "" means 0644
  std::string encoding;     // "", "gzip" or "base64"
  std::string owner;        // "" or "root"
  std::string content;
};

// Parses the document like Go's yaml.v3 into the reference's struct: a missing or null
// write_files is no entries; a wrong shape is an error naming the key. Errors read
// "parsing node custom data: …".
StatusOr<std::vector<WriteFileEntry>> ParseNodeCustomData(std::string_view yaml);

// A validated entry, ready to write.
struct FileToWrite {
  std::string path;
  mode_t mode = 0644;  // applied only when the file is created (permission bits only)
  std::string data;
};

// Checks path, owner, permissions and encoding and decodes the content. Errors name the entry:
// `write_files[1] (/etc/x): unsupported encoding "b64"`.
StatusOr<FileToWrite> PrepareWriteFile(const WriteFileEntry& entry, size_t index);

struct ApplyNodeCustomDataResult {
  std::vector<std::string> paths;  // written (or, in a dry run, to be written), in order
};

// Reads the file (a missing one is nothing to do), validates and decodes every entry before
// writing any, then writes each file atomically and durably: a bad entry anywhere leaves every
// file untouched, and a crash leaves each file old or new. Parent folders are created 0755. A
// new file gets the entry's permission bits (less the umask, as os.WriteFile does); an
// existing file keeps its mode and owner. A symlink is followed, as os.WriteFile follows it.
// Each file is written under its folder's lock (FileLock::OnFolder), which also removes the temp
// files a killed run left there.
StatusOr<ApplyNodeCustomDataResult> ApplyNodeCustomData(const std::string& path, bool dry_run,
                                                        Logger& log);

}  // namespace hotfix::node
