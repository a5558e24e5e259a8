# FlashAttention step by step: one program per book step.
#
#   make step04 && ./step04     the CPU half of the chapter (no GPU needed)
#   make step05 && ./step05     the fused CUDA kernels (needs nvcc; runs on an NVIDIA GPU)
#   make check                  every step's --check, plus the bad-input tests
#   make help                   every target and variable
#
# Each numbered folder NN_name/ holds one program: its *.c files are compiled
# with $(CC), its *.cu files with $(NVCC) when nvcc is found, and the result
# is ./stepNN at the root. Without nvcc the CPU steps still build and every
# GPU path says "built without CUDA" and exits 77 (skipped).

# A parallel build by default (-j the core count): every .cu file is one nvcc run per architecture; on a
# 2-core machine make check from a fresh clone, the fallback list's build included, took 7 min 14 s with it.
# make -j1 for one file at a time.
NPROC   := $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += -j$(NPROC)

CC      ?= cc
NVCC    ?= nvcc
PYTHON  ?= python3
WERROR  ?= -Werror
CFLAGS  ?= -O2
CFLAGS  += -std=c11 -Wall -Wextra -pedantic $(WERROR) -Icommon
LDLIBS  += -lm -lpthread

# --- sanitizers: make check SANITIZE=1 builds the CPU steps with ASan+UBSan
# (CUDA off: the CUDA runtime and ASan do not mix), in their own build dir.
ifeq ($(SANITIZE),1)
  CFLAGS  += -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
  LDFLAGS += -fsanitize=address,undefined
  NOCUDA  := 1
  BUILD   ?= build/san
endif
BUILD ?= build

comma := ,
# --- CUDA: nvcc detection and the target architecture.
# CUDA_ARCH is a list of sm_XX (machine code for that GPU family, SASS) and compute_XX (PTX only: the
# driver compiles it for the GPU it finds, any of compute capability XX or newer). The fallback list, for
# a machine where nvidia-smi finds no GPU (CI, a laptop): SASS for every family the book's readers have, and
# PTX for what comes after them.
#   sm_75  Turing: T4 (Colab, Kaggle), RTX 20, GTX 16    fp16 tensor cores (m16n8k8), no cp.async, no bf16
#   sm_80  Ampere: A100; its SASS also runs on sm_86 (RTX 30) and sm_89 (Ada: RTX 40, L4)
#   sm_90  Hopper: H100, H200, built as sm_90a (wgmma, TMA: forward kernels 10-52, backward 5-20, FP8, decode 8-13)
#   sm_100 Blackwell datacenter: B200;  sm_120 Blackwell consumer: RTX 50
#   compute_120  PTX for GPUs newer than the list
FALLBACK_ARCH := sm_75 sm_80 sm_90 sm_100 sm_120 compute_120
ifneq ($(NOCUDA),1)
  HAVE_NVCC := $(shell command -v $(NVCC) 2>/dev/null)
