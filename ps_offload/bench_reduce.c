/*
 * braid-ps --bench-reduce: how fast the reduction kernels run against the memory bandwidth
 * this machine gives one thread, both measured in the same run.
 *
 * Bandwidth is counted as bytes read plus bytes written: n inputs plus one output for a
 * reduction, source plus destination for memcpy.  The memcpy reference copies half the
 * reduction's total so that both move the same number of bytes.  For each dtype, memcpy and
 * every implementation run in interleaved rounds (one pass each per round) for about
 * `seconds_per_case` per case, and the best pass of each is reported: a noisy neighbour then
 * slows all of them alike instead of whichever case happened to be running.  All buffers are
 * written before any timing, so no page fault lands inside a measurement.
 */
#include "reduce.h"

#include "auth.h"
#include "clock.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MIB (1024.0 * 1024.0)

/* Page-aligned (2 MiB, so transparent huge pages can back it where enabled), written once. */
static void *alloc_touched(size_t bytes) {
  const size_t align = 2u << 20;
  size_t rounded = (bytes + align - 1) / align * align;
  void *p = NULL;
  if (posix_memalign(&p, align, rounded) != 0) return NULL;
  (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only */
  memset(p, 0, rounded);
  return p;
}

/* Keeps the compiler from dropping writes to a buffer nothing reads. */
static void clobber(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

typedef struct {
  double best_s;
  int runs;
} timing;

static void record(timing *t, double t0) {
  double dt = braid_now_s() - t0;
  if (dt < t->best_s) t->best_s = dt;
  t->runs++;
}

/* Input j holds an ordinary value of the dtype everywhere (no subnormals, no overflow). */
static void fill(void *buf, size_t bytes, int dtype, int j) {
  unsigned char pattern[8];
  size_t esize = braid_reduce_type_size(dtype);
  float f = 1.0f + 0.125f * (float)(j % 8);
  double d = f;
  int32_t i = j + 1;
  switch (dtype) {
    case ncclFloat32:
      memcpy(pattern, &f, 4);
      break;
    case ncclFloat64:
      memcpy(pattern, &d, 8);
      break;
    case ncclFloat16: {
      uint16_t h = braid_f32_to_fp16(f);
      memcpy(pattern, &h, 2);
      break;
    }
    case ncclBfloat16: {
      uint16_t h = braid_f32_to_bf16(f);
      memcpy(pattern, &h, 2);
      break;
    }
    default:
      memcpy(pattern, &i, 4);
      break;
  }
  unsigned char *p = buf;
  for (size_t o = 0; o + esize <= bytes; o += esize) memcpy(p + o, pattern, esize);
}

static const struct {
  int dtype;
  const char *name;
} cases[] = {
    {ncclFloat32, "fp32"}, {ncclBfloat16, "bf16"}, {ncclFloat16, "fp16"},
    {ncclInt32, "int32"},  {ncclFloat64, "fp64"},
};
static const char *const impls[] = {"portable", "avx2", "avx512"};

static double gbps(double bytes, double seconds) { return bytes / seconds / 1e9; }

int braid_reduce_bench(FILE *out, size_t bytes, int ninputs, int seconds_per_case) {
  if (bytes == 0) bytes = 64u << 20;
  if (ninputs <= 0) ninputs = 8;
  double seconds = seconds_per_case > 0 ? seconds_per_case : 1;
  bytes = bytes < 4096 ? 4096 : bytes / 64 * 64; /* whole elements of every dtype */
  const size_t moved = (size_t)(ninputs + 1) * bytes;
  const size_t copy_bytes = moved / 2;

  void **in = calloc((size_t)ninputs, sizeof *in);
  void *dst = alloc_touched(bytes);
  void *csrc = alloc_touched(copy_bytes), *cdst = alloc_touched(copy_bytes);
  int ok = in && dst && csrc && cdst;
  for (int j = 0; ok && j < ninputs; j++) ok = (in[j] = alloc_touched(bytes)) != NULL;
  if (!ok) {
    fprintf(out, "bench-reduce: cannot allocate %d+1 buffers of %zu bytes\n", ninputs, bytes);
    for (int j = 0; in && j < ninputs; j++) free(in[j]);
    free(in), free(dst), free(csrc), free(cdst);
    return -1;
  }
  memset(csrc, 0x5a, copy_bytes);

  const char *saved = braid_reduce_impl();
  fprintf(out,
          "braid-ps reduce benchmark: sum of %d inputs x %.1f MiB, one thread, best pass of "
          "~%.0f s per case, memcpy and implementations interleaved\n",
          ninputs, (double)bytes / MIB, seconds);
  fprintf(out,
          "GB/s counts bytes read + written (%d inputs + 1 output; memcpy: source + "
          "destination of %.1f MiB).  default implementation here: %s\n\n",
          ninputs, (double)copy_bytes / MIB, saved);

  enum { NIMPLS = sizeof impls / sizeof impls[0] };
  int have[NIMPLS], nhave = 0;
  for (int l = 0; l < NIMPLS; l++) nhave += have[l] = braid_reduce_force(impls[l]) == 0;

  fprintf(out, "%-6s %-9s %9s %9s %7s %6s\n", "dtype", "impl", "GB/s", "ms/pass", "%copy",
          "passes");
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const int dtype = cases[c].dtype;
    const size_t count = bytes / braid_reduce_type_size(dtype);
    for (int j = 0; j < ninputs; j++) fill(in[j], bytes, dtype, j);
    timing copy = {1e30, 0}, t[NIMPLS];
    for (int l = 0; l < NIMPLS; l++) t[l] = (timing){1e30, 0};
    const double start = braid_now_s();
    do {
      double t0 = braid_now_s();
      memcpy(cdst, csrc, copy_bytes);
      clobber(cdst);
      record(&copy, t0);
      for (int l = 0; l < NIMPLS; l++) {
        if (!have[l]) continue;
        braid_reduce_force(impls[l]);
        t0 = braid_now_s();
        braid_reduce(dst, (const void *const *)in, ninputs, count, dtype, ncclSum);
        clobber(dst);
        record(&t[l], t0);
      }
    } while (braid_now_s() - start < seconds * (nhave + 1) || copy.runs < 3);

    const double ref = gbps((double)moved, copy.best_s);
    fprintf(out, "%-6s %-9s %9.2f %9.2f %6.1f%% %6d\n", cases[c].name, "memcpy", ref,
            copy.best_s * 1e3, 100.0, copy.runs);
    for (int l = 0; l < NIMPLS; l++) {
      if (!have[l]) continue;
      double g = gbps((double)moved, t[l].best_s);
      fprintf(out, "%-6s %-9s %9.2f %9.2f %6.1f%% %6d\n", cases[c].name, impls[l], g,
              t[l].best_s * 1e3, 100.0 * g / ref, t[l].runs);
    }
    fflush(out);
  }

  braid_reduce_force(saved);

  /* Frame authentication's share of the server's CPU: per partition, every input's tag is
   * checked and every head's RESULT tagged (2 x ninputs tag passes over one input's bytes),
   * against one reduction of the ninputs inputs (fp32, the default implementation). */
  if (ps_auth_init() == 0) {
    uint8_t key[PS_KEY_BYTES], tag[PS_TAG_BYTES], hdr[PS_HDR_BYTES] = {0};
    ps_auth_random(key, sizeof key);
    for (int j = 0; j < ninputs; j++) fill(in[j], bytes, ncclFloat32, j);
    timing red = {1e30, 0}, mac = {1e30, 0};
    const double start = braid_now_s();
    uint64_t n = 0;
    do {
      double t0 = braid_now_s();
      braid_reduce(dst, (const void *const *)in, ninputs, bytes / 4, ncclFloat32, ncclSum);
      clobber(dst);
      record(&red, t0);
      t0 = braid_now_s();
      ps_mac_frame(key, PS_DIR_HEAD, n++, hdr, in[0], bytes, tag);
      clobber(tag);
      record(&mac, t0);
    } while (braid_now_s() - start < 2 * seconds || mac.runs < 3);
    double tags_s = 2.0 * ninputs * mac.best_s;
    fprintf(out,
            "\nframe tags (BRAID_PS_FRAME_AUTH=1): Poly1305 at %.2f GB/s; per partition of %d "
            "inputs x %.1f MiB the server spends %.2f ms on tags (every input checked, every "
            "result tagged) and %.2f ms reducing (fp32, %s): tags = %.0f%% of that\n",
            gbps((double)bytes, mac.best_s), ninputs, (double)bytes / MIB, tags_s * 1e3,
            red.best_s * 1e3, saved, 100.0 * tags_s / red.best_s);
  } else {
    fprintf(out, "\nframe tags: not measured (%s)\n", ps_auth_error());
  }

  for (int j = 0; j < ninputs; j++) free(in[j]);
  free(in), free(dst), free(csrc), free(cdst);
  return 0;
}
