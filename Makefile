# hogwild: a static library, the ./hogwild binary, its two plugins (libhogwild-cuda.so, libhogwild-mpi.so,
# where CUDA and Open MPI are found) and one Criterion test binary.
#
#   make              build everything it can find the tools for (CUDA when nvcc is found)
#   make CUDA=0       build without CUDA even where nvcc is installed
#   make MPI=0        build without MPI even where Open MPI is installed
#   make test         build and run the Criterion suite, the IDX fuzzer, make layout-check, make exports-check,
#                     make flag-check and make sim
#   make layout-check the file-level call graph of src/: no circle, every room calls only rooms before it
#                     (of the objects of this build; make sim checks build-sim/'s, src/cuda/ included)
#   make exports-check ./hogwild exports only the hw_ functions its plugins call
#   make flag-check   no message outside src/cli/ names a command-line flag (only src/cli/ knows them)
#   make format-check every C and CUDA file in clang-format's style (.clang-format); make format applies it
#   make asan         the test suite and make sim under AddressSanitizer + UBSan (build-asan*/)
#   make CC=clang     any C11 compiler; the build is -Wall -Wextra -Werror clean with gcc and clang
#   make sim          the GPU suites on a SIMULATED CUDA device, no GPU needed (build-sim/; see below)
#
# Sources are found by wildcard, and each binary by its folder (docs/ARCHITECTURE.md, "Layout"):
#   src/cli/        the command line: ./hogwild (the test binary links it without main.c)
#   src/cuda/       the GPU part: libhogwild-cuda.so (the simulated build links it into the library)
#   src/comm/mpi/   the MPI part: libhogwild-mpi.so
#   everything else the core library, build/libhogwild.a
# A new file in a folder is built with that folder's binary without touching this file.

CC      ?= cc
comma   := ,
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
BUILD   ?= build
# AVX2 and FMA (x86-64-v3) for the SGD step and the elementwise layers, where the CPU that builds
# has them; the compiler's baseline elsewhere, since a binary with AVX2 instructions dies with
# SIGILL on a CPU without them (and other architectures reject the flag). ARCH= overrides.
X86_64_V3 := $(shell for f in avx2 fma bmi2 movbe f16c; do grep -qw $$f /proc/cpuinfo 2>/dev/null || exit 1; done && echo -march=x86-64-v3)
ARCH    ?= $(if $(shell $(CC) $(X86_64_V3) -E -x c /dev/null >/dev/null 2>&1 && echo ok),$(X86_64_V3))
ARCH    := $(ARCH)
OPT     ?= -O3 $(ARCH)
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude -Isrc -pthread
CFLAGS  += $(shell pkg-config --cflags stb 2>/dev/null)

# OpenBLAS is not linked: src/blas.c dlopen()s this library at run time, after choosing its kernels
# and one thread per caller (include/hw/blas.h says why). The pthread build is thread-safe; the
# serial one is not (DataParallel's replica threads call it at once).
BLAS_LIB ?= /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0
CFLAGS  += -DHW_BLAS_LIBRARY='"$(BLAS_LIB)"'
LDLIBS   = -lstb -lz -lm -ldl -pthread
# jansson reads and writes the checkpoint headers; libmd checks the downloads' md5.
LDLIBS  += -ljansson -lmd

# ---- CUDA: on when nvcc is found, off with CUDA=0, simulated with SIM=1 ----
ifeq ($(SIM),1)
  HAVE_CUDA := sim
else ifeq ($(CUDA),0)
  HAVE_CUDA := 0
else ifneq ($(NVCC),)
  HAVE_CUDA := 1
else
  HAVE_CUDA := 0
endif

CUDA_HOME   ?= $(patsubst %/bin/nvcc,%,$(NVCC))
# Machine code for sm_90 (H100/H200) and sm_80 (A100; its code also runs on sm_86/sm_89 cards),
# plus compute_90 PTX that newer GPUs JIT-compile. hw_cuda_select refuses older GPUs by name.
CUDA_ARCH   ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
NVCCFLAGS   ?= -O3 -g -std=c++17 $(CUDA_ARCH)
NVCCFLAGS   += -Iinclude -Xcompiler -Wall,-Wextra,-Werror -DHW_HAVE_CUDA=1

