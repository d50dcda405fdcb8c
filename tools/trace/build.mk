# braid-trace build rules, for the top-level Makefile: `include tools/trace/build.mk` after the
# obj macro and the TRACE_SRCS and TRACE definitions, before the $(TRACE) rule (e.g. next to
# `include tools/perf/build.mk`).
#
# - libnccl-net-braidtrace.so: the Makefile's $(TRACE) recipe, plus the object of net_plugin/abi/abi.c (the
#   exported ncclNetPlugin_v7..v12 tables, which call our braid_net_* functions) and minus the
#   shape tool's files.
# - braid-trace-shape: a program of its own (tools/trace/shape*.c).
SHAPE_SRCS  = $(wildcard tools/trace/shape*.c)
TRACE_SRCS := $(filter-out $(SHAPE_SRCS),$(TRACE_SRCS))
SHAPE       = $(BUILD)/braid-trace-shape
TARGETS    += $(SHAPE)

$(TRACE): $(call obj,net_plugin/abi/abi.c)

$(SHAPE): $(call obj,$(SHAPE_SRCS))
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)
