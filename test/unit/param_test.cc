// The BRAID_* parameter registry: defaults, parsing, ranges, NCCL fallbacks, printing.
#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include "log.h"
#include "param.h"
}

namespace {

// Every variable name, straight from params.def (not through the registry under test).
const std::vector<std::string> &DefNames() {
  static const std::vector<std::string> names = {
#define BRAID_PARAM(id, type, def, min, max, fallback, doc) "BRAID_" #id,
#include "params.def"
#undef BRAID_PARAM
  };
  return names;
}

const std::vector<std::string> &FallbackNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    const char *fb[] = {
#define BRAID_PARAM(id, type, def, min, max, fallback, doc) fallback,
#include "params.def"
#undef BRAID_PARAM
    };
    for (const char *f : fb)
      if (f) v.push_back(f);
    return v;
  }();
  return names;
}

// Warnings are captured through the logger hook NCCL would install.  The hook cannot be
// uninstalled, so it stays thread-safe and only records while a ParamTest is running.
std::mutex g_log_mu;
bool g_capture = false;
std::string g_log_buf;
void CaptureLogger(ncclDebugLogLevel level, unsigned long, const char *file, int line,
                   const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  {
    std::lock_guard<std::mutex> lock(g_log_mu);
    if (g_capture && level == NCCL_LOG_WARN) g_log_buf += std::string(msg) + "\n";
  }
  if (level == NCCL_LOG_WARN)
    fprintf(stderr, "[log %d] %s:%d %s\n", (int)level, file, line, msg);
}
void StartCapture(bool on) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_capture = on;
  g_log_buf.clear();
}
std::string Captured() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  return g_log_buf;
}

// Saves every BRAID_* variable and its NCCL fallback, clears them, and restores them afterwards.
class ParamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> all = DefNames();
    all.insert(all.end(), FallbackNames().begin(), FallbackNames().end());
    for (const std::string &n : all) {
      const char *v = getenv(n.c_str());
      saved_[n] = v ? std::make_pair(true, std::string(v)) : std::make_pair(false, std::string());
      unsetenv(n.c_str());
    }
    braid_log_set_logger(CaptureLogger);
    StartCapture(true);
    ASSERT_EQ(ncclSuccess, braid_params_reload());
  }
  void TearDown() override {
    for (const auto &kv : saved_) {
      if (kv.second.first) setenv(kv.first.c_str(), kv.second.second.c_str(), 1);
      else unsetenv(kv.first.c_str());
    }
    StartCapture(false);
    braid_params_reload();
  }
  // Sets name=value, reloads, and returns the reload result.
  ncclResult_t Load(const char *name, const char *value) {
    setenv(name, value, 1);
    StartCapture(true);
    return braid_params_reload();
  }

 private:
  std::map<std::string, std::pair<bool, std::string>> saved_;
};

TEST_F(ParamTest, RegistryMatchesParamsDef) {
  ASSERT_EQ((size_t)BRAID_P_COUNT, DefNames().size());
  for (int i = 0; i < BRAID_P_COUNT; i++) {
    const struct braid_param_def *d = braid_param_def((braid_param_id)i);
    ASSERT_NE(nullptr, d);
    EXPECT_EQ(DefNames()[i], d->name);
    EXPECT_NE(nullptr, d->doc);
    EXPECT_NE('\0', d->doc[0]) << d->name << " has no documentation";
  }
  EXPECT_EQ(nullptr, braid_param_def(BRAID_P_COUNT));
}

TEST_F(ParamTest, DefaultsWhenUnset) {
  EXPECT_STREQ("", braid_param_str(BRAID_P_SOCKET_IFNAME));
  EXPECT_STREQ("", braid_param_str(BRAID_P_SOCKET_FAMILY));
  EXPECT_EQ(1, braid_param_int(BRAID_P_NSTREAMS));
  EXPECT_EQ(512 * 1024, braid_param_int(BRAID_P_CHUNK_BYTES));
  EXPECT_EQ(0, braid_param_int(BRAID_P_SOCK_BUF_BYTES));
  EXPECT_EQ(8, braid_param_int(BRAID_P_MAX_RECVS));
  EXPECT_EQ(60000, braid_param_int(BRAID_P_TIMEOUT_MS));
  EXPECT_EQ(256ll << 20, braid_param_int(BRAID_P_MAX_UNEXPECTED_BYTES));
  // Every default is itself valid and is what the registry reports.
  for (int i = 0; i < BRAID_P_COUNT; i++) {
    const struct braid_param_def *d = braid_param_def((braid_param_id)i);
    int64_t v = -12345;
    char err[256] = "";
    ASSERT_EQ(0, braid_param_parse(d, d->def, &v, err, sizeof err)) << d->name << ": " << err;
    if (d->type != BRAID_PARAM_STR) {
      EXPECT_EQ(v, braid_param_int((braid_param_id)i)) << d->name;
    } else {
      EXPECT_STREQ(d->def, braid_param_str((braid_param_id)i)) << d->name;
    }
  }
  EXPECT_EQ("", Captured());
}

