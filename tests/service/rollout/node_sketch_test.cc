// The node sketch (service/rollout/node_sketch.h): exact up to 256 nodes, within 5% of the
// exact count from there to 100,000; a union that does not double a node however often and
// wherever it was added; its gauges round-trip and nothing else merges.

#include "service/rollout/node_sketch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace hotfix::service {
namespace {

using ::testing::HasSubstr;

// A vmId-shaped key per number, as the fleet's GUIDs are: distinct strings, hashed.
std::string VmId(uint64_t n) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08llx-0000-4000-8000-%012llx",
                static_cast<unsigned long long>(n * 2654435761u % 4294967291u),
                static_cast<unsigned long long>(n));
  return buf;
}

uint64_t VmHash(uint64_t n) { return NodeSketch::Hash("vm", VmId(n)); }

TEST(NodeSketchTest, HashIsTheFirstEightBytesOfSha256) {
  // printf 'vm:8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8' | sha256sum | cut -c1-16
  EXPECT_EQ(NodeSketch::Hash("vm", "8ecadfc9-d1a3-4ea4-b844-0d9f87e4d7c8"), 0x3aad37daab0ea574ull);
}

TEST(NodeSketchTest, EmptyCountsZero) {
  NodeSketch sketch;
  EXPECT_EQ(sketch.Count(), 0u);
  EXPECT_TRUE(sketch.exact());
  EXPECT_TRUE(sketch.Gauges().empty());
}

TEST(NodeSketchTest, ExactSketchesExportTheirHashesAndTheRestTheirRegisters) {
  NodeSketch small, large;
  for (uint64_t n = 1; n <= 256; ++n) small.Add(VmHash(n));
  for (uint64_t n = 1; n <= 100000; ++n) large.Add(VmHash(n));
  const auto small_gauges = small.Gauges();
  EXPECT_EQ(small_gauges.size(), 256u);
  for (const auto& g : small_gauges) EXPECT_EQ(g.slot[0], 'm');
  const auto large_gauges = large.Gauges();
  EXPECT_EQ(large_gauges.size(), NodeSketch::kRegisterGauges);  // every register set by now
  for (const auto& g : large_gauges) EXPECT_EQ(g.slot[0], 'r');
}

