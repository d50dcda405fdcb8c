/* braid-verbs-probe: lists the RDMA rails a braid verbs transport would use (net_plugin/transport/verbs/verbs_dev.h),
 * or why there are none.  Exit status: 0 at least one rail, 1 none, 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "param.h"
#include "transport/verbs/verbs_dev.h"

static void usage(FILE *f) {
  fputs("usage: braid-verbs-probe [--help]\n"
        "Lists the RDMA rails braid's verbs transport would use: one per device and ACTIVE port\n"
        "that BRAID_IB_HCA (else NCCL_IB_HCA) selects, with link layer, active MTU, speed and the\n"
        "GID index to use (BRAID_IB_GID_INDEX, else NCCL_IB_GID_INDEX, else automatic: RoCE v2\n"
        "with an IPv4 address, else RoCE v2 with an IPv6 one, else 0; 0 on InfiniBand).\n"
        "  BRAID_IB_HCA syntax (NCCL's): mlx5 (prefixes), ^mlx5_1 (exclude), =mlx5_0 (exact),\n"
        "  mlx5_0:1,mlx5_1:1 (ports).  NCCL_DEBUG=INFO shows each step.\n"
        "Exit status: 0 when there is at least one rail, 1 when there is none (the reason is\n"
        "printed), 2 on a usage error.\n", f);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
    fprintf(stderr, "braid-verbs-probe: unknown argument '%s'\n", argv[i]);
    usage(stderr);
    return 2;
  }
  static struct braid_verbs_rail rails[BRAID_VERBS_MAX_RAILS];
  char why[768] = "";
  int n = braid_verbs_rails(rails, BRAID_VERBS_MAX_RAILS, why, sizeof why);
  const char *hca = braid_param_str(BRAID_P_IB_HCA);
  if (n <= 0) {
    printf("braid-verbs-probe: no rails: %s\n", why);
    return 1;
  }
  printf("braid-verbs-probe: %d rail%s (filter: %s)\n", n, n == 1 ? "" : "s",
         hca && *hca ? hca : "none");
  printf("# %-14s %-10s %5s %7s %4s %4s  %s\n", "device:port", "link", "mtu", "Mbit/s", "gid",
         "roce", "gid address");
  for (int i = 0; i < n; i++) {
    const struct braid_verbs_rail *r = &rails[i];
    char name[BRAID_VERBS_NAME_MAX + 8], gid[64], roce[8] = "-", idx[8];
    snprintf(name, sizeof name, "%.*s:%d", BRAID_VERBS_NAME_MAX - 1, r->dev, r->port);
    braid_verbs_gid_str(r->gid, gid, sizeof gid);
    if (r->roce) snprintf(roce, sizeof roce, "v%d", r->roce);
    snprintf(idx, sizeof idx, "%d%s", r->gid_index, r->gid_from_env ? "*" : "");
    printf("%-16s %-10s %5d %7d %4s %4s  %s\n", name, braid_verbs_link_name(r->link), r->mtu,
           r->speed_mbps, idx, roce, gid);
  }
  if (braid_param_from(BRAID_P_IB_GID_INDEX))
    printf("# *: GID index set by BRAID_IB_GID_INDEX / NCCL_IB_GID_INDEX\n");
  return 0;
}