TEST_F(ParamTest, ValidIntegers) {
  ASSERT_EQ(ncclSuccess, Load("BRAID_NSTREAMS", "4"));
  EXPECT_EQ(4, braid_param_int(BRAID_P_NSTREAMS));
  EXPECT_STREQ("4", braid_param_str(BRAID_P_NSTREAMS));
  ASSERT_EQ(ncclSuccess, Load("BRAID_NSTREAMS", "16"));
  EXPECT_EQ(16, braid_param_int(BRAID_P_NSTREAMS));
  ASSERT_EQ(ncclSuccess, Load("BRAID_NSTREAMS", "1"));
  EXPECT_EQ(1, braid_param_int(BRAID_P_NSTREAMS));
  ASSERT_EQ(ncclSuccess, Load("BRAID_NSTREAMS", "0x10"));
  EXPECT_EQ(16, braid_param_int(BRAID_P_NSTREAMS));
  ASSERT_EQ(ncclSuccess, Load("BRAID_TIMEOUT_MS", "86400000"));
  EXPECT_EQ(86400000, braid_param_int(BRAID_P_TIMEOUT_MS));
  EXPECT_EQ("", Captured());
}

// A leading zero is not octal (issue 19 item 13): 060000 ms is a minute, not 24576 ms.
TEST_F(ParamTest, LeadingZeroIsDecimal) {
  ASSERT_EQ(ncclSuccess, Load("BRAID_TIMEOUT_MS", "060000")) << Captured();
  EXPECT_EQ(60000, braid_param_int(BRAID_P_TIMEOUT_MS));
  ASSERT_EQ(ncclSuccess, Load("BRAID_NSTREAMS", "010"));
  EXPECT_EQ(10, braid_param_int(BRAID_P_NSTREAMS));
  ASSERT_EQ(ncclSuccess, Load("BRAID_NSTREAMS", "09")) << "not an invalid octal digit";
  EXPECT_EQ(9, braid_param_int(BRAID_P_NSTREAMS));
  ASSERT_EQ(ncclSuccess, Load("BRAID_SOCK_BUF_BYTES", "064K"));
  EXPECT_EQ(64 << 10, braid_param_int(BRAID_P_SOCK_BUF_BYTES));
  EXPECT_EQ("", Captured());
}

TEST_F(ParamTest, SizeSuffixes) {
  struct {
    const char *text;
    int64_t want;
  } cases[] = {
      {"512K", 512 << 10}, {"1M", 1 << 20},     {"1GiB", 1 << 30},  {"4096", 4096},
      {"4k", 4096},        {"8KB", 8192},       {"2MiB", 2 << 20},  {"64M", 64 << 20},
      {"1m", 1 << 20},     {"16kib", 16 << 10}, {"0x1000", 4096},   {"1G", 1 << 30},
  };
  for (const auto &c : cases) {
    // SOCK_BUF_BYTES accepts [0, 1 GiB].
    ASSERT_EQ(ncclSuccess, Load("BRAID_SOCK_BUF_BYTES", c.text)) << c.text << "\n" << Captured();
    EXPECT_EQ(c.want, braid_param_int(BRAID_P_SOCK_BUF_BYTES)) << c.text;
    EXPECT_STREQ(c.text, braid_param_str(BRAID_P_SOCK_BUF_BYTES));
  }
  ASSERT_EQ(ncclSuccess, Load("BRAID_MAX_UNEXPECTED_BYTES", "1T"));
  EXPECT_EQ(1ll << 40, braid_param_int(BRAID_P_MAX_UNEXPECTED_BYTES));
  ASSERT_EQ(ncclSuccess, Load("BRAID_CHUNK_BYTES", "1M"));
  EXPECT_EQ(1 << 20, braid_param_int(BRAID_P_CHUNK_BYTES));
  EXPECT_EQ("", Captured());
}

