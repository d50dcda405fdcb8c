/* braid-ps partition layout and server rate estimates (see assign.h). */
#include "assign.h"

#include <stdlib.h>
#include <string.h>

size_t ps_grain(size_t esize) {
  if (esize == 0) esize = 1;
  return (PS_GRAIN_BYTES + esize - 1) / esize * esize;
}

/* Cuts `units` grains of one server, starting at grain u0, into pieces of at most `maxu` grains
 * (about a quarter of the share, at least minu), as even as possible. */
static uint32_t cut_share(int server, uint64_t u0, uint64_t units, size_t g, size_t bytes, uint64_t minu,
                          uint64_t maxu, struct ps_piece *out, uint32_t n, uint32_t cap) {
  uint64_t t = (units + PS_PIECES_PER_SERVER - 1) / PS_PIECES_PER_SERVER;
  if (t < minu) t = minu;
  if (t > maxu) t = maxu;
  uint64_t k = (units + t - 1) / t, q = units / k, extra = units % k, u = u0;
  for (uint64_t i = 0; i < k; i++, n++) {
    uint64_t len = q + (i < extra);
    if (n < cap) {
      size_t off = (size_t)u * g, end = (size_t)(u + len) * g;
      out[n] = (struct ps_piece){.off = off, .len = (end < bytes ? end : bytes) - off, .server = server};
    }
    u += len;
  }
  return n;
}

uint32_t ps_layout(const uint8_t *w, int n, uint64_t seq, size_t bytes, size_t esize, size_t max_part,
                   struct ps_piece *out, uint32_t cap) {
  if (bytes == 0 || n <= 0) return 0;
  if (n > PS_MAX_SERVERS) n = PS_MAX_SERVERS;
  size_t g = ps_grain(esize);
  uint64_t units = (bytes + g - 1) / g; /* the last grain may be short */
  uint64_t maxu = max_part / g ? max_part / g : 1;
  uint64_t minu = (PS_MIN_PIECE_BYTES + g - 1) / g;
  uint64_t wt[PS_MAX_SERVERS], total = 0;
  int active = 0;
  for (int i = 0; i < n; i++) total += wt[i] = w[i];
  if (total == 0) /* no weights: equal */
    for (int i = 0; i < n; i++) total += wt[i] = 1;
  uint64_t share[PS_MAX_SERVERS], given = 0;
  for (int i = 0; i < n; i++) {
    share[i] = units * wt[i] / total;
    given += share[i];
    active += wt[i] > 0;
  }
  /* What the floors left (fewer grains than servers in use), one grain each to the servers in
   * use in list order from the (seq mod active)-th, so the extra grain rotates over the ops. */
  uint64_t left = units - given;
  int skip = (int)(seq % (uint64_t)active);
  for (int k = 0; left > 0; k = (k + 1) % n) {
    if (!wt[k]) continue;
    if (skip > 0) {
      skip--;
      continue;
    }
    share[k]++;
    left--;
  }
  uint32_t count = 0;
  uint64_t u = 0;
  for (int i = 0; i < n; i++) {
    if (!share[i]) continue;
    count = cut_share(i, u, share[i], g, bytes, minu, maxu, out, count, cap);
    u += share[i];
  }
  return count;
}

int64_t ps_layout_buf(const uint8_t *w, int n, uint64_t seq, size_t bytes, size_t esize, size_t max_part,
                      struct ps_piece **buf, uint32_t *cap) {
  uint32_t count = ps_layout(w, n, seq, bytes, esize, max_part, *buf, *cap);
  if (count > *cap) {
    struct ps_piece *nb = realloc(*buf, count * sizeof *nb);
    if (!nb) return -1;
    *buf = nb;
    *cap = count;
    ps_layout(w, n, seq, bytes, esize, max_part, *buf, *cap);
  }
  return count;
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
  if (!r->started) {
    r->started = 1;
    r->win_start = now;
  }
  busy_update(r, now);
  if (r->outstanding++ == 0) r->busy_since = now;
}

void ps_rate_done(struct ps_rate *r, uint64_t now, size_t bytes) {
  busy_update(r, now);
  if (r->outstanding > 0) r->outstanding--;
  r->bytes += (double)bytes;
  r->done++;
}

static double median_kept(const struct ps_rate *r) {
  double a = r->keep[0], b = r->keep[1], c = r->keep[2];
  if (r->nkeep == 1) return a;
  if (r->nkeep == 2) return (a + b) / 2;
  if ((a <= b && b <= c) || (c <= b && b <= a)) return b;
  if ((b <= a && a <= c) || (c <= a && a <= b)) return a;
  return c;
}

/* Idle windows in a row before the next probe (wait 0 is PS_PROBE_FIRST). */
static uint32_t probe_wait(const struct ps_rate *r) { return r->wait ? r->wait : PS_PROBE_FIRST; }

/* The wait before the next probe after one that found the server no faster: doubled. */
static uint32_t next_wait(const struct ps_rate *r) {
  uint32_t wait = probe_wait(r);
  return wait * 2 > PS_PROBE_MAX ? PS_PROBE_MAX : wait * 2;
}

/* The estimate set to one window's rate as it is (a probe's answer, a promotion, its check). */
static void set_estimate(struct ps_rate *r, double rate) {
  r->nkeep = 1;
  r->keep[0] = r->rate = rate;
}

