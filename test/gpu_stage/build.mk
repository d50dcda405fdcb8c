# The GPU staging tests (test/gpu_stage): a GoogleTest program of its own, because it runs with a
# stand-in CUDA driver loaded as libcuda.so.1 (the unit tests check the plugin without a driver).
# The stand-in is built without sanitizers: it is the "driver", not code under test.
FAKE_CUDA  = $(BUILD)/fake-cuda/libcuda.so.1
GPU_STAGE  = $(BUILD)/gpu-stage-tests

$(FAKE_CUDA): test/gpu_stage/fake_cuda.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O1 -g $(WARN) -fPIC -shared -Wl,-soname,libcuda.so.1 $< -o $@

$(GPU_STAGE): $(BUILD)/obj/test/gpu_stage/stage_test.o $(BUILD)/obj/test/unit/verbs_mock.o $(CORE) $(PSCORE) $(FAKE_CUDA) | $(DEPS_TEST_STAMP)
	$(CXX) $(LDFLAGS) $(filter %.o,$^) $(CORE) $(PSCORE) -o $@ -L$(dir $(FAKE_CUDA)) -l:libcuda.so.1 \
	  -Wl,-rpath,'$$ORIGIN/fake-cuda' -lgtest -lgtest_main $(LDLIBS)
