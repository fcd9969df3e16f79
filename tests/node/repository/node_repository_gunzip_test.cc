#include "node/repository/gunzip.h"

#include <zlib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/openssl.h"
#include "temp_dir.h"

namespace hotfix::node::repository {
namespace {

using ::testing::HasSubstr;
using testsupport::TempDir;

// gzip of `data` (one member), by zlib's own deflate.
std::string Gzip(std::string_view data, int level = 6) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Incompressible-ish text of n bytes.
std::string Text(size_t n) {
  std::string s;
  uint32_t x = 12345;
  while (s.size() < n) {
    x = x * 1103515245 + 12345;
    s += "Package: p" + std::to_string(x % 100000) + "\n";
  }
  s.resize(n);
  return s;
}

TEST(GunzipFileTest, DecompressesAndHashesWhatItWrites) {
  TempDir dir;
  const std::string plain = Text(300 * 1024);  // several output buffers
  const auto gz = dir.Write("Packages.gz", Gzip(plain));
  StatusOr<Gunzipped> got = GunzipFile(gz, dir.File("Packages"), 1 << 20);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size, plain.size());
  EXPECT_EQ(got->sha256, ossl::Sha256Hex(plain));
  EXPECT_EQ(dir.Read("Packages"), plain);
}

TEST(GunzipFileTest, HighlyCompressibleInputFlushesEverything) {
  TempDir dir;
  const std::string zeros(5 << 20, '\0');  // 5 MiB from a few KiB: zlib holds output back
  const auto gz = dir.Write("z.gz", Gzip(zeros, 9));
  StatusOr<Gunzipped> got = GunzipFile(gz, dir.File("z"), 8 << 20);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size, zeros.size());
  EXPECT_EQ(got->sha256, ossl::Sha256Hex(zeros));
}

TEST(GunzipFileTest, ConcatenatedMembersAreOneStream) {
  TempDir dir;
  const auto gz = dir.Write("two.gz", Gzip("first\n") + Gzip("second\n"));
  StatusOr<Gunzipped> got = GunzipFile(gz, dir.File("two"), 1024);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(dir.Read("two"), "first\nsecond\n");
}

TEST(GunzipFileTest, MoreThanTheCapIsAnIntegrityFailure) {
  TempDir dir;
  const auto gz = dir.Write("bomb.gz", Gzip(std::string(2 << 20, 'a'), 9));
  StatusOr<Gunzipped> got = GunzipFile(gz, dir.File("bomb"), 1 << 20);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("exceeds 1048576 bytes"));
}

TEST(GunzipFileTest, CorruptTruncatedOrTrailingGarbageIsAnIntegrityFailure) {
  TempDir dir;
  std::string good = Gzip(Text(10000));
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x55;
  std::string crc = good;
  crc[crc.size() - 6] ^= 0x01;  // the CRC-32 in the trailer
  const std::pair<std::string, std::string> cases[] = {
      {"flipped", flipped},
      {"crc", crc},
      {"truncated", good.substr(0, good.size() - 10)},
      {"garbage-after", good + "not gzip at all"},
      {"not-gzip", "Package: aks-node-controller\n"},
      {"empty", ""},
  };
  for (const auto& [name, bytes] : cases) {
    const auto gz = dir.Write(name, bytes);
    StatusOr<Gunzipped> got = GunzipFile(gz, dir.File(name + ".out"), 1 << 20);
    ASSERT_FALSE(got.ok()) << name;
    EXPECT_EQ(got.status().code(), Status::Code::kDataLoss)
        << name << ": " << got.status().ToString();
  }
}

}  // namespace
}  // namespace hotfix::node::repository
