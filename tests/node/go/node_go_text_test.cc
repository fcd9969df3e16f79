// Go's text rules as the node ports them (node/go/go_utf8.h, node/go/go_strings.h), each expected
// value what Go 1.21 gives for the same bytes (utf8.DecodeRune, strings.TrimSpace,
// strconv.Quote).
#include <gtest/gtest.h>

#include <string>

#include "node/go/go_strings.h"
#include "node/go/go_utf8.h"

namespace hotfix::node {
namespace {

GoRune Decode(const std::string& s) { return DecodeRuneLikeGo(s, 0); }

TEST(GoUtf8Test, DecodesWhatGoDecodesAndNothingElse) {
  EXPECT_EQ(Decode("a").code, 'a');
  EXPECT_EQ(Decode("\xC3\xA9").code, 0xE9u);
  EXPECT_EQ(Decode("\xC3\xA9").size, 2u);
  EXPECT_EQ(Decode("\xF0\x9F\x98\x80").code, 0x1F600u);
  EXPECT_EQ(Decode("\xF0\x9F\x98\x80").size, 4u);
  for (const std::string bad : {"\xC0\x80",          // overlong NUL
                                "\xE0\x80\xAF",      // overlong '/'
                                "\xED\xA0\x80",      // a surrogate, U+D800
                                "\xF4\x90\x80\x80",  // past U+10FFFF
                                "\xC3",              // cut short
                                "\x80", "\xFF"}) {
    GoRune r = Decode(bad);
    EXPECT_EQ(r.code, 0xFFFDu) << bad.size();
    EXPECT_EQ(r.size, 1u) << "a bad sequence is one replaced byte";
  }
  const std::string smile = "a\xF0\x9F\x98\x80";
  EXPECT_EQ(DecodeLastRuneLikeGo(smile, smile.size()).code, 0x1F600u);
  EXPECT_EQ(DecodeLastRuneLikeGo("a\x98\x80", 3).code, 0xFFFDu);
}

TEST(GoUtf8Test, InvalidBytesBecomeReplacementCharacters) {
  EXPECT_EQ(ReplaceInvalidUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(ReplaceInvalidUtf8("a\xFF"
                               "b\xC0\x80"),
            std::string("a") + kReplacementChar + "b" + kReplacementChar + kReplacementChar);
}

TEST(GoStringsTest, TrimSpaceTrimsUnicodeSpaceAsGoDoes) {
  EXPECT_EQ(TrimSpaceLikeGo(" \t\n 202604.01.3 \r\n"), "202604.01.3");
  // U+00A0 (no-break space), U+3000 (ideographic space), U+0085 (NEL): Go's unicode.IsSpace.
  EXPECT_EQ(TrimSpaceLikeGo("\xC2\xA0"
                            "x"
                            "\xE3\x80\x80\xC2\x85"),
            "x");
  // U+200B (zero-width space) is not a space to Go; nor is an invalid byte.
  EXPECT_EQ(TrimSpaceLikeGo("\xE2\x80\x8B"
                            "x"),
            "\xE2\x80\x8B"
            "x");
  EXPECT_EQ(TrimSpaceLikeGo(" \xFF "), "\xFF");
  EXPECT_EQ(TrimSpaceLikeGo("  "), "");
}

TEST(GoStringsTest, QuoteWritesGosEscapes) {
  EXPECT_EQ(QuoteLikeGo("plain"), "\"plain\"");
  EXPECT_EQ(QuoteLikeGo("a\"b\\c\n\t\x01\x7f"), "\"a\\\"b\\\\c\\n\\t\\x01\\x7f\"");
  EXPECT_EQ(QuoteLikeGo("\xC3\xA9"), "\"\xC3\xA9\"") << "printable runes as they are";
  EXPECT_EQ(QuoteLikeGo("\xC2\xA0"), "\"\\u00a0\"") << "a no-break space is escaped";
  EXPECT_EQ(QuoteLikeGo("\xEF\xBB\xBF"), "\"\\ufeff\"");
  EXPECT_EQ(QuoteLikeGo("\xFF"), "\"\\xff\"") << "invalid UTF-8 byte by byte";
}

}  // namespace
}  // namespace hotfix::node
