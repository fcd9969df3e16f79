// The check-hotfix workflow against a scripted fetcher: the outcome table of docs/CHECK-HOTFIX.md,
// which AgentBaker's aks-node-controller/checkhotfix_test.go and checkhotfix_grpc_test.go test.
#include "node/check/check_hotfix.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "temp_dir.h"
#include "text_util.h"

namespace hotfix::node {
namespace {

using ::testing::HasSubstr;
using testsupport::ReadFile;
using testsupport::TempDir;
using wire::GrpcCode;

class ScriptedFetcher : public LpsFetcher {
 public:
  static ScriptedFetcher Config(std::string config) {
    ScriptedFetcher f;
    f.result_.config = std::move(config);
    return f;
  }
  static ScriptedFetcher Code(GrpcCode code, std::string msg = "") {
    ScriptedFetcher f;
    f.result_.status = {code, std::move(msg)};
    return f;
  }
  static ScriptedFetcher Local(std::string msg) {
    ScriptedFetcher f;
    f.result_.local_error = true;
    f.result_.status = {GrpcCode::kUnknown, std::move(msg)};
    return f;
  }
  static ScriptedFetcher Throws() {
    ScriptedFetcher f;
    f.throws_ = true;
    return f;
  }
  FetchResult Fetch() override {
    ++calls;
    if (throws_) throw std::runtime_error("boom");
    return result_;
  }
  int calls = 0;

 private:
  FetchResult result_;
  bool throws_ = false;
};

void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

nlohmann::json Json(const std::string& s) { return nlohmann::json::parse(s); }

class CheckHotfixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.pointer_path = dir_.File("aks-node-controller-hotfix.json");
    options_.node_config_path = dir_.File("aks-node-controller-config.json");
    options_.current_version = "202604.01.0";
    events_dir_ = dir_.File("events");
  }

  CheckHotfixResult Run(ScriptedFetcher fetcher) {
    return CheckHotfix(options_, fetcher, NullLogger());
  }
  std::vector<std::string> Events() {
    std::vector<std::string> out;
    DIR* d = ::opendir(events_dir_.c_str());
    if (d == nullptr) return out;
    while (auto* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 5 && name.substr(name.size() - 5) == ".json") {
        out.push_back(ReadFile(events_dir_ + "/" + name));
      }
    }
    ::closedir(d);
    return out;
  }

  TempDir dir_{"check-hotfix-test"};
  std::string events_dir_;
  CheckHotfixOptions options_;
};

constexpr char kPreSeeded[] =
    R"({"version":"202604.01.5","scripts_version":"202604.01.7","hotfixes":{"202604.01":"202604.01.5"}})";

TEST_F(CheckHotfixTest, SuccessReadAndWrite) {
  auto r = Run(ScriptedFetcher::Config(R"({"hotfixes":{"202604.01":"202604.01.1"}})"));
  EXPECT_EQ(r.outcome, Outcome::kLpsRead);
  EXPECT_TRUE(r.error.ok());
  EXPECT_EQ(Json(ReadFile(options_.pointer_path)),
            Json(R"({"hotfixes":{"202604.01":"202604.01.1"}})"));
}

TEST_F(CheckHotfixTest, NoHotfixForBaseStillStagesTheMap) {
  options_.current_version = "202607.15.0";
  auto r = Run(ScriptedFetcher::Config(R"({"hotfixes":{"202604.01":"202604.01.1"}})"));
  EXPECT_EQ(r.outcome, Outcome::kNoHotfixForBase);
  EXPECT_EQ(Json(ReadFile(options_.pointer_path)),
            Json(R"({"hotfixes":{"202604.01":"202604.01.1"}})"));
}

TEST_F(CheckHotfixTest, UnparseableCurrentVersionIsNoHotfixForBase) {
  options_.current_version = "dev";
  auto r = Run(ScriptedFetcher::Config(R"({"hotfixes":{"202604.01":"202604.01.1"}})"));
  EXPECT_EQ(r.outcome, Outcome::kNoHotfixForBase);
}

TEST_F(CheckHotfixTest, EmptyServedConfigIsBenignAndPreservesFile) {
  for (const char* served : {"{}", R"({"hotfixes":{}})", R"({"hotfixes":null})",
                             R"({"version":"202604.01.9"})", "", "  \n\t ", "null"}) {
    SCOPED_TRACE(served);
    WriteAll(options_.pointer_path, kPreSeeded);
    auto r = Run(ScriptedFetcher::Config(served));
    EXPECT_EQ(r.outcome, Outcome::kNoHotfixAvailable);
    EXPECT_TRUE(r.error.ok());
    EXPECT_EQ(ReadFile(options_.pointer_path), kPreSeeded);  // byte for byte
  }
}

TEST_F(CheckHotfixTest, PreservesVersionAndScriptsVersionOnWrite) {
  WriteAll(options_.pointer_path, kPreSeeded);
  auto r = Run(ScriptedFetcher::Config(R"({"hotfixes":{"202604.01":"202604.01.9"}})"));
  EXPECT_EQ(r.outcome, Outcome::kLpsRead);
  EXPECT_EQ(Json(ReadFile(options_.pointer_path)),
            Json(R"({"version":"202604.01.5","scripts_version":"202604.01.7",)"
                 R"("hotfixes":{"202604.01":"202604.01.9"}})"));
}