// The warning for an invalid value names the variable and the value, and reload fails.
void ExpectRejected(ncclResult_t rc, const char *name, const char *value, const char *also) {
  const std::string log = Captured();
  EXPECT_EQ(ncclInvalidArgument, rc) << name << "=" << value;
  EXPECT_NE(std::string::npos, log.find(name)) << log;
  EXPECT_NE(std::string::npos, log.find(std::string("\"") + value + "\"")) << log;
  if (also) {
    EXPECT_NE(std::string::npos, log.find(also)) << log;
  }
}

TEST_F(ParamTest, OutOfRangeIsRejectedWithTheRange) {
  ExpectRejected(Load("BRAID_NSTREAMS", "17"), "BRAID_NSTREAMS", "17", "[1, 16]");
  ExpectRejected(Load("BRAID_NSTREAMS", "0"), "BRAID_NSTREAMS", "0", "[1, 16]");
  ExpectRejected(Load("BRAID_NSTREAMS", "-1"), "BRAID_NSTREAMS", "-1", "[1, 16]");
  unsetenv("BRAID_NSTREAMS");
  ExpectRejected(Load("BRAID_CHUNK_BYTES", "2K"), "BRAID_CHUNK_BYTES", "2K", "[4096, 67108864]");
  ExpectRejected(Load("BRAID_CHUNK_BYTES", "67108865"), "BRAID_CHUNK_BYTES", "67108865",
                 "[4096, 67108864]");
  ExpectRejected(Load("BRAID_CHUNK_BYTES", "1G"), "BRAID_CHUNK_BYTES", "1G", "[4096, 67108864]");
  unsetenv("BRAID_CHUNK_BYTES");
  ExpectRejected(Load("BRAID_TIMEOUT_MS", "99"), "BRAID_TIMEOUT_MS", "99", "[100, 86400000]");
  unsetenv("BRAID_TIMEOUT_MS");
  ExpectRejected(Load("BRAID_MAX_UNEXPECTED_BYTES", "2T"), "BRAID_MAX_UNEXPECTED_BYTES", "2T",
                 "[0, 1099511627776]");
}

TEST_F(ParamTest, GarbageIsRejected) {
  for (const char *v : {"abc", "4x", "1.5", "two", "1 6", "0x", "16 streams"}) {
    ExpectRejected(Load("BRAID_NSTREAMS", v), "BRAID_NSTREAMS", v, "integer");
  }
  unsetenv("BRAID_NSTREAMS");
  for (const char *v : {"1X", "1.5M", "M", "12KK", "1MB2", "lots", "1Mi", "1 K"}) {
    ExpectRejected(Load("BRAID_CHUNK_BYTES", v), "BRAID_CHUNK_BYTES", v, "size");
  }
  unsetenv("BRAID_CHUNK_BYTES");
  ExpectRejected(Load("BRAID_TIMEOUT_MS", "99999999999999999999999"), "BRAID_TIMEOUT_MS",
                 "99999999999999999999999", nullptr);
  unsetenv("BRAID_TIMEOUT_MS");
  ExpectRejected(Load("BRAID_MAX_UNEXPECTED_BYTES", "9000000000000T"), "BRAID_MAX_UNEXPECTED_BYTES",
                 "9000000000000T", nullptr);
}

// param.h promises "the variable, the value and the valid range" for every rejected value.
// Garbage currently gets "is not an integer" without the range.  Enable once fixed.
TEST_F(ParamTest, GarbageMessageIncludesTheRange) {
  ExpectRejected(Load("BRAID_NSTREAMS", "abc"), "BRAID_NSTREAMS", "abc", "[1, 16]");
  unsetenv("BRAID_NSTREAMS");
  ExpectRejected(Load("BRAID_CHUNK_BYTES", "lots"), "BRAID_CHUNK_BYTES", "lots", "[4096, 67108864]");
}

// A trailing space after a size is taken as a 2^50 multiplier: ' ' & ~0x20 == '\0', which
// strchr("KMGT", ...) finds at index 4.  "1 " must be rejected as garbage (or read as 1), never
// as 1 PiB.  Enable once fixed.
TEST_F(ParamTest, TrailingSpaceIsNotAPebibyteSuffix) {
  const struct braid_param_def big = {"BRAID_TEST_SIZE", BRAID_PARAM_SIZE, "0", 0, INT64_MAX, nullptr, "t"};
  int64_t v = 0;
  char err[256] = "";
  int rc = braid_param_parse(&big, "1 ", &v, err, sizeof err);
  EXPECT_TRUE(rc != 0 || v == 1) << "\"1 \" parsed as " << v;
  rc = braid_param_parse(&big, "3 B", &v, err, sizeof err);
  EXPECT_TRUE(rc != 0 || v == 3) << "\"3 B\" parsed as " << v;
}

