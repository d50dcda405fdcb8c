/* braid-trace: the trace file.
 *
 * Format (version 1; tools/trace/README.md has the same text with examples).  Plain text, one
 * line per call, written whole; fields separated by one space; lists comma-separated, no spaces.
 *
 *   # braid-trace 1 pid=<pid> host=<hostname> mono_ns=<CLOCK_MONOTONIC at t=0> epoch_ns=<CLOCK_REALTIME at t=0>
 *   <t_us> T<thread> <call> key=value ... [inflight=<n>] rc=<ncclResult_t> dur_ns=<call duration>
 *
 * - A header starts each trace of a process (again after the library is unloaded and reloaded:
 *   ids restart there).  t_us is the call's start in µs since t=0, with 3 decimals; mono_ns
 *   and epoch_ns let traces of several processes be put on one time line.
 * - T<thread>: threads numbered in order of their first call.
 * - Objects are small ids in order of creation: x<n> contexts, l<n> listen comms, c<n> send and
 *   recv comms, m<n> memory handles, r<n> requests; "-" for none.
 * - handle=<16 hex>: FNV-1a of the 128-byte connection handle (listen's output, connect's input;
 *   accept repeats its listen's): equal values pair a send comm with its recv comm across files.
 * - inflight: the comm's isend/irecv requests posted and not yet completed, after this call.
 *
 *   load     path= name= version=            the inner plugin, once per process
 *   init     ctx= abi= comm_id= tc=          abi: the ncclNetPlugin_vN the caller used
 *   finalize ctx=
 *   devices  ndev=
 *   props    dev= name= ptr= speed= latency= max_comms= max_recvs= max_p2p= force_flush= reg_global=
 *   set_attr ctx= peers= flows= op=
 *   listen   ctx= dev= comm= handle=
 *   connect  ctx= dev= comm= handle= tries= [tc=]  tries: calls for this handle (connect is
 *                                            polled); tc: v7..v10's, what connect's config said
 *   accept   listen= comm= handle= tries=
 *   regmr    comm= size= type= mr=           type: 1 host, 2 cuda
 *   deregmr  comm= mr=
 *   isend    comm= req= size= tag= mr= busy= inflight=
 *   irecv    comm= req= n= sizes= tags= opt= busy= inflight=
 *   iflush   comm= req= n= sizes=
 *   test     req= comm= op= done= sizes= polls= lat_us= inflight=
 *   close_send / close_recv / close_listen  comm=
 *
 *   busy: isend/irecv calls on this comm that returned no request (retry later) since the last
 *   post; opt=1: NCCL asked for optional receive completion; sizes of test: bytes transferred
 *   ("-" for flushes); polls: test() calls that returned done=0 before this one; lat_us: post to
 *   completion.  test() writes a line only when done=1 or rc!=0 (polling would flood the file).
 *
 * Lines are buffered and written at least every TRACE_FLUSH_LINES lines, at every close and
 * finalize, and when the library is unloaded or the process exits (not on a crash or _exit);
 * on stderr (BRAID_TRACE_FILE empty) every line is written at once. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "param.h"
#include "trace.h"
#include "tmpfile.h"

#define TRACE_FLUSH_LINES 1024
#define TRACE_BUF_BYTES (256 * 1024)

static pthread_mutex_t w_lock = PTHREAD_MUTEX_INITIALIZER;
static int w_fd = -1;
static int w_state; /* 0: not open yet, 1: open, -1: failed (lines are dropped) */
static char w_buf[TRACE_BUF_BYTES];
static size_t w_len;
static int w_lines;
static uint64_t w_mono0, w_epoch0; /* t=0 */
static atomic_int w_threads;
static _Thread_local int w_tid;

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* BRAID_TRACE_FILE with %p (pid) and %h (host name) expanded; "" for stderr. */
static void writer_path(char *out, size_t len) {
  const char *f = braid_param_str(BRAID_P_TRACE_FILE);
  size_t o = 0;
  out[0] = '\0';
  for (; *f && o + 1 < len; f++) {
    if (f[0] == '%' && (f[1] == 'p' || f[1] == 'h')) {
      char v[256];
      if (f[1] == 'p') snprintf(v, sizeof v, "%d", (int)getpid());
      else if (gethostname(v, sizeof v) != 0) snprintf(v, sizeof v, "unknown");
      v[sizeof v - 1] = '\0';
      o += (size_t)snprintf(out + o, len - o, "%s", v);
      if (o >= len) o = len - 1;
      f++;
    } else {
      out[o++] = *f;
      out[o] = '\0';
    }
  }
}

