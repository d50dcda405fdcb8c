// The braid tuner: the CSV rules parser and matcher, every exported ncclTunerPlugin_vN loaded from
// the built library as NCCL loads it, and the "every rank chooses the same" property.
// BRAID_TUNER_PATH names the library (default build/libnccl-tuner-braid.so, from the repo root).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

extern "C" {
#include "nccl_plugin/tuner.h"
#include "rules.h"
#include "tuner.h"
}

#include "temp_file.h"

namespace {

constexpr float kIgnore = (float)NCCL_ALGO_PROTO_IGNORE;

std::string TunerPath() {
  const char* p = getenv("BRAID_TUNER_PATH");
  return p && *p ? p : "build/libnccl-tuner-braid.so";
}


// Sets NCCL_TUNER_CONFIG_FILE for one scope, pins it (BRAID_TUNER_PIN: files decide only when
// pinned) unless pin is false, and restores both.
class ConfigEnv {
 public:
  explicit ConfigEnv(const std::string& path, bool pin = true) {
    Save("NCCL_TUNER_CONFIG_FILE", 0);
    Save("BRAID_TUNER_PIN", 1);
    setenv("NCCL_TUNER_CONFIG_FILE", path.c_str(), 1);
    unsetenv("BRAID_TUNER_PIN");
    if (pin) {
      braid_tuner_inputs in;
      braid_tuner_inputs_read(&in);
      char hex[32];
      snprintf(hex, sizeof hex, "%016llx", (unsigned long long)in.fingerprint);
      setenv("BRAID_TUNER_PIN", hex, 1);
    }
  }
  ~ConfigEnv() {
    const char* names[2] = {"NCCL_TUNER_CONFIG_FILE", "BRAID_TUNER_PIN"};
    for (int i = 0; i < 2; i++) {
      if (had_[i])
        setenv(names[i], old_[i].c_str(), 1);
      else
        unsetenv(names[i]);
    }
  }

 private:
  void Save(const char* name, int i) {
    const char* old = getenv(name);
    had_[i] = old != nullptr;
    if (had_[i]) old_[i] = old;
  }
  bool had_[2] = {false, false};
  std::string old_[2];
};

struct Warnings {
  std::vector<std::pair<int, std::string>> v;
  std::vector<int> lines() const {
    std::vector<int> out;
    for (auto& w : v) out.push_back(w.first);
    return out;
  }
};

void CollectWarning(void* arg, const char*, int line, const char* msg) {
  static_cast<Warnings*>(arg)->v.emplace_back(line, msg);
}

// Parses text; returns the warning count.
int Parse(const std::string& text, braid_rules* out, Warnings* w) {
  return braid_rules_parse(text.data(), text.size(), "test.conf", out, CollectWarning, w);
}

// ---- Parser ---------------------------------------------------------------------------------

TEST(TunerRules, AllFields) {
  braid_rules r;
  Warnings w;
  EXPECT_EQ(Parse("reducescatter,16,4294967295,nvls_tree,ll128,8,2,16,3,1\n", &r, &w), 0);
  ASSERT_EQ(r.n, 1u);
  const braid_rule& x = r.v[0];
  EXPECT_EQ(x.coll, ncclFuncReduceScatter);
  EXPECT_EQ(x.min_bytes, 16u);
  EXPECT_EQ(x.max_bytes, 4294967295u);
  EXPECT_EQ(x.algo, NCCL_ALGO_NVLS_TREE);
  EXPECT_EQ(x.proto, NCCL_PROTO_LL128);
  EXPECT_EQ(x.channels, 8);
  EXPECT_EQ(x.nnodes, 2);
  EXPECT_EQ(x.nranks, 16);
  EXPECT_EQ(x.pipe_ops, 3);
  EXPECT_EQ(x.reg_buff, 1);
  EXPECT_EQ(x.line, 1);
  braid_rules_free(&r);
}

TEST(TunerRules, OptionalFields) {
  braid_rules r;
  Warnings w;
  EXPECT_EQ(Parse("allreduce,0,100,ring,simple,-1,-1,-1\n"
                  "allreduce,0,100,ring,simple,-1,-1,-1,4\n"
                  "allreduce,0,-1,ring,simple,-1,-1,-1,-1,0",  // no final newline
                  &r, &w),
            0);
  ASSERT_EQ(r.n, 3u);
  EXPECT_EQ(r.v[0].pipe_ops, -1);
  EXPECT_EQ(r.v[0].reg_buff, -1);
  EXPECT_EQ(r.v[1].pipe_ops, 4);
  EXPECT_EQ(r.v[1].reg_buff, -1);
  EXPECT_EQ(r.v[2].pipe_ops, -1);
  EXPECT_EQ(r.v[2].reg_buff, 0);
  EXPECT_EQ(r.v[2].max_bytes, UINT64_MAX) << "-1 as max_bytes: no upper bound";
  braid_rules_free(&r);
}

TEST(TunerRules, AllNames) {
  const char* colls[] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
  const char* algos[] = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree",
                         "pat"};
  const char* protos[] = {"ll", "ll128", "simple"};
  std::string text;
  for (int c = 0; c < 5; c++)
    for (int a = 0; a < 7; a++)
      for (int p = 0; p < 3; p++)
        text += std::string(colls[c]) + ",0,1," + algos[a] + "," + protos[p] + ",-1,-1,-1\n";
  braid_rules r;
  Warnings w;
  EXPECT_EQ(Parse(text, &r, &w), 0);
  ASSERT_EQ(r.n, 105u);
  size_t i = 0;
  for (int c = 0; c < 5; c++)
    for (int a = 0; a < 7; a++)
      for (int p = 0; p < 3; p++, i++) {
        EXPECT_EQ(r.v[i].coll, c);
        EXPECT_EQ(r.v[i].algo, a);
        EXPECT_EQ(r.v[i].proto, p);
        EXPECT_STREQ(braid_rule_coll_name(c), colls[c]);
        EXPECT_STREQ(braid_rule_algo_name(a), algos[a]);
        EXPECT_STREQ(braid_rule_proto_name(p), protos[p]);
      }
  braid_rules_free(&r);
}

