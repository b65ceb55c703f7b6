# s2s — build, test, bench. `make help` lists the targets.
# Every core builds (make JOBS=1: one file at a time). GNU make 4.3 does not show a -j given
# on the command line to the makefile, so JOBS decides; sub-makes share the top one's jobs.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j$(JOBS)
endif
CC ?= cc
SANITIZE ?= 0
GOLDEN_DIR ?= tests/golden
GOLDEN_CUSTOM := $(if $(filter command line,$(origin GOLDEN_DIR)),1,0)
# Threads for OpenBLAS and oneDNN inside tests: Criterion already runs tests in parallel.
TEST_THREADS ?= 1

ifeq ($(SANITIZE),1)
BUILD := build/san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
OPT := -O1
else
BUILD := build
SANFLAGS :=
OPT := -O3
endif

# Build for the machine we run on where the compiler supports it (no -ffast-math: it would
# break the goldens and bit-for-bit determinism).
ARCH ?= $(shell $(CC) -march=native -E -x c /dev/null >/dev/null 2>&1 && echo -march=native)
WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wswitch-enum
# Recursive (=) so pkg-config runs after `deps` has installed the packages.
PKG_CFLAGS = $(shell pkg-config --cflags openblas libcjson libpng freetype2 zlib libmicrohttpd)
# oneDNN (bf16 GEMMs) has no pkg-config file in Debian; libgomp is its threading runtime.
PKG_LIBS = $(shell pkg-config --libs openblas libcjson libpng freetype2 zlib libmicrohttpd) $(MPI_LIBS) -ldnnl -lgomp -lm -lpthread
# MPI (Open MPI from Debian, which `make deps` installs): data-parallel training under mpirun,
# built in when installed; MPI=0 builds without (one process), MPI=1 insists.
MPI ?= auto
MPI_ON = $(if $(filter auto,$(MPI)),$(shell pkg-config --exists ompi-c 2>/dev/null && echo 1),$(filter 1,$(MPI)))
MPI_CFLAGS = $(if $(MPI_ON),-DS2S_MPI $(shell pkg-config --cflags ompi-c))
MPI_LIBS = $(if $(MPI_ON),$(shell pkg-config --libs ompi-c))
# -ffp-contract=off: gcc and clang then round the same way (clang would fuse a*b+c).
# -fno-math-errno: nothing reads errno after sqrtf, and with it Adam's loop vectorises.
# -fno-trapping-math: nothing unmasks or reads FP exceptions; without it gcc keeps every loop
# with a select on a float comparison scalar (exp, sigmoid, tanh: the GRU step, softmax, loss).
CFLAGS = -std=c11 $(OPT) -g $(ARCH) -ffp-contract=off -fno-math-errno -fno-trapping-math $(WARN) $(SANFLAGS) -D_POSIX_C_SOURCE=200809L -Iinclude -Itests $(PKG_CFLAGS) $(MPI_CFLAGS)
LDFLAGS = $(SANFLAGS)

