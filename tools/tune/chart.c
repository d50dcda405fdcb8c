/* The explain chart (see chart.h): cairo's image surface, toy text API, PNG writer. */
#include "chart.h"

#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define W 1000
#define H 640
#define LEFT 90.0
#define RIGHT 30.0
#define TOP 50.0
#define BOTTOM 70.0

struct frame {
  double x0, x1, y0, y1; /* log10 ranges */
};

static double px(const struct frame *f, double x) {
  return LEFT + (log10(x) - f->x0) / (f->x1 - f->x0) * (W - LEFT - RIGHT);
}

static double py(const struct frame *f, double y) {
  return H - BOTTOM - (log10(y) - f->y0) / (f->y1 - f->y0) * (H - TOP - BOTTOM);
}

static void size_label(char *buf, size_t n, double bytes) {
  static const char units[] = "BKMGT";
  unsigned long long v = (unsigned long long)bytes;
  int u = 0;
  while (u < 4 && v >= 1024 && v % 1024 == 0) v /= 1024, u++;
  if (u) snprintf(buf, n, "%llu%c", v, units[u]);
  else snprintf(buf, n, "%llu", v);
}

/* A distinct colour per series (colour-blind friendly: Okabe-Ito). */
static void series_color(cairo_t *cr, size_t i) {
  static const double c[][3] = {{0.00, 0.45, 0.70}, {0.84, 0.37, 0.00}, {0.00, 0.62, 0.45},
                                {0.80, 0.47, 0.65}, {0.34, 0.71, 0.91}, {0.90, 0.62, 0.00},
                                {0.50, 0.50, 0.50}, {0.60, 0.30, 0.10}};
  const double *k = c[i % (sizeof c / sizeof c[0])];
  cairo_set_source_rgb(cr, k[0], k[1], k[2]);
}

static void text_at(cairo_t *cr, double x, double y, const char *s, double align_x,
                    double align_y) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s, &e);
  cairo_move_to(cr, x - e.width * align_x - e.x_bearing, y + e.height * align_y);
  cairo_show_text(cr, s);
}

static int range(const struct braid_tune_chart *c, struct frame *f) {
  double lo = INFINITY, hi = -INFINITY;
  for (size_t s = 0; s < c->nseries; s++)
    for (size_t i = 0; i < c->n; i++) {
      double v = c->series[s].y[i];
      if (v > 0 && v < lo) lo = v;
      if (v > 0 && v > hi) hi = v;
    }
  if (!(lo <= hi) || c->n == 0 || c->x[0] <= 0) return -1;
  f->y0 = floor(log10(lo));
  f->y1 = ceil(log10(hi));
  if (f->y1 <= f->y0) f->y1 = f->y0 + 1;
  f->x0 = log10(c->x[0]);
  f->x1 = log10(c->x[c->n - 1]);
  if (f->x1 <= f->x0) f->x0 -= 0.5, f->x1 += 0.5;
  return 0;
}

static void axes(cairo_t *cr, const struct braid_tune_chart *c, const struct frame *f) {
  char label[32];
  cairo_set_font_size(cr, 12);
  /* y: a line per decade, minor lines at 2..9. */
  for (int d = (int)f->y0; d <= (int)f->y1; d++) {
    for (int m = 1; m <= 9 && (d < (int)f->y1 || m == 1); m++) {
      double y = py(f, m * pow(10, d));
      cairo_set_source_rgb(cr, m == 1 ? 0.80 : 0.93, m == 1 ? 0.80 : 0.93, m == 1 ? 0.80 : 0.93);
      cairo_move_to(cr, LEFT, y);
      cairo_line_to(cr, W - RIGHT, y);
      cairo_stroke(cr);
    }
    if (d >= 0) snprintf(label, sizeof label, "%.0f", pow(10, d));
    else snprintf(label, sizeof label, "%g", pow(10, d));
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, LEFT - 8, py(f, pow(10, d)), label, 1.0, 0.5);
  }
  /* x: the measured sizes that are powers of two, thinned to about 12 labels. */
  double octaves = (f->x1 - f->x0) / log10(2.0);
  int step = (int)ceil(octaves / 12);
  if (step < 1) step = 1;
  for (size_t i = 0; i < c->n; i++) {
    double l2 = log2(c->x[i]);
    if (fabs(l2 - round(l2)) > 1e-9 || ((long)round(l2)) % step) continue;
    double x = px(f, c->x[i]);
    cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
    cairo_move_to(cr, x, TOP);
    cairo_line_to(cr, x, H - BOTTOM);
    cairo_stroke(cr);
    size_label(label, sizeof label, c->x[i]);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, x, H - BOTTOM + 8, label, 0.5, 1.0);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, LEFT, TOP, W - LEFT - RIGHT, H - TOP - BOTTOM);
  cairo_stroke(cr);
  cairo_set_font_size(cr, 14);
  text_at(cr, LEFT + (W - LEFT - RIGHT) / 2, H - 22, "message size (bytes, log scale)", 0.5, 0);
  cairo_save(cr);
  cairo_translate(cr, 24, TOP + (H - TOP - BOTTOM) / 2);
  cairo_rotate(cr, -M_PI / 2);
  text_at(cr, 0, 0, "predicted time (\xc2\xb5s, log scale)", 0.5, 0.5);
  cairo_restore(cr);
  cairo_set_font_size(cr, 16);
  text_at(cr, W / 2.0, TOP - 18, c->title ? c->title : "", 0.5, 0);
}

