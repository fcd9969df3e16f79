#include "node/repository/repo_metadata_xml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <streambuf>
#include <string>

namespace hotfix::node::repository {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// createrepo_c 0.20's repomd.xml for a one-package repository (gzip'ed primary first; the
// other entries as it writes them).
constexpr char kRealRepomd[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<repomd xmlns=\"http://linux.duke.edu/metadata/repo\" "
    "xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\">\n"
    "  <revision>1796591416</revision>\n"
    "  <data type=\"primary\">\n"
    "    <checksum type=\"sha256\">"
    "1c6c9d9a8ba1079a7281c197d2492833ce0c6ab886576cfe499897b80e1a647a</checksum>\n"
    "    <open-checksum type=\"sha256\">"
    "60ca96832db7f4cbb0ae19d283fabf2e3adfc7dcb80780fe9358b74a98aefc42</open-checksum>\n"
    "    <location href=\"repodata/"
    "1c6c9d9a8ba1079a7281c197d2492833ce0c6ab886576cfe499897b80e1a647a-primary.xml.gz\"/>\n"
    "    <timestamp>1796591416</timestamp>\n"
    "    <size>635</size>\n"
    "    <open-size>1406</open-size>\n"
    "  </data>\n"
    "  <data type=\"filelists\">\n"
    "    <checksum type=\"sha256\">"
    "bf5ab7d10a6f39d1cb9720be504aca90fea07d000ab58d71d978dcd55c99b26a</checksum>\n"
    "    <open-checksum type=\"sha256\">"
    "4f76497e2726e55f0d9e55f43ea157b3dbd79944618f462fe4cafa764bbb18ff</open-checksum>\n"
    "    <location href=\"repodata/"
    "bf5ab7d10a6f39d1cb9720be504aca90fea07d000ab58d71d978dcd55c99b26a-filelists.xml.gz\"/>\n"
    "    <timestamp>1796591416</timestamp>\n"
    "    <size>266</size>\n"
    "    <open-size>358</open-size>\n"
    "  </data>\n"
    "  <data type=\"primary_db\">\n"
    "    <checksum type=\"sha256\">"
    "8037d7c4e323e803d180252d519cc680bd5acdce12995702bb300ac7b5ccd087</checksum>\n"
    "    <open-checksum type=\"sha256\">"
    "101c8d5b14d8a424ef1554183353c3227027dee353ee1f052f14e618c96f498f</open-checksum>\n"
    "    <location href=\"repodata/"
    "8037d7c4e323e803d180252d519cc680bd5acdce12995702bb300ac7b5ccd087-primary.sqlite.gz\"/>\n"
    "    <timestamp>1796591416</timestamp>\n"
    "    <size>2001</size>\n"
    "    <open-size>106496</open-size>\n"
    "    <database_version>10</database_version>\n"
    "  </data>\n"
    "</repomd>\n";

constexpr char kPrimaryHref[] =
    "repodata/1c6c9d9a8ba1079a7281c197d2492833ce0c6ab886576cfe499897b80e1a647a-primary.xml.gz";

// A repomd.xml with one primary entry made of these children.
std::string Repomd(const std::string& children) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<repomd xmlns=\"http://linux.duke.edu/metadata/repo\">\n"
         "  <data type=\"primary\">\n" +
         children + "  </data>\n</repomd>\n";
}

const std::string kSum = "<checksum type=\"sha256\">" + std::string(64, 'a') + "</checksum>\n";
const std::string kLocation = "<location href=\"repodata/p.xml.gz\"/>\n";

void ExpectRepomdError(const std::string& xml, Status::Code code, const std::string& message) {
  StatusOr<RepomdData> got = ParseRepomdPrimary(xml);
  ASSERT_FALSE(got.ok()) << xml;
  EXPECT_EQ(got.status().code(), code) << got.status().message();
  EXPECT_EQ(got.status().message(), message);
}

TEST(ParseRepomdPrimary, CreaterepoOutput) {
  StatusOr<RepomdData> got = ParseRepomdPrimary(kRealRepomd);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->href, kPrimaryHref);
  EXPECT_EQ(got->sha256, "1c6c9d9a8ba1079a7281c197d2492833ce0c6ab886576cfe499897b80e1a647a");
  EXPECT_EQ(got->size, 635u);
  EXPECT_EQ(got->open_sha256, "60ca96832db7f4cbb0ae19d283fabf2e3adfc7dcb80780fe9358b74a98aefc42");
  EXPECT_EQ(got->open_size, 1406u);
}

