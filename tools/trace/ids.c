/* braid-trace: small ids for the objects in a trace, and the connection-handle hashes that pair a
 * send comm with its recv comm across traces. */
#include <pthread.h>
#include <string.h>

#include "trace.h"

static atomic_int ids_next[TRACE_ID_COUNT];

int trace_next_id(enum trace_id_kind kind) { return atomic_fetch_add(&ids_next[kind], 1) + 1; }

uint64_t trace_handle_hash(const void *handle) {
  const unsigned char *p = handle;
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < NCCL_NET_HANDLE_MAXSIZE; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/* Connects in progress, by handle buffer.  NCCL runs a few at a time per process; when the table
 * is full the oldest entry is dropped (its connect, if ever finished, then logs a hash taken
 * late, which can only fail to pair). */
#define IDS_PENDING 256

struct ids_pending {
  const void *handle, *owner;
  uint64_t hash, seq;
  int tries;
};

static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ids_pending ids_pending[IDS_PENDING];
static uint64_t ids_seq;

uint64_t trace_connect_begin(const void *handle, const void *owner, int *tries) {
  pthread_mutex_lock(&ids_lock);
  struct ids_pending *e = NULL, *oldest = &ids_pending[0];
  for (int i = 0; i < IDS_PENDING && !e; i++) {
    struct ids_pending *p = &ids_pending[i];
    if (p->handle == handle && p->owner == owner) e = p;
    else if (!p->handle ? oldest->handle != NULL : (oldest->handle && p->seq < oldest->seq))
      oldest = p;
  }
  if (!e) {
    e = oldest;
    *e = (struct ids_pending){handle, owner, trace_handle_hash(handle), ++ids_seq, 0};
  }
  *tries = ++e->tries;
  uint64_t h = e->hash;
  pthread_mutex_unlock(&ids_lock);
  return h;
}

void trace_connect_end(const void *handle) {
  pthread_mutex_lock(&ids_lock);
  for (int i = 0; i < IDS_PENDING; i++)
    if (ids_pending[i].handle == handle) memset(&ids_pending[i], 0, sizeof ids_pending[i]);
  pthread_mutex_unlock(&ids_lock);
}

void trace_connect_forget(const void *owner) {
  pthread_mutex_lock(&ids_lock);
  for (int i = 0; i < IDS_PENDING; i++)
    if (ids_pending[i].handle && ids_pending[i].owner == owner)
      memset(&ids_pending[i], 0, sizeof ids_pending[i]);
  pthread_mutex_unlock(&ids_lock);
}
