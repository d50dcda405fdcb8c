// The tuner's advice (tuner_plugin/advice.c): fake telemetry snapshots in, the advice text out
// (sustained slow rails named, short dips not, no telemetry handled), the file written through
// BRAID_TUNER_ADVICE, the tick's sampling cadence; and braid-tune's merge of advice files into
// a health file (tools/tune/health.c), checked with the tuner's own health parser.
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

extern "C" {
#include "../../tools/tune/health.h"
#include "advice.h"
#include "calib.h"
#include "param.h"
}

namespace {

struct FakeRail {
  int dev;
  std::string nic, peer;
  double gbps;      // est_bps / 1e9
  uint64_t bytes;
  int state;
};

// The snapshots the fake source returns, one per call (the last one repeats).
std::vector<std::vector<FakeRail>> g_script;
size_t g_calls;
int g_fail;

int FakeSource(braid_snapshot_v1* out, uint32_t max_rails) {
  if (g_fail) return -1;
  size_t i = g_calls < g_script.size() ? g_calls : g_script.size() - 1;
  g_calls++;
  const std::vector<FakeRail>& rails = g_script.empty() ? std::vector<FakeRail>() : g_script[i];
  out->version = BRAID_SNAPSHOT_VERSION_1;
  out->total = (uint32_t)rails.size();
  out->nrails = 0;
  out->taken_ns = 1000000000ull + (uint64_t)i * 5000000000ull;  // 5 s apart
  for (const FakeRail& f : rails) {
    if (out->nrails == max_rails) break;
    braid_snapshot_rail_v1* r = &out->rail[out->nrails++];
    memset(r, 0, sizeof *r);
    r->dev = f.dev;
    r->rail = (int32_t)out->nrails - 1;
    r->state = f.state;
    r->bytes = f.bytes;
    r->est_bps = (uint64_t)(f.gbps * 1e9);
    snprintf(r->peer, sizeof r->peer, "%s", f.peer.c_str());
    snprintf(r->nic, sizeof r->nic, "%s", f.nic.c_str());
  }
  return 0;
}

// Installs the fake source for one test, and restores the default (the net plugin) after.
class Advice : public ::testing::Test {
 protected:
  void SetUp() override {
    g_script.clear();
    g_calls = 0;
    g_fail = 0;
    braid_advice_set_source(FakeSource);
  }
  void TearDown() override { braid_advice_set_source(nullptr); }
};

std::string Text(const braid_advice* a) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(0, braid_advice_write(a, f));
  fclose(f);
  std::string s(buf, len);
  free(buf);
  return s;
}

const char kPeer[] = "10.0.0.2:5000";

// Two rails of one connection at 10 Gb/s; eth1 at `slow` Gb/s in snapshots [from, to).
void Script(int n, int from, int to, double slow) {
  for (int i = 0; i < n; i++) {
    uint64_t b = (uint64_t)(i + 1) << 30;
    g_script.push_back({{0, "eth0", kPeer, 10.0, b, 0},
                        {0, "eth1", kPeer, i >= from && i < to ? slow : 10.0, b, 0}});
  }
}

TEST_F(Advice, NamesARailSlowForFourSnapshots) {
  Script(4, 0, 4, 2.0);  // 20% of the best rail, 4 snapshots in a row
  braid_advice* a = braid_advice_create(0x1234, 8, 2);
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 4; i++) braid_advice_sample_now(a);
  std::string t = Text(a);
  EXPECT_EQ(0u, t.find("braid-advice 1\n")) << t;
  EXPECT_NE(t.find("\nsamples 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\nseconds 15.000\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\nsend_gbps 12.000\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\nrail 0 eth0 10.0.0.2:5000 10.000 10.000 0 active\n"), std::string::npos)
      << t;
  EXPECT_NE(t.find("\nrail 0 eth1 10.0.0.2:5000 2.000 2.000 4 active\n"), std::string::npos)
      << t;
  EXPECT_NE(t.find("rail eth1 to 10.0.0.2:5000 delivered 20% of its connection's best rail "
                   "for 15 s"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("rail eth0 to"), std::string::npos) << t;
  braid_advice_finish(a);
}

