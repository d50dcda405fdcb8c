// NCCL's NIC placement replayed against the built plugin with braid's CollNet attached, as each
// NCCL version runs it (issue 32 item 1).  NCCL treats the net plugin and the CollNet plugin as
// two plugins: CollNet's devices are placed first, with its own devices() and makeVDevice, then
// the net's, into the same topology nodes (found by name).  A plugin whose CollNet shares the
// net's device list makes the net pass see CollNet's virtual devices as physical ones.
//
// What is replayed, read in NVIDIA/nccl at each tag named:
// - src/graph/topo.cc ncclTopoGetSystem: CollNet first when attached (collNetSupport: CollNet
//   init succeeded, i.e. BRAID_PS_SERVERS is set, whatever NCCL_COLLNET_ENABLE says), then the
//   net; ncclTopoProcessNet for each: its physical count, ncclTopoPopulateNics of the physical
//   devices, ncclTopoMakeVNics once per plugin per process (then devices() again: the difference
//   is that plugin's virtual count), and the virtual devices populated.
// - the physical count: v2.24.3-1 .. v2.27.7-1 take devices() the first time ncclTopoProcessNet
//   runs for the plugin (ncclTopoNetState, per plugin name); v2.28.3-1 .. v2.30.7-1 take the
//   count src/plugin/net.cc ncclNetPluginInit read at init (netPhysDevs, collNetPhysDevs).
// - ncclTopoAutoMerge: each unplaced device with the unplaced ones within NCCL_NET_MERGE_LEVEL
//   (default PATH_PORT: ports of one NIC), up to NCCL_NET_MAX_DEVS_PER_NIC (4; 8 in 2.30).
// - ncclTopoMakeVnic: v2.24.3-1 .. v2.26.6-1 call makeVDevice for a group of one too;
//   v2.27.3-1 on skip it.  A failure: v2.24/v2.25 stop init on ncclInvalidUsage and ignore any
//   other error (the group gets no virtual device); v2.26.2-1 on mark the group unplaced, cut it
//   apart (PATH_DIS) and restart the loop with i = 0, which the loop's i++ turns into 1, so a
//   group of one that fails at i >= 1 is retried forever while the topology lock is held.
// - ncclTopoPopulateNics: "dev" is overwritten by each pass (the net's wins, and NCCL passes that
//   index to CollNet's listen); "gdr", "speed" ... are set only when absent (CollNet's win).
//   v2.24-v2.26 pass keep 1 for physical devices, then keep 0 for them and keep 1 for the virtual
//   ones once virtual devices exist, never changing keep of a node tagged coll from the net pass;
//   v2.27 on always keep 1, and a made vNIC sets its members' keep to 0.
//
// Each case runs in a child process (a fresh load of the plugin, optionally in a network
// namespace of its own with many NICs) and a replay that calls makeVDevice more than 4096 times
// is reported as NCCL's endless loop.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

extern "C" {
#include "nccl_plugin/net.h"
}

