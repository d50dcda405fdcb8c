# braid-sim build rules, for the top-level Makefile: `include tools/sim/build.mk` after the obj
# macro (next to the other tools' includes).
#
# braid-sim (tools/sim) links braid's own scheduler (net_plugin/stripe/sched.c) and braid-ps's partition
# assignment (ps_offload/assign.c), not copies of them; cairo for the PNG, libm.
# build/sim-tests: its GoogleTest suite (test/sim/*.cc): the model against closed forms.
# The unit tests link the rail simulator (railsim.c) too: the scheduler's tests (sched_test.cc)
# run their transfers through it.
SIM_SRCS     = $(wildcard tools/sim/*.c)
SIM_LIB_SRCS = $(filter-out tools/sim/main.c,$(SIM_SRCS)) net_plugin/stripe/sched.c ps_offload/assign.c
SIM          = $(BUILD)/braid-sim
SIM_TESTS    = $(BUILD)/sim-tests
TARGETS     += $(SIM)

$(call obj,tools/sim/chart.c): CPPFLAGS += $(CAIRO_CFLAGS)
$(SIM): $(call obj,tools/sim/main.c $(SIM_LIB_SRCS))
	$(CC) $(LDFLAGS) $^ -o $@ -lm $(CAIRO_LIBS)

$(BUILD)/obj/test/sim/%.o: CPPFLAGS += -iquote tools/sim
$(BUILD)/obj/test/unit/sched_test.o: CPPFLAGS += -iquote tools/sim
$(UNIT): $(call obj,tools/sim/railsim.c)
$(SIM_TESTS): $(patsubst %.cc,$(BUILD)/obj/%.o,$(wildcard test/sim/*.cc)) $(call obj,$(SIM_LIB_SRCS))
	$(CXX) $(LDFLAGS) $^ -o $@ -lgtest -lgtest_main -lpthread -lm $(CAIRO_LIBS)
