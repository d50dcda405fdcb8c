/* braid-perf: runs that choose among algorithms. */
#include "multi.h"

#include <stdio.h>
#include <string.h>

#include "collnet.h"
#include "rdv.h"

/* CollNet for a multi-algorithm run: 1 when it is set up and ready. */
static int multi_collnet(struct perf_net *pn, const struct perf_opts *o, struct rdv *r) {
  if (!perf_opts_collnet_wanted()) {
    if (r->rank == 0)
      printf("# CollNet not tried (NCCL_COLLNET_ENABLE=1 or BRAID_PS_SERVERS enables it)\n");
    return 0;
  }
  if (collnet_setup(pn, o, r) == 0) return 1;
  if (r->rank == 0) printf("# CollNet unavailable (see the messages above): going on without it\n");
  return 0;
}

int multi_prepare(struct multi *m, const struct perf_opts *o, struct rdv *r, struct perf_net *pn) {
  memset(m, 0, sizeof *m);
  m->o = o;
  m->nch = o->nchannels;
  m->active = perf_opts_multi_algo(o);
  if (!m->active) return 0;
  int collnet = multi_collnet(pn, o, r);
  if (o->calibrate) {
    calibrate_init(&m->cal, o, r->nranks, collnet);
    m->mode = (struct bench_mode){o->repeats, calibrate_variants, calibrate_result, &m->cal};
    return 0;
  }
  if (tune_plan_make(&m->tp, o, r, pn->comm_id, collnet)) return -1;
  m->mode = (struct bench_mode){o->repeats, tune_variants, NULL, &m->tp};
  m->nch = m->tp.max_nch;
  return 0;
}

const struct bench_mode *multi_mode(const struct multi *m) { return m->active ? &m->mode : NULL; }

void multi_describe(const struct multi *m, char *buf, size_t len) {
  size_t at = strlen(buf);
  if (!m->active || m->o->calibrate || at + 1 >= len) return;
  snprintf(buf + at, len - at, "\n# %s", m->tp.describe);
  at = strlen(buf);
  if (m->nch != m->o->nchannels && at + 1 < len)
    snprintf(buf + at, len - at, "; %d channels connected (the tuner asks for them)", m->nch);
}

int multi_finish(struct multi *m, int rank, const char *describe, int results_ok) {
  if (m->active && !m->o->calibrate) tune_plan_close_tuner(&m->tp);
  if (!m->active || !m->o->calibrate || rank != 0) return 0;
  return calibrate_finish(&m->cal, describe, results_ok);
}

void multi_free(struct multi *m) {
  if (!m->active) return;
  if (m->o->calibrate) calibrate_free(&m->cal);
  else tune_plan_free(&m->tp);
}
