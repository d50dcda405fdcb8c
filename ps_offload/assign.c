/* braid-ps partition assignment and server rate estimates (see assign.h). */
#include "assign.h"

#include <string.h>

uint32_t ps_nparts(size_t bytes, size_t part_bytes) {
  if (bytes == 0 || part_bytes == 0) return 0;
  return (uint32_t)((bytes + part_bytes - 1) / part_bytes);
}

int ps_assign(const uint8_t *w, int n, uint64_t seq, uint32_t part, uint32_t nparts) {
  uint64_t total = 0;
  for (int i = 0; i < n; i++) total += w[i];
  if (total == 0 || nparts == 0) return -1;
  /* A point in [0, 2^32) per partition: evenly spaced within the op, shifted per op by the
   * golden-ratio sequence so that remainders rotate over the servers from one op to the next. */
  uint32_t base = (uint32_t)(seq * 2654435769u);
  uint32_t step = (uint32_t)((((uint64_t)part << 32) + (1ull << 31)) / nparts);
  uint32_t x = base + step;
  uint64_t target = ((uint64_t)x * total) >> 32;
  uint64_t acc = 0;
  for (int i = 0; i < n; i++) {
    acc += w[i];
    if (target < acc) return i;
  }
  return n - 1; /* not reached */
}

int ps_reroute(int s, uint32_t lost, int n) {
  for (int k = 0; k < n; k++) {
    int c = (s + k) % n;
    if (!(lost & (1u << c))) return c;
  }
  return -1;
}

static void busy_update(struct ps_rate *r, uint64_t now) {
  if (r->outstanding > 0 && now > r->busy_since) {
    r->busy_ns += (double)(now - r->busy_since);
    r->busy_since = now;
  }
}

void ps_rate_start(struct ps_rate *r, uint64_t now) {
  busy_update(r, now);
  if (r->outstanding++ == 0) r->busy_since = now;
}

void ps_rate_done(struct ps_rate *r, uint64_t now, size_t bytes) {
  busy_update(r, now);
  if (r->outstanding > 0) r->outstanding--;
  r->bytes += (double)bytes;
}

void ps_rate_window(struct ps_rate *r, uint64_t now) {
  busy_update(r, now);
  if (r->busy_ns >= 1e6 && r->bytes > 0) { /* at least 1 ms of work: enough to mean something */
    double cur = r->bytes / r->busy_ns;
    r->rate = r->rate > 0 ? 0.6 * r->rate + 0.4 * cur : cur; /* smoothed: noise moves weights little */
    r->busy_ns = 0;
    r->bytes = 0;
  }
}

void ps_weights(const struct ps_rate *r, int n, uint32_t lost, uint8_t out[PS_MAX_SERVERS]) {
  double max = 0;
  memset(out, 0, PS_MAX_SERVERS);
  for (int i = 0; i < n; i++)
    if (!(lost & (1u << i)) && r[i].rate > max) max = r[i].rate;
  for (int i = 0; i < n; i++) {
    if (lost & (1u << i)) continue;
    if (max <= 0 || r[i].rate <= 0) { out[i] = 255; continue; }
    /* Servers within a fifth of the fastest count as equal: when the heads' own NICs are the
     * limit every server looks as fast as its share, and proportional weights would only drift. */
    if (r[i].rate >= 0.8 * max) { out[i] = 255; continue; }
    double w = 255.0 * r[i].rate / max + 0.5;
    out[i] = (uint8_t)(w < 1 ? 1 : w > 255 ? 255 : w);
  }
}
