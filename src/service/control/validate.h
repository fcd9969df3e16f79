// The component folder judged exactly as the service judges it (LoadComponentFolder), for the
// operators' tools (docs/ROLLOUTS.md, "Tools"): `validate`, and the one file `plan` and
// `simulate` start from. Nothing here serves, and nothing throws: every failure is a Status.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "service/store/component_file.h"

namespace hotfix::service {

// One component's file from a folder, judged as the service judges it. NotFound when the
// folder has no `<component>.json`; InvalidArgument with the loader's message (file, rollout,
// field) when the file is refused; the listing error when the folder cannot be read.
StatusOr<std::shared_ptr<const ComponentConfig>> LoadComponentFromFolder(
    const std::string& dir, std::string_view component);

struct ValidateReport {
  size_t ok = 0;                      // files loaded
  std::vector<std::string> problems;  // one line per refused file, sorted by file name
  bool passed() const { return problems.empty(); }
  // "3 files ok, 1 refused"
  std::string Summary() const;
};
// Fails only when the folder cannot be read.
StatusOr<ValidateReport> ValidateFolder(const std::string& dir);

}  // namespace hotfix::service
