#include "node/host/guest_agent_event.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include "captured_log.h"

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

namespace hotfix::node {
namespace {

using testsupport::ModeOf;
using testsupport::ReadFile;
using testsupport::TempDir;
using unittest::CapturedLog;

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Clock = std::chrono::system_clock;
using Json = nlohmann::json;

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// A UTC calendar time.
Clock::time_point Utc(int year, int month, int day, int hour, int minute, int second) {
  struct tm tm {};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return Clock::from_time_t(::timegm(&tm));
}

// Every test runs with a known process time zone; the previous one is restored afterwards.
class GuestAgentEventTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tz = std::getenv("TZ");
    if (tz != nullptr) saved_tz_ = tz;
    SetTimeZone("UTC");
  }
  void TearDown() override {
    if (saved_tz_) {
      ::setenv("TZ", saved_tz_->c_str(), 1);
    } else {
      ::unsetenv("TZ");
    }
    ::tzset();
  }
  static void SetTimeZone(const char* tz) {
    ::setenv("TZ", tz, 1);
    ::tzset();
  }

  const Clock::time_point start_ = Utc(2099, 2, 3, 10, 30, 45);
  const Clock::time_point end_ = Utc(2099, 2, 3, 10, 35, 50);

 private:
  std::optional<std::string> saved_tz_;
};

// --- AgentBaker's EventLogger_Log tests (docs/REFERENCE.md, "Guest-agent event format") ---

TEST_F(GuestAgentEventTest, ReferenceEventLoggerLog) {
  TempDir dir;
  const std::string events = dir.File("events");
  ASSERT_TRUE(
      WriteGuestAgentEvent(events, {"Provision", true, "Starting provisioning", start_, end_})
          .ok());
  ASSERT_TRUE(WriteGuestAgentEvent(events, {"Provision", false, "Completed", start_, end_}).ok());

  std::vector<std::string> names = Names(events);
  ASSERT_EQ(names.size(), 2u);
  std::vector<Json> docs;
  for (const std::string& name : names) docs.push_back(Json::parse(ReadFile(events + "/" + name)));
  // Identify the events by content: file names come from the clock at write time.
  const Json& error = docs[0]["EventLevel"] == "Error" ? docs[0] : docs[1];
  const Json& info = docs[0]["EventLevel"] == "Error" ? docs[1] : docs[0];
  EXPECT_EQ(error["EventLevel"], "Error");
  EXPECT_EQ(error["TaskName"], "AKS.AKSNodeController.Provision");
  EXPECT_THAT(error["Message"].get<std::string>(), HasSubstr("Starting"));
  EXPECT_THAT(error["Message"].get<std::string>(), HasSubstr("durationMs=305000"));
  EXPECT_EQ(error["Timestamp"], "2099-02-03 10:30:45.000");
  EXPECT_EQ(error["OperationId"], "2099-02-03 10:35:50.000");
  EXPECT_EQ(error["Version"], "1.23");
  EXPECT_EQ(info["EventLevel"], "Informational");
}

TEST_F(GuestAgentEventTest, ExactFormat) {
  EXPECT_EQ(
      FormatGuestAgentEvent({"CheckHotfix", false, "check-hotfix outcome=lpsRead", start_, end_}),
      R"({"Timestamp":"2099-02-03 10:30:45.000","OperationId":"2099-02-03 10:35:50.000",)"
      R"("Version":"1.23","TaskName":"AKS.AKSNodeController.CheckHotfix",)"
      R"("EventLevel":"Informational","Message":"check-hotfix outcome=lpsRead | )"
      R"(startTime=2099-02-03 10:30:45.000 endTime=2099-02-03 10:35:50.000 )"
      R"(durationMs=305000","EventPid":"0","EventTid":"0"})");
}

TEST_F(GuestAgentEventTest, EmptyMessageIsOnlyTheTimingPart) {
  Json doc = Json::parse(FormatGuestAgentEvent({"CheckHotfix", true, "", start_, end_}));
  EXPECT_EQ(doc["Message"],
            "startTime=2099-02-03 10:30:45.000 endTime=2099-02-03 10:35:50.000 durationMs=305000");
  EXPECT_EQ(doc["EventLevel"], "Error");
}

TEST_F(GuestAgentEventTest, MillisecondsAreTruncated) {
  using std::chrono::microseconds;
  const Clock::time_point start = start_ + microseconds(123999);
  const Clock::time_point end = start + microseconds(1999);
  Json doc = Json::parse(FormatGuestAgentEvent({"T", false, "m", start, end}));
  EXPECT_EQ(doc["Timestamp"], "2099-02-03 10:30:45.123");
  EXPECT_EQ(doc["OperationId"], "2099-02-03 10:30:45.125");
  EXPECT_EQ(doc["Message"],
            "m | startTime=2099-02-03 10:30:45.123 endTime=2099-02-03 10:30:45.125 durationMs=1");
}

