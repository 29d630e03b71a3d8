# Makefile — builds build/libmoewire.a, bin/{coordinator,expert-node,vindex}, the test suite
# (ASan+UBSan, cmocka) and the benchmarks. Missing packages are installed first (deploy/deps.sh:
# Debian's through apt-get, Homebrew's on macOS); nothing installs when everything is present.
#
#   make            library and programs          make test     the whole suite
#   make run        demo: synth model, loopback cluster, generate, then serve on :8080
#   make demo       the same, generate only       make bench    benchmarks (not tests)
#   make bench LLAMA_BENCH=path/to/llama-bench    the same, with llama.cpp on the same GGUF files
#   make ggml-mm GGML_INC=DIR GGML_LIB=DIR        ggml's matmul driver; make bench GGML_MM=its path
#   make llama-tok LLAMA_INC=DIR GGML_INC=DIR LLAMA_LIB=DIR
#                                                 llama.cpp's tokenizer driver; make bench LLAMA_TOK=
#   make deps       install the packages (apt-get; Homebrew on macOS)    make format   clang-format
#   make fuzz       libFuzzer harnesses, FUZZ_SECONDS each (tests/fuzz/README.md)
#   make soak       serve through node kills for SOAK_MINUTES (tests/soak/soak.c)
#   make check-kernels FIXTURES=DIR               kernel parity checks on a fixture directory
#   make neon-check                               aarch64 cross build + kernel tests under qemu
#   make arm64-check                              the whole node for aarch64: its tests under qemu
#   make metal-check                              the Metal kernels under the emulator (metal/emu/)
#   make posix-check                              the tree compiled as POSIX + BSD (macOS's view)

SHELL := /bin/bash
.DEFAULT_GOAL := all
.SECONDARY:
.DELETE_ON_ERROR:

