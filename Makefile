# braid: NCCL plugins and their tools, built into build/ (BUILD=...):
#   libnccl-net-braid.so    the net plugin: one connection striped over several rails, carried by
#                           TCP sockets, libfabric (ofi) or verbs; also a CollNet over braid-ps
#   libnccl-tuner-braid.so  the tuner plugin (algorithm, protocol, channels per collective)
#   braid-ps                the CollNet reduction server
#   tools                   braid-perf (stands in for NCCL), braid-trace (a wrapper net plugin)
#                           and braid-trace-shape, braid-stat, braid-tune, braid-sim,
#                           braid-nccl-compat, braid-verbs-probe; test helpers and references
# Targets:
#   make            build everything (Debian packages first: tools/deps.sh)
#   make unit       build and run the unit tests only (GTEST_FILTER=... for some of them)
#   make test       build and run every test suite of test/run.sh (unit, sanitizers, fuzzers,
#                   integration, netbed, soft-RoCE guest); SUITE="unit 'collnet*'": only those
#   make fuzz       the fuzzers only (FUZZ_SECONDS per target, FUZZ_TARGETS="fuzz_rx ...")
#   make config-doc docs/configuration.md's tables from common/params.def and common/env.def
#   make run        local demo: a few ranks run an allreduce sweep through the plugin on loopback
#   make install    plugins, tools, manual pages, docs (PREFIX=/usr/local, DESTDIR=; make uninstall)
#   make deb        Debian packages into build/deb/ (debian/; docs/install.md)
#   make bench      benchmarks against reference programs (bench/, minutes)
#   make SAN=1 OPT=-O1 BUILD=build/san    the ASan+UBSan build (SAN=thread: ThreadSanitizer)
# docs/contributing.md has the quick loop.

.DEFAULT_GOAL := all

BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= gcc
CXX     ?= g++
SAN     ?=
OPT     ?= -O2

WARN     = -Wall -Wextra -Werror
CPPFLAGS = -D_GNU_SOURCE -Iinclude -iquote common -iquote net_plugin -iquote tools/netload -iquote ps_offload -iquote tuner_plugin -MMD -MP
CFLAGS   = -std=c11 $(OPT) -g -fPIC $(WARN) -fvisibility=hidden
CXXFLAGS = -std=c++17 $(OPT) -g $(WARN)
# Only the C library family: hwloc, libsodium, libfabric and libibverbs are opened at run time
# (common/dynlib.h), so the plugins load on any node (test/integration/loads_anywhere_test.sh).
LDLIBS   = -ldl -lpthread -lm
ifeq ($(SAN),1)
  SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
ifeq ($(SAN),thread)
  SANFLAGS = -fsanitize=thread -fno-omit-frame-pointer
endif
CFLAGS  += $(SANFLAGS)
# A distribution's flags, appended (debian/rules passes dpkg-buildflags' CPPFLAGS and CFLAGS:
# hardening, debug paths); LDFLAGS is taken from the environment as it is.
CPPFLAGS += $(EXTRA_CPPFLAGS)
CFLAGS  += $(EXTRA_CFLAGS)
CXXFLAGS += $(SANFLAGS)
LDFLAGS += $(SANFLAGS)

COMMON_SRCS = common/log.c common/param.c common/sockaddr.c common/dynlib.c common/sodium_lib.c \
              common/tmpfile.c
