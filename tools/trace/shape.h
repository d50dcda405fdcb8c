/* braid-trace-shape: reads the traces of one job (libnccl-net-braidtrace.so's files, one per
 * process) and reduces them to their shape: what was sent and received in which sizes, how deep
 * each comm's pipeline went, how receives were grouped and tagged, and whether receives were
 * posted before their sends.  Timing is left out, so two runs of one job give one summary.
 *
 * shape_read.c parses, shape_sum.c summarizes, shape_hist.c counts, shape.c is the command. */
#ifndef BRAID_TRACE_SHAPE_H
#define BRAID_TRACE_SHAPE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- histograms: value -> count (shape_hist.c) ---- */

struct shape_hist {
  uint64_t *key, *count;
  size_t n, cap;
};
void shape_hist_add(struct shape_hist *h, uint64_t key, uint64_t count);
uint64_t shape_hist_total(const struct shape_hist *h);
/* "k1xc1 k2xc2 ..." by increasing key ("-" when empty) into buf. */
void shape_hist_format(struct shape_hist *h, char *buf, size_t len);
/* "k1,k2,..." (the keys only). */
void shape_hist_format_keys(struct shape_hist *h, char *buf, size_t len);
void shape_hist_free(struct shape_hist *h);

/* ---- the parsed job (shape_read.c) ---- */

#define SHAPE_NCALLS 18
extern const char *const shape_call_names[SHAPE_NCALLS];

/* One isend, or one irecv of n buffers. */
struct shape_post {
  int64_t t0, t1; /* call start and end, ns since the segment's t=0 */
  int n;          /* buffers: 1 for isend */
  int tags;       /* index of the first of n tags in shape_job.tags */
  uint64_t size;  /* isend: bytes */
};

/* A send or recv comm of one segment. */
struct shape_comm {
  int seg, id;
  char kind;     /* 's' send, 'r' recv */
  uint64_t hash; /* connection handle: pairs a send comm with a recv comm */
  int peer;      /* paired comm (index), -1 when its other end is not in the job */
  int inflight, depth; /* current and largest number of requests in flight */
  uint64_t bytes;      /* sent, or received */
  struct shape_post *posts;
  size_t nposts, cap;
};

/* One trace of one process, from a header line to the next. */
struct shape_seg {
  char file[512];
  char host[256];
  int64_t mono_ns, epoch_ns;
  int *comm_of; /* c<id> -> comm index (+1; 0: unknown) */
  size_t ncomm_of;
  struct shape_reqref { /* r<id> -> */
    int32_t comm;        /* comm index + 1 (0: unknown) */
    char op;             /* 's' isend, 'r' irecv, 'f' iflush */
  } *reqs;
  size_t nreqs;
};

struct shape_job {
  struct shape_seg *segs;
  size_t nsegs;
  struct shape_comm *comms;
  size_t ncomms, comms_cap;
  int *tags; /* irecv tags, all posts */
  size_t ntags, tags_cap;
  /* counted while reading */
  struct shape_hist send_sizes, recv_posted, recv_received, recv_n, regmr_sizes;
  uint64_t lines, errors, opt_recvs, iflushes, bad_lines;
  uint64_t calls[SHAPE_NCALLS]; /* lines per call, as shape_call_names */
  char first_error[512];        /* the first line with rc != 0 */
};

/* Adds one trace file (several segments when the library was reloaded).  -1 when it cannot be
 * read or is not a braid-trace file. */
int shape_read_file(struct shape_job *job, const char *path);
void shape_job_free(struct shape_job *job);

/* ---- the summary (shape_sum.c) ---- */

/* "key: value" lines, in a fixed order; two jobs have the same shape when their lines are equal.
 * verbose adds '#' lines (informational, ignored by comparisons). */
struct shape_text {
  char **line;
  size_t n, cap;
};
void shape_summarize(struct shape_job *job, int verbose, struct shape_text *out);
void shape_text_add(struct shape_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void shape_text_free(struct shape_text *t);

#endif
