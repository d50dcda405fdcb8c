/* braid-trace-shape: small histograms (value -> count); a job has few distinct values. */
#include <stdio.h>
#include <stdlib.h>

#include "shape.h"

void shape_hist_add(struct shape_hist *h, uint64_t key, uint64_t count) {
  for (size_t i = h->n; i-- > 0;)
    if (h->key[i] == key) {
      h->count[i] += count;
      return;
    }
  if (h->n == h->cap) {
    size_t cap = h->cap ? 2 * h->cap : 16;
    uint64_t *k = realloc(h->key, cap * sizeof *k), *c = k ? realloc(h->count, cap * sizeof *c) : NULL;
    if (k) h->key = k;
    if (!k || !c) {
      fprintf(stderr, "braid-trace-shape: out of memory\n");
      exit(2);
    }
    h->count = c;
    h->cap = cap;
  }
  h->key[h->n] = key;
  h->count[h->n++] = count;
}

uint64_t shape_hist_total(const struct shape_hist *h) {
  uint64_t t = 0;
  for (size_t i = 0; i < h->n; i++) t += h->count[i];
  return t;
}

static void hist_sort(struct shape_hist *h) {
  for (size_t i = 1; i < h->n; i++) /* insertion sort: few keys */
    for (size_t j = i; j > 0 && h->key[j - 1] > h->key[j]; j--) {
      uint64_t k = h->key[j], c = h->count[j];
      h->key[j] = h->key[j - 1], h->count[j] = h->count[j - 1];
      h->key[j - 1] = k, h->count[j - 1] = c;
    }
}

static void hist_format(struct shape_hist *h, char *buf, size_t len, int counts) {
  size_t o = 0, i;
  hist_sort(h);
  snprintf(buf, len, "-");
  for (i = 0; i < h->n && o + 48 < len; i++) {
    int w = counts ? snprintf(buf + o, len - o, "%s%llux%llu", i ? " " : "",
                              (unsigned long long)h->key[i], (unsigned long long)h->count[i])
                   : snprintf(buf + o, len - o, "%s%llu", i ? "," : "",
                              (unsigned long long)h->key[i]);
    if (w > 0) o += (size_t)w;
  }
  if (i < h->n) snprintf(buf + o, len - o, " ...");
}

void shape_hist_format(struct shape_hist *h, char *buf, size_t len) { hist_format(h, buf, len, 1); }
void shape_hist_format_keys(struct shape_hist *h, char *buf, size_t len) {
  hist_format(h, buf, len, 0);
}

void shape_hist_free(struct shape_hist *h) {
  free(h->key);
  free(h->count);
  h->key = h->count = NULL;
  h->n = h->cap = 0;
}
