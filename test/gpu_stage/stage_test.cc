// GPU memory on a connection that carries host memory only (issue 32 item 3): a node whose device
// takes GPU memory (verbs, a peer-memory module, dma-buf) connects to a peer that runs TCP
// sockets.  NCCL decided GPU memory for the device before the connection existed, so it
// registers GPU buffers on the socket connection; braid must carry them (staged through host
// memory), never refuse them ("carries host memory only" failed NCCL's init before).
//
// The node is made as NCCL would find it, with no GPU and no RDMA NIC here: the libibverbs mock
// (test/unit/verbs_mock.h: an RDMA device mock_0 with an active RoCE port, dma-buf probe
// answered as a kernel that knows dma-buf), sysfs entries in a private mount namespace (the
// nvidia_peermem module's version file, mock_0's GID 0 on interface lo), and the CUDA driver
// stand-in (fake_cuda.c, loaded as libcuda.so.1: device memory the CPU cannot touch, copies that
// fail unless a context is current and the stream is non-blocking).  The peer that "runs
// sockets" is the same process's listener, its handle rewritten as a socket-only node's: the two
// ranks disagree on the transport exactly as a verbs node and a socket node do.
//
// The calls are NCCL's, read in NVIDIA/nccl: the net transport registers each protocol buffer on
// the send and the receive comm with regMrDmaBuf (the fd NCCL exported, NCCL_PTR_CUDA, closed
// right after) or regMr(NCCL_PTR_CUDA) when the device's ptrSupport says GPU memory
// (src/transport/net.cc: v2.19.4-1 lines 767-772 and 910-915, v2.30.7-1 lines 997-1004 and
// 1170-1177), then iflush after GPU receives; CollNet registers its buffers the same way from
// CollNet's own ptrSupport (src/transport/coll_net.cc: v2.19.4-1 ~484-495 and 553-565, v2.30.7-1
// 551-559 and 645-653) and calls iallreduce, test and iflush on them.
//
// Each case runs in a child process (the plugin's process-wide state, the mount namespace).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../unit/verbs_mock.h"

extern "C" {
#include "cuda.h"
#include "log.h"
#include "nccl_plugin/net.h"
#include "wire/handle.h"
#include "server.h"
extern ncclNet_v11_t ncclNetPlugin_v11;
extern ncclCollNet_v11_t ncclCollNetPlugin_v11;
struct fake_cuda_stats {
  long copies_dtoh, copies_htod, bytes_dtoh, bytes_htod, streams_created, streams_destroyed;
};
struct fake_cuda_stats fake_cuda_stats(void);
}

namespace {

const ncclNet_v11_t& net = ncclNetPlugin_v11;

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string g_log;
void Logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_log += std::string(buf) + "\n";
}