endif
ifneq ($(HAVE_NVCC),)
  ifeq ($(origin CUDA_ARCH),undefined)
    GPU_CC := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. \r')
    ifneq ($(GPU_CC),)
      CUDA_ARCH  := sm_$(GPU_CC)
      ARCH_WHY   := detected from nvidia-smi
    else
      CUDA_ARCH  := $(FALLBACK_ARCH)
      ARCH_WHY   := no GPU found: fallback list, Turing to Blackwell
    endif
  else
    ARCH_WHY := set by CUDA_ARCH
  endif
  # sm_90 (Hopper) is built as sm_90a, the same chip with its arch-specific
  # instructions (wgmma, TMA, setmaxnreg) enabled, for the Hopper kernels; the code runs only on
  # compute capability 9.0, which is what sm_90 code runs on anyway.
  GENCODE  := $(foreach a,$(CUDA_ARCH),$(if $(filter compute_%,$(a)),-gencode arch=$(a)$(comma)code=$(a),-gencode arch=compute_$(subst sm_,,$(a:sm_90=sm_90a)),code=$(a:sm_90=sm_90a)))
  NVFLAGS  ?= -O3
  # C++20 for the registry's entries, written with designated initializers (.id = 23, .extends = 22, ...): a field
  # an entry leaves out is zero, as in C, and g++ warns of that in C++ (-Wmissing-field-initializers), so that
  # one warning is off for the CUDA files.
  NVFLAGS  += -std=c++20 -lineinfo $(GENCODE) -Icommon --Werror all-warnings \
              -Xcompiler -Wall,-Wextra,-Wno-missing-field-initializers$(if $(WERROR),$(comma)-Werror)
  # ptxas's report of every function, read by common/nvcc_guard.sh (the %.cu.o rule)
  PTXAS_V  := -Xptxas -v
  CFLAGS   += -DHAVE_CUDA=1
  GPU_OBJ  := $(BUILD)/common/gpu.cu.o
  LINK     := $(NVCC) $(GENCODE)
  LDLIBS   += -lcublas -lcublasLt
  CUDA_MSG := nvcc $(shell $(NVCC) --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), CUDA_ARCH=$(CUDA_ARCH) ($(ARCH_WHY))
else
  GPU_OBJ  := $(BUILD)/common/nogpu.o
  LINK     := $(CC)
  CUDA_MSG := no nvcc: CPU steps only, GPU paths exit 77 (skipped)
endif
CUOBJDUMP ?= $(firstword $(wildcard $(dir $(HAVE_NVCC))cuobjdump) cuobjdump)

# A stamp named after the flags: changing CC, flags or CUDA_ARCH rebuilds.
STAMP := $(BUILD)/.flags-$(shell echo '$(CC) $(CFLAGS) $(NVFLAGS) $(PTXAS_V) $(HAVE_NVCC) $(CUDA_ARCH)' | cksum | cut -d' ' -f1)

STEP_DIRS := $(sort $(patsubst %/main.c,%,$(wildcard [0-9][0-9]_*/main.c)))
step_of    = step$(firstword $(subst _, ,$(1)))
STEPS     := $(foreach d,$(STEP_DIRS),$(call step_of,$(d)))
COMMON_OBJ := $(BUILD)/common/common.o $(GPU_OBJ)

.PHONY: all check check-sanitize sanitize bench plots idea clean help info $(STEPS)
all: info $(STEPS)

# Which GPU families this build's kernels run on: an sm_XX runs on its own major version (sm_80 on 8.6
# and 8.9 too), a compute_XX (PTX) on XX and everything newer.
ARCH_FAMILIES = $(strip $(if $(filter sm_75 compute_75,$(CUDA_ARCH)),Turing) \
    $(if $(filter sm_80 sm_86 sm_89 compute_75 compute_80 compute_86 compute_89,$(CUDA_ARCH)),Ampere/Ada) \
    $(if $(filter sm_90 compute_75 compute_80 compute_86 compute_89 compute_90,$(CUDA_ARCH)),Hopper$(if $(filter sm_90,$(CUDA_ARCH)),,(no wgmma: the Hopper kernels SKIP))) \
    $(if $(filter sm_100 sm_120 compute_%,$(CUDA_ARCH)),Blackwell))
info:
	@echo "build: $(CC), $(CUDA_MSG)"
	@$(if $(HAVE_NVCC),echo "GPU families this build runs on: $(ARCH_FAMILIES)",true)

