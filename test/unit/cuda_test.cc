// The CUDA driver opened at run time (common/cuda.h) on a machine without it: every call fails
// with the reason (libcuda.so.1 cannot be loaded: no NVIDIA driver), from any thread, and nothing
// crashes.  On a machine with a driver these tests skip: test/gpu/check.sh covers that side.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <string.h>

#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "cuda.h"
}

namespace {

bool DriverPresent() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib) dlclose(lib);
  return lib != nullptr;
}

// The reason every call must give here.
void ExpectNoDriverWhy(const char* why) {
  EXPECT_NE(strstr(why, "libcuda.so.1 cannot be loaded ("), nullptr) << why;
  EXPECT_NE(strstr(why, "no NVIDIA driver"), nullptr) << why;
}

TEST(CudaNoDriver, InitFailsWithTheReasonEveryTime) {
  if (DriverPresent()) GTEST_SKIP() << "libcuda.so.1 loads here (test/gpu/check.sh)";
  EXPECT_EQ(braid_cuda_init(), -1);
  ExpectNoDriverWhy(braid_cuda_why());
  EXPECT_EQ(braid_cuda_init(), -1);  // once: the same answer again
  ExpectNoDriverWhy(braid_cuda_why());
}

TEST(CudaNoDriver, EveryCallReportsTheReasonAndWritesNoGarbage) {
  if (DriverPresent()) GTEST_SKIP() << "libcuda.so.1 loads here (test/gpu/check.sh)";
  int v = 7, w = 7;
  char name[32] = "unchanged";
  void* p = reinterpret_cast<void*>(0x1000);
  char host[64];
  int fd = 5;
  struct Case {
    const char* what;
    int rc;
  };
  std::vector<Case> cases;
  cases.push_back({"driver_version", braid_cuda_driver_version(&v)});
  cases.push_back({"device_count", braid_cuda_device_count(&v)});
  cases.push_back({"device_name", braid_cuda_device_name(0, name, sizeof name)});
  cases.push_back({"device_cc", braid_cuda_device_cc(0, &v, &w)});
  cases.push_back({"use_device", braid_cuda_use_device(0)});
  cases.push_back({"release_device", braid_cuda_release_device(0)});
  cases.push_back({"alloc", braid_cuda_alloc(&p, 4096)});
  EXPECT_EQ(p, nullptr);
  cases.push_back({"free", braid_cuda_free(reinterpret_cast<void*>(0x1000))});
  cases.push_back({"htod", braid_cuda_htod(reinterpret_cast<void*>(0x1000), host, sizeof host)});
  cases.push_back({"dtoh", braid_cuda_dtoh(host, reinterpret_cast<void*>(0x1000), sizeof host)});
  int is_dev = 7;
  cases.push_back({"is_device_ptr", braid_cuda_is_device_ptr(host, &is_dev)});
  EXPECT_EQ(is_dev, 0);
  int supported = 7;
  cases.push_back({"dmabuf_supported", braid_cuda_dmabuf_supported(0, &supported)});
  EXPECT_EQ(supported, 0);
  cases.push_back({"dmabuf_export", braid_cuda_dmabuf_export(host, sizeof host, &fd)});
  EXPECT_EQ(fd, -1);
  EXPECT_STREQ(name, "unchanged");
  for (const Case& c : cases) EXPECT_EQ(c.rc, -1) << c.what;
  ExpectNoDriverWhy(braid_cuda_why());
}

TEST(CudaNoDriver, ThreadsEachGetTheReason) {
  if (DriverPresent()) GTEST_SKIP() << "libcuda.so.1 loads here (test/gpu/check.sh)";
  std::vector<std::string> whys(8);
  std::vector<int> rcs(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; t++)
    threads.emplace_back([t, &whys, &rcs] {
      int n = 0;
      rcs[t] = braid_cuda_device_count(&n);
      whys[t] = braid_cuda_why();
    });
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 8; t++) {
    EXPECT_EQ(rcs[t], -1) << t;
    ExpectNoDriverWhy(whys[t].c_str());
  }
}

}  // namespace