TEST(NodeSketchTest, ExactUpTo256AndWithin5PercentTo100000) {
  NodeSketch sketch;
  double worst = 0;
  uint64_t worst_at = 0;
  uint64_t next_check = 257;
  for (uint64_t n = 1; n <= 100000; ++n) {
    sketch.Add(VmHash(n));
    if (n <= NodeSketch::kExactNodes) {
      ASSERT_EQ(sketch.Count(), n);
      ASSERT_TRUE(sketch.exact());
      continue;
    }
    ASSERT_FALSE(sketch.exact()) << n;
    if (n != next_check && n != 100000) continue;
    next_check = next_check + next_check / 20 + 1;  // about 110 checks, 5% apart
    const double error = std::abs(static_cast<double>(sketch.Count()) - n) / n;
    if (error > worst) {
      worst = error;
      worst_at = n;
    }
    ASSERT_LE(error, 0.05) << n << " nodes estimated as " << sketch.Count();
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
  RecordProperty("worst_at", std::to_string(worst_at));
}

TEST(NodeSketchTest, RepeatsAndUnionsDoNotDouble) {
  // Three replicas; each node reports to two of them, one of them twice.
  NodeSketch a, b, c;
  for (uint64_t n = 1; n <= 1000; ++n) {
    NodeSketch* first = n % 3 == 0 ? &a : n % 3 == 1 ? &b : &c;
    NodeSketch* second = n % 3 == 0 ? &b : n % 3 == 1 ? &c : &a;
    first->Add(VmHash(n));
    first->Add(VmHash(n));
    second->Add(VmHash(n));
  }
  NodeSketch all;
  for (uint64_t n = 1; n <= 1000; ++n) all.Add(VmHash(n));
  NodeSketch merged;
  merged.Merge(a);
  merged.Merge(b);
  merged.Merge(c);
  merged.Merge(a);  // a second Prometheus' copy of the same series
  EXPECT_EQ(merged, all);
  EXPECT_EQ(merged.Count(), all.Count());
}

TEST(NodeSketchTest, SmallUnionIsExact) {
  NodeSketch a, b;
  for (uint64_t n = 1; n <= 200; ++n) a.Add(VmHash(n));
  for (uint64_t n = 100; n <= 256; ++n) b.Add(VmHash(n));
  a.Merge(b);
  EXPECT_EQ(a.Count(), 256u);
  EXPECT_TRUE(a.exact());
  a.Add(VmHash(257));
  EXPECT_FALSE(a.exact());
  EXPECT_GE(a.Count(), 257u);
}

TEST(NodeSketchTest, GaugesRoundTrip) {
  for (uint64_t nodes : {1u, 17u, 256u, 257u, 5000u}) {
    NodeSketch sketch;
    for (uint64_t n = 1; n <= nodes; ++n) sketch.Add(VmHash(n));
    const std::vector<NodeSketch::Gauge> gauges = sketch.Gauges();
    EXPECT_LE(gauges.size(), nodes <= 256 ? nodes : NodeSketch::kRegisterGauges);
    NodeSketch read;
    for (const auto& g : gauges) {
      // Through a double, as Prometheus stores it.
      ASSERT_TRUE(read.AddGauge(g.slot, static_cast<double>(g.value)).ok()) << g.slot;
    }
    EXPECT_EQ(read.Count(), sketch.Count()) << nodes;
    EXPECT_EQ(read.exact(), sketch.exact()) << nodes;
    if (sketch.exact()) EXPECT_EQ(read, sketch) << nodes;  // the registers rebuilt too
    // What was read merges into a replica's own as the original would.
    NodeSketch own, own_with_original;
    for (uint64_t n = 4000; n <= 4100; ++n) {
      own.Add(VmHash(n));
      own_with_original.Add(VmHash(n));
    }
    own.Merge(read);
    own_with_original.Merge(sketch);
    EXPECT_EQ(own.Count(), own_with_original.Count()) << nodes;
  }
}

TEST(NodeSketchTest, UnionsOfExactAndEstimatedSketchesStayRight) {
  // Two exact halves whose union passes 256: estimated from registers rebuilt from hashes.
  NodeSketch a, b, all;
  for (uint64_t n = 1; n <= 200; ++n) a.Add(VmHash(n));
  for (uint64_t n = 201; n <= 400; ++n) b.Add(VmHash(n));
  for (uint64_t n = 1; n <= 400; ++n) all.Add(VmHash(n));
  NodeSketch read;
  for (const NodeSketch* s : {&a, &b}) {
    for (const auto& g : s->Gauges()) ASSERT_TRUE(read.AddGauge(g.slot, g.value).ok());
  }
  EXPECT_FALSE(read.exact());
  EXPECT_EQ(read.Count(), all.Count());
  // An exact sketch read beside an estimated one: the estimate, never the exact part alone.
  NodeSketch c;
  for (uint64_t n = 1; n <= 3000; ++n) c.Add(VmHash(n));
  NodeSketch mixed;
  for (const NodeSketch* s : {&a, &c}) {
    for (const auto& g : s->Gauges()) ASSERT_TRUE(mixed.AddGauge(g.slot, g.value).ok());
  }
  EXPECT_EQ(mixed.Count(), c.Count());
}

TEST(NodeSketchTest, ForeignGaugesAreRefused) {
  NodeSketch sketch;
  for (const auto& [slot, value] : std::vector<std::pair<std::string, double>>{
           {"m0", -1},
           {"m0", 0.5},
           {"m0", 9007199254740992.0},  // 2^53
           {"m0", NAN},
           {"m256", 1},
           {"m01", 1},
           {"r316", 1},
           {"r315", 16},  // register 4096: gauge 315 holds register 4095 alone
           {"r0", static_cast<double>(uint64_t{1} << 52)},
           {"x1", 1},
           {"", 1},
           {"m", 1},
           {"r-1", 1},
       }) {
    Status st = sketch.AddGauge(slot, value);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << slot << " " << value;
    EXPECT_THAT(st.message(), HasSubstr("node sketch slot")) << slot;
  }
  EXPECT_EQ(sketch, NodeSketch());
}

}  // namespace
}  // namespace hotfix::service