TEST(TunerRules, CommentsBlankLinesWhitespace) {
  braid_rules r;
  Warnings w;
  EXPECT_EQ(Parse("# a comment, with, commas, to, look, like, a, rule\n"
                  "\n"
                  "   \t \n"
                  "  allgather , 1 ,\t2 , ring , ll128 , -1 , -1 , -1  \r\n"
                  "\t# indented comment\r\n"
                  "broadcast,0,10,tree,ll,2,1,8\r\n",
                  &r, &w),
            0)
      << (w.v.empty() ? "" : w.v[0].second);
  ASSERT_EQ(r.n, 2u);
  EXPECT_EQ(r.v[0].coll, ncclFuncAllGather);
  EXPECT_EQ(r.v[0].min_bytes, 1u);
  EXPECT_EQ(r.v[0].max_bytes, 2u);
  EXPECT_EQ(r.v[0].proto, NCCL_PROTO_LL128);
  EXPECT_EQ(r.v[0].line, 4);
  EXPECT_EQ(r.v[1].coll, ncclFuncBroadcast);
  EXPECT_EQ(r.v[1].line, 6);
  braid_rules_free(&r);
}

TEST(TunerRules, UnknownNamesTakeDefaultsWithOneWarningPerLine) {
  braid_rules r;
  Warnings w;
  EXPECT_EQ(Parse("bcast,0,10,Tree,LL,-1,-1,-1\n"   // three unknown names: one warning
                  "reduce,0,10,hierarchical,ll,-1,-1,-1\n"
                  "reduce,0,10,tree,fast,-1,-1,-1\n"
                  "reduce,0,10,tree,ll,-1,-1,-1\n",  // clean
                  &r, &w),
            3);
  ASSERT_EQ(r.n, 4u);
  EXPECT_EQ(r.v[0].coll, ncclFuncAllReduce);
  EXPECT_EQ(r.v[0].algo, NCCL_ALGO_RING);
  EXPECT_EQ(r.v[0].proto, NCCL_PROTO_SIMPLE);
  EXPECT_EQ(r.v[1].algo, NCCL_ALGO_RING);
  EXPECT_EQ(r.v[1].proto, NCCL_PROTO_LL);
  EXPECT_EQ(r.v[2].algo, NCCL_ALGO_TREE);
  EXPECT_EQ(r.v[2].proto, NCCL_PROTO_SIMPLE);
  EXPECT_EQ(w.lines(), (std::vector<int>{1, 2, 3}));
  EXPECT_NE(w.v[0].second.find("bcast"), std::string::npos) << w.v[0].second;
  EXPECT_NE(w.v[1].second.find("hierarchical"), std::string::npos) << w.v[1].second;
  EXPECT_NE(w.v[2].second.find("fast"), std::string::npos) << w.v[2].second;
  braid_rules_free(&r);
}