bool Put(const std::string& path, const std::string& text) {
  for (size_t i = 1; i < path.size(); i++)
    if (path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  bool ok = fd >= 0 && write(fd, text.data(), text.size()) == (ssize_t)text.size();
  if (fd >= 0) close(fd);
  return ok;
}

// A private view of /sys/class and /sys/module with what NCCL's probes look for; "" or why not.
std::string FakeSysfs() {
  uid_t uid = geteuid();
  gid_t gid = getegid();
  if (unshare(uid == 0 ? CLONE_NEWNS : CLONE_NEWUSER | CLONE_NEWNS) != 0)
    return std::string("no mount namespace here (unshare: ") + strerror(errno) + ")";
  if (uid != 0 && (!Put("/proc/self/setgroups", "deny") || !Put("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
                   !Put("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1")))
    return "no user namespace mapping here";
  if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    int e = errno;  // EINVAL: "/" is not a mount point, as in a chroot (test/ns_check.sh)
    return std::string("cannot make the mount namespace private (") + strerror(e) +
           (e == EINVAL ? "; / is not a mount point (a chroot: mount --bind ROOT ROOT before entering it))" : ")");
  }
  if (mount("tmpfs", "/sys/class", "tmpfs", 0, "size=1m") != 0 ||
      mount("tmpfs", "/sys/module", "tmpfs", 0, "size=1m") != 0)
    return std::string("cannot mount a private /sys/class here (") + strerror(errno) + ")";
  if (!Put("/sys/module/nvidia_peermem/version", "1.0\n") ||
      !Put("/sys/class/infiniband/mock_0/ports/1/gid_attrs/ndevs/0", "lo\n"))
    return "cannot write the private sysfs";
  return "";
}

// Runs body in a child with the fake node; "" passed, "skip: ..." or the failure.
std::string InChild(const std::function<std::string()>& body) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string out = FakeSysfs();
    if (!out.empty()) out = "skip: " + out;
    else out = body();
    if (write(fds[1], out.data(), out.size()) < 0) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  std::string got;
  char buf[4096];
  for (ssize_t k; (k = read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, (size_t)k);
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return "the child died (" + std::string(WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exit") +
           "): GPU memory touched by the CPU?";
  return got;
}

#define CHECK(cond, msg)                                          \
  do {                                                            \
    if (!(cond)) return std::string(msg) + "\nWARNs:\n" + g_log;  \
  } while (0)

struct Pair {
  void *ctx = nullptr, *s = nullptr, *r = nullptr;
};

// init as NCCL does, the device's claim checked, then a connection to a socket-only peer.
std::string Connect(Pair* p) {
  CHECK(net.init(&p->ctx, 1, nullptr, Logger, nullptr) == ncclSuccess, "init failed");
  ncclNetProperties_v11_t props;
  CHECK(net.getProperties(0, &props) == ncclSuccess, "getProperties failed");
  CHECK(props.ptrSupport == (NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF),
        "the mocked verbs device claims ptrSupport " + std::to_string(props.ptrSupport) + ", not 0x7");
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  CHECK(net.listen(p->ctx, 0, handle, &listen) == ncclSuccess, "listen failed");
  braid_handle h;
  char why[128];
  CHECK(braid_handle_decode(handle, &h, why, sizeof why) == 0, why);
  CHECK(h.transport & BRAID_HANDLE_VERBS, "the listener is not a verbs node");
  h.transport = 0;  // the peer's handle: a node on TCP sockets (no RDMA port, or no driver)
  braid_handle_encode(&h, handle);
  for (double end = Now() + 10; (!p->s || !p->r) && Now() < end;) {
    if (!p->s) CHECK(net.connect(p->ctx, 0, handle, &p->s, nullptr) == ncclSuccess, "connect failed");
    if (!p->r) CHECK(net.accept(listen, &p->r, nullptr) == ncclSuccess, "accept failed");
  }
  CHECK(p->s && p->r, "no connection within 10 s");
  CHECK(net.closeListen(listen) == ncclSuccess, "closeListen failed");
  return "";
}

std::vector<char> Pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; i++) v[i] = (char)((i * 131 + (size_t)seed * 7919 + (i >> 9)) & 0xff);
  return v;
}

// Sends from GPU buffer sg to GPU buffers rg[0..n) (a grouped receive when n > 1), checks what
// arrived in GPU memory; every iteration its own pattern.
std::string Exchange(Pair& p, void* sg, void* smh, std::vector<void*> rg, std::vector<void*> rmh,
                     std::vector<size_t> sizes, int iters) {
  int n = (int)rg.size();
  for (int it = 0; it < iters; it++) {
    std::vector<std::vector<char>> want(n);
    void* rreq = nullptr;
    std::vector<int> tags(n);
    for (int i = 0; i < n; i++) tags[i] = 100 + i;
    CHECK(net.irecv(p.r, n, rg.data(), sizes.data(), tags.data(), rmh.data(), nullptr, &rreq) == ncclSuccess && rreq,
          "irecv failed");
    std::vector<void*> sreq(n);
    for (int i = 0; i < n; i++) {
      // each message's own part of the send buffer: a different length than its receive (a
      // short message), so the size copied back is the one that arrived
      want[i] = Pattern(sizes[i] - 64 * (size_t)i, it * 8 + i);
      char* src = (char*)sg + i * (sizes[0] + 4096);
      CHECK(braid_cuda_htod(src, want[i].data(), want[i].size()) == 0, braid_cuda_why());
      for (double end = Now() + 10; !sreq[i] && Now() < end;)
        CHECK(net.isend(p.s, src, want[i].size(), tags[i], smh, nullptr, &sreq[i]) == ncclSuccess, "isend failed");
      CHECK(sreq[i], "isend never posted");
    }
    int done = 0, got[8] = {0};
    for (double end = Now() + 20; !done && Now() < end;) {
      for (auto& q : sreq) {
        int d = 0, sz = 0;
        if (q) CHECK(net.test(q, &d, &sz) == ncclSuccess, "send test failed");
        if (d) q = nullptr;
      }
      CHECK(net.test(rreq, &done, got) == ncclSuccess, "receive test failed");
    }
    CHECK(done, "the receive never completed");
    for (int i = 0; i < n; i++) {
      CHECK(got[i] == (int)want[i].size(), "received size " + std::to_string(got[i]) + ", sent " +
                                               std::to_string(want[i].size()));
      std::vector<char> back(want[i].size());
      CHECK(braid_cuda_dtoh(back.data(), rg[i], back.size()) == 0, braid_cuda_why());
      CHECK(back == want[i], "iteration " + std::to_string(it) + " buffer " + std::to_string(i) +
                                 ": GPU memory does not hold what was sent");
    }
    void* flush = nullptr;
    CHECK(net.iflush(p.r, n, rg.data(), got, rmh.data(), &flush) == ncclSuccess, "iflush failed");
    CHECK(!flush, "iflush of staged memory has nothing to wait for");
  }
  return "";
}