/* A window that did not count: the server waited for work.  One with a reduced weight that was
 * busy under half the window could carry twice its share, so it is probed (assign.h): after `wait`
 * such windows in a row its weight is doubled; once doubled, the next doubling comes after
 * PS_PROBE_FIRST, as the last one did not load it either. */
static int idle_window(struct ps_rate *r, double busy_frac) {
  if ((!r->reduced && !r->boost) || busy_frac >= 0.5) {
    r->idle = 0;
    return 0;
  }
  uint32_t wait = r->boost ? PS_PROBE_FIRST : probe_wait(r);
  if (++r->idle < wait || r->boost >= PS_PROBE_MAX_BOOST) return 0;
  r->idle = 0;
  r->boost++;
  r->settle = PS_PROBE_SETTLE_OPS;
  return 1;
}

int ps_rate_window(struct ps_rate *r, uint64_t now) {
  if (!r->started) return 0; /* no work yet: nothing to measure */
  r->ops++;
  if (r->settle > 0) r->settle--;
  busy_update(r, now);
  if (r->done < PS_RATE_MIN_DONE || r->ops < PS_RATE_MIN_OPS) return 0;
  double span = now > r->win_start ? (double)(now - r->win_start) : 0;
  double cur = r->busy_ns > 0 && r->bytes > 0 ? r->bytes / r->busy_ns : 0;
  double frac = span > 0 ? r->busy_ns / span : 0;
  int busy = r->busy_ns >= 0.75 * span;
  r->win_start = now;
  r->busy_ns = r->bytes = 0;
  r->done = r->ops = 0;
  /* A window the server was not busy for 3/4 of has not shown its speed: one head's view of a
   * loaded server's rate is its share of it, but of an idle one's a burst (its piece alone on
   * the link, or the last of the heads' to arrive): up to 40 times the real rate, measured on the
   * netbed.  It counts only as the first measurement (at equal weights the fast servers wait
   * for the slow one). */
  if (cur <= 0) return 0;
  if (r->rate > 0 && !busy) return idle_window(r, frac);
  r->idle = 0;
  /* A probed server's first window that counts, PS_PROBE_SETTLE_OPS after its weight changed,
   * answers the probe (one before was measured at the old weight and counts as usual).  Only a
   * window busy 3/4 does: in one busy half the time a server's partitions spend much of it
   * waiting for the heads' pieces, and its rate reads low (on the netbed a restored server read
   * 1.9 MB/s against the others' 5.5, a server at a tenth 0.2 against 0.5). */
  if (r->verify && r->settle > 0) return 0; /* measured before its full share took effect */
  if (r->boost > 0 && r->settle == 0) { /* measured while carrying more than its estimate said */
    r->wait = cur >= 1.25 * r->rate ? PS_PROBE_FIRST : next_wait(r);
    /* Twice its estimate: promoted; at least half the fastest's rate: ps_weights promotes it. */
    r->promote = cur >= 2 * r->rate ? 2 : 1;
    r->boost = 0;
    set_estimate(r, cur);
    return 1;
  }
  if (r->verify) { /* the first window at the full share it was promoted to, taken as it is */
    if (cur < 0.8 * r->rate) r->wait = next_wait(r);
    r->verify = 0;
    set_estimate(r, cur);
    return 1;
  }
  if (r->nkeep < PS_RATE_KEEP) r->nkeep++;
  memmove(r->keep + 1, r->keep, (PS_RATE_KEEP - 1) * sizeof r->keep[0]);
  r->keep[0] = cur;
  double med = median_kept(r), old = r->rate;
  r->rate = old > 0 ? old + (med - old) / 4 : med;
  return r->rate != old;
}

void ps_weights(struct ps_rate *r, int n, uint32_t lost, uint8_t out[PS_MAX_SERVERS]) {
  double max = 0;
  memset(out, 0, PS_MAX_SERVERS);
  for (int i = 0; i < n; i++)
    if (!(lost & (1u << i)) && r[i].rate > max) max = r[i].rate;
  for (int i = 0; i < n; i++) {
    /* A probe's answer of twice the estimate or half the fastest's rate or more, read at a
     * reduced share (assign.h): a full share, where it is measured as the others are. */
    if (r[i].promote && !(lost & (1u << i)) && (r[i].promote == 2 || r[i].rate >= 0.5 * max) && r[i].rate < max) {
      r[i].verify = 1;
      r[i].settle = PS_PROBE_SETTLE_OPS;
      set_estimate(&r[i], max);
    }
    r[i].promote = 0;
  }
  for (int i = 0; i < n; i++) {
    r[i].reduced = 0;
    if (lost & (1u << i)) continue;
    out[i] = 255;
    /* Servers within a fifth of the fastest count as equal: when the heads' own NICs are the
     * limit every server looks as fast as its share, and proportional weights would only drift. */
    if (max <= 0 || r[i].rate <= 0 || r[i].rate >= 0.8 * max) continue;
    /* A slower one gets a little under its share: given exactly its share it would finish last
     * about half the time (noise), and every op waits for the last partition. */
    double w = 255.0 * 0.8 * r[i].rate / max;
    w = w < 1 ? 1 : w;
    r[i].reduced = 1;
    for (int b = 0; b < r[i].boost && w < 255; b++) w *= 2; /* a probe (assign.h) */
    out[i] = (uint8_t)(w >= 255 ? 255 : w + 0.5);
  }
}
