#include "service/transport/connection_memory.h"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <memory>
#include <string>

namespace hotfix::service {
namespace {

// OpenSSL's side (CRYPTO_set_mem_functions) is tested against the service binary, which
// installs it first thing: a test binary loads Debian's libcpp-httplib, whose constructor
// initializes OpenSSL before any code of ours runs (ServiceAttackTest,
// PartialTlsRecordsAreChargedToTheirAddress).

TEST(MemoryPoolTest, EachKeyGetsItsShareAndTheWholeIsBounded) {
  auto pool = std::make_shared<MemoryPool>(100, 40);
  EXPECT_TRUE(pool->TryCharge("a", 40));
  EXPECT_FALSE(pool->TryCharge("a", 1)) << "past a's share";
  EXPECT_TRUE(pool->TryCharge("b", 40));
  EXPECT_FALSE(pool->TryCharge("c", 21)) << "past the whole";
  EXPECT_TRUE(pool->TryCharge("c", 20));
  EXPECT_EQ(pool->used(), 100u);
  EXPECT_EQ(pool->keys(), 3u);
  pool->Release("a", 40);
  EXPECT_EQ(pool->keys(), 2u) << "a key holding nothing is forgotten";
  EXPECT_FALSE(pool->TryCharge("d", 41));
  EXPECT_EQ(pool->keys(), 2u) << "a refused charge leaves no entry behind";
  EXPECT_TRUE(pool->TryCharge("d", 40));
  EXPECT_EQ(pool->used(), 100u);
}

TEST(ConnectionMemoryTest, TheAllowanceIsFreeAndTheRestIsReservedInChunks) {
  constexpr uint64_t kChunk = ConnectionMemory::kChunkBytes;
  auto pool = std::make_shared<MemoryPool>(10 * kChunk, 4 * kChunk);
  ConnectionMemory* m = ConnectionMemory::New(pool, "10.0.0.1", 2 * kChunk);
  EXPECT_TRUE(m->TryCharge(2 * kChunk));
  EXPECT_EQ(pool->used(), 0u) << "within the allowance";
  EXPECT_TRUE(m->TryCharge(1));
  EXPECT_EQ(m->reserved(), kChunk);
  EXPECT_EQ(pool->used(), kChunk);
  EXPECT_TRUE(m->TryCharge(4 * kChunk - 1));
  EXPECT_EQ(pool->used(), 4 * kChunk) << "the address's whole share";
  EXPECT_FALSE(m->TryCharge(1)) << "past the share";
  EXPECT_FALSE(m->over()) << "a refused TryCharge is the caller's to answer";
  EXPECT_EQ(m->used(), 6 * kChunk);
  m->Release(4 * kChunk);
  EXPECT_LE(pool->used(), kChunk) << "given back, but for a chunk of slack";
  m->Release(2 * kChunk);
  m->Close();
  EXPECT_EQ(pool->used(), 0u) << "a closed account holds nothing of the pool";
}

TEST(ConnectionMemoryTest, AnAllocationPastTheShareMarksTheAccountOver) {
  auto pool = std::make_shared<MemoryPool>(1 << 20, 8 * 1024);
  ConnectionMemory* m = ConnectionMemory::New(pool, "10.0.0.2", 0);
  m->Allocate(8 * 1024);
  EXPECT_FALSE(m->over());
  m->Allocate(1);  // OpenSSL's: never refused, but the connection is to close
  EXPECT_TRUE(m->over());
  m->Free(1);
  m->Free(8 * 1024);
  m->Close();
  EXPECT_EQ(pool->used(), 0u);
}

TEST(ConnectionMemoryTest, NeighboursAreUntouchedByOneAddressFillingItsShare) {
  auto pool = std::make_shared<MemoryPool>(1 << 20, 128 * 1024);
  ConnectionMemory* attacker = ConnectionMemory::New(pool, "10.0.0.66", 0);
  ConnectionMemory* node = ConnectionMemory::New(pool, "10.0.0.7", 0);
  while (attacker->TryCharge(4096)) {
  }
  EXPECT_EQ(pool->used(), 128u * 1024);
  EXPECT_TRUE(node->TryCharge(64 * 1024)) << "the node's address has its own share";
  node->Release(64 * 1024);
  attacker->Release(attacker->used());
  node->Close();
  attacker->Close();
  EXPECT_EQ(pool->used(), 0u);
}

TEST(ConnectionMemoryTest, NghttpSessionsChargeTheAccountAndAreRefusedPastIt) {
  auto empty = std::make_shared<MemoryPool>(0, 0);
  nghttp2_session_callbacks* callbacks = nullptr;
  ASSERT_EQ(nghttp2_session_callbacks_new(&callbacks), 0);

  // No allowance and no pool: nghttp2's first allocation is refused.
  ConnectionMemory* refused = ConnectionMemory::New(empty, "10.0.0.3", 0);
  nghttp2_session* session = nullptr;
  EXPECT_EQ(nghttp2_session_server_new3(&session, callbacks, nullptr, nullptr,
                                        refused->nghttp2_allocator()),
            NGHTTP2_ERR_NOMEM);
  EXPECT_TRUE(refused->over());
  EXPECT_EQ(refused->used(), 0u) << "whatever it got is given back";
  refused->Close();

  // With room: the session's state is charged while it lives, and only then.
  ConnectionMemory* m = ConnectionMemory::New(empty, "10.0.0.4", 64 * 1024);
  ASSERT_EQ(
      nghttp2_session_server_new3(&session, callbacks, nullptr, nullptr, m->nghttp2_allocator()),
      0);
  const uint64_t session_bytes = m->used();
  EXPECT_GT(session_bytes, 16u * 1024) << "nghttp2 keeps a frame's buffer for output";
  EXPECT_LT(session_bytes, 40u * 1024);
  m->Close();  // the connection is gone; the session's allocations keep the account alive
  nghttp2_session_del(session);  // ASan's leak check: the account is freed with the last one
  nghttp2_session_callbacks_del(callbacks);
}

}  // namespace
}  // namespace hotfix::service