TEST_F(Advice, ARailSlowForTwoSnapshotsIsNotNamed) {
  Script(6, 2, 4, 2.0);  // slow in snapshots 2 and 3 only
  braid_advice* a = braid_advice_create(1, 8, 2);
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 6; i++) braid_advice_sample_now(a);
  std::string t = Text(a);
  EXPECT_NE(t.find("\nrail 0 eth1 10.0.0.2:5000 10.000 2.000 2 active\n"), std::string::npos)
      << t;
  EXPECT_EQ(t.find("of its connection's best rail"), std::string::npos) << t;
  EXPECT_EQ(t.find("# slow:"), std::string::npos) << t;
  braid_advice_finish(a);
}

TEST_F(Advice, SlowRunsMustBeConsecutive) {
  // Slow in 0, 1, then fine, then slow in 3, 4: never three in a row.
  for (int i = 0; i < 5; i++)
    g_script.push_back({{0, "eth0", kPeer, 10.0, 0, 0},
                        {0, "eth1", kPeer, i == 2 ? 9.0 : 1.0, 0, 0}});
  braid_advice* a = braid_advice_create(1, 8, 2);
  for (int i = 0; i < 5; i++) braid_advice_sample_now(a);
  std::string t = Text(a);
  EXPECT_NE(t.find("rail 0 eth1 10.0.0.2:5000 1.000 1.000 2 active"), std::string::npos) << t;
  EXPECT_EQ(t.find("# slow:"), std::string::npos) << t;
  braid_advice_finish(a);
}

TEST_F(Advice, RailsOfOtherConnectionsAreNotCompared) {
  // One rail to each of two peers, one 10x slower: different connections, nothing slow.
  for (int i = 0; i < 5; i++)
    g_script.push_back({{0, "eth0", "10.0.0.2:5000", 10.0, 0, 0},
                        {0, "eth0", "10.0.0.3:5000", 1.0, 0, 3}});
  braid_advice* a = braid_advice_create(1, 8, 2);
  for (int i = 0; i < 5; i++) braid_advice_sample_now(a);
  std::string t = Text(a);
  EXPECT_EQ(t.find("# slow:"), std::string::npos) << t;
  EXPECT_NE(t.find("rail 0 eth0 10.0.0.3:5000 1.000 1.000 0 down"), std::string::npos) << t;
  braid_advice_finish(a);
}

TEST_F(Advice, LongRunsKeepAnEvenMedian) {
  // 1000 snapshots (the history is thinned past 256): 600 at 10 Gb/s, then 400 at 4 Gb/s.
  for (int i = 0; i < 1000; i++)
    g_script.push_back({{1, "ib0", kPeer, i < 600 ? 10.0 : 4.0, 0, 0}});
  braid_advice* a = braid_advice_create(1, 8, 2);
  for (int i = 0; i < 1000; i++) braid_advice_sample_now(a);
  std::string t = Text(a);
  EXPECT_NE(t.find("\nrail 1 ib0 10.0.0.2:5000 10.000 4.000 0 active\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\nsamples 1000\n"), std::string::npos) << t;
  braid_advice_finish(a);
}

TEST_F(Advice, NoNetPluginMeansNoTelemetryAndNoCrash) {
  braid_advice_set_source(nullptr);  // the real lookup: dlopen(RTLD_NOLOAD)
  void* loaded = dlopen("libnccl-net-braid.so", RTLD_NOW | RTLD_NOLOAD);
  braid_advice* a = braid_advice_create(1, 8, 2);
  ASSERT_NE(a, nullptr);
  braid_advice_tick(a);
  braid_advice_sample_now(a);
  std::string t = Text(a);
  EXPECT_EQ(0u, t.find("braid-advice 1\n")) << t;
  if (!loaded) {
    EXPECT_NE(t.find("\nsamples 0\n"), std::string::npos) << t;
    EXPECT_NE(t.find("# no telemetry"), std::string::npos) << t;
    EXPECT_EQ(t.find("\nrail "), std::string::npos) << t;
  } else {
    dlclose(loaded);  // another test left the net plugin loaded: its snapshot was used
  }
  braid_advice_finish(a);
  braid_advice_finish(nullptr);
  braid_advice_tick(nullptr);
  braid_advice_sample_now(nullptr);
}

