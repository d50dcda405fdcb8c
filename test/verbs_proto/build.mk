# The verbs protocol tests (test/verbs_proto): the verbs connection (verbs_conn.c, with the
# scheduler and its wire records) compiled over a scripted fabric of fake endpoints and a clock
# the tests move (-DBRAID_CLOCK_FAKE), so a GoogleTest program of its own: the unit tests link the
# real endpoints.
VPROTO      = $(BUILD)/verbs-proto-tests
VPROTO_SRCS = net_plugin/transport/verbs/verbs_conn.c net_plugin/transport/verbs/verbs_rejoin.c \
              net_plugin/stripe/sched.c net_plugin/wire/verbs.c test/verbs_proto/flush_none.c
VPROTO_OBJS = $(patsubst %.c,$(BUILD)/verbs-proto/%.o,$(VPROTO_SRCS))

$(BUILD)/verbs-proto/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DBRAID_CLOCK_FAKE $(CFLAGS) -c $< -o $@

$(VPROTO): $(BUILD)/obj/test/verbs_proto/verbs_proto_test.o $(BUILD)/obj/test/verbs_proto/fabric.o $(VPROTO_OBJS) | $(DEPS_TEST_STAMP)
	$(CXX) $(LDFLAGS) $^ -o $@ -lgtest -lgtest_main $(LDLIBS)
$(BUILD)/obj/test/verbs_proto/%.o: CPPFLAGS += -DBRAID_CLOCK_FAKE