ALL_C   := $(wildcard src/*.c src/*/*.c src/*/*/*.c)
CLI_SRC := $(wildcard src/cli/*.c)
C_SRC   := $(filter-out src/cli/% src/cuda/% src/comm/mpi/%, $(ALL_C))

# ---- MPI (src/comm/mpi/): on when Open MPI's mpicc is found, off with MPI=0 ----
# Runs across machines under mpirun (README, "Several machines"). src/comm/mpi/ is the shared
# object libhogwild-mpi.so beside the binary, which src/comm/mpi_plugin.c enters only in a rank of
# a job of several: a plain ./hogwild maps no MPI library and never calls MPI_Init. Its calls into
# the core resolve to the executable's symbols (the exports below). The test binary links the MPI
# side directly. Without MPI, mpi_plugin.c refuses a several-rank job naming the build.
MPICC ?= $(shell command -v mpicc 2>/dev/null)
ifeq ($(MPI),0)
  HAVE_MPI := 0
else ifneq ($(MPICC),)
  HAVE_MPI := 1
else
  HAVE_MPI := 0
endif
MPI_C_SRC := $(wildcard src/comm/mpi/*.c)
MPI_PLUGIN :=
ifeq ($(HAVE_MPI),1)
  CFLAGS     += -DHW_HAVE_MPI=1
  MPI_CFLAGS := $(shell $(MPICC) --showme:compile) -fPIC
  MPI_LIBS   := $(shell $(MPICC) --showme:link)
  MPI_OBJ    := $(patsubst src/%.c,$(BUILD)/%.o,$(MPI_C_SRC))
  MPI_PLUGIN := $(if $(filter build,$(BUILD)),libhogwild-mpi.so,$(BUILD)/libhogwild-mpi.so)
endif
CU_SRC  :=
# The GPU part in a CUDA build: src/cuda/ (the backend) and src/cuda/train/ (the GPU trainers),
# built as the shared object libhogwild-cuda.so beside the binary, which src/train/gpu_plugin.c
# enters only when a run asks for a GPU: a CPU run maps no CUDA library. The plugin carries no copy
# of the core: ./hogwild links the whole core library and exports the hw_ functions the plugin
# calls, which resolve to it. The test binary links the same objects directly.
GPU_C_SRC := $(wildcard src/cuda/*.c src/cuda/train/*.c)
PLUGIN    :=
ifeq ($(HAVE_CUDA),1)
  CFLAGS  += -DHW_HAVE_CUDA=1 -DHW_CUDA_PLUGIN=1 -fPIC -I$(CUDA_HOME)/include
  NVCCFLAGS += -Xcompiler -fPIC
  CU_SRC  := $(wildcard src/cuda/*.cu)
  PLUGIN_C_SRC := $(GPU_C_SRC)
  PLUGIN  := $(if $(filter build,$(BUILD)),libhogwild-cuda.so,$(BUILD)/libhogwild-cuda.so)
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
  NCCL_FOUND := $(shell ls $(CUDA_HOME)/lib64/libnccl.so /usr/lib/x86_64-linux-gnu/libnccl.so 2>/dev/null | head -1)
  ifneq ($(NCCL_FOUND),)
    CFLAGS    += -DHW_HAVE_NCCL=1
    NVCCFLAGS += -DHW_HAVE_NCCL=1
    CUDA_LIBS += -lnccl
  endif
else ifeq ($(HAVE_CUDA),sim)
  # The simulated device (make sim): the CUDA host code compiled by the host C++ compiler against
  # tests/simcuda/'s cuda_runtime.h and cublas_v2.h, linked with tests/simcuda/*.c, which run every
  # CUDA call, cuBLAS call and kernel launch (kernels.cu's launchers) at once on the host, and
  # tests/simcuda/nccl.c's NCCL across the processes of one host (for GPU ranks under mpirun).
  CU_SRC  := $(filter-out src/cuda/kernels.cu, $(wildcard src/cuda/*.cu))
  C_SRC   += $(GPU_C_SRC)
  SIM_OBJ := $(patsubst tests/%.c,$(BUILD)/tests/%.o,$(wildcard tests/simcuda/*.c))
  CU_CC    = $(CXX) -x c++ -std=c++17 $(OPT) -g -Wall -Wextra -Werror -fno-exceptions -fno-rtti -D_GNU_SOURCE \
             -Iinclude -Itests/simcuda -DHW_HAVE_NCCL=1
else
  # No CUDA: no GPU part at all. src/train/gpu_plugin.c refuses a GPU run naming the build, and
  # the GPU suites (which call the cuda module) are not built; tests/gpu/test_without_cuda.c is instead.
  CFLAGS  += -DHW_WITHOUT_CUDA=1
endif
CU_CC ?= $(NVCC) $(NVCCFLAGS)

# The GPU objects: in the plugin (CUDA build) or in the library (simulated build).
GPU_OBJ  := $(patsubst src/%.c,$(BUILD)/%.o,$(PLUGIN_C_SRC)) $(patsubst src/%.cu,$(BUILD)/%.cu.o,$(CU_SRC))
OBJ      := $(patsubst src/%.c,$(BUILD)/%.o,$(C_SRC)) $(if $(PLUGIN),,$(GPU_OBJ)) $(SIM_OBJ)
CLI_OBJ  := $(patsubst src/%.c,$(BUILD)/%.o,$(CLI_SRC))
# The test binary links the command line without its main(): the option tables and the commands.
CLI_TEST_OBJ := $(filter-out $(BUILD)/cli/main.o,$(CLI_OBJ))

# ./hogwild exports to its plugins the hw_ functions they call, and nothing else: the list is made
# from the plugins' undefined symbols ($(BUILD)/exports.list); every core object is linked in
# (--whole-archive), whether the binary calls it itself or only a plugin does. A plugin exports its
# entry table alone (its folder's plugin.map).
PLUGIN_OBJ := $(if $(PLUGIN),$(GPU_OBJ)) $(MPI_OBJ)
EXPORTS    := $(if $(strip $(PLUGIN_OBJ)),$(BUILD)/exports.list)
EXE_LIB     = $(if $(EXPORTS),-Wl$(comma)--dynamic-list=$(EXPORTS) -Wl$(comma)--whole-archive $(LIB) \
              -Wl$(comma)--no-whole-archive,$(LIB))
TEST_GPU := $(if $(PLUGIN),$(GPU_OBJ))
# The tests, split as the code is: tests/unit/ (a module's functions), tests/e2e/ (./hogwild run as a
# user runs it, mpirun among them), tests/gpu/ (the GPU suites: on a GPU, on the simulated device of
# make sim, and skipped saying why without either; test_without_cuda.c instead in a build without
# CUDA). One binary runs them all.
GPU_TESTS := $(filter-out tests/gpu/test_without_cuda.c,$(wildcard tests/gpu/*.c))
TEST_SRC := $(wildcard tests/unit/*.c tests/e2e/*.c) \
            $(if $(filter 0,$(HAVE_CUDA)),tests/gpu/test_without_cuda.c,$(GPU_TESTS))
TEST_OBJ := $(patsubst tests/%.c,$(BUILD)/tests/%.o,$(TEST_SRC))
LIB      := $(BUILD)/libhogwild.a

.PHONY: all test asan sim clean info layout-check exports-check flag-check format format-check
# ./hogwild is the default build's; another BUILD= (CUDA=0, clang, asan, sim) builds its own
# $(BUILD)/hogwild, so that it cannot replace ./hogwild with a binary make test would then trust.
BIN := $(if $(filter build,$(BUILD)),hogwild,$(BUILD)/hogwild)
all: info $(BIN) $(PLUGIN) $(MPI_PLUGIN) $(BUILD)/test_hogwild
	@echo "hogwild BLAS in use here: $$(./$(BIN) --version | sed -n 's/^BLAS: //p')"

info:
	@echo "hogwild build: CC=$(CC) CUDA=$(if $(filter 1,$(HAVE_CUDA)),yes ($(NVCC)),$(if $(filter sim,$(HAVE_CUDA)),SIMULATED (tests/simcuda),no)) NCCL=$(if $(NCCL_FOUND),yes,no) MPI=$(if $(filter 1,$(HAVE_MPI)),yes ($(MPICC)),no)"
	@echo "hogwild BLAS: $(BLAS_LIB), loaded at run time (the kernels in use: ./hogwild --version)"
	@echo "hogwild CPU code: $(if $(ARCH),$(ARCH),the compiler's baseline (this CPU lacks AVX2/FMA))"
	@echo "GPU part: $(if $(PLUGIN),$(PLUGIN)$(comma) loaded with dlopen() only when a run asks for a GPU (CPU runs map no CUDA library),$(if $(filter sim,$(HAVE_CUDA)),linked in (the simulated device),none: --device cuda fails naming the build))"

SRC_H   := $(wildcard include/hw/*.h src/*/*.h src/*/*/*.h src/cuda/*.cuh)
$(BUILD)/%.o: src/%.c $(SRC_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The CPU kernels of src/nn/cpu/ (kernels.h): the same source compiled once per instruction set, and
# chosen at run time by what the CPU reports (HOGWILD_CPU_PATH forces one). Only these files get
# these flags; the rest of the binary keeps $(ARCH), never AVX-512.
$(BUILD)/nn/cpu/baseline.o: CFLAGS += -march=x86-64 -mtune=generic
$(BUILD)/nn/cpu/avx2.o: CFLAGS += -march=x86-64 -mtune=generic -mavx2 -mfma
$(BUILD)/nn/cpu/avx512.o: CFLAGS += -march=x86-64 -mtune=generic -mavx2 -mfma -mavx512f -mavx512vl -mavx512bw -mavx512dq
# The AVX-512 copy's tiles with AVX2 instructions, for the tests only (tests/unit/kernels_avx512_tiles.c).
# -Wno-psabi: its 16-float vectors (vp) are returned through memory without AVX-512, which GCC warns
# changes the ABI; they are returned only by static functions that are inlined.
$(BUILD)/tests/unit/kernels_avx512_tiles.o: CFLAGS += -march=x86-64 -mtune=generic -mavx2 -mfma -Wno-psabi

$(BUILD)/%.cu.o: src/%.cu $(wildcard include/hw/*.h) $(wildcard src/cuda/*.cuh) $(wildcard src/cuda/*.h) $(wildcard tests/simcuda/*.h)
	@mkdir -p $(dir $@)
	$(CU_CC) -c $< -o $@

$(LIB): $(OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# ./hogwild, and $(BUILD)/hogwild for builds that must not replace it (make asan). In a CUDA build
# it needs the plugin beside it, so the plugin is built with it.
$(BUILD)/exports.list: $(PLUGIN_OBJ)
	{ echo '{'; nm $^ | awk '$$1 == "U" && $$2 ~ /^hw_/ { used[$$2] = 1 } NF == 3 { defined[$$3] = 1 } \
	    END { for (s in used) if (!(s in defined)) print "    " s ";" }' | sort; echo '};'; } > $@

hogwild $(BUILD)/hogwild: $(CLI_OBJ) $(LIB) $(EXPORTS) | $(PLUGIN) $(MPI_PLUGIN)
	$(CC) $(CFLAGS) $(CLI_OBJ) $(EXE_LIB) -o $@ $(LDLIBS) -ldl

# The MPI side as a shared object (src/comm/mpi_plugin.c loads it); its objects see mpi.h.
ifneq ($(MPI_PLUGIN),)
$(MPI_OBJ): CFLAGS += $(MPI_CFLAGS)
$(MPI_PLUGIN): $(MPI_OBJ) src/comm/mpi/plugin.map
	$(CC) -shared $(LDFLAGS) $(MPI_OBJ) -Wl,--version-script=src/comm/mpi/plugin.map -o $@ $(MPI_LIBS)
endif

# The GPU part as a shared object; its undefined core symbols resolve to the executable's.
ifneq ($(PLUGIN),)
$(PLUGIN): $(GPU_OBJ) src/cuda/plugin.map
	$(CC) -shared $(LDFLAGS) $(GPU_OBJ) -Wl,--version-script=src/cuda/plugin.map -o $@ $(CUDA_LIBS)
endif

$(BUILD)/tests/%.o: tests/%.c $(SRC_H) $(wildcard tests/*.h tests/simcuda/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -c $< -o $@

$(BUILD)/test_hogwild: $(TEST_OBJ) $(CLI_TEST_OBJ) $(TEST_GPU) $(MPI_OBJ) $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS) $(CUDA_LIBS) $(MPI_LIBS) -lcriterion

# Benchmarks: bench/<name>.c -> $(BUILD)/bench_<name>, linked like ./hogwild.
$(BUILD)/bench_%: bench/%.c $(LIB) $(TEST_GPU) $(wildcard include/hw/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(TEST_GPU) $(LIB) -o $@ $(LDLIBS) $(CUDA_LIBS)

# LeNet's convolution GEMMs and reductions at the trainer's shapes, each variant timed on cuda:0
# (a standalone CUDA program: only nvcc and cuBLAS; see its header).
$(BUILD)/bench_gpu_shapes: bench/gpu_shapes.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -std=c++17 $(CUDA_ARCH) $< -o $@ -lcublas

# The IDX reader fed a few thousand damaged files, built with ASan + UBSan (any report fails).
# err, option, file, rng and the temporary-file table (proc/shm, with proc/signals and proc/procfs under
# it) come uninstrumented from the normal build.
FUZZ_SRC := tests/fuzz/fuzz_idx.c $(wildcard src/data/*.c)
FUZZ_OBJ := $(BUILD)/err.o $(BUILD)/option.o $(BUILD)/file.o $(BUILD)/rng.o $(BUILD)/proc/shm.o $(BUILD)/proc/signals.o $(BUILD)/proc/procfs.o
$(BUILD)/fuzz_idx: $(FUZZ_SRC) $(FUZZ_OBJ) $(wildcard include/hw/*.h)
	$(CC) $(CFLAGS) -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
	      $(FUZZ_SRC) $(FUZZ_OBJ) -o $@ -lstb -lmd -lz -lm -pthread

# The layout (docs/ARCHITECTURE.md, "Layout"): the file-level call graph of the objects built, from
# nm, has no circle, and every file calls only files of its own room or of rooms before it.
layout-check: $(OBJ) $(CLI_OBJ) $(GPU_OBJ) $(MPI_OBJ)
	python3 tests/tools/callgraph.py $(BUILD) --check --summary

# Only the public API is exported: the dynamic symbols of ./hogwild are the hw_ functions its plugins
# call ($(BUILD)/exports.list), and each plugin's its entry table alone. Another BUILD= checks its
# own $(BUILD)/hogwild (it relinked ./hogwild from its objects and checked that).
exports-check: $(BIN) $(PLUGIN) $(MPI_PLUGIN)
	@bad=$$(nm -D --defined-only $(BIN) | awk '$$3 !~ /^hw_/'); \
	    for so in $(PLUGIN) $(MPI_PLUGIN); do \
	        bad="$$bad$$(nm -D --defined-only $$so | awk '$$3 !~ /^hw_(cuda|mpi)_plugin$$/')"; done; \
	    if [ -n "$$bad" ]; then echo "$$bad"; echo "exports-check: symbols exported beyond the public API (above)"; exit 1; fi
	@echo "exports-check: ./$(BIN) exports $$(nm -D --defined-only $(BIN) | wc -l) hw_ symbols; each plugin its entry table alone"

# Only src/cli/ knows flag names: the other modules' messages say what is wrong in their own terms
# and name the flag through hw_option_hint (include/hw/option.h). Comments are not messages; the
# flags of other programs (curl, wget, docker) are allowed by name in the script.
flag-check:
	python3 tests/tools/flag_check.py --self-test
	python3 tests/tools/flag_check.py

# The style of the C and CUDA sources (.clang-format), with Debian's clang-format (14 in bookworm;
# ./run.sh installs it). tests/torch_reference.h, generated, is left as its script writes it.
CLANG_FORMAT ?= clang-format
FORMAT_SRC = $(filter-out tests/torch_reference.h tests/lr_schedule_reference.h,$(shell find src include tests -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' | sort))
format-check:
	@$(CLANG_FORMAT) --dry-run --Werror $(FORMAT_SRC) && echo "format-check: $(words $(FORMAT_SRC)) files in clang-format's style"
format:
	$(CLANG_FORMAT) -i $(FORMAT_SRC)

# The end-to-end tests run ./hogwild (another BUILD='s $(BUILD)/hogwild), so it is built first.
# tests/tools/run_suite.sh gives the verdict: Criterion's exit status, checked against its JSON
# report where it is not 0 (Criterion 2.4.1 has exited 1 after runs whose every test passed, and
# writes failure messages into the report unescaped, which the verdict repairs: its --self-test).
test: $(BIN) $(BUILD)/test_hogwild $(BUILD)/fuzz_idx $(BUILD)/bench_nn_step $(BUILD)/bench_compute_floor layout-check exports-check flag-check
	python3 tests/tools/test_verdict.py --self-test
	HW_BIN=$(CURDIR)/$(BIN) tests/tools/run_suite.sh $(BUILD)/test_hogwild $(BUILD)/test-report.json $(TEST_ARGS)
	$(BUILD)/fuzz_idx
	$(MAKE) --no-print-directory sim

# ---- the simulated CUDA device (tests only) ----
# The library built with SIM=1 in build-sim/ (see the CUDA section), then the GPU suites (cuda,
# cuda_layers, gpu_train, mpi_gpu, multigpu: on 2 devices, multigpu again on 4) and the simulator's
# own tests (simcuda) on it. The simulated binary alone, to run the GPU paths by hand without a GPU:
# make SIM=1 BUILD=build-sim build-sim/hogwild (then HW_SIM_DEVICES=N build-sim/hogwild ...). It runs the runner,
# copies, streams, events, the all-reduce's copies, GPU Hogwild across processes sharing memory as
# CUDA IPC shares it, GPU DataParallel, and GPU ranks under mpirun (the simulated NCCL across
# processes), and checks the ordering of streams and host waits; NOT real kernels, cuBLAS, the real
# NCCL, device rounding or speed (docs/ARCHITECTURE.md). Any misuse the
# simulator refused, in any process, fails the target. It also runs make layout-check's call graph
# on $(SIM_DIR)/, whose objects include src/cuda/ (compiled by the host compiler), so a build
# without nvcc checks the GPU part's layering too (a second or two: nm on the objects).
SIM_SUITES ?= @(cuda|cuda_layers|gpu_train|simcuda|mpi_gpu|multigpu)/*
SIM_DIR    ?= build-sim
SIM_ENV    = HW_BIN=$(CURDIR)/$(SIM_DIR)/hogwild HW_SIM_REFUSALS=$(CURDIR)/$(SIM_DIR)/refusals.log
sim:
	$(MAKE) --no-print-directory BUILD=$(SIM_DIR) SIM=1 $(SIM_DIR)/test_hogwild $(SIM_DIR)/hogwild
	@echo "== make sim: the layout of the build with the GPU part (make layout-check on $(SIM_DIR)/) =="
	python3 tests/tools/callgraph.py $(SIM_DIR) --check --summary
	@rm -f $(SIM_DIR)/refusals.log
	@echo "== make sim: the GPU suites on the SIMULATED CUDA device (host code, not a GPU), 2 devices =="
	HW_SIM_DEVICES=2 $(SIM_ENV) $(SIM_DIR)/test_hogwild --filter '$(SIM_SUITES)' $(SIM_ARGS)
	@echo "== make sim: Hogwild on several GPUs again, on 4 devices =="
	HW_SIM_DEVICES=4 $(SIM_ENV) $(SIM_DIR)/test_hogwild --filter 'multigpu/*' $(SIM_ARGS)
	@echo "== make sim: the same without a device (HW_SIM_DEVICES=0): the no-GPU error paths =="
	HW_SIM_DEVICES=0 $(SIM_ENV) $(SIM_DIR)/test_hogwild --filter '@(cuda|cuda_layers|gpu_train)/*' $(SIM_ARGS)
	@if [ -s $(SIM_DIR)/refusals.log ]; then cat $(SIM_DIR)/refusals.log; \
	    echo "make sim: the simulated device refused misuse (above)"; exit 1; fi
	@echo "== make sim: passed on the SIMULATED CUDA device; real GPU results come only from a GPU =="

# The whole suite, leak checks included, with ./hogwild itself built with the sanitizers too; then
# make sim built the same way (the GPU host code on the simulated device). Criterion counts a test
# as passed before its process exits and LeakSanitizer reports, so the logs are searched too: any
# sanitizer report fails the target.
ASAN_OPT = -O1 -fsanitize=address,undefined -fno-omit-frame-pointer
ASAN_ENV = LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp
asan:
	$(MAKE) BUILD=build-asan OPT="$(ASAN_OPT)" CUDA=0 build-asan/test_hogwild build-asan/hogwild build-asan/bench_nn_step \
	    build-asan/bench_compute_floor
	HW_BIN=$(CURDIR)/build-asan/hogwild $(ASAN_ENV) tests/tools/run_suite.sh build-asan/test_hogwild \
	    build-asan/test-report.json $(TEST_ARGS) > build-asan/test.log 2>&1; status=$$?; cat build-asan/test.log; \
	    exit $$status
	$(ASAN_ENV) $(MAKE) --no-print-directory sim SIM_DIR=build-asan-sim OPT="$(ASAN_OPT)" > build-asan/sim.log 2>&1; \
	    status=$$?; cat build-asan/sim.log; exit $$status
	@if grep -E 'Sanitizer|runtime error' build-asan/test.log build-asan/sim.log; then \
	    echo "make asan: sanitizer reports, above"; exit 1; fi

clean:
	rm -rf build build-asan build-sim build-asan-sim build-clang hogwild libhogwild-cuda.so libhogwild-mpi.so