static void lines(cairo_t *cr, const struct braid_tune_chart *c, const struct frame *f) {
  cairo_set_line_width(cr, 2.0);
  for (size_t s = 0; s < c->nseries; s++) {
    series_color(cr, s);
    int pen = 0;
    for (size_t i = 0; i < c->n; i++) {
      double v = c->series[s].y[i];
      if (v <= 0) {
        pen = 0;
        continue;
      }
      if (pen) cairo_line_to(cr, px(f, c->x[i]), py(f, v));
      else cairo_move_to(cr, px(f, c->x[i]), py(f, v));
      pen = 1;
    }
    cairo_stroke(cr);
  }
}

static void cross(cairo_t *cr, double x, double y, double r) {
  cairo_move_to(cr, x - r, y - r);
  cairo_line_to(cr, x + r, y + r);
  cairo_move_to(cr, x - r, y + r);
  cairo_line_to(cr, x + r, y - r);
  cairo_stroke(cr);
}

static void dot(cairo_t *cr, double x, double y, double r) {
  cairo_new_sub_path(cr);
  cairo_arc(cr, x, y, r, 0, 2 * M_PI);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_set_line_width(cr, 1.0);
  cairo_stroke(cr);
}

static void marks(cairo_t *cr, const struct braid_tune_chart *c, const struct frame *f) {
  for (size_t i = 0; c->choice.y && i < c->n; i++)
    if (c->choice.y[i] > 0) dot(cr, px(f, c->x[i]), py(f, c->choice.y[i]), 4.5);
  cairo_set_source_rgb(cr, 0.85, 0.0, 0.0);
  cairo_set_line_width(cr, 1.5);
  for (size_t i = 0; c->nccl.y && i < c->n; i++)
    if (c->nccl.y[i] > 0) cross(cr, px(f, c->x[i]), py(f, c->nccl.y[i]), 5);
}

static void legend(cairo_t *cr, const struct braid_tune_chart *c) {
  cairo_set_font_size(cr, 12);
  size_t rows = c->nseries + (c->choice.y ? 1 : 0) + (c->nccl.y ? 1 : 0);
  double x = LEFT + 12, y = TOP + 12, row = 18, w = 0;
  for (size_t s = 0; s < c->nseries; s++) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, c->series[s].name, &e);
    if (e.x_advance > w) w = e.x_advance;
  }
  const char *extra[2] = {c->choice.y ? c->choice.name : NULL, c->nccl.y ? c->nccl.name : NULL};
  for (int k = 0; k < 2; k++) {
    if (!extra[k]) continue;
    cairo_text_extents_t e;
    cairo_text_extents(cr, extra[k], &e);
    if (e.x_advance > w) w = e.x_advance;
  }
  cairo_set_source_rgba(cr, 1, 1, 1, 0.9);
  cairo_rectangle(cr, x, y, w + 52, rows * row + 8);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
  cairo_set_line_width(cr, 1.0);
  cairo_stroke(cr);
  double ty = y + 4 + row / 2;
  for (size_t s = 0; s < c->nseries; s++, ty += row) {
    series_color(cr, s);
    cairo_set_line_width(cr, 2.0);
    cairo_move_to(cr, x + 8, ty);
    cairo_line_to(cr, x + 36, ty);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, x + 44, ty, c->series[s].name, 0, 0.5);
  }
  if (c->choice.y) {
    dot(cr, x + 22, ty, 4.5);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, x + 44, ty, c->choice.name, 0, 0.5);
    ty += row;
  }
  if (c->nccl.y) {
    cairo_set_source_rgb(cr, 0.85, 0.0, 0.0);
    cairo_set_line_width(cr, 1.5);
    cross(cr, x + 22, ty, 5);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, x + 44, ty, c->nccl.name, 0, 0.5);
  }
}

int braid_tune_chart_png(const struct braid_tune_chart *c, const char *path, char *err,
                         size_t errlen) {
  struct frame f;
  if (range(c, &f) != 0) {
    snprintf(err, errlen, "nothing to draw: no predicted time above 0 (with one rank NCCL "
                          "runs no algorithm: every time is 0)");
    return -1;
  }
  cairo_surface_t *surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
  cairo_t *cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_line_width(cr, 1.0);
  axes(cr, c, &f);
  cairo_save(cr);
  cairo_rectangle(cr, LEFT, TOP, W - LEFT - RIGHT, H - TOP - BOTTOM);
  cairo_clip(cr);
  lines(cr, c, &f);
  marks(cr, c, &f);
  cairo_restore(cr);
  legend(cr, c);
  cairo_status_t st = cairo_status(cr);
  if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_write_to_png(surface, path);
  cairo_destroy(cr);
  cairo_surface_destroy(surface);
  cairo_debug_reset_static_data(); /* drops the font caches: a leak checker sees no leftovers */
  if (st != CAIRO_STATUS_SUCCESS) {
    snprintf(err, errlen, "%s: %s", path, cairo_status_to_string(st));
    return -1;
  }
  return 0;
}
