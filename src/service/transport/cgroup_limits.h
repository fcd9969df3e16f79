// The limits a pod's cgroup sets on this process, read the way the kernel exposes them, so that
// a replica sizes itself to its pod rather than to the node it runs on:
//   - memory: the connection cap and the tables (memory_budget.h);
//   - CPU: how many event loops run (--threads 0, docs/SERVICE.md "Flags").
//
//   std::optional<uint64_t> bytes = CgroupMemoryLimit();   // nullopt: no limit
//   int loops = DefaultThreads(CgroupCpuLimit(), UsableCpus());
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hotfix::service {

// The memory limit of the cgroup this process is in: cgroup v2's memory.max or v1's
// memory.limit_in_bytes, looked up under cgroup_root by the path in proc_self_cgroup, then at
// cgroup_root itself (a container sees its own cgroup there). nullopt when there is no limit
// ("max", or v1's page-rounded 2^63) or nothing can be read.
std::optional<uint64_t> CgroupMemoryLimit(const std::string& proc_self_cgroup = "/proc/self/cgroup",
                                          const std::string& cgroup_root = "/sys/fs/cgroup");

// The CPU quota of the cgroup this process is in, in CPUs (quota / period): cgroup v2's
// cpu.max ("200000 100000" is 2; "max 100000" no limit) or v1's cpu.cfs_quota_us over
// cpu.cfs_period_us (-1: no limit), found as CgroupMemoryLimit finds its file. A pod's
// `resources.limits.cpu: 1500m` reads 1.5. nullopt when there is no quota or nothing can be read.
std::optional<double> CgroupCpuLimit(const std::string& proc_self_cgroup = "/proc/self/cgroup",
                                     const std::string& cgroup_root = "/sys/fs/cgroup");

// The CPUs this process may run on (sched_getaffinity: a cpuset narrows it), at least 1.
int UsableCpus();

// --threads 0: one event loop per CPU the process may use, no more than its quota rounded up
// (a loop beyond the quota only adds throttled time), at least 1.
int DefaultThreads(std::optional<double> cpu_limit, int usable_cpus);

}  // namespace hotfix::service