TEST(ParseRepomdPrimary, OptionalPartsAndCase) {
  StatusOr<RepomdData> got = ParseRepomdPrimary(Repomd(
      "<checksum type=\"SHA256\">\n  " + std::string(64, 'F') + "\n</checksum>\n" + kLocation));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->sha256, std::string(64, 'f'));
  EXPECT_EQ(got->href, "repodata/p.xml.gz");
  EXPECT_FALSE(got->size.has_value());
  EXPECT_FALSE(got->open_sha256.has_value());
  EXPECT_FALSE(got->open_size.has_value());
  got = ParseRepomdPrimary(Repomd(kSum + kLocation + "<size> 0 </size><open-size>7</open-size>"));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size, 0u);
  EXPECT_EQ(got->open_size, 7u);
}

TEST(ParseRepomdPrimary, NamespacesNotPrefixes) {
  // Any prefix bound to the repo namespace is the same element.
  StatusOr<RepomdData> got = ParseRepomdPrimary(
      "<r:repomd xmlns:r=\"http://linux.duke.edu/metadata/repo\"><r:data type=\"primary\">"
      "<r:checksum type=\"sha256\">" +
      std::string(64, 'b') + "</r:checksum><r:location href=\"p.gz\"/></r:data></r:repomd>");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->href, "p.gz");
  // Without the namespace, or with the usual prefix bound elsewhere, it is not repomd.
  const std::string no_primary = "repomd.xml has no primary data entry";
  ExpectRepomdError("<repomd><data type=\"primary\">" + kSum + kLocation + "</data></repomd>",
                    Status::Code::kFailedPrecondition, no_primary);
  ExpectRepomdError(
      "<repomd xmlns=\"http://linux.duke.edu/metadata/repo\">"
      "<x:data xmlns:x=\"http://example/other\" type=\"primary\">" +
          kSum + kLocation + "</x:data></repomd>",
      Status::Code::kFailedPrecondition, no_primary);
  // A checksum in another namespace is not the entry's checksum.
  ExpectRepomdError(Repomd("<x:checksum xmlns:x=\"http://example/other\" type=\"sha256\">" +
                           std::string(64, 'a') + "</x:checksum>" + kLocation),
                    Status::Code::kFailedPrecondition,
                    "repomd.xml primary checksum type is \"\", not sha256");
}

TEST(ParseRepomdPrimary, NoPrimaryEntry) {
  const std::string message = "repomd.xml has no primary data entry";
  ExpectRepomdError("<repomd xmlns=\"http://linux.duke.edu/metadata/repo\"/>",
                    Status::Code::kFailedPrecondition, message);
  ExpectRepomdError(
      "<repomd xmlns=\"http://linux.duke.edu/metadata/repo\">"
      "<data type=\"primary_db\">" +
          kSum + kLocation + "</data><data type=\"Primary\"/></repomd>",
      Status::Code::kFailedPrecondition, message);
  // Only a <data> child of <repomd> counts.
  ExpectRepomdError(
      "<repomd xmlns=\"http://linux.duke.edu/metadata/repo\"><tags>"
      "<data type=\"primary\">" +
          kSum + kLocation + "</data></tags></repomd>",
      Status::Code::kFailedPrecondition, message);
}

TEST(ParseRepomdPrimary, TheFirstPrimaryCounts) {
  StatusOr<RepomdData> got = ParseRepomdPrimary(
      "<repomd xmlns=\"http://linux.duke.edu/metadata/repo\"><data type=\"primary\">" + kSum +
      "<location href=\"first\"/><location href=\"second\"/></data><data type=\"primary\">"
      "<checksum type=\"md5\">x</checksum></data></repomd>");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->href, "first");
}

