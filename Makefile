# cinfer — plain Makefile, out-of-tree build in build/.
#   make            build/cinfer and build/libcinfer.a
#   make test       unit + end-to-end tests (sanitized runner), ends "N passed, N failed, N skipped"
#   make help       all targets
# Quiet unless V=1.

BUILD    ?= build
CC       ?= cc
PREFIX   ?= /usr/local
V        ?= 0
Q        := $(if $(filter 1,$(V)),,@)

# Debian packages the project builds against (DESIGN.md §5), and the tools
# `make test` uses (tmux: chat in a terminal; python3-jsonschema: the grammar
# tests' independent validator; chromium: the web UI test; clang: the CUDA
# sources checked with its CUDA front end, no CUDA toolkit needed).  Node.js >= 20
# and npm (the serve tests) are not among them: Debian 12's nodejs is 18; the
# CI machines ship Node 20 (NodeSource's nodejs, npm included), and `make
# node-check` says whether this machine has it.
DEB_PKGS := build-essential liblua5.4-dev libtcc-dev libcjson-dev libcurl4-openssl-dev \
            libmicrohttpd-dev libxxhash-dev libssl-dev libedit-dev pkg-config tmux python3-jsonschema \
            chromium libsodium-dev dpkg-dev python3-jinja2 clang \
            gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
# arm64 static archives for aarch64 bundles (dpkg --add-architecture arm64 first: make deps does it)
DEB_PKGS_ARM64 := libc6:arm64 libsodium-dev:arm64 libxxhash-dev:arm64 libedit-dev:arm64 libbsd-dev:arm64 \
                  libncurses-dev:arm64 libmd-dev:arm64
NODE_MIN := 20

