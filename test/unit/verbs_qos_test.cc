// The traffic class of verbs queue pairs over the libibverbs mock (verbs_mock.h): the class a
// connection was given (transport/tclass.h: NCCL's trafficClass, BRAID_IB_TC, BRAID_IB_SL) is in
// every RTR's address vector, the GPUDirect flush's loopback queue pair's included, as NCCL's
// net_ib sets it: the GRH traffic class where the address is global (RoCE), the service level
// always.  Without one, both stay 0.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "verbs_mock.h"

extern "C" {
#include "transport/verbs/verbs_conn.h"
}

namespace {

using vmock::VerbsMock;

braid_verbs_rail Rail(const char *dev, braid_link link) {
  braid_verbs_rail r{};
  snprintf(r.dev, sizeof r.dev, "%s", dev);
  r.port = 1;
  r.link = link;
  r.mtu = 1024;
  r.speed_mbps = 10000;
  r.roce = link == BRAID_LINK_ETH ? 2 : 0;
  return r;
}

// A connection of two rails on mock_0 and mock_1 with traffic class qos, connected.
struct Conn {
  braid_vc *vc = nullptr;
  Conn(braid_verbs_qos qos, braid_link link, bool sender) {
    braid_verbs_rail rails[2] = {Rail("mock_0", link), Rail("mock_1", link)};
    braid_vc_opts o{};
    o.chunk = 64 << 10;
    o.qos = qos;
    EXPECT_EQ(0, braid_vc_open(rails, 2, sender, &o, &vc));
    if (!vc) return;
    struct braid_verbs_ep_addr peer[2] = {};
    for (int r = 0; r < 2; r++) peer[r].qpn = 900 + r, peer[r].link = (uint8_t)link, peer[r].mtu = IBV_MTU_1024;
    EXPECT_EQ(0, braid_vc_connect(vc, peer, 2)) << braid_vc_error(vc);
  }
  ~Conn() { braid_vc_close(vc); }
};

std::vector<vmock::Modify> Rtrs(const VerbsMock &m) {
  std::vector<vmock::Modify> out;
  for (const vmock::Modify &mo : m.modifies)
    if (mo.state == IBV_QPS_RTR) out.push_back(mo);
  return out;
}

TEST(VerbsQos, RoceRtrCarriesTrafficClassAndServiceLevel) {
  for (bool sender : {true, false}) {
    VerbsMock m({"mock_0", "mock_1"});
    {
      Conn c({104, 3}, BRAID_LINK_ETH, sender);
      ASSERT_NE(nullptr, c.vc);
      std::vector<vmock::Modify> rtr = Rtrs(m);
      ASSERT_EQ(2u, rtr.size()) << "one queue pair per rail";
      for (const vmock::Modify &mo : rtr) {
        EXPECT_TRUE(mo.av);
        EXPECT_EQ(1, mo.is_global) << "RoCE: GID addressing";
        EXPECT_EQ(104, mo.traffic_class) << m.DevOfQp(mo.qp) << (sender ? " sender" : " receiver");
        EXPECT_EQ(3, mo.sl) << m.DevOfQp(mo.qp);
      }
    }
  }
}

TEST(VerbsQos, FlushQueuePairTakesTheConnectionsClass) {
  VerbsMock m({"mock_0", "mock_1"});
  {
    Conn c({72, 5}, BRAID_LINK_ETH, false);
    ASSERT_NE(nullptr, c.vc);
    static char gpu[4096];
    braid_vc_mem *mem = nullptr;
    ASSERT_EQ(0, braid_vc_reg(c.vc, gpu, sizeof gpu, -1, 0, &mem));
    int req = -1;
    ASSERT_EQ(0, braid_vc_flush(c.vc, gpu, mem, &req)) << braid_vc_error(c.vc);
    std::vector<vmock::Modify> rtr = Rtrs(m);
    ASSERT_EQ(4u, rtr.size()) << "two rails' queue pairs, then their loopback flush queue pairs";
    for (const vmock::Modify &mo : rtr) {
      EXPECT_EQ(72, mo.traffic_class) << m.DevOfQp(mo.qp) << " QP " << mo.qp->qp_num;
      EXPECT_EQ(5, mo.sl) << m.DevOfQp(mo.qp) << " QP " << mo.qp->qp_num;
    }
    for (size_t i = 0; i < m.posts.size(); i++) m.Complete(i);
    bool done = false;
    EXPECT_EQ(0, braid_vc_flush_test(c.vc, req, &done));
    braid_vc_dereg(c.vc, mem);
  }
}

TEST(VerbsQos, InfinibandSetsTheServiceLevelWithoutAGrh) {
  VerbsMock m({"mock_0", "mock_1"});
  {
    Conn c({104, 7}, BRAID_LINK_IB, true);
    ASSERT_NE(nullptr, c.vc);
    std::vector<vmock::Modify> rtr = Rtrs(m);
    ASSERT_EQ(2u, rtr.size());
    for (const vmock::Modify &mo : rtr) {
      EXPECT_EQ(0, mo.is_global) << "InfiniBand within a subnet: LID addressing, no GRH";
      EXPECT_EQ(0, mo.traffic_class) << "no GRH to carry it";
      EXPECT_EQ(7, mo.sl);
    }
  }
}

TEST(VerbsQos, NoClassLeavesTheDefaults) {
  VerbsMock m({"mock_0", "mock_1"});
  {
    Conn c({0, 0}, BRAID_LINK_ETH, true);
    ASSERT_NE(nullptr, c.vc);
    std::vector<vmock::Modify> rtr = Rtrs(m);
    ASSERT_EQ(2u, rtr.size());
    for (const vmock::Modify &mo : rtr) {
      EXPECT_EQ(0, mo.traffic_class);
      EXPECT_EQ(0, mo.sl);
    }
  }
}

}  // namespace
