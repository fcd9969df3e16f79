#include "node/repository/packages_index.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <streambuf>
#include <string>

namespace hotfix::node::repository {
namespace {

// apt-ftparchive's stanza for a dpkg-deb-built aks-node-controller package.
constexpr char kRealStanza[] =
    "Package: aks-node-controller\n"
    "Architecture: amd64\n"
    "Version: 202608.21.1-ubuntu22.04u1\n"
    "Priority: optional\n"
    "Section: utils\n"
    "Maintainer: AKS Node SIG <aks-node@microsoft.com>\n"
    "Installed-Size: 1\n"
    "Filename: pool/main/a/aks-node-controller/"
    "aks-node-controller_202608.21.1-ubuntu22.04u1_amd64.deb\n"
    "Size: 876\n"
    "MD5sum: 578f3dd4c3b76a03b5881ac769b79f0f\n"
    "SHA1: 77206cf50b8144ac72c98ea0c91d016eb4a0e3fd\n"
    "SHA256: 1cb78cef0b129b340c3aaeb9a8f28186b633999aee9b83b4d9b8cd4970207f4e\n"
    "SHA512: 437cce09a88efa607599d5cfc459d5cfd9c5363b8d3e4cbbecd884c947646dd4340300831a9a0388d782"
    "f5ec230f8fc9c5d0660408bd15f4f62e8a9b454df806\n"
    "Homepage: https://github.com/Azure/AgentBaker\n"
    "Description: AKS node controller\n"
    " The node agent that provisions AKS nodes.\n"
    " .\n"
    " Test build.\n"
    "\n";

constexpr char kPoolPath[] =
    "pool/main/a/aks-node-controller/aks-node-controller_202608.21.1-ubuntu22.04u1_amd64.deb";
constexpr char kSha256[] = "1cb78cef0b129b340c3aaeb9a8f28186b633999aee9b83b4d9b8cd4970207f4e";

const DebPackageQuery kQuery{"aks-node-controller", "202608.21.1-ubuntu22.04u1", "amd64"};

// An other package's stanza, as packages.microsoft.com lists hundreds before ours.
std::string OtherStanza(const std::string& package, const std::string& version,
                        const std::string& arch) {
  return "Package: " + package + "\nVersion: " + version + "\nArchitecture: " + arch +
         "\nFilename: pool/main/x/" + package + "_" + version + "_" + arch +
         ".deb\nSHA256: " + std::string(64, '0') + "\nDescription: other\n continuation\n\n";
}

StatusOr<std::optional<DebStanza>> Find(const std::string& text,
                                        const DebPackageQuery& query = kQuery) {
  std::istringstream in(text);
  return FindPackageStanza(in, query);
}

std::optional<DebStanza> FindOk(const std::string& text, const DebPackageQuery& query = kQuery) {
  StatusOr<std::optional<DebStanza>> got = Find(text, query);
  EXPECT_TRUE(got.ok()) << got.status().message();
  return got.ok() ? *got : std::nullopt;
}

TEST(FindPackageStanza, RealStanza) {
  std::optional<DebStanza> got = FindOk(kRealStanza);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->filename, kPoolPath);
  EXPECT_EQ(got->sha256, kSha256);
  EXPECT_EQ(got->package, "aks-node-controller");
  EXPECT_EQ(got->version, "202608.21.1-ubuntu22.04u1");
  EXPECT_EQ(got->architecture, "amd64");
  EXPECT_TRUE(CheckDebStanza(*got, kPoolPath).ok());
}

TEST(FindPackageStanza, ExactMatchAmongOthers) {
  const std::string text =
      OtherStanza("azure-cli", "2.64.0-1~jammy", "all") +
      OtherStanza("aks-node-controller", "202608.21.1-ubuntu22.04u10", "amd64") +
      OtherStanza("aks-node-controller", "202608.21.1-ubuntu22.04u1", "arm64") +
      OtherStanza("aks-node-controller", "202608.21.1", "amd64") +
      OtherStanza("aks-node-controller-dbg", "202608.21.1-ubuntu22.04u1", "amd64") +
      OtherStanza("Aks-node-controller", "202608.21.1-ubuntu22.04u1", "amd64") + kRealStanza +
      OtherStanza("aks-node-controller", "202608.21.1-ubuntu22.04u1", "amd64");
  std::optional<DebStanza> got = FindOk(text);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->sha256, kSha256);  // the first match, not the later duplicate
}

