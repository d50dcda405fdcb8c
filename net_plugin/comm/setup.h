/* Connection set-up (listen / connect / accept), non-blocking and polled by NCCL. */
#ifndef BRAID_SETUP_H
#define BRAID_SETUP_H

#include "topo/devices.h"
#include "nccl_plugin/common.h"

ncclResult_t braid_setup_listen(const struct braid_device *device, int dev, void *handle,
                                void **listen_comm);
ncclResult_t braid_setup_accept(void *listen_comm, void **recv_comm);
ncclResult_t braid_setup_close_listen(void *listen_comm);
/* owner: the context on whose behalf the connect runs (freed with it if unfinished).
 * traffic_class: the communicator's (NCCL's trafficClass, -1 for none), read by the first call
 * of a connect: the connection's class on both ends (transport/tclass.h). */
ncclResult_t braid_setup_connect(void *owner, int traffic_class, const struct braid_device *device,
                                 int dev, void *handle, void **send_comm);
/* Frees unfinished connects of owner (all of them when owner is NULL). */
void braid_setup_abandon(void *owner);

#endif
