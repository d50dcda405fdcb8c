# braid-verbs-probe build rule, for the top-level Makefile: `include tools/verbs-probe/build.mk`
# after the obj macro and COMMON_SRCS (next to `include tools/perf/build.mk`).
#
# braid-verbs-probe lists the verbs rails (net_plugin/verbs_dev.c) that a verbs transport would
# use.  libibverbs is loaded at run time, never linked: only -ldl and -lpthread.
VERBS_PROBE = $(BUILD)/braid-verbs-probe
TARGETS    += $(VERBS_PROBE)

$(VERBS_PROBE): $(call obj,tools/verbs-probe/main.c net_plugin/verbs_dev.c $(COMMON_SRCS))
	$(CC) $(LDFLAGS) $^ -o $@ -ldl -lpthread
