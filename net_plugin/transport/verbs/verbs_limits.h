/* A verbs connection's sizes (verbs_conn.h), shared by its public interface and its inside
 * (verbs_vc.h). */
#ifndef BRAID_VERBS_LIMITS_H
#define BRAID_VERBS_LIMITS_H

#define BRAID_VC_MAX_RAILS 8
#define BRAID_VC_SLOTS 8          /* receives outstanding per connection (NCCL posts up to 8) */
#define BRAID_VC_MAX_CHUNKS 16384 /* per message */
#define BRAID_VC_FLUSHES 8        /* flushes in flight */

#endif
