// The documents that describe the tree against the tree itself, so that they cannot drift
// unnoticed: the README's parts of the test command are scripts/test.sh's, in order, and so
// are the latest measured run's in docs/BENCHMARKS.md; the room tables of
// docs/ARCHITECTURE.md name every file of each room and no file that is not there; and every
// docs/*.md a source file, test or script cites exists.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
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

namespace fs = std::filesystem;

// scripts/test.sh's parts, in the order it runs them: its `part NAME` lines.
std::vector<std::string> TestCommandParts() {
  std::vector<std::string> parts;
  std::istringstream in(ReadFile(fs::path(SourceDir()) / "scripts/test.sh"));
  const std::regex part(R"(^\s*part ([a-z][a-z-]*)\s*$)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, part)) parts.push_back(m[1]);
  }
  return parts;
}

TEST(DocsCurrentTest, TheReadmeListsTheTestCommandsPartsInOrder) {
  const std::vector<std::string> parts = TestCommandParts();
  ASSERT_GE(parts.size(), 8u);
  std::vector<std::string> listed;
  for (const auto& row :
       MarkdownTableRows(ReadFile(fs::path(SourceDir()) / "README.md"), "| part | what |")) {
    for (const std::string& name : Backticked(row.at(0))) listed.push_back(name);
  }
  EXPECT_EQ(listed, parts) << "README.md's table of scripts/test.sh's parts";
}

TEST(DocsCurrentTest, TheLatestMeasuredRunHasEveryPart) {
  const std::string doc = ReadFile(fs::path(SourceDir()) / "docs/BENCHMARKS.md");
  const size_t section = doc.find("## The test command's time");
  ASSERT_NE(section, std::string::npos);
  const size_t measurements = doc.find("### Measurements", section);
  ASSERT_NE(measurements, std::string::npos);
  std::vector<std::string> measured;
  for (const auto& row : MarkdownTableRows(doc.substr(measurements), "| part | wall |")) {
    std::string name = row.at(0);
    name = std::regex_replace(name, std::regex(R"(\*|\(.*\)|^\s+|\s+$)"), "");
    if (name != "total") measured.push_back(name);
  }
  EXPECT_EQ(measured, TestCommandParts()) << "docs/BENCHMARKS.md, the latest run's table";
}

// The room tables: every file named is in its room's folder, and every file there is named.
void CheckRoomTable(const std::string& doc, const std::string& header, const std::string& layer) {
  const fs::path root = fs::path(SourceDir()) / "src" / layer;
  size_t rooms = 0;
  for (const auto& row : MarkdownTableRows(doc, header)) {
    ASSERT_GE(row.size(), 2u);
    const std::vector<std::string> name = Backticked(row[0]);
    const fs::path folder = name.empty() ? root : root / name[0];
    ++rooms;
    std::set<std::string> named, present;
    for (std::string unit : Backticked(row[1])) {
      if (unit.ends_with(".h")) unit.resize(unit.size() - 2);
      named.insert(unit);
    }
    for (const auto& entry : fs::directory_iterator(folder)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file() && (ext == ".h" || ext == ".cc")) {
        present.insert(entry.path().stem().string());
      }
    }
    EXPECT_EQ(named, present) << "docs/ARCHITECTURE.md's row for " << folder.string();
  }
  EXPECT_GE(rooms, 7u) << header;
}

TEST(DocsCurrentTest, TheRoomTablesNameEveryFileOfEachRoom) {
  const std::string doc = ReadFile(fs::path(SourceDir()) / "docs/ARCHITECTURE.md");
  CheckRoomTable(doc, "| room | files | what it is | links |", "service");
  CheckRoomTable(doc, "| node room | files | what it is | links |", "node");
}

// The Markdown paths under docs/ that `text` names (a plain scan: std::regex is far too slow
// for the tree).
std::vector<std::string> CitedDocs(const std::string& text) {
  std::vector<std::string> cited;
  auto path_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '/' ||
           c == '.';
  };
  for (size_t at = text.find("docs/"); at != std::string::npos; at = text.find("docs/", at + 5)) {
    if (at > 0 && path_char(text[at - 1]) && text[at - 1] != '.') continue;  // ".../docs/"
    size_t end = at + 5;
    while (end < text.size() && path_char(text[end])) ++end;
    std::string path = text.substr(at, end - at);
    while (!path.empty() && path.back() == '.') path.pop_back();  // a sentence's full stop
    if (path.ends_with(".md")) cited.push_back(path);
  }
  return cited;
}

TEST(DocsCurrentTest, EveryDocumentTheTreeCitesExists) {
  const fs::path root = SourceDir();
  size_t citations = 0;
  for (const char* top : {"src", "cmd", "tests", "scripts", "bench", "deploy"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      if (!entry.is_regular_file() || entry.file_size() > (1u << 20)) continue;
      const std::string ext = entry.path().extension().string();
      if (ext != ".cc" && ext != ".h" && ext != ".sh" && ext != ".yml" && ext != ".yaml" &&
          ext != ".txt" && ext != ".md") {
        continue;
      }
      for (const std::string& path : CitedDocs(ReadFile(entry.path()))) {
        ++citations;
        EXPECT_TRUE(fs::exists(root / path))
            << fs::relative(entry.path(), root).string() << " cites " << path;
      }
    }
  }
  EXPECT_GT(citations, 100u);
}

}  // namespace
}  // namespace hotfix::testsupport