TEST(TunerRules, MalformedLinesSkippedWithLineNumbers) {
  braid_rules r;
  Warnings w;
  const std::string text =
      "allreduce,0,10,ring,ll,-1,-1\n"                  // 1: 7 fields
      "allreduce,0,10,ring,ll,-1,-1,-1,-1,-1,-1\n"      // 2: 11 fields
      "allreduce,0,10,ring,ll,-1,-1,-1\n"               // 3: good
      "allreduce,zero,10,ring,ll,-1,-1,-1\n"            // 4: min not a number
      "allreduce,0,1e3,ring,ll,-1,-1,-1\n"              // 5: max not a number
      "allreduce,0,10,ring,ll,four,-1,-1\n"             // 6: channels not a number
      "allreduce,0,10,ring,ll,-1,-2,-1\n"               // 7: nNodes below -1
      "allreduce,100,10,ring,ll,-1,-1,-1\n"             // 8: min > max
      "allreduce,0,10,ring,ll,-1,-1,-1,-1,2\n"          // 9: regBuff 2
      "allreduce,0,10,ring,ll,-1,-1,-1,\n"              // 10: empty numPipeOps
      "allreduce,0,99999999999999999999999,ring,ll,-1,-1,-1\n"  // 11: overflow
      "allgather,5,6,tree,simple,1,1,1\n";              // 12: good
  EXPECT_EQ(Parse(text, &r, &w), 10);
  ASSERT_EQ(r.n, 2u);
  EXPECT_EQ(r.v[0].line, 3);
  EXPECT_EQ(r.v[1].line, 12);
  EXPECT_EQ(w.lines(), (std::vector<int>{1, 2, 4, 5, 6, 7, 8, 9, 10, 11}));
  for (auto& x : w.v) EXPECT_NE(x.second.find("skipped"), std::string::npos) << x.second;
  braid_rules_free(&r);
}

TEST(TunerRules, LongLineWarnedButKept) {
  braid_rules r;
  Warnings w;
  std::string line = "allreduce," + std::string(300, ' ') + "0,10,ring,ll,-1,-1,-1\n";
  EXPECT_EQ(Parse(line, &r, &w), 1);
  EXPECT_EQ(r.n, 1u);
  ASSERT_EQ(w.v.size(), 1u);
  EXPECT_EQ(w.v[0].first, 1);
  braid_rules_free(&r);
}

TEST(TunerRules, LoadFromFile) {
  TempFile f("# rules\nallreduce,0,1024,tree,ll,2,-1,-1\nbogus line\n");
  braid_rules r;
  Warnings w;
  EXPECT_EQ(braid_rules_load(f.path().c_str(), &r, CollectWarning, &w), 1);
  ASSERT_EQ(r.n, 1u);
  EXPECT_EQ(r.v[0].line, 2);
  ASSERT_EQ(w.v.size(), 1u);
  EXPECT_EQ(w.v[0].first, 3);
  braid_rules_free(&r);

  Warnings w2;
  EXPECT_EQ(braid_rules_load("/nonexistent/braid/nccl_tuner.conf", &r, CollectWarning, &w2), 0);
  EXPECT_EQ(r.n, 0u);
  EXPECT_TRUE(w2.v.empty()) << "a missing file is not an error";
  braid_rules_free(&r);
}

// ---- Matching -------------------------------------------------------------------------------

braid_rule_query Q(int coll, uint64_t nbytes, int nnodes = 2, int nranks = 16, int pipe = 1,
                   int reg = 0) {
  return braid_rule_query{coll, nbytes, nnodes, nranks, pipe, reg};
}

int MatchLine(const braid_rules& r, const braid_rule_query& q) {
  const braid_rule* x = braid_rules_match(&r, &q);
  return x ? x->line : 0;
}

TEST(TunerMatch, FirstMatchWinsInclusiveBoundsWildcards) {
  braid_rules r;
  Warnings w;
  ASSERT_EQ(Parse("allreduce,0,1023,tree,ll,-1,-1,-1\n"       // 1
                  "allreduce,1024,1024,ring,ll128,-1,-1,-1\n"  // 2
                  "allreduce,0,65536,ring,simple,-1,-1,-1\n"   // 3
                  "allgather,0,65536,ring,simple,-1,4,-1\n"    // 4: only nNodes 4
                  "allgather,0,65536,tree,simple,-1,-1,32\n"   // 5: only nRanks 32
                  "allgather,0,65536,tree,ll,-1,2,16\n",       // 6
                  &r, &w),
            0);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncAllReduce, 0)), 1);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncAllReduce, 1023)), 1);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncAllReduce, 1024)), 2);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncAllReduce, 1025)), 3);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncAllReduce, 65536)), 3);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncAllReduce, 65537)), 0);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncBroadcast, 10)), 0);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncAllGather, 10, 2, 16)), 6);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncAllGather, 10, 4, 16)), 4);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncAllGather, 10, 2, 32)), 5);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncAllGather, 10, 3, 32)), 5);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncAllGather, 10, 3, 8)), 0);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncSendRecv, 10)), 0);
  braid_rules_free(&r);
}

