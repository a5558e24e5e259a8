#!/bin/sh
# Bad command lines across the steps: each must exit 2 with exactly one line
# on stderr and nothing that looks like a crash. Steps not built are skipped.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# mknpy FILE DESCR SHAPE [DATA_BYTES]: a well-formed .npy header (version 1,
# padded to 64 bytes) followed by DATA_BYTES zero bytes.
mknpy() {
    h="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
    while [ $(( (10 + ${#h} + 1) % 64 )) -ne 0 ]; do h="$h "; done
    len=$(( ${#h} + 1 ))
    { printf '\223NUMPY\001\000'; printf "\\$(printf %o $((len % 256)))\\$(printf %o $((len / 256)))"
      printf '%s\n' "$h"; head -c "${4:-0}" /dev/zero; } >"$1"
}
mknpy "$tmp/int.npy" '<i4' '(1, 1, 4, 8)' 128      # wrong dtype
mknpy "$tmp/shape.npy" '<f4' '(2, 3)' 24            # wrong rank
mknpy "$tmp/ok.npy" '<f4' '(1, 1, 4, 8)' 128        # a good [1,1,4,8] float32
mknpy "$tmp/other.npy" '<f4' '(1, 1, 5, 8)' 160     # a good file of another shape
mknpy "$tmp/short.npy" '<f4' '(1, 1, 4, 8)' 100     # data truncated
printf 'not a numpy file' >"$tmp/junk.npy"
mknpy "$tmp/nan.npy" '<f4' '(1, 1, 4, 8)' 124 && printf '\000\000\300\177' >>"$tmp/nan.npy"  # last value NaN
mknpy "$tmp/ok64.npy" '<f4' '(1, 1, 2, 64)' 512     # D = 64 (FP8's head dims)
mknpy "$tmp/nan64.npy" '<f4' '(1, 1, 2, 64)' 508 && printf '\000\000\300\177' >>"$tmp/nan64.npy"
# decode's files: Q [B, Hq, n, D] and the cache [B, Hkv, L, D]
mknpy "$tmp/dq.npy" '<f4' '(2, 4, 2, 64)' 4096      # B=2 Hq=4 n=2
mknpy "$tmp/dk.npy" '<f4' '(2, 2, 8, 64)' 8192      # B=2 Hkv=2 L=8
mknpy "$tmp/dk9.npy" '<f4' '(2, 2, 9, 64)' 9216     # L=9
mknpy "$tmp/dk3.npy" '<f4' '(2, 3, 8, 64)' 12288    # Hkv=3
mknpy "$tmp/dkb.npy" '<f4' '(3, 2, 8, 64)' 12288    # B=3
mknpy "$tmp/dkd.npy" '<f4' '(2, 2, 8, 128)' 16384   # D=128
mknpy "$tmp/dk1.npy" '<f4' '(2, 2, 1, 64)' 1024     # L=1, fewer keys than Q's 2 new rows
mknpy "$tmp/dknan.npy" '<f4' '(2, 2, 8, 64)' 8188 && printf '\000\000\300\177' >>"$tmp/dknan.npy"
# text files for step06 --train --data
: >"$tmp/empty.txt"
printf 'text\000with a NUL byte' >"$tmp/binary.txt"
printf 'hello world\n' >"$tmp/short.txt"
for a in 196 197 198 199 200; do b=128; while [ $b -lt 192 ]; do   # 320 distinct two-byte UTF-8 characters
    printf "\\$(printf %o $a)\\$(printf %o $b)"; b=$((b + 1)); done; done >"$tmp/many.txt"
# model files for step06 --generate --load (generate.c's layout): V=2 T=1 L=1 H=1 C=1 has 30 parameters
shape='\001\000\000\000\002\000\000\000\001\000\000\000\001\000\000\000\001\000\000\000\001\000\000\000'
syms='\141\000\000\000\142\000\000\000'
{ printf 'FLASHGPT'; printf "$shape"; printf '\036\000\000\000\000\000\000\000'; printf "$syms"; head -c 120 /dev/zero; } >"$tmp/good.bin"
{ printf 'FLASHGPT'; printf "$shape"; printf '\036\000\000\000\000\000\000\000'; printf "$syms"; head -c 100 /dev/zero; } >"$tmp/cut.bin"
{ printf 'FLASHGPT'; printf "$shape"; printf '\037\000\000\000\000\000\000\000'; printf "$syms"; head -c 124 /dev/zero; } >"$tmp/count.bin"
{ printf 'FLASHGPT'; printf "$shape"; printf '\036\000\000\000\000\000\000\000'; printf "$syms"; head -c 116 /dev/zero
  printf '\000\000\300\177'; } >"$tmp/nanw.bin"
{ printf 'FLASHGPT\002\000\000\000'; head -c 116 /dev/zero; } >"$tmp/v2.bin"
printf 'FLASHGPT' >"$tmp/hdr.bin"
printf 'this is not a model file, only text long enough for a header' >"$tmp/foreign.bin"

n=0
# expect RC WHAT step, description, args...: exit RC with one line on stderr (and for RC 1, the bytes asked for)
expect() {
    want=$1; kind=$2; s=$3; what=$4; shift 4
    [ -x "./$s" ] || return 0
    n=$((n + 1))
    "./$s" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq "$want" ] && [ "$lines" -eq 1 ] && { [ "$want" -ne 1 ] || grep -q 'asked for [0-9]* bytes' "$tmp/err"; }; then
        echo "PASS $kind/$s $what: exit $rc, $(cat "$tmp/err")"
    else
        echo "FAIL $kind/$s $what: expected exit $want and one line on stderr, got exit $rc and $lines lines: $(head -c 300 "$tmp/err")"
    fi
}
bad() { expect 2 bad-input "$@"; }
bad step01 "empty value"        --seq ''
bad step01 "negative"           --seq -5
bad step01 "zero"               --batch 0
bad step01 "trailing junk"      --seq 12abc
bad step01 "2^70"               --seq 1180591620717411303424
bad step01 "missing value"      --seq
bad step01 "unknown flag"       --frobnicate
bad step01 "unsupported dtype"  --dtype fp64
bad step01 "size_t overflow"    --batch 65535 --heads 65535 --seq 1048576 --dim 1024
bad step01 "missing file"       --q "$tmp/none.npy" --k "$tmp/none.npy" --v "$tmp/none.npy"
bad step01 "npy wrong dtype"    --q "$tmp/int.npy" --k "$tmp/int.npy" --v "$tmp/int.npy"
bad step01 "npy wrong shape"    --q "$tmp/shape.npy" --k "$tmp/shape.npy" --v "$tmp/shape.npy"
bad step01 "not a npy"          --q "$tmp/junk.npy" --k "$tmp/junk.npy" --v "$tmp/junk.npy"
bad step01 "npy shapes differ"  --q "$tmp/ok.npy" --k "$tmp/other.npy" --v "$tmp/ok.npy"
bad step01 "npy vs --seq"       --q "$tmp/ok.npy" --k "$tmp/ok.npy" --v "$tmp/ok.npy" --seq 5
bad step01 "npy truncated"      --q "$tmp/short.npy" --k "$tmp/short.npy" --v "$tmp/short.npy"
bad step02 "bad mem-limit"      --mem-limit 8X
bad step02 "bad seq-list"       --seq-list 1024,abc
bad step02 "empty seq-list"     --seq-list ''
bad step03 "block zero"         --br 0
bad step03 "block not integer"  --bc 1.5
bad step04 "dtype bf16 on cpu"  --dtype bf16
bad step04 "NaN in --q"         --q "$tmp/nan.npy" --k "$tmp/ok.npy" --v "$tmp/ok.npy"
bad step04 "--opt=value, bad value" --seq=12abc
bad step04 "--opt=, empty value" --seq=
bad step04 "dim too large"      --dim 100000
bad step04 "seed negative"      --seed -1
bad step05 "gpu-as unknown"     --gpu-as nosuch
bad step05 "gpu-as no value"    --gpu-as
bad step06 "gpu-as unknown"     --gpu-as rtx9090
bad step01 "gpu-as unknown"     --gpu-as ""
bad step05 "fp8 files, D = 8"   --dtype fp8 --q "$tmp/ok.npy" --k "$tmp/ok.npy" --v "$tmp/ok.npy"
bad step05 "fp8 files, NaN"     --dtype fp8 --q "$tmp/ok64.npy" --k "$tmp/nan64.npy" --v "$tmp/ok64.npy"
bad step05 "scaling without fp8" --scaling block
bad step05 "layout-csv empty"   --layout-csv ""
bad step05 "layout-csv unwritable" --layout-csv /nonexistent-dir/l.csv
bad step05 "scaling unknown"    --dtype fp8 --q "$tmp/ok.npy" --k "$tmp/ok.npy" --v "$tmp/ok.npy" --scaling per-row
bad step05 "fp8 out, no files"  --dtype fp8 --out "$tmp/o.npy"
bad step05 "kernel 0"           --kernel 0
bad step05 "kernel range backwards" --kernel 12-11
bad step05 "kernel range open"  --kernel 11-
bad step05 "check with a kernel range" --check --kernel 11-12
bad step05 "fp8 check with a kernel range" --dtype fp8 --check --kernel 24-28
bad step05 "decode check with a kernel range" --decode --check --kernel 2-3
bad step05 "grid over 2^31-1"   --batch 1048576 --heads 1048576 --seq 64 --dim 64 --dtype fp16
bad step05 "dim 48 unsupported for tensor cores" --dtype fp16 --dim 48
bad step05 "bench: dim 96"               --bench --dim 96
bad step05 "fp8 bench: dim 96"          --dtype fp8 --bench --dim 96
bad step05 "bench: seq 1000"             --bench --seq 1000
bad step05 "bench: seq 32768"            --backward --bench --seq 32768
bad step05 "decode: Hq not a multiple" --decode --kv-heads 5
bad step05 "decode: 17 new rows"   --decode --new 17
bad step05 "decode: page 48"       --decode --page 48
bad step05 "decode: page 512"      --decode --page 512
bad step05 "decode: a length of 0" --decode --lens 0,5
bad step05 "decode: cache < new rows" --decode --lens 5,3 --new 4
bad step05 "decode: D 32 in fp16"  --decode --dim 32
bad step05 "decode: lens vs batch" --decode --lens 5,6 --batch 3
bad step05 "kv-heads without decode" --kv-heads 4
bad step05 "decode files: K and V differ" --decode --q "$tmp/dq.npy" --k "$tmp/dk.npy" --v "$tmp/dk9.npy"
bad step05 "decode files: Hq not a multiple" --decode --q "$tmp/dq.npy" --k "$tmp/dk3.npy" --v "$tmp/dk3.npy"
bad step05 "decode files: B differs"  --decode --q "$tmp/dq.npy" --k "$tmp/dkb.npy" --v "$tmp/dkb.npy"
bad step05 "decode files: D differs"  --decode --q "$tmp/dq.npy" --k "$tmp/dkd.npy" --v "$tmp/dkd.npy"
bad step05 "decode files: n > L"      --decode --q "$tmp/dq.npy" --k "$tmp/dk1.npy" --v "$tmp/dk1.npy"
bad step05 "decode files: NaN"        --decode --q "$tmp/dq.npy" --k "$tmp/dknan.npy" --v "$tmp/dk.npy"
bad step05 "decode files: lens > L"   --decode --q "$tmp/dq.npy" --k "$tmp/dk.npy" --v "$tmp/dk.npy" --lens 8,9
bad step05 "decode files: lens count" --decode --q "$tmp/dq.npy" --k "$tmp/dk.npy" --v "$tmp/dk.npy" --lens 8
bad step05 "decode files: --new"     --decode --q "$tmp/dq.npy" --k "$tmp/dk.npy" --v "$tmp/dk.npy" --new 3
bad step05 "decode files: --check"    --decode --q "$tmp/dq.npy" --k "$tmp/dk.npy" --v "$tmp/dk.npy" --check
bad step05 "decode files: K missing"  --decode --q "$tmp/dq.npy" --v "$tmp/dk.npy"
bad step05 "decode --out, no files"   --decode --out "$tmp/o.npy"
bad step05 "decode with backward"  --decode --backward
bad step05 "fp8: D 32"             --dtype fp8 --dim 32
bad step05 "fp8 with backward"     --dtype fp8 --backward
# (a step05 built without CUDA has no kernel list to hold an id against: every family's GPU part is a SKIP there)
./step05 --dtype fp8 --kernel 12 2>&1 | grep -q 'built without CUDA' || bad step05 "fp8 with kernel 12" --dtype fp8 --kernel 12
./step05 --dtype fp8 --kernel 1-12 2>&1 | grep -q 'built without CUDA' || bad step05 "fp8 with kernels 1-12" --dtype fp8 --kernel 1-12
bad step05 "--do without backward" --q "$tmp/ok.npy" --k "$tmp/ok.npy" --v "$tmp/ok.npy" --do "$tmp/ok.npy"
bad step05 "--do without --q"     --backward --do "$tmp/ok.npy"
bad step05 "backward files, no dO" --backward --q "$tmp/ok.npy" --k "$tmp/ok.npy" --v "$tmp/ok.npy"
bad step05 "--do of another shape" --backward --q "$tmp/ok.npy" --k "$tmp/ok.npy" --v "$tmp/ok.npy" --do "$tmp/other.npy"
bad step05 "--do not a npy"       --backward --q "$tmp/ok.npy" --k "$tmp/ok.npy" --v "$tmp/ok.npy" --do "$tmp/junk.npy"
bad step05 "--do with --bench"    --backward --bench --q "$tmp/ok.npy" --k "$tmp/ok.npy" --v "$tmp/ok.npy" --do "$tmp/ok.npy"
bad step05 "--out-dq alone"       --backward --out-dq "$tmp/dq.npy"
bad step05 "--out with backward"  --backward --out "$tmp/o.npy"
bad step05 "--out-dk no file"     --backward --q "$tmp/ok.npy" --k "$tmp/ok.npy" --v "$tmp/ok.npy" --do "$tmp/ok.npy" --out-dk
bad step05 "errors without fp8"    --errors
bad step05 "dtype fp9"             --dtype fp9
bad step06 "bad mask"           --mask sideways
bad step06 "train: data missing"  --train --data "$tmp/none.txt"
bad step06 "train: data is a dir" --train --data "$tmp"
bad step06 "train: data empty"    --train --data "$tmp/empty.txt"
bad step06 "train: data binary"   --train --data "$tmp/binary.txt"
bad step06 "train: data too short" --train --data "$tmp/short.txt"
bad step06 "train: > 256 symbols" --train --data "$tmp/many.txt"
bad step06 "train: steps 0"       --train --steps 0
bad step06 "steps without train"  --steps 20
bad step06 "train gpu in fp16"    --train --device gpu --dtype fp16
bad step06 "train gpu dim 20"     --train --device gpu --heads 2 --dim 20
bad step06 "big without gpu"      --train --big
bad step06 "train: seq past corpus" --train --seq 50000 --batch 1 --heads 1
bad step06 "train gpu: csv unwritable" --train --device gpu --csv /proc/step06-nope.csv
bad step06 "train: csv unwritable" --train --csv /proc/step06-nope.csv
bad step06 "train with alibi"     --train --alibi
bad step06 "train: save unwritable" --train --save /proc/step06-nope.bin
bad step06 "save without train"   --save "$tmp/m.bin"
bad step06 "load without generate" --load "$tmp/good.bin"
bad step06 "generate: no --load"  --generate
bad step06 "generate: load missing" --generate --load "$tmp/none.bin"
bad step06 "generate: foreign file" --generate --load "$tmp/foreign.bin"
bad step06 "generate: header cut" --generate --load "$tmp/hdr.bin"
bad step06 "generate: weights cut" --generate --load "$tmp/cut.bin"
bad step06 "generate: count off"  --generate --load "$tmp/count.bin"
bad step06 "generate: version 2"  --generate --load "$tmp/v2.bin"
bad step06 "generate: NaN weight" --generate --load "$tmp/nanw.bin"
bad step06 "generate: unknown symbol" --generate --load "$tmp/good.bin" --prompt "abc"
bad step06 "generate: empty prompt" --generate --load "$tmp/good.bin" --prompt ""
bad step06 "generate: tokens 0"   --generate --load "$tmp/good.bin" --tokens 0
bad step06 "generate: temperature -1" --generate --load "$tmp/good.bin" --temperature -1
bad step06 "generate with --seq"  --generate --load "$tmp/good.bin" --seq 64
if [ -x ./step07 ]; then   # a graded assignment with one output truncated, one of the wrong shape, one int32, one missing
    ./step07 --assignment "$tmp/a" >/dev/null 2>&1
    for f in "$tmp/a"/q_*.npy; do cp "$f" "$tmp/a/out_${f##*/q_}"; done   # every set's output, well-formed
    head -c 1000 "$tmp/a/q_multi.npy" >"$tmp/a/out_multi.npy"
    mkdir -p "$tmp/b" && cp "$tmp/a"/*.npy "$tmp/b/" && cp "$tmp/a/q_one_tile.npy" "$tmp/b/out_multi.npy"
    mkdir -p "$tmp/c" && cp "$tmp/b"/*.npy "$tmp/c/" && cp "$tmp/a/q_multi.npy" "$tmp/c/out_multi.npy" && rm "$tmp/c/out_large.npy"
    mkdir -p "$tmp/d" && cp "$tmp/c"/*.npy "$tmp/d/" && mknpy "$tmp/d/out_multi.npy" '<i4' '(1, 2, 256, 64)' 131072
fi
bad step07 "json without grade"  --json /tmp/r.json
bad step07 "json empty name"    --json ""
bad step07 "json unwritable"    --grade "$tmp/a" --json /nonexistent-dir/r.json
# A malformed output is no usage error: its set fails with the reason (one line on stderr names the file), the
# other sets are graded, exit 1; with --json the results file is replaced whole, that test failed with the reason.
malformed() {   # DIR, what, the reason's words
    [ -x ./step07 ] || return 0
    n=$((n + 1))
    printf 'old results\n' >"$tmp/r.json"
    ./step07 --grade "$tmp/$1" --json "$tmp/r.json" >"$tmp/out" 2>"$tmp/err"
    rc=$? lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 1 ] && [ "$lines" -eq 1 ] && grep -q "out_multi.npy $3" "$tmp/err" &&
       grep -q "^  FAIL multi .*not graded: out_multi.npy $3" "$tmp/out" &&
       grep -q "\"name\": \"multi\".*\"status\": \"failed\".*out_multi.npy $3" "$tmp/r.json"; then
        echo "PASS grade/step07 $2: exit 1, multi failed in the results file, one line on stderr: $(cat "$tmp/err")"
    else echo "FAIL grade/step07 $2: expected exit 1, one line on stderr and multi failed in the results file, each saying out_multi.npy $3; got exit $rc, $lines lines: $(head -c 300 "$tmp/err")"; fi
}
malformed a "output truncated" "is truncated"
malformed b "output wrong shape" "has shape (1, 2, 64, 64)"
malformed d "output int32" "is int32"
bad step07 "grade: no such dir"   --grade "$tmp/none"
bad step07 "assignment: unwritable" --assignment /proc/step07-assignment
bad step07 "assignment: a file in the path" --assignment "$tmp/junk.npy/a"
bad step07 "out without inputs"   --out "$tmp/o.npy"
bad step07 "alibi without inputs" --alibi
bad step07 "bad break"          --break everything
bad step07 "score-scale nan"    --score-scale nan
# A missing output is not a usage error either: the other sets are graded, the missing one is named, exit 1.
if [ -x ./step07 ]; then
    n=$((n + 1))
    ./step07 --grade "$tmp/c" >"$tmp/out" 2>"$tmp/err"
    rc=$? graded=$(grep -c '^  \(PASS\|FAIL\) ' "$tmp/out") others=$(($(ls "$tmp/c"/q_*.npy | wc -l) - 1))
    if [ "$rc" -eq 1 ] && [ ! -s "$tmp/err" ] && grep -q '^  MISSING large ' "$tmp/out" && [ "$graded" -eq "$others" ]; then
        echo "PASS grade/step07 output missing: exit 1, $(grep '^missing:' "$tmp/out"), the other $graded sets graded"
    else echo "FAIL grade/step07 output missing: expected exit 1, a MISSING line for large, $others sets graded and nothing on stderr; got exit $rc, $graded graded, stderr: $(head -c 300 "$tmp/err")"; fi
fi
# Out of memory is not a usage error: exit 1, one line with the bytes asked for.
expect 1 out-of-memory step01 "Q over the host's memory" --seq 1048576 --batch 64 --heads 64 --dim 64 --device cpu
# ... and it says which memory ran out and the limit it used, the limit and not the bytes asked for again
# (one buffer once served both; a GPU step's host line once read as the device's)
if [ -x ./step01 ]; then
    n=$((n + 1))
    ./step01 --seq 1048576 --batch 64 --heads 64 --dim 64 --device cpu 2>"$tmp/err" >/dev/null
    asked=$(sed -n 's/.*asked for [0-9]* bytes (\([^)]*\)).*/\1/p' "$tmp/err"); limit=$(sed -n 's/.*host limit \([^(]*\) (.*/\1/p' "$tmp/err")
    if grep -q 'out of host memory' "$tmp/err" && [ -n "$limit" ] && [ "$asked" != "$limit" ]; then
        echo "PASS out-of-memory/step01 names the host and its limit: asked $asked, host limit $limit"
    else echo "FAIL out-of-memory/step01 names the host and its limit: asked '$asked', host limit '$limit' ($(cat "$tmp/err"))"; fi
fi
# Limits that are the real ones: --heads past the old 65535 cap runs (exit 0)
if [ -x ./step04 ]; then
    n=$((n + 1))
    if ./step04 --heads 70000 --seq 2 --dim 8 --repeat 1 >/dev/null 2>"$tmp/err"; then echo "PASS limits/step04 --heads 70000 runs"
    else echo "FAIL limits/step04 --heads 70000: $(head -c 300 "$tmp/err")"; fi
fi
expect 1 out-of-memory step06 "train: model over --mem-limit" --train --mem-limit 20M
if [ -x ./step06 ]; then   # ... naming the host and --mem-limit as the limit it used
    n=$((n + 1))
    ./step06 --train --mem-limit 20M 2>"$tmp/err" >/dev/null
    if grep -q 'out of host memory: .*host limit 20.0 MB (--mem-limit)' "$tmp/err"; then echo "PASS out-of-memory/step06 names --mem-limit: $(cat "$tmp/err")"
    else echo "FAIL out-of-memory/step06 names --mem-limit: expected 'out of host memory ... host limit 20.0 MB (--mem-limit)', got $(head -c 300 "$tmp/err")"; fi
fi
echo "bad-input: $n command lines tried"