WARN     := -Wall -Wextra -Werror -Wno-unused-parameter
CSTD     := -std=c11 -D_GNU_SOURCE
DEPFLAGS  = -MMD -MP
INCLUDES := -Iinclude -Itemplates -Iruntime -I. -I/usr/include/lua5.4 -I/usr/include/cjson
OPT      ?= -O2 -g
# compile.c links standalone executables with the same libraries.
# -ffunction-sections/-fdata-sections: bundles link libcinfer.a with --gc-sections,
# keeping only what their main reaches (no compiler, Lua, libtcc, curl).
CFLAGS_ALL = $(CSTD) $(OPT) $(WARN) $(INCLUDES) -fPIC -ffunction-sections -fdata-sections -DCINFER_LINK_LIBS='"$(LIBS)"' $(CFLAGS)
LIBS     := -llua5.4 -ltcc -lcjson -lxxhash -lcurl -lcrypto -lmicrohttpd -ledit -lsodium -ldl -lpthread -lm
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# *_neon.c / *_dotprod.c are aarch64's SIMD leaves: built only by `make aarch64`.
ARM_ONLY     := %_neon.c %_dotprod.c
RUNTIME_SRC  := $(filter-out $(ARM_ONLY),$(wildcard runtime/*/*.c))
COMPILER_SRC := $(wildcard compiler/*.c)
CLI_SRC      := $(wildcard cli/*.c)
TEST_SRC     := $(wildcard tests/*.c)
LIB_SRC      := $(RUNTIME_SRC) $(COMPILER_SRC) $(filter-out cli/main.c,$(CLI_SRC))
# Archspecs, templates and the web UI page are embedded in the binary (single-file deploy).
EMBED_SRC    := $(wildcard archspecs/*.lua) $(wildcard templates/*.h) $(wildcard templates/*.in) runtime/server/webui/index.html \
                $(wildcard runtime/kernels/cuda/*.cuh) $(wildcard runtime/kernels/cuda/*.h)

# SIMD kernels get their ISA flags per file; the rest stays portable and the
# runtime picks the kernel table from CPU features at start-up.
AVX2_FLAGS := -mavx2 -mfma -mf16c
# *_vnni.c / *_avx512.c: AVX-512 (kern_r8_vnni.c, kern_att_avx512.c), CPUID-gated at run time;
# *_avx512bf16.c also AVX512_BF16 (kern_half_avx512bf16.c).
VNNI_FLAGS := $(AVX2_FLAGS) -mavx512f -mavx512bw -mavx512vl -mavx512vnni
ISA_FLAGS   = $(if $(findstring _avx2,$<),$(AVX2_FLAGS))$(if $(findstring _vnni,$<),$(VNNI_FLAGS))$(if $(findstring _avx512,$<),$(VNNI_FLAGS))$(if $(findstring _avx512bf16,$<), -mavx512bf16)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/embedded.o
CLI_OBJ  := $(BUILD)/cli/main.o
SAN_OBJ  := $(LIB_SRC:%.c=$(BUILD)/san/%.o) $(BUILD)/san/gen/embedded.o $(TEST_SRC:%.c=$(BUILD)/san/%.o)

.PHONY: san-cli bundle-deps deb-pkgs-arm64 aarch64 test-aarch64 bench-bundle
.PHONY: all test check check-layout demo deps deb-pkgs node-check golden fuzz bench clean help install unicode bench-tok \
        bench-matmul fuzz-hf fuzz-tokjson bench-grammar test-grammar-full fuzz-schema arch-models arch-models-quant arch-refs \
        tok-refs tok-vocabs bench-ssm bench-decode bench-att
all: $(BUILD)/cinfer $(BUILD)/libcinfer.a

# ---- dependency check -----------------------------------------------------
# Fails with the install line instead of a compiler error when a header is missing.
HEADERS := lua5.4/lua.h libtcc.h cjson/cJSON.h xxhash.h editline/readline.h
$(BUILD)/.deps-ok:
	@missing=""; for h in $(HEADERS); do \
	  printf '#include <%s>\n' $$h | $(CC) -E -x c - >/dev/null 2>&1 || missing="$$missing $$h"; done; \
	if [ -n "$$missing" ]; then \
	  echo "cinfer: missing headers:$$missing"; \
	  echo "  run 'make deps' (as root), or: sudo apt-get install -y $(DEB_PKGS)"; exit 1; fi
	@mkdir -p $(BUILD) && touch $@

deb-pkgs:
	@echo $(DEB_PKGS)

deb-pkgs-arm64:
	@echo $(DEB_PKGS_ARM64)

deps:
	@if [ "$$(id -u)" = 0 ]; then dpkg --add-architecture arm64 && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEB_PKGS) $(DEB_PKGS_ARM64); \
	else echo "run as root, or: sudo dpkg --add-architecture arm64 && sudo apt-get update && sudo apt-get install -y $(DEB_PKGS) $(DEB_PKGS_ARM64)"; fi
	@$(MAKE) -s node-check || true

# Static archives bundles need that Debian ships only as shared libraries
# (cJSON; libmicrohttpd without GnuTLS), from Debian's source packages, for
# x86_64 and aarch64 (tools/bundle_deps.sh; network: an install step).
bundle-deps:
	@BUILD=$(BUILD) CC="$(CC)" sh tools/bundle_deps.sh

# Node.js >= $(NODE_MIN) and npm for the serve tests (tests/serve; `make serve-deps`).
node-check:
	@v=$$(node --version 2>/dev/null); m=$${v#v}; m=$${m%%.*}; \
	if [ -z "$$v" ]; then echo "cinfer: node not found: the serve tests need Node.js >= $(NODE_MIN) and npm" \
	  "(Debian 12's nodejs is 18: install Node $(NODE_MIN), e.g. NodeSource's nodejs $(NODE_MIN).x, which includes npm)"; exit 1; \
	elif [ "$$m" -lt $(NODE_MIN) ] 2>/dev/null || ! [ "$$m" -eq "$$m" ] 2>/dev/null; then \
	  echo "cinfer: node $$v is too old: the serve tests need Node.js >= $(NODE_MIN)" \
	  "(Debian 12's nodejs is 18: install Node $(NODE_MIN), e.g. NodeSource's nodejs $(NODE_MIN).x, which includes npm)"; exit 1; \
	elif ! command -v npm >/dev/null; then echo "cinfer: node $$v but no npm: make serve-deps needs npm"; exit 1; \
	else echo "node $$v, npm $$(npm --version)"; fi

# ---- objects ----------------------------------------------------------------
$(BUILD)/%.o: %.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS_ALL) $(ISA_FLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/san/%.o: %.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC san  $<")
	$(Q)$(CC) $(CSTD) -O1 -g $(WARN) $(INCLUDES) -fPIC -DCINFER_LINK_LIBS='"$(LIBS)"' $(SAN) $(CFLAGS) $(ISA_FLAGS) \
	  -DCINFER_TEST_BUILD $(DEPFLAGS) -c $< -o $@

$(BUILD)/tools/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O2 -o $@ $<

$(BUILD)/gen/embedded.c: $(EMBED_SRC) $(BUILD)/tools/embed
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  EMBED   $@")
	$(Q)$(BUILD)/tools/embed $@ $(foreach f,$(EMBED_SRC),$(f)=$(f))

$(BUILD)/gen/%.o: $(BUILD)/gen/%.c
	$(Q)$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/san/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/libcinfer.a: $(LIB_OBJ)
	$(if $(Q),@echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/cinfer: $(CLI_OBJ) $(BUILD)/libcinfer.a
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) -rdynamic -o $@ $(CLI_OBJ) $(BUILD)/libcinfer.a $(LIBS)

# The test runner links the sanitized library, the CLI commands (not main) and the tests.
$(BUILD)/test_runner: $(SAN_OBJ)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) $(SAN) -rdynamic -o $@ $^ $(LIBS)

# The CLI built like the test runner (ASan + UBSan), for hostile-input
# reproducers and fuzz findings: make san-cli, then build/san/cinfer ARGS.
$(BUILD)/san/cinfer: $(LIB_SRC:%.c=$(BUILD)/san/%.o) $(BUILD)/san/gen/embedded.o $(BUILD)/san/cli/main.o
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) $(SAN) -rdynamic -o $@ $^ $(LIBS)
san-cli: $(BUILD)/san/cinfer

# The 40-line embedding example, built against the library like a user would.
$(BUILD)/examples/embed: examples/embed/main.c include/cinfer.h $(BUILD)/libcinfer.a
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) $(CSTD) -O2 -Wall -Wextra -Werror -Iinclude -o $@ $< $(BUILD)/libcinfer.a $(LIBS)

VERSION := $(shell sed -n 's/^#define CINFER_VERSION "\(.*\)"/\1/p' include/cinfer.h)
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 755 $(BUILD)/cinfer $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/libcinfer.a $(DESTDIR)$(PREFIX)/lib/
	install -m 644 include/cinfer.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@LIBS@|$(LIBS)|' \
	  cinfer.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/cinfer.pc
	@# what `cinfer bundle` links (lib/cinfer/: the runtime per target and the
	@# static deps of make bundle-deps), when they were built
	install -d $(DESTDIR)$(PREFIX)/lib/cinfer
	install -m 644 $(BUILD)/libcinfer.a $(DESTDIR)$(PREFIX)/lib/cinfer/
	for t in x86_64 aarch64; do for a in libcjson.a libmicrohttpd.a; do \
	  if [ -f $(BUILD)/deps/$$t/$$a ]; then install -d $(DESTDIR)$(PREFIX)/lib/cinfer/deps/$$t && \
	    install -m 644 $(BUILD)/deps/$$t/$$a $(DESTDIR)$(PREFIX)/lib/cinfer/deps/$$t/; fi; done; done
	if [ -f $(A64)/libcinfer.a ]; then install -d $(DESTDIR)$(PREFIX)/lib/cinfer/aarch64 && \
	  install -m 644 $(A64)/libcinfer.a $(DESTDIR)$(PREFIX)/lib/cinfer/aarch64/; fi

# ---- aarch64 (cross-compiled; bundles for 64-bit ARM) --------------------------
# build/aarch64/libcinfer.a: the runtime and the CLI a bundle links (no
# compiler, no Lua/libtcc, no curl: not the Hugging Face mapping tables
# either, formats/hf_map.c), built with aarch64-linux-gnu-gcc; the
# x86 SIMD files are left out and the NEON ones in (*_dotprod.c with
# +dotprod, run only where the CPU has it).  `cinfer bundle --target aarch64`
# links against it.  make test-aarch64 runs the kernel tests (NEON vs the
# scalar reference, both dotprod and plain) under qemu-user and the aarch64
# bundle tests (text and logits vs x86).
A64_CC    ?= aarch64-linux-gnu-gcc
A64       := $(BUILD)/aarch64
A64_SRC   := $(filter-out %_avx2.c %_vnni.c %_avx512.c %_avx512bf16.c runtime/hub/pull.c runtime/formats/hf_map.c,$(wildcard runtime/*/*.c)) \
             cli/bundled.c cli/run.c cli/chat.c cli/serve.c cli/common.c