# A step that measures another step's code links that code itself, not a copy:
# step02 probes step 01's naive attention and step 04's tiled forward, and step 05's forward kernels.
F05 := 05_cuda_fused
EXTRA_C_step02  := 01_naive/naive.c 04_online_softmax/flash.c
EXTRA_CU_step02 := 01_naive/naive_gpu.cu $(F05)/registry.cu $(wildcard $(F05)/forward/*.cu)
EXTRA_C_step04  := 01_naive/naive.c
EXTRA_CU_step05 := 01_naive/naive_gpu.cu
EXTRA_CU_step06 := $(F05)/registry.cu $(wildcard $(F05)/forward/*.cu $(F05)/backward/*.cu) \
                   $(F05)/decode/decode01_transcription.cu 01_naive/naive_gpu.cu
EXTRA_C_step06  := 04_online_softmax/flash.c
# step07 runs step 06's causal forward (its mask, and the tile-relative bug it diagnoses) and checks the
# breaks as step 06's training runs them (naive_backward.c); its FP8 break (break_fp8.c) rounds with step 05's
# e4m3 (fp8/fp8.c, the CPU numerics). Steps 05 and 06 take nothing of step 07's.
EXTRA_C_step07  := 06_causal/causal.c 06_causal/naive_backward.c 01_naive/naive.c $(F05)/fp8/fp8.c

# The training of step 06 (./step06 --train) spends its time in loops over the model's channels
# (y += a x, of unknown length at compile time), which gcc vectorizes only from -O3; the result is
# the same bit for bit (no sum is reordered), the training about 2x faster. Nothing that is timed
# against another step is in these files.
$(patsubst %.c,$(BUILD)/%.o,06_causal/gpt.c 06_causal/naive_backward.c 06_causal/flash_backward.c): CFLAGS += -O3

# One rule set per step folder: NN_name/*.c and NN_name/*.cu, and those of its sub-folders (05_cuda_fused/forward/,
# ...), -> ./stepNN
step_src = $(wildcard $(1)/*.$(2) $(1)/*/*.$(2))
define STEP_RULES
$(call step_of,$(1)): $(call step_of,$(1))-bin
$(call step_of,$(1))-bin: $(patsubst %.c,$(BUILD)/%.o,$(call step_src,$(1),c) $(EXTRA_C_$(call step_of,$(1)))) \
        $(if $(HAVE_NVCC),$(patsubst %.cu,$(BUILD)/%.cu.o,$(call step_src,$(1),cu) $(EXTRA_CU_$(call step_of,$(1))))) $(COMMON_OBJ)
	$$(LINK) $$(LDFLAGS) -o $(call step_of,$(1)) $$^ $$(LDLIBS)
endef
$(foreach d,$(STEP_DIRS),$(eval $(call STEP_RULES,$(d))))
.PHONY: $(addsuffix -bin,$(STEPS))

