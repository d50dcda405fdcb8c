/* The verbs flush (verbs_flush.h) for the harnesses that drive a verbs connection over fake
 * endpoints (test/verbs_proto, test/fuzz/fuzz_verbs_ctl.c): none flushes GPU memory, so the
 * loopback queue pair never opens. */
#include <stddef.h>

#include "transport/verbs/verbs_flush.h"

int braid_verbs_flush_open(struct braid_verbs_ep *ep, struct braid_verbs_flush **out) {
  (void)ep;
  *out = NULL;
  return -1;
}
int braid_verbs_flush_post(struct braid_verbs_flush *f, const struct braid_verbs_mr *mr, const void *addr,
                           uint64_t cookie) {
  (void)f, (void)mr, (void)addr, (void)cookie;
  return -1;
}
int braid_verbs_flush_poll(struct braid_verbs_flush *f, struct braid_verbs_ev *ev, int max) {
  (void)f, (void)ev, (void)max;
  return 0;
}
void braid_verbs_flush_close(struct braid_verbs_flush *f) { (void)f; }
