#include "common/text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hotfix {
namespace {

TEST(TextTest, HexDigitValue) {
  EXPECT_EQ(HexDigitValue('0'), 0);
  EXPECT_EQ(HexDigitValue('9'), 9);
  EXPECT_EQ(HexDigitValue('a'), 10);
  EXPECT_EQ(HexDigitValue('F'), 15);
  for (char c : std::string_view("gG/:@` \0", 8)) EXPECT_EQ(HexDigitValue(c), -1) << int(c);
  EXPECT_EQ(kLowerHexDigits[11], 'b');
  EXPECT_EQ(kUpperHexDigits[11], 'B');
}

TEST(TextTest, AsciiLowerTouchesOnlyAsciiLetters) {
  EXPECT_EQ(AsciiLower("ID=Ubuntu"), "id=ubuntu");
  EXPECT_EQ(AsciiLower("Signature"), "signature");
  EXPECT_EQ(AsciiLower("\xC3\x84-@[`{"), "\xC3\x84-@[`{");  // UTF-8 and neighbours of A-Z
  EXPECT_EQ(AsciiLower(""), "");
}

TEST(TextTest, EscapeForMessageKeepsPrintableAsciiAndEscapesTheRest) {
  EXPECT_EQ(EscapeForMessage("HTTP/1.1 407 Proxy Authentication Required", 200),
            "HTTP/1.1 407 Proxy Authentication Required");
  EXPECT_EQ(EscapeForMessage(std::string_view("a\r\n\t\0\x7f", 6), 200),
            "a\\x0d\\x0a\\x09\\x00\\x7f");
  EXPECT_EQ(EscapeForMessage("say \"hi\" \\ bye", 200), "say \\x22hi\\x22 \\x5c bye");
  EXPECT_EQ(EscapeForMessage("\xC3\xA9", 200), "\\xc3\\xa9");
}

TEST(TextTest, EscapeForMessageCutsAtMaxBytes) {
  EXPECT_EQ(EscapeForMessage("abcdef", 6), "abcdef");
  EXPECT_EQ(EscapeForMessage("abcdefg", 6), "abcdef...");
  EXPECT_EQ(EscapeForMessage("\x01\x02\x03", 2), "\\x01\\x02...");  // counts input bytes
  EXPECT_EQ(EscapeForMessage("abc", 0), "...");
  EXPECT_EQ(EscapeForMessage("", 0), "");
}

TEST(TextTest, TrimBlanksTakesSpacesAndTabsOffBothEndsOnly) {
  EXPECT_EQ(TrimBlanks(" \t a b \t"), "a b");
  EXPECT_EQ(TrimBlanks("\t \t"), "");
  EXPECT_EQ(TrimBlanks(""), "");
  EXPECT_EQ(TrimBlanks("\na\r"), "\na\r") << "line breaks are not blanks";
  EXPECT_EQ(TrimBlanks("\xC2\xA0"
                       "a"),
            "\xC2\xA0"
            "a")
      << "nor is a no-break space";
}

TEST(TextTest, OneLineTurnsLineBreaksIntoSpaces) {
  EXPECT_EQ(OneLine("a\nb\r\nc"), "a b  c");
  EXPECT_EQ(OneLine("a\tb"), "a\tb");
}

TEST(TextTest, SplitOnAnyDropsEveryRunOfSeparators) {
  auto comma_or_space = [](char c) { return c == ',' || IsAsciiSpace(c); };
  EXPECT_THAT(SplitOnAny("a, b,,c\n", comma_or_space), ::testing::ElementsAre("a", "b", "c"));
  EXPECT_THAT(SplitOnAny(",, \t", comma_or_space), ::testing::IsEmpty());
  EXPECT_THAT(SplitOnAny("one", IsAsciiBlank), ::testing::ElementsAre("one"));
  EXPECT_TRUE(IsAsciiSpace('\v') && IsAsciiSpace('\f') && !IsAsciiBlank('\n'));
}

}  // namespace
}  // namespace hotfix