namespace {

std::string PluginPath() {
  const char* p = getenv("BRAID_PLUGIN_PATH");
  return p ? p : "build/libnccl-net-braid.so";
}

struct NcclVersion {
  const char* tags;
  int abi;                // the net and CollNet tables that version loads
  bool count_at_init;     // physical counts from init (2.28+), else from the first placement
  bool alias_singles;     // makeVDevice for a group of one (2.24-2.26)
  bool restart_on_fail;   // a failed group restarts the loop (2.26+); else ignored (2.24-2.25)
  bool old_keep;          // keep as 2.24-2.26 set it
  int max_per_nic;        // NCCL_NET_MAX_DEVS_PER_NIC
};

const NcclVersion kVersions[] = {
    {"v2.24.3-1, v2.25.1-1", 9, false, true, false, true, 4},
    {"v2.26.2-1 .. v2.26.6-1", 10, false, true, true, true, 4},
    {"v2.27.3-1 .. v2.27.7-1", 10, false, false, true, false, 4},
    {"v2.28.3-1 .. v2.29.7-1", 11, true, false, true, false, 4},
    {"v2.30.3-1 .. v2.30.7-1", 12, true, false, true, false, 8},
};

struct Props {
  std::string name, pci;
  int ptr = 0;
  std::vector<int> vdevs;
};

// One plugin as NCCL's placement calls it.
struct Side {
  std::function<ncclResult_t(int*)> devices;
  std::function<ncclResult_t(int, Props*)> props;
  std::function<ncclResult_t(int*, const std::vector<int>&)> make;
};

template <typename P>
void Convert(const P& p, Props* out) {
  out->name = p.name ? p.name : "";
  out->pci = p.pciPath ? p.pciPath : "";
  out->ptr = p.ptrSupport;
  out->vdevs.assign(p.vProps.devs, p.vProps.devs + p.vProps.ndevs);
}

template <typename T, typename P, typename V>
Side MakeSide(T* t) {
  Side s;
  s.devices = [t](int* n) { return t->devices(n); };
  s.props = [t](int d, Props* out) {
    P p;
    memset(&p, 0xA5, sizeof p);
    ncclResult_t rc = t->getProperties(d, &p);
    if (rc == ncclSuccess) Convert(p, out);
    return rc;
  };
  s.make = [t](int* d, const std::vector<int>& devs) {
    V v = {};
    v.ndevs = (int)devs.size();
    for (size_t i = 0; i < devs.size(); i++) v.devs[i] = devs[i];
    return t->makeVDevice(d, &v);
  };
  return s;
}

// Loads the version's tables, inits both plugins as NCCL does; "" or what failed.
std::string Load(void* lib, int abi, Side* net, Side* coll) {
  switch (abi) {
    case 9: {
      auto* n = (ncclNet_v9_t*)dlsym(lib, "ncclNetPlugin_v9");
      auto* c = (ncclCollNet_v9_t*)dlsym(lib, "ncclCollNetPlugin_v9");
      if (!n || !c) return "no v9 tables";
      if (n->init(nullptr) != ncclSuccess) return "net init failed";
      if (c->init(nullptr) != ncclSuccess) return "CollNet init failed";
      *net = MakeSide<ncclNet_v9_t, ncclNetProperties_v9_t, ncclNetVDeviceProps_v9_t>(n);
      *coll = MakeSide<ncclCollNet_v9_t, ncclNetProperties_v9_t, ncclNetVDeviceProps_v9_t>(c);
      return "";
    }
    case 10: {
      auto* n = (ncclNet_v10_t*)dlsym(lib, "ncclNetPlugin_v10");
      auto* c = (ncclCollNet_v10_t*)dlsym(lib, "ncclCollNetPlugin_v10");
      if (!n || !c) return "no v10 tables";
      if (n->init(nullptr, nullptr) != ncclSuccess) return "net init failed";
      if (c->init(nullptr) != ncclSuccess) return "CollNet init failed";
      *net = MakeSide<ncclNet_v10_t, ncclNetProperties_v10_t, ncclNetVDeviceProps_v10_t>(n);
      *coll = MakeSide<ncclCollNet_v10_t, ncclNetProperties_v10_t, ncclNetVDeviceProps_v10_t>(c);
      return "";
    }
    case 11: {
      auto* n = (ncclNet_v11_t*)dlsym(lib, "ncclNetPlugin_v11");
      auto* c = (ncclCollNet_v11_t*)dlsym(lib, "ncclCollNetPlugin_v11");
      if (!n || !c) return "no v11 tables";
      void *nctx = nullptr, *cctx = nullptr;
      if (n->init(&nctx, 7, nullptr, nullptr, nullptr) != ncclSuccess) return "net init failed";
      if (c->init(&cctx, 7, nullptr) != ncclSuccess) return "CollNet init failed";
      *net = MakeSide<ncclNet_v11_t, ncclNetProperties_v11_t, ncclNetVDeviceProps_v11_t>(n);
      *coll = MakeSide<ncclCollNet_v11_t, ncclNetProperties_v11_t, ncclNetVDeviceProps_v11_t>(c);
      return "";
    }
    case 12: {
      auto* n = (ncclNet_v12_t*)dlsym(lib, "ncclNetPlugin_v12");
      auto* c = (ncclCollNet_v12_t*)dlsym(lib, "ncclCollNetPlugin_v12");
      if (!n || !c) return "no v12 tables";
      void *nctx = nullptr, *cctx = nullptr;
      if (n->init(&nctx, 7, nullptr, nullptr, nullptr) != ncclSuccess) return "net init failed";
      if (c->init(&cctx, 7, nullptr) != ncclSuccess) return "CollNet init failed";
      *net = MakeSide<ncclNet_v12_t, ncclNetProperties_v12_t, ncclNetVDeviceProps_v12_t>(n);
      *coll = MakeSide<ncclCollNet_v12_t, ncclNetProperties_v12_t, ncclNetVDeviceProps_v12_t>(c);
      return "";
    }
  }
  return "unknown ABI";
}

constexpr int kPathLoc = 0, kPathPort = 1, kPathSys = 9, kPathDis = 11;
constexpr int kMaxMakeCalls = 4096;

struct Node {
  int dev = -1, keep = -1, gdr = -1;
  bool coll = false;
};

// NCCL's placement for one process: the shared topology nodes and each plugin's state.
class Replay {
 public:
  Replay(const NcclVersion& v, int merge_level) : v_(v), level_(merge_level) {}