TEST_F(CheckHotfixTest, BenignCodesAreNoOpEvenWithColdStartPointer) {
  WriteAll(options_.node_config_path, R"({"hotfixes":{"202604.01":"202604.01.7"}})");
  for (GrpcCode code :
       {GrpcCode::kUnauthenticated, GrpcCode::kPermissionDenied, GrpcCode::kNotFound}) {
    auto r = Run(ScriptedFetcher::Code(code));
    EXPECT_EQ(r.outcome, Outcome::kNoHotfixAvailable);
    EXPECT_TRUE(r.error.ok());
    EXPECT_FALSE(Exists(options_.pointer_path));
  }
}

TEST_F(CheckHotfixTest, FetchErrorFailsOpenWithoutColdStart) {
  for (auto fetcher : {ScriptedFetcher::Code(GrpcCode::kDeadlineExceeded),
                       ScriptedFetcher::Local("dialing LPS gRPC: connection refused"),
                       ScriptedFetcher::Code(GrpcCode::kInternal, "server error")}) {
    auto r = Run(fetcher);
    EXPECT_EQ(r.outcome, Outcome::kFailed);
    EXPECT_THAT(r.error.message(), HasSubstr("LPS fetch failed and no cold-start pointer present"));
    EXPECT_FALSE(Exists(options_.pointer_path));
  }
}

TEST_F(CheckHotfixTest, InvalidServedConfigFailsAndWritesNothing) {
  WriteAll(options_.pointer_path, kPreSeeded);
  auto r = Run(ScriptedFetcher::Config("not valid json"));
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_THAT(r.error.message(), HasSubstr("parsing LPS hotfix pointer: unmarshaling hotfix"));
  EXPECT_EQ(ReadFile(options_.pointer_path), kPreSeeded);
}

TEST_F(CheckHotfixTest, WrongTypesFailAndWriteNothing) {
  auto r = Run(ScriptedFetcher::Config(R"({"hotfixes":{"202604.01":7}})"));
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_FALSE(Exists(options_.pointer_path));
}

TEST_F(CheckHotfixTest, ColdStartFallback) {
  WriteAll(options_.node_config_path, R"({"version":"v1","hotfixes":{"202604.01":"202604.01.2"}})");
  auto r = Run(ScriptedFetcher::Local("dial tcp: connection refused"));
  EXPECT_EQ(r.outcome, Outcome::kCustomDataFallback);
  EXPECT_TRUE(r.error.ok());
  EXPECT_EQ(Json(ReadFile(options_.pointer_path)),
            Json(R"({"hotfixes":{"202604.01":"202604.01.2"}})"));
}

TEST_F(CheckHotfixTest, ColdStartWithoutMapFails) {
  WriteAll(options_.node_config_path, R"({"version":"v1"})");
  auto r = Run(ScriptedFetcher::Local("dial tcp: connection refused"));
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_FALSE(Exists(options_.pointer_path));
}

TEST_F(CheckHotfixTest, ColdStartInvalidJsonFailsNamingBothErrors) {
  WriteAll(options_.node_config_path, "{broken");
  auto r = Run(ScriptedFetcher::Code(GrpcCode::kUnavailable, "no route"));
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_THAT(r.error.message(),
              HasSubstr("LPS fetch failed (LPS gRPC call failed with code "
                        "Unavailable: no route) and cold-start fallback failed"));
}

TEST_F(CheckHotfixTest, FallbackOnlyForUnreachableLps) {
  WriteAll(options_.node_config_path, R"({"hotfixes":{"202604.01":"202604.01.2"}})");
  struct Row {
    ScriptedFetcher fetcher;
    Outcome outcome;
    bool staged;
  };
  std::vector<Row> rows = {
      {ScriptedFetcher::Code(GrpcCode::kUnavailable), Outcome::kCustomDataFallback, true},
      {ScriptedFetcher::Local("plain transport error"), Outcome::kCustomDataFallback, true},
      {ScriptedFetcher::Code(GrpcCode::kResourceExhausted), Outcome::kFailed, false},
      {ScriptedFetcher::Code(GrpcCode::kInvalidArgument), Outcome::kFailed, false},
  };
  for (auto& row : rows) {
    ::unlink(options_.pointer_path.c_str());
    auto r = Run(row.fetcher);
    EXPECT_EQ(r.outcome, row.outcome);
    EXPECT_EQ(Exists(options_.pointer_path), row.staged);
  }
}

TEST_F(CheckHotfixTest, ClientErrorNamesTheCode) {
  auto r = Run(ScriptedFetcher::Code(GrpcCode::kInvalidArgument, "bad component"));
  EXPECT_EQ(r.error.message(),
            "LPS fetch failed with a client error, not falling back: LPS gRPC call failed with "
            "code InvalidArgument: bad component");
}