TEST(TunerMatch, PipeOpsAndRegBuff) {
  braid_rules r;
  Warnings w;
  ASSERT_EQ(Parse("reduce,0,100,tree,ll,-1,-1,-1,2,1\n"    // 1: 2 pipe ops, registered
                  "reduce,0,100,tree,ll,-1,-1,-1,-1,0\n"   // 2: unregistered
                  "reduce,0,100,tree,ll,-1,-1,-1,4\n"      // 3: 4 pipe ops
                  "reduce,0,100,ring,ll,-1,-1,-1\n",       // 4: anything
                  &r, &w),
            0);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncReduce, 5, 2, 16, 2, 1)), 1);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncReduce, 5, 2, 16, 2, 0)), 2);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncReduce, 5, 2, 16, 4, 1)), 3);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncReduce, 5, 2, 16, 1, 1)), 4);
  // Unknown regBuff (ABI v2/v3): only rules accepting any regBuff.
  EXPECT_EQ(MatchLine(r, Q(ncclFuncReduce, 5, 2, 16, 2, -1)), 4);
  EXPECT_EQ(MatchLine(r, Q(ncclFuncReduce, 5, 2, 16, 4, -1)), 3);
  braid_rules_free(&r);
}

// ---- The exported tables, through dlopen ---------------------------------------------------

std::mutex g_log_mu;
std::vector<std::string> g_log;
void TestLogger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log.push_back(std::string(level == NCCL_LOG_WARN ? "WARN " : "INFO ") + msg);
}
void ClearLog() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log.clear();
}
bool LogHas(const std::string& a, const std::string& b = "") {
  std::lock_guard<std::mutex> lock(g_log_mu);
  for (auto& l : g_log)
    if (l.find(a) != std::string::npos && l.find(b) != std::string::npos) return true;
  return false;
}

const char* kRules =
    "# braid tuner test rules\n"
    "allreduce,0,1024,tree,ll,-1,-1,-1\n"          // 2: tree/ll, NCCL's channels
    "allreduce,1025,65536,ring,ll128,4,-1,-1\n"    // 3: ring/ll128 on 4 channels
    "allreduce,65537,1048576,pat,simple,2,-1,-1\n"  // 4: pat (absent in 2.22's 6-algo table)
    "allgather,0,-1,nvls,simple,3,-1,-1\n"          // 5: nvls/simple, 3 channels
    "reduce,0,-1,collnet_direct,simple,5,-1,-1\n"   // 6: collnet_direct/simple, 5 channels
    "broadcast,0,-1,tree,simple,6,-1,-1,-1,1\n";    // 7: only registered buffers

// A cost table as NCCL fills it: some entries IGNORE, the rest positive costs.
void FillTable(float* t, int numAlgo, int numProto) {
  for (int a = 0; a < numAlgo; a++)
    for (int p = 0; p < numProto; p++) t[a * numProto + p] = 10.0f + a * 3 + p;
  t[NCCL_ALGO_COLLNET_DIRECT * numProto + NCCL_PROTO_SIMPLE] = kIgnore;  // no CollNet
  t[NCCL_ALGO_COLLNET_CHAIN * numProto + NCCL_PROTO_SIMPLE] = kIgnore;
  t[NCCL_ALGO_NVLS * numProto + NCCL_PROTO_LL] = kIgnore;
}

struct Lib {
  void* h = nullptr;
  explicit Lib(const std::string& path) { h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL); }
  ~Lib() {
    if (h) dlclose(h);
  }
};

// Calls getCollInfo of any table version (3..6) with numAlgo x 3 and checks the outcome.
template <typename T>
ncclResult_t Ask(const T* tuner, void* ctx, int version, ncclFunc_t coll, size_t nbytes,
                 float* table, int numAlgo, int numProto, int regBuff, int* nch) {
  if constexpr (std::is_same<T, ncclTuner_v3_t>::value) {
    (void)version;
    (void)regBuff;
    return tuner->getCollInfo(ctx, coll, nbytes, 1, (float**)table, numAlgo, numProto, nch);
  } else {
    (void)version;
    return tuner->getCollInfo(ctx, coll, nbytes, 1, (float**)table, numAlgo, numProto, regBuff,
                              nch);
  }
}

template <typename T>
void* Init(const T* tuner, uint64_t commId, size_t nRanks, size_t nNodes) {
  void* ctx = nullptr;
  if constexpr (std::is_same<T, ncclTuner_v5_t>::value || std::is_same<T, ncclTuner_v6_t>::value) {
    ncclNvlDomainInfo_v5_t nvl = {1, 8, 8};
    ncclTunerConstants_v5_t constants;
    memset(&constants, 0, sizeof constants);
    constants.baseLatencies[1][2] = 7.5;
    EXPECT_EQ(tuner->init(&ctx, commId, nRanks, nNodes, TestLogger, &nvl, &constants),
              ncclSuccess);
    EXPECT_EQ(constants.baseLatencies[1][2], 7.5) << "constants left as NCCL set them";
  } else {
    (void)commId;
    EXPECT_EQ(tuner->init(nRanks, nNodes, TestLogger, &ctx), ncclSuccess);
  }
  return ctx;
}

template <typename T>
ncclResult_t Fini(const T* tuner, void* ctx) {
  if constexpr (std::is_same<T, ncclTuner_v5_t>::value || std::is_same<T, ncclTuner_v6_t>::value)
    return tuner->finalize(ctx);
  else
    return tuner->destroy(ctx);
}

