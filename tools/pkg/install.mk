# make install / make uninstall, for the top-level Makefile (`include tools/pkg/install.mk` after
# the tools' build.mk files, which define every program below).
#
#   make install [PREFIX=/usr/local] [DESTDIR=...]
#
# The plugins go to LIBDIR, PREFIX/lib/<multiarch> (x86_64-linux-gnu from the compiler), which
# Debian and Ubuntu's loader searches for PREFIX /usr and /usr/local: NCCL opens
# "libnccl-net-braid.so" by name, so NCCL_NET_PLUGIN=braid finds it with no LD_LIBRARY_PATH.
# The tools go to BINDIR, their manual pages (made from their --help, tools/pkg/manpage.sh) to
# MANDIR/man1, README.md and docs/ to DOCDIR.  With DESTDIR empty, as root, ldconfig refreshes
# the loader's cache; either way a LIBDIR the loader does not search is reported with what to do.
# `make uninstall` (same PREFIX, DESTDIR) removes exactly those files and DOCDIR.
# debian/rules runs `make install PREFIX=/usr DESTDIR=debian/tmp MULTIARCH=...`.
MULTIARCH ?= $(shell $(CC) -print-multiarch 2>/dev/null)
BINDIR    ?= $(PREFIX)/bin
LIBDIR    ?= $(PREFIX)/lib$(if $(MULTIARCH),/$(MULTIARCH))
MANDIR    ?= $(PREFIX)/share/man
DOCDIR    ?= $(PREFIX)/share/doc/braid

INSTALL_LIBS = $(PLUGIN) $(TUNER) $(TRACE)
INSTALL_BINS = $(PERF) $(STAT) $(TUNE) $(SIM) $(SHAPE) $(PS)
INSTALL_MANS = $(patsubst $(BUILD)/%,$(BUILD)/man/%.1,$(INSTALL_BINS))
INSTALL_DOCS = README.md $(wildcard docs/*.md docs/*.png)

.PHONY: installables uninstall
# What install copies, built (debian/rules builds this, not everything of `all`).
installables: $(INSTALL_LIBS) $(INSTALL_BINS) $(INSTALL_MANS)

$(BUILD)/man/%.1: $(BUILD)/% tools/pkg/manpage.sh common/version.h
	@mkdir -p $(@D)
	tools/pkg/manpage.sh $< >$@.tmp && mv $@.tmp $@

install: installables
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DOCDIR)
	install -m 644 $(INSTALL_LIBS) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(INSTALL_BINS) $(DESTDIR)$(BINDIR)/
	install -m 644 $(INSTALL_MANS) $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(INSTALL_DOCS) $(DESTDIR)$(DOCDIR)/
	@if [ -z "$(DESTDIR)" ]; then tools/pkg/ldpath.sh $(LIBDIR); fi

uninstall:
	rm -f $(addprefix $(DESTDIR)$(LIBDIR)/,$(notdir $(INSTALL_LIBS)))
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(INSTALL_BINS)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(INSTALL_MANS)))
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(INSTALL_DOCS)))
	if [ -d $(DESTDIR)$(DOCDIR) ]; then rmdir $(DESTDIR)$(DOCDIR); fi
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi
