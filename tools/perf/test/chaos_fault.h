/* chaos-net's data faults (test only): once in a run, a receive that the wrapped plugin reports
 * complete is made to hold the wrong bytes, so a test can prove that braid-perf's check sees a
 * lost or stale write (issue 19 item 7). Off unless one of these is set:
 *   CHAOS_DROP_RECV=N   the N-th receive that completes with data (counted per process from 1)
 *                       loses its write: its buffer is put back as it was when it was posted.
 *   CHAOS_STALE_RECV=N  the first receive from the N-th completed on whose buffer an earlier
 *                       receive landed holds that earlier receive's bytes instead: a write of
 *                       the previous iteration left in place.
 * When one fires it prints "chaos-net: CHAOS_..._RECV=N: ..." on stderr. Receives are tracked
 * only until then (each posted one's buffer is copied, and each completed one's for the stale
 * fault), so that costs memory and time only in these tests. */
#ifndef CHAOS_FAULT_H
#define CHAOS_FAULT_H

#include <stddef.h>

/* Reads the variables (once per process). */
void chaos_fault_init(void);
/* Before the wrapped irecv of n buffers: a token for chaos_fault_posted, NULL when untracked. */
void *chaos_fault_posting(int n, void **data, const size_t *sizes);
/* After it: the request it returned (NULL: not posted, the token is dropped). */
void chaos_fault_posted(void *token, void *req);
/* After the wrapped test reported req done with these sizes (NULL: as posted). */
void chaos_fault_done(void *req, const int *sizes);

#endif