// Runs one cost-table scenario; returns the table and nChannels after getCollInfo.
template <typename T>
void Scenario(const T* tuner, void* ctx, int version, ncclFunc_t coll, size_t nbytes, int numAlgo,
              int regBuff, int wantAlgo, int wantProto, int wantCh) {
  SCOPED_TRACE("v" + std::to_string(version) + " coll " + std::to_string(coll) + " bytes " +
               std::to_string(nbytes) + " numAlgo " + std::to_string(numAlgo));
  float mem[NCCL_NUM_ALGORITHMS * NCCL_NUM_PROTOCOLS + 4];
  for (float& f : mem) f = 123.0f;  // sentinel beyond the table
  const int numProto = NCCL_NUM_PROTOCOLS;
  FillTable(mem, numAlgo, numProto);
  float before[sizeof mem / sizeof mem[0]];
  memcpy(before, mem, sizeof mem);
  int nch = 0;
  EXPECT_EQ(Ask(tuner, ctx, version, coll, nbytes, mem, numAlgo, numProto, regBuff, &nch),
            ncclSuccess);
  for (int i = 0; i < (int)(sizeof mem / sizeof mem[0]); i++) {
    int a = i / numProto, p = i % numProto;
    if (a == wantAlgo && p == wantProto && i < numAlgo * numProto) {
      EXPECT_EQ(mem[i], 0.0f) << "chosen entry " << a << "/" << p;
    } else {
      EXPECT_EQ(mem[i], before[i]) << "entry " << i << " changed";
    }
    if (before[i] == kIgnore) {
      EXPECT_EQ(mem[i], kIgnore) << "IGNORE turned on at " << i;
    }
  }
  EXPECT_EQ(nch, wantCh);
}

template <typename T>
void TableVersion(int version) {
  Lib lib(TunerPath());
  if (!lib.h) {
    GTEST_SKIP() << "no tuner library at " << TunerPath() << ": " << dlerror();
  }
  std::string sym = "ncclTunerPlugin_v" + std::to_string(version);
  const T* tuner = static_cast<const T*>(dlsym(lib.h, sym.c_str()));
  ASSERT_NE(tuner, nullptr) << sym;
  EXPECT_STREQ(tuner->name, "braid");
  if constexpr (std::is_same<T, ncclTuner_v6_t>::value) {
    EXPECT_EQ(tuner->getChunkSize, nullptr);
  }

  TempFile f(kRules);
  ConfigEnv env(f.path());
  ClearLog();
  void* ctx = Init(tuner, 0x1234, 16, 2);
  ASSERT_NE(ctx, nullptr);
  EXPECT_TRUE(LogHas("ncclTunerPlugin_v" + std::to_string(version), "6 rules loaded"));
  EXPECT_TRUE(LogHas(f.path()));
  const int none = -1;
  for (int numAlgo : {7, 6}) {
    // Matching rule, NCCL's channels kept.
    Scenario(tuner, ctx, version, ncclFuncAllReduce, 1024, numAlgo, 0, NCCL_ALGO_TREE,
             NCCL_PROTO_LL, 0);
    // Matching rule with channels.
    Scenario(tuner, ctx, version, ncclFuncAllReduce, 1025, numAlgo, 0, NCCL_ALGO_RING,
             NCCL_PROTO_LL128, 4);
    // PAT: in the 7-algorithm table only; outside a 6-algorithm one (nothing changes).
    Scenario(tuner, ctx, version, ncclFuncAllReduce, 100000, numAlgo, 0,
             numAlgo == 7 ? NCCL_ALGO_PAT : none, numAlgo == 7 ? NCCL_PROTO_SIMPLE : none,
             numAlgo == 7 ? 2 : 0);
    // No rule: nothing changes, nChannels untouched.
    Scenario(tuner, ctx, version, ncclFuncAllReduce, 2000000, numAlgo, 0, none, none, 0);
    Scenario(tuner, ctx, version, ncclFuncReduceScatter, 10, numAlgo, 0, none, none, 0);
    // nvls/simple available.
    Scenario(tuner, ctx, version, ncclFuncAllGather, 10, numAlgo, 0, NCCL_ALGO_NVLS,
             NCCL_PROTO_SIMPLE, 3);
    // collnet_direct/simple is IGNORE: stays off, channels untouched.
    Scenario(tuner, ctx, version, ncclFuncReduce, 10, numAlgo, 0, none, none, 0);
    // regBuff rule: v3 cannot know regBuff, so only v4+ match it.
    bool knowsReg = version >= 4;
    Scenario(tuner, ctx, version, ncclFuncBroadcast, 10, numAlgo, 1,
             knowsReg ? NCCL_ALGO_TREE : none, knowsReg ? NCCL_PROTO_SIMPLE : none,
             knowsReg ? 6 : 0);
    Scenario(tuner, ctx, version, ncclFuncBroadcast, 10, numAlgo, 0, none, none, 0);
  }
  // A table too narrow for the rule's protocol, and no table at all: no error, no change.
  float narrow[7 * 2];
  for (float& x : narrow) x = 5.0f;
  int nch = 0;
  EXPECT_EQ(Ask(tuner, ctx, version, ncclFuncAllReduce, 100000, narrow, 7, 2, 0, &nch),
            ncclSuccess);
  for (float x : narrow) EXPECT_EQ(x, 5.0f);
  EXPECT_EQ(nch, 0);
  EXPECT_EQ(Ask(tuner, ctx, version, ncclFuncAllReduce, 1025, nullptr, 7, 3, 0, &nch),
            ncclSuccess);
  EXPECT_EQ(Ask(tuner, ctx, version, ncclFuncAllReduce, 1025, nullptr, 0, 0, 0, nullptr),
            ncclSuccess);
  EXPECT_TRUE(LogHas("INFO", "rule " + f.path() + ":2")) << "the rule that applied is logged";
  EXPECT_EQ(Fini(tuner, ctx), ncclSuccess);

  // A missing or bad rules file never fails init; it tunes nothing.
  for (const std::string& cfg :
       {std::string("/nonexistent/braid.conf"), std::string("\x01garbage,\n,,,\n")}) {
    TempFile bad(cfg);
    ConfigEnv env2(cfg[0] == '/' ? cfg : bad.path());
    void* c2 = Init(tuner, 7, 16, 2);
    ASSERT_NE(c2, nullptr);
    Scenario(tuner, c2, version, ncclFuncAllReduce, 1024, 7, 0, none, none, 0);
    EXPECT_EQ(Fini(tuner, c2), ncclSuccess);
  }
}

