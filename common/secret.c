/* Memory for a secret (see secret.h). */
#include "secret.h"

#include <string.h>
#include <sys/mman.h>

static size_t secret_len(size_t n) { return (n + 4095) & ~(size_t)4095; }

void *braid_secret_alloc(size_t n) {
  size_t len = secret_len(n ? n : 1);
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  (void)madvise(p, len, MADV_DONTDUMP); /* a core dump of the process holds no copy */
  (void)mlock(p, len);                  /* nor does swap, where RLIMIT_MEMLOCK allows */
  return p;
}

void braid_secret_free(void *p, size_t n) {
  if (!p) return;
  size_t len = secret_len(n ? n : 1);
  explicit_bzero(p, len);
  munlock(p, len);
  munmap(p, len);
}
