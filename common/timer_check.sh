#!/bin/sh
# The timer's own check (05_cuda_fused/README.md, "How the kernels are timed"), on a GPU machine:
#   sh common/timer_check.sh
# One kernel of each family at a short shape, where the host's work per launch weighs most, timed by the same binary
# with the default timer (the GPU kept busy while the host queues the sample) and with FA_TIMER=idle (the GPU idle
# while the host works: the old way), each twice without FA_PLANT_HOST_DELAY_US (the two give the run-to-run spread)
# and once with it at 50 (a launcher that spends 50 us on the host before launching). With the default timer the
# planted delay must not move a time beyond the spread (exit 1 if it does); with the idle GPU it shows. Each time is a
# step's own median of --repeat samples, read from its --csv; the forward, backward and FP8 rows are --bench runs
# (no float64 reference to compute: a row's six runs take seconds, not minutes).
set -u
./step05 --help >/dev/null 2>&1 || { echo "timer_check: ./step05 is missing: make step05"; exit 2; }
./step05 --dtype fp16 --kernel 23 --batch 1 --heads 1 --seq 64 --dim 64 --repeat 1 >/dev/null 2>&1
[ $? -eq 77 ] && { echo "timer_check: SKIP: no CUDA device (or no CUDA in this build)"; exit 77; }
csv=$(mktemp) || exit 1
trap 'rm -f "$csv"' EXIT
# row LABEL MODE-REGEX KERNEL-COLUMN KERNEL TIME-COLUMN UNIT ARGS...: one line of six times, then the verdict: with the
# GPU kept busy, the planted delay's move against the run-to-run spread (the two runs without it). It passes when the
# move is within max(2 x spread, 1%); with the GPU idle the move is shown, not judged (it is the host's 50 us).
fails=0
row() {
    label=$1 mode=$2 kcol=$3 kid=$4 tcol=$5 unit=$6; shift 6
    line=$(printf '%-48s' "$label") ts=""
    for timer in busy idle; do
        for delay in 0 0 50; do
            : >"$csv" # a run that fails leaves no time behind, not the run before's
            FA_TIMER=$timer FA_PLANT_HOST_DELAY_US=$delay ./step05 "$@" --csv "$csv" >/dev/null 2>&1
            t=$(awk -F, -v m="$mode" -v kc="$kcol" -v k="$kid" -v tc="$tcol" '$1 ~ m && $kc == k { print $tc; exit }' "$csv")
            ts="$ts ${t:-x}"
            [ -n "$t" ] && t=$(printf '%.4f %s' "$t" "$unit") || t="not run"
            line="$line$(printf '%-14s' "$t")"
        done
    done
    echo "$line"
    v=$(echo "$ts" | awk '{ if (NF != 6 || $0 ~ /x/) { print "FAIL not every run gave a time"; exit }
        for (i = 1; i <= 6; i++) if (!($i + 0 > 0 && $i + 0 < 1e30)) { print "FAIL a run gave a time that is not a positive number: " $i; exit }
        a = ($1 + $2) / 2; s = ($1 > $2 ? $1 - $2 : $2 - $1) / a; m = ($3 - a) / a; mi = ($6 - ($4 + $5) / 2) / (($4 + $5) / 2)
        lim = (2 * s > 0.01 ? 2 * s : 0.01); am = (m < 0 ? -m : m)
        printf "%s busy: the planted delay moved it %+.2f%% (spread %.2f%%, limit %.2f%%); idle: %+.2f%%\n",
               (am <= lim ? "PASS" : "FAIL"), 100 * m, 100 * s, 100 * lim, 100 * mi }')
    echo "    $v"
    case $v in FAIL*) fails=$((fails + 1)) ;; esac
}
echo "the timer's check: the median of 20 samples each, one binary; a planted delay is host work inside every sample"
printf '%-48s%-42s%-42s\n' "" "the GPU kept busy (default)" "the GPU idle (FA_TIMER=idle)"
printf '%-48s%-14s%-14s%-14s%-14s%-14s%-14s\n' "" "no delay" "again" "50 us planted" "no delay" "again" "50 us planted"
# --bench --seq 512 (B = 32, H = 2048/D, N = 512): no float64 reference to compute between the timings
row "forward kernel 23, fp16 B=32 H=32 N=512 D=64" '^bench$' 3 23 10 ms --bench --seq 512 --dim 64 --dtype fp16 --kernel 23 --repeat 20
row "backward kernel 12, fp16 B=32 H=32 N=512 D=64" '^bench_backward$' 3 12 10 ms --bench --backward --seq 512 --dim 64 --dtype fp16 --kernel 12 --repeat 20
row "decode kernel 13, fp16 B=1 H=32 L=4096 D=128" '^default$' 2 13 12 us --decode --dtype fp16 --kernel 13 --batch 1 --heads 32 --seq 4096 --dim 128 --repeat 20
row "FP8 kernel 24, B=32 H=16 N=512 D=128" '^bench$' 3 24 9 ms --bench --seq 512 --dim 128 --dtype fp8 --kernel 24 --repeat 20
[ $fails -eq 0 ] && echo "timer_check: every planted delay within its row's limit (twice the spread, at least 1%)" || { echo "timer_check: $fails FAIL"; exit 1; }