TEST(TunerAbi, V3) { TableVersion<ncclTuner_v3_t>(3); }
TEST(TunerAbi, V4) { TableVersion<ncclTuner_v4_t>(4); }
TEST(TunerAbi, V5) { TableVersion<ncclTuner_v5_t>(5); }
TEST(TunerAbi, V6) { TableVersion<ncclTuner_v6_t>(6); }

TEST(TunerAbi, V2) {
  Lib lib(TunerPath());
  if (!lib.h) {
    GTEST_SKIP() << "no tuner library at " << TunerPath() << ": " << dlerror();
  }
  auto* tuner = static_cast<const ncclTuner_v2_t*>(dlsym(lib.h, "ncclTunerPlugin_v2"));
  ASSERT_NE(tuner, nullptr);
  EXPECT_STREQ(tuner->name, "braid");
  TempFile f(kRules);
  ConfigEnv env(f.path());
  void* ctx = Init(tuner, 0, 16, 2);
  ASSERT_NE(ctx, nullptr);
  struct Case {
    ncclFunc_t coll;
    size_t bytes;
    int collnet, nvls;
    int wantAlgo, wantProto, wantCh;
  };
  const int kA = 99, kP = 98;  // NCCL's prior choice, left alone when no rule applies
  // NCCL 2.21 runs a v2 answer unchecked, so only pairs it can certainly run are given, and a
  // rule's channel count never is (NCCL does not check it against the communicator's).
  const Case cases[] = {
      {ncclFuncAllReduce, 1024, 0, 0, NCCL_ALGO_TREE, NCCL_PROTO_LL, 0},
      {ncclFuncAllReduce, 4096, 0, 0, kA, kP, 0},     // LL128: hardware-dependent in NCCL
      {ncclFuncAllReduce, 100000, 1, 1, kA, kP, 0},  // PAT: not in v2's NCCL
      {ncclFuncAllReduce, 2000000, 1, 1, kA, kP, 0},  // no rule
      {ncclFuncAllGather, 10, 0, 0, kA, kP, 0},       // nvls without support
      {ncclFuncAllGather, 10, 0, 1, kA, kP, 0},       // nvls allgather: one node only (2 here)
      {ncclFuncReduce, 10, 0, 1, kA, kP, 0},          // collnet without support
      {ncclFuncReduce, 10, 1, 0, kA, kP, 0},          // reduce runs as a ring only
      {ncclFuncBroadcast, 10, 1, 1, kA, kP, 0},       // regBuff rule: unknown in v2
  };
  for (const Case& c : cases) {
    int algo = kA, proto = kP, nch = 0;
    EXPECT_EQ(tuner->getCollInfo(ctx, c.coll, c.bytes, c.collnet, c.nvls, 1, &algo, &proto, &nch),
              ncclSuccess);
    EXPECT_EQ(algo, c.wantAlgo) << c.coll << " " << c.bytes;
    EXPECT_EQ(proto, c.wantProto) << c.coll << " " << c.bytes;
    EXPECT_EQ(nch, c.wantCh) << c.coll << " " << c.bytes;
  }
  EXPECT_EQ(tuner->getCollInfo(ctx, ncclFuncAllReduce, 10, 0, 0, 1, nullptr, nullptr, nullptr),
            ncclSuccess);
  EXPECT_EQ(tuner->destroy(ctx), ncclSuccess);
}