TEST_F(ParamTest, ErrorIsNotSticky) {
  ASSERT_EQ(ncclInvalidArgument, Load("BRAID_MAX_RECVS", "9"));
  EXPECT_EQ(ncclInvalidArgument, braid_params_load()) << "load reports the last read";
  unsetenv("BRAID_MAX_RECVS");
  EXPECT_EQ(ncclSuccess, braid_params_reload());
  EXPECT_EQ(8, braid_param_int(BRAID_P_MAX_RECVS));
}

TEST_F(ParamTest, EmptyValueMeansUnset) {
  ASSERT_EQ(ncclSuccess, Load("BRAID_NSTREAMS", ""));
  EXPECT_EQ(1, braid_param_int(BRAID_P_NSTREAMS));
}

TEST_F(ParamTest, ParseReportsVariableAndRange) {
  const struct braid_param_def *d = braid_param_def(BRAID_P_NSTREAMS);
  int64_t v = 42;
  char err[256] = "";
  EXPECT_EQ(-1, braid_param_parse(d, "99", &v, err, sizeof err));
  EXPECT_EQ(42, v) << "output untouched on error";
  EXPECT_NE(nullptr, strstr(err, "BRAID_NSTREAMS")) << err;
  EXPECT_NE(nullptr, strstr(err, "[1, 16]")) << err;
  EXPECT_EQ(0, braid_param_parse(d, "3", &v, err, sizeof err));
  EXPECT_EQ(3, v);
}

TEST_F(ParamTest, BoolParsing) {
  const struct braid_param_def b = {"BRAID_TEST_BOOL", BRAID_PARAM_BOOL, "0", 0, 1, nullptr, "test"};
  struct {
    const char *text;
    int64_t want;
  } ok[] = {{"1", 1},    {"0", 0},     {"true", 1},  {"false", 0}, {"TRUE", 1},
            {"False", 0}, {"yes", 1},  {"no", 0},    {"YES", 1},   {"On", 1},
            {"on", 1},    {"off", 0},  {"OFF", 0}};
  for (const auto &c : ok) {
    int64_t v = -1;
    char err[256] = "";
    EXPECT_EQ(0, braid_param_parse(&b, c.text, &v, err, sizeof err)) << c.text << ": " << err;
    EXPECT_EQ(c.want, v) << c.text;
  }
  for (const char *bad : {"2", "-1", "y", "n", "enable", "truee", " 1", "", "of"}) {
    int64_t v = 77;
    char err[256] = "";
    EXPECT_EQ(-1, braid_param_parse(&b, bad, &v, err, sizeof err)) << "\"" << bad << "\"";
    EXPECT_EQ(77, v);
    EXPECT_NE(nullptr, strstr(err, "BRAID_TEST_BOOL")) << err;
    EXPECT_NE(nullptr, strstr(err, "boolean")) << err;
  }
}

TEST_F(ParamTest, StringsAreTakenVerbatim) {
  ASSERT_EQ(ncclSuccess, Load("BRAID_SOCKET_IFNAME", "^=eth0,docker"));
  EXPECT_STREQ("^=eth0,docker", braid_param_str(BRAID_P_SOCKET_IFNAME));
  ASSERT_EQ(ncclSuccess, Load("BRAID_SOCKET_FAMILY", "AF_INET6"));
  EXPECT_STREQ("AF_INET6", braid_param_str(BRAID_P_SOCKET_FAMILY));
}

TEST_F(ParamTest, FallsBackToNcclVariable) {
  ASSERT_EQ(ncclSuccess, Load("NCCL_SOCKET_IFNAME", "ib"));
  EXPECT_STREQ("ib", braid_param_str(BRAID_P_SOCKET_IFNAME));
  ASSERT_EQ(ncclSuccess, Load("NCCL_SOCKET_FAMILY", "AF_INET"));
  EXPECT_STREQ("AF_INET", braid_param_str(BRAID_P_SOCKET_FAMILY));
}

TEST_F(ParamTest, BraidVariableWinsOverNcclVariable) {
  setenv("NCCL_SOCKET_IFNAME", "ib", 1);
  ASSERT_EQ(ncclSuccess, Load("BRAID_SOCKET_IFNAME", "eth"));
  EXPECT_STREQ("eth", braid_param_str(BRAID_P_SOCKET_IFNAME));
  unsetenv("BRAID_SOCKET_IFNAME");
  ASSERT_EQ(ncclSuccess, braid_params_reload());
  EXPECT_STREQ("ib", braid_param_str(BRAID_P_SOCKET_IFNAME));
}