TEST_F(Advice, FindsTheLoadedNetPluginBySoname) {
  const char* path = getenv("BRAID_PLUGIN_PATH");
  void* lib = dlopen(path && *path ? path : "build/libnccl-net-braid.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) GTEST_SKIP() << "no net plugin to load: " << dlerror();
  braid_advice_set_source(nullptr);
  braid_advice* a = braid_advice_create(1, 8, 2);
  braid_advice_sample_now(a);
  std::string t = Text(a);
  EXPECT_NE(t.find("\nsamples 1\n"), std::string::npos) << t;
  EXPECT_EQ(t.find("# no telemetry"), std::string::npos) << t;
  braid_advice_finish(a);
  dlclose(lib);
}

TEST_F(Advice, AFailingSourceIsNoTelemetry) {
  g_fail = 1;
  braid_advice* a = braid_advice_create(1, 8, 2);
  braid_advice_sample_now(a);
  std::string t = Text(a);
  EXPECT_NE(t.find("\nsamples 0\n"), std::string::npos) << t;
  EXPECT_EQ(t.find("\nrail "), std::string::npos) << t;
  braid_advice_finish(a);
}

// Sets an environment variable for one scope, re-reading braid's parameters.
class Env {
 public:
  Env(const char* name, const std::string& value) : name_(name) {
    setenv(name, value.c_str(), 1);
    braid_params_reload();
  }
  ~Env() {
    unsetenv(name_.c_str());
    braid_params_reload();
  }

 private:
  std::string name_;
};

std::string ReadFile(const std::string& path) {
  std::string s;
  FILE* f = fopen(path.c_str(), "r");
  if (!f) return s;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  fclose(f);
  return s;
}

TEST_F(Advice, FinishWritesTheFileAtomically) {
  char dir[] = "/tmp/braid-advice-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  char host[256] = "";
  gethostname(host, sizeof host);
  std::string expected = std::string(dir) + "/a-" + host + "-" + std::to_string(getpid()) + "%";
  {
    Env env("BRAID_TUNER_ADVICE", std::string(dir) + "/a-%h-%p%%");
    Script(4, 0, 4, 1.0);
    braid_advice* a = braid_advice_create(1, 8, 2);
    for (int i = 0; i < 3; i++) braid_advice_sample_now(a);
    braid_advice_finish(a);  // takes a fourth snapshot
  }
  std::string t = ReadFile(expected);
  EXPECT_EQ(0u, t.find("braid-advice 1\n")) << expected;
  EXPECT_NE(t.find("\nsamples 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("rail eth1 to 10.0.0.2:5000 delivered 10%"), std::string::npos) << t;
  // Only the file itself: no temporary left behind.
  int entries = 0;
  DIR* d = opendir(dir);
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') entries++;
  closedir(d);
  EXPECT_EQ(1, entries);
  unlink(expected.c_str());
  rmdir(dir);
}

TEST_F(Advice, TickSamplesOnlyEvery1024CallsAfterTheInterval) {
  Env env("BRAID_TUNER_ADVICE_INTERVAL_MS", "100");
  Script(1, 0, 0, 0);
  braid_advice* a = braid_advice_create(1, 8, 2);
  for (int i = 0; i < 4096; i++) braid_advice_tick(a);  // before the interval: nothing
  EXPECT_EQ(0u, g_calls);
  usleep(150 * 1000);
  for (int i = 0; i < 1023; i++) braid_advice_tick(a);  // calls 4097..5119: no clock read
  EXPECT_EQ(0u, g_calls);
  braid_advice_tick(a);  // the 5120th reads the clock: the interval has passed
  EXPECT_EQ(1u, g_calls);
  for (int i = 0; i < 4096; i++) braid_advice_tick(a);  // the interval has not passed again
  EXPECT_EQ(1u, g_calls);
  braid_advice_finish(a);
  EXPECT_EQ(2u, g_calls);
}

// ---- braid-tune health: advice files merged -------------------------------------------------

std::string AdviceText(const char* host, double send_gbps, int samples = 10, int slow_run = 0) {
  char buf[512];
  snprintf(buf, sizeof buf,
           "braid-advice 1\n# comment\nhost %s\nseconds 50.0\nsamples %d\nsend_gbps %.3f\n"
           "rail 0 eth0 10.0.0.9:1 %.3f %.3f %d active  # trailing comment\n",
           host, samples, send_gbps, send_gbps, send_gbps / 2, slow_run);
  return buf;
}

braid_tune_advice Parse(const std::string& text, const char* source = "a.advice") {
  braid_tune_advice a;
  char err[256];
  EXPECT_EQ(0, braid_tune_advice_parse(text.data(), text.size(), source, &a, err, sizeof err))
      << err;
  return a;
}

std::string ParseError(const std::string& text) {
  braid_tune_advice a;
  char err[256] = "";
  EXPECT_EQ(-1, braid_tune_advice_parse(text.data(), text.size(), "f.advice", &a, err, sizeof err))
      << text;
  return err;
}

std::string Merge(const std::vector<braid_tune_advice>& v, int* lines) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  char err[256] = "";
  *lines = braid_tune_health_merge(v.data(), v.size(), f, err, sizeof err);
  fclose(f);
  std::string s = *lines < 0 ? std::string(err) : std::string(buf, len);
  free(buf);
  return s;
}

TEST(AdviceHealthMerge, ReadsWhatTheTunerWrites) {
  g_script.clear();
  g_calls = 0;
  g_fail = 0;
  Script(4, 0, 4, 2.0);
  braid_advice_set_source(FakeSource);
  braid_advice* a = braid_advice_create(1, 8, 2);
  for (int i = 0; i < 4; i++) braid_advice_sample_now(a);
  std::string t = Text(a);
  braid_advice_finish(a);
  braid_advice_set_source(nullptr);
  braid_tune_advice p = Parse(t);
  EXPECT_EQ(4u, p.samples);
  EXPECT_DOUBLE_EQ(12.0, p.send_gbps);
  EXPECT_EQ(2u, p.nrails);
  EXPECT_EQ(1u, p.nslow);
  EXPECT_STREQ("eth1 to 10.0.0.2:5000", p.slowest);
}

TEST(AdviceHealthMerge, SlowHostIsRelativeToTheMedianHost) {
  // h0 has two processes (mean 20), h1 20, h2 5 (a quarter), h3 no telemetry.
  std::vector<braid_tune_advice> v = {Parse(AdviceText("h2", 5.0, 10, 4), "h2.advice"),
                                      Parse(AdviceText("h0", 22.0), "h0-1.advice"),
                                      Parse(AdviceText("h0", 18.0), "h0-2.advice"),
                                      Parse(AdviceText("h1", 20.0), "h1.advice"),
                                      Parse("braid-advice 1\nhost h3\nseconds 0\nsamples 0\n"
                                            "send_gbps 0\n",
                                            "h3.advice")};
  int lines = 0;
  std::string h = Merge(v, &lines);
  ASSERT_EQ(3, lines) << h;
  EXPECT_EQ(0u, h.find("braid-health 1\n")) << h;
  EXPECT_NE(h.find("h0-2.advice"), std::string::npos) << h;  // the header names every input
  EXPECT_NE(h.find("h3.advice"), std::string::npos) << h;
  struct braid_health health;
  char err[256] = "";
  ASSERT_EQ(0, braid_health_parse(h.data(), h.size(), "merged", &health, nullptr, nullptr, err,
                                  sizeof err))
      << err << "\n" << h;
  ASSERT_EQ(3u, health.n);
  EXPECT_STREQ("h0", health.v[0].name);
  EXPECT_DOUBLE_EQ(1.0, health.v[0].rel_bw);
  EXPECT_STREQ("h1", health.v[1].name);
  EXPECT_DOUBLE_EQ(1.0, health.v[1].rel_bw);
  EXPECT_STREQ("h2", health.v[2].name);
  EXPECT_DOUBLE_EQ(0.25, health.v[2].rel_bw);
  const char* slow = nullptr;
  EXPECT_DOUBLE_EQ(0.25, braid_health_min(&health, &slow));
  braid_health_free(&health);
}

TEST(AdviceHealthMerge, TwoHostsCompareTheSlowWithTheFast) {
  std::vector<braid_tune_advice> v = {Parse(AdviceText("a", 10.0)), Parse(AdviceText("b", 5.0))};
  int lines = 0;
  std::string h = Merge(v, &lines);
  ASSERT_EQ(2, lines) << h;
  EXPECT_NE(h.find("\na 1.000"), std::string::npos) << h;
  EXPECT_NE(h.find("\nb 0.500"), std::string::npos) << h;
}

TEST(AdviceHealthMerge, NoTelemetryAnywhereIsAnError) {
  std::vector<braid_tune_advice> v = {
      Parse("braid-advice 1\nhost a\nseconds 0\nsamples 0\nsend_gbps 0\n")};
  int lines = 0;
  std::string err = Merge(v, &lines);
  EXPECT_EQ(-1, lines);
  EXPECT_NE(err.find("telemetry"), std::string::npos) << err;
}

TEST(AdviceHealthMerge, MalformedAdviceNamesFileAndLine) {
  const std::string head = "braid-advice 1\nhost a\nseconds 1\nsamples 2\nsend_gbps 3\n";
  EXPECT_NE(ParseError("braid-advice 2\n").find("f.advice:1:"), std::string::npos);
  EXPECT_NE(ParseError("braid-health 1\n").find("f.advice:1:"), std::string::npos);
  EXPECT_NE(ParseError("").find("f.advice: empty"), std::string::npos);
  EXPECT_NE(ParseError(head + "rail 0 eth0 p 1.0 1.0 0\n").find("f.advice:6:"),
            std::string::npos);
  EXPECT_NE(ParseError(head + "rail 0 eth0 p 1.0 x 0 active\n").find("f.advice:6:"),
            std::string::npos);
  EXPECT_NE(ParseError(head + "rail 0 eth0 p 1.0 1.0 0 sleepy\n").find("f.advice:6:"),
            std::string::npos);
  EXPECT_NE(ParseError(head + "rail -1 eth0 p 1.0 1.0 0 active\n").find("f.advice:6:"),
            std::string::npos);
  EXPECT_NE(ParseError(head + "colour blue\n").find("f.advice:6: unknown record"),
            std::string::npos);
  EXPECT_NE(ParseError(head + "host b\n").find("f.advice:6:"), std::string::npos);
  EXPECT_NE(ParseError("braid-advice 1\nhost a\nseconds -1\n").find("f.advice:3:"),
            std::string::npos);
  EXPECT_NE(ParseError("braid-advice 1\nhost a\nseconds 1\nsamples 1\n").find("send_gbps"),
            std::string::npos);
  EXPECT_NE(ParseError("braid-advice 1\nhost a\nseconds 0\nsamples 0\nsend_gbps 0\n"
                       "rail 0 e p 1 1 0 active\n")
                .find("f.advice:6:"),
            std::string::npos);
  EXPECT_NE(ParseError(std::string("braid-advice 1\nhost a\0b\n", 24)).find("NUL"),
            std::string::npos);
}

}  // namespace
