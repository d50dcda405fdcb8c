// GPU memory on verbs without a GPU or an RDMA NIC: the ptrSupport decision (every combination
// of probes and transports), the peer-memory check on a fake sysfs, and, over the libibverbs
// mock (verbs_mock.h), the dma-buf probe, registrations of CUDA and dma-buf memory on every
// rail, the GPUDirect flush (an RDMA READ on each rail's loopback QP) and deregistration on
// close and after a rail failed.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "verbs_mock.h"

extern "C" {
#include "nccl_plugin/net.h"
#include "transport/ptr_support.h"
#include "transport/verbs/verbs_conn.h"
#include "transport/verbs/verbs_gpu.h"
}

namespace {

using vmock::VerbsMock;

// ---- the decision (pure) ----

struct ProbeCase {
  int probe;
  bool dmabuf;
};

TEST(PtrSupport, VerbsMatrixOneRail) {
  const ProbeCase probes[] = {{EOPNOTSUPP, false}, {EPROTONOSUPPORT, false}, {EBADF, true},
                              {EINVAL, true},      {0, true},                {BRAID_DMABUF_NO_SYMBOL, false}};
  for (bool peermem : {false, true})
    for (const ProbeCase &pc : probes) {
      braid_ptr_probe p{};
      p.transport = BRAID_TRANSPORT_VERBS;
      p.peermem = peermem;
      p.nrails = 1;
      p.dmabuf[0] = pc.probe;
      p.rail_name[0] = "eth0";
      char why[384] = "";
      int bits = braid_ptr_support_decide(&p, why, sizeof why);
      int want = NCCL_PTR_HOST | (peermem ? NCCL_PTR_CUDA : 0) | (pc.dmabuf ? NCCL_PTR_DMABUF : 0);
      EXPECT_EQ(want, bits) << "peermem " << peermem << " probe " << pc.probe << ": " << why;
      EXPECT_NE(std::string(why).find("verbs"), std::string::npos) << why;
      if (pc.probe == BRAID_DMABUF_NO_SYMBOL) {
        EXPECT_NE(std::string(why).find("lacks ibv_reg_dmabuf_mr"), std::string::npos) << why;
      }
    }
}

TEST(PtrSupport, EveryRailMustHaveDmabuf) {
  braid_ptr_probe p{};
  p.transport = BRAID_TRANSPORT_VERBS;
  p.peermem = true;
  p.nrails = 3;
  p.dmabuf[0] = EBADF, p.dmabuf[1] = EBADF, p.dmabuf[2] = EBADF;
  p.rail_name[0] = "eth0", p.rail_name[1] = "eth1", p.rail_name[2] = "eth2";
  char why[384];
  EXPECT_EQ(NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF, braid_ptr_support_decide(&p, why, sizeof why));
  p.dmabuf[2] = EOPNOTSUPP;
  EXPECT_EQ(NCCL_PTR_HOST | NCCL_PTR_CUDA, braid_ptr_support_decide(&p, why, sizeof why));
  EXPECT_NE(std::string(why).find("eth2"), std::string::npos) << why;
  p.dmabuf[2] = BRAID_DMABUF_NO_SYMBOL;
  EXPECT_EQ(NCCL_PTR_HOST | NCCL_PTR_CUDA, braid_ptr_support_decide(&p, why, sizeof why));
  p.dmabuf[2] = EBADF, p.dmabuf[1] = BRAID_DMABUF_NO_PORT;  // a rail without an RDMA port: nothing
  EXPECT_EQ(NCCL_PTR_HOST, braid_ptr_support_decide(&p, why, sizeof why));
  EXPECT_NE(std::string(why).find("eth1"), std::string::npos) << why;
}

TEST(PtrSupport, SocketAndOfiAreHostOnly) {
  for (bool peermem : {false, true})
    for (int probe : {EBADF, EOPNOTSUPP}) {
      braid_ptr_probe p{};
      p.peermem = peermem;  // verbs' probes never leak into the other transports
      p.nrails = 1;
      p.dmabuf[0] = probe;
      char why[384];
      p.transport = BRAID_TRANSPORT_SOCKET;
      EXPECT_EQ(NCCL_PTR_HOST, braid_ptr_support_decide(&p, why, sizeof why));
      EXPECT_STREQ("TCP sockets: host memory only", why);
      p.transport = BRAID_TRANSPORT_OFI;
      p.ofi_ptr = 0;
      p.ofi_why = "provider tcp;ofi_rxm does not offer FI_HMEM";
      EXPECT_EQ(NCCL_PTR_HOST, braid_ptr_support_decide(&p, why, sizeof why));
      EXPECT_STREQ("libfabric: provider tcp;ofi_rxm does not offer FI_HMEM: host memory only", why);
    }
}

// Over sockets or libfabric on a node where NCCL's own IB transport would use GPUDirect, braid
// must not stage GPU data through host memory silently: one WARN naming the setting that restores it.
TEST(PtrSupport, GpuDirectLostIsSaidWithTheSettingThatRestoresIt) {
  char msg[640];
  for (auto t : {BRAID_TRANSPORT_SOCKET, BRAID_TRANSPORT_OFI}) {
    for (int peermem = 0; peermem < 2; peermem++)
      for (int dmabuf = 0; dmabuf < 2; dmabuf++) {
        msg[0] = 0;
        int lost = braid_gdr_lost(t, true, true, peermem, dmabuf, msg, sizeof msg);
        EXPECT_EQ(lost, peermem || dmabuf) << t << peermem << dmabuf;
        if (lost) {
          EXPECT_TRUE(strstr(msg, "BRAID_TRANSPORT=verbs")) << msg;
          EXPECT_TRUE(strstr(msg, "unset NCCL_NET_PLUGIN")) << msg;
          EXPECT_TRUE(strstr(msg, braid_transport_word(t))) << msg;
          EXPECT_TRUE(strstr(msg, peermem ? "nvidia-peermem" : "dma-buf")) << msg;
        }
      }
    EXPECT_EQ(braid_gdr_lost(t, false, false, true, true, msg, sizeof msg), 0) << "no RDMA port: nothing lost";
  }
  msg[0] = 0;
  EXPECT_EQ(braid_gdr_lost(BRAID_TRANSPORT_SOCKET, false, true, true, false, msg, sizeof msg), 1);
  EXPECT_TRUE(strstr(msg, "chosen automatically")) << msg;
  EXPECT_EQ(braid_gdr_lost(BRAID_TRANSPORT_VERBS, true, true, true, true, msg, sizeof msg), 0)
      << "verbs carries GPU memory itself";
}

TEST(PtrSupport, PeermemFilesUnderRoot) {
  char root[] = "/tmp/braid-peermem-XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(root));
  EXPECT_FALSE(braid_verbs_peermem(root));
  const char *files[] = {"/sys/kernel/mm/memory_peers/nv_mem", "/sys/kernel/mm/memory_peers/nv_mem_nc",
                         "/sys/module/nvidia_peermem"};
  for (const char *f : files) {
    std::string dir = std::string(root) + f;
    ASSERT_EQ(0, system(("mkdir -p " + dir).c_str()));
    EXPECT_FALSE(braid_verbs_peermem(root)) << f << " without its version file";
    FILE *v = fopen((dir + "/version").c_str(), "w");
    ASSERT_NE(nullptr, v);
    fclose(v);
    EXPECT_TRUE(braid_verbs_peermem(root)) << f;
    ASSERT_EQ(0, system(("rm -rf " + std::string(root) + "/sys").c_str()));
  }
  rmdir(root);
}

// ---- over the libibverbs mock ----

TEST(VerbsGpuMock, DmabufProbeAsNccl) {
  VerbsMock m({"mock_0"});
  m.dmabuf_errno = EBADF;
  EXPECT_EQ(EBADF, braid_verbs_dmabuf_probe("mock_0"));
  ASSERT_EQ(1u, m.probes.size());
  const vmock::Probe &p = m.probes[0];
  EXPECT_EQ(0u, p.offset);
  EXPECT_EQ(0u, p.len);
  EXPECT_EQ(0u, p.iova);
  EXPECT_EQ(-1, p.fd);
  EXPECT_EQ(0, p.access);
  EXPECT_EQ("mock_0", m.DevOfPd(p.pd));
  m.dmabuf_errno = EOPNOTSUPP;
  EXPECT_EQ(EOPNOTSUPP, braid_verbs_dmabuf_probe("mock_0"));
  m.has_dmabuf = false;
  EXPECT_EQ(BRAID_DMABUF_NO_SYMBOL, braid_verbs_dmabuf_probe("mock_0"));
  EXPECT_EQ(2u, m.probes.size());
  for (ibv_pd *pd : m.pds) EXPECT_EQ(0xdeadu, pd->handle) << "the probe's PD deallocated";
}

braid_verbs_rail Rail(const char *dev) {
  braid_verbs_rail r{};
  snprintf(r.dev, sizeof r.dev, "%s", dev);
  r.port = 1;
  r.link = BRAID_LINK_ETH;
  r.mtu = 1024;
  r.speed_mbps = 10000;
  r.roce = 2;
  return r;
}

// A connection of n rails on mock devices mock_0..; connected when connect is true.
struct Conn {
  braid_vc *vc = nullptr;
  Conn(int n, bool sender, bool connect) {
    braid_verbs_rail rails[BRAID_VC_MAX_RAILS];
    const char *names[] = {"mock_0", "mock_1", "mock_2"};
    for (int r = 0; r < n; r++) rails[r] = Rail(names[r]);
    braid_vc_opts o{};
    o.chunk = 64 << 10;
    EXPECT_EQ(0, braid_vc_open(rails, n, sender, &o, &vc));
    if (!connect || !vc) return;
    struct braid_verbs_ep_addr peer[BRAID_VC_MAX_RAILS] = {};
    for (int r = 0; r < n; r++) peer[r].qpn = 900 + r, peer[r].link = BRAID_LINK_ETH, peer[r].mtu = IBV_MTU_1024;
    EXPECT_EQ(0, braid_vc_connect(vc, peer, n)) << braid_vc_error(vc);
  }
  ~Conn() { braid_vc_close(vc); }
};

std::vector<vmock::Mr *> UserMrs(const VerbsMock &m, void *buf) {
  std::vector<vmock::Mr *> out;
  for (vmock::Mr *r : m.mrs)
    if (r->addr == buf) out.push_back(r);
  return out;
}

// A receiver's buffers: the peer writes them, the flush reads them back; a sender's: its own NIC only.
const int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
const int kSenderAccess = IBV_ACCESS_LOCAL_WRITE;

TEST(VerbsGpuMock, CudaRegistersByAddressOnEveryRail) {
  VerbsMock m({"mock_0", "mock_1"});
  {
    Conn c(2, true, false);
    ASSERT_NE(nullptr, c.vc);
    static char gpu[8192];  // stands for a CUDA pointer: peermem makes ibv_reg_mr take it
    braid_vc_mem *mem = nullptr;
    ASSERT_EQ(0, braid_vc_reg(c.vc, gpu, sizeof gpu, -1, 0, &mem));
    std::vector<vmock::Mr *> mrs = UserMrs(m, gpu);
    ASSERT_EQ(2u, mrs.size());
    const char *devs[] = {"mock_0", "mock_1"};
    for (int r = 0; r < 2; r++) {
      EXPECT_FALSE(mrs[r]->dmabuf);
      EXPECT_EQ(devs[r], mrs[r]->dev) << "rail order";
      EXPECT_EQ(sizeof gpu, mrs[r]->len);
      EXPECT_EQ(kSenderAccess, mrs[r]->access) << "a sender's buffer grants the peer nothing";
      EXPECT_EQ(mrs[r]->mr.lkey, mem->mr[r].lkey);
      EXPECT_EQ(mrs[r]->mr.rkey, mem->mr[r].rkey);
    }
    braid_vc_dereg(c.vc, mem);
    for (vmock::Mr *r : mrs) EXPECT_EQ(1, r->deregs);
  }
}

TEST(VerbsGpuMock, DmabufRegistersTheFdOnEveryRail) {
  VerbsMock m({"mock_0", "mock_1"});
  {
    Conn c(2, false, false);
    ASSERT_NE(nullptr, c.vc);
    static char gpu[16384];
    braid_vc_mem *mem = nullptr;
    ASSERT_EQ(0, braid_vc_reg(c.vc, gpu, sizeof gpu, 42, 4096, &mem));
    std::vector<vmock::Mr *> mrs = UserMrs(m, gpu);
    ASSERT_EQ(2u, mrs.size());
    for (int r = 0; r < 2; r++) {
      EXPECT_TRUE(mrs[r]->dmabuf);
      EXPECT_EQ(r ? "mock_1" : "mock_0", mrs[r]->dev);
      EXPECT_EQ(42, mrs[r]->fd);
      EXPECT_EQ(4096u, mrs[r]->offset);
      EXPECT_EQ(sizeof gpu, mrs[r]->len);
      EXPECT_EQ(kAccess, mrs[r]->access);
      EXPECT_EQ(mrs[r]->mr.rkey, mem->mr[r].rkey);
      EXPECT_EQ((void *)gpu, mem->mr[r].addr);
    }
    braid_vc_dereg(c.vc, mem);
    for (vmock::Mr *r : mrs) EXPECT_EQ(1, r->deregs);
  }
}

TEST(VerbsGpuMock, DmabufFailingOnOneRailLeavesNothing) {
  VerbsMock m({"mock_0", "mock_1"});
  m.fail_dmabuf_dev = "mock_1";
  {
    Conn c(2, false, false);
    static char gpu[4096];
    braid_vc_mem *mem = nullptr;
    EXPECT_EQ(-1, braid_vc_reg(c.vc, gpu, sizeof gpu, 5, 0, &mem));
    std::vector<vmock::Mr *> mrs = UserMrs(m, gpu);
    ASSERT_EQ(1u, mrs.size());
    EXPECT_EQ(1, mrs[0]->deregs) << "rail 0's registration undone";
  }
  for (vmock::Mr *r : m.mrs) EXPECT_EQ(1, r->deregs) << r->dev << " " << r->addr;
}

TEST(VerbsGpuMock, DmabufWithoutTheSymbolIsRefused) {
  VerbsMock m({"mock_0"});
  m.has_dmabuf = false;  // a libibverbs without ibv_reg_dmabuf_mr: refused, nothing registered
  {
    Conn c(1, false, false);
    static char gpu2[4096];
    braid_vc_mem *mem = nullptr;
    EXPECT_EQ(-1, braid_vc_reg(c.vc, gpu2, sizeof gpu2, 5, 0, &mem));
    EXPECT_TRUE(UserMrs(m, gpu2).empty());
  }
}

// Every READ posted, in order.
std::vector<size_t> Reads(const VerbsMock &m) {
  std::vector<size_t> out;
  for (size_t i = 0; i < m.posts.size(); i++)
    if (m.posts[i].opcode == IBV_WR_RDMA_READ) out.push_back(i);
  return out;
}

TEST(VerbsGpuMock, FlushReadsOnEachRailsLoopbackQp) {
  VerbsMock m({"mock_0", "mock_1"});
  {
    Conn c(2, false, true);
    ASSERT_NE(nullptr, c.vc);
    static char gpu[8192];
    braid_vc_mem *mem = nullptr;
    ASSERT_EQ(0, braid_vc_reg(c.vc, gpu, sizeof gpu, 9, 0, &mem));
    int req = -1;
    ASSERT_EQ(0, braid_vc_flush(c.vc, gpu + 100, mem, &req)) << braid_vc_error(c.vc);
    std::vector<size_t> reads = Reads(m);
    ASSERT_EQ(2u, reads.size());
    for (int r = 0; r < 2; r++) {
      const vmock::Post &p = m.posts[reads[r]];
      EXPECT_EQ(r ? "mock_1" : "mock_0", p.dev);
      EXPECT_EQ((uint64_t)(uintptr_t)(gpu + 100), p.raddr);
      EXPECT_EQ(mem->mr[r].rkey, p.rkey) << "the rail's own key";
      EXPECT_GE(p.sge_len, 1u);
      EXPECT_LE(p.sge_len, 4u);
      EXPECT_EQ(mem->mr[r].mr ? ((ibv_mr *)mem->mr[r].mr)->pd : nullptr, p.qp->pd) << "same PD as the MRs";
      bool scratch = false;  // the sge is a registered host scratch of the same PD
      for (vmock::Mr *x : m.mrs)
        if (x->mr.lkey == p.lkey) scratch = x->pd == p.qp->pd && !x->dmabuf && x->deregs == 0 &&
                                           p.sge_addr >= (uintptr_t)x->addr && p.sge_addr + p.sge_len <= (uintptr_t)x->addr + x->len;
      EXPECT_TRUE(scratch) << "rail " << r;
      bool loop = false;  // connected to itself
      for (const vmock::Modify &mo : m.modifies)
        if (mo.qp == p.qp && mo.state == IBV_QPS_RTR) loop = mo.dest_qp_num == p.qp->qp_num;
      EXPECT_TRUE(loop) << "rail " << r;
    }
    bool done = true;
    ASSERT_EQ(0, braid_vc_flush_test(c.vc, req, &done));
    EXPECT_FALSE(done) << "no read completed yet";
    ASSERT_TRUE(m.Complete(reads[0]));
    ASSERT_EQ(0, braid_vc_flush_test(c.vc, req, &done));
    EXPECT_FALSE(done) << "rail 1's read still out";
    ASSERT_TRUE(m.Complete(reads[1]));
    ASSERT_EQ(0, braid_vc_flush_test(c.vc, req, &done));
    EXPECT_TRUE(done);
    braid_vc_dereg(c.vc, mem);
  }
  for (vmock::Mr *r : m.mrs) EXPECT_EQ(1, r->deregs) << r->dev << " " << r->addr;
  EXPECT_EQ(0u, m.LiveQps());
}

TEST(VerbsGpuMock, FlushReadErrorFailsTheRequest) {
  VerbsMock m({"mock_0"});
  {
    Conn c(1, false, true);
    static char gpu[4096];
    braid_vc_mem *mem = nullptr;
    ASSERT_EQ(0, braid_vc_reg(c.vc, gpu, sizeof gpu, -1, 0, &mem));
    int req = -1;
    ASSERT_EQ(0, braid_vc_flush(c.vc, gpu, mem, &req));
    std::vector<size_t> reads = Reads(m);
    ASSERT_EQ(1u, reads.size());
    ASSERT_TRUE(m.Complete(reads[0], IBV_WC_REM_ACCESS_ERR));
    bool done = false;
    EXPECT_EQ(-1, braid_vc_flush_test(c.vc, req, &done));
    EXPECT_FALSE(done);
    EXPECT_NE(std::string(braid_vc_error(c.vc)).find("flush"), std::string::npos) << braid_vc_error(c.vc);
    braid_vc_dereg(c.vc, mem);
  }
  for (vmock::Mr *r : m.mrs) EXPECT_EQ(1, r->deregs);
}

TEST(VerbsGpuMock, FailedRailKeepsSurvivorsAndDeregistersOnce) {
  VerbsMock m({"mock_0", "mock_1"});
  {
    Conn c(2, false, true);
    ASSERT_NE(nullptr, c.vc);
    static char gpu[8192];
    braid_vc_mem *mem = nullptr;
    ASSERT_EQ(0, braid_vc_reg(c.vc, gpu, sizeof gpu, 11, 0, &mem));
    uint32_t rkey0 = mem->mr[0].rkey;
    // rail 1's data QP: its receive completes in error (the link died)
    ibv_qp *qp1 = nullptr;
    for (const vmock::Modify &mo : m.modifies)
      if (m.DevOfQp(mo.qp) == "mock_1" && !qp1) qp1 = mo.qp;
    ASSERT_NE(nullptr, qp1);
    ASSERT_TRUE(m.FailRecv(qp1, IBV_WC_RETRY_EXC_ERR));
    EXPECT_EQ(0, braid_vc_progress(c.vc)) << braid_vc_error(c.vc);
    EXPECT_TRUE(braid_vc_rail_down(c.vc, 1));
    EXPECT_FALSE(braid_vc_rail_down(c.vc, 0));
    std::vector<vmock::Mr *> mrs = UserMrs(m, gpu);
    ASSERT_EQ(2u, mrs.size()) << "nothing registered again";
    EXPECT_EQ(0, mrs[0]->deregs);
    EXPECT_EQ(rkey0, mem->mr[0].rkey) << "the survivor's key the receiver announces";
    // a flush now reads on the survivor only
    int req = -1;
    size_t before = Reads(m).size();
    ASSERT_EQ(0, braid_vc_flush(c.vc, gpu, mem, &req)) << braid_vc_error(c.vc);
    std::vector<size_t> reads = Reads(m);
    ASSERT_EQ(before + 1, reads.size());
    EXPECT_EQ("mock_0", m.posts[reads.back()].dev);
    ASSERT_TRUE(m.Complete(reads.back()));
    bool done = false;
    ASSERT_EQ(0, braid_vc_flush_test(c.vc, req, &done));
    EXPECT_TRUE(done);
    braid_vc_dereg(c.vc, mem);
    for (vmock::Mr *r : mrs) EXPECT_EQ(1, r->deregs) << r->dev;
  }
  for (vmock::Mr *r : m.mrs) EXPECT_EQ(1, r->deregs) << r->dev << " " << r->addr;
  EXPECT_EQ(0u, m.LiveQps());
}

}  // namespace
