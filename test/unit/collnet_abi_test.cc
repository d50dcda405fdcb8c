// braid's CollNet tables as NCCL 2.19 ... 2.30 find them (issue 18 item 5).
//
// braid's CollNet does allreduce only: iallgather and ireducescatter are NULL in every table.
// That is safe only because NCCL checks them before using CollNet for allgather and
// reducescatter: its tuning (src/graph/tuning.cc, 2.20-2.30) gives CollNetDirect and, from 2.27,
// multi-node NVLS allgather / reducescatter zero bandwidth when comm->ncclCollNet->iallgather /
// ->ireducescatter is NULL (2.19 offers only Ring and NVLS for them, and ncclCollNet_v7 has no
// such members). NCCL sees braid's NULL only when the table it loads is the newest CollNet ABI
// that NCCL version knows: it then takes braid's table pointer as is. An older table goes through
// a wrapper whose iallgather / ireducescatter are forwarders, set whatever the plugin's pointers
// are (v2.24.3 src/net.cc ncclCollNet_v8_as_v9, v2.27.7 src/plugin/net/net_v9.cc, v2.28.9
// net_v10.cc, v2.30.7 net_v11.cc): NCCL would then pick CollNet allgather and call braid's NULL.
// So: every exported table has NULL iallgather / ireducescatter, and for every NCCL version the
// first ncclCollNetPlugin_vN that version's loader finds is that version's newest.
//
// BRAID_PLUGIN_PATH names the library (test/run.sh sets it; default
// build/libnccl-net-braid.so).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

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

// The CollNet symbols each NCCL release tries, in order; the first one found is used. Read in
// NVIDIA/nccl at every tag v2.19.1-1 ... v2.30.7-1.
struct NcclLookup {
  const char* releases;
  std::vector<int> order;
  const char* where;
};

const NcclLookup kLookups[] = {
    {"2.19", {7, 6, 5}, "src/net.cc ncclNetPluginInit"},
    {"2.20-2.23", {8, 7, 6, 5}, "src/net.cc ncclNetPluginInit"},
    {"2.24-2.25", {9, 8, 7, 6, 5}, "src/net.cc ncclNetPluginInit"},
    {"2.26-2.27", {10, 9, 8, 7, 6}, "src/plugin/net.cc (getNcclCollNet_v10 first)"},
    {"2.28-2.29", {11, 10, 9, 8, 7, 6}, "src/plugin/net.cc getNcclCollNet[]"},
    {"2.30", {12, 11, 10, 9, 8, 7, 6}, "src/plugin/net.cc getNcclCollNet[]"},
};

template <int V> struct Coll;
template <> struct Coll<7> { using T = ncclCollNet_v7_t; };
template <> struct Coll<8> { using T = ncclCollNet_v8_t; };
template <> struct Coll<9> { using T = ncclCollNet_v9_t; };
template <> struct Coll<10> { using T = ncclCollNet_v10_t; };
template <> struct Coll<11> { using T = ncclCollNet_v11_t; };
template <> struct Coll<12> { using T = ncclCollNet_v12_t; };

class CollNetAbi : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = dlopen(PluginPath().c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
  }
  void TearDown() override {
    if (lib_) {
      EXPECT_EQ(dlclose(lib_), 0);
    }
  }
  const void* Table(int v) const {
    return dlsym(lib_, ("ncclCollNetPlugin_v" + std::to_string(v)).c_str());
  }
  // The table of version V: exported, named braid, allreduce present, and (v8+) allreduce only.
  template <int V>
  void ExpectAllreduceOnly() {
    auto* t = static_cast<const typename Coll<V>::T*>(Table(V));
    ASSERT_NE(t, nullptr) << "ncclCollNetPlugin_v" << V << " is not exported";
    EXPECT_STREQ(t->name, "braid");
    EXPECT_NE(t->iallreduce, nullptr) << "v" << V;
    if constexpr (V >= 8) {
      EXPECT_EQ(t->iallgather, nullptr)
          << "ncclCollNetPlugin_v" << V << ".iallgather must stay NULL: NCCL's tuning picks "
             "CollNetDirect / NVLS allgather when it is not, and calls it";
      EXPECT_EQ(t->ireducescatter, nullptr)
          << "ncclCollNetPlugin_v" << V << ".ireducescatter must stay NULL (see iallgather)";
    }
  }
  // NULL iallgather / ireducescatter of the table of version v, as NCCL sees it unwrapped.
  bool GatherScatterNull(int v) const {
    switch (v) {
      case 7: return true;  // no such members: NCCL 2.19 never offers CollNet for them
      case 8: return !static_cast<const ncclCollNet_v8_t*>(Table(8))->iallgather &&
                     !static_cast<const ncclCollNet_v8_t*>(Table(8))->ireducescatter;
      case 9: return !static_cast<const ncclCollNet_v9_t*>(Table(9))->iallgather &&
                     !static_cast<const ncclCollNet_v9_t*>(Table(9))->ireducescatter;
      case 10: return !static_cast<const ncclCollNet_v10_t*>(Table(10))->iallgather &&
                      !static_cast<const ncclCollNet_v10_t*>(Table(10))->ireducescatter;
      case 11: return !static_cast<const ncclCollNet_v11_t*>(Table(11))->iallgather &&
                      !static_cast<const ncclCollNet_v11_t*>(Table(11))->ireducescatter;
      case 12: return !static_cast<const ncclCollNet_v12_t*>(Table(12))->iallgather &&
                      !static_cast<const ncclCollNet_v12_t*>(Table(12))->ireducescatter;
    }
    return false;
  }
  void* lib_ = nullptr;
};

TEST_F(CollNetAbi, EveryExportedTableIsAllreduceOnly) {
  ExpectAllreduceOnly<7>();
  ExpectAllreduceOnly<8>();
  ExpectAllreduceOnly<9>();
  ExpectAllreduceOnly<10>();
  ExpectAllreduceOnly<11>();
  ExpectAllreduceOnly<12>();
}

// Each NCCL release's loader, replayed: the first symbol it finds must be its newest ABI (so no
// wrapper stands between NCCL's tuning and braid's NULL pointers), and that table must have them
// NULL.
TEST_F(CollNetAbi, EveryNcclReleaseLoadsItsNewestAbiUnwrapped) {
  for (const NcclLookup& l : kLookups) {
    int found = -1;
    for (int v : l.order)
      if (Table(v)) {
        found = v;
        break;
      }
    EXPECT_EQ(found, l.order.front())
        << "NCCL " << l.releases << " (" << l.where << ") tries ncclCollNetPlugin_v"
        << l.order.front() << " first; braid "
        << (found < 0 ? std::string("exports none it tries")
                      : "would be loaded as v" + std::to_string(found) +
                            " through a wrapper whose iallgather/ireducescatter are not NULL");
    if (found == l.order.front()) {
      EXPECT_TRUE(GatherScatterNull(found))
          << "NCCL " << l.releases << " sees ncclCollNetPlugin_v" << found
          << " as is: its iallgather/ireducescatter must be NULL";
    }
  }
}

}  // namespace
