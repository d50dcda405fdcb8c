/* What test/fuzz/net_stubs.c offers the data-path fuzz targets. */
#ifndef BRAID_FUZZ_NET_STUBS_H
#define BRAID_FUZZ_NET_STUBS_H

#include <stdint.h>

extern uint64_t fuzz_now_ns;     /* braid_now_ns() */
extern char fuzz_fail_msg[512];  /* the cause braid_comm_fail was given, first one per comm */
extern int fuzz_verbose;         /* FUZZ_VERBOSE=1: logs and failures to stderr */

#endif
