/* What every layer does with a comm: fail it (once, with one WARN). */
#include "comm/comm.h"

#include <stdarg.h>
#include <stdio.h>

#include "log.h"

ncclResult_t braid_comm_fail(struct braid_comm *c, ncclResult_t err, const char *fmt, ...) {
  if (c->err) return c->err;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c->err = err;
  BRAID_WARN("%s connection with %s on device %d failed: %s",
             c->kind == BRAID_COMM_SEND ? "send" : "receive", c->peer, c->dev, msg);
  return err;
}
