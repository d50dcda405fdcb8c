/* braid-perf: the nccl-tests table and the JSON records. */
#include "report.h"

#include <string.h>

#include "dtype.h"

/* nccl-tests' bus bandwidth factors. */
double report_bus_factor(enum perf_op op, int n) {
  switch (op) {
    case PERF_ALLREDUCE: return 2.0 * (n - 1) / n;
    case PERF_ALLGATHER:
    case PERF_REDUCESCATTER: return (double)(n - 1) / n;
    default: return 1.0;
  }
}

double report_busbw(enum perf_op op, int nranks, size_t bytes, double time_us) {
  double sec = time_us * 1e-6;
  return sec > 0 ? (double)bytes / 1e9 / sec * report_bus_factor(op, nranks) : 0;
}

/* The header's algorithm: what --algo says, or the kind of multi-algorithm run. */
static const char *report_algo(const struct perf_opts *o) {
  if (o->op != PERF_ALLREDUCE) return "";
  return o->calibrate ? "calibration" : perf_opts_algo_label(o, o->algo);
}

int report_open(struct report *rp, const struct perf_opts *o, int nranks, const char *describe) {
  memset(rp, 0, sizeof *rp);
  rp->o = o;
  rp->nranks = nranks;
  if (o->json && !(rp->json = fopen(o->json, "w"))) {
    perror(o->json);
    return -1;
  }
  if (rp->json) fprintf(rp->json, "[\n");
  printf("# braid-perf %s%s%s%s: %d ranks, %d channels, proto %s, %s\n", perf_op_name(o->op),
         o->op == PERF_ALLREDUCE ? " " : "", report_algo(o), o->oneway ? " oneway" : "", nranks,
         o->nchannels, perf_proto_name(o->proto),
         o->optional_recv ? "optional recv completion on" : "optional recv completion off");
  printf("# %s\n", describe);
  if (o->op == PERF_SENDRECV)
    printf("# network pieces (Simple): %zu bytes (NCCL_P2P_NET_CHUNKSIZE, after the plugin's init)\n",
           o->p2p_chunk);
  if (o->check_all)
    printf("# warm-up %d, iterations %d; every iteration checked (--check-all): each its own data, "
           "the output poisoned before it, checks not timed\n", o->warmup, o->iters);
  else
    printf("# warm-up %d, iterations %d; checked: each warm-up, the last timed iteration (the "
           "timed loop reuses one input; --check-all checks every one) and a verify pass\n",
           o->warmup, o->iters);
  if (o->repeats > 1)
    printf("# time: the median of %d interleaved repeats (each the slowest rank's)\n", o->repeats);
  printf("#\n#%12s %12s %8s %6s %10s %8s %8s %7s  %s\n", "size", "count", "type", "redop",
         "time", "algbw", "busbw", "#wrong",
         perf_opts_multi_algo(o) && o->op == PERF_ALLREDUCE ? "algo/proto" : "proto");
  printf("#%12s %12s %8s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
         "(GB/s)", "");
  fflush(stdout);
  return 0;
}

