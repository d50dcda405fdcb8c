/* The libibverbs functions braid calls (real symbols, resolved on the library verbs_dev.h
 * loaded; ibv_post_send, ibv_poll_cq and the like are inline calls through the objects' ops).
 * One table for the endpoints (verbs_ep.c) and the flush queue pairs (verbs_flush.c). */
#ifndef BRAID_VERBS_FN_H
#define BRAID_VERBS_FN_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

struct braid_verbs_fn {
  bool loaded;
  struct ibv_pd *(*alloc_pd)(struct ibv_context *);
  int (*dealloc_pd)(struct ibv_pd *);
  struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
  int (*destroy_cq)(struct ibv_cq *);
  struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
  int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
  int (*destroy_qp)(struct ibv_qp *);
  struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
  /* NULL when libibverbs lacks it (rdma-core before 34): dma-buf registrations then fail */
  struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int);
  int (*dereg_mr)(struct ibv_mr *);
  const char *(*wc_status_str)(enum ibv_wc_status);
  int (*get_async_event)(struct ibv_context *, struct ibv_async_event *);
  void (*ack_async_event)(struct ibv_async_event *);
  const char *(*event_type_str)(enum ibv_event_type);
};

/* The table, loaded on first use (again after a test resolver was installed); NULL with a WARN
 * when libibverbs is missing or lacks one of the required functions. */
const struct braid_verbs_fn *braid_verbs_fn(void);

#endif
