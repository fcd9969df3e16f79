// Where the tests find the project's binaries: $LP_BIN_DIR, else the build's own bin folder
// (LP_DEFAULT_BIN_DIR, defined for each integration test target).
#pragma once

#include <cstdlib>
#include <string>

namespace hotfix::testsupport {

inline std::string BinDir() {
  const char* dir = std::getenv("LP_BIN_DIR");
  return dir != nullptr && *dir != '\0' ? dir : LP_DEFAULT_BIN_DIR;
}

}  // namespace hotfix::testsupport
