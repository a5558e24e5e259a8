#!/bin/sh
# The timer's own check (05_cuda_fused/README.md, "How the kernels are timed"), on a GPU machine:
#   sh common/timer_check.sh
# One kernel of each family at a short shape, where the host's work per launch weighs most, timed four ways by the
# same binary: the default timer (the GPU kept busy while the host queues the sample) and FA_TIMER=idle (the GPU idle
# while the host works: the old way), each without and with FA_PLANT_HOST_DELAY_US=50 (a launcher that spends 50 us
# on the host before launching). With the default timer the planted delay must not move a time beyond the run-to-run
# spread; with the idle GPU it shows. Each time is a step's own median of --repeat samples, read from its --csv.
set -u
./step05 --help >/dev/null 2>&1 || { echo "timer_check: ./step05 is missing: make step05"; exit 2; }
csv=$(mktemp) || exit 1
trap 'rm -f "$csv"' EXIT
# time LABEL MODE-REGEX KERNEL-COLUMN KERNEL TIME-COLUMN UNIT ARGS...: one line of four times
row() {
    label=$1 mode=$2 kcol=$3 kid=$4 tcol=$5 unit=$6; shift 6
    line=$(printf '%-44s' "$label")
    for timer in busy idle; do
        for delay in 0 50; do
            FA_TIMER=$timer FA_PLANT_HOST_DELAY_US=$delay ./step05 "$@" --csv "$csv" >/dev/null 2>&1
            t=$(awk -F, -v m="$mode" -v kc="$kcol" -v k="$kid" -v tc="$tcol" '$1 ~ m && $kc == k { print $tc; exit }' "$csv")
            [ -n "$t" ] && t=$(printf '%.4f %s' "$t" "$unit") || t="not run"
            line="$line$(printf '%-16s' "$t")"
        done
    done
    echo "$line"
}
echo "the timer's check: the median of 20 samples each, one binary; a planted delay is host work inside every sample"
printf '%-44s%-32s%-32s\n' "" "the GPU kept busy (default)" "the GPU idle (FA_TIMER=idle)"
printf '%-44s%-16s%-16s%-16s%-16s\n' "" "no delay" "50 us planted" "no delay" "50 us planted"
row "forward kernel 23, fp16 B=32 H=32 N=512 D=64" '^default$' 3 23 10 ms --dtype fp16 --kernel 23 --batch 32 --heads 32 --seq 512 --dim 64 --repeat 20
row "backward kernel 12, fp16 B=32 H=32 N=512 D=64" '^backward$' 3 12 10 ms --backward --dtype fp16 --kernel 12 --batch 32 --heads 32 --seq 512 --dim 64 --repeat 20
row "decode kernel 13, fp16 B=1 H=32 L=4096 D=128" '^default$' 2 13 12 us --decode --dtype fp16 --kernel 13 --batch 1 --heads 32 --seq 4096 --dim 128 --repeat 20
row "FP8 kernel 24, B=32 H=16 N=512 D=128" '^default$' 3 24 9 ms --dtype fp8 --kernel 24 --batch 32 --heads 16 --seq 512 --dim 128 --repeat 20