# ---- dependencies ---------------------------------------------------------------------------
NODEPS_GOALS := clean deps format help print-arm64-tests
ifneq ($(filter-out $(NODEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
ifneq ($(shell deploy/deps.sh --check >/dev/null 2>&1 && echo ok),ok)
$(info moewire: some packages are missing; running deploy/deps.sh)
ifneq ($(shell deploy/deps.sh >&2 && echo ok),ok)
$(error deploy/deps.sh failed: run 'make deps' as root and read its output)
endif
endif
endif

PKGS := libzmq libprotobuf-c libuv liblz4 libsodium jansson libcrypto libpcre2-8
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS = $(shell pkg-config --libs $(PKGS))
CMOCKA_CFLAGS = $(shell pkg-config --cflags cmocka)
CMOCKA_LIBS = $(shell pkg-config --libs cmocka)

# ---- toolchain and flags --------------------------------------------------------------------
CC ?= cc
ifeq ($(CC),cc)
CC := gcc
endif
MACHINE := $(shell $(CC) -dumpmachine)
ifneq ($(findstring x86_64,$(MACHINE)),)
ARCH := x86_64
else ifneq ($(findstring aarch64,$(MACHINE))$(findstring arm64,$(MACHINE)),)
ARCH := aarch64
else
ARCH := other
endif

WARN := -Wall -Wextra -Werror -Wno-unused-parameter -Wno-format-truncation -Wshadow -Wstrict-prototypes
UNAME := $(shell uname -s)
ifeq ($(UNAME),Darwin)
# macOS with Homebrew: clang (a GCC-only warning option is no error), openssl keg-only (found
# through its prefix), llhttp a library of its own in place of Debian's sources.
WARN += -Wno-unknown-warning-option
export PKG_CONFIG_PATH := $(shell brew --prefix openssl@3 2>/dev/null)/lib/pkgconfig:$(PKG_CONFIG_PATH)
PKGS += libllhttp
endif
# Floating-point contraction stays off everywhere (clang defaults it on): a row's result must not
# depend on the compiler's choice of fused operations, or exact mode breaks across nodes.
BASE_CFLAGS := -std=c11 -ffp-contract=off -D_GNU_SOURCE $(WARN) -I. -Ibuild/gen -MMD -MP -pthread \
               -isystem /usr/share/include/llhttp
OPT_CFLAGS := -O2 -g
ASAN_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
               -fno-sanitize-recover=undefined -DMW_ASAN=1
ASAN_LDFLAGS := -fsanitize=address,undefined
# Per-file instruction sets: foo_avx2.c gets AVX2/FMA/F16C, foo_neon.c is built on aarch64 only.
AVX2_FLAGS := -mavx2 -mfma -mf16c
AVXVNNI_FLAGS := -mavx2 -mfma -mf16c -mavxvnni
AVX512_FLAGS := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx512vbmi
NEON_FLAGS := -march=armv8.2-a+dotprod+fp16
LDLIBS = $(PKG_LIBS) -lm -pthread

# ---- sources --------------------------------------------------------------------------------
LIB_DIRS := util template kernels vindex model tokenizer grammar wire metal coordinator expert-node
ALL_C := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c $(d)/*/*.c))
ISA_EXCLUDE := $(if $(filter x86_64,$(ARCH)),%_neon.c,%_avx2.c %_avxvnni.c %_avx512.c %_x86.c) \
               $(if $(filter aarch64,$(ARCH)),,%_neon.c)
LIB_C := $(filter-out %/main.c $(ISA_EXCLUDE),$(ALL_C))
# llhttp (the HTTP parser) is built from the C sources Debian's node-llhttp installs, into the same
# library; they are third-party code, compiled without the project's warning flags.
LLHTTP_DIR := /usr/share/llhttp
LLHTTP_INC := /usr/share/include/llhttp
LLHTTP_C := $(if $(filter Darwin,$(UNAME)),,$(addprefix $(LLHTTP_DIR)/,api.c http.c llhttp.c))
PROTO := $(wildcard proto/*.proto)
PROTO_C := $(patsubst proto/%.proto,build/gen/proto/%.pb-c.c,$(PROTO))
PROTO_H := $(PROTO_C:.c=.h)
PROGS := coordinator expert-node vindex
BIN := $(addprefix bin/,$(PROGS))
TEST_SUPPORT_C := $(wildcard tests/support/*.c)
UNIT_C := $(wildcard tests/unit/test_*.c)
INTEG_C := $(wildcard tests/integration/test_*.c)
BENCH_SUPPORT_C := bench/bench_util.c bench/bench_llama.c bench/bench_synth.c
BENCH_C := $(filter-out $(BENCH_SUPPORT_C),$(wildcard bench/*.c))

REL := build/rel
ASAN := build/asan
obj = $(patsubst %.c,$(1)/obj/%.o,$(2))

llhttp_obj = $(patsubst $(LLHTTP_DIR)/%.c,$(1)/obj/llhttp/%.o,$(LLHTTP_C))
LIB_REL_O := $(call obj,$(REL),$(LIB_C)) $(call obj,$(REL),$(PROTO_C)) $(call llhttp_obj,$(REL))
LIB_ASAN_O := $(call obj,$(ASAN),$(LIB_C)) $(call obj,$(ASAN),$(PROTO_C)) $(call llhttp_obj,$(ASAN))
SUPPORT_ASAN_O := $(call obj,$(ASAN),$(TEST_SUPPORT_C))

# Darwin: the Metal backend (metal/mt_metal.m, Objective-C with ARC) and the kernel source it
# compiles at start, embedded as one string (metal/mt_args.h, then metal/mt_kernels.metal).
ifeq ($(UNAME),Darwin)
METAL_SRC_C := build/gen/metal/mt_source.c
METAL_O = $(1)/obj/metal/mt_metal.o $(1)/obj/$(METAL_SRC_C:.c=.o)
LIB_REL_O += $(call METAL_O,$(REL))
LIB_ASAN_O += $(call METAL_O,$(ASAN))
LDLIBS += -framework Metal -framework Foundation
OBJC_FLAGS := -fobjc-arc -Wno-deprecated-declarations
endif

TEST_BINS := $(patsubst tests/%.c,$(ASAN)/tests/%,$(UNIT_C) $(INTEG_C))
# The Metal kernels under the emulator: a C++ build of metal/mt_kernels.metal (metal/emu/).
METAL_TEST := $(ASAN)/tests/metal/test_mt_emu
ASAN_BIN := $(addprefix $(ASAN)/bin/,$(PROGS))
BENCH_BINS := $(patsubst bench/%.c,$(REL)/bench/%,$(BENCH_C))

.PHONY: all deps test unit integration run demo bench lan ggml-mm llama-tok clean format help check-kernels neon-check fuzz \
        metal-check posix-check arm64-bins arm64-check print-arm64-tests \
        fuzz-smoke soak
all: build/libmoewire.a $(BIN)

deps:
	deploy/deps.sh

# ---- generated protobuf-c -------------------------------------------------------------------
build/gen/proto/%.pb-c.c build/gen/proto/%.pb-c.h: proto/%.proto
	@mkdir -p build/gen/proto
	protoc-c --c_out=build/gen proto/$*.proto

# Every object may include generated headers: generate them first.
$(LIB_REL_O) $(LIB_ASAN_O) $(SUPPORT_ASAN_O): | $(PROTO_H)

# ---- objects --------------------------------------------------------------------------------
define isa_flags
$(if $(filter %_avx2.c %_x86.c,$(1)),$(AVX2_FLAGS))$(if $(filter %_avxvnni.c,$(1)),$(AVXVNNI_FLAGS))$(if $(filter %_avx512.c,$(1)),$(AVX512_FLAGS))$(if $(filter %_neon.c,$(1)),$(NEON_FLAGS))
endef

$(REL)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(OPT_CFLAGS) $(call isa_flags,$<) $(PKG_CFLAGS) -c $< -o $@

$(ASAN)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(ASAN_CFLAGS) $(call isa_flags,$<) $(PKG_CFLAGS) $(CMOCKA_CFLAGS) -c $< -o $@

$(REL)/obj/%.o: %.m
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(OPT_CFLAGS) $(OBJC_FLAGS) -c $< -o $@

$(ASAN)/obj/%.o: %.m
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(ASAN_CFLAGS) $(OBJC_FLAGS) -c $< -o $@

build/gen/metal/mt_source.c: metal/mt_args.h metal/mt_kernels.metal
	@mkdir -p $(@D)
	{ printf '/* generated from metal/mt_args.h and metal/mt_kernels.metal */\n'; \
	  printf 'const char mt_source[] =\n'; \
	  cat $^ | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/'; \
	  printf ';\n'; } > $@

$(REL)/obj/llhttp/%.o: $(LLHTTP_DIR)/%.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -O2 -g -w -I$(LLHTTP_INC) -c $< -o $@

$(ASAN)/obj/llhttp/%.o: $(LLHTTP_DIR)/%.c
	@mkdir -p $(@D)
	$(CC) -std=c11 $(ASAN_CFLAGS) -w -I$(LLHTTP_INC) -c $< -o $@

build/libmoewire.a: $(LIB_REL_O)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(ASAN)/libmoewire.a: $(LIB_ASAN_O)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

# ---- programs -------------------------------------------------------------------------------
bin/%: $(REL)/obj/%/main.o build/libmoewire.a
	@mkdir -p $(@D)
	$(CC) $(OPT_CFLAGS) -pthread $< build/libmoewire.a $(LDLIBS) -o $@

$(ASAN)/bin/%: $(ASAN)/obj/%/main.o $(ASAN)/libmoewire.a
	@mkdir -p $(@D)
	$(CC) $(ASAN_LDFLAGS) -pthread $< $(ASAN)/libmoewire.a $(LDLIBS) -o $@

# ---- tests ----------------------------------------------------------------------------------
$(ASAN)/tests/%: $(ASAN)/obj/tests/%.o $(SUPPORT_ASAN_O) $(ASAN)/libmoewire.a
	@mkdir -p $(@D)
	$(CC) $(ASAN_LDFLAGS) -pthread $< $(SUPPORT_ASAN_O) $(ASAN)/libmoewire.a $(LDLIBS) $(CMOCKA_LIBS) -o $@

# The AVX-VNNI row's source once more, test-only (x86-64): kn_simd_avxvnni.c with its multiply-adds
# as their EVEX twins (AVX512-VNNI + VL) and the usable-check to match (KN__VNNI_EVEX_TWIN), linked
# ahead of the library into the test_kn_avxvnni* programs: its two global symbols are the row's, so
# the linker leaves the library's AVX-VNNI object out and the row runs here on AVX-512 machines.
# Elsewhere they are linked as any test and skip.
ifeq ($(ARCH),x86_64)
VNNI_TWIN_O := $(ASAN)/obj/kernels/kn_simd_avxvnni_evex.o
$(VNNI_TWIN_O): kernels/kn_simd_avxvnni.c | $(PROTO_H)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(ASAN_CFLAGS) $(AVX2_FLAGS) -mavx512vnni -mavx512vl -DKN__VNNI_EVEX_TWIN \
	  $(PKG_CFLAGS) -c $< -o $@

VNNI_TWIN_TESTS := $(addprefix $(ASAN)/tests/unit/,test_kn_avxvnni test_kn_avxvnni_expert \
                                                   test_kn_avxvnni_fixtures)
$(VNNI_TWIN_TESTS): $(ASAN)/tests/unit/%: $(ASAN)/obj/tests/unit/%.o $(VNNI_TWIN_O) \
                                          $(SUPPORT_ASAN_O) $(ASAN)/libmoewire.a
	@mkdir -p $(@D)
	$(CC) $(ASAN_LDFLAGS) -pthread $< $(VNNI_TWIN_O) $(SUPPORT_ASAN_O) $(ASAN)/libmoewire.a \
	  $(LDLIBS) $(CMOCKA_LIBS) -o $@
endif

# The kernels' tests once more at the release flags and without sanitizers: the code users run.
# An optimizer's wrong code shows only there (GCC 12.2 at -O2 dropped every call to a static
# helper whose stores went through a parameter: docs/kernels.md), and the sanitizers' build is
# -O1 with its checks changing what the optimizer may assume.
REL_KN_UNIT := test_kn_matmul test_kn_fixtures test_kn_formats test_kn_expert test_kn_pool \
               test_md_ops
SUPPORT_REL_O := $(call obj,$(REL),$(TEST_SUPPORT_C))
REL_KN_TESTS := $(addprefix $(REL)/tests/unit/,$(REL_KN_UNIT))
$(SUPPORT_REL_O): | $(PROTO_H)
$(REL)/tests/%: $(REL)/obj/tests/%.o $(SUPPORT_REL_O) build/libmoewire.a
	@mkdir -p $(@D)
	$(CC) $(OPT_CFLAGS) -pthread $< $(SUPPORT_REL_O) build/libmoewire.a $(LDLIBS) $(CMOCKA_LIBS) -o $@

# The test-only npm packages (pinned), installed into build/npm by one npm call: two installs into
# one prefix at once (make -j) would remove each other's packages. js-tiktoken writes the o200k
# reference (the vocabulary and its encodings, by tests/tiktoken/o200k_cases.js, offline); the
# official openai client drives the serving tests; ajv (a JSON-schema validator) checks the
# structured outputs and tool-call arguments they get.
NPM_PKGS := js-tiktoken@1.0.21 openai@6.30.1 ajv@8.17.1
NPM_STAMP := build/npm/.installed-$(shell echo $(NPM_PKGS) | cksum | cut -d' ' -f1)
$(NPM_STAMP):
	@mkdir -p build/npm
	npm install --no-audit --no-fund --silent --prefix build/npm $(NPM_PKGS)
	touch $@

TK_O200K := build/tk-o200k
$(TK_O200K)/cases.json: tests/tiktoken/o200k_cases.js $(NPM_STAMP)
	node tests/tiktoken/o200k_cases.js build/npm $(TK_O200K)

# The benchmarks are built (not run) by `make test`, so an API change cannot leave them broken.
test: $(TEST_BINS) $(REL_KN_TESTS) $(METAL_TEST) $(ASAN_BIN) $(BIN) $(BENCH_BINS) \
      $(TK_O200K)/cases.json
	@if [ -x tests/neon-check.sh ]; then tests/neon-check.sh; fi
	tests/posix-check.sh
	MW_BIN=$(CURDIR)/$(ASAN)/bin tests/arm64-check.sh
	MW_BIN=$(CURDIR)/$(ASAN)/bin MW_REL_BIN=$(CURDIR)/bin MW_TK_O200K=$(CURDIR)/$(TK_O200K) \
	  tests/run.sh $(TEST_BINS) $(REL_KN_TESTS) $(METAL_TEST)
	tests/fuzz/run.sh $(FUZZ_SMOKE_SECONDS) $(FUZZ_BINS)

unit: $(filter $(ASAN)/tests/unit/%,$(TEST_BINS))
	tests/run.sh $^

# The serving tests' promtool, taken out of Debian's prometheus package (no daemon runs).
PROMTOOL := build/promtool/promtool
$(PROMTOOL):
	@mkdir -p build/promtool
	cd build/promtool && (apt-get download prometheus 2>/dev/null || \
	  (apt-get update -qq && apt-get download prometheus)) && \
	  dpkg -x prometheus_*.deb pkg && cp pkg/usr/bin/promtool . && rm -rf pkg prometheus_*.deb

test: $(NPM_STAMP) $(PROMTOOL)
test: export MW_NPM = $(CURDIR)/build/npm
test: export MW_PROMTOOL = $(CURDIR)/$(PROMTOOL)

# ---- demo -----------------------------------------------------------------------------------
run: all
	deploy/demo.sh --serve

demo: all
	deploy/demo.sh

# ---- fuzzing: libFuzzer harnesses, clang with ASan+UBSan (tests/fuzz/README.md) -------------
#   make fuzz                      every harness for FUZZ_SECONDS (default 600) each
#   make fuzz FUZZ=wire            one harness (a substring of its name)
#   make fuzz-smoke                every harness for FUZZ_SMOKE_SECONDS (default 20); make test runs it
FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 20
FZ := build/fuzz
FUZZ_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined \
              -Wno-unknown-warning-option -DMW_ASAN=1 -DMW_FUZZ=1
FUZZ_C := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_SUPPORT_C := $(filter-out $(FUZZ_C),$(wildcard tests/fuzz/*.c)) tests/support/mwt_tk.c
FUZZ_LIB_O := $(call obj,$(FZ),$(LIB_C)) $(call obj,$(FZ),$(PROTO_C)) $(call llhttp_obj,$(FZ))
FUZZ_SUPPORT_O := $(call obj,$(FZ),$(FUZZ_SUPPORT_C))
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(FZ)/%,$(FUZZ_C))

$(FUZZ_LIB_O) $(FUZZ_SUPPORT_O): | $(PROTO_H)

# The library is instrumented for coverage (fuzzer-no-link); the harness links libFuzzer's main.
$(FZ)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(BASE_CFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link $(call isa_flags,$<) \
	    $(PKG_CFLAGS) -c $< -o $@

$(FZ)/obj/llhttp/%.o: $(LLHTTP_DIR)/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) -std=c11 $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -w -I$(LLHTTP_INC) -c $< -o $@

$(FZ)/libmoewire.a: $(FUZZ_LIB_O)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(FZ)/fuzz_%: $(FZ)/obj/tests/fuzz/fuzz_%.o $(FUZZ_SUPPORT_O) $(FZ)/libmoewire.a
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -pthread $< $(FUZZ_SUPPORT_O) $(FZ)/libmoewire.a \
	    $(LDLIBS) -o $@

# (the test rule above is read before FUZZ_BINS is set: its fuzzers are added here)
test: $(FUZZ_BINS)

fuzz: $(FUZZ_BINS)
	MW_FUZZ_FILTER=$(FUZZ) tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BINS)

fuzz-smoke: $(FUZZ_BINS)
	tests/fuzz/run.sh $(FUZZ_SMOKE_SECONDS) $(FUZZ_BINS)

# ---- soak: serve under node kills (tests/soak/soak.c), not part of make test -----------------
#   make soak        SOAK_MINUTES (default 10) on the release programs, then SOAK_LSAN_MINUTES
#                    (default 2) on the ASan ones, which must stop LSan-clean
SOAK_MINUTES ?= 10
SOAK_LSAN_MINUTES ?= 2
soak: $(ASAN)/tests/soak/soak $(BIN) $(ASAN_BIN)
	$(ASAN)/tests/soak/soak --minutes $(SOAK_MINUTES) --bin $(CURDIR)/bin
	$(ASAN)/tests/soak/soak --minutes $(SOAK_LSAN_MINUTES) --bin $(CURDIR)/$(ASAN)/bin

# ---- benchmarks -----------------------------------------------------------------------------
$(REL)/bench/%: $(REL)/obj/bench/%.o $(BENCH_SUPPORT_C) build/libmoewire.a
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(OPT_CFLAGS) $< $(filter %.c,$^) build/libmoewire.a $(LDLIBS) -o $@

bench: $(BENCH_BINS) $(BIN)
	bench/run.sh $(BENCH_BINS)

# ---- the emulated LAN (tests/lan/lan.sh): nodes and coordinators in network namespaces --------
#   make lan                       8 nodes + a serving coordinator on LAN_MODEL; Ctrl-C tears down
#   make lan LAN_ARGS="--delay-ms 1 --rate 1gbit --nodes 4"
LAN_MODEL ?= tests/fixtures/llamacpp/gpt-oss-tiny/model.gguf
LAN_TOOLS := $(REL)/tests/lan/delayline
$(REL)/tests/lan/delayline: tests/lan/delayline.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(OPT_CFLAGS) $< -o $@

lan: $(BIN) $(LAN_TOOLS)
	tests/lan/lan.sh run --model $(LAN_MODEL) --serve 1 $(LAN_ARGS)

test: $(LAN_TOOLS)

# ggml's matmul beside ours (bench_kernels --ggml-mm): built only when asked, against a ggml the
# user names, GGML_INC its headers and GGML_LIB its shared libraries (a ggml or llama.cpp build).
ggml-mm: $(REL)/bench/ggml_mm
$(REL)/bench/ggml_mm: bench/ggml/ggml_mm.c bench/bench_util.c build/libmoewire.a
	@test -n "$(GGML_INC)" -a -n "$(GGML_LIB)" || \
	  { echo "usage: make ggml-mm GGML_INC=DIR GGML_LIB=DIR (a ggml build's headers and libraries)"; exit 2; }
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(OPT_CFLAGS) -isystem $(GGML_INC) $(filter %.c,$^) build/libmoewire.a \
	  -L$(GGML_LIB) -Wl,-rpath,$(GGML_LIB) -lggml -lggml-base -lggml-cpu $(LDLIBS) -o $@

# llama.cpp's tokenizer beside ours (bench_tokenizer --llama-tok): built only when asked, against
# a llama.cpp build the user names: LLAMA_INC its include/, GGML_INC its ggml/include/, LLAMA_LIB
# the folder of its shared libraries.
llama-tok: $(REL)/bench/llama_tok
$(REL)/bench/llama_tok: bench/llama/llama_tok.c bench/bench_util.c build/libmoewire.a
	@test -n "$(LLAMA_INC)" -a -n "$(GGML_INC)" -a -n "$(LLAMA_LIB)" || \
	  { echo "usage: make llama-tok LLAMA_INC=DIR GGML_INC=DIR LLAMA_LIB=DIR (a llama.cpp build's include/, ggml/include/ and libraries)"; exit 2; }
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(OPT_CFLAGS) -isystem $(LLAMA_INC) -isystem $(GGML_INC) $(filter %.c,$^) \
	  build/libmoewire.a -L$(LLAMA_LIB) -Wl,-rpath,$(LLAMA_LIB) -lllama -lggml -lggml-base \
	  $(LDLIBS) -o $@

# ---- Metal kernels under the emulator (metal/emu/, docs/kernels.md#metal) --------------------
# The .metal source compiled as C++ through the shim: its `#include <metal_stdlib>` finds a file
# made here that includes metal/emu/mt_emu.h. Linked with the emulator's scheduler and the test;
# `make test` runs it too.
EMU_CXX ?= g++
EMU_INC := build/emu/include
EMU_CXXFLAGS := -std=c++17 -ffp-contract=off -fsigned-char -Wall -Wextra -Werror \
                -Wno-unused-parameter -Wno-attributes -I. -I$(EMU_INC) -MMD -MP
EMU_O := $(ASAN)/obj/metal/emu/mt_emu.o $(ASAN)/obj/metal/emu/mt_emu_kernels.o
# Without -mfma every fma of the emulated kernels is a call into libm: the same bits, several
# times slower. Used where this CPU has FMA.
EMU_CXXFLAGS += $(if $(and $(filter x86_64,$(ARCH)),$(shell grep -qw fma /proc/cpuinfo 2>/dev/null && echo y)),-mfma)

$(EMU_INC)/metal_stdlib:
	@mkdir -p $(@D)
	printf '#define MT_EMU_KERNELS\n#include "metal/emu/mt_emu.h"\n' > $@

$(ASAN)/obj/metal/emu/%.o: metal/emu/%.cc | $(EMU_INC)/metal_stdlib
	@mkdir -p $(@D)
	$(EMU_CXX) $(EMU_CXXFLAGS) $(ASAN_CFLAGS) -O2 -c $< -o $@

$(METAL_TEST): $(ASAN)/obj/tests/metal/test_mt_emu.o $(EMU_O) $(SUPPORT_ASAN_O) $(ASAN)/libmoewire.a
	@mkdir -p $(@D)
	$(EMU_CXX) $(ASAN_LDFLAGS) -pthread $< $(EMU_O) $(SUPPORT_ASAN_O) $(ASAN)/libmoewire.a \
	  $(LDLIBS) $(CMOCKA_LIBS) -o $@

metal-check: $(METAL_TEST)
	tests/run.sh $(METAL_TEST)

# ---- the portable build's check: the tree as a non-Linux POSIX system sees it ---------------
posix-check: $(PROTO_H)
	tests/posix-check.sh

# ---- kernel parity on any fixture directory -------------------------------------------------
FIXTURES ?= tests/fixtures/llamacpp/kernels
check-kernels: $(ASAN)/tests/unit/test_kn_fixtures
	MW_KERNEL_FIXTURES=$(abspath $(FIXTURES)) $(ASAN)/tests/unit/test_kn_fixtures

# ---- aarch64 cross build: NEON kernels built with Debian's cross compiler, run under qemu ----
neon-check:
	tests/neon-check.sh

# ---- the whole tree for aarch64: the node and its tests under qemu (tests/arm64-check.sh) -----
# Debian's cross compiler against a private sysroot of Debian's arm64 libraries
# (tests/arm64/sysroot.sh); no sanitizers (qemu-user cannot map their shadow memory). The check
# script builds these goals and runs them; `make arm64-check` runs the script alone.
A64 := build/arm64
A64_CC ?= aarch64-linux-gnu-gcc
A64_ROOT := $(A64)/root
A64_LIBDIR := $(A64_ROOT)/usr/lib/aarch64-linux-gnu
A64_CFLAGS := $(BASE_CFLAGS) $(OPT_CFLAGS) -isystem $(A64_ROOT)/usr/include/aarch64-linux-gnu \
              -isystem $(A64_ROOT)/usr/include
A64_LIBS := -L$(A64_LIBDIR) -Wl,-rpath-link,$(A64_LIBDIR) \
            -Wl,-rpath-link,$(A64_ROOT)/lib/aarch64-linux-gnu -lzmq -lprotobuf-c -luv -llz4 \
            -lsodium -ljansson -lcrypto -lpcre2-8 -lm -pthread
A64_LIB_C := $(filter-out %/main.c %_avx2.c %_avxvnni.c %_avx512.c %_x86.c,$(ALL_C))
A64_LIB_O := $(call obj,$(A64),$(A64_LIB_C)) $(call obj,$(A64),$(PROTO_C)) $(call llhttp_obj,$(A64))
A64_SUPPORT_O := $(call obj,$(A64),$(TEST_SUPPORT_C))
# The unit tests of what a node runs (kernels, wire, the serve loop, the expert executor, the
# trunk's ops), all in one process: nothing here starts other programs.
A64_UNIT := test_kn_expert test_kn_fixtures test_kn_formats test_kn_matmul test_kn_pool \
            test_wr_codec test_wr_curve test_wr_msg test_wr_zmq test_en_serve test_md_moe \
            test_md_ops test_md_attn test_util test_mw_notify test_mt_regions
A64_TESTS := $(addprefix $(A64)/tests/unit/,$(A64_UNIT))

$(A64_LIB_O) $(A64_SUPPORT_O): | $(PROTO_H)

$(A64)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(A64_CC) $(A64_CFLAGS) $(if $(filter %_neon.c,$<),$(NEON_FLAGS)) -c $< -o $@

$(A64)/obj/llhttp/%.o: $(LLHTTP_DIR)/%.c
	@mkdir -p $(@D)
	$(A64_CC) -std=c11 -O2 -g -w -I$(LLHTTP_INC) -c $< -o $@

$(A64)/libmoewire.a: $(A64_LIB_O)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(A64)/bin/%: $(A64)/obj/%/main.o $(A64)/libmoewire.a
	@mkdir -p $(@D)
	$(A64_CC) -pthread $< $(A64)/libmoewire.a $(A64_LIBS) -o $@

$(A64)/tests/%: $(A64)/obj/tests/%.o $(A64_SUPPORT_O) $(A64)/libmoewire.a
	@mkdir -p $(@D)
	$(A64_CC) -pthread $< $(A64_SUPPORT_O) $(A64)/libmoewire.a $(A64_LIBS) -lcmocka -o $@

arm64-bins: $(A64)/bin/expert-node $(A64_TESTS)

ARM64_TEST := $(ASAN)/tests/arm64/test_arm64_node
# (the test rule above is read before ARM64_TEST is set)
test: $(ARM64_TEST)
arm64-check: $(ARM64_TEST) $(ASAN_BIN)
	MW_BIN=$(CURDIR)/$(ASAN)/bin tests/arm64-check.sh

print-arm64-tests:
	@echo $(A64_TESTS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build bin

help:
	@sed -n '1,/^$$/p' Makefile

-include $(shell find build -name '*.d' -type f 2>/dev/null)