  std::map<std::string, Node> nodes;
  int make_calls = 0;
  std::string error;

  // ncclTopoProcessNet for one plugin; false (error set) on a failure or NCCL's endless loop.
  bool Process(Side& s, bool coll, int init_count, int* nphys_state, int* nvirt_state) {
    int nphys;
    if (v_.count_at_init) {
      nphys = init_count;
    } else {
      if (*nphys_state < 0 && !Check(s.devices(nphys_state), "devices()")) return false;
      nphys = *nphys_state;
    }
    if (!Populate(s, 0, nphys, coll, 1)) return false;
    if (*nvirt_state < 0) {
      if (!MakeVnics(s, nphys)) return false;
      int n = 0;
      if (!Check(s.devices(&n), "devices() after placement")) return false;
      *nvirt_state = n - nphys;
    }
    if (*nvirt_state > 0) {
      if (v_.old_keep && !Populate(s, 0, nphys, coll, 0)) return false;
      if (!Populate(s, nphys, nphys + *nvirt_state, coll, 1)) return false;
    }
    return true;
  }

 private:
  const NcclVersion& v_;
  int level_;

  bool Check(ncclResult_t rc, const std::string& what) {
    if (rc == ncclSuccess) return true;
    error = what + " failed (" + std::to_string(rc) + ")";
    return false;
  }

  bool Populate(Side& s, int from, int to, bool coll, int keep) {
    for (int n = from; n < to; n++) {
      Props p;
      if (!Check(s.props(n, &p), "getProperties(" + std::to_string(n) + ")")) return false;
      Node& node = nodes[p.name];
      if (!v_.old_keep) node.keep = 1;
      else if (!node.coll || coll) node.keep = keep;
      node.dev = n;
      if (node.gdr < 0) node.gdr = (p.ptr & (NCCL_PTR_CUDA | NCCL_PTR_DMABUF)) != 0;
      if (coll) node.coll = true;
    }
    return true;
  }

  // ncclTopoMakeVnic: the error NCCL's loop sees.
  ncclResult_t MakeVnic(Side& s, const std::vector<int>& group, const std::vector<Props>& props) {
    if ((int)group.size() > v_.max_per_nic) return ncclInternalError;
    if (group.size() == 1 && !v_.alias_singles) return ncclSuccess;
    int d = -1;
    make_calls++;
    ncclResult_t rc = s.make(&d, group);
    if (!v_.restart_on_fail) return rc == ncclInvalidUsage ? rc : ncclSuccess;
    if (rc == ncclSuccess && !v_.old_keep)
      for (int m : group) nodes[props[m].name].keep = 0;
    return rc;
  }

