#!/bin/sh
# The readers' GPUs, checked on one big GPU (the H200 this project is lent):
#   sh common/gpu_families.sh OUTDIR [what...]
# what: build (three builds: this GPU's own code, and PTX for compute_75 and compute_80, the Turing and the
#       Ampere code paths, which the driver compiles for the GPU it runs on; build-native, build-sm75,
#       build-sm80: one of them), then any of
#       t4 rtx2080 rtx3060 rtx4090 l4 a100 (that GPU emulated with --gpu-as on the build whose code path it runs:
#       compute_75 for Turing, compute_80 for the others; step 05, 06, 07's --check and step 05's first screens),
#       native (the same checks on this GPU's own build, no emulation), sanitize-t4 (make sanitize on the compute_75
#       build under the T4's limits). Default: all of them.
# What an emulation shows: which kernels run, with which tiles, and that they are right, on that GPU's code path
# and within its limits (compute capability, shared memory per block and per SM); never that GPU's speed.
# Each run's output goes to OUTDIR/<name>.log, one summary line per run to stdout.
out=${1:?usage: sh common/gpu_families.sh OUTDIR [what...]}; shift
mkdir -p "$out"
[ $# -gt 0 ] || set -- build t4 rtx3060 a100 native sanitize-t4
export CUDA_CACHE_MAXSIZE=4294967296 # the JIT-compiled PTX, kept between runs (the default cache is too small)
run() { # name, command...
    n=$1; shift
    t0=$(date +%s)
    "$@" >"$out/$n.log" 2>&1; rc=$?
    echo "== $n (exit $rc, $(( $(date +%s) - t0 )) s): $(tail -n 1 "$out/$n.log")"
}
build() { # name, CUDA_ARCH: the binaries into families/NAME/
    t0=$(date +%s)
    if make BUILD="build/$1" CUDA_ARCH="$2" all >"$out/build_$1.log" 2>&1; then
        mkdir -p "families/$1" && cp step0[1-7] "families/$1/"
        echo "== build $1 (CUDA_ARCH=$2): ok, $(( $(date +%s) - t0 )) s"
    else
        echo "== build $1 (CUDA_ARCH=$2): FAILED"; tail -n 20 "$out/build_$1.log"
    fi
}
emulate() { # gpu, build
    b=families/$2
    run "$1_step05_check" "$b/step05" --gpu-as "$1" --check
    run "$1_step06_check" "$b/step06" --gpu-as "$1" --check
    run "$1_step07_check" "$b/step07" --gpu-as "$1" --check
    run "$1_step05_first" "$b/step05" --gpu-as "$1"
    run "$1_step05_fp32_d128" "$b/step05" --gpu-as "$1" --dtype fp32 --dim 128
    run "$1_step05_fp16" "$b/step05" --gpu-as "$1" --dtype fp16
    run "$1_step05_fp16_d128" "$b/step05" --gpu-as "$1" --dtype fp16 --dim 128
    run "$1_step05_backward" "$b/step05" --gpu-as "$1" --backward --dtype fp16
}
native_arch() { nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d '. ' | sed 's/^/sm_/'; }
for w in "$@"; do
    case $w in
    build) build sm75 compute_75; build sm80 compute_80; build native "$(native_arch)" ;;
    build-sm75) build sm75 compute_75 ;;
    build-sm80) build sm80 compute_80 ;;
    build-native) build native "$(native_arch)" ;;
    t4) emulate t4 sm75 ;;
    rtx2080) emulate rtx2080 sm75 ;;
    rtx3060|rtx4090|l4|a100) emulate "$w" sm80 ;;
    rtx5090|b200) echo "== $w: not emulated here: --gpu-as refuses a GPU newer than the one it runs on (12.0 and 10.0 > this one's)" ;;
    native) b=families/native
            run native_step05_check "$b/step05" --check
            run native_step06_check "$b/step06" --check
            run native_step07_check "$b/step07" --check ;;
    sanitize-t4) cp families/sm75/step0[1-7] . && run sanitize_t4 env GPU_AS=t4 sh common/sanitize.sh ;;
    esac
done