// ---- Every rank chooses the same -------------------------------------------------------------

// The answers of one context to a fixed set of questions, as a flat list.
template <typename AskFn>
std::vector<float> Answers(AskFn ask) {
  std::vector<float> out;
  const size_t sizes[] = {0, 1, 1023, 1024, 1025, 65536, 65537, 100000, 1 << 20, 1 << 30};
  for (int coll = 0; coll < NCCL_NUM_FUNCTIONS; coll++)
    for (size_t bytes : sizes)
      for (int reg = 0; reg <= 1; reg++) {
        float t[NCCL_NUM_ALGORITHMS * NCCL_NUM_PROTOCOLS];
        FillTable(t, NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS);
        int nch = 0;
        ask(coll, bytes, reg, t, &nch);
        out.insert(out.end(), t, t + NCCL_NUM_ALGORITHMS * NCCL_NUM_PROTOCOLS);
        out.push_back((float)nch);
      }
  return out;
}

TEST(TunerRanks, SixteenContextsAgree) {
  TempFile f(kRules);
  ConfigEnv env(f.path());
  std::vector<braid_tuner*> ts(16);
  for (int i = 0; i < 16; i++) {
    braid_tuner_create(&ts[i], 5, 0x9e3779b97f4a7c15ull * (i + 1), 16, 2, nullptr);
    ASSERT_NE(ts[i], nullptr);
    EXPECT_EQ(braid_tuner_rule_count(ts[i]), 6u);
  }
  std::vector<float> first;
  for (int round = 0; round < 2; round++)
    for (int i = 0; i < 16; i++) {
      auto a = Answers([&](int coll, size_t bytes, int reg, float* t, int* nch) {
        braid_tuner_apply_table(ts[i], coll, bytes, 1, reg, t, NCCL_NUM_ALGORITHMS,
                                NCCL_NUM_PROTOCOLS, nch, nullptr);
      });
      if (first.empty()) first = a;
      EXPECT_EQ(a, first) << "context " << i << " round " << round;
    }
  // The rules do something, so agreement is not vacuous.
  std::vector<float> untouched = Answers([](int, size_t, int, float*, int*) {});
  EXPECT_NE(first, untouched);
  for (braid_tuner* t : ts) braid_tuner_destroy(t);
}

// The rank-agreement gate (agree.h): files decide only when pinned.
class PinEnv {
 public:
  explicit PinEnv(const char* v) {
    const char* old = getenv("BRAID_TUNER_PIN");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("BRAID_TUNER_PIN", v, 1);
  }
  ~PinEnv() {
    if (had_) setenv("BRAID_TUNER_PIN", old_.c_str(), 1);
    else unsetenv("BRAID_TUNER_PIN");
  }

 private:
  bool had_;
  std::string old_;
};

TEST(TunerAgree, UnpinnedFilesAreLeftOut) {
  TempFile f(kRules);
  ConfigEnv env(f.path(), /*pin=*/false);
  braid_tuner* t = nullptr;
  EXPECT_EQ(braid_tuner_create(&t, 5, 1, 16, 2, nullptr), 0);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(braid_tuner_rule_count(t), 0u) << "an unpinned rules file must not decide";
  EXPECT_EQ(braid_tuner_inputs_fingerprint(t), BRAID_TUNER_FP_OFF);
  braid_tuner_destroy(t);
}

TEST(TunerAgree, PinnedFilesDecide) {
  TempFile f(kRules);
  ConfigEnv env(f.path());
  braid_tuner* t = nullptr;
  EXPECT_EQ(braid_tuner_create(&t, 5, 1, 16, 2, nullptr), 0);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(braid_tuner_rule_count(t), 6u);
  EXPECT_NE(braid_tuner_inputs_fingerprint(t), BRAID_TUNER_FP_OFF);
  braid_tuner_destroy(t);
}

