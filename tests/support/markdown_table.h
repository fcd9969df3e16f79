// The tables of this repository's Markdown documents, for the tests that hold the documents
// against the tree (architecture_rule_test, docs_current_test).
//
//   for (const auto& cells : MarkdownTableRows(doc, "| part | what |")) ...
//   Backticked("`go/`, `host/`")   // {"go/", "host/"}
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace hotfix::testsupport {

// The cells of each row of the table whose header row starts with `header` (the header and
// the |---| row skipped; the table ends at the first line not starting with '|'). A test
// failure (not an exception) when no such table exists, and then no rows. Header-only, like
// rollout_example.h: it reports through gtest.
inline std::vector<std::vector<std::string>> MarkdownTableRows(const std::string& doc,
                                                               const std::string& header) {
  std::vector<std::vector<std::string>> rows;
  const size_t at = doc.find(header);
  EXPECT_NE(at, std::string::npos) << "no table headed " << header;
  if (at == std::string::npos) return rows;
  std::istringstream in(doc.substr(at));
  std::string line;
  std::getline(in, line);  // the header
  std::getline(in, line);  // |---|
  while (std::getline(in, line) && line.rfind("|", 0) == 0) {
    std::vector<std::string> cells;
    std::istringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

// The `quoted` words of a cell, in order.
inline std::vector<std::string> Backticked(const std::string& text) {
  std::vector<std::string> out;
  for (size_t open = text.find('`'); open != std::string::npos;) {
    const size_t close = text.find('`', open + 1);
    if (close == std::string::npos) break;
    out.push_back(text.substr(open + 1, close - open - 1));
    open = text.find('`', close + 1);
  }
  return out;
}

}  // namespace hotfix::testsupport
