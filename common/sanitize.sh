#!/bin/sh
# make sanitize: compute-sanitizer's four tools over every step 05 kernel at
# odd shapes (N = 65, 257, D = 64, every dtype each kernel takes, causal and
# not; the forwards that write L once more with L; the backward kernels at
# D = 64 and, in fp16/bf16, 128), and over step 01's softmax kernel through
# its GPU check. Any error
# fails (--error-exitcode=1). Skips (exit 77) without a GPU or the tool.
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
[ -n "$cs" ] || { echo "sanitize: SKIP: compute-sanitizer not found"; exit 77; }
./step05 --help >/dev/null 2>&1 || { echo "sanitize: ./step05 is missing: make step05"; exit 2; }
./step05 --sanitize-shapes >/dev/null 2>&1; rc=$?
[ "$rc" -eq 77 ] && { echo "sanitize: SKIP: no CUDA device"; exit 77; }
fail=0
for tool in memcheck racecheck initcheck synccheck; do
    if "$cs" --tool "$tool" --error-exitcode=1 ./step05 --sanitize-shapes >/tmp/sanitize.$$.log 2>&1; then
        echo "PASS sanitize/$tool step05: $(grep -c '^ran kernel' /tmp/sanitize.$$.log) forward and $(grep -c '^ran backward' /tmp/sanitize.$$.log) backward kernel runs, $(tail -n 1 /tmp/sanitize.$$.log)"
    else
        echo "FAIL sanitize/$tool step05:"; tail -n 30 /tmp/sanitize.$$.log; fail=1
    fi
done
if "$cs" --tool memcheck --error-exitcode=1 ./step01 --device gpu --seq 257 --dim 64 --batch 2 --heads 3 --repeat 1 >/tmp/sanitize.$$.log 2>&1; then
    echo "PASS sanitize/memcheck step01 (naive cuBLAS + softmax): $(tail -n 1 /tmp/sanitize.$$.log)"
else
    echo "FAIL sanitize/memcheck step01:"; tail -n 30 /tmp/sanitize.$$.log; fail=1
fi
rm -f /tmp/sanitize.$$.log
exit $fail
