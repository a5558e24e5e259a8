#!/bin/sh
# The GPU runs behind the READMEs, in one go on a GPU machine:
#   sh common/gpu_runs.sh OUTDIR [what...]
# what: checks sanitize step01 step02 step05 bench backward decode files step06 train generate step07 plots (default: all
# but plots). files: the decode and FP8 kernels on tensors written by Python (plots/decode_check.py against PyTorch,
# with the wrong causal offset planted once, which must fail).
# race-forward race-backward race-rest (not in the default): the H200 race's tables and gallery, each beside
# PyTorch's SDPA (FlashAttention-2, cuDNN) in the same call: the forward fp16 (every kernel) and fp32 (naive,
# kernels 1-2), fp16 causal and bf16 both ways (kernels 21-52: the seven latest, so that the word fits its call);
# the backward fp16 (every kernel), causal and bf16 (kernels 8-20); decode fp16 and bf16, FP8, step 06's --big
# training, step 02's memory and step 06's causal runs.
# Each word fits one 10-minute call of a lent GPU (their times on the H200 are in 05_cuda_fused/LOG.md).
# Each run's output goes to OUTDIR/<name>.log; a one-line summary per run to stdout.
out=${1:?usage: sh common/gpu_runs.sh OUTDIR [what...]}; shift
mkdir -p "$out"
[ $# -gt 0 ] || set -- checks sanitize step01 step02 step05 bench backward decode files step06 train generate step07
run() { # name, command...
    n=$1; shift
    t0=$(date +%s)
    "$@" >"$out/$n.log" 2>&1; rc=$?
    echo "== $n (exit $rc, $(( $(date +%s) - t0 )) s): $(tail -n 1 "$out/$n.log")"
}
torch_gpu() { python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; }
sdpa() { # name, csv, options: PyTorch's SDPA at step 05's --bench shapes, where PyTorch with CUDA is
    if torch_gpu; then n=$1; shift; run "$n" python3 plots/sdpa_reference.py "$@"; else echo "== $1: no PyTorch with CUDA"; fi
}
sdpa_decode() {
    if torch_gpu; then n=$1; shift; run "$n" python3 plots/sdpa_decode.py "$@"; else echo "== $1: no PyTorch with CUDA"; fi
}
for w in "$@"; do
    case $w in
    checks) run step05_check ./step05 --check; run step01_check ./step01 --check; run step02_check ./step02 --check
            run step06_check ./step06 --check; run step07_check ./step07 --check; run step07_diagnose ./step07 --diagnose ;;
    sanitize) run sanitize sh common/sanitize.sh ;;
    step01) run step01_gpu_fp32 ./step01 --device gpu --seq 4096; run step01_gpu_fp16 ./step01 --device gpu --seq 4096 --dtype fp16 ;;
    step02) run step02_gpu_fp16 ./step02 --device gpu --csv "$out/step02_gpu_fp16.csv"
            run step02_gpu_fp16_8G ./step02 --device gpu --mem-limit 8G --csv "$out/step02_gpu_fp16_8G.csv"
            run step02_gpu_fp32_8G ./step02 --device gpu --dtype fp32 --mem-limit 8G --csv "$out/step02_gpu_fp32_8G.csv" ;;
    step05) run step05_first ./step05
            run step05_fp32 ./step05 --csv "$out/step05_fp32.csv"; run step05_fp16 ./step05 --dtype fp16 --csv "$out/step05_fp16.csv"
            run step05_bf16 ./step05 --dtype bf16 ;;
    bench) run bench_fp16 ./step05 --bench --dtype fp16 --csv "$out/bench_fp16.csv"; run bench_fp32 ./step05 --bench --repeat 3 --csv "$out/bench_fp32.csv" ;;
    backward) run step05_backward_fp16 ./step05 --backward --dtype fp16 --csv "$out/backward_fp16.csv"
            run step05_backward_fp16_d128 ./step05 --backward --dtype fp16 --dim 128
            run step05_backward_fp16_causal ./step05 --backward --dtype fp16 --causal
            run step05_backward_fp32 ./step05 --backward
            run bench_backward_fp16 ./step05 --bench --backward --dtype fp16 --repeat 5 --csv "$out/bench_backward_fp16.csv"
            run bench_backward_fp16_causal ./step05 --bench --backward --dtype fp16 --causal --repeat 5 --csv "$out/bench_backward_fp16_causal.csv" ;;
    decode) run step05_decode ./step05 --decode --csv "$out/decode_default.csv"
            run bench_decode_fp16 ./step05 --decode --bench --csv "$out/decode_fp16.csv"
            run bench_decode_bf16 ./step05 --decode --bench --dtype bf16 --csv "$out/decode_bf16.csv"
            if python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
                run sdpa_decode_fp16 python3 plots/sdpa_decode.py "$out/sdpa_decode_fp16.csv"
                run sdpa_decode_bf16 python3 plots/sdpa_decode.py "$out/sdpa_decode_bf16.csv" --dtype bf16
            fi ;;
    generate) run train_save ./step06 --train --save "$out/model.bin"
            run generate_gpu_greedy ./step06 --generate --device gpu --load "$out/model.bin" --temperature 0
            run generate_gpu ./step06 --generate --device gpu --load "$out/model.bin" ;;
    step06) run step06 ./step06 --csv "$out/step06.csv"; run step06_fp16 ./step06 --device gpu --dtype fp16
            run step06_fp16_16k ./step06 --device gpu --dtype fp16 --seq 16384 --batch 1 ;;
    train) run train_gpu ./step06 --train --device gpu --csv "$out/train_gpu.csv"
            run train_gpu_big ./step06 --train --device gpu --big --csv "$out/train_gpu_big.csv"
            run train_gpu_big_16G ./step06 --train --device gpu --big --steps 3 --mem-limit 16G --csv "$out/train_gpu_big_16G.csv" ;;
    files) run decode_check python3 plots/decode_check.py
           run decode_check_wrong_offset python3 plots/decode_check.py --wrong-offset   # must FAIL: exit 1
           [ "$(grep -c ': FAIL$' "$out/decode_check_wrong_offset.log")" -eq 1 ] \
               && echo "== PASS: the planted wrong causal offset FAILed the round trip, as it must" \
               || echo "== FAIL: the planted wrong causal offset did not fail the round trip" 
           run decode_check_mqa_bf16 python3 plots/decode_check.py --dtype bf16 --kv-heads 1 --new 16 --dim 64 --page 64
           run decode_check_n1 python3 plots/decode_check.py --batch 4 --heads 32 --kv-heads 8 --new 1 --seq 4096
           python3 -c 'import numpy as np; g = np.random.default_rng(5)
