# braid-nccl-compat build rule, for the top-level Makefile (`include tools/compat/build.mk`).
#
# braid-nccl-compat loads net and tuner plugins the way each NCCL version 2.19..2.30 does and
# sweeps a tuner through that version's ABI (test/integration/compat_test.sh prints the
# README's compatibility table from it).  It links only the tuner model's default constants.
COMPAT   = $(BUILD)/braid-nccl-compat
TARGETS += $(COMPAT)

$(COMPAT): $(call obj,tools/compat/main.c tools/compat/profile.c tools/compat/sweep.c tuner_plugin/model.c)
	$(CC) $(LDFLAGS) $^ -o $@ -ldl -lm
