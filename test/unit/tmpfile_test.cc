// Files braid writes (metrics, advice, calibration, health, traces) never write through a link
// planted at a predictable name (issue 19 item 13): the temporary is created with O_EXCL under an
// unpredictable name, rename() replaces a link at the target, and a file opened in place refuses
// a link.
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

extern "C" {
#include "tmpfile.h"
int braid_telemetry_write(const char* path);  // telemetry.h (C atomics: not for C++)
}

namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TmpFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char d[] = "/tmp/braid-tmpfile-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(d));
    dir_ = d;
    victim_ = dir_ + "/victim";
    std::ofstream(victim_) << "keep";
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    EXPECT_EQ(0, system(cmd.c_str()));
  }
  bool IsRegular(const std::string& p) {
    struct stat st;
    return lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  }
  std::string dir_, victim_;
};

TEST_F(TmpFile, MetricsNeverFollowALinkAtTheTemporaryName) {
  std::string path = dir_ + "/metrics.prom", pid = std::to_string(getpid());
  // Every name a temporary used to have (telemetry, advice and health, braid-perf --calibrate).
  for (const std::string& t : {path + "." + pid + ".tmp", path + ".tmp." + pid, path + ".tmp"})
    ASSERT_EQ(0, symlink(victim_.c_str(), t.c_str())) << t;
  ASSERT_EQ(0, braid_telemetry_write(path.c_str())) << strerror(errno);
  EXPECT_EQ("keep", Read(victim_)) << "the metrics went through the planted link";
  EXPECT_TRUE(IsRegular(path));
  EXPECT_NE(std::string::npos, Read(path).find("braid_metrics_time_seconds"));
}

TEST_F(TmpFile, ALinkAtTheTargetIsReplacedNotWrittenThrough) {
  std::string path = dir_ + "/metrics.prom";
  ASSERT_EQ(0, symlink(victim_.c_str(), path.c_str()));
  ASSERT_EQ(0, braid_telemetry_write(path.c_str())) << strerror(errno);
  EXPECT_EQ("keep", Read(victim_));
  EXPECT_TRUE(IsRegular(path));
}

TEST_F(TmpFile, TemporaryIsUniqueAndRemovedOnFailure) {
  std::string path = dir_ + "/out";
  char a[4096], b[4096];
  FILE* fa = braid_tmpfile_open(path.c_str(), a, sizeof a);
  FILE* fb = braid_tmpfile_open(path.c_str(), b, sizeof b);
  ASSERT_TRUE(fa && fb);
  EXPECT_STRNE(a, b) << "two writers at once (threads of one process) get their own";
  fputs("one", fa);
  fputs("two", fb);
  EXPECT_EQ(0, braid_tmpfile_commit(fa, a, path.c_str(), 0));
  EXPECT_EQ(-1, braid_tmpfile_commit(fb, b, path.c_str(), 1)) << "a failed write is discarded";
  EXPECT_EQ("one", Read(path));
  EXPECT_NE(0, access(b, F_OK)) << "the discarded temporary is removed";
  struct stat st;
  ASSERT_EQ(0, stat(path.c_str(), &st));
  EXPECT_EQ(0644u, st.st_mode & 0777u);
}

TEST_F(TmpFile, FileOpenedInPlaceRefusesALink) {
  std::string link = dir_ + "/trace.btr", plain = dir_ + "/plain.btr";
  ASSERT_EQ(0, symlink(victim_.c_str(), link.c_str()));
  errno = 0;
  EXPECT_EQ(-1, braid_file_create(link.c_str(), 1));
  EXPECT_EQ(ELOOP, errno);
  EXPECT_EQ("keep", Read(victim_));
  int fd = braid_file_create(plain.c_str(), 1);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(3, write(fd, "abc", 3));
  close(fd);
  fd = braid_file_create(plain.c_str(), 1);  // appends
  EXPECT_EQ(3, write(fd, "def", 3));
  close(fd);
  EXPECT_EQ("abcdef", Read(plain));
}

}  // namespace
