/* Max-min fair rates by progressive filling (see flow.h). */
#include "flow.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static int maxmin_active(int nlinks, const double *cap, struct flow *f, size_t nf, const bool *active) {
  double *rem = malloc((size_t)nlinks * sizeof *rem);
  double *w = malloc((size_t)nlinks * sizeof *w);
  bool *frozen = malloc(nf ? nf : 1);
  if (!rem || !w || !frozen) {
    free(rem), free(w), free(frozen);
    return -1;
  }
  memcpy(rem, cap, (size_t)nlinks * sizeof *rem);
  size_t left = 0;
  for (size_t i = 0; i < nf; i++) {
    f[i].rate = 0;
    frozen[i] = !active[i];
    for (int k = 0; k < f[i].npath && !frozen[i]; k++) {
      if (f[i].path[k] < 0 || f[i].path[k] >= nlinks) {
        free(rem), free(w), free(frozen);
        return -1;
      }
      if (cap[f[i].path[k]] <= 0) frozen[i] = true; /* a dead link: this flow gets nothing */
    }
    if (!frozen[i] && f[i].npath == 0) frozen[i] = true;
    left += !frozen[i];
  }
  while (left > 0) {
    memset(w, 0, (size_t)nlinks * sizeof *w);
    for (size_t i = 0; i < nf; i++)
      if (!frozen[i])
        for (int k = 0; k < f[i].npath; k++) w[f[i].path[k]] += f[i].mult;
    double delta = INFINITY;
    for (int l = 0; l < nlinks; l++)
      if (w[l] > 0 && rem[l] / w[l] < delta) delta = rem[l] / w[l];
    if (delta < 0) delta = 0;
    for (int l = 0; l < nlinks; l++) rem[l] -= delta * w[l];
    size_t froze = 0;
    for (size_t i = 0; i < nf; i++) {
      if (frozen[i]) continue;
      f[i].rate += delta;
      for (int k = 0; k < f[i].npath; k++) {
        int l = f[i].path[k];
        if (rem[l] <= 1e-9 * cap[l]) {
          frozen[i] = true;
          froze++;
          break;
        }
      }
    }
    if (froze == 0) break; /* numerically stuck: every flow already got its share */
    left -= froze;
  }
  free(rem), free(w), free(frozen);
  return 0;
}

int flow_maxmin(int nlinks, const double *cap, struct flow *f, size_t nf) {
  bool *active = malloc(nf ? nf : 1);
  if (!active) return -1;
  memset(active, 1, nf);
  int rc = maxmin_active(nlinks, cap, f, nf, active);
  free(active);
  return rc;
}

double flow_run(int nlinks, const double *cap, struct flow *f, size_t nf) {
  bool *active = malloc(nf ? nf : 1);
  double *left = malloc((nf ? nf : 1) * sizeof *left);
  if (!active || !left) {
    free(active), free(left);
    return -1;
  }
  size_t nactive = 0;
  for (size_t i = 0; i < nf; i++) {
    left[i] = f[i].bytes;
    active[i] = f[i].bytes > 0;
    f[i].done_s = 0;
    nactive += active[i];
  }
  double now = 0;
  while (nactive > 0) {
    if (maxmin_active(nlinks, cap, f, nf, active) != 0) {
      now = -1;
      break;
    }
    double dt = INFINITY;
    for (size_t i = 0; i < nf; i++)
      if (active[i] && f[i].rate > 0 && left[i] / f[i].rate < dt) dt = left[i] / f[i].rate;
    if (isinf(dt)) { /* what is left can never move */
      for (size_t i = 0; i < nf; i++)
        if (active[i]) f[i].done_s = INFINITY;
      now = INFINITY;
      break;
    }
    now += dt;
    for (size_t i = 0; i < nf; i++) {
      if (!active[i]) continue;
      left[i] -= f[i].rate * dt;
      if (left[i] <= 1e-9 * f[i].bytes + 1e-6) { /* finished (within rounding) */
        active[i] = false;
        f[i].done_s = now;
        nactive--;
      }
    }
  }
  free(active), free(left);
  return now;
}