TEST(FindPackageStanza, NoMatchIsNullopt) {
  EXPECT_FALSE(FindOk("").has_value());
  EXPECT_FALSE(FindOk("\n\n\n").has_value());
  EXPECT_FALSE(FindOk(OtherStanza("azure-cli", "2.64.0-1~jammy", "all")).has_value());
  EXPECT_FALSE(FindOk(kRealStanza, {"aks-node-controller", "202608.21.1-ubuntu22.04u1", "arm64"})
                   .has_value());
  // A stanza missing one of the three never matches.
  EXPECT_FALSE(
      FindOk("Package: aks-node-controller\nVersion: 202608.21.1-ubuntu22.04u1\n\n").has_value());
}

TEST(FindPackageStanza, LastStanzaNeedsNoBlankLineAndCrlfIsAccepted) {
  std::string text = kRealStanza;
  text.pop_back();  // no blank line
  text.pop_back();  // no final newline
  std::optional<DebStanza> got = FindOk(text);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->sha256, kSha256);

  std::string crlf;
  for (char c : std::string(kRealStanza)) {
    if (c == '\n') crlf.push_back('\r');
    crlf.push_back(c);
  }
  got = FindOk(OtherStanza("azure-cli", "1", "all") + crlf);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->filename, kPoolPath);
}

TEST(FindPackageStanza, ContinuationLinesAreIgnored) {
  // Continuation lines that look like fields do not make a stanza match, nor change one.
  const std::string text =
      "Package: other\nVersion: 1\nArchitecture: amd64\nDescription: x\n"
      " Package: aks-node-controller\n\tVersion: 202608.21.1-ubuntu22.04u1\n\n" +
      std::string(kRealStanza).substr(0, sizeof(kRealStanza) - 2) +
      "X-Extra: y\n Filename: pool/evil.deb\n SHA256: " + std::string(64, 'e') + "\n\n";
  std::optional<DebStanza> got = FindOk(text);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->filename, kPoolPath);
  EXPECT_EQ(got->sha256, kSha256);
}

TEST(FindPackageStanza, FieldNamesAnyCaseValuesTrimmedFirstValueKept) {
  std::optional<DebStanza> got = FindOk(
      "package:   aks-node-controller  \n"
      "VERSION:\t202608.21.1-ubuntu22.04u1\n"
      "ArChItEcTuRe: amd64\n"
      "filename: first.deb\n"
      "Filename: second.deb\n"
      "sha256: " +
      std::string(kSha256) + "\n");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->filename, "first.deb");
  EXPECT_EQ(got->sha256, kSha256);
}

TEST(FindPackageStanza, WhitespaceOnlyLineEndsAStanza) {
  EXPECT_FALSE(FindOk("Package: aks-node-controller\n \t\n"
                      "Version: 202608.21.1-ubuntu22.04u1\nArchitecture: amd64\n")
                   .has_value());
}

TEST(FindPackageStanza, LinesWithoutColonAreSkipped) {
  std::optional<DebStanza> got = FindOk("garbage line\n" + std::string(kRealStanza));
  ASSERT_TRUE(got.has_value());
}

TEST(FindPackageStanza, LineLengthCap) {
  // Exactly the cap (without its "\n") is read; one byte more is a corrupt index.
  std::string at_cap = "X-Long: " + std::string(kMaxPackagesLineBytes - 8, 'x') + "\n";
  ASSERT_EQ(at_cap.size(), kMaxPackagesLineBytes + 1);
  std::optional<DebStanza> got = FindOk(at_cap + kRealStanza);
  ASSERT_TRUE(got.has_value());

  std::string over = "X-Long: " + std::string(kMaxPackagesLineBytes - 7, 'x') + "\n";
  StatusOr<std::optional<DebStanza>> refused = Find(over + kRealStanza);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(refused.status().message(), "Packages index has a line longer than 4194304 bytes");
  // The last line, without a newline, too.
  refused = Find(std::string(kMaxPackagesLineBytes + 1, 'y'));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kDataLoss);
  // A CR counts: the cap is on the bytes before "\n".
  refused = Find(std::string(kMaxPackagesLineBytes, 'y') + "\r\n");
  EXPECT_FALSE(refused.ok());
}