  bool MakeVnics(Side& s, int nphys) {
    std::vector<Props> props(nphys);
    for (int i = 0; i < nphys; i++)
      if (!Check(s.props(i, &props[i]), "getProperties(" + std::to_string(i) + ")")) return false;
    std::vector<std::vector<int>> path(nphys, std::vector<int>(nphys));
    for (int i = 0; i < nphys; i++)
      for (int j = 0; j < nphys; j++)
        path[i][j] = i == j ? kPathLoc : !props[i].pci.empty() && props[i].pci == props[j].pci ? kPathPort : kPathSys;
    std::vector<int> placed(nphys, 0);
    for (int i = 0; i < nphys; i++) {
      if (placed[i]) continue;
      std::vector<int> group = {i};
      placed[i] = 1;
      for (int j = 0; j < nphys; j++) {
        if (path[i][j] <= level_ && !placed[j] && j != i) group.push_back(j), placed[j] = 1;
        if ((int)group.size() == v_.max_per_nic) break;
      }
      ncclResult_t rc = MakeVnic(s, group, props);
      if (make_calls > kMaxMakeCalls) {
        error = "NCCL's placement loop never ends: " + std::to_string(make_calls) +
                " makeVDevice calls, the last for device " + std::to_string(i);
        return false;
      }
      if (rc == ncclSuccess) continue;
      if (!v_.restart_on_fail) return Check(rc, "makeVDevice");
      placed[i] = 0;
      for (size_t k = 1; k < group.size(); k++) {
        placed[group[k]] = 0;
        path[i][group[k]] = path[group[k]][i] = kPathDis;
      }
      i = 0;  // NCCL's restart: the loop's i++ makes it 1
    }
    return true;
  }
};

// One process's placement for `comms` communicators, with CollNet attached or not, then the
// checks; "" when every check held, else what did not.
std::string RunVersion(const NcclVersion& v, bool collnet, int merge_level, int comms) {
  void* lib = dlopen(PluginPath().c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::string("dlopen: ") + dlerror();
  Side net, coll;
  std::string err = Load(lib, v.abi, &net, &coll);
  if (!err.empty()) return err;
  int net_init = 0, coll_init = 0;
  if (net.devices(&net_init) != ncclSuccess || coll.devices(&coll_init) != ncclSuccess)
    return "devices() at init failed";
  int net_phys = -1, net_virt = -1, coll_phys = -1, coll_virt = -1;
  Replay r(v, merge_level);
  for (int c = 0; c < comms; c++) {
    if (collnet && !r.Process(coll, true, coll_init, &coll_phys, &coll_virt)) return "CollNet pass: " + r.error;
    if (!r.Process(net, false, net_init, &net_phys, &net_virt)) return "net pass: " + r.error;
  }
  std::string bad;
  // Every NIC stays in the topology: kept itself, or inside a kept virtual device.
  std::vector<std::string> names(net_init);
  for (int i = 0; i < net_init; i++) {
    Props p;
    if (net.props(i, &p) != ncclSuccess) return "getProperties(" + std::to_string(i) + ")";
    names[i] = p.name;
  }
  std::vector<bool> covered(net_init, false);
  for (auto& [name, node] : r.nodes) {
    if (node.keep != 1) continue;
    Props np, cp;
    if (net.props(node.dev, &np) != ncclSuccess || np.name != name) {
      bad += " node " + name + ": net device " + std::to_string(node.dev) + " is " +
             (np.name.empty() ? "invalid" : np.name) + ";";
      continue;
    }
    if (node.coll && (coll.props(node.dev, &cp) != ncclSuccess || cp.name != name))
      bad += " node " + name + ": NCCL passes CollNet device " + std::to_string(node.dev) + ", which is " +
             (cp.name.empty() ? "invalid" : cp.name) + ";";
    for (int m : np.vdevs)
      if (m >= 0 && m < net_init) covered[m] = true;
  }
  for (int i = 0; i < net_init; i++)
    if (!covered[i]) bad += " NIC " + names[i] + " dropped from the topology;";
  int n = 0;
  if (net.devices(&n) == ncclSuccess && n > 2 * net_init)
    bad += " the net lists " + std::to_string(n) + " devices for " + std::to_string(net_init) + " NICs;";
  dlclose(lib);
  return bad;
}

// Runs body in a child process (a fresh load of the plugin); with nics > 0 the child has a network
// namespace of its own with that many NICs (veth), each a device (BRAID_RAILS).  The child's
// answer: "" passed, "skip: ..." could not set up, else the failure.
std::string InChild(int nics, const std::function<std::string()>& body) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    if (nics > 0) {
      uid_t uid = geteuid();
      gid_t gid = getegid();
      if (unshare(uid == 0 ? CLONE_NEWNET : CLONE_NEWUSER | CLONE_NEWNET) != 0) {
        out = std::string("skip: no network namespace here (unshare: ") + strerror(errno) + ")";
      } else if (uid != 0) {
        auto put = [](const char* f, const std::string& s) {
          int fd = open(f, O_WRONLY);
          bool ok = fd >= 0 && write(fd, s.data(), s.size()) == (ssize_t)s.size();
          if (fd >= 0) close(fd);
          return ok;
        };
        if (!put("/proc/self/setgroups", "deny") || !put("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
            !put("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1"))
          out = "skip: no user namespace mapping here";
      }
      std::string rails;
      for (int i = 0; i < nics && out.empty(); i++) {
        std::string cmd = "ip link add bd" + std::to_string(i) + " type veth peer name bp" + std::to_string(i) +
                          " && ip addr add 10.77." + std::to_string(i) + ".1/24 dev bd" + std::to_string(i) +
                          " && ip link set bd" + std::to_string(i) + " up && ip link set bp" +
                          std::to_string(i) + " up";
        if (system((cmd + " >/dev/null 2>&1").c_str()) != 0) out = "skip: cannot create veth NICs (iproute2?)";
        rails += (i ? ";bd" : "bd") + std::to_string(i);
      }
      setenv("BRAID_SOCKET_IFNAME", "bd", 1);
      setenv("BRAID_RAILS", rails.c_str(), 1);
    }
    if (out.empty()) out = body();
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
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return "the child died (status " + std::to_string(st) + ")";
  return got;
}

class NcclTopoReplay : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("BRAID_SOCKET_IFNAME", "lo", 1);
    setenv("BRAID_PS_SERVERS", "127.0.0.1:9", 1);  // with a token CollNet init succeeds (no server
    setenv("BRAID_PS_TOKEN", "topology-replay", 1);  // is contacted before connect): NCCL attaches it
    setenv("BRAID_TIMEOUT_MS", "2000", 1);
  }
  void TearDown() override {
    unsetenv("BRAID_PS_SERVERS");
    unsetenv("BRAID_PS_TOKEN");
    unsetenv("BRAID_RAILS");
  }

