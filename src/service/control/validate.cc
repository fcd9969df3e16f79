#include "service/control/validate.h"

#include "common/text.h"

namespace hotfix::service {

StatusOr<std::shared_ptr<const ComponentConfig>> LoadComponentFromFolder(
    const std::string& dir, std::string_view component) {
  if (!IsValidComponentName(component)) {
    return Status::InvalidArgument("\"" + std::string(component) +
                                   "\" is not a valid component name");
  }
  StatusOr<FolderLoad> load = LoadComponentFolder(dir);
  if (!load.ok()) return load.status();
  const std::string name(component);
  if (auto it = load->valid.find(name); it != load->valid.end()) return it->second;
  const std::string file = name + ".json";
  if (auto it = load->rejected.find(file); it != load->rejected.end()) {
    return Status::InvalidArgument(OneLine(it->second));
  }
  return Status::NotFound(dir + ": no " + file);
}

std::string ValidateReport::Summary() const {
  return std::to_string(ok) + (ok == 1 ? " file" : " files") + " ok, " +
         std::to_string(problems.size()) + " refused";
}

StatusOr<ValidateReport> ValidateFolder(const std::string& dir) {
  StatusOr<FolderLoad> load = LoadComponentFolder(dir);
  if (!load.ok()) return load.status();
  ValidateReport report;
  report.ok = load->valid.size();
  for (const auto& [file, why] : load->rejected) report.problems.push_back(OneLine(why));
  return report;
}

}  // namespace hotfix::service