TEST(ClassifyFetchFailureTest, EveryCode) {
  for (int c = 1; c <= 16; ++c) {
    FetchResult r;
    r.status = {static_cast<GrpcCode>(c), ""};
    FetchClass want = FetchClass::kFallbackEligible;
    if (c == 16 || c == 7 || c == 5) want = FetchClass::kBenign;
    if (c == 3 || c == 8) want = FetchClass::kAuthoritativeRejection;
    EXPECT_EQ(ClassifyFetchFailure(r), want) << "code " << c;
  }
  FetchResult local;
  local.local_error = true;
  local.status = {GrpcCode::kNotFound, "reading node config: no such file"};
  EXPECT_EQ(ClassifyFetchFailure(local), FetchClass::kFallbackEligible);
}

TEST_F(CheckHotfixTest, WriteFailureIsFailedAndLeavesNoFile) {
  options_.pointer_path = dir_.File("missing-folder/aks-node-controller-hotfix.json");
  auto r = Run(ScriptedFetcher::Config(R"({"hotfixes":{"202604.01":"202604.01.1"}})"));
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_THAT(r.error.message(), HasSubstr("writing hotfix config"));
  EXPECT_FALSE(Exists(options_.pointer_path));
}

TEST_F(CheckHotfixTest, DryRunReportsThePointerAndWritesNothing) {
  WriteAll(options_.pointer_path, kPreSeeded);
  options_.dry_run = true;
  ScriptedFetcher fetcher = ScriptedFetcher::Config(R"({"hotfixes":{"202604.01":"202604.01.9"}})");
  auto r = RunCheckHotfixCommand(options_, fetcher, events_dir_, NullLogger());
  EXPECT_EQ(r.outcome, Outcome::kLpsRead);
  ASSERT_TRUE(r.staged.has_value());
  EXPECT_EQ(r.staged->version, "202604.01.5");
  EXPECT_EQ(r.staged->hotfixes.at("202604.01"), "202604.01.9");
  EXPECT_EQ(ReadFile(options_.pointer_path), kPreSeeded);
  EXPECT_TRUE(Events().empty());
}

// A served map whose pointer download-hotfix could not read is a failed run that leaves the
// staged pointer alone, and dry run says so too.
TEST_F(CheckHotfixTest, AServedMapTooLargeToStageFailsAndKeepsThePointer) {
  WriteAll(options_.pointer_path, kPreSeeded);
  const std::string served =
      R"({"hotfixes":{"202604.01":")" + std::string(200 * 1024, '<') + R"("}})";
  for (bool dry_run : {true, false}) {
    options_.dry_run = dry_run;
    auto r = Run(ScriptedFetcher::Config(served));
    EXPECT_EQ(r.outcome, Outcome::kFailed) << dry_run;
    EXPECT_THAT(r.error.message(), HasSubstr("writing hotfix config: hotfix pointer would be 1"))
        << dry_run;
    EXPECT_EQ(ReadFile(options_.pointer_path), kPreSeeded);
  }
}

TEST_F(CheckHotfixTest, CommandSuccessWritesOneInformationalEvent) {
  ScriptedFetcher fetcher = ScriptedFetcher::Config(R"({"hotfixes":{"202604.01":"202604.01.1"}})");
  RunCheckHotfixCommand(options_, fetcher, events_dir_, NullLogger());
  auto events = Events();
  ASSERT_EQ(events.size(), 1u);
  auto e = Json(events[0]);
  EXPECT_EQ(e["TaskName"], "AKS.AKSNodeController.CheckHotfix");
  EXPECT_EQ(e["EventLevel"], "Informational");
  EXPECT_THAT(e["Message"].get<std::string>(), HasSubstr("check-hotfix outcome=lpsRead | "));
}

TEST_F(CheckHotfixTest, CommandFailureWritesOneErrorEvent) {
  ScriptedFetcher fetcher = ScriptedFetcher::Code(GrpcCode::kInternal, "LPS returned status 500");
  auto r = RunCheckHotfixCommand(options_, fetcher, events_dir_, NullLogger());
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  auto events = Events();
  ASSERT_EQ(events.size(), 1u);
  auto e = Json(events[0]);
  EXPECT_EQ(e["EventLevel"], "Error");
  EXPECT_THAT(e["Message"].get<std::string>(), HasSubstr("check-hotfix outcome=failed error="));
}

TEST_F(CheckHotfixTest, CommandRecoversFromAnExceptionWithOneErrorEvent) {
  ScriptedFetcher fetcher = ScriptedFetcher::Throws();
  auto r = RunCheckHotfixCommand(options_, fetcher, events_dir_, NullLogger());
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  auto events = Events();
  ASSERT_EQ(events.size(), 1u);
  auto e = Json(events[0]);
  EXPECT_EQ(e["EventLevel"], "Error");
  EXPECT_THAT(e["Message"].get<std::string>(), HasSubstr("check-hotfix outcome=failed panic=boom"));
}

}  // namespace
}  // namespace hotfix::node
