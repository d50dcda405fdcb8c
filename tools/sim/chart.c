/* braid-sim's scaling chart: busbw against GPUs, log-log, cairo's image surface and PNG writer. */
#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

#define W 1100
#define H 680
#define LEFT 90.0
#define RIGHT 230.0
#define TOP 50.0
#define BOTTOM 70.0

struct frame {
  double x0, x1, y0, y1; /* log10 ranges */
};

static double px(const struct frame *f, double x) { return LEFT + (log10(x) - f->x0) / (f->x1 - f->x0) * (W - LEFT - RIGHT); }
static double py(const struct frame *f, double y) { return H - BOTTOM - (log10(y) - f->y0) / (f->y1 - f->y0) * (H - TOP - BOTTOM); }

static void colour(cairo_t *cr, int algo, bool braid) { /* Okabe-Ito, one per algorithm */
  static const double c[][3] = {{0.00, 0.45, 0.70}, {0.84, 0.37, 0.00}, {0.00, 0.62, 0.45},
                                {0.80, 0.47, 0.65}, {0.34, 0.71, 0.91}, {0.90, 0.62, 0.00}};
  const double *k = c[(algo + (braid ? 3 : 0)) % 6];
  cairo_set_source_rgb(cr, k[0], k[1], k[2]);
}

static void text(cairo_t *cr, double x, double y, const char *s, double ax) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s, &e);
  cairo_move_to(cr, x - e.width * ax - e.x_bearing, y + e.height / 2);
  cairo_show_text(cr, s);
}

int report_png(const char *path, const struct row *rows, size_t n, const char *title, char *err, size_t errlen) {
  struct frame fr = {INFINITY, -INFINITY, INFINITY, -INFINITY};
  for (size_t i = 0; i < n; i++) {
    if (rows[i].r.busbw_Bps <= 0) continue;
    double x = log10((double)rows[i].gpus), y = log10(rows[i].r.busbw_Bps / 1e9);
    fr.x0 = fmin(fr.x0, x), fr.x1 = fmax(fr.x1, x), fr.y0 = fmin(fr.y0, y), fr.y1 = fmax(fr.y1, y);
  }
  if (!isfinite(fr.x0)) {
    snprintf(err, errlen, "nothing to plot");
    return -1;
  }
  fr.x0 = floor(fr.x0 * 10) / 10, fr.x1 = ceil(fr.x1 * 10) / 10 + (fr.x1 == fr.x0 ? 0.1 : 0);
  fr.y0 = floor(fr.y0), fr.y1 = ceil(fr.y1) + (ceil(fr.y1) == floor(fr.y0) ? 1 : 0);
  cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
  cairo_t *cr = cairo_create(sf);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 13);
  char b[64];
  /* grid: powers of ten of busbw, powers of two of GPUs */
  cairo_set_line_width(cr, 1);
  for (double e = fr.y0; e <= fr.y1 + 1e-9; e++) {
    cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
    cairo_move_to(cr, LEFT, py(&fr, pow(10, e)));
    cairo_line_to(cr, W - RIGHT, py(&fr, pow(10, e)));
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    snprintf(b, sizeof b, "%g", pow(10, e));
    text(cr, LEFT - 8, py(&fr, pow(10, e)), b, 1);
  }
  for (double g = 1; g <= pow(10, fr.x1) * 1.0001; g *= 2) {
    if (g < pow(10, fr.x0) * 0.9999) continue;
    cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
    cairo_move_to(cr, px(&fr, g), TOP);
    cairo_line_to(cr, px(&fr, g), H - BOTTOM);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    snprintf(b, sizeof b, "%g", g);
    text(cr, px(&fr, g), H - BOTTOM + 14, b, 0.5);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  text(cr, (LEFT + W - RIGHT) / 2, H - 25, "GPUs", 0.5);
  text(cr, (LEFT + W - RIGHT) / 2, 22, title, 0.5);
  cairo_save(cr);
  cairo_translate(cr, 25, (TOP + H - BOTTOM) / 2);
  cairo_rotate(cr, -M_PI / 2);
  text(cr, 0, 0, "allreduce busbw, GB/s", 0.5);
  cairo_restore(cr);
  /* one line per (scenario, algorithm), in the order the rows give them */
  int legend = 0;
  for (size_t i = 0; i < n; i++) {
    bool first = true;
    for (size_t j = 0; j < i; j++)
      if (rows[j].sc == rows[i].sc && rows[j].algo == rows[i].algo && rows[j].braid == rows[i].braid) first = false;
    if (!first) continue;
    colour(cr, rows[i].algo, rows[i].braid);
    cairo_set_line_width(cr, rows[i].braid ? 2.0 : 4.5); /* plain under braid where they agree */
    if (rows[i].sc != SC_HEALTHY) cairo_set_dash(cr, (double[]){7, 4}, 2, 0);
    bool pen = false;
    for (size_t j = i; j < n; j++) {
      const struct row *w = &rows[j];
      if (w->sc != rows[i].sc || w->algo != rows[i].algo || w->braid != rows[i].braid) continue;
      if (w->r.busbw_Bps <= 0) {
        pen = false;
        continue;
      }
      double x = px(&fr, (double)w->gpus), y = py(&fr, w->r.busbw_Bps / 1e9);
      if (pen) cairo_line_to(cr, x, y);
      else cairo_move_to(cr, x, y);
      pen = true;
    }
    cairo_stroke(cr);
    double ly = TOP + 10 + 22 * legend++;
    cairo_move_to(cr, W - RIGHT + 15, ly);
    cairo_line_to(cr, W - RIGHT + 45, ly);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_source_rgb(cr, 0, 0, 0);
    snprintf(b, sizeof b, "%s, %s", algo_name(rows[i].algo, rows[i].braid), scenario_name(rows[i].sc));
    text(cr, W - RIGHT + 52, ly, b, 0);
  }
  cairo_destroy(cr);
  cairo_status_t st = cairo_surface_write_to_png(sf, path);
  cairo_surface_destroy(sf);
  cairo_debug_reset_static_data(); /* drops the font caches: a leak checker sees no leftovers */
  if (st != CAIRO_STATUS_SUCCESS) {
    snprintf(err, errlen, "%s: %s", path, cairo_status_to_string(st));
    return -1;
  }
  return 0;
}