# The modules: the one list is docs/architecture.md's layers table (the layer and budget tests
# read it too); every folder but the programs' is the library.
MODULE_DIRS := $(shell sed -n '/<!-- layers:begin -->/,/<!-- layers:end -->/s/^| [a-z]* | \(src\/[a-z]*\) |.*/\1/p' docs/architecture.md)
LIB_SRC := $(wildcard $(addsuffix /*.c,$(filter-out src/cli,$(MODULE_DIRS))))
# Above core, but for io/ (files), a tensor's memory is reached through tensor.h's host-access
# calls only: its data and grad fields are hidden there (the back-end seam, docs/design/gpu.md)
HOST_ONLY_DIRS := $(filter-out src/platform src/cpu src/core src/io,$(MODULE_DIRS))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/serve_page.o
LIB := $(BUILD)/libs2s.a
VERSION := $(shell sed -n 's/^\#define S2S_VERSION "\(.*\)"/\1/p' include/s2s/common.h)
SO_MAJOR := $(firstword $(subst ., ,$(VERSION)))
SO := $(BUILD)/libs2s.so.$(VERSION)
CLI_SRC := $(wildcard src/cli/*.c)
CLIS := $(notdir $(CLI_SRC:.c=))
TEST_SRC := $(wildcard tests/*.c) tests/fuzz/targets.c
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(BUILD)/tests/s2s_tests
DEPS_STAMP := build/.deps-ok

.PHONY: bench-data print-clis all deps demo doctest test test-python test-fast test-golden test-install fuzz bench bench-serve clean help FORCE shared install uninstall
# Programs are built per build flavour in $(BUILD)/bin; the plain build also copies them to
# the repo root, where users type ./train. Tests run the flavour they were built with.
BIN := $(CLIS:%=$(BUILD)/bin/%)
ifeq ($(SANITIZE),1)
all: $(LIB) $(BIN) $(SO)
else
all: $(LIB) $(CLIS) $(SO)
$(CLIS): %: $(BUILD)/bin/%
	cp $< $@.tmp && mv -f $@.tmp $@
endif

# prepared_cache.o keys prepared data by the build of the data code (its __DATE__ and __TIME__):
# rebuilt whenever a file of src/data changes, so no run reads data another build encoded
$(BUILD)/src/data/prepared_cache.o: $(filter-out src/data/prepared_cache.c,$(wildcard src/data/*.c src/data/*.h src/text/*.c src/text/*.h))

help:
	@echo "make demo       build, train the reversal model, use it"
	@echo "make            build build/libs2s.a and the programs ($(CLIS))"
	@echo "make test       build and run every test (SANITIZE=1: under ASan+UBSan; DOCS_CHECKS=0: not the docs' own checks)"
	@echo "make test-fast  unit, gradient and golden tests, without the training runs (seconds)"
	@echo "make doctest    every command of README.md, the tutorials and the how-to guides, in a sandbox"
	@echo "make test-golden GOLDEN_DIR=path   only the PyTorch golden tests"
	@echo "make deps       install missing Debian packages"
	@echo "make install PREFIX=/usr/local   programs (s2s-train ...), libs2s.a/.so, headers, s2s.pc, man pages"
	@echo "make uninstall PREFIX=...        removes what install put there"
	@echo "make test-install                install into a temporary prefix and build a program against it"
	@echo "make clean"

# Installs missing packages; the stamp is refreshed when the script changes.
$(DEPS_STAMP): scripts/deps.sh
	@bash scripts/deps.sh
	@mkdir -p build && touch $@
deps:
	@bash scripts/deps.sh
	@mkdir -p build && touch $(DEPS_STAMP)

# Rebuild everything when the compiler, the flags or the host-only folders change (CC=clang after
# a gcc build). The first line is the compile command (tests/test_build.c reuses it).
FLAGS_FILE := $(BUILD)/.flags
$(FLAGS_FILE): FORCE | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@printf '%s\nhost-only: %s\n' '$(CC) $(CFLAGS) $(LDFLAGS)' '$(HOST_ONLY_DIRS)' | cmp -s - $@ || \
	  printf '%s\nhost-only: %s\n' '$(CC) $(CFLAGS) $(LDFLAGS)' '$(HOST_ONLY_DIRS)' > $@
FORCE:
.SECONDARY:

$(BUILD)/%.o: %.c $(FLAGS_FILE) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(if $(filter $(HOST_ONLY_DIRS),$(patsubst %/,%,$(dir $<))),-DS2S_HOST_ACCESS_ONLY) -MMD -MP -c $< -o $@

# The build's identity for --version: the commit ("-dirty" with changes not
# committed, "unknown" outside a git checkout); args.o is rebuilt when it changes (the stamp
# is rewritten only then)
BUILD_ID := $(shell h=$$(git rev-parse --short=7 HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null || h=$$h-dirty; echo $$h; } || echo unknown)
$(BUILD)/gen/build_id: FORCE
	@mkdir -p $(dir $@)
	@echo '$(BUILD_ID)' | cmp -s - $@ || echo '$(BUILD_ID)' > $@
$(BUILD)/src/io/args.o $(BUILD)/pic/src/io/args.o: $(BUILD)/gen/build_id
$(BUILD)/src/io/args.o $(BUILD)/pic/src/io/args.o: private CFLAGS += -DS2S_BUILD='"$(BUILD_ID)"'

# ./serve's web page, built into the library as one string (SERVE_PAGE)
$(BUILD)/gen/serve_page.c: src/serve/page.html
	@mkdir -p $(dir $@)
	{ echo '/* generated from src/serve/page.html by the Makefile */'; echo 'extern const char SERVE_PAGE[];'; \
	  echo 'const char SERVE_PAGE[] ='; sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$$/\\n"/' $<; echo '    ;'; } > $@
$(BUILD)/gen/serve_page.o: $(BUILD)/gen/serve_page.c $(FLAGS_FILE)
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/pic/gen/serve_page.o: $(BUILD)/gen/serve_page.c $(FLAGS_FILE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/bin/%: $(BUILD)/src/cli/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(PKG_LIBS) -o $@

$(TEST_BIN): $(TEST_OBJ) $(LIB) $(BUILD)/tests/dist_check $(BUILD)/bench/peak
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(TEST_OBJ) $(LIB) $(PKG_LIBS) -lcriterion -o $@

# the gradient sum timed under mpirun (make bench, README: MPI)
$(BUILD)/bench/dist_bench: $(BUILD)/bench/dist_bench.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(PKG_LIBS) -o $@

# the CPU's multiply-add peak per number format (make bench, README: Speed)
$(BUILD)/bench/peak: $(BUILD)/bench/peak.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -lpthread -o $@

# a load client for ./serve (make bench-serve, README: serve)
$(BUILD)/bench/serve_load: $(BUILD)/bench/serve_load.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -lpthread -o $@

# run under mpirun by tests/test_dist.c
$(BUILD)/tests/dist_check: $(BUILD)/tests/mpi/dist_check.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(PKG_LIBS) -o $@

# The reversal demo: train (about 10 s on 2 cores), then reverse strings it never saw.
demo: all
	./train --config reverse --overwrite
	@echo "--- ./translate runs/reverse/model.bin"
	printf 'abcd\nddacbbadca\ncabbadcbadddacbca\n' | ./translate runs/reverse/model.bin

# DOCS_CHECKS=0 leaves out the checks of the docs themselves (every printed command run, and the
# numerics page rebuilt in PyTorch), for a second build of the same tree: they check the pages,
# not the compiler, and the first build ran them (.ci/run: the clang and portable builds).
DOCS_CHECKS ?= 1
DOCS_FILTER = $(if $(filter 0,$(DOCS_CHECKS)),--filter '!(doctest|numerics)/*')
test: $(TEST_BIN) all
	OPENBLAS_NUM_THREADS=$(TEST_THREADS) OMP_NUM_THREADS=$(TEST_THREADS) S2S_GOLDEN_DIR=$(GOLDEN_DIR) S2S_GOLDEN_CUSTOM=$(GOLDEN_CUSTOM) S2S_BIN_DIR=$(BUILD)/bin \
	  ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp $(TEST_BIN) $(DOCS_FILTER) $(TEST_ARGS)
	@$(MAKE) --no-print-directory test-python

# The Python package (python/s2s) over this build's shared library, against this build's
# programs; under SANITIZE=1 the interpreter runs with the sanitizers' runtime preloaded.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
SAN_PRELOAD = $(if $(filter 1,$(SANITIZE)),LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" ASAN_OPTIONS=detect_leaks=0 S2S_SANITIZED=1)
# The slow builds (sanitized, portable) and a second build (DOCS_CHECKS=0) skip the notebook's
# and the docs' trainings: their calls are the package tests', and the first build runs them.
PY_QUICK = $(if $(or $(filter 1,$(SANITIZE)),$(if $(ARCH),,1),$(filter 0,$(DOCS_CHECKS))),S2S_PY_QUICK=1)
test-python: all
	OPENBLAS_NUM_THREADS=$(TEST_THREADS) OMP_NUM_THREADS=$(TEST_THREADS) S2S_BIN_DIR=$(BUILD)/bin S2S_LIBRARY=$(CURDIR)/$(SO) \
	  PYTHONPATH=$(CURDIR)/python PYTHONDONTWRITEBYTECODE=1 $(SAN_PRELOAD) $(PY_QUICK) $(PYTHON) -m pytest -q -p no:cacheprovider tests/python

# The inner loop: an allow-list of unit suites (no program run, no model trained end to end:
# tu_bin() fails a test that tries, under S2S_TEST_UNITS_ONLY), seconds in all; a new suite
# joins it by name. A suite's tests that run programs go in <suite>_cli.
FAST_SUITES := arena backend_ops batch budget greedy config docs layers optim parallel params reverse rng tape tensor text utf8 vocab \
               checkpoint file tokenize fuzz viz ops recipe transformer golden sacrebleu spm par beam gemm \
               gradcheck bleu corpus
FAST_FILTER := @($(subst $(eval) ,|,$(strip $(FAST_SUITES))))/*
# Every command README.md, the tutorials and the how-to guides show, in a sandbox, as printed
# (scripts/doctest.py; a long training through the short form its page prints)
DOC_PAGES := README.md $(wildcard docs/tutorials/*.md docs/how-to/*.md)
doctest: all
	python3 scripts/doctest.py $(BUILD)/bin $(DOC_PAGES)

test-fast: $(TEST_BIN) all
	S2S_TEST_UNITS_ONLY=1 OPENBLAS_NUM_THREADS=$(TEST_THREADS) OMP_NUM_THREADS=$(TEST_THREADS) S2S_GOLDEN_DIR=$(GOLDEN_DIR) S2S_GOLDEN_CUSTOM=$(GOLDEN_CUSTOM) S2S_BIN_DIR=$(BUILD)/bin \
	  $(TEST_BIN) --filter '$(FAST_FILTER)' $(TEST_ARGS)

test-golden: $(TEST_BIN)
	OPENBLAS_NUM_THREADS=$(TEST_THREADS) OMP_NUM_THREADS=$(TEST_THREADS) S2S_GOLDEN_DIR=$(GOLDEN_DIR) S2S_GOLDEN_CUSTOM=$(GOLDEN_CUSTOM) S2S_BIN_DIR=$(BUILD)/bin \
	  $(TEST_BIN) --filter 'golden*/*' $(TEST_ARGS)

# Throughput against the PyTorch baseline (python3-torch and OpenBLAS's OpenMP build installed
# first, as make test installs its packages); bench/results.jsonl.
bench: all $(BUILD)/bench/dist_bench $(BUILD)/bench/peak
	@bash scripts/deps.sh --with-bench
	bash bench/bench.sh

# Corpora of 29k, 1M and 10M pairs grown from Multi30k, prepared once and trained on: preparation
# time, training peak RSS, time to the first step, tokens/s (bench/bench-data.py); appends to
# bench/results.jsonl
bench-data: all
	python3 bench/bench-data.py $(BUILD)/bin

# ./serve under load: 1 and 64 kept-alive connections against the reversal and Multi30k
# models (BENCH_SERVE_SECONDS each, default 30); appends to bench/results.jsonl
bench-serve: all $(BUILD)/bench/serve_load
	bash bench/bench-serve.sh

# libFuzzer (clang): each target for FUZZ_SECONDS, its corpus in tests/fuzz/corpus/<target>
# (new inputs are kept there; they replay in make test). Crashes land in build/fuzz/.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := config model text state attend bpe safetensors serve prepared
FUZZ_FLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
fuzz: | $(DEPS_STAMP)
	@bash scripts/deps.sh --with-clang
	@mkdir -p build/fuzz
	$(MAKE) --no-print-directory CC=clang BUILD=build/fuzz SANFLAGS="$(FUZZ_FLAGS)" OPT=-O1 build/fuzz/libs2s.a build/fuzz/tests/fuzz/targets.o
	@for t in $(FUZZ_TARGETS); do \
	  clang $(FUZZ_FLAGS) -fsanitize=fuzzer -Iinclude -Itests tests/fuzz/fuzz_$$t.c build/fuzz/tests/fuzz/targets.o \
	    build/fuzz/libs2s.a $(PKG_LIBS) -o build/fuzz/fuzz_$$t || exit 1; \
	  mkdir -p build/fuzz/corpus-$$t; rm -f build/fuzz/fuzz_$$t-crash-* build/fuzz/fuzz_$$t-leak-* build/fuzz/fuzz_$$t-timeout-*; \
	  echo "== fuzz_$$t for $(FUZZ_SECONDS) s"; \
	  (cd build/fuzz && ./fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
	    -artifact_prefix=fuzz_$$t- corpus-$$t ../../tests/fuzz/corpus/$$t > fuzz_$$t.log 2>&1); rc=$$?; \
	  grep -E "^(Done|SUMMARY|==[0-9]+==ERROR)|runtime error" build/fuzz/fuzz_$$t.log; \
	  for c in build/fuzz/fuzz_$$t-crash-* build/fuzz/fuzz_$$t-leak-* build/fuzz/fuzz_$$t-timeout-*; do \
	    [ -f "$$c" ] && cp "$$c" tests/fuzz/corpus/$$t/ && echo "kept $$c in tests/fuzz/corpus/$$t (replays in make test)"; \
	  done; \
	  [ $$rc -eq 0 ] || { echo "fuzz_$$t found a problem: build/fuzz/fuzz_$$t.log"; exit 1; }; \
	done

# ---- installing: programs as s2s-<name>, libs2s.a and libs2s.so (soname libs2s.so.0), the
# headers under include/s2s/, s2s.pc, man pages (scripts/man.sh: docs/man/*.txt and --help) ----
PREFIX ?= /usr/local
DESTDIR ?=
PIC_OBJ := $(LIB_SRC:%.c=$(BUILD)/pic/%.o) $(BUILD)/pic/gen/serve_page.o
$(BUILD)/pic/%.o: %.c $(FLAGS_FILE) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(if $(filter $(HOST_ONLY_DIRS),$(patsubst %/,%,$(dir $<))),-DS2S_HOST_ACCESS_ONLY) -fPIC -MMD -MP -c $< -o $@
$(SO): $(PIC_OBJ)
	$(CC) -shared -Wl,-soname,libs2s.so.$(SO_MAJOR) $(LDFLAGS) $^ $(PKG_LIBS) -o $@
# libmicrohttpd goes in by its -l, not by Requires.private: its .pc would bring gnutls's private
# libraries into a --static link (-lunistring: not installed by its -dev package)
# made anew for each PREFIX (a second install elsewhere got the first one's paths)
$(BUILD)/s2s.pc: include/s2s/common.h Makefile FORCE
	@mkdir -p $(dir $@)
	@printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: s2s\nDescription: %s\nVersion: %s\nRequires: libcjson\nRequires.private: openblas libpng freetype2 zlib\nCflags: -I$${includedir}\nLibs: -L$${libdir} -ls2s\nLibs.private: -lmicrohttpd $(MPI_LIBS) -ldnnl -lgomp -lm -lpthread\n' \
	  '$(PREFIX)' 'sequence-to-sequence models with attention: training and translation' '$(VERSION)' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv -f $@.tmp $@
shared: $(SO)

INSTALLED_PROGRAMS := $(CLIS:%=$(DESTDIR)$(PREFIX)/bin/s2s-%)
# The Python package goes where Debian's python3 looks under PREFIX (/usr/local:
# /usr/local/lib/python3.X/dist-packages); it finds PREFIX/lib/libs2s.so.0 beside it.
PY_SITE = $(PREFIX)/lib/$(shell $(PYTHON) -c 'import sys; print("python%d.%d" % sys.version_info[:2])' 2>/dev/null || echo python3)/dist-packages
install: all $(SO) $(BUILD)/s2s.pc
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/s2s \
	  $(DESTDIR)$(PREFIX)/share/man/man1
	for p in $(CLIS); do install -m 755 $(BUILD)/bin/$$p $(DESTDIR)$(PREFIX)/bin/s2s-$$p || exit 1; done
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libs2s.a
	install -m 755 $(SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libs2s.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libs2s.so.$(SO_MAJOR)
	ln -sf libs2s.so.$(SO_MAJOR) $(DESTDIR)$(PREFIX)/lib/libs2s.so
	install -m 644 include/s2s/*.h $(DESTDIR)$(PREFIX)/include/s2s/
	install -m 644 $(BUILD)/s2s.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/s2s.pc
	install -d $(DESTDIR)$(PREFIX)/share/s2s/configs
	install -m 644 configs/*.json $(DESTDIR)$(PREFIX)/share/s2s/configs/
	for p in $(CLIS); do bash scripts/man.sh $$p $(BUILD)/bin/$$p $(VERSION) \
	  > $(DESTDIR)$(PREFIX)/share/man/man1/s2s-$$p.1 || exit 1; done
	install -d $(DESTDIR)$(PY_SITE)/s2s
	install -m 644 python/s2s/*.py python/s2s/py.typed $(DESTDIR)$(PY_SITE)/s2s/

# the programs' names, for scripts
print-clis:
	@echo $(CLIS)

uninstall:
	rm -f $(INSTALLED_PROGRAMS) $(CLIS:%=$(DESTDIR)$(PREFIX)/share/man/man1/s2s-%.1) \
	  $(DESTDIR)$(PREFIX)/lib/libs2s.a $(DESTDIR)$(PREFIX)/lib/libs2s.so $(DESTDIR)$(PREFIX)/lib/libs2s.so.$(SO_MAJOR) \
	  $(DESTDIR)$(PREFIX)/lib/libs2s.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/pkgconfig/s2s.pc
	rm -rf $(DESTDIR)$(PREFIX)/include/s2s $(DESTDIR)$(PREFIX)/share/s2s $(DESTDIR)$(PY_SITE)/s2s

# An install into a temporary prefix, a program built against it with pkg-config (shared and
# static), translating a line with a model trained here; then uninstall leaves nothing.
test-install: all
	+bash scripts/test-install.sh

clean:
	rm -rf build $(CLIS)

CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
# every object's header dependencies, the side programs' too (a stale dist_check.o once kept
# an older Tape's size)
-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(PIC_OBJ:.o=.d) $(BUILD)/tests/mpi/dist_check.d \
         $(BUILD)/bench/dist_bench.d $(BUILD)/bench/serve_load.d $(BUILD)/bench/peak.d