// A stream of generated stanzas that never exists whole: `count` other packages, then (if
// match_at < count) ours in their midst. Counts what was read.
class GeneratedIndex : public std::streambuf {
 public:
  GeneratedIndex(size_t count, size_t match_at) : count_(count), match_at_(match_at) {}
  size_t produced() const { return produced_; }

 protected:
  int_type underflow() override {
    if (next_ >= count_) return traits_type::eof();
    std::string& chunk = next_ == match_at_ ? ours_ : other_;
    ++next_;
    produced_ += chunk.size();
    setg(chunk.data(), chunk.data(), chunk.data() + chunk.size());
    return traits_type::to_int_type(chunk[0]);
  }

 private:
  size_t count_, match_at_, next_ = 0, produced_ = 0;
  std::string ours_ = kRealStanza;
  std::string other_ = OtherStanza("azure-cli", "2.64.0-1~jammy", "all");
};

TEST(FindPackageStanza, StreamsALargeIndex) {
  // 32 MiB of stanzas, ours last, produced as they are read: found without the index ever
  // being whole (the node's cap is 128 MiB; a quarter keeps the sanitized test short).
  constexpr size_t kCount = (32u << 20) / 200;
  GeneratedIndex index(kCount, kCount - 1);
  std::istream in(&index);
  StatusOr<std::optional<DebStanza>> got = FindPackageStanza(in, kQuery);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->sha256, kSha256);
  EXPECT_GT(index.produced(), size_t{30} << 20);
}

TEST(FindPackageStanza, StopsReadingAtTheMatch) {
  GeneratedIndex index(1000000, 10);
  std::istream in(&index);
  StatusOr<std::optional<DebStanza>> got = FindPackageStanza(in, kQuery);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  // One 64 KiB block and the stanza that straddles its end, at most.
  EXPECT_LT(index.produced(), size_t{80} << 10);
}

class FailingBuf : public std::streambuf {
 protected:
  int_type underflow() override { throw std::runtime_error("disk went away"); }
};

TEST(FindPackageStanza, ReadErrorsAreIoErrors) {
  FailingBuf buf;
  std::istream in(&buf);
  StatusOr<std::optional<DebStanza>> got = FindPackageStanza(in, kQuery);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kIoError);
  EXPECT_EQ(got.status().message(), "reading the Packages index failed");

  std::ifstream missing("/nonexistent/Packages");
  got = FindPackageStanza(missing, kQuery);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kIoError);
  EXPECT_EQ(got.status().message(), "the Packages index stream is not readable");
}

TEST(CheckDebStanza, FilenameMustBeThePoolPath) {
  DebStanza stanza{"pool/main/a/aks-node-controller/other.deb", kSha256, "aks-node-controller",
                   "202608.21.1-ubuntu22.04u1", "amd64"};
  Status s = CheckDebStanza(stanza, kPoolPath);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss);
  EXPECT_EQ(s.message(),
            "Packages stanza for aks-node-controller 202608.21.1-ubuntu22.04u1 amd64 has Filename "
            "\"pool/main/a/aks-node-controller/other.deb\", want \"" +
                std::string(kPoolPath) + "\"");
  stanza.filename = "";
  EXPECT_EQ(CheckDebStanza(stanza, kPoolPath).code(), Status::Code::kDataLoss);
  stanza.filename = std::string("./") + kPoolPath;
  EXPECT_EQ(CheckDebStanza(stanza, kPoolPath).code(), Status::Code::kDataLoss);
}

TEST(CheckDebStanza, Sha256MustBe64HexDigits) {
  DebStanza stanza{kPoolPath, "", "aks-node-controller", "202608.21.1-ubuntu22.04u1", "amd64"};
  for (const std::string& sha : {std::string(), std::string(63, 'a'), std::string(65, 'a'),
                                 std::string(63, 'a') + "z", std::string(63, 'a') + " "}) {
    stanza.sha256 = sha;
    Status s = CheckDebStanza(stanza, kPoolPath);
    EXPECT_EQ(s.code(), Status::Code::kDataLoss) << sha;
    EXPECT_EQ(s.message(),
              "Packages stanza for aks-node-controller 202608.21.1-ubuntu22.04u1 "
              "amd64 has no valid SHA256");
  }
  stanza.sha256 = "1CB78CEF0B129B340C3AAEB9A8F28186B633999AEE9B83B4D9B8CD4970207F4E";
  EXPECT_TRUE(CheckDebStanza(stanza, kPoolPath).ok());
}

}  // namespace
}  // namespace hotfix::node::repository