A64_OBJ   := $(A64_SRC:%.c=$(A64)/%.o) $(A64)/gen/embedded.o
A64_ISA    = $(if $(findstring _dotprod,$<),-march=armv8.2-a+dotprod)
A64_CFLAGS = $(CSTD) -O2 -g $(WARN) $(INCLUDES) -fPIC -ffunction-sections -fdata-sections
# test_kern_scratch needs the CINFER_TEST_BUILD hooks, which the release
# library the bundles link lacks
A64_TESTS := tests/runner.c $(filter-out tests/test_kern_scratch.c,$(wildcard tests/test_kern*.c)) tests/test_pool.c
# the arm64 C library of the multiarch libc6:arm64 (/lib/ld-linux-aarch64.so.1): with the
# cross toolchain's older copy (-L /usr/aarch64-linux-gnu) pthread_create hangs under qemu 7.2
QEMU_A64  ?= qemu-aarch64

$(A64)/%.o: %.c
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC a64  $<")
	$(Q)$(A64_CC) $(A64_CFLAGS) $(A64_ISA) $(DEPFLAGS) -c $< -o $@
$(A64)/gen/embedded.o: $(BUILD)/gen/embedded.c
	@mkdir -p $(dir $@)
	$(Q)$(A64_CC) $(A64_CFLAGS) -c $< -o $@
$(A64)/libcinfer.a: $(A64_OBJ)
	$(if $(Q),@echo "  AR      $@")
	$(Q)rm -f $@ && $(A64_CC:gcc=ar) rcs $@ $^
aarch64: $(A64)/libcinfer.a

$(A64)/test_kern: $(A64_TESTS:%.c=$(A64)/%.o) $(A64)/libcinfer.a $(BUILD)/deps/aarch64/libcjson.a
	$(if $(Q),@echo "  LD a64  $@")
	$(Q)$(A64_CC) -Wl,--gc-sections -o $@ $(A64_TESTS:%.c=$(A64)/%.o) $(A64)/libcinfer.a \
	  $(BUILD)/deps/aarch64/libcjson.a -Wl,-Bstatic -lxxhash -Wl,-Bdynamic -lm -lpthread
$(BUILD)/deps/aarch64/libcjson.a:
	@echo "no $@: run make bundle-deps"; exit 1

test-aarch64: $(A64)/test_kern $(BUILD)/test_runner $(BUILD)/cinfer
	@echo "  kernels under $(QEMU_A64): NEON (plain and dotprod) vs the scalar reference"
	@CINFER_BUILD=$(BUILD) $(QEMU_A64) $(A64)/test_kern kern pool
	@echo "  aarch64 bundles under qemu-user vs x86 (text, logits)"
	@CINFER_BIN=$(BUILD)/cinfer CINFER_BUILD=$(BUILD) QEMU_A64="$(QEMU_A64)" $(BUILD)/test_runner bundle_aarch64

# ---- targets ---------------------------------------------------------------
# an aarch64 runtime already built (make aarch64) is brought up to date: the
# bundle_aarch64 tests link against it, and a stale one from an older ABI crashes
test: $(BUILD)/test_runner $(BUILD)/cinfer $(BUILD)/libcinfer.a $(BUILD)/examples/embed $(BUILD)/tools/archgen \
      $(BUILD)/bench_gram $(if $(wildcard $(A64)/libcinfer.a),$(A64)/libcinfer.a)
	@CINFER_BIN=$(BUILD)/cinfer CINFER_BUILD=$(BUILD) CINFER_SHARED=$(SHARED) ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(BUILD)/test_runner $(T)

check: test

# The layers of docs/architecture.md: includes and (from the built objects)
# calls only go down; also run by make test (tests/test_layout.c).
check-layout: $(BUILD)/libcinfer.a $(BUILD)/cinfer
	@python3 tools/check_layout.py --objects $(BUILD)

MODEL_DEFAULT := ../shared/models/stories260K/stories260K.gguf
demo: $(BUILD)/cinfer
	@m="$${CINFER_MODEL:-}"; [ -f "$(MODEL_DEFAULT)" ] && m="$(MODEL_DEFAULT)"; \
	if [ -z "$$m" ]; then echo "make demo: no model. Put one at $(MODEL_DEFAULT) or set CINFER_MODEL=/path/to/model.gguf"; exit 1; fi; \
	$(BUILD)/cinfer run "$$m" -p "Once upon a time" -n 200 --temp 0.8 --seed 42

# Golden emitted sources (tests diff fresh output against them).
SHARED ?= ../shared
GOLDEN := stories260K=$(SHARED)/models/stories260K/stories260K.gguf \
          TinyStories-656K-Q8_0=$(SHARED)/models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf
golden: $(BUILD)/cinfer
	@mkdir -p generated
	@for g in $(GOLDEN); do n=$${g%%=*}; m=$${g#*=}; \
	  if [ -f "$$m" ]; then $(BUILD)/cinfer compile "$$m" --emit-c generated/$$n.c && echo "  GOLDEN  generated/$$n.c" && \
	    $(BUILD)/cinfer compile "$$m" --device cuda --emit-c generated/$$n.cu && echo "  GOLDEN  generated/$$n.cu"; \
	  else echo "  skip $$n: $$m absent"; fi; done

# The CUDA checks at full length (docs/cuda.md), not part of make test: the
# CUDA sources through NVRTC for every architecture in CUDA_ARCHS (where
# this machine has NVRTC: a CUDA toolkit or its redistributable; no GPU
# needed), and every model of the kernel emulation (the real kernels run on
# the CPU against the CPU path).
CUDA_ARCHS ?= 75 80 86 89 90 120
.PHONY: check-cuda
check-cuda: $(BUILD)/test_runner $(BUILD)/cinfer $(BUILD)/tools/archgen
	@CINFER_BIN=$(BUILD)/cinfer CINFER_BUILD=$(BUILD) CINFER_SHARED=$(SHARED) CINFER_CUDA_ARCHS="$(CUDA_ARCHS)" \
	  CINFER_CUDA_EXEC_ALL=1 ASAN_OPTIONS=detect_leaks=1 $(BUILD)/test_runner cuda

# ---- architecture test models ---------------------------------------------------
# tools/archgen.c writes one small random-weight F32 GGUF per model family
# (every family llama.cpp's loader is checked on: `build/tools/archgen --list`)
# to $(BUILD)/arch-models/<name>.gguf, bit-for-bit the files whose llama.cpp
# references are committed in tests/data/arch/ (README there).  Not committed:
# tests and `make arch-models` regenerate them.  -ffp-contract=off: no fused
# multiply-adds (the weights are rounded once, identically everywhere).
ARCH_VOCAB := $(SHARED)/models/stories260K/stories260K.gguf
$(BUILD)/tools/archgen: tools/archgen.c
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $@")
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra -Werror -ffp-contract=off -o $@ $< -lm
$(BUILD)/arch-models/.stamp: $(BUILD)/tools/archgen
	@[ -f "$(ARCH_VOCAB)" ] || { echo "make arch-models: needs the vocabulary $(ARCH_VOCAB) (../shared)"; exit 1; }
	$(if $(Q),@echo "  ARCHGEN $(BUILD)/arch-models")
	$(Q)$(BUILD)/tools/archgen -o $(BUILD)/arch-models --vocab-from $(ARCH_VOCAB) >/dev/null
	@touch $@
arch-models: $(BUILD)/arch-models/.stamp
# Q8_0 and Q4_0 variants (the quantized references' files), made by cinfer quantize:
# $(BUILD)/arch-models/q8_0/<name>.gguf and q4_0/<name>.gguf (and gpt-oss's MXFP4-experts
# variant in mxfp4_moe/)
arch-models-quant: $(BUILD)/arch-models/.stamp $(BUILD)/cinfer
	@for t in q8_0 q4_0; do mkdir -p $(BUILD)/arch-models/$$t; \
	  for f in $(BUILD)/arch-models/*.gguf; do n=$$(basename $$f); \
	    $(BUILD)/cinfer quantize $$f $(BUILD)/arch-models/$$t/$$n --type $$t >/dev/null 2>&1 || \
	      { echo "cinfer quantize $$f --type $$t failed"; exit 1; }; done; done
	@mkdir -p $(BUILD)/arch-models/mxfp4_moe && $(BUILD)/cinfer quantize $(BUILD)/arch-models/gpt-oss.gguf \
	  $(BUILD)/arch-models/mxfp4_moe/gpt-oss.gguf --type mxfp4_moe >/dev/null 2>&1 || \
	  { echo "cinfer quantize gpt-oss --type mxfp4_moe failed"; exit 1; }
	@echo "  QUANT   $(BUILD)/arch-models/q8_0 $(BUILD)/arch-models/q4_0 $(BUILD)/arch-models/mxfp4_moe (gpt-oss)"
# Regenerate tests/data/arch from llama.cpp (tools/arch-refs.sh; needs the peer
# build, see tests/data/arch/README.md).  ARCH_REFS="name ..." limits it to some families.
arch-refs: $(BUILD)/tools/archgen $(BUILD)/cinfer
	@BUILD=$(BUILD) SHARED=$(SHARED) CC="$(CC)" sh tools/arch-refs.sh $(ARCH_REFS)
# llama.cpp's tokenizer test vocabularies that tok_fam reads (Gemma 4, Command R,
# XLM-RoBERTa's UGM) into $(BUILD)/llama-vocab, from the llama.cpp source the npm
# package node-llama-cpp ships (tools/tok_vocabs.sh; an install step, .ci/run runs it).
tok-vocabs: $(BUILD)/llama-vocab/ggml-vocab-nomic-bert-moe.gguf
$(BUILD)/llama-vocab/ggml-vocab-nomic-bert-moe.gguf: tools/tok_vocabs.sh
	@BUILD=$(BUILD) sh tools/tok_vocabs.sh
# Regenerate tests/data/tok (llama.cpp's ids for the new tokenizers and
# pre-tokenizers; tools/tok-refs.sh, tests/data/tok/README.md).
tok-refs: $(BUILD)/libcinfer.a
	@BUILD=$(BUILD) SHARED=$(SHARED) CC="$(CC)" sh tools/tok-refs.sh

# ---- bench -------------------------------------------------------------------
# Benchmarks, never part of `make test` (tools/bench.sh says what it does):
# llama-shape models of 336M, 1.2B (Llama-3.2-1B's shape) and 6.7B
# (Llama-2-7B's shape) parameters, the 336M one again with a 32k context for
# the depth curves, a qwen2moe MoE (all made with ../shared/tools/mkmodel) and
# a Granite-4.0-H-1B-like hybrid made with tools/archgen.c (--bench), under
# $(BUILD)/bench or BENCH_DIR (not committed), quantized with `cinfer
# quantize`, then `cinfer bench` and the peer (llama.cpp's native llama-bench,
# else node-llama-cpp) on the same files and threads, interleaved, with ratios
# and the fraction of the memory-bandwidth bound at 1 and 2 threads, and pp/tg
# at depth 0/4096/16384 against llama-bench -fa 0 and -fa 1.  BENCH_MODELS
# (default "dense dense1b dense7b depth"; also moe, hybrid) picks the parts;
# BENCH_DIR, BENCH_TYPES, BENCH_1B_TYPES, BENCH_7B_TYPES, BENCH_DEPTH_TYPES,
# BENCH_DEPTHS, BENCH_MOE_TYPES, BENCH_HYBRID_TYPES, BENCH_P, BENCH_N,
# BENCH_R, BENCH_R_LARGE, BENCH_ROUNDS, BENCH_THREADS, BENCH_TG_THREADS,
# LLAMA_BENCH, PEER_DIR override the defaults.
bench: $(BUILD)/cinfer $(BUILD)/tools/archgen $(BUILD)/bench_ssm
	@BUILD=$(BUILD) SHARED=$(SHARED) CC="$(CC)" sh tools/bench.sh

# Bundle start-up and heap (tools/bench_bundle.sh): process start -> first token
# of a 336M Q4_0 bundle vs cinfer run --aot and llama.cpp's llama-bench.
bench-bundle: $(BUILD)/cinfer
	@BUILD=$(BUILD) SHARED=$(SHARED) CC="$(CC)" sh tools/bench_bundle.sh

# The recurrent-layer kernels on realistic shapes (tools/bench_ssm.c): the chunked
# gated delta rule against the recurrence, the Mamba-2/Mamba-1 scans, the conv:
# make bench-ssm BENCH_SSM_ARGS="-t 2 -n 512".
BENCH_SSM_ARGS ?= -t 2 -n 512
$(BUILD)/bench_ssm: tools/bench_ssm.c tools/bench_util.h $(BUILD)/libcinfer.a
	$(Q)$(CC) $(CFLAGS_ALL) -o $@ tools/bench_ssm.c $(BUILD)/libcinfer.a $(LIBS)
bench-ssm: $(BUILD)/bench_ssm
	@$(BUILD)/bench_ssm $(BENCH_SSM_ARGS)

# One matmul per bench-model shape, native vs row-interleaved (tools/bench_matmul.c):
# make bench-matmul BENCH_MM_ARGS="-t 2 -n 512" (-f: f32 activations, -i avx2|vnni|scalar).
BENCH_MM_ARGS ?= -t 2 -n 512
$(BUILD)/bench_matmul: tools/bench_matmul.c tools/bench_util.h $(BUILD)/libcinfer.a
	$(Q)$(CC) $(CFLAGS_ALL) -o $@ tools/bench_matmul.c $(BUILD)/libcinfer.a $(LIBS)
bench-matmul: $(BUILD)/bench_matmul
	@$(BUILD)/bench_matmul $(BENCH_MM_ARGS)

# Decode matmuls against the read bandwidth, alternating in one process
# (tools/bench_decode.c): make bench-decode BENCH_DEC_ARGS="-t 1 -q q4_k_m".
BENCH_DEC_ARGS ?= -t 1 -q q4_0
$(BUILD)/bench_decode: tools/bench_decode.c tools/bench_util.h $(BUILD)/libcinfer.a
	$(Q)$(CC) $(CFLAGS_ALL) -o $@ tools/bench_decode.c $(BUILD)/libcinfer.a $(LIBS)
bench-decode: $(BUILD)/bench_decode
	@$(BUILD)/bench_decode $(BENCH_DEC_ARGS)

# One attention call at a cache depth (tools/bench_att.c):
# make bench-att BENCH_ATT_ARGS="-t 2 -p 512 -d 4096 -w 1024 -c q8_0".
BENCH_ATT_ARGS ?= -t 2 -p 512 -d 4096
$(BUILD)/bench_att: tools/bench_att.c tools/bench_util.h $(BUILD)/libcinfer.a
	$(Q)$(CC) $(CFLAGS_ALL) -o $@ tools/bench_att.c $(BUILD)/libcinfer.a $(LIBS)
bench-att: $(BUILD)/bench_att
	@$(BUILD)/bench_att $(BENCH_ATT_ARGS)

# Tokenizer throughput (tests/bench_tok.c, -O2, not sanitized): 1 MiB of mixed text.
$(BUILD)/bench_tok: tests/bench_tok.c $(BUILD)/libcinfer.a
	$(Q)$(CC) $(CFLAGS_ALL) -o $@ tests/bench_tok.c $(BUILD)/libcinfer.a $(LIBS)
bench-tok: $(BUILD)/bench_tok
	@CINFER_SHARED=$(SHARED) $(BUILD)/bench_tok

# Structured output (tests/test_gram_bench.c + test_gram_gen.c, -O2, not
# sanitized): JSON-Schema-Test-Suite table, the JSONSchemaBench sample,
# Qwen3 mask timing, 100-seed generation per schema and model (docs/benchmarks.md).
BENCH_GRAM_SRC := tests/test_gram_bench.c tests/test_gram_gen.c tests/test_gram_diff.c
$(BUILD)/bench_gram: $(BENCH_GRAM_SRC) tests/test_gram_diff.h $(BUILD)/libcinfer.a
	$(Q)$(CC) $(CFLAGS_ALL) -Itests -o $@ $(BENCH_GRAM_SRC) $(BUILD)/libcinfer.a $(LIBS)
bench-grammar: $(BUILD)/bench_gram $(BUILD)/test_runner $(BUILD)/cinfer
	@CINFER_GRAM_REPORT=1 CINFER_BIN=$(BUILD)/cinfer $(BUILD)/test_runner gram_suite
	@CINFER_SHARED=$(SHARED) $(BUILD)/bench_gram all

# Everything the grammar tests sample in `make test`, in full: the differential
# test with 64 mutants per valid instance and flexible whitespace on every
# schema, the generation stress test on every schema (512 tokens), and every
# schema as response_format through cinfer serve.  Tens of minutes.
test-grammar-full: $(BUILD)/bench_gram $(BUILD)/test_runner $(BUILD)/cinfer
	@CINFER_SHARED=$(SHARED) $(BUILD)/bench_gram diff 64 1
	@CINFER_SHARED=$(SHARED) $(BUILD)/bench_gram stress 1 512
	@CINFER_BIN=$(BUILD)/cinfer CINFER_BUILD=$(BUILD) CINFER_GRAM_SERVE_STRIDE=1 $(BUILD)/test_runner gram_diff/serve_every_schema

# ---- embedding references ---------------------------------------------------
# tests/data/embed/qwen3-chat.json: llama.cpp's raw embeddings (mean, cls,
# last and every token's row) of the Qwen3 chat test model, from
# tools/ref_embed.c built against the peer's libllama (node-llama-cpp's
# prebuilt CPU libraries, llama.h from its llama.cpp source;
# ../shared/tools/refgen/README.md sets both up under PEER); stories260K's are
# tests/data/arch/stories260K-embeddings.json (make arch-refs).  Committed;
# `make test` only reads them.  make embed-refs PEER=DIR
PEER      ?= peer
PEER_BINS ?= $(PEER)/nlc/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
PEER_SRC  ?= $(PEER)/llama-src
EMBED_TEXTS := -p "Once upon a time, there was a little dog who liked to run." -p "The sun was hot." \
               -p "Lily and Max went to the park. They saw a big red ball and played all day."
.PHONY: embed-refs
embed-refs:
	@mkdir -p $(BUILD)/tools tests/data/embed
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra -Werror -o $(BUILD)/tools/ref_embed tools/ref_embed.c \
	  -I$(PEER_SRC)/include -I$(PEER_SRC)/ggml/include $(firstword $(filter-out %common.so,$(wildcard $(PEER_BINS)/libllama*.so))) \
	  $(wildcard $(PEER_BINS)/libggml.*so) $(PEER_BINS)/libggml-base.so -Wl,-rpath,$(abspath $(PEER_BINS))
	cd $(SHARED) && $(abspath $(BUILD))/tools/ref_embed -m models/chat/qwen3-chat.gguf $(EMBED_TEXTS) \
	  --pooling mean,cls,last,none --backend-dir $(abspath $(PEER_BINS)) > $(abspath tests/data/embed)/qwen3-chat.json

# ---- unicode -----------------------------------------------------------------
# runtime/text/unicode_data.c is generated from the Unicode Character Database
# (Debian's unicode-data package, UCD_DIR) and committed, so builds need
# neither; `make unicode` regenerates it.
UCD_DIR ?= /usr/share/unicode
unicode: tools/gen_unicode.c
	@mkdir -p $(BUILD)/tools
	$(Q)$(CC) -O2 -Wall -Wextra -Werror -o $(BUILD)/tools/gen_unicode tools/gen_unicode.c
	$(Q)$(BUILD)/tools/gen_unicode $(UCD_DIR) > $(BUILD)/unicode_data.c && mv $(BUILD)/unicode_data.c runtime/text/unicode_data.c

# ---- fuzz --------------------------------------------------------------------
# libFuzzer (clang) on the model-file parsers: $(BUILD)/fuzz/fuzz_gguf, run for
# FUZZ_SECONDS on a seed corpus built under $(BUILD)/fuzz/corpus (never
# committed): tiny mkmodel models of several architectures and types, and the
# first 64 KiB (header, metadata, tensor table) of every ../shared .gguf and
# .safetensors.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 600
FUZZ_DIR     := $(BUILD)/fuzz
# (modelfile.c opens Hugging Face folders: hf.c and the embedded mapping tables come along)
FUZZ_LIB     := runtime/base/ggml_type.c runtime/base/specfile.c runtime/formats/gguf.c runtime/formats/gguf_write.c \
                runtime/formats/safetensors.c runtime/formats/hf.c runtime/formats/hf_map.c runtime/formats/modelfile.c
$(FUZZ_DIR)/fuzz_gguf: fuzz/fuzz_gguf.c $(FUZZ_LIB) $(wildcard $(FUZZ_LIB:.c=.h)) $(BUILD)/gen/embedded.c
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  FUZZ    $@")
	$(Q)$(FUZZ_CC) $(CSTD) -O1 -g $(WARN) $(INCLUDES) -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined -o $@ fuzz/fuzz_gguf.c $(FUZZ_LIB) $(BUILD)/gen/embedded.c \
	  -llua5.4 -lcjson -lxxhash -lm
$(FUZZ_DIR)/corpus/.seeded:
	@mkdir -p $(FUZZ_DIR)/corpus
	@if [ -f $(SHARED)/tools/mkmodel.c ] && $(CC) -O2 -o $(FUZZ_DIR)/mkmodel $(SHARED)/tools/mkmodel.c -lm; then \
	  for a in llama qwen3 gemma2 mamba gpt2; do for t in q4_0 q8_0 f16; do $(FUZZ_DIR)/mkmodel -o $(FUZZ_DIR)/corpus/mk-$$a-$$t.gguf \
	    --arch $$a --dim 32 --layers 1 --heads 2 --ffn 32 --ctx 64 --vocab 286 --type $$t >/dev/null 2>&1; done; done; fi
	@find $(SHARED)/models $(SHARED)/vocab -name '*.gguf' -o -name '*.safetensors' 2>/dev/null | while read -r f; do \
	  head -c 65536 "$$f" > "$(FUZZ_DIR)/corpus/head-$$(basename "$$f")"; done
	@printf '\216\0\0\0\0\0\0\0{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},%s' \
	  '"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]}}123456789012' > $(FUZZ_DIR)/corpus/tiny.safetensors
	@touch $@
# Hugging Face folders (fuzz/fuzz_hf.c: the input cut into config.json, index, safetensors, ...),
# seeded with the TinyStories folder's config and small checkpoints (plain, sharded, GPTQ)
FUZZ_HF_LIB := runtime/base/ggml_type.c runtime/base/specfile.c runtime/formats/gguf.c runtime/formats/gguf_write.c \
               runtime/formats/safetensors.c runtime/formats/hf.c runtime/formats/hf_map.c
$(FUZZ_DIR)/fuzz_hf: fuzz/fuzz_hf.c $(FUZZ_HF_LIB) $(wildcard $(FUZZ_HF_LIB:.c=.h)) $(BUILD)/gen/embedded.c
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  FUZZ    $@")
	$(Q)$(FUZZ_CC) $(CSTD) -O1 -g $(WARN) $(INCLUDES) -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined -o $@ fuzz/fuzz_hf.c $(FUZZ_HF_LIB) $(BUILD)/gen/embedded.c \
	  -llua5.4 -lcjson -lxxhash -lm
fuzz-hf: $(FUZZ_DIR)/fuzz_hf
	@mkdir -p $(FUZZ_DIR)/corpus-hf
	@sh fuzz/hf_seeds.sh $(FUZZ_DIR)/corpus-hf $(SHARED)
	$(FUZZ_DIR)/fuzz_hf -max_len=65536 -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus-hf
# tokenizer.json loading (fuzz/fuzz_tokjson.c: raw JSON, or JSON built from the input's bytes)
FUZZ_TOK_LIB := $(wildcard runtime/text/tok*.c) runtime/text/unicode.c runtime/text/unicode_data.c runtime/formats/gguf.c runtime/base/ggml_type.c
$(FUZZ_DIR)/fuzz_tokjson: fuzz/fuzz_tokjson.c $(FUZZ_TOK_LIB) $(wildcard runtime/text/*.h)
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(CSTD) -O1 -g $(WARN) $(INCLUDES) -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined -o $@ fuzz/fuzz_tokjson.c $(FUZZ_TOK_LIB) -lcjson -lxxhash -lm
# the JSON Schema compiler, matcher and masks (fuzz/fuzz_schema.c), seeded with every schema of
# ../shared/jsonschemabench (and its first valid instance) and the JSON-Schema-Test-Suite's schemas
FUZZ_SCHEMA_LIB := $(wildcard runtime/grammar/gram_*.c) $(FUZZ_TOK_LIB)
$(FUZZ_DIR)/fuzz_schema: fuzz/fuzz_schema.c $(FUZZ_SCHEMA_LIB) $(wildcard runtime/grammar/*.h)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  FUZZ    $@")
	$(Q)$(FUZZ_CC) $(CSTD) -O1 -g $(WARN) $(INCLUDES) -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined -o $@ fuzz/fuzz_schema.c $(FUZZ_SCHEMA_LIB) -lcjson -lxxhash -lm -lpthread
$(FUZZ_DIR)/corpus-schema/.seeded:
	@mkdir -p $(FUZZ_DIR)/corpus-schema
	@python3 tools/fuzz_schema_seeds.py $(SHARED) $(FUZZ_DIR)/corpus-schema
	@touch $@
fuzz-schema: $(FUZZ_DIR)/fuzz_schema $(FUZZ_DIR)/corpus-schema/.seeded
	$(FUZZ_DIR)/fuzz_schema -max_len=65536 -max_total_time=$(FUZZ_SECONDS) -timeout=30 -rss_limit_mb=4096 \
	  -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus-schema
fuzz-tokjson: $(FUZZ_DIR)/fuzz_tokjson
	@mkdir -p $(FUZZ_DIR)/corpus-tokjson
	$(FUZZ_DIR)/fuzz_tokjson -max_len=8192 -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus-tokjson
# chat templates (fuzz/fuzz_chat.c: the input is a Jinja template), seeded with ../shared/chat-templates
FUZZ_CHAT_LIB := runtime/text/chat.c runtime/text/jinja.c runtime/formats/gguf.c runtime/base/ggml_type.c
$(FUZZ_DIR)/fuzz_chat: fuzz/fuzz_chat.c $(FUZZ_CHAT_LIB) runtime/text/chat.h runtime/text/jinja.h runtime/formats/gguf.h
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(CSTD) -O1 -g $(WARN) $(INCLUDES) -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined -o $@ fuzz/fuzz_chat.c $(FUZZ_CHAT_LIB) -lcjson -lxxhash -lm
fuzz-chat: $(FUZZ_DIR)/fuzz_chat
	@mkdir -p $(FUZZ_DIR)/corpus-chat
	@cp $(SHARED)/chat-templates/*.jinja $(FUZZ_DIR)/corpus-chat/ 2>/dev/null || true
	$(FUZZ_DIR)/fuzz_chat -max_len=16384 -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus-chat
# server request bodies (fuzz/fuzz_srv.c: route byte + JSON body through the handler's parsing and job
# building, no network) on the Qwen3 chat test model; the whole library is built with clang under
# $(FUZZ_DIR)/srv-obj; seeds from fuzz/srv_seeds.txt (one request a line), dictionary fuzz/srv.dict
FUZZ_SRV_OBJ := $(LIB_SRC:%.c=$(FUZZ_DIR)/srv-obj/%.o) $(FUZZ_DIR)/srv-obj/gen/embedded.o
# (the SIMD kernels, which requests never reach, are built by $(CC) unsanitized: clang 14 rejects some of their intrinsics)
$(FUZZ_DIR)/srv-obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC fuzz $<")
	$(Q)$(if $(findstring runtime/kernels/,$<),$(CC) $(CSTD) -O2 $(INCLUDES) -fPIC $(ISA_FLAGS) -c $< -o $@,\
	  $(FUZZ_CC) $(CSTD) -O1 -g $(WARN) -Wno-error $(INCLUDES) -fPIC -DCINFER_LINK_LIBS='"$(LIBS)"' $(ISA_FLAGS) \
	  -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined $(DEPFLAGS) -c $< -o $@)
$(FUZZ_DIR)/srv-obj/gen/embedded.o: $(BUILD)/gen/embedded.c
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(CSTD) -O1 $(INCLUDES) -fPIC -c $< -o $@
$(FUZZ_DIR)/fuzz_srv: fuzz/fuzz_srv.c $(FUZZ_SRV_OBJ)
	$(if $(Q),@echo "  FUZZ    $@")
	$(Q)$(FUZZ_CC) $(CSTD) -O1 -g $(WARN) $(INCLUDES) -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined -o $@ fuzz/fuzz_srv.c $(FUZZ_SRV_OBJ) $(LIBS)
fuzz-srv: $(FUZZ_DIR)/fuzz_srv
	@mkdir -p $(FUZZ_DIR)/corpus-srv
	@n=0; while IFS= read -r line; do n=$$((n+1)); printf '%s' "$$line" > $(FUZZ_DIR)/corpus-srv/seed-$$n.json; \
	  done < fuzz/srv_seeds.txt
	CINFER_FUZZ_MODEL=$(SHARED)/models/chat/qwen3-chat.gguf $(FUZZ_DIR)/fuzz_srv -max_len=8192 \
	  -max_total_time=$(FUZZ_SECONDS) -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 -dict=fuzz/srv.dict \
	  -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus-srv
fuzz: $(FUZZ_DIR)/fuzz_gguf $(FUZZ_DIR)/corpus/.seeded
	$(FUZZ_DIR)/fuzz_gguf -max_len=131072 -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus

# ---- serve tests (tests/serve: official SDKs, API-reference JSON Schemas, web UI, load) ----
# npm ci from the committed package-lock.json into tests/serve/node_modules
# (git-ignored); `make test` (suite serve_sdk) only uses what is installed and
# skips without it; nothing fetches at test time.  Needs node and npm (Node 20+).
SERVE_DIR := tests/serve
.PHONY: serve-deps loadtest
serve-deps: $(SERVE_DIR)/node_modules/.package-lock.json
$(SERVE_DIR)/node_modules/.package-lock.json: $(SERVE_DIR)/package.json $(SERVE_DIR)/package-lock.json
	npm ci --prefix $(SERVE_DIR) --no-audit --no-fund --loglevel=error
# The serve load test alone, with its numbers (also run by make test as serve_sdk/load).
LOAD_ARGS ?= --requests 200 --clients 8
loadtest: $(BUILD)/cinfer serve-deps
	@CINFER_BIN=$(BUILD)/cinfer CINFER_BUILD=$(BUILD) node $(SERVE_DIR)/load.mjs $(LOAD_ARGS)

clean:
	rm -rf $(BUILD)

help:
	@echo "make            build build/cinfer and build/libcinfer.a"
	@echo "make deps       install the Debian packages (root), or print the apt-get line"
	@echo "make test       run all tests (T=name-prefix selects tests); ends 'N passed, N failed, N skipped'"
	@echo "                CI=true make test: a test that lacks ../shared (SHARED=...), a tool or an npm package fails"
	@echo "make node-check is Node.js >= $(NODE_MIN) and npm here (the serve tests)"
	@echo "make demo       run the default model (\$$CINFER_MODEL overrides when shared/ is absent)"
	@echo "make check-layout  includes and calls go down the layers (docs/architecture.md)"
	@echo "make golden     regenerate generated/ golden sources (C and CUDA)"
	@echo "make check-cuda the CUDA tests at full length: NVRTC for CUDA_ARCHS, every emulated model"
	@echo "make fuzz       build and run the libFuzzer targets (FUZZ_SECONDS=600)"
	@echo "make san-cli    build/san/cinfer: the CLI under ASan + UBSan, for hostile-input reproducers"
	@echo "make bench      benchmarks (not part of make test)"
	@echo "make arch-models  one random-weight test model per family into build/arch-models (tools/archgen.c)"
	@echo "make arch-models-quant  their Q8_0/Q4_0 variants (cinfer quantize) into build/arch-models/{q8_0,q4_0}"
	@echo "make arch-refs  regenerate tests/data/arch from llama.cpp (ARCH_REFS=\"name ...\"; tools/arch-refs.sh)"
	@echo "make tok-vocabs llama.cpp's Gemma 4 / Command R / XLM-RoBERTa test vocabularies for tok_fam (npm: node-llama-cpp)"
	@echo "make tok-refs   regenerate tests/data/tok: llama.cpp's ids for the UGM/Gemma 4 tokenizers and new pre-tokenizers"
	@echo "make bench-bundle  bundle start-up and heap vs cinfer run and llama.cpp"
	@echo "make bundle-deps  static cJSON/libmicrohttpd for bundles (Debian source packages; network)"
	@echo "make aarch64    cross-build the aarch64 bundle runtime (build/aarch64/libcinfer.a)"
	@echo "make test-aarch64  NEON kernel tests and aarch64 bundles under qemu-user"
	@echo "make serve-deps npm ci the serve tests' packages into tests/serve/node_modules"
	@echo "make loadtest   serve load test: 200 requests, 8 clients (LOAD_ARGS=...)"
	@echo "make bench-decode  decode matmuls against the read bandwidth in one process (tools/bench_decode.c)"
	@echo "make bench-att     one attention call at a cache depth, cache type, sliding window (tools/bench_att.c)"
	@echo "make bench-ssm  recurrent-layer kernels: chunked vs token-by-token DeltaNet, Mamba scans (tools/bench_ssm.c)"
	@echo "make bench-tok  tokenizer throughput on 1 MiB of mixed text"
	@echo "make bench-grammar  JSON Schema suites, mask timing, constrained generation (structured output)"
	@echo "make test-grammar-full  the grammar tests make test samples, in full (differential, stress, serve)"
	@echo "make fuzz-tokjson  libFuzzer on tokenizer.json loading (FUZZ_SECONDS)"
	@echo "make fuzz-hf    libFuzzer on Hugging Face checkpoint folders (FUZZ_SECONDS)"
	@echo "make fuzz-schema   libFuzzer on the JSON Schema compiler, matcher and masks (FUZZ_SECONDS)"
	@echo "make fuzz-srv   libFuzzer on cinfer serve request bodies (FUZZ_SECONDS)"
	@echo "make embed-refs tests/data/embed/qwen3-chat.json from llama.cpp (PEER=DIR: node-llama-cpp + llama.cpp source)"
	@echo "make unicode    regenerate runtime/text/unicode_data.c from /usr/share/unicode (unicode-data)"
	@echo "make install    PREFIX=/usr/local: cinfer, libcinfer.a, cinfer.h, cinfer.pc"
	@echo "make clean      remove build/"
	@echo "V=1             show full commands"

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
