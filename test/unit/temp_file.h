// A file in /tmp holding some text for one test, removed with the object.
#ifndef BRAID_TEST_TEMP_FILE_H
#define BRAID_TEST_TEMP_FILE_H

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/braid-test-XXXXXX";
    int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    path_ = name;
    if (fd >= 0) {
      EXPECT_EQ(write(fd, text.data(), text.size()), (ssize_t)text.size());
      close(fd);
    }
  }
  ~TempFile() { unlink(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

#endif
