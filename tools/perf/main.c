/* braid-perf: an NCCL stand-in that drives a net plugin with NCCL's traffic and checks results.
 * See `braid-perf --help`. */
#include <stdio.h>

#include "opts.h"
#include "rank.h"
#include "rdv.h"
#include "tune.h"

int main(int argc, char **argv) {
  struct perf_opts o;
  perf_opts_parse(&o, argc, argv);
  setvbuf(stdout, NULL, _IOLBF, 0);
  tune_env_defaults(&o);
  if (o.nranks_local > 0) return rank_fork_local(&o);
  int lfd = -1, port = o.rdv_port;
  if (o.rank == 0 && (lfd = rdv_listen(o.rdv_host, &port)) < 0) return 2;
  return rank_main(&o, o.rank, o.nranks, lfd, o.rdv_host, port);
}
