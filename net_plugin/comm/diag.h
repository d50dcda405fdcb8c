/* Diagnosis of a waiting job: which peer each pending request waits on.
 *
 * SIGUSR1 (when the application has not claimed it) asks every connection to log its pending
 * requests; each connection does so from its own thread at its next test() call (NCCL's proxy
 * keeps polling while it waits), so no thread reads another's state.  A request that waits longer
 * than BRAID_WAIT_WARN_MS logs its connection's pending requests once by itself. */
#ifndef BRAID_DIAG_H
#define BRAID_DIAG_H

#include "comm/comm.h"

/* Installs the SIGUSR1 handler if SIGUSR1 still has its default action (once per process). */
void braid_diag_install(void);
/* Puts the default action back if our handler is installed (the library is being unloaded). */
void braid_diag_uninstall(void);
/* Called by test(): dumps c's pending requests when asked, or once when r has waited too long. */
void braid_diag_check(struct braid_comm *c, struct braid_req *r);
/* The stream path's description (comm/path.h describe): the scheduler's rails, every stream. */
void braid_diag_streams(struct braid_comm *c, uint64_t now);

#endif
