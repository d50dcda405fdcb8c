# braid-verbs-probe build rule, for the top-level Makefile: `include tools/verbs-probe/build.mk`
# after the obj macro and COMMON_SRCS (next to `include tools/perf/build.mk`).
#
# braid-verbs-probe lists the verbs rails (net_plugin/transport/verbs/verbs_dev.c) that a verbs transport would
# use.  libibverbs is loaded at run time, never linked: only -ldl and -lpthread.
VERBS_PROBE = $(BUILD)/braid-verbs-probe
TARGETS    += $(VERBS_PROBE)

$(VERBS_PROBE): $(call obj,tools/verbs-probe/main.c net_plugin/transport/verbs/verbs_dev.c $(COMMON_SRCS))
	$(CC) $(LDFLAGS) $^ -o $@ -ldl -lpthread

# braid-verbs-ep-test: two verbs endpoints (net_plugin/transport/verbs/verbs_ep.c) on rxe_a<r>/rxe_b<r> in one
# process; run in the soft-RoCE guest by test/vm/verbs_ep_test.sh.
VERBS_EP_TEST = $(BUILD)/braid-verbs-ep-test
TARGETS      += $(VERBS_EP_TEST)

$(VERBS_EP_TEST): $(call obj,tools/verbs-probe/ep_test.c net_plugin/transport/verbs/verbs_ep.c net_plugin/transport/verbs/verbs_dev.c $(COMMON_SRCS))
	$(CC) $(LDFLAGS) $^ -o $@ -ldl -lpthread

# braid-verbs-conn-test: a striped verbs connection (net_plugin/transport/verbs/verbs_conn.c) over rxe_a<r> ->
# rxe_b<r>, both ends in one process; run in the soft-RoCE guest by test/vm/verbs_conn_test.sh
# and bench/verbs.sh.
VERBS_CONN_TEST = $(BUILD)/braid-verbs-conn-test
TARGETS        += $(VERBS_CONN_TEST)

# Sanitized builds link the sanitizers' runtimes statically: the test guest has no libasan.
$(VERBS_CONN_TEST): $(call obj,tools/verbs-probe/conn_test.c net_plugin/transport/verbs/verbs_conn.c net_plugin/transport/verbs/verbs_rejoin.c net_plugin/wire/verbs.c net_plugin/transport/verbs/verbs_ep.c net_plugin/transport/verbs/verbs_flush.c net_plugin/transport/verbs/verbs_dev.c net_plugin/stripe/sched.c $(COMMON_SRCS))
	$(CC) $(LDFLAGS) $(if $(filter 1,$(SAN)),-static-libasan -static-libubsan) $^ -o $@ -ldl -lpthread -lm

# libbraid-dmabuf-shim.so (TEST ONLY): ibv_reg_dmabuf_mr for rxe, which has none, by mapping the
# fd and registering the mapping (test/vm/dmabuf_shim.c); braid opens it through
# BRAID_IBVERBS_LIB in the soft-RoCE guest (test/vm/verbs_gpu_test.sh).  Linked to libibverbs,
# which provides every other function; built with everything, never installed.
DMABUF_SHIM = $(BUILD)/libbraid-dmabuf-shim.so
TARGETS    += $(DMABUF_SHIM)

$(DMABUF_SHIM): test/vm/dmabuf_shim.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -std=c11 $(OPT) -g -fPIC $(WARN) -fvisibility=hidden -shared $< -o $@ -libverbs
