#include "tmpfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *braid_tmpfile_open(const char *path, char *tmp, size_t tmplen) {
  int n = snprintf(tmp, tmplen, "%s.tmp.XXXXXX", path);
  if (n < 0 || (size_t)n >= tmplen) {
    errno = ENAMETOOLONG;
    return NULL;
  }
  int fd = mkostemp(tmp, O_CLOEXEC); /* O_CREAT | O_EXCL: never an existing file or link */
  if (fd < 0) return NULL;
  FILE *f = fchmod(fd, 0644) == 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    int e = errno;
    close(fd);
    unlink(tmp);
    errno = e;
  }
  return f;
}

int braid_tmpfile_commit(FILE *f, const char *tmp, const char *path, int bad) {
  int rc = bad ? -1 : 0, err = bad ? EIO : 0;
  if (!rc && (fflush(f) != 0 || fsync(fileno(f)) != 0)) rc = -1, err = errno;
  if (fclose(f) != 0 && !rc) rc = -1, err = errno;
  if (!rc && rename(tmp, path) != 0) rc = -1, err = errno;
  if (rc) {
    unlink(tmp);
    errno = err ? err : EIO;
  }
  return rc;
}

int braid_file_create(const char *path, int append) {
  return open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (append ? O_APPEND : O_TRUNC),
              0644);
}
