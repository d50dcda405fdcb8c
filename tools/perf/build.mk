# braid-perf build notes, for the top-level Makefile (which owns the rules).
#
# braid-perf itself needs nothing here: the Makefile's PERF_SRCS/NETLOAD_SRCS wildcards
# (tools/perf/*.c, tools/netload/*.c) plus COMMON_SRCS and libbraid-tuner.a (NCCL's cost model,
# the calibration file and the tuner's input fingerprint, for --calibrate and --algo
# auto|nccl), linked with -ldl -lpthread -lm (libhwloc and libsodium are opened at run time),
# are exactly its sources.
# tools/perf/test/ is deliberately outside the wildcard.
#
# Optional, with `include tools/perf/build.mk` after the obj macro and NETLOAD_SRCS:
#   CHAOS: a test-only net plugin that wraps another one (CHAOS_INNER) and makes isend/irecv
#          return NULL requests, connect/accept NULL comms and test "not done" at random
#          (CHAOS_PERCENT), to exercise braid-perf's and NCCL-like retry paths; and, only when
#          CHAOS_DROP_RECV or CHAOS_STALE_RECV is set, loses or stales one receive's data once
#          (tools/perf/test/chaos_fault.h), to prove braid-perf's check sees it.
#   perf-smoke: runs tools/perf/test/smoke.sh (a verified matrix of every op, about a minute).
CHAOS = $(BUILD)/libnccl-net-chaos.so

$(CHAOS): $(call obj,$(NETLOAD_SRCS) tools/perf/test/chaos_net.c tools/perf/test/chaos_fault.c)
	$(CC) -shared $(LDFLAGS) -Wl,--no-undefined $^ -o $@ $(LDLIBS)

.PHONY: perf-smoke
perf-smoke: $(PERF) $(PLUGIN) $(CHAOS)
	BUILD=$(BUILD) tools/perf/test/smoke.sh

#   COLLSHM: a test-only CollNet plugin (ncclCollNetPlugin_v11, also v10 and v8, plus a
#          one-device net table with no data path) that allreduces between local processes
#          through POSIX shared memory, to test braid-perf --algo collnet
#          (tools/perf/test/collnet_smoke.sh).
#   collnet-smoke: runs that script over it.
COLLSHM = $(BUILD)/libnccl-net-collshm.so

$(COLLSHM): $(call obj,tools/perf/test/collnet_shm.c)
	$(CC) -shared $(LDFLAGS) -Wl,--no-undefined $^ -o $@ $(LDLIBS) -lrt

.PHONY: collnet-smoke
collnet-smoke: $(PERF) $(COLLSHM)
	BUILD=$(BUILD) tools/perf/test/collnet_smoke.sh

#   tuner-smoke: runs tools/perf/test/tuner_smoke.sh: --calibrate, then --algo auto (through
#          libnccl-tuner-braid.so) and --algo nccl on 3 local ranks, the ranks-disagree and
#          refusal paths, and CollNet through two braid-ps servers (seconds).
.PHONY: tuner-smoke
tuner-smoke: $(PERF) $(PLUGIN) $(TUNER) $(PS)
	BUILD=$(BUILD) tools/perf/test/tuner_smoke.sh
