/* BRAID_TRANSPORT (see transport.h). */
#include "transport/transport.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "transport/ofi/ofi.h"
#include "param.h"
#include "transport/verbs/verbs_dev.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int decided; /* 0 not yet, 1 done, -1 failed */
static enum braid_transport chosen;
static char name[128] = "TCP sockets";

/* verbs chosen, with n usable ports: the name for logs and the one INFO line saying why. */
static int choose_verbs(int n, const char *why) {
  chosen = BRAID_TRANSPORT_VERBS;
  snprintf(name, sizeof name, "verbs (%d RDMA port%s)", n, n > 1 ? "s" : "");
  BRAID_INFO(NCCL_INIT | NCCL_NET, "transport: %s (%s)", name, why);
  return 1;
}

static int decide(void) {
  const char *want = braid_param_str(BRAID_P_TRANSPORT);
  char why[300];
  int hw = 0;
  if (!strcmp(want, "socket")) {
    BRAID_INFO(NCCL_INIT | NCCL_NET, "transport: TCP sockets (BRAID_TRANSPORT=socket)");
    return 1;
  }
  if (!strcmp(want, "ofi")) {
    if (!braid_ofi_probe(&hw, why, sizeof why)) {
      BRAID_WARN("BRAID_TRANSPORT=ofi, but libfabric cannot be used: %s", why);
      return -1;
    }
    chosen = BRAID_TRANSPORT_OFI;
    snprintf(name, sizeof name, "libfabric %s", braid_ofi_provider());
    BRAID_INFO(NCCL_INIT | NCCL_NET, "transport: libfabric, provider %s (BRAID_TRANSPORT=ofi; "
               "host memory only: NCCL stages GPU data through it)", braid_ofi_provider());
    return 1;
  }
  struct braid_verbs_rail rails[16];
  if (!strcmp(want, "verbs")) {
    int n = braid_verbs_rails(rails, 16, why, sizeof why);
    if (n <= 0) {
      BRAID_WARN("BRAID_TRANSPORT=verbs, but no RDMA port can be used: %s", n < 0 ? "bad BRAID_IB_HCA" : why);
      return -1;
    }
    return choose_verbs(n, "BRAID_TRANSPORT=verbs; host memory only: NCCL stages GPU data through it");
  }
  if (strcmp(want, "auto")) {
    BRAID_WARN("invalid configuration: BRAID_TRANSPORT=\"%s\" (use auto, socket, ofi or verbs)", want);
    return -1;
  }
  /* auto: RDMA ports first; then a hardware RDM provider beats TCP sockets; libfabric's own tcp
   * does not. */
  char vwhy[300] = "";
  if (braid_verbs_probe(vwhy, sizeof vwhy)) {
    int n = braid_verbs_rails(rails, 16, vwhy, sizeof vwhy);
    if (n > 0) return choose_verbs(n, "auto: RDMA devices with active ports");
  }
  if (!braid_ofi_probe(&hw, why, sizeof why)) {
    BRAID_INFO(NCCL_INIT | NCCL_NET, "transport: TCP sockets (auto: %s)", why);
  } else if (!hw) {
    BRAID_INFO(NCCL_INIT | NCCL_NET, "transport: TCP sockets (auto: libfabric's best provider here "
               "is %s, no faster than braid's own sockets; BRAID_TRANSPORT=ofi forces it)",
               braid_ofi_provider());
  } else {
    chosen = BRAID_TRANSPORT_OFI;
    snprintf(name, sizeof name, "libfabric %s", braid_ofi_provider());
    BRAID_INFO(NCCL_INIT | NCCL_NET, "transport: libfabric, provider %s (auto: a hardware provider)",
               braid_ofi_provider());
  }
  return 1;
}

ncclResult_t braid_transport_get(enum braid_transport *t) {
  pthread_mutex_lock(&lock);
  if (!decided) {
    decided = decide();
  }
  int ok = decided > 0;
  *t = chosen;
  pthread_mutex_unlock(&lock);
  return ok ? ncclSuccess : ncclInvalidArgument;
}

const char *braid_transport_name(void) { return name; }

enum braid_transport braid_transport_kind(void) {
  enum braid_transport t;
  return braid_transport_get(&t) == ncclSuccess ? t : BRAID_TRANSPORT_SOCKET;
}

const char *braid_transport_word(enum braid_transport t) {
  return t == BRAID_TRANSPORT_OFI ? "libfabric" : t == BRAID_TRANSPORT_VERBS ? "verbs" : "TCP sockets";
}

int braid_transport_forced(void) { return strcmp(braid_param_str(BRAID_P_TRANSPORT), "auto") != 0; }
