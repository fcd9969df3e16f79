#include "service/transport/cgroup_limits.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <filesystem>

#include "temp_dir.h"

namespace hotfix::service {
namespace {

using testsupport::TempDir;

// A /proc/self/cgroup and a cgroup file system, as a test writes them.
class CgroupTest : public testing::Test {
 protected:
  std::string Proc(const std::string& text) { return dir_.Write("cgroup", text).string(); }
  void Limit(const std::string& relative, const std::string& value) {
    const auto path = dir_.File("fs") / relative;
    std::filesystem::create_directories(path.parent_path());
    dir_.Write(std::filesystem::relative(path, dir_.path()).string(), value + "\n");
  }
  std::string Root() { return (dir_.path() / "fs").string(); }
  TempDir dir_{"cgroup"};
};

TEST_F(CgroupTest, V2ReadsTheProcessCgroupsMemoryMax) {
  Limit("kubepods/pod1/memory.max", "268435456");
  EXPECT_EQ(CgroupMemoryLimit(Proc("0::/kubepods/pod1\n"), Root()), 268435456u);
}

TEST_F(CgroupTest, V2InAContainerReadsItsOwnRoot) {
  Limit("memory.max", "134217728");
  EXPECT_EQ(CgroupMemoryLimit(Proc("0::/\n"), Root()), 134217728u);
  EXPECT_EQ(CgroupMemoryLimit(Proc("0::/not/mounted/here\n"), Root()), 134217728u);
}

TEST_F(CgroupTest, V2MaxIsNoLimit) {
  Limit("a/memory.max", "max");
  EXPECT_EQ(CgroupMemoryLimit(Proc("0::/a\n"), Root()), std::nullopt);
}

TEST_F(CgroupTest, V1ReadsTheMemoryControllersLine) {
  Limit("memory/libpod_parent/c1/memory.limit_in_bytes", "67108864");
  const std::string proc =
      "9:name=systemd:/libpod_parent/c1\n4:memory:/libpod_parent/c1\n3:cpu,cpuacct:/x\n";
  EXPECT_EQ(CgroupMemoryLimit(Proc(proc), Root()), 67108864u);
}

TEST_F(CgroupTest, V1UnlimitedIsNoLimit) {
  Limit("memory/memory.limit_in_bytes", "9223372036854771712");
  EXPECT_EQ(CgroupMemoryLimit(Proc("4:memory:/\n"), Root()), std::nullopt);
}

TEST_F(CgroupTest, NothingReadableIsNoLimit) {
  EXPECT_EQ(CgroupMemoryLimit(dir_.File("absent").string(), Root()), std::nullopt);
  Limit("x/memory.max", "garbage");
  EXPECT_EQ(CgroupMemoryLimit(Proc("0::/x\n"), Root()), std::nullopt);
}

TEST_F(CgroupTest, V2CpuMaxIsQuotaOverPeriod) {
  Limit("kubepods/pod1/cpu.max", "150000 100000");
  EXPECT_DOUBLE_EQ(CgroupCpuLimit(Proc("0::/kubepods/pod1\n"), Root()).value(), 1.5);
  Limit("kubepods/pod2/cpu.max", "max 100000");
  EXPECT_EQ(CgroupCpuLimit(Proc("0::/kubepods/pod2\n"), Root()), std::nullopt);
}

TEST_F(CgroupTest, V2CpuInAContainerReadsItsOwnRoot) {
  Limit("cpu.max", "200000 100000");
  EXPECT_DOUBLE_EQ(CgroupCpuLimit(Proc("0::/not/mounted/here\n"), Root()).value(), 2.0);
}

TEST_F(CgroupTest, V1CpuReadsTheJoinedOrTheOwnMount) {
  // Docker and Kubernetes on v1 mount "cpu,cpuacct" with "cpu" a link to it; either is read.
  Limit("cpu,cpuacct/kubepods/c1/cpu.cfs_quota_us", "50000");
  Limit("cpu,cpuacct/kubepods/c1/cpu.cfs_period_us", "100000");
  const std::string proc = "4:memory:/kubepods/c1\n3:cpu,cpuacct:/kubepods/c1\n";
  EXPECT_DOUBLE_EQ(CgroupCpuLimit(Proc(proc), Root()).value(), 0.5);
  Limit("cpu/kubepods/c2/cpu.cfs_quota_us", "300000");
  Limit("cpu/kubepods/c2/cpu.cfs_period_us", "100000");
  EXPECT_DOUBLE_EQ(CgroupCpuLimit(Proc("3:cpu,cpuacct:/kubepods/c2\n"), Root()).value(), 3.0);
}

TEST_F(CgroupTest, V1CpuUnlimitedOrUnreadableIsNoLimit) {
  Limit("cpu/a/cpu.cfs_quota_us", "-1");
  Limit("cpu/a/cpu.cfs_period_us", "100000");
  EXPECT_EQ(CgroupCpuLimit(Proc("2:cpu:/a\n"), Root()), std::nullopt);
  Limit("cpu/b/cpu.cfs_quota_us", "100000");  // no period beside it
  EXPECT_EQ(CgroupCpuLimit(Proc("2:cpu:/b\n"), Root()), std::nullopt);
  EXPECT_EQ(CgroupCpuLimit(dir_.File("absent").string(), Root()), std::nullopt);
}

TEST(DefaultThreadsTest, OneLoopPerUsableCpuUpToTheQuotaRoundedUp) {
  EXPECT_EQ(DefaultThreads(std::nullopt, 16), 16);
  EXPECT_EQ(DefaultThreads(1.5, 16), 2);
  EXPECT_EQ(DefaultThreads(2.0, 16), 2);
  EXPECT_EQ(DefaultThreads(0.25, 16), 1);
  EXPECT_EQ(DefaultThreads(8.0, 4), 4) << "a cpuset narrower than the quota";
  EXPECT_EQ(DefaultThreads(std::nullopt, 0), 1);
}

TEST(UsableCpusTest, IsThisProcessesAffinity) {
  const int cpus = UsableCpus();
  EXPECT_GE(cpus, 1);
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(cpus, CPU_COUNT(&set));
}

}  // namespace
}  // namespace hotfix::service