TEST(TunerAgree, OtherFilesOrBadPinRefuseInit) {
  TempFile f(kRules), g("allreduce,0,-1,ring,simple,-1,-1,-1\n");
  std::string pin;
  {
    ConfigEnv env(f.path());
    pin = getenv("BRAID_TUNER_PIN");
  }
  ConfigEnv other(g.path(), /*pin=*/false);
  for (const char* v : {pin.c_str(), "xyz", "0x12345678", "00000000000000000"}) {
    PinEnv p(v);
    braid_tuner* t = reinterpret_cast<braid_tuner*>(0x1);
    EXPECT_EQ(braid_tuner_create(&t, 5, 1, 16, 2, nullptr), -1) << v;
    EXPECT_EQ(t, nullptr) << v;
  }
  // Through the ABI: NCCL sees an error from init and fails the communicator.
  Lib lib(TunerPath());
  if (!lib.h) GTEST_SKIP() << "no tuner library at " << TunerPath() << ": " << dlerror();
  auto* v5 = static_cast<const ncclTuner_v5_t*>(dlsym(lib.h, "ncclTunerPlugin_v5"));
  auto* v1 = static_cast<const ncclTuner_v1_t*>(dlsym(lib.h, "ncclTunerPlugin_v1"));
  ASSERT_NE(v5, nullptr);
  ASSERT_NE(v1, nullptr);
  PinEnv p(pin.c_str());
  void* ctx = nullptr;
  ncclTunerConstants_v5_t constants;
  memset(&constants, 0, sizeof constants);
  ncclNvlDomainInfo_v5_t nvl = {1, 8, 8};
  EXPECT_EQ(v5->init(&ctx, 1, 16, 2, TestLogger, &nvl, &constants), ncclInvalidUsage);
  EXPECT_EQ(v1->init(16, 2, TestLogger), ncclInvalidUsage);
  EXPECT_EQ(v1->destroy(), ncclSuccess);  // NCCL 2.19/2.20 destroy even after a failed init
}

// v1 (NCCL 2.19, 2.20): one process-wide context; rules naming a node or rank count never
// match, since getCollInfo does not say which communicator asks.
TEST(TunerAbi, V1) {
  Lib lib(TunerPath());
  if (!lib.h) GTEST_SKIP() << "no tuner library at " << TunerPath() << ": " << dlerror();
  auto* tuner = static_cast<const ncclTuner_v1_t*>(dlsym(lib.h, "ncclTunerPlugin_v1"));
  ASSERT_NE(tuner, nullptr);
  EXPECT_STREQ(tuner->name, "braid");
  TempFile f(
      "allreduce,0,1024,ring,simple,-1,2,-1\n"   // names 2 nodes: never matches under v1
      "allreduce,0,1024,tree,ll,8,-1,-1\n"       // matches; its channel count is not applied
      "allgather,0,-1,ring,simple,-1,-1,-1\n");
  ConfigEnv env(f.path());
  ASSERT_EQ(tuner->init(16, 2, TestLogger), ncclSuccess);  // two communicators
  ASSERT_EQ(tuner->init(8, 1, TestLogger), ncclSuccess);
  int algo = -1, proto = -1, nch = 0;
  EXPECT_EQ(tuner->getCollInfo(ncclFuncAllReduce, 512, 0, 0, 1, &algo, &proto, &nch), ncclSuccess);
  EXPECT_EQ(algo, NCCL_ALGO_TREE);
  EXPECT_EQ(proto, NCCL_PROTO_LL);
  EXPECT_EQ(nch, 0);
  algo = proto = -1;
  EXPECT_EQ(tuner->getCollInfo(ncclFuncAllGather, 1 << 20, 0, 0, 1, &algo, &proto, &nch), ncclSuccess);
  EXPECT_EQ(algo, NCCL_ALGO_RING);
  EXPECT_EQ(proto, NCCL_PROTO_SIMPLE);
  EXPECT_EQ(tuner->destroy(), ncclSuccess);
  algo = proto = -1;  // one communicator left: still tuned
  EXPECT_EQ(tuner->getCollInfo(ncclFuncAllReduce, 512, 0, 0, 1, &algo, &proto, &nch), ncclSuccess);
  EXPECT_EQ(algo, NCCL_ALGO_TREE);
  EXPECT_EQ(tuner->destroy(), ncclSuccess);
  algo = proto = -1;  // none left: nothing decided
  EXPECT_EQ(tuner->getCollInfo(ncclFuncAllReduce, 512, 0, 0, 1, &algo, &proto, &nch), ncclSuccess);
  EXPECT_EQ(algo, -1);
  EXPECT_EQ(proto, -1);
}

TEST(TunerRanks, SixteenContextsAgreeThroughV5) {
  Lib lib(TunerPath());
  if (!lib.h) {
    GTEST_SKIP() << "no tuner library at " << TunerPath() << ": " << dlerror();
  }
  auto* tuner = static_cast<const ncclTuner_v5_t*>(dlsym(lib.h, "ncclTunerPlugin_v5"));
  ASSERT_NE(tuner, nullptr);
  TempFile f(kRules);
  ConfigEnv env(f.path());
  std::vector<void*> ctxs;
  for (int i = 0; i < 16; i++) ctxs.push_back(Init(tuner, 1000 + i, 16, 2));
  std::vector<float> first;
  for (void* ctx : ctxs) {
    auto a = Answers([&](int coll, size_t bytes, int reg, float* t, int* nch) {
      EXPECT_EQ(tuner->getCollInfo(ctx, (ncclFunc_t)coll, bytes, 1, (float**)t,
                                   NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, reg, nch),
                ncclSuccess);
    });
    if (first.empty()) first = a;
    EXPECT_EQ(a, first);
  }
  for (void* ctx : ctxs) EXPECT_EQ(tuner->finalize(ctx), ncclSuccess);
}

}  // namespace