TEST(ParseRepomdPrimary, ChecksumsTheNodeCannotCheckAreUnsupported) {
  ExpectRepomdError(
      Repomd("<checksum type=\"sha\">" + std::string(40, 'a') + "</checksum>" + kLocation),
      Status::Code::kFailedPrecondition, "repomd.xml primary checksum type is \"sha\", not sha256");
  ExpectRepomdError(
      Repomd("<checksum type=\"sha512\">" + std::string(128, 'a') + "</checksum>" + kLocation),
      Status::Code::kFailedPrecondition,
      "repomd.xml primary checksum type is \"sha512\", not sha256");
  ExpectRepomdError(Repomd(kLocation), Status::Code::kFailedPrecondition,
                    "repomd.xml primary checksum type is \"\", not sha256");
  for (const std::string& hex :
       {std::string(63, 'a'), std::string(65, 'a'), std::string(63, 'a') + "g",
        std::string(32, 'a') + " " + std::string(32, 'a')}) {
    ExpectRepomdError(Repomd("<checksum type=\"sha256\">" + hex + "</checksum>" + kLocation),
                      Status::Code::kFailedPrecondition,
                      "repomd.xml primary sha256 is not 64 hex digits");
  }
  // Text past the per-element bound reads as invalid, not as a longer buffer.
  ExpectRepomdError(Repomd("<checksum type=\"sha256\">" + std::string(64, 'a') +
                           std::string(kMaxXmlTextBytes, ' ') + "</checksum>" + kLocation),
                    Status::Code::kFailedPrecondition,
                    "repomd.xml primary sha256 is not 64 hex digits");
  ExpectRepomdError(Repomd(kSum + "<open-checksum type=\"sha512\">" + std::string(128, 'a') +
                           "</open-checksum>" + kLocation),
                    Status::Code::kFailedPrecondition,
                    "repomd.xml primary open-checksum type is \"sha512\", not sha256");
  ExpectRepomdError(Repomd(kSum + "<open-checksum type=\"sha256\">abc</open-checksum>" + kLocation),
                    Status::Code::kFailedPrecondition,
                    "repomd.xml primary open-checksum sha256 is not 64 hex digits");
}

TEST(ParseRepomdPrimary, EmptyLocationAndBadSizesAreDataLoss) {
  const std::string empty = "repomd.xml primary entry has an empty location href";
  ExpectRepomdError(Repomd(kSum), Status::Code::kDataLoss, empty);
  ExpectRepomdError(Repomd(kSum + "<location/>"), Status::Code::kDataLoss, empty);
  ExpectRepomdError(Repomd(kSum + "<location href=\"\"/>"), Status::Code::kDataLoss, empty);
  // The unsupported checksum is reported before the empty location.
  ExpectRepomdError(Repomd("<checksum type=\"md5\">x</checksum>"),
                    Status::Code::kFailedPrecondition,
                    "repomd.xml primary checksum type is \"md5\", not sha256");
  for (const char* size : {"-1", "+1", "1.5", "", "0x10", "18446744073709551616"}) {
    ExpectRepomdError(
        Repomd(kSum + kLocation + "<size>" + size + "</size>"), Status::Code::kDataLoss,
        std::string("repomd.xml primary size \"") + size + "\" is not a decimal integer");
  }
  ExpectRepomdError(Repomd(kSum + kLocation + "<open-size>x</open-size>"), Status::Code::kDataLoss,
                    "repomd.xml primary open-size \"x\" is not a decimal integer");
}

TEST(ParseRepomdPrimary, ParseErrorsAreDataLoss) {
  for (const std::string& xml : {
           std::string(),
           std::string(kRealRepomd).substr(0, 400),
           std::string("<repomd xmlns=\"http://linux.duke.edu/metadata/repo\"></data>"),
           std::string(kRealRepomd) + "<trailing/>",
           std::string("<?xml version=\"1.0\" encoding=\"EBCDIC-US\"?><repomd/>"),
           std::string(
               "<repomd xmlns=\"http://linux.duke.edu/metadata/repo\">&undefined;</repomd>"),
           std::string("<a:repomd/>"),  // an unbound prefix
           std::string("\xff\xfe<repomd/>"),
       }) {
    StatusOr<RepomdData> got = ParseRepomdPrimary(xml);
    ASSERT_FALSE(got.ok()) << xml;
    EXPECT_EQ(got.status().code(), Status::Code::kDataLoss) << xml;
    EXPECT_THAT(got.status().message(), StartsWith("repomd.xml is not well-formed XML: ")) << xml;
  }
  StatusOr<RepomdData> got = ParseRepomdPrimary("<repomd>");
  EXPECT_EQ(got.status().message(),
            "repomd.xml is not well-formed XML: no element found at line 1 column 8");
}