# The CUDA driver opened at run time (common/cuda.h): linked only where used (the net plugin, which
# stages GPU memory through host memory where a connection carries host memory only; braid-perf;
# the unit tests through libbraid-core.a), not into the tuner's objects with COMMON_SRCS.
CUDA_SRCS   = common/cuda.c
NET_SRCS    = $(shell find net_plugin -name "*.c" | sort)
NETLOAD_SRCS = $(wildcard tools/netload/*.c)
PERF_SRCS   = $(wildcard tools/perf/*.c)
TRACE_SRCS  = $(wildcard tools/trace/*.c)
STAT_SRCS   = $(wildcard tools/stat/*.c)
# braid-ps: every ps_offload/*.c; main.c is the daemon's entry point, the rest is a library that
# the unit tests link too.  PS_WIRE_SRCS are shared with the net plugin (the CollNet client).
PS_SRCS     = $(filter-out ps_offload/main.c,$(wildcard ps_offload/*.c))
TUNER_SRCS  = $(wildcard tuner_plugin/*.c)
PS_WIRE_SRCS = ps_offload/proto.c ps_offload/auth.c ps_offload/assign.c ps_offload/reduce.c \
               ps_offload/reduce_x86.c
# The tuner-inputs fingerprint, which the net plugin carries in its handles.
TUNER_INPUT_SRCS = tuner_plugin/inputs.c tuner_plugin/textfile.c tuner_plugin/agree.c
UNIT_SRCS   = $(filter-out test/unit/threads_test.cc,$(wildcard test/unit/*.cc))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

PLUGIN  = $(BUILD)/libnccl-net-braid.so
PERF    = $(BUILD)/braid-perf
TRACE   = $(BUILD)/libnccl-net-braidtrace.so
CORE    = $(BUILD)/libbraid-core.a
UNIT    = $(BUILD)/unit-tests
REFS    = $(BUILD)/tcp_stream $(BUILD)/tcp_pingpong $(BUILD)/tcp_onethread

STAT    = $(BUILD)/braid-stat
PS      = $(BUILD)/braid-ps
PSCORE  = $(BUILD)/libbraid-ps.a
TUNER   = $(BUILD)/libnccl-tuner-braid.so
TUNERCORE = $(BUILD)/libbraid-tuner.a
TUNERLAT = $(BUILD)/tuner-latency
TARGETS = $(PLUGIN) $(PERF) $(TRACE) $(STAT) $(PS) $(REFS) $(if $(TUNER_SRCS),$(TUNER)) $(TUNERLAT)

include tools/perf/build.mk
include tools/trace/build.mk
include tools/verbs-probe/build.mk
include tools/sim/build.mk
include tools/compat/build.mk
include tools/config-doc/build.mk
include test/gpu_stage/build.mk
include test/consumer/build.mk
include test/verbs_proto/build.mk

# braid-tune (tools/tune): the tuner's library, cairo for --png.
TUNE_SRCS    = $(wildcard tools/tune/*.c)
TUNE         = $(BUILD)/braid-tune
TARGETS     += $(if $(TUNER_SRCS),$(TUNE))
CAIRO_CFLAGS = $(patsubst -I%,-isystem %,$(shell pkg-config --cflags cairo))
CAIRO_LIBS   = $(shell pkg-config --libs cairo)

# make install and make uninstall: the plugins where NCCL finds them by name, tools, docs.
include tools/pkg/install.mk

.PHONY: all deps test run install bench clean unit fuzz deb
all: $(TARGETS)

# Debian packages first: tools/deps.sh installs what is missing (as root) or prints the
# apt-get line and fails, before anything compiles.  Every compile and link waits for the stamp
# (order-only: a newer stamp rebuilds nothing); its name carries a hash of deps.sh, whose
# package lists change it, and dpkg's status file being newer (packages added or removed)
# checks again.  The test stamp adds GoogleTest, clang and the tools `make test` uses.
DEPS_HASH       := $(firstword $(shell cksum < tools/deps.sh))
DEPS_STAMP      := $(BUILD)/.deps-build-$(DEPS_HASH)
DEPS_TEST_STAMP := $(BUILD)/.deps-test-$(DEPS_HASH)
$(DEPS_STAMP): tools/deps.sh $(wildcard /var/lib/dpkg/status)
	./tools/deps.sh build
	@mkdir -p $(dir $@) && rm -f $(BUILD)/.deps-build-* && touch $@
$(DEPS_TEST_STAMP): tools/deps.sh $(wildcard /var/lib/dpkg/status) | $(DEPS_STAMP)
	./tools/deps.sh test
	@mkdir -p $(dir $@) && rm -f $(BUILD)/.deps-test-* && touch $@

deps: $(DEPS_STAMP)

$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.cc | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

$(PLUGIN): $(call obj,$(COMMON_SRCS) $(CUDA_SRCS) $(NET_SRCS) $(PS_WIRE_SRCS) $(TUNER_INPUT_SRCS))
	$(CC) -shared $(LDFLAGS) -Wl,--no-undefined -Wl,-soname,libnccl-net-braid.so $^ -o $@ $(LDLIBS)

$(CORE): $(call obj,$(COMMON_SRCS) $(CUDA_SRCS) $(NET_SRCS) $(PS_WIRE_SRCS) $(TUNER_INPUT_SRCS))
	@rm -f $@
	ar rcs $@ $^

$(PSCORE): $(call obj,$(PS_SRCS) common/secret.c)
	@rm -f $@
	ar rcs $@ $^

$(TUNER): $(call obj,$(COMMON_SRCS) $(TUNER_SRCS))
	$(CC) -shared $(LDFLAGS) -Wl,--no-undefined -Wl,-soname,libnccl-tuner-braid.so $^ -o $@ $(LDLIBS)

# getCollInfo's cost, in-process (bench/tuner_latency.sh); model.c fills NCCL-shaped tables.
$(TUNERLAT): $(call obj,bench/tuner_latency.c tuner_plugin/model.c)
	$(CC) $(LDFLAGS) $^ -o $@ -ldl

$(TUNERCORE): $(call obj,$(TUNER_SRCS))
	@rm -f $@
	ar rcs $@ $^

$(call obj,tools/tune/chart.c): CPPFLAGS += $(CAIRO_CFLAGS)
$(TUNE): $(call obj,$(TUNE_SRCS) common/log.c common/param.c common/dynlib.c common/sodium_lib.c common/tmpfile.c) $(TUNERCORE)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(CAIRO_LIBS)

# The unit tests also call braid-tune's advice-file merge (pure C, libc only).
$(UNIT): $(call obj,tools/tune/health.c)

$(PS): $(call obj,ps_offload/main.c $(COMMON_SRCS)) $(PSCORE)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(PERF): $(call obj,$(COMMON_SRCS) $(CUDA_SRCS) $(NETLOAD_SRCS) $(PERF_SRCS)) $(TUNERCORE)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(STAT): $(call obj,$(STAT_SRCS))
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(TRACE): $(call obj,$(COMMON_SRCS) $(NETLOAD_SRCS) $(TRACE_SRCS))
	$(CC) -shared $(LDFLAGS) -Wl,--no-undefined -Wl,-soname,libnccl-net-braidtrace.so $^ -o $@ $(LDLIBS)

$(BUILD)/tcp_%: bench/ref/tcp_%.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 $(WARN) -pthread $< -o $@

$(UNIT): $(patsubst %.cc,$(BUILD)/obj/%.o,$(UNIT_SRCS)) $(CORE) $(PSCORE) $(if $(TUNER_SRCS),$(TUNERCORE))
	$(CXX) $(LDFLAGS) $(filter %.o,$^) $(filter %.a,$^) -o $@ -lgtest -lgtest_main $(LDLIBS)

# The threaded test, built with SAN=thread into build/tsan by `make test`.
$(BUILD)/threads-test: $(BUILD)/obj/test/unit/threads_test.o $(BUILD)/obj/test/unit/sock_helpers_test.o $(CORE)
	$(CXX) $(LDFLAGS) $^ -o $@ -lgtest -lgtest_main $(LDLIBS)

# The GoogleTest programs and every object of test/ need the test packages too; every binary
# (those of tools/*/build.mk included) waits for the build stamp, whatever it links.
TEST_OBJS = $(patsubst %.cc,$(BUILD)/obj/%.o,$(wildcard test/*/*.cc))
$(TEST_OBJS) $(UNIT) $(BUILD)/threads-test $(SIM_TESTS): | $(DEPS_TEST_STAMP)
# Under SAN=1 the GoogleTest sources themselves are compiled without ASan/UBSan (a third of the
# sanitized build's time); the code they test, compiled from net_plugin/ and the rest, keeps it.
ifeq ($(SAN),1)
$(TEST_OBJS): SANFLAGS :=
endif
$(TARGETS) $(CORE) $(PSCORE) $(TUNERCORE) $(CHAOS) $(COLLSHM): | $(DEPS_STAMP)

# make unit: the unit tests of the plain build, loading the plugins of $(BUILD) as test/run.sh's
# unit suite does (GTEST_FILTER=Sched*: only some; docs/contributing.md).
unit: $(UNIT) $(PLUGIN) $(TUNER)
	BRAID_PLUGIN_PATH=$(PLUGIN) BRAID_TUNER_PATH=$(TUNER) $(UNIT)

# make test SUITE="unit netbed": only those suites of test/run.sh (names or globs).
test: $(DEPS_TEST_STAMP)
	@./test/run.sh $(SUITE)

FUZZ_SECONDS ?= 20
fuzz: $(DEPS_TEST_STAMP)
	./test/fuzz/run.sh $(FUZZ_SECONDS)

run: all
	@./tools/demo.sh

bench: all
	@./bench/run.sh

# Debian packages of this tree, built in a copy (dpkg-buildpackage, debian/) into $(BUILD)/deb/.
deb:
	./tools/pkg/deb.sh $(BUILD)/deb

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
