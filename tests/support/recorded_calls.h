// Stand-ins for the programs download-hotfix runs (apt-get, dpkg, dnf, rpm...), first on PATH
// in the end-to-end tests: each records its argv, then runs the test's body. Header-only.
//
//   node.Write("fakebin/apt-get", std::string(kRecordCall) + "exit 0\n");   // chmod 0755
//   spawn.env["FAKE_DIR"] = node.path();  ...  RecordedCalls(node.Read("calls"))
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace hotfix::testsupport {

// A stand-in's first lines: appends "<name>\x1f<arg>\x1f<arg>...\n" to $FAKE_DIR/calls.
inline constexpr char kRecordCall[] =
    "#!/bin/sh\n"
    "{ printf '%s' \"$(basename \"$0\")\"; for a in \"$@\"; do printf '\\037%s' \"$a\"; done;"
    " printf '\\n'; } >> \"$FAKE_DIR/calls\"\n";

// Each call recorded in that file's text, as its argv (the program's name first).
inline std::vector<std::vector<std::string>> RecordedCalls(const std::string& text) {
  std::vector<std::vector<std::string>> calls;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> argv;
    size_t start = 0;
    for (size_t sep; (sep = line.find('\x1f', start)) != std::string::npos; start = sep + 1) {
      argv.push_back(line.substr(start, sep - start));
    }
    argv.push_back(line.substr(start));
    calls.push_back(argv);
  }
  return calls;
}

}  // namespace hotfix::testsupport
