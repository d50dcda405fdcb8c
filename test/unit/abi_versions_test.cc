// Every exported ncclNetPlugin_vN, loaded from the built library as NCCL loads it (dlopen,
// RTLD_LOCAL), exercised end to end, then dlclosed and loaded again.  BRAID_PLUGIN_PATH names
// the library (test/run.sh sets it; default build/libnccl-net-braid.so).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <string>
#include <type_traits>
#include <vector>

extern "C" {
#include "braid/snapshot.h"
#include "nccl_plugin/net.h"
}

namespace {

std::string PluginPath() {
  const char* p = getenv("BRAID_PLUGIN_PATH");
  return p ? p : "build/libnccl-net-braid.so";
}

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

template <int V> struct Abi;
template <> struct Abi<7> { using Net = ncclNet_v7_t; using Props = ncclNetProperties_v7_t; };
template <> struct Abi<8> { using Net = ncclNet_v8_t; using Props = ncclNetProperties_v8_t; };
template <> struct Abi<9> { using Net = ncclNet_v9_t; using Props = ncclNetProperties_v9_t; };
template <> struct Abi<10> { using Net = ncclNet_v10_t; using Props = ncclNetProperties_v10_t; };
template <> struct Abi<11> { using Net = ncclNet_v11_t; using Props = ncclNetProperties_v11_t; };
template <> struct Abi<12> { using Net = ncclNet_v12_t; using Props = ncclNetProperties_v12_t; };

// One library load: init, properties, connect, a grouped exchange, close, finalize, dlclose.
template <int V>
void Exercise() {
  using Net = typename Abi<V>::Net;
  void* lib = dlopen(PluginPath().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  std::string sym = "ncclNetPlugin_v" + std::to_string(V);
  Net* net = static_cast<Net*>(dlsym(lib, sym.c_str()));
  ASSERT_NE(net, nullptr) << sym;
  EXPECT_STREQ(net->name, "braid");
  EXPECT_EQ(dlsym(lib, "ncclTunerPlugin_v5"), nullptr) << "the net library exports no tuner";

  void* ctx = nullptr;
  if constexpr (V >= 11) {
    ASSERT_EQ(net->init(&ctx, 42, nullptr, nullptr, nullptr), ncclSuccess);
  } else if constexpr (V == 10) {
    ASSERT_EQ(net->init(nullptr, nullptr), ncclSuccess);
  } else {
    ASSERT_EQ(net->init(nullptr), ncclSuccess);
  }
  int ndev = 0;
  ASSERT_EQ(net->devices(&ndev), ncclSuccess);
  ASSERT_GE(ndev, 1);
  typename Abi<V>::Props props;
  memset(&props, 0xA5, sizeof props);
  ASSERT_EQ(net->getProperties(0, &props), ncclSuccess);
  EXPECT_EQ(props.netDeviceType, NCCL_NET_DEVICE_HOST);
  EXPECT_GE(props.maxRecvs, 8);
  if constexpr (V >= 9) {
    EXPECT_GT(props.maxP2pBytes, 0u);
    EXPECT_EQ(props.vProps.ndevs, 1);
  }
  if constexpr (V >= 12) {
    EXPECT_EQ(props.railId, -1);
    EXPECT_EQ(props.planeId, -1);
  }

  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *listen = nullptr, *s = nullptr, *r = nullptr;
  if constexpr (V >= 11) {
    ASSERT_EQ(net->listen(ctx, 0, handle, &listen), ncclSuccess);
  } else {
    ASSERT_EQ(net->listen(0, handle, &listen), ncclSuccess);
  }
  for (double end = Now() + 5; (!s || !r) && Now() < end;) {
    if (!s) {
      ncclResult_t rc;
      if constexpr (V >= 11) rc = net->connect(ctx, 0, handle, &s, nullptr);
      else if constexpr (V == 10) rc = net->connect(0, nullptr, handle, &s, nullptr);
      else rc = net->connect(0, handle, &s, nullptr);
      ASSERT_EQ(rc, ncclSuccess);
    }
    if (!r) { ASSERT_EQ(net->accept(listen, &r, nullptr), ncclSuccess); }
  }
  ASSERT_TRUE(s && r);
  ASSERT_EQ(net->closeListen(listen), ncclSuccess);

  std::vector<char> a(3000, 'a'), b(70000, 'b'), ra(4000), rb(80000);
  void *mh_s = nullptr, *mh_r = nullptr;
  ASSERT_EQ(net->regMr(s, b.data(), (int)b.size(), NCCL_PTR_HOST, &mh_s), ncclSuccess);
  ASSERT_EQ(net->regMr(r, rb.data(), (int)rb.size(), NCCL_PTR_HOST, &mh_r), ncclSuccess);
  void* rdata[2] = {ra.data(), rb.data()};
  int tags[2] = {5, 6};
  void* mhs[2] = {nullptr, mh_r};
  // NCCL 2.24+ presets the optional-completion hint (its shims clear it for v7/v8; here every
  // version gets it, and NCCL hints only single receives: it must be harmless on a grouped one).
  void* const hint = reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION);
  void* rreq = hint;
  if constexpr (V <= 8) {
    int sizes[2] = {(int)ra.size(), (int)rb.size()};
    ASSERT_EQ(net->irecv(r, 2, rdata, sizes, tags, mhs, &rreq), ncclSuccess);
  } else if constexpr (V == 9) {
    size_t sizes[2] = {ra.size(), rb.size()};
    ASSERT_EQ(net->irecv(r, 2, rdata, sizes, tags, mhs, &rreq), ncclSuccess);
  } else {
    size_t sizes[2] = {ra.size(), rb.size()};
    ASSERT_EQ(net->irecv(r, 2, rdata, sizes, tags, mhs, nullptr, &rreq), ncclSuccess);
  }
  ASSERT_NE(rreq, nullptr);
  ASSERT_NE(rreq, hint) << "the hint came back as a request";
  std::vector<void*> sreqs;
  for (auto* m : {&b, &a}) {
    void* req = nullptr;
    int tag = m == &a ? 5 : 6;
    void* mh = m == &b ? mh_s : nullptr;
    if constexpr (V <= 8) { ASSERT_EQ(net->isend(s, m->data(), (int)m->size(), tag, mh, &req), ncclSuccess); }
    else if constexpr (V == 9) { ASSERT_EQ(net->isend(s, m->data(), m->size(), tag, mh, &req), ncclSuccess); }
    else { ASSERT_EQ(net->isend(s, m->data(), m->size(), tag, mh, nullptr, &req), ncclSuccess); }
    ASSERT_NE(req, nullptr);
    sreqs.push_back(req);
  }
  int sizes[2] = {0, 0}, done = 0;
  for (double end = Now() + 5; !done && Now() < end;) {
    for (void*& q : sreqs) {
      int d = 0, sz = 0;
      if (q) { ASSERT_EQ(net->test(q, &d, &sz), ncclSuccess); }
      if (d) q = nullptr;
    }
    ASSERT_EQ(net->test(rreq, &done, sizes), ncclSuccess);
  }
  ASSERT_TRUE(done);
  EXPECT_EQ(sizes[0], 3000);
  EXPECT_EQ(sizes[1], 70000);
  EXPECT_EQ(0, memcmp(ra.data(), a.data(), a.size()));
  EXPECT_EQ(0, memcmp(rb.data(), b.data(), b.size()));
  if constexpr (V == 12) {
    // The tuner's view: found by name with RTLD_NOLOAD, as NCCL loaded the library RTLD_LOCAL.
    void* again = dlopen(PluginPath().c_str(), RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(again, nullptr);
    auto fn = reinterpret_cast<braid_snapshot_fn_v1>(dlsym(again, BRAID_SNAPSHOT_SYMBOL_V1));
    ASSERT_NE(fn, nullptr);
    alignas(8) char buf[sizeof(braid_snapshot_v1) + 4 * sizeof(braid_snapshot_rail_v1)];
    auto* snap = reinterpret_cast<braid_snapshot_v1*>(buf);
    ASSERT_EQ(fn(snap, 4), 0);
    EXPECT_EQ(snap->version, (uint32_t)BRAID_SNAPSHOT_VERSION_1);
    ASSERT_GE(snap->nrails, 1u);
    EXPECT_STREQ(snap->rail[0].nic, "lo");
    EXPECT_EQ(snap->rail[0].bytes, 73000u) << "both sends delivered on the one rail";
    dlclose(again);
  }
  void* flush = nullptr;
  EXPECT_EQ(net->iflush(r, 2, rdata, sizes, mhs, &flush), ncclSuccess);
  EXPECT_EQ(flush, nullptr);
  EXPECT_EQ(net->deregMr(s, mh_s), ncclSuccess);
  EXPECT_EQ(net->deregMr(r, mh_r), ncclSuccess);
  EXPECT_EQ(net->closeSend(s), ncclSuccess);
  EXPECT_EQ(net->closeRecv(r), ncclSuccess);
  if constexpr (V >= 11) { EXPECT_EQ(net->finalize(ctx), ncclSuccess); }
  EXPECT_EQ(dlclose(lib), 0);
}

class AbiVersions : public ::testing::Test {
 protected:
  void SetUp() override { setenv("BRAID_SOCKET_IFNAME", "lo", 1); }
};

TEST_F(AbiVersions, V7) { Exercise<7>(); }
TEST_F(AbiVersions, V8) { Exercise<8>(); }
TEST_F(AbiVersions, V9) { Exercise<9>(); }
TEST_F(AbiVersions, V10) { Exercise<10>(); }
TEST_F(AbiVersions, V11) { Exercise<11>(); }
TEST_F(AbiVersions, V12) { Exercise<12>(); }

TEST_F(AbiVersions, SurvivesRepeatedUnloadAndReload) {
  for (int i = 0; i < 3; i++) {
    Exercise<11>();
    Exercise<10>();
  }
}

TEST_F(AbiVersions, InitFailsCleanlyOnBadConfigAndFinalizeAcceptsNull) {
  setenv("BRAID_TIMEOUT_MS", "banana", 1);
  void* lib = dlopen(PluginPath().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto* net = static_cast<ncclNet_v11_t*>(dlsym(lib, "ncclNetPlugin_v11"));
  void* ctx = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(net->init(&ctx, 1, nullptr, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(net->finalize(ctx), ncclSuccess) << "NCCL finalizes even after a failed init";
  unsetenv("BRAID_TIMEOUT_MS");
  EXPECT_EQ(dlclose(lib), 0);
}

TEST_F(AbiVersions, NoUsableInterfaceFailsInit) {
  setenv("BRAID_SOCKET_IFNAME", "=no-such-nic0", 1);
  void* lib = dlopen(PluginPath().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto* net = static_cast<ncclNet_v11_t*>(dlsym(lib, "ncclNetPlugin_v11"));
  void* ctx = nullptr;
  EXPECT_NE(net->init(&ctx, 1, nullptr, nullptr, nullptr), ncclSuccess);
  EXPECT_EQ(net->finalize(ctx), ncclSuccess);
  EXPECT_EQ(dlclose(lib), 0);
}

// NCCL 2.26.2-2.26.6 (ncclNet_v10) places every device NCCL_NET_MERGE_LEVEL does not merge with
// makeVDevice of that one device; a failure marks it unplaced and restarts the loop from the
// first device, which never ends on a node with two or more devices.  Here: every device's
// one-device virtual device is made, and is the same device as NCCL sees it.
TEST_F(AbiVersions, OneDeviceVirtualDevicesAsNccl226MakesThem) {
  void* lib = dlopen(PluginPath().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto* net = static_cast<ncclNet_v10_t*>(dlsym(lib, "ncclNetPlugin_v10"));
  ASSERT_NE(net, nullptr);
  ASSERT_EQ(net->init(nullptr, nullptr), ncclSuccess);
  int nphys = 0;
  ASSERT_EQ(net->devices(&nphys), ncclSuccess);
  ASSERT_GE(nphys, 1);
  for (int i = 0; i < nphys; i++) {
    ncclNetVDeviceProps_v10_t vp = {};
    vp.ndevs = 1;
    vp.devs[0] = i;
    int v = -1;
    ASSERT_EQ(net->makeVDevice(&v, &vp), ncclSuccess) << "device " << i;
    EXPECT_EQ(v, nphys + i) << "virtual devices follow the physical ones";
    ncclNetProperties_v10_t p = {}, q = {};
    ASSERT_EQ(net->getProperties(i, &p), ncclSuccess);
    ASSERT_EQ(net->getProperties(v, &q), ncclSuccess);
    EXPECT_STREQ(q.name, p.name) << "NCCL finds the vNIC's topology node by name";
    EXPECT_EQ(q.speed, p.speed);
    EXPECT_EQ(q.ptrSupport, p.ptrSupport);
    EXPECT_EQ(q.maxRecvs, p.maxRecvs);
    EXPECT_EQ(q.maxP2pBytes, p.maxP2pBytes);
    EXPECT_EQ(q.netDeviceType, p.netDeviceType);
    EXPECT_EQ(q.vProps.ndevs, 1);
    EXPECT_EQ(q.vProps.devs[0], i);
    if (p.pciPath && q.pciPath) EXPECT_STREQ(q.pciPath, p.pciPath);
    else EXPECT_EQ(q.pciPath, p.pciPath);
  }
  int ndev = 0;
  ASSERT_EQ(net->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 2 * nphys);
  ncclNetVDeviceProps_v10_t none = {};
  int v = -1;
  EXPECT_NE(net->makeVDevice(&v, &none), ncclSuccess) << "no device at all is still refused";
  EXPECT_EQ(dlclose(lib), 0);
}

}  // namespace