void report_row(struct report *rp, const struct report_row *row) {
  const struct perf_opts *o = rp->o;
  double sec = row->time_us * 1e-6;
  double algbw = sec > 0 ? (double)row->bytes / 1e9 / sec : 0;
  double busbw = algbw * report_bus_factor(o->op, rp->nranks);
  const char *redop = o->op == PERF_ALLREDUCE || o->op == PERF_REDUCESCATTER
                          ? dt_op_name(o->redop) : "none";
  printf(" %12zu %12zu %8s %6s %10.2f %8.3f %8.3f %7llu  %s\n", row->bytes, row->count,
         dt_name(o->dtype), redop, row->time_us, algbw, busbw, (unsigned long long)row->wrong,
         row->label && row->label[0] ? row->label : perf_proto_name(row->proto));
  fflush(stdout);
  rp->busbw_sum += busbw;
  rp->wrong_total += row->wrong;
  rp->cpu_user_s += row->cpu_user_s;
  rp->cpu_sys_s += row->cpu_sys_s;
  rp->cpu_bytes += row->cpu_bytes;
  rp->cpu_proxy_s += row->cpu_proxy_s;
  double cpu_per_gb = row->cpu_bytes > 0 ? (row->cpu_user_s + row->cpu_sys_s) / (row->cpu_bytes / 1e9) : 0;
  if (rp->json)
    fprintf(rp->json,
            "%s  {\"op\": \"%s\", \"algo\": \"%s\", \"proto\": \"%s\", \"nranks\": %d, "
            "\"channels\": %d, \"type\": \"%s\", \"redop\": \"%s\", \"bytes\": %zu, "
            "\"count\": %zu, \"time_us\": %.3f, \"algbw_GBps\": %.6f, \"busbw_GBps\": %.6f, "
            "\"wrong\": %llu, \"cpu_user_s\": %.6f, \"cpu_sys_s\": %.6f, "
            "\"cpu_sent_bytes\": %.0f, \"cpu_s_per_GB\": %.6f, \"cpu_proxy_s\": %.6f}",
            rp->rows ? ",\n" : "", perf_op_name(o->op),
            o->op == PERF_ALLREDUCE ? perf_opts_algo_label(o, row->algo) : "ring",
            perf_proto_name(row->proto), rp->nranks, row->nch, dt_name(o->dtype), redop,
            row->bytes, row->count, row->time_us, algbw, busbw, (unsigned long long)row->wrong,
            row->cpu_user_s, row->cpu_sys_s, row->cpu_bytes, cpu_per_gb, row->cpu_proxy_s);
  rp->rows++;
}

/* "# CPU per GB moved    : ...": every rank process's user + system CPU seconds in the timed
 * iterations over the GB (1e9 bytes) all ranks sent in them; each rank's share of the total; the
 * share of the threads calling the plugin (NCCL's proxy threads in a job: they poll whatever the
 * plugin, and a NCCL job pays for that polling with any plugin) and of the others (the plugin's
 * own threads). */
static void report_cpu(const struct report *rp, const double *rank_cpu) {
  double gb = rp->cpu_bytes / 1e9, cpu = rp->cpu_user_s + rp->cpu_sys_s;
  if (!(gb > 0)) {
    printf("# CPU per GB moved     : n/a (no bytes sent in the timed iterations; %.3f s CPU)\n", cpu);
    return;
  }
  printf("# CPU per GB moved     : %.4f s (user %.4f + sys %.4f;", cpu / gb, rp->cpu_user_s / gb,
         rp->cpu_sys_s / gb);
  for (int q = 0; q < rp->nranks; q++)
    printf("%s rank %d %.4f", q ? "," : "", q, rank_cpu[q] / gb);
  /* The process's total and the proxy threads' own clocks are read separately, so with no other
   * thread the difference can come out a hair below zero: that is none. */
  double other = cpu - rp->cpu_proxy_s;
  printf("; %.3f GB; proxy threads %.4f, other threads %.4f)\n", gb, rp->cpu_proxy_s / gb,
         (other > 0 ? other : 0) / gb);
}

void report_close(struct report *rp, uint64_t checked, const double *rank_cpu) {
  printf("# Out of bounds values : %llu %s\n", (unsigned long long)rp->wrong_total,
         rp->wrong_total ? "FAILED" : "OK");
  printf("# Outputs checked      : %llu (all ranks; %s)\n", (unsigned long long)checked,
         rp->o->check_all ? "every iteration" : "not every timed iteration");
  report_cpu(rp, rank_cpu);
  printf("# Avg bus bandwidth    : %g\n#\n", rp->rows ? rp->busbw_sum / rp->rows : 0.0);
  fflush(stdout);
  if (rp->json) {
    fprintf(rp->json, "\n]\n");
    fclose(rp->json);
  }
  rp->json = NULL;
}