TEST(ParseRepomdPrimary, DocumentTypeDeclarationsAreRefused) {
  const std::string refused = "repomd.xml has a document type declaration, which is refused";
  // Billion laughs, an external entity (XXE), a plain DOCTYPE, and one after a comment.
  ExpectRepomdError(
      "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n <!ENTITY lol \"lol\">\n"
      " <!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">\n"
      " <!ENTITY lol3 \"&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;\">\n]>\n"
      "<repomd xmlns=\"http://linux.duke.edu/metadata/repo\">&lol3;</repomd>",
      Status::Code::kDataLoss, refused);
  ExpectRepomdError(
      "<!DOCTYPE repomd [<!ENTITY xxe SYSTEM \"file:///etc/shadow\">]>"
      "<repomd xmlns=\"http://linux.duke.edu/metadata/repo\"><data type=\"primary\">"
      "<location href=\"&xxe;\"/></data></repomd>",
      Status::Code::kDataLoss, refused);
  ExpectRepomdError("<!DOCTYPE repomd SYSTEM \"http://example/repomd.dtd\"><repomd/>",
                    Status::Code::kDataLoss, refused);
  ExpectRepomdError(std::string("<!-- c --><!DOCTYPE repomd>") + kRealRepomd,
                    Status::Code::kDataLoss, refused);
}

TEST(ParseRepomdPrimary, DepthAndMarkupAreBounded) {
  std::string deep;
  for (int i = 0; i < kMaxXmlDepth; ++i) deep += "<a>";
  for (int i = 0; i < kMaxXmlDepth; ++i) deep += "</a>";
  ExpectRepomdError(deep, Status::Code::kFailedPrecondition,
                    "repomd.xml has no primary data entry");
  ExpectRepomdError("<b>" + deep + "</b>", Status::Code::kDataLoss,
                    "repomd.xml nests elements deeper than 64");
  const std::string long_markup = "repomd.xml has markup longer than 1048576 bytes";
  ExpectRepomdError(Repomd(kSum + "<location href=\"" + std::string(2 << 20, 'x') + "\"/>"),
                    Status::Code::kDataLoss, long_markup);
  ExpectRepomdError(Repomd(kSum + kLocation + "<!--" + std::string(2 << 20, 'x') + "-->"),
                    Status::Code::kDataLoss, long_markup);
  // Long text is streamed, not markup: a 4 MiB element the reader does not keep is fine.
  StatusOr<RepomdData> got = ParseRepomdPrimary(
      Repomd(kSum + kLocation + "<description>" + std::string(4 << 20, 'x') + "</description>"));
  EXPECT_TRUE(got.ok()) << got.status().message();
}

// primary.xml as createrepo_c writes it, one <package> per call.
std::string Package(
    const std::string& name = "aks-node-controller", const std::string& arch = "x86_64",
    const std::string& ver = "202608.21.1", const std::string& rel = "1.azl3",
    const std::string& href = "Packages/a/aks-node-controller-202608.21.1-1.azl3.x86_64.rpm",
    const std::string& checksum =
        "<checksum type=\"sha256\" pkgid=\"YES\">"
        "66c0b56eb3b0dc0702fc5e9a530790ed11ef0731c56ee513bf352040e551e43f"
        "</checksum>",
    const std::string& size =
        "<size package=\"6343\" installed=\"18\" "
        "archive=\"284\"/>") {
  return "<package type=\"rpm\">\n"
         "  <name>" +
         name +
         "</name>\n"
         "  <arch>" +
         arch +
         "</arch>\n"
         "  <version epoch=\"0\" ver=\"" +
         ver + "\" rel=\"" + rel +
         "\"/>\n"
         "  " +
         checksum +
         "\n"
         "  <summary>AKS node controller</summary>\n"
         "  <description>AKS node controller test package.</description>\n"
         "  <packager></packager>\n"
         "  <url></url>\n"
         "  <time file=\"1796591415\" build=\"1796591415\"/>\n"
         "  " +
         size +
         "\n"
         "  <location href=\"" +
         href +
         "\"/>\n"
         "  <format>\n"
         "    <rpm:license>MIT</rpm:license>\n"
         "    <rpm:vendor></rpm:vendor>\n"
         "    <rpm:group>Unspecified</rpm:group>\n"
         "    <rpm:buildhost>vm</rpm:buildhost>\n"
         "    <rpm:sourcerpm>" +
         name + "-" + ver + "-" + rel +
         ".src.rpm</rpm:sourcerpm>\n"
         "    <rpm:header-range start=\"4504\" end=\"6217\"/>\n"
         "    <rpm:provides>\n"
         "      <rpm:entry name=\"" +
         name + "\" flags=\"EQ\" epoch=\"0\" ver=\"" + ver + "\" rel=\"" + rel +
         "\"/>\n"
         "    </rpm:provides>\n"
         "    <rpm:requires>\n"
         "      <rpm:entry name=\"/bin/sh\"/>\n"
         "    </rpm:requires>\n"
         "    <file>/usr/bin/" +
         name +
         "</file>\n"
         "  </format>\n"
         "</package>\n";
}