class GpuStaging : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("BRAID_SOCKET_IFNAME", "lo", 1);
    setenv("BRAID_TIMEOUT_MS", "5000", 1);
    unsetenv("BRAID_TRANSPORT");  // auto: verbs here, sockets on the peer
  }
  void Run(const std::function<std::string()>& body) {
    std::string r = InChild([&] {
      vmock::VerbsMock m({"mock_0"});
      braid_log_set_logger(Logger);
      if (braid_cuda_use_device(0)) return std::string("fake CUDA: ") + braid_cuda_why();  // NCCL's proxy thread
      return body();
    });
    if (r.rfind("skip: ", 0) == 0) GTEST_SKIP() << r.substr(6);
    EXPECT_EQ(r, "");
  }
};

TEST_F(GpuStaging, CudaBuffersOverSocketsToASocketOnlyPeer) {
  Run([] {
    Pair p;
    std::string e = Connect(&p);
    if (!e.empty()) return e;
    const size_t kSize = 3 << 20;
    void *sg = nullptr, *rg = nullptr, *smh = nullptr, *rmh = nullptr;
    CHECK(braid_cuda_alloc(&sg, kSize + 4096) == 0 && braid_cuda_alloc(&rg, kSize) == 0, braid_cuda_why());
    CHECK(net.regMr(p.s, sg, kSize + 4096, NCCL_PTR_CUDA, &smh) == ncclSuccess, "regMr(CUDA) on the sender refused");
    CHECK(net.regMr(p.r, rg, kSize, NCCL_PTR_CUDA, &rmh) == ncclSuccess, "regMr(CUDA) on the receiver refused");
    CHECK(g_log.find("stages GPU data through host memory") != std::string::npos, "no WARN says GPUDirect is lost");
    CHECK(g_log.find("stages GPU data") == g_log.rfind("stages GPU data"), "the WARN repeats");
    e = Exchange(p, sg, smh, {rg}, {rmh}, {kSize}, 6);
    if (!e.empty()) return e;
    struct fake_cuda_stats st = fake_cuda_stats();
    CHECK(st.copies_dtoh >= 6 && st.copies_htod >= 6, "the copies did not go through the driver");
    CHECK(net.deregMr(p.s, smh) == ncclSuccess && net.deregMr(p.r, rmh) == ncclSuccess, "deregMr failed");
    CHECK(net.closeSend(p.s) == ncclSuccess && net.closeRecv(p.r) == ncclSuccess, "close failed");
    st = fake_cuda_stats();
    CHECK(st.streams_created == st.streams_destroyed, "a staging stream outlived its registration");
    return std::string(net.finalize(p.ctx) == ncclSuccess ? "" : "finalize failed");
  });
}

