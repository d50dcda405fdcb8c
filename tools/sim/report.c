/* braid-sim's table, text and CSV (see report.h). */
#include "report.h"

#include <math.h>

static void fmt_time(char *b, size_t n, double s) {
  if (isfinite(s)) snprintf(b, n, "%.3f", s * 1e3);
  else snprintf(b, n, "fails");
}

void report_text(FILE *f, const struct row *rows, size_t n) {
  fprintf(f, "%-12s %-11s %7s %11s %11s %11s %9s %7s  %s\n", "scenario", "algorithm", "GPUs", "time ms",
          "algbw GB/s", "busbw GB/s", "slowdown", "wall s", "simulated");
  for (size_t i = 0; i < n; i++) {
    const struct row *w = &rows[i];
    char t[32], slow[32];
    fmt_time(t, sizeof t, w->r.time_s);
    if (isfinite(w->r.time_s) && isfinite(w->healthy_s) && w->healthy_s > 0)
      snprintf(slow, sizeof slow, "%.2fx", w->r.time_s / w->healthy_s);
    else snprintf(slow, sizeof slow, "-");
    fprintf(f, "%-12s %-11s %7ld %11s %11.4g %11.4g %9s %7.2f  %s\n", scenario_name(w->sc),
            algo_name(w->algo, w->braid), w->gpus, t, w->r.algbw_Bps / 1e9, w->r.busbw_Bps / 1e9, slow,
            w->wall_s, w->r.note);
  }
}

void report_csv(FILE *f, const struct row *rows, size_t n) {
  fprintf(f, "scenario,algorithm,gpus,time_ms,algbw_GBps,busbw_GBps,slowdown,wall_s,simulated,of,note\n");
  for (size_t i = 0; i < n; i++) {
    const struct row *w = &rows[i];
    double slow = isfinite(w->r.time_s) && w->healthy_s > 0 ? w->r.time_s / w->healthy_s : INFINITY;
    fprintf(f, "%s,%s,%ld,%.6f,%.3f,%.3f,%.4f,%.3f,%d,%d,\"%s\"\n", scenario_name(w->sc),
            algo_name(w->algo, w->braid), w->gpus, w->r.time_s * 1e3, w->r.algbw_Bps / 1e9,
            w->r.busbw_Bps / 1e9, slow, w->wall_s, w->r.simulated, w->r.of, w->r.note);
  }
}

/* The row of the same scenario and algorithm at the smallest GPU count. */
static const struct row *base(const struct row *rows, size_t n, const struct row *w) {
  const struct row *b = NULL;
  for (size_t i = 0; i < n; i++)
    if (rows[i].sc == w->sc && rows[i].algo == w->algo && rows[i].braid == w->braid &&
        (!b || rows[i].gpus < b->gpus))
      b = &rows[i];
  return b;
}

void report_scaling_text(FILE *f, const struct row *rows, size_t n) {
  fprintf(f, "%-12s %-11s %7s %11s %11s %10s\n", "scenario", "algorithm", "GPUs", "time ms", "busbw GB/s",
          "efficiency");
  for (size_t i = 0; i < n; i++) {
    const struct row *w = &rows[i], *b = base(rows, n, w);
    char t[32];
    fmt_time(t, sizeof t, w->r.time_s);
    fprintf(f, "%-12s %-11s %7ld %11s %11.4g %9.1f%%\n", scenario_name(w->sc), algo_name(w->algo, w->braid),
            w->gpus, t, w->r.busbw_Bps / 1e9,
            b->r.busbw_Bps > 0 ? 100 * w->r.busbw_Bps / b->r.busbw_Bps : 0);
  }
}

void report_scaling_csv(FILE *f, const struct row *rows, size_t n) {
  fprintf(f, "scenario,algorithm,gpus,time_ms,busbw_GBps,efficiency\n");
  for (size_t i = 0; i < n; i++) {
    const struct row *w = &rows[i], *b = base(rows, n, w);
    fprintf(f, "%s,%s,%ld,%.6f,%.3f,%.4f\n", scenario_name(w->sc), algo_name(w->algo, w->braid), w->gpus,
            w->r.time_s * 1e3, w->r.busbw_Bps / 1e9, b->r.busbw_Bps > 0 ? w->r.busbw_Bps / b->r.busbw_Bps : 0);
  }
}