$(STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/.flags-*
	@touch $@

# Each object depends on the headers it includes, as the compiler lists them (-MMD: the .d file beside the
# object; -MP: a header that is deleted or moved is no error). Touching a header rebuilds the files that include
# it and nothing else; a README or a data file rebuilds nothing. Includes are written relative to the including
# file (#include "../primitives/wgmma.cuh"), so a reader finds every file from the line that names it.
$(BUILD)/%.o: %.c $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

# common/nvcc_guard.sh runs each compile with ptxas's -v and stops the build where ptxas says it compiled a kernel
# slower than written (its wgmma serialised, its setmaxnreg ignored), which --Werror does not see; a failed compile
# leaves no object.
$(BUILD)/%.cu.o: %.cu $(STAMP)
	@mkdir -p $(dir $@)
	sh common/nvcc_guard.sh $(NVCC) $(NVFLAGS) $(PTXAS_V) -MMD -MP -MF $(@:.o=.d) -c -o $@ $< || { rm -f $@; exit 1; }

-include $(wildcard $(addsuffix *.d,$(BUILD)/*/ $(BUILD)/*/*/ $(BUILD)/*/*/*/))

# --- reading what the compiler made: make 05_cuda_fused/forward/kernel01_transcription.ptx / .sass
# (for the first architecture of CUDA_ARCH, sm_90 as sm_90a like the build)
ARCH1 := $(patsubst sm_90,sm_90a,$(patsubst compute_%,sm_%,$(firstword $(CUDA_ARCH))))
%.ptx: %.cu
	$(NVCC) $(filter-out -gencode arch=%,$(NVFLAGS)) -arch=compute_$(subst sm_,,$(ARCH1)) -Icommon -ptx -o $@ $<
%.sass: %.cu
	$(NVCC) $(filter-out -gencode arch=%,$(NVFLAGS)) -gencode arch=compute_$(subst sm_,,$(ARCH1)),code=$(ARCH1) -Icommon -cubin -o $*.cubin $<
	@command -v $(CUOBJDUMP) >/dev/null || { echo "no $(CUOBJDUMP) here: the cubin is $*.cubin (nvdisasm or cuobjdump on a full CUDA install reads it)"; exit 1; }
	$(CUOBJDUMP) -sass $*.cubin > $@ && rm -f $*.cubin && echo "wrote $@"

# --- checks: every step's --check, then the bad-input tests; the closing
# line is "check: X passed, Y failed, Z skipped".
check: all
	@sh common/check.sh $(STEPS)

check-sanitize:
	$(MAKE) SANITIZE=1 check

# compute-sanitizer over every GPU kernel at odd shapes (GPU machine only).
sanitize: all
	@TOOLS="$(TOOLS)" sh common/sanitize.sh $(PARTS)

bench: step05
	./step05 --bench

plots: all
	@sh plots/make_plots.sh $(if $(QUICK),quick)

# The ladder's one idea per kernel, from the code: kernel K against the kernel its registry entry extends (a diff of
# the two files), or, for a rung on a shared body, the file's own code (its policy). make idea K=12, K=B5 (backward),
# K=D3 (decode), K=24 (FP8); ALL=1: the launchers and the "// aside" lines too.
idea:
	@sh 05_cuda_fused/host/idea.sh $(if $(ALL),--all) '$(K)'

clean:
	rm -rf build results $(STEPS) step0? *.cubin */*.ptx */*.sass

help:
	@echo "targets:"
	@echo "  step01 .. step07   build ./stepNN from the folder NN_name/ (found: $(STEPS))"
	@echo "  all                every step"
	@echo "  check              every step's --check and the bad-input tests (GPU checks SKIP without a GPU)"
	@echo "  check-sanitize     the same with -fsanitize=address,undefined (CPU paths)"
	@echo "  sanitize           compute-sanitizer memcheck/racecheck/initcheck/synccheck on the GPU kernels (PARTS=, TOOLS=: a part)"
	@echo "  bench              ./step05 --bench (FlashAttention's benchmark shapes)"
	@echo "  plots              run the steps with --csv into results/ and draw the PNGs (QUICK=1: small, for CI)"
	@echo "  idea K=12|K=B5|K=D3 kernel K's one idea, from the code: against the kernel it extends, or its own rung file (ALL=1: with the launchers)"
	@echo "  DIR/FILE.ptx|.sass the PTX or SASS of DIR/FILE.cu, to read what the compiler made"
	@echo "  clean              remove build/, results/ and the binaries"
	@echo "variables:"
	@echo "  CC=$(CC)  CFLAGS=$(CFLAGS)"
	@echo "  NVCC=$(NVCC)  CUDA_ARCH=$(CUDA_ARCH)  ($(CUDA_MSG))"
	@echo "                     sm_XX: machine code for that family; compute_XX: PTX, compiled by the driver for any newer GPU"
	@echo "                     (make CUDA_ARCH=compute_75: Turing's code paths, runnable on any GPU, as the emulation uses)"
	@$(if $(HAVE_NVCC),echo "                     this build runs on: $(ARCH_FAMILIES)",true)
	@echo "  WERROR=$(WERROR)  (empty to let warnings through)"
	@echo "  SANITIZE=1         ASan+UBSan build of the CPU paths, in build/san"
	@echo "  NOCUDA=1           build without CUDA even when nvcc is there"
	@echo "  QUICK=1            make plots: small runs only"
	@echo "  PYTHON=$(PYTHON)"