TEST_F(GpuStaging, GroupedReceiveIntoDmabufRegisteredBuffers) {
  Run([] {
    Pair p;
    std::string e = Connect(&p);
    if (!e.empty()) return e;
    const size_t kSize = 256 << 10, kSend = 4 * (kSize + 4096);
    void *sg = nullptr, *smh = nullptr;
    std::vector<void*> rg(4), rmh(4);
    CHECK(braid_cuda_alloc(&sg, kSend) == 0, braid_cuda_why());
    int fd = -1;
    CHECK(braid_cuda_dmabuf_export(sg, kSend, &fd) == 0, braid_cuda_why());
    CHECK(net.regMrDmaBuf(p.s, sg, kSend, NCCL_PTR_CUDA, 0, fd, &smh) == ncclSuccess, "regMrDmaBuf refused");
    close(fd);  // as NCCL does, right after the call
    for (int i = 0; i < 4; i++) {
      CHECK(braid_cuda_alloc(&rg[i], kSize) == 0, braid_cuda_why());
      CHECK(braid_cuda_dmabuf_export(rg[i], kSize, &fd) == 0, braid_cuda_why());
      CHECK(net.regMrDmaBuf(p.r, rg[i], kSize, NCCL_PTR_CUDA, 0, fd, &rmh[i]) == ncclSuccess, "regMrDmaBuf refused");
      close(fd);
    }
    e = Exchange(p, sg, smh, rg, rmh, {kSize, kSize, kSize, kSize}, 5);
    if (!e.empty()) return e;
    for (int i = 0; i < 4; i++) CHECK(net.deregMr(p.r, rmh[i]) == ncclSuccess, "deregMr failed");
    CHECK(net.deregMr(p.s, smh) == ncclSuccess, "deregMr failed");
    CHECK(net.closeSend(p.s) == ncclSuccess && net.closeRecv(p.r) == ncclSuccess, "close failed");
    return std::string(net.finalize(p.ctx) == ncclSuccess ? "" : "finalize failed");
  });
}

// A send of bytes outside the registered buffer is refused (the staging buffer is the
// registration's size), and a receive completes only once its data is in GPU memory.
TEST_F(GpuStaging, OutOfRangeSendIsRefused) {
  Run([] {
    Pair p;
    std::string e = Connect(&p);
    if (!e.empty()) return e;
    void *sg = nullptr, *smh = nullptr;
    CHECK(braid_cuda_alloc(&sg, 1 << 20) == 0, braid_cuda_why());
    CHECK(net.regMr(p.s, sg, 1 << 16, NCCL_PTR_CUDA, &smh) == ncclSuccess, "regMr refused");
    void* req = nullptr;
    CHECK(net.isend(p.s, (char*)sg + 60000, 10000, 1, smh, nullptr, &req) == ncclInvalidArgument && !req,
          "a send past its registration was taken");
    CHECK(g_log.find("outside the buffer its memory handle registered") != std::string::npos, "no WARN for it");
    CHECK(net.deregMr(p.s, smh) == ncclSuccess, "deregMr failed");
    CHECK(net.closeSend(p.s) == ncclSuccess && net.closeRecv(p.r) == ncclSuccess, "close failed");
    return std::string(net.finalize(p.ctx) == ncclSuccess ? "" : "finalize failed");
  });
}

