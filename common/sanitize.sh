#!/bin/sh
# make sanitize: compute-sanitizer's four tools over every step 05 kernel at
# odd shapes (N = 65, 257, D = 64, every dtype each kernel takes, causal and
# not; the forwards that write L once more with L; the backward kernels at
# D = 64 and, in fp16/bf16, 128), and over step 01's softmax kernel through
# its GPU check, and over step 06's GPU training (gpt_gpu.cu's kernels). Any error
# fails (--error-exitcode=1). Skips (exit 77) without a GPU or the tool. Also step 05's decode kernels
# (--decode --sanitize-shapes), the FP8 kernel (--dtype fp8 --sanitize-shapes) and step 06's generation on the GPU.
# GPU_AS=t4 (any --gpu-as name): every step 05, step 01 and step 06 --train run under that emulation, so that the
# configurations chosen for a smaller GPU's shared memory run under the tools too.
# Parts, to split the run (racecheck alone took 77 s to 249 s over step 05's forward and backward on the H200):
#   sh common/sanitize.sh [forward decode fp8 step01 train generate]   (default: all six)
#   TOOLS="memcheck racecheck" sh common/sanitize.sh ...                (default: all four tools)
# make sanitize PARTS="decode fp8" TOOLS=memcheck passes them on.
EMU=${GPU_AS:+--gpu-as $GPU_AS}
# compute-sanitizer's racecheck runs a kernel hundreds of times slower: the watchdog's deadline for one wait on the
# GPU (common/gpu.cu) is 30 minutes here, not 2
export FA_WATCHDOG_S=${FA_WATCHDOG_S:-1800}
set -f   # the parts and tools are words, never file patterns
TOOLS=$(echo $TOOLS)
TOOLS=${TOOLS:-memcheck racecheck initcheck synccheck}
parts=" ${*:-forward decode fp8 step01 train generate} "
for x in $parts; do
    case $x in forward|decode|fp8|step01|train|generate) ;;
    *) echo "sanitize: no part '$x' (forward decode fp8 step01 train generate)" >&2; exit 2 ;; esac
done
for x in $TOOLS; do
    case $x in memcheck|racecheck|initcheck|synccheck) ;;
    *) echo "sanitize: no tool '$x' in TOOLS (memcheck racecheck initcheck synccheck)" >&2; exit 2 ;; esac
done
want() { case $parts in *" $1 "*) return 0 ;; esac; return 1; }
case " $TOOLS " in *" memcheck "*) memcheck=1 ;; *) memcheck=0 ;; esac
if [ "$(echo $parts)" = step01 ] && [ $memcheck -eq 0 ]; then
    echo "sanitize: step01 runs under memcheck only, and TOOLS ($TOOLS) has none: nothing to run" >&2; exit 2
fi
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
[ -n "$cs" ] || { echo "sanitize: SKIP: compute-sanitizer not found"; exit 77; }
./step05 --help >/dev/null 2>&1 || { echo "sanitize: ./step05 is missing: make step05"; exit 2; }
./step05 $EMU --sanitize-shapes >/dev/null 2>&1; rc=$?
[ "$rc" -eq 77 ] && { echo "sanitize: SKIP: no CUDA device"; exit 77; }
fail=0
want forward && for tool in $TOOLS; do
    if "$cs" --tool "$tool" --error-exitcode=1 ./step05 $EMU --sanitize-shapes >/tmp/sanitize.$$.log 2>&1; then
        echo "PASS sanitize/$tool step05: $(grep -c '^ran kernel' /tmp/sanitize.$$.log) forward and $(grep -c '^ran backward' /tmp/sanitize.$$.log) backward kernel runs, $(tail -n 1 /tmp/sanitize.$$.log)"
    else
        echo "FAIL sanitize/$tool step05:"; tail -n 30 /tmp/sanitize.$$.log; fail=1
    fi
done
# step 05's decode kernels (kernel 1 in fp32, fp16, bf16; 2-13 in fp16 and bf16): three sequences of 257, 17
# and 65 keys, 4 query heads over 2 KV heads, 1 and 5 new rows, pages of 64 and 16 keys; a serving batch at D = 128;
# one cache of 5000 keys at D = 64 for the split kernels (79 splits on the H200: decode kernel 11's merge in rounds)
want decode && for tool in $TOOLS; do
    if "$cs" --tool "$tool" --error-exitcode=1 ./step05 $EMU --decode --sanitize-shapes >/tmp/sanitize.$$.log 2>&1; then
        echo "PASS sanitize/$tool step05 --decode: $(grep -c '^ran decode kernel' /tmp/sanitize.$$.log) decode kernel runs, $(tail -n 1 /tmp/sanitize.$$.log)"
    else
        echo "FAIL sanitize/$tool step05 --decode:"; tail -n 30 /tmp/sanitize.$$.log; fail=1
    fi
