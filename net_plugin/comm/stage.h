/* GPU memory carried by a connection whose path takes host memory only.
 *
 * NCCL decides GPU memory per device (ptrSupport, read before any connection exists) and then
 * registers GPU buffers on every connection of that device; braid picks the transport per
 * connection, and a verbs device whose peer runs TCP sockets (no RDMA port there, or a driver
 * missing) connects over sockets.  Such a connection keeps the device's promise by staging: a
 * registration of GPU memory gets a host buffer of the same size, a send copies its bytes out of
 * GPU memory before they are framed, and a receive lands in the host buffer and is copied into
 * GPU memory before test() reports it done, so nothing is left for iflush.  The copies go
 * through the CUDA driver, opened at run time (common/cuda.h), on a stream of their own.  The
 * same holds for CollNet's buffers (collnet/), whose operations read and write host memory. */
#ifndef BRAID_STAGE_H
#define BRAID_STAGE_H

#include <stddef.h>

struct braid_stage;

/* A staged registration of [gpu, gpu + size): a host buffer and a copier.  NULL with the reason
 * in why (the CUDA driver cannot be loaded, no context, no memory). */
struct braid_stage *braid_stage_new(void *gpu, size_t size, char *why, size_t whylen);
void braid_stage_free(struct braid_stage *s);
/* The host address standing for gpu address p; NULL when [p, p + len) is not inside the
 * registration. */
void *braid_stage_host(const struct braid_stage *s, const void *p, size_t len);
/* Copies len bytes at gpu address p into the host buffer (before a send), or from the host
 * buffer to p (after a receive).  0, or -1 with a WARN naming the CUDA error. */
int braid_stage_in(struct braid_stage *s, const void *p, size_t len);
int braid_stage_out(struct braid_stage *s, void *p, size_t len);

#endif