for n, s in (("dq", (2, 8, 4, 128)), ("dk", (2, 2, 300, 128)), ("dv", (2, 2, 300, 128)),
             ("fq", (1, 4, 1000, 128)), ("fk", (1, 4, 1000, 128)), ("fv", (1, 4, 1000, 128))):
    x = g.standard_normal(s).astype(np.float32)
    if n == "fk": x[..., 5] *= 20                                    # an outlier channel, as LLM keys have
    np.save("'"$out"'/" + n + ".npy", x)'
           run decode_files ./step05 --decode --q "$out/dq.npy" --k "$out/dk.npy" --v "$out/dv.npy" --out "$out/do.npy"
           run decode_files_page16 ./step05 --decode --q "$out/dq.npy" --k "$out/dk.npy" --v "$out/dv.npy" --lens 300,37 --page 16
           run fp8_files ./step05 --dtype fp8 --q "$out/fq.npy" --k "$out/fk.npy" --v "$out/fv.npy" --out "$out/fo.npy"
           run fp8_files_causal_hadamard ./step05 --dtype fp8 --q "$out/fq.npy" --k "$out/fk.npy" --v "$out/fv.npy" --causal --scaling hadamard
           rm -f "$out"/*.npy ;;
    race-forward)
            run bench_fp16 ./step05 --bench --dtype fp16 --csv "$out/bench_fp16.csv"
            sdpa sdpa_fp16 "$out/sdpa_fp16.csv"
            run bench_fp16_causal ./step05 --bench --dtype fp16 --causal --kernel 21-52 --csv "$out/bench_fp16_causal.csv"
            sdpa sdpa_fp16_causal "$out/sdpa_fp16_causal.csv" --causal
            run bench_bf16 ./step05 --bench --dtype bf16 --kernel 21-52 --csv "$out/bench_bf16.csv"
            sdpa sdpa_bf16 "$out/sdpa_bf16.csv" --dtype bf16
            run bench_bf16_causal ./step05 --bench --dtype bf16 --causal --kernel 21-52 --csv "$out/bench_bf16_causal.csv"
            sdpa sdpa_bf16_causal "$out/sdpa_bf16_causal.csv" --dtype bf16 --causal
            run bench_fp32 ./step05 --bench --repeat 3 --csv "$out/bench_fp32.csv" ;;
    race-backward)
            run bench_backward_fp16 ./step05 --bench --backward --dtype fp16 --repeat 5 --csv "$out/bench_backward_fp16.csv"
            sdpa sdpa_backward_fp16 "$out/sdpa_backward_fp16.csv" --backward
            run bench_backward_fp16_causal ./step05 --bench --backward --dtype fp16 --causal --kernel 8-20 --repeat 5 \
                --csv "$out/bench_backward_fp16_causal.csv"
            sdpa sdpa_backward_fp16_causal "$out/sdpa_backward_fp16_causal.csv" --backward --causal
            run bench_backward_bf16 ./step05 --bench --backward --dtype bf16 --kernel 8-20 --repeat 5 \
                --csv "$out/bench_backward_bf16.csv"
            sdpa sdpa_backward_bf16 "$out/sdpa_backward_bf16.csv" --backward --dtype bf16
            run bench_backward_bf16_causal ./step05 --bench --backward --dtype bf16 --causal --kernel 8-20 --repeat 5 \
                --csv "$out/bench_backward_bf16_causal.csv"
            sdpa sdpa_backward_bf16_causal "$out/sdpa_backward_bf16_causal.csv" --backward --dtype bf16 --causal ;;
    race-rest)
            run bench_decode_fp16 ./step05 --decode --bench --csv "$out/decode_fp16.csv"
            sdpa_decode sdpa_decode_fp16 "$out/sdpa_decode_fp16.csv"
            run bench_decode_bf16 ./step05 --decode --bench --dtype bf16 --csv "$out/decode_bf16.csv"
            sdpa_decode sdpa_decode_bf16 "$out/sdpa_decode_bf16.csv" --dtype bf16
            run bench_fp8 ./step05 --dtype fp8 --bench --csv "$out/fp8_bench.csv"
            run train_gpu_big ./step06 --train --device gpu --big --csv "$out/train_gpu_big.csv"
            run train_gpu_big_16G ./step06 --train --device gpu --big --steps 3 --mem-limit 16G --csv "$out/train_gpu_big_16G.csv"
            run step02_gpu_fp16_8G ./step02 --device gpu --mem-limit 8G --csv "$out/step02_gpu_fp16_8G.csv"
            run step06_fp16 ./step06 --device gpu --dtype fp16 --csv "$out/step06_fp16.csv" ;;
    plots) run plots make plots; cp results/*.png results/*.csv "$out/" 2>/dev/null ;;
    step07) run step07 ./step07 --csv "$out/step07.csv" ;;
    esac
done