static int writer_write_all(const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(w_fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* With w_lock held. */
static void writer_flush_locked(void) {
  if (w_state == 1 && w_len > 0 && writer_write_all(w_buf, w_len) != 0) {
    BRAID_WARN("braid-trace: writing the trace failed: %s; tracing stops", strerror(errno));
    if (w_fd > 2) close(w_fd);
    w_fd = -1;
    w_state = -1;
  }
  w_len = 0;
  w_lines = 0;
}

/* With w_lock held: opens the file (appending: a reloaded library continues it) and queues the
 * header. */
static void writer_open_locked(void) {
  char path[1024];
  writer_path(path, sizeof path);
  if (!path[0]) {
    w_fd = 2;
  } else if ((w_fd = braid_file_create(path, 1)) < 0) { /* never through a link at path */
    BRAID_WARN("braid-trace: cannot open BRAID_TRACE_FILE %s: %s; no trace is written", path,
               strerror(errno));
    w_state = -1;
    return;
  }
  w_state = 1;
  char host[256];
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
  host[sizeof host - 1] = '\0';
  for (char *c = host; *c; c++)
    if (*c == ' ') *c = '_';
  w_len = (size_t)snprintf(w_buf, sizeof w_buf,
                           "# braid-trace 1 pid=%d host=%s mono_ns=%llu epoch_ns=%llu\n",
                           (int)getpid(), host, (unsigned long long)w_mono0,
                           (unsigned long long)w_epoch0);
  BRAID_INFO(NCCL_INIT | NCCL_NET, "braid-trace: tracing to %s", path[0] ? path : "stderr");
}

void trace_line_begin(struct trace_line *l, const char *call, uint64_t t0) {
  if (!w_tid) w_tid = atomic_fetch_add(&w_threads, 1) + 1;
  uint64_t t = t0 > w_mono0 ? t0 - w_mono0 : 0;
  int n = snprintf(l->buf, sizeof l->buf, "%llu.%03llu T%d %s", (unsigned long long)(t / 1000),
                   (unsigned long long)(t % 1000), w_tid, call);
  l->len = n > 0 ? (size_t)n : 0;
}

void trace_line_add(struct trace_line *l, const char *fmt, ...) {
  if (l->len + 1 >= sizeof l->buf) return;
  va_list ap;
  va_start(ap, fmt);
  l->buf[l->len++] = ' ';
  int n = vsnprintf(l->buf + l->len, sizeof l->buf - l->len, fmt, ap);
  va_end(ap);
  if (n > 0) l->len += (size_t)n;
  if (l->len >= sizeof l->buf) l->len = sizeof l->buf - 1;
}

void trace_emit(struct trace_line *l, ncclResult_t rc, uint64_t t0, uint64_t t1,
                struct trace_comm *comm, int delta, int flush) {
  pthread_mutex_lock(&w_lock);
  if (comm) {
    comm->inflight += delta;
    trace_line_add(l, "inflight=%d", comm->inflight);
  }
  trace_line_add(l, "rc=%d dur_ns=%llu", (int)rc, (unsigned long long)(t1 - t0));
  if (w_state == 0) writer_open_locked();
  if (w_state == 1) {
    if (w_len + l->len + 1 > sizeof w_buf) writer_flush_locked();
    memcpy(w_buf + w_len, l->buf, l->len);
    w_len += l->len;
    w_buf[w_len++] = '\n';
    /* stderr: whole lines at once, in order with the program's other messages */
    if (++w_lines >= TRACE_FLUSH_LINES || flush || w_fd == 2) writer_flush_locked();
  }
  pthread_mutex_unlock(&w_lock);
}

void trace_flush(void) {
  pthread_mutex_lock(&w_lock);
  writer_flush_locked();
  pthread_mutex_unlock(&w_lock);
}

/* fork(): the child must not write the parent's buffered lines, nor its file; it starts its own
 * (BRAID_TRACE_FILE's %p gives it its own name). */
static void writer_prepare(void) { pthread_mutex_lock(&w_lock); }
static void writer_parent(void) { pthread_mutex_unlock(&w_lock); }
static void writer_child(void) {
  pthread_mutex_init(&w_lock, NULL);
  if (w_fd > 2) close(w_fd);
  w_fd = -1;
  w_state = 0;
  w_len = 0;
  w_lines = 0;
}

__attribute__((constructor)) static void writer_load(void) {
  w_mono0 = braid_now_ns();
  w_epoch0 = clock_ns(CLOCK_REALTIME);
  pthread_atfork(writer_prepare, writer_parent, writer_child);
}

/* Runs at dlclose() and at exit(). */
__attribute__((destructor)) static void writer_unload(void) {
  pthread_mutex_lock(&w_lock);
  writer_flush_locked();
  if (w_fd > 2) close(w_fd);
  w_fd = -1;
  w_state = 0;
  pthread_mutex_unlock(&w_lock);
}