constexpr char kPrimaryHead[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<metadata xmlns=\"http://linux.duke.edu/metadata/common\" "
    "xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\" packages=\"1\">\n";
constexpr char kPrimaryTail[] = "</metadata>\n";

std::string Primary(const std::string& packages) { return kPrimaryHead + packages + kPrimaryTail; }

const RpmQuery kRpmQuery{"aks-node-controller", "x86_64", "202608.21.1", "1.azl3",
                         "Packages/a/aks-node-controller-202608.21.1-1.azl3.x86_64.rpm"};

StatusOr<std::optional<RpmPackageEntry>> FindIn(const std::string& xml,
                                                const RpmQuery& query = kRpmQuery) {
  std::istringstream in(xml);
  return FindPrimaryPackage(in, query);
}

void ExpectPrimaryError(const std::string& xml, Status::Code code, const std::string& message) {
  StatusOr<std::optional<RpmPackageEntry>> got = FindIn(xml);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), code) << got.status().message();
  EXPECT_EQ(got.status().message(), message);
}

TEST(FindPrimaryPackage, CreaterepoOutput) {
  StatusOr<std::optional<RpmPackageEntry>> got = FindIn(Primary(Package()));
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->href, kRpmQuery.expected_href);
  EXPECT_EQ((*got)->sha256, "66c0b56eb3b0dc0702fc5e9a530790ed11ef0731c56ee513bf352040e551e43f");
  EXPECT_EQ((*got)->size, 6343u);
}

TEST(FindPrimaryPackage, ExactMatchOnNameArchVerRel) {
  const std::string others = Package("aks-node-controller", "aarch64") +
                             Package("aks-node-controller", "x86_64", "202608.21.10") +
                             Package("aks-node-controller", "x86_64", "202608.21.1", "1.azl3x") +
                             Package("aks-node-controller-debuginfo") +
                             Package("AKS-node-controller") +
                             Package("aks-node-controller", "x86_64", "202608.21.1", "2.azl3");
  StatusOr<std::optional<RpmPackageEntry>> got = FindIn(Primary(others));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_FALSE(got->has_value());
  // Others around ours, an epoch and whitespace around the name and arch do not matter.
  std::string ours = Package(" aks-node-controller\n", "\tx86_64 ");
  size_t epoch = ours.find("epoch=\"0\"");
  ours.replace(epoch, 9, "epoch=\"3\"");
  got = FindIn(Primary(
      others + ours +
      Package("aks-node-controller", "x86_64", "202608.21.1", "1.azl3", "Packages/a/other.rpm")));
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->href, kRpmQuery.expected_href);
}