// CollNet on the same node: it claims what the net's device claims (NCCL keeps CollNet's claim
// for the NIC's topology node, the net's connections included), so NCCL puts CollNet buffers in
// GPU memory and registers them; braid stages them for braid-ps.  Two heads on their own threads
// (connect is a blocking collective), two in-process braid-ps servers; every iteration its own
// data, and each head's result read back from GPU memory.
TEST_F(GpuStaging, CollNetTakesWhatTheNetDeviceTakesAndStagesIt) {
  Run([] {
    const ncclCollNet_v11_t& coll = ncclCollNetPlugin_v11;
    ps_server* srv[2];
    std::string list;
    for (int i = 0; i < 2; i++) {
      ps_server_opts o = {};
      o.listen = "127.0.0.1:0";
      o.token = "staging-token";
      o.threads = 2;
      o.quiet = 1;
      char err[256];
      srv[i] = ps_server_start(&o, err, sizeof err);
      CHECK(srv[i], err);
      list += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(ps_server_port(srv[i]));
    }
    setenv("BRAID_PS_SERVERS", list.c_str(), 1);
    setenv("BRAID_PS_TOKEN", "staging-token", 1);
    void *nctx = nullptr, *cctx = nullptr;
    CHECK(net.init(&nctx, 1, nullptr, Logger, nullptr) == ncclSuccess, "net init failed");
    CHECK(coll.init(&cctx, 1, Logger) == ncclSuccess, "CollNet init failed");
    ncclNetProperties_v11_t np, cp;
    CHECK(net.getProperties(0, &np) == ncclSuccess && coll.getProperties(0, &cp) == ncclSuccess, "getProperties");
    CHECK(np.ptrSupport == 0x7, "the net device claims " + std::to_string(np.ptrSupport));
    CHECK(cp.ptrSupport == np.ptrSupport, "CollNet claims " + std::to_string(cp.ptrSupport) + ", the net " +
                                              std::to_string(np.ptrSupport) + ": NCCL would keep CollNet's for both");
    CHECK(coll.regMrDmaBuf != nullptr, "regMrDmaBuf is NULL while ptrSupport has NCCL_PTR_DMABUF");
    char handles[2][NCCL_NET_HANDLE_MAXSIZE];
    void* listens[2] = {nullptr, nullptr};
    for (int r = 0; r < 2; r++) CHECK(coll.listen(cctx, 0, handles[r], &listens[r]) == ncclSuccess, "CollNet listen");
    const int kCount = 300000, kIters = 5;
    std::string errs[2];
    std::thread heads[2];
    for (int r = 0; r < 2; r++)
      heads[r] = std::thread([&, r] {
        std::string& e = errs[r];
        if (braid_cuda_use_device(0)) return void(e = braid_cuda_why());  // the proxy thread's context
        void* hs[2] = {handles[0], handles[1]};
        void* cc = nullptr;
        if (coll.connect(hs, 2, r, listens[r], &cc) != ncclSuccess || !cc) return void(e = "CollNet connect failed");
        void *sg = nullptr, *rg = nullptr, *smh = nullptr, *rmh = nullptr;
        size_t bytes = kCount * sizeof(float);
        if (braid_cuda_alloc(&sg, bytes) || braid_cuda_alloc(&rg, bytes)) return void(e = braid_cuda_why());
        int fd = -1;
        if (coll.regMr(cc, sg, bytes, NCCL_PTR_CUDA, &smh) != ncclSuccess) return void(e = "CollNet regMr(CUDA) refused");
        if (braid_cuda_dmabuf_export(rg, bytes, &fd) ||
            coll.regMrDmaBuf(cc, rg, bytes, NCCL_PTR_CUDA, 0, fd, &rmh) != ncclSuccess)
          return void(e = "CollNet regMrDmaBuf refused");
        close(fd);
        for (int it = 0; it < kIters && e.empty(); it++) {
          std::vector<float> in(kCount), out(kCount);
          for (int i = 0; i < kCount; i++) in[i] = (float)((i % 1000) * (r + 1) + it);
          if (braid_cuda_htod(sg, in.data(), bytes)) return void(e = braid_cuda_why());
          void* req = nullptr;
          for (double end = Now() + 10; !req && Now() < end;)
            if (coll.iallreduce(cc, sg, rg, kCount, ncclFloat32, ncclSum, smh, rmh, &req) != ncclSuccess)
              return void(e = "iallreduce failed");
          int done = 0, size = 0;
          for (double end = Now() + 20; req && !done && Now() < end;)
            if (coll.test(req, &done, &size) != ncclSuccess) return void(e = "CollNet test failed");
          if (!done) return void(e = "the allreduce never completed");
          if (braid_cuda_dtoh(out.data(), rg, bytes)) return void(e = braid_cuda_why());
          for (int i = 0; i < kCount; i++)
            if (out[i] != (float)((i % 1000) * 3 + 2 * it))
              return void(e = "iteration " + std::to_string(it) + " element " + std::to_string(i) + ": " +
                              std::to_string(out[i]) + " in GPU memory");
          void* flush = nullptr;
          if (coll.iflush(cc, rg, (int)bytes, rmh, &flush) != ncclSuccess || flush)
            return void(e = "iflush of staged memory has something to wait for");
        }
        if (coll.deregMr(cc, smh) != ncclSuccess || coll.deregMr(cc, rmh) != ncclSuccess) return void(e = "deregMr");
        if (coll.closeColl(cc) != ncclSuccess) e = "closeColl failed";
      });
    for (auto& t : heads) t.join();
    for (int r = 0; r < 2; r++) CHECK(errs[r].empty(), "head " + std::to_string(r) + ": " + errs[r]);
    for (int r = 0; r < 2; r++) coll.closeListen(listens[r]);
    coll.finalize(cctx);
    net.finalize(nctx);
    for (auto* s : srv) ps_server_stop(s);
    return std::string();
  });
}

}  // namespace
