// A set of nodes counted without keeping them (docs/ROLLOUTS.md, "Counting nodes"): how the
// replicas, which never talk to each other, agree on how many distinct nodes reported, through
// Prometheus alone. A sketch only grows, and merging two is their union: idempotent,
// commutative and associative, so a node counted by every replica, twice by one, again after
// a restart, or seen through two Prometheus servers is still one node.
//
// Two parts, from one 64-bit hash of the key (a vmId or a subscriptionId, never stored):
//  - the smallest kMinValues hashes seen (k-minimum values): while fewer than kMinValues
//    distinct nodes were added, the count is exact (up to a 53-bit hash collision: about 1 in
//    10^11 at 256 nodes);
//  - a HyperLogLog of kRegisters 4-bit registers, for more: Ertl's improved estimator
//    (arXiv:1702.01284, algorithm 6, with q = 14 rank bits: registers saturate only past about
//    6.7e7 nodes, which its tau term corrects), whose relative standard error is
//    1.04/sqrt(4096) = 1.6%. tests/service/rollout/node_sketch_test.cc checks it within 5% from
//    257 to 100,000 nodes.
//
// Exported as gauges (Gauges), one of two shapes: while exact, each kept hash its own gauge (53
// bits, exact in a double), from which a reader also rebuilds the registers (the hash's index
// and rank bits are within those 53); once not, only the registers, thirteen to a gauge (52
// bits), which tell a reader the set is past exact. Only non-zero gauges: a sketch of n nodes
// has at most min(n, 256) or 316 of them. The reader merges what every replica exported with
// AddGauge. Pure: no I/O, not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hotfix::service {

class NodeSketch {
 public:
  static constexpr size_t kExactNodes = 256;
  static constexpr size_t kMinValues = kExactNodes + 1;
  static constexpr int kIndexBits = 12;
  static constexpr size_t kRegisters = size_t{1} << kIndexBits;
  // Bits after the index that give a register its rank: ranks 1..kRankBits+1 fit in 4 bits.
  static constexpr int kRankBits = 14;
  static constexpr int kRegisterBits = 4;
  static constexpr size_t kRegistersPerGauge = 13;
  static constexpr size_t kRegisterGauges =
      (kRegisters + kRegistersPerGauge - 1) / kRegistersPerGauge;  // 316

  // The first 8 bytes of SHA-256(domain ":" key), big-endian. domain keeps the sets of
  // different kinds of keys apart ("vm", "subscription"); key is compared as given (callers
  // lower-case it).
  static uint64_t Hash(std::string_view domain, std::string_view key);

  void Add(uint64_t hash);
  void Merge(const NodeSketch& other);

  // The distinct keys added: exact while under kMinValues, else the HyperLogLog's estimate
  // (never under kMinValues).
  uint64_t Count() const;
  // Under kMinValues keys, all of them kept, and no merged sketch said it was past that.
  bool exact() const { return !saturated_ && min_values_.size() < kMinValues; }

  // A gauge's slot label and value: "m<i>" for the i-th smallest value (i from 0), "r<j>" for
  // registers 13j..13j+12 (register 13j + i in bits 4i..4i+3).
  struct Gauge {
    std::string slot;
    uint64_t value = 0;
  };
  std::vector<Gauge> Gauges() const;
  // Merges one exported gauge. InvalidArgument for a slot or value no Gauges() makes (a
  // value must be a whole number below 2^53, a register gauge's index below 410), so a
  // foreign series cannot corrupt the sketch.
  Status AddGauge(std::string_view slot, double value);

  bool operator==(const NodeSketch&) const = default;

 private:
  void AddValue(uint64_t value);  // a kept hash's value (hash >> 11), both parts
  void AddMinValue(uint64_t value);
  void AddRegister(size_t index, uint8_t rank);

  std::vector<uint64_t> min_values_;  // ascending, distinct, at most kMinValues
  std::array<uint8_t, kRegisters> registers_{};
  // Known to hold kMinValues keys or more: reached here, or merged from a sketch that was.
  bool saturated_ = false;
};

}  // namespace hotfix::service
