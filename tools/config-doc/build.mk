# braid-config-doc build rule, for the top-level Makefile (`include tools/config-doc/build.mk`
# after the obj macro).
#
# braid-config-doc prints docs/configuration.md with its variables section generated from
# common/params.def and common/env.def (tools/config-doc/main.c); `make config-doc` writes it
# back, test/integration/config_doc_test.sh (suite config-doc) fails when the two differ.
CONFIG_DOC = $(BUILD)/braid-config-doc
TARGETS   += $(CONFIG_DOC)

$(CONFIG_DOC): $(call obj,tools/config-doc/main.c)
	$(CC) $(LDFLAGS) $^ -o $@

.PHONY: config-doc
config-doc: $(CONFIG_DOC)
	$(CONFIG_DOC) docs/configuration.md >docs/configuration.md.new && mv docs/configuration.md.new docs/configuration.md