TEST(FindPrimaryPackage, OnlyDirectCommonChildrenCount) {
  // The provides entry names the package but is rpm:entry under format, not <name>.
  std::string pkg = Package("other-package");
  pkg.insert(pkg.find("    </rpm:provides>"),
             "      <rpm:entry name=\"aks-node-controller\" ver=\"202608.21.1\" "
             "rel=\"1.azl3\"/>\n      <name>aks-node-controller</name>\n");
  StatusOr<std::optional<RpmPackageEntry>> got = FindIn(Primary(pkg));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_FALSE(got->has_value());
  // A package in another namespace, or a <package> not under <metadata>, is not one.
  got = FindIn(
      "<metadata xmlns=\"http://example/other\" "
      "xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\">" +
      Package() + "</metadata>");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_FALSE(got->has_value());
  got = FindIn(Primary("<group>" + Package() + "</group>"));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_FALSE(got->has_value());
  // The common namespace under any prefix is.
  std::string prefixed =
      "<c:metadata xmlns:c=\"http://linux.duke.edu/metadata/common\" "
      "xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\">"
      "<c:package><c:name>aks-node-controller</c:name><c:arch>x86_64</c:arch>"
      "<c:version ver=\"202608.21.1\" rel=\"1.azl3\"/>"
      "<c:checksum type=\"sha256\">" +
      std::string(64, 'A') + "</c:checksum><c:location href=\"" + kRpmQuery.expected_href +
      "\"/></c:package></c:metadata>";
  got = FindIn(prefixed);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->sha256, std::string(64, 'a'));
  EXPECT_FALSE((*got)->size.has_value());
}

TEST(FindPrimaryPackage, TheMatchMustBeWellFormed) {
  const std::string who = "primary.xml package aks-node-controller-202608.21.1-1.azl3.x86_64";
  ExpectPrimaryError(
      Primary(Package("aks-node-controller", "x86_64", "202608.21.1", "1.azl3",
                      "Packages/a/other.rpm")),
      Status::Code::kDataLoss,
      who + " has location \"Packages/a/other.rpm\", want \"" + kRpmQuery.expected_href + "\"");
  ExpectPrimaryError(Primary(Package("aks-node-controller", "x86_64", "202608.21.1", "1.azl3",
                                     "../" + kRpmQuery.expected_href)),
                     Status::Code::kDataLoss,
                     who + " has location \"../" + kRpmQuery.expected_href + "\", want \"" +
                         kRpmQuery.expected_href + "\"");
  for (const std::string& checksum : {
           std::string("<checksum type=\"sha\">") + std::string(40, 'a') + "</checksum>",
           std::string("<checksum type=\"sha256\">") + std::string(63, 'a') + "</checksum>",
           std::string("<checksum type=\"sha256\">") + std::string(64, 'z') + "</checksum>",
           std::string("<checksum>") + std::string(64, 'a') + "</checksum>",
           std::string("<summary/>"),
       }) {
    ExpectPrimaryError(Primary(Package("aks-node-controller", "x86_64", "202608.21.1", "1.azl3",
                                       kRpmQuery.expected_href, checksum)),
                       Status::Code::kDataLoss, who + " has no valid sha256 checksum");
  }
  ExpectPrimaryError(
      Primary(Package("aks-node-controller", "x86_64", "202608.21.1", "1.azl3",
                      kRpmQuery.expected_href,
                      "<checksum type=\"sha256\">" + std::string(64, 'a') + "</checksum>",
                      "<size package=\"-5\"/>")),
      Status::Code::kDataLoss, who + " has size \"-5\", not a decimal integer");
  // No <location> at all.
  std::string no_location = Package();
  no_location.erase(no_location.find("  <location"),
                    no_location.find("  <format>") - no_location.find("  <location"));
  ExpectPrimaryError(Primary(no_location), Status::Code::kDataLoss,
                     who + " has location \"\", want \"" + kRpmQuery.expected_href + "\"");
  // A bad entry for another package is never looked at.
  StatusOr<std::optional<RpmPackageEntry>> got =
      FindIn(Primary(Package("other", "x86_64", "1", "1", "elsewhere", "<checksum/>") + Package()));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(got->has_value());
}

TEST(FindPrimaryPackage, ParseErrorsBeforeTheMatchAreDataLoss) {
  for (const std::string& xml : {
           std::string(),
           std::string(kPrimaryHead),
           Primary(Package()).substr(0, 300),
           std::string(kPrimaryHead) + "<package><name>x</nam></package>" + Package() +
               kPrimaryTail,
       }) {
    StatusOr<std::optional<RpmPackageEntry>> got = FindIn(xml);
    ASSERT_FALSE(got.ok()) << xml;
    EXPECT_EQ(got.status().code(), Status::Code::kDataLoss);
    EXPECT_THAT(got.status().message(), StartsWith("primary.xml is not well-formed XML: "));
  }
  // Once the match is read the rest is not: the reader stops there.
  StatusOr<std::optional<RpmPackageEntry>> got =
      FindIn(std::string(kPrimaryHead) + Package() + "<unclosed>");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(got->has_value());
  ExpectPrimaryError(
      "<!DOCTYPE metadata [<!ENTITY x \"aks-node-controller\">]>" + Primary(Package("&x;")),
      Status::Code::kDataLoss, "primary.xml has a document type declaration, which is refused");
}

