// The layers and the service's rooms (docs/ARCHITECTURE.md) as the includes have them: every
// `#include "..."` of src/ and cmd/ that names a unit of this tree must be one the document's
// tables allow. The tables are read from the document, so changing a rule means changing the
// map, and the map cannot drift from the code.

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "markdown_table.h"
#include "service_fixture.h"
#include "text_util.h"

namespace hotfix::testsupport {
namespace {

using Rules = std::map<std::string, std::set<std::string>>;  // unit -> the units it may include

// The layers with rooms of their own, each room a folder with its table in the document.
constexpr const char* kLayersWithRooms[] = {"node", "service"};

// The unit a file of the tree belongs to: "common", "wire", "contract", "node" or "service"
// (the folder itself), "node/<room>", "service/<room>", "cmd/<program>".
std::string UnitOfFile(const std::string& relative) {
  auto under = [&](const std::string& prefix) { return relative.rfind(prefix, 0) == 0; };
  if (under("cmd/")) return relative.substr(0, relative.find('/', 4));
  for (const std::string layer : kLayersWithRooms) {
    if (!under("src/" + layer + "/")) continue;
    const std::string rest = relative.substr(layer.size() + 5);
    const size_t slash = rest.find('/');
    return slash == std::string::npos ? layer : layer + "/" + rest.substr(0, slash);
  }
  for (const char* layer : {"contract", "wire", "common"}) {
    if (under(std::string("src/") + layer + "/")) return layer;
  }
  return "";
}

// The unit an include names, or "" for what is not this tree's (generated code, build_info.h).
std::string UnitOfInclude(const std::string& include) { return UnitOfFile("src/" + include); }

bool IsLayerBelowRooms(const std::string& token) {
  return token == "common" || token == "wire" || token == "contract";
}

// One layer's rooms table (`header`), in its order: each room's links name rooms of the layer
// (or "all of the above", "all rooms") and the layers below (common, wire, contract). Returns
// the rooms; their rules go into `rules`.
std::vector<std::string> ReadRoomTable(const std::string& doc, const std::string& header,
                                       const std::string& layer, Rules& rules) {
  std::vector<std::string> rooms;
  std::map<std::string, std::string> links;
  for (const auto& cells : MarkdownTableRows(doc, header)) {
    if (cells.size() < 4) continue;
    const std::vector<std::string> name = Backticked(cells[0]);
    const std::string room =
        name.empty() ? layer : layer + "/" + name[0].substr(0, name[0].size() - 1);
    rooms.push_back(room);
    links[room] = cells[3];
  }
  std::set<std::string> above;  // rooms read so far, and what they may include
  for (const std::string& room : rooms) {
    std::set<std::string>& allowed = rules[room];
    const std::string& cell = links[room];
    if (cell.find("all rooms") != std::string::npos) {
      allowed.insert(rooms.begin(), rooms.end());
    } else if (cell.find("all of the above") != std::string::npos) {
      allowed.insert(above.begin(), above.end());
    }
    std::istringstream list(cell);
    for (std::string token; std::getline(list, token, ',');) {
      token = std::regex_replace(token, std::regex(R"(^\s+|\s+$)"), "");
      if (IsLayerBelowRooms(token)) {
        allowed.insert(token);
      } else if (!token.empty() && token.find(' ') == std::string::npos) {
        allowed.insert(layer + "/" + token);
      }
    }
    allowed.insert({"common", "wire", "contract"});  // the layers below ("may include")
    above.insert(room);
  }
  return rooms;
}

// The rules the tables state: the layers' and each layer's rooms'.
Rules ReadRules(const std::string& doc) {
  Rules rules;
  std::map<std::string, std::vector<std::string>> rooms;
  rooms["service"] = ReadRoomTable(doc, "| room | files | what it is | links |", "service", rules);
  rooms["node"] = ReadRoomTable(doc, "| node room | files | what it is | links |", "node", rules);
  EXPECT_GE(rooms["service"].size(), 7u) << "the service's rooms table was not found whole";
  EXPECT_GE(rooms["node"].size(), 7u) << "the node's rooms table was not found whole";
  // The layers.
  for (const auto& cells : MarkdownTableRows(doc, "| unit | may include |")) {
    if (cells.size() < 2) continue;
    const std::vector<std::string> unit = Backticked(cells[0]);
    if (unit.empty()) continue;
    const std::string name = unit[0].rfind("src/", 0) == 0 ? unit[0].substr(4) : unit[0];
    if (rooms.count(name) > 0) continue;  // its rooms' table says
    std::set<std::string>& allowed = rules[name];
    for (const std::string& target : Backticked(cells[1])) {
      if (rooms.count(target) > 0) {
        allowed.insert(rooms[target].begin(), rooms[target].end());  // "<layer> and its rooms"
      } else {
        allowed.insert(target);
      }
    }
  }
  return rules;
}

TEST(ArchitectureRuleTest, EveryIncludeIsAnArrowTheMapAllows) {
  const std::filesystem::path root = SourceDir();
  const Rules rules = ReadRules(ReadFile(root / "docs/ARCHITECTURE.md"));
  for (const char* unit :
       {"cmd/hotfix-agent", "cmd/live-patching-service", "node", "node/repository", "node/check",
        "node/go", "contract", "wire", "common", "service", "service/transport"}) {
    EXPECT_EQ(rules.count(unit), 1u) << unit << " has no rule in docs/ARCHITECTURE.md";
  }
  EXPECT_TRUE(rules.at("common").empty());
  EXPECT_TRUE(rules.at("contract").empty());
  size_t files = 0, includes = 0;
  const std::regex include(R"re(^\s*#\s*include\s+"([^"]+)")re");
  for (const char* top : {"src", "cmd"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / top)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
      const std::string relative = std::filesystem::relative(entry.path(), root).string();
      const std::string from = UnitOfFile(relative);
      ASSERT_FALSE(from.empty()) << relative << " is in no unit of the map";
      ASSERT_EQ(rules.count(from), 1u) << relative << ": no rule for " << from;
      ++files;
      std::istringstream in(ReadFile(entry.path()));
      for (std::string line; std::getline(in, line);) {
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const std::string to = UnitOfInclude(m[1]);
        if (to.empty() || to == from) continue;
        ++includes;
        EXPECT_EQ(rules.at(from).count(to), 1u)
            << relative << " includes \"" << m[1] << "\": " << from << " -> " << to
            << " is not an arrow docs/ARCHITECTURE.md allows";
      }
    }
  }
  EXPECT_GT(files, 200u);
  EXPECT_GT(includes, 300u);
}

// The reader above finds what it is meant to: a made-up upward arrow fails it.
TEST(ArchitectureRuleTest, TheRulesForbidAnUpwardArrow) {
  const Rules rules =
      ReadRules(ReadFile(std::filesystem::path(SourceDir()) / "docs/ARCHITECTURE.md"));
  EXPECT_EQ(rules.at("service/rollout").count("service/store"), 0u);
  EXPECT_EQ(rules.at("service/store").count("service/rollout"), 1u);
  EXPECT_EQ(rules.at("service/identity").count("service/transport"), 0u);
  EXPECT_EQ(rules.at("service/ops").count("service/control"), 1u);
  EXPECT_EQ(rules.at("service").count("service/ops"), 1u);
  EXPECT_EQ(rules.at("wire").count("node"), 0u);
  EXPECT_EQ(rules.at("node").count("service"), 0u);
  EXPECT_EQ(rules.at("node").count("contract"), 1u);
  EXPECT_EQ(rules.at("node/go").count("node/host"), 0u);
  EXPECT_EQ(rules.at("node/host").count("node/go"), 1u);
  EXPECT_EQ(rules.at("node/call").count("node/check"), 0u);
  EXPECT_EQ(rules.at("node/check").count("node/download"), 0u);
  EXPECT_EQ(rules.at("node/download").count("node/repository"), 1u);
  EXPECT_EQ(rules.at("node").count("node/download"), 1u);
  EXPECT_EQ(rules.at("cmd/hotfix-agent").count("node/check"), 1u);
  EXPECT_EQ(rules.at("contract").count("node"), 0u);
  EXPECT_EQ(rules.at("cmd/hotfix-agent").count("service"), 0u);
  EXPECT_EQ(rules.at("cmd/live-patching-service").count("service/transport"), 1u);
}

}  // namespace
}  // namespace hotfix::testsupport