TEST_F(GuestAgentEventTest, NegativeDurationTruncatesTowardZero) {
  const Clock::time_point end = start_ - std::chrono::microseconds(1500);
  Json doc = Json::parse(FormatGuestAgentEvent({"T", false, "", start_, end}));
  EXPECT_THAT(doc["Message"].get<std::string>(), HasSubstr("durationMs=-1"));
  EXPECT_EQ(doc["OperationId"], "2099-02-03 10:30:44.998");
}

TEST_F(GuestAgentEventTest, UsesTheProcessTimeZone) {
  SetTimeZone("XST-05:30");  // POSIX form: UTC+05:30, no tzdata needed
  Json doc = Json::parse(FormatGuestAgentEvent({"T", false, "", start_, end_}));
  EXPECT_EQ(doc["Timestamp"], "2099-02-03 16:00:45.000");
  EXPECT_EQ(doc["OperationId"], "2099-02-03 16:05:50.000");
}

TEST_F(GuestAgentEventTest, EscapesLikeGoJsonMarshal) {
  const std::string out = FormatGuestAgentEvent(
      {"CheckHotfix", true, "error=<a & b> \"q\" \xE2\x80\xA8", start_, end_});
  EXPECT_THAT(out, HasSubstr(R"("Message":"error=\u003ca \u0026 b\u003e \"q\" \u2028 | )"));
  EXPECT_THAT(Json::parse(out)["Message"].get<std::string>(),
              StartsWith("error=<a & b> \"q\" \xE2\x80\xA8 | startTime="));
}

TEST_F(GuestAgentEventTest, InvalidUtf8IsReplacedNotFatal) {
  Json doc = Json::parse(FormatGuestAgentEvent({"T\xFF", false, "bad \xC0 byte", start_, end_}));
  EXPECT_EQ(doc["TaskName"], "AKS.AKSNodeController.T\xEF\xBF\xBD");
  EXPECT_THAT(doc["Message"].get<std::string>(), StartsWith("bad \xEF\xBF\xBD byte | "));
}

TEST_F(GuestAgentEventTest, FileIsNamedByNanosecondsWith0644AndNoTempLeft) {
  TempDir dir;
  const std::string events = dir.File("events");
  const mode_t old_umask = ::umask(077);
  Status st = WriteGuestAgentEvent(events, {"CheckHotfix", false, "m", start_, end_});
  ::umask(old_umask);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<std::string> names = Names(events);
  ASSERT_EQ(names.size(), 1u);
  EXPECT_TRUE(std::regex_match(names[0], std::regex(R"([0-9]{19}\.json)"))) << names[0];
  struct stat file {};
  ASSERT_EQ(::stat((events + "/" + names[0]).c_str(), &file), 0);
  EXPECT_EQ(file.st_mode & 07777, 0644u);
  // Exactly the formatted event: no trailing newline.
  EXPECT_EQ(ReadFile(events + "/" + names[0]),
            FormatGuestAgentEvent({"CheckHotfix", false, "m", start_, end_}));
}

TEST_F(GuestAgentEventTest, CreatesMissingFoldersWith0755) {
  TempDir dir;
  const std::string events = dir.File("a/b/events");
  const mode_t old_umask = ::umask(022);
  Status st = WriteGuestAgentEvent(events, {"T", false, "", start_, end_});
  ::umask(old_umask);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (const std::string& folder : {dir.File("a").string(), dir.File("a/b").string(), events}) {
    struct stat info {};
    ASSERT_EQ(::stat(folder.c_str(), &info), 0) << folder;
    EXPECT_EQ(info.st_mode & 07777, 0755u) << folder;
  }
  EXPECT_EQ(Names(events).size(), 1u);
}

TEST_F(GuestAgentEventTest, ExistingFolderIsUsedAsIs) {
  TempDir dir;
  const std::string events = dir.File("events");
  fs::create_directory(events);
  ::chmod(events.c_str(), 0700);
  ASSERT_TRUE(WriteGuestAgentEvent(events, {"T", false, "", start_, end_}).ok());
  ASSERT_TRUE(WriteGuestAgentEvent(events + "/", {"T", false, "", start_, end_}).ok());
  struct stat info {};
  ASSERT_EQ(::stat(events.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700u);
  EXPECT_EQ(Names(events).size(), 2u);
}

TEST_F(GuestAgentEventTest, FolderThatIsAFileIsAnError) {
  TempDir dir;
  const std::string events = dir.File("events");
  std::ofstream(events) << "not a folder";
  Status st = WriteGuestAgentEvent(events, {"T", false, "", start_, end_});
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), StartsWith("creating events folder " + events));
  EXPECT_THAT(st.message(), HasSubstr("Not a directory"));
  EXPECT_EQ(ReadFile(events), "not a folder");

  st = WriteGuestAgentEvent(events + "/sub", {"T", false, "", start_, end_});
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("Not a directory"));
}

}  // namespace
}  // namespace hotfix::node