done
# step 05's FP8 kernels, every one (N = 65 and 257, D = 64 and 128, causal and not) and the GPU quantizer (with the rotation and without)
want fp8 && for tool in $TOOLS; do
    if "$cs" --tool "$tool" --error-exitcode=1 ./step05 $EMU --dtype fp8 --sanitize-shapes >/tmp/sanitize.$$.log 2>&1; then
        echo "PASS sanitize/$tool step05 --dtype fp8: $(grep -c '^ran kernel [0-9]* fp8 ' /tmp/sanitize.$$.log) FP8 kernel runs (kernels $(grep '^ran kernel [0-9]* fp8 ' /tmp/sanitize.$$.log | cut -d' ' -f3 | sort -un | tr '\n' ' ' | sed 's/ $//')), $(grep -c '^ran fp8_quantize_gpu' /tmp/sanitize.$$.log) quantizer runs, $(tail -n 1 /tmp/sanitize.$$.log)"
    else
        echo "FAIL sanitize/$tool step05 --dtype fp8:"; tail -n 30 /tmp/sanitize.$$.log; fail=1
    fi
done
if ! want step01 || [ $memcheck -eq 0 ]; then
    :   # step 01's softmax runs under memcheck only
elif "$cs" --tool memcheck --error-exitcode=1 ./step01 $EMU --device gpu --seq 257 --dim 64 --batch 2 --heads 3 --repeat 1 >/tmp/sanitize.$$.log 2>&1; then
    echo "PASS sanitize/memcheck step01 (naive cuBLAS + softmax): $(tail -n 1 /tmp/sanitize.$$.log)"
else
    echo "FAIL sanitize/memcheck step01:"; tail -n 30 /tmp/sanitize.$$.log; fail=1
fi
# step 06's GPU training: every kernel of gpt_gpu.cu with the fp32 attention (D = 16, beside the CPU run), and
# --big's four attentions (naive and fused, fp32 and bf16, D = 64), each at T = 65 (no tile divides it)
want train && for tool in $TOOLS; do
    if "$cs" --tool "$tool" --error-exitcode=1 ./step06 $EMU --train --device gpu --steps 2 --seq 65 --batch 2 --layers 1 \
            >/tmp/sanitize.$$.log 2>&1 &&
       "$cs" --tool "$tool" --error-exitcode=1 ./step06 $EMU --train --device gpu --big --steps 1 --seq 65 --batch 1 --heads 2 \
            --layers 1 >>/tmp/sanitize.$$.log 2>&1; then
        echo "PASS sanitize/$tool step06 --train --device gpu (T = 65; fp32 and, with --big, bf16 attention): $(grep -c 'SUMMARY: 0 ' /tmp/sanitize.$$.log) runs with 0 errors"
    else
        echo "FAIL sanitize/$tool step06 --train --device gpu:"; tail -n 30 /tmp/sanitize.$$.log; fail=1
    fi
done
# step 06's generation on the GPU (gpt_gpu.cu's decoder: encoder_forward_at, kv_append, decode kernel 1), with a
# model of T = 32 trained 2 steps on the CPU: 40 tokens, so the window slides
if ! want generate; then
    :
elif ./step06 --train --steps 2 --batch 2 --seq 32 --layers 1 --save /tmp/sanitize.$$.bin >/dev/null 2>&1; then
    for tool in $TOOLS; do
        if "$cs" --tool "$tool" --error-exitcode=1 ./step06 --generate --device gpu --load /tmp/sanitize.$$.bin --tokens 40 \
                >/tmp/sanitize.$$.log 2>&1; then
            echo "PASS sanitize/$tool step06 --generate --device gpu (T = 32, 40 tokens): $(tail -n 1 /tmp/sanitize.$$.log)"
        else
            echo "FAIL sanitize/$tool step06 --generate --device gpu:"; tail -n 30 /tmp/sanitize.$$.log; fail=1
        fi
    done
else
    echo "FAIL sanitize: ./step06 --train --save could not make the model for --generate"; fail=1
fi
rm -f /tmp/sanitize.$$.log /tmp/sanitize.$$.bin
exit $fail
