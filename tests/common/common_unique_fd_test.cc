#include "common/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace hotfix {
namespace {

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

// A pipe's two ends, the read end owned by the test.
struct Pipe {
  Pipe() { EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0); }
  int fds[2] = {-1, -1};
};

TEST(UniqueFdTest, ClosesOnDestruction) {
  Pipe p;
  {
    UniqueFd owner(p.fds[0]);
    EXPECT_EQ(owner.get(), p.fds[0]);
    EXPECT_TRUE(owner.valid());
  }
  EXPECT_FALSE(IsOpen(p.fds[0]));
  ::close(p.fds[1]);
}

TEST(UniqueFdTest, MoveTransfersOwnershipAndAssignmentClosesTheOldOne) {
  Pipe p;
  UniqueFd a(p.fds[0]);
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is defined
  EXPECT_EQ(b.get(), p.fds[0]);
  UniqueFd c(p.fds[1]);
  c = std::move(b);
  EXPECT_FALSE(IsOpen(p.fds[1]));
  EXPECT_TRUE(IsOpen(p.fds[0]));
  EXPECT_EQ(c.get(), p.fds[0]);
}

TEST(UniqueFdTest, ReleaseResetAndClose) {
  Pipe p;
  UniqueFd owner(p.fds[0]);
  EXPECT_EQ(owner.release(), p.fds[0]);
  EXPECT_FALSE(owner.valid());
  EXPECT_TRUE(IsOpen(p.fds[0]));
  owner.reset(p.fds[0]);
  owner.reset(p.fds[1]);
  EXPECT_FALSE(IsOpen(p.fds[0]));
  EXPECT_EQ(owner.Close(), 0);
  EXPECT_FALSE(IsOpen(p.fds[1]));
  EXPECT_EQ(owner.Close(), 0);  // nothing held
  UniqueFd empty;
  EXPECT_EQ(empty.get(), -1);
}

}  // namespace
}  // namespace hotfix