  void Every(int nics, bool collnet, int level, const char* what) {
    for (const NcclVersion& v : kVersions) {
      std::string r = InChild(nics, [&] { return RunVersion(v, collnet, level, 2); });
      if (r.rfind("skip: ", 0) == 0) GTEST_SKIP() << r.substr(6);
      EXPECT_EQ(r, "") << what << ", NCCL " << v.tags << " (ncclNetPlugin_v" << v.abi << ")";
    }
  }
};

TEST_F(NcclTopoReplay, NetAloneEveryVersion) { Every(0, false, kPathPort, "net alone"); }

TEST_F(NcclTopoReplay, CollNetAttachedEveryVersion) { Every(0, true, kPathPort, "CollNet attached"); }

// NCCL_NET_MERGE_LEVEL=SYS: everything is merged, in groups of 4 (8 on 2.30).
TEST_F(NcclTopoReplay, CollNetAttachedMergingEveryVersion) { Every(0, true, kPathSys, "CollNet attached, merged"); }

// More NICs than half of the device table: every NIC's alias (2.24-2.26) must still fit, in the
// net's and in CollNet's device lists alike.
TEST_F(NcclTopoReplay, TwentyNicsNetAloneEveryVersion) { Every(20, false, kPathPort, "20 NICs, net alone"); }

TEST_F(NcclTopoReplay, TwentyNicsCollNetAttachedEveryVersion) {
  Every(20, true, kPathPort, "20 NICs, CollNet attached");
}

TEST_F(NcclTopoReplay, TwentyNicsMergedEveryVersion) { Every(20, true, kPathSys, "20 NICs, CollNet attached, merged"); }

}  // namespace
