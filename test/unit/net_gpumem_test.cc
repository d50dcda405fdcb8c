// Memory types through the exported tables over TCP sockets (no GPU here): host memory only is
// advertised, a CUDA or dma-buf registration (an fd, whatever the type) is refused with
// ncclInvalidArgument, regMrDmaBuf without an fd registers as regMr does, and iflush has nothing to flush (NULL request).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

extern "C" {
#include "nccl_plugin/net.h"
#include "param.h"
extern ncclNet_v7_t ncclNetPlugin_v7;
extern ncclNet_v8_t ncclNetPlugin_v8;
extern ncclNet_v9_t ncclNetPlugin_v9;
extern ncclNet_v10_t ncclNetPlugin_v10;
extern ncclNet_v11_t ncclNetPlugin_v11;
extern ncclNet_v12_t ncclNetPlugin_v12;
}

namespace {

const ncclNet_v11_t &net = ncclNetPlugin_v11;

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

class GpuMemSockets : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("BRAID_SOCKET_IFNAME", "lo", 1);
    setenv("BRAID_TRANSPORT", "socket", 1);
    braid_params_reload();
    ASSERT_EQ(net.init(&ctx_, 1, nullptr, nullptr, nullptr), ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void *listen = nullptr;
    ASSERT_EQ(net.listen(ctx_, 0, handle, &listen), ncclSuccess);
    double end = Now() + 5;
    while ((!send_ || !recv_) && Now() < end) {
      if (!send_) { ASSERT_EQ(net.connect(ctx_, 0, handle, &send_, nullptr), ncclSuccess); }
      if (!recv_) { ASSERT_EQ(net.accept(listen, &recv_, nullptr), ncclSuccess); }
    }
    ASSERT_TRUE(send_ && recv_);
    ASSERT_EQ(net.closeListen(listen), ncclSuccess);
  }
  void TearDown() override {
    if (send_) { EXPECT_EQ(net.closeSend(send_), ncclSuccess); }
    if (recv_) { EXPECT_EQ(net.closeRecv(recv_), ncclSuccess); }
    EXPECT_EQ(net.finalize(ctx_), ncclSuccess);
    unsetenv("BRAID_TRANSPORT");
    braid_params_reload();
  }
  void *ctx_ = nullptr, *send_ = nullptr, *recv_ = nullptr;
};

TEST(GpuMemAbi, EveryVersionHasRegMrDmaBuf) {
  EXPECT_NE(nullptr, (void *)ncclNetPlugin_v7.regMrDmaBuf);
  EXPECT_NE(nullptr, (void *)ncclNetPlugin_v8.regMrDmaBuf);
  EXPECT_NE(nullptr, (void *)ncclNetPlugin_v9.regMrDmaBuf);
  EXPECT_NE(nullptr, (void *)ncclNetPlugin_v10.regMrDmaBuf);
  EXPECT_NE(nullptr, (void *)ncclNetPlugin_v11.regMrDmaBuf);
  EXPECT_NE(nullptr, (void *)ncclNetPlugin_v12.regMrDmaBuf);
}

TEST_F(GpuMemSockets, HostOnlyAndGpuTypesRefused) {
  ncclNetProperties_v11_t p;
  ASSERT_EQ(net.getProperties(0, &p), ncclSuccess);
  EXPECT_EQ(NCCL_PTR_HOST, p.ptrSupport);
  static char buf[4096];
  void *mh = reinterpret_cast<void *>(1);
  EXPECT_EQ(ncclInvalidArgument, net.regMr(recv_, buf, sizeof buf, NCCL_PTR_CUDA, &mh));
  EXPECT_EQ(nullptr, mh);
  mh = reinterpret_cast<void *>(1);
  EXPECT_EQ(ncclInvalidArgument, net.regMrDmaBuf(recv_, buf, sizeof buf, NCCL_PTR_DMABUF, 0, 3, &mh));
  EXPECT_EQ(nullptr, mh);
  // An fd is a dma-buf whatever memory is behind it (NCCL passes NCCL_PTR_CUDA with it): the
  // device must advertise NCCL_PTR_DMABUF, which sockets do not.
  EXPECT_EQ(ncclInvalidArgument, net.regMrDmaBuf(recv_, buf, sizeof buf, NCCL_PTR_CUDA, 0, 3, &mh))
      << "NCCL's dma-buf registration (CUDA memory, an fd)";
  EXPECT_EQ(nullptr, mh);
  EXPECT_EQ(ncclInvalidArgument, net.regMrDmaBuf(recv_, buf, sizeof buf, NCCL_PTR_HOST, 0, 3, &mh))
      << "host memory behind a dma-buf fd";
  EXPECT_EQ(nullptr, mh);
  EXPECT_EQ(ncclInvalidArgument, net.regMrDmaBuf(recv_, buf, sizeof buf, NCCL_PTR_DMABUF, 0, -1, &mh))
      << "dma-buf memory without an fd";
  EXPECT_EQ(ncclInvalidArgument, net.regMr(recv_, buf, sizeof buf, 8, &mh)) << "no such type";
  ASSERT_EQ(ncclSuccess, net.regMrDmaBuf(recv_, buf, sizeof buf, NCCL_PTR_HOST, 0, -1, &mh));
  ASSERT_NE(nullptr, mh);
  void *data[1] = {buf};
  int sizes[1] = {128};
  void *mhs[1] = {mh};
  void *req = reinterpret_cast<void *>(1);
  EXPECT_EQ(ncclSuccess, net.iflush(recv_, 1, data, sizes, mhs, &req));
  EXPECT_EQ(nullptr, req) << "host memory: nothing to flush";
  EXPECT_EQ(ncclSuccess, net.deregMr(recv_, mh));
}

}  // namespace
