// Optional libraries opened at run time (common/dynlib.h): the helper's failure reports, both
// loaders on this machine (which has hwloc and libsodium), and the tuner fingerprints that need no
// libsodium.  test/integration/loads_anywhere_test.sh runs the plugins where the libraries are
// missing.
#include <gtest/gtest.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <string>

extern "C" {
#include "dynlib.h"
#include "topo/hwloc_lib.h"
#include "inputs.h"
#include "sodium_lib.h"
}

namespace {

// Sets (or, with nullptr, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(Dynlib, MissingLibraryNamedWithTheLoadersReason) {
  const char* const names[] = {"libbraid-no-such-library.so.7", nullptr};
  char why[256] = "";
  EXPECT_EQ(braid_dynlib_open(names, why, sizeof why), nullptr);
  EXPECT_STREQ(strstr(why, "libbraid-no-such-library.so.7 cannot be loaded ("), why) << why;
  EXPECT_NE(strstr(why, "No such file"), nullptr) << why;
}

TEST(Dynlib, LaterNamesAreTried) {
  const char* const names[] = {"libbraid-no-such-library.so.7", "libm.so.6", nullptr};
  char why[256] = "";
  void* lib = braid_dynlib_open(names, why, sizeof why);
  ASSERT_NE(lib, nullptr) << why;
  bool missing = false;
  EXPECT_NE(braid_dynlib_sym(lib, "libm", "cos", &missing, why, sizeof why), nullptr);
  EXPECT_FALSE(missing);
  EXPECT_EQ(braid_dynlib_sym(lib, "libm", "braid_no_such_symbol", &missing, why, sizeof why), nullptr);
  EXPECT_EQ(braid_dynlib_sym(lib, "libm", "braid_other_symbol", &missing, why, sizeof why), nullptr);
  EXPECT_TRUE(missing);
  EXPECT_STREQ(why, "libm lacks braid_no_such_symbol (older than braid needs?)");  // the first
}

// The build machine has both libraries (tools/deps.sh installs them).
TEST(OptionalLibs, BothLoadHere) {
  EXPECT_NE(braid_hwloc(), nullptr) << braid_hwloc_error();
  EXPECT_STREQ(braid_hwloc_error(), "");
  EXPECT_NE(braid_sodium(), nullptr) << braid_sodium_error();
  EXPECT_STREQ(braid_sodium_error(), "");
}

uint64_t Blake2b64(const unsigned char* msg, size_t n) {
  const struct braid_sodium* s = braid_sodium();
  unsigned char out[8];
  crypto_generichash_state st;
  s->crypto_generichash_init(&st, nullptr, 0, sizeof out);
  s->crypto_generichash_update(&st, msg, n);
  s->crypto_generichash_final(&st, out, sizeof out);
  uint64_t fp = 0;
  for (unsigned char b : out) fp = fp << 8 | b;
  return fp;
}

// The fingerprints that read no file are constants, so a rank without libsodium (whose tuner is
// off) agrees with one that has it and runs BRAID_TUNER_MODE=off; they are the hashes of the same
// inputs, so braid versions before and after agree too.
TEST(OptionalLibs, ConstantFingerprintsAreTheHashes) {
  ASSERT_NE(braid_sodium(), nullptr) << braid_sodium_error();
  static const unsigned char none[] = "no braid tuner";
  EXPECT_EQ(Blake2b64(none, sizeof none), BRAID_TUNER_FP_NONE);
  static const unsigned char off[] = "off\0rules\0unset\0calib\0unset\0health\0unset";
  EXPECT_EQ(Blake2b64(off, sizeof off), BRAID_TUNER_FP_OFF);
  // And the hashing path itself, under the same inputs: mode model with no calibration or health
  // file reads the same kind of "unset" records, so its hash is computed, not a constant.
  ScopedEnv plugin("NCCL_TUNER_PLUGIN", "braid"), calib("BRAID_TUNER_CALIB", nullptr),
      health("BRAID_TUNER_HEALTH", nullptr), mode("BRAID_TUNER_MODE", "model");
  braid_tuner_inputs in;
  braid_tuner_inputs_read(&in);
  static const unsigned char model[] = "model\0rules\0unset\0calib\0unset\0health\0unset";
  EXPECT_EQ(in.fingerprint, Blake2b64(model, sizeof model));
  EXPECT_EQ(in.mode, BRAID_TUNER_MODEL);
}

TEST(OptionalLibs, ModeOffNeedsNoHash) {
  ScopedEnv plugin("NCCL_TUNER_PLUGIN", "libnccl-tuner-braid.so"), mode("BRAID_TUNER_MODE", "OFF");
  braid_tuner_inputs in;
  braid_tuner_inputs_read(&in);
  EXPECT_EQ(in.fingerprint, BRAID_TUNER_FP_OFF);
  EXPECT_EQ(in.mode, BRAID_TUNER_OFF);
}

}  // namespace