// braid_param_from names the variable the loaded value came from (the precedence above).
TEST_F(ParamTest, FromNamesTheVariableThatWasRead) {
  EXPECT_EQ(nullptr, braid_param_from(BRAID_P_IB_HCA)) << "neither set: the default";
  ASSERT_EQ(ncclSuccess, Load("NCCL_IB_HCA", "mlx5"));
  EXPECT_STREQ("NCCL_IB_HCA", braid_param_from(BRAID_P_IB_HCA));
  ASSERT_EQ(ncclSuccess, Load("BRAID_IB_HCA", ""));
  EXPECT_STREQ("NCCL_IB_HCA", braid_param_from(BRAID_P_IB_HCA)) << "empty counts as unset";
  ASSERT_EQ(ncclSuccess, Load("BRAID_IB_HCA", "mlx5_1"));
  EXPECT_STREQ("BRAID_IB_HCA", braid_param_from(BRAID_P_IB_HCA));
  EXPECT_STREQ("mlx5_1", braid_param_str(BRAID_P_IB_HCA));
}

// braid_param_env reads the environment at every call, with the same precedence and default,
// and leaves the loaded values alone.
TEST_F(ParamTest, EnvReadsTheVariableNow) {
  EXPECT_STREQ("auto", braid_param_env(BRAID_P_TUNER_MODE)) << "unset: the default";
  setenv("BRAID_TUNER_MODE", "rules", 1);
  EXPECT_STREQ("rules", braid_param_env(BRAID_P_TUNER_MODE));
  EXPECT_STREQ("", braid_param_env(BRAID_P_IB_HCA));
  setenv("NCCL_IB_HCA", "mlx5", 1);
  EXPECT_STREQ("mlx5", braid_param_env(BRAID_P_IB_HCA));
  setenv("BRAID_IB_HCA", "=mlx5_0", 1);
  EXPECT_STREQ("=mlx5_0", braid_param_env(BRAID_P_IB_HCA));
  EXPECT_STREQ("", braid_param_str(BRAID_P_IB_HCA)) << "loaded before the variables were set";
  setenv("BRAID_NSTREAMS", "banana", 1);
  EXPECT_STREQ("banana", braid_param_env(BRAID_P_NSTREAMS)) << "unchecked";
  EXPECT_EQ("", Captured()) << "and no warning";
  EXPECT_STREQ("", braid_param_env(BRAID_P_COUNT));
}

TEST_F(ParamTest, NoFallbackForOtherVariables) {
  // NCCL_NSTREAMS is not a fallback of BRAID_NSTREAMS.
  const char *old = getenv("NCCL_NSTREAMS");
  std::string saved = old ? old : "";
  setenv("NCCL_NSTREAMS", "4", 1);
  EXPECT_EQ(ncclSuccess, braid_params_reload());
  EXPECT_EQ(1, braid_param_int(BRAID_P_NSTREAMS));
  if (old) setenv("NCCL_NSTREAMS", saved.c_str(), 1);
  else unsetenv("NCCL_NSTREAMS");
}

std::string PrintRegistry() {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  EXPECT_NE(nullptr, f);
  if (!f) return "";
  braid_params_print(f);
  fclose(f);
  std::string s(buf, len);
  free(buf);
  return s;
}

TEST_F(ParamTest, PrintListsEveryVariable) {
  std::string out = PrintRegistry();
  for (const std::string &name : DefNames())
    EXPECT_NE(std::string::npos, out.find(name + " ")) << name << " missing from:\n" << out;
  for (const std::string &fb : FallbackNames())
    EXPECT_NE(std::string::npos, out.find(fb)) << fb << " fallback not documented";
  // One header line plus one line per variable.
  size_t lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(DefNames().size() + 1, lines) << out;
}

TEST_F(ParamTest, PrintShowsCurrentValue) {
  ASSERT_EQ(ncclSuccess, Load("BRAID_TIMEOUT_MS", "1234567"));
  std::string out = PrintRegistry();
  size_t at = out.find("BRAID_TIMEOUT_MS");
  ASSERT_NE(std::string::npos, at);
  std::string line = out.substr(at, out.find('\n', at) - at);
  EXPECT_NE(std::string::npos, line.find("1234567")) << line;
  EXPECT_NE(std::string::npos, line.find("60000")) << "default shown: " << line;
  EXPECT_NE(std::string::npos, line.find("[100, 86400000]")) << line;
}

}  // namespace