TEST(FindPrimaryPackage, MarkupIsBoundedTextIsStreamed) {
  // A 16 MiB description in another package is text: streamed past, never kept.
  std::string big = Package("big");
  big.replace(big.find("AKS node controller test package."), 33, std::string(16 << 20, 'd'));
  StatusOr<std::optional<RpmPackageEntry>> got = FindIn(Primary(big + Package()));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(got->has_value());
  // A 2 MiB attribute is markup expat would hold whole.
  ExpectPrimaryError(
      Primary(Package("other", "x86_64", "1", "1", std::string(2 << 20, 'h')) + Package()),
      Status::Code::kDataLoss, "primary.xml has markup longer than 1048576 bytes");
  // A name longer than the text bound never equals the query's.
  got = FindIn(Primary(Package("aks-node-controller" + std::string(kMaxXmlTextBytes, ' ') + "x")));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_FALSE(got->has_value());
}

// primary.xml generated as it is read: `count` packages, ours at match_at.
class GeneratedPrimary : public std::streambuf {
 public:
  GeneratedPrimary(size_t count, size_t match_at) : count_(count), match_at_(match_at) {}
  size_t produced() const { return produced_; }

 protected:
  int_type underflow() override {
    if (next_ > count_ + 1) return traits_type::eof();
    std::string* chunk = &other_;
    if (next_ == 0) {
      chunk = &head_;
    } else if (next_ == count_ + 1) {
      chunk = &tail_;
    } else if (next_ - 1 == match_at_) {
      chunk = &ours_;
    }
    ++next_;
    produced_ += chunk->size();
    setg(chunk->data(), chunk->data(), chunk->data() + chunk->size());
    return traits_type::to_int_type((*chunk)[0]);
  }

 private:
  size_t count_, match_at_, next_ = 0, produced_ = 0;
  std::string head_ = kPrimaryHead, tail_ = kPrimaryTail, ours_ = Package(),
              other_ = Package("azure-cli");
};

TEST(FindPrimaryPackage, StreamsALargePrimary) {
  // 32 MiB produced as it is read, ours last (the node's cap is 128 MiB; a quarter keeps the
  // sanitized test short).
  constexpr size_t kCount = (32u << 20) / 1000;
  GeneratedPrimary primary(kCount, kCount - 1);
  std::istream in(&primary);
  StatusOr<std::optional<RpmPackageEntry>> got = FindPrimaryPackage(in, kRpmQuery);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_GT(primary.produced(), size_t{30} << 20);

  GeneratedPrimary none(20000, 20000);
  std::istream none_in(&none);
  got = FindPrimaryPackage(none_in, kRpmQuery);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_FALSE(got->has_value());
}

TEST(FindPrimaryPackage, StopsReadingAtTheMatch) {
  GeneratedPrimary primary(100000, 5);
  std::istream in(&primary);
  StatusOr<std::optional<RpmPackageEntry>> got = FindPrimaryPackage(in, kRpmQuery);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_LT(primary.produced(), size_t{70} << 10);
}

class FailingBuf : public std::streambuf {
 protected:
  int_type underflow() override { throw std::runtime_error("disk went away"); }
};

TEST(FindPrimaryPackage, ReadErrorsAreIoErrors) {
  FailingBuf buf;
  std::istream in(&buf);
  StatusOr<std::optional<RpmPackageEntry>> got = FindPrimaryPackage(in, kRpmQuery);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kIoError);
  EXPECT_EQ(got.status().message(), "reading primary.xml failed");
  std::istringstream failed;
  failed.setstate(std::ios::failbit);
  got = FindPrimaryPackage(failed, kRpmQuery);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kIoError);
}

}  // namespace
}  // namespace hotfix::node::repository
