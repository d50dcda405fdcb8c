// A mock of libibverbs for the unit tests: every symbol braid loads (verbs_dev.h's
// braid_verbs_test_resolver installs VerbsMock::Resolve), with objects that record what was
// asked of them.  Posts and polls are verbs.h inlines through context->ops, so each mock
// context carries ops of its own.  Nothing completes by itself: a test completes posted work
// (Complete), and a QP moved to ERR flushes what it holds, as hardware does.
#ifndef BRAID_TEST_VERBS_MOCK_H
#define BRAID_TEST_VERBS_MOCK_H

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vmock {

struct Mr {
  std::string dev;
  ibv_pd *pd;
  bool dmabuf;
  void *addr;  // ibv_reg_mr's address; dma-buf: the iova
  size_t len;
  uint64_t offset;
  int fd;
  int access;
  int deregs = 0;
  ibv_mr mr{};
};

struct Post {  // one ibv_post_send work request
  std::string dev;
  ibv_qp *qp;
  int opcode;
  uint64_t wr_id;
  uint64_t sge_addr;
  uint32_t sge_len, lkey;
  uint64_t raddr;
  uint32_t rkey;
};

struct Modify {
  ibv_qp *qp;
  int state;
  uint32_t dest_qp_num;  // RTR's
  // The address vector (IBV_QP_AV, RTR's): zero when the mask does not carry it.
  bool av;
  uint8_t is_global, traffic_class, sl;
};

struct Probe {  // an ibv_reg_dmabuf_mr call
  ibv_pd *pd;
  uint64_t offset;
  size_t len;
  uint64_t iova;
  int fd, access;
};

class VerbsMock {
 public:
  // devs: the RDMA devices (one active Ethernet port each).
  explicit VerbsMock(std::vector<std::string> devs);
  ~VerbsMock();  // uninstalls (libibverbs again); frees what braid left (the test checks first)

  bool has_dmabuf = true;        // false: libibverbs "lacks" ibv_reg_dmabuf_mr
  int dmabuf_errno = EBADF;      // what ibv_reg_dmabuf_mr with fd -1 fails with
  std::string fail_dmabuf_dev;   // ibv_reg_dmabuf_mr fails (EINVAL) on this device

  std::vector<Mr *> mrs;         // in registration order
  std::vector<Post> posts;
  std::vector<Modify> modifies;
  std::vector<Probe> probes;
  std::vector<ibv_pd *> pds;

  // Completes posted send work request i (posts[i]) with status; false when it is not outstanding.
  bool Complete(size_t i, ibv_wc_status status = IBV_WC_SUCCESS);
  // An error completion of one of the QP's posted receives.
  bool FailRecv(ibv_qp *qp, ibv_wc_status status);
  std::string DevOfPd(const ibv_pd *pd) const;
  std::string DevOfQp(const ibv_qp *qp) const;
  size_t LiveQps() const;

  static void *Resolve(const char *name);
};

}  // namespace vmock

#endif
