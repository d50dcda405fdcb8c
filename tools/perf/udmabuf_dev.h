/* braid-perf: the kernel's /dev/udmabuf interface (linux/udmabuf.h, Linux 4.20), declared
 * here so that braid-perf builds where the kernel headers lack it. */
#ifndef PERF_UDMABUF_DEV_H
#define PERF_UDMABUF_DEV_H

#include <linux/ioctl.h>
#include <stdint.h>

#define UDMABUF_DEV_PATH "/dev/udmabuf"
#define UDMABUF_DEV_FLAGS_CLOEXEC 0x01

struct udmabuf_dev_create {
  uint32_t memfd;
  uint32_t flags;
  uint64_t offset;
  uint64_t size;
};

_Static_assert(sizeof(struct udmabuf_dev_create) == 24, "struct udmabuf_create is 24 bytes");

/* UDMABUF_CREATE: _IOW('u', 0x42, struct udmabuf_create) */
#define UDMABUF_DEV_CREATE _IOW('u', 0x42, struct udmabuf_dev_create)

#endif
