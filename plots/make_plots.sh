#!/bin/sh
# make plots [QUICK=1]: run the steps with --csv into results/, then draw
# every picture into results/. GPU pictures only where a GPU is present.
set -e
quick=$1
py=${PYTHON:-python3}
mkdir -p results
if [ "$quick" = quick ]; then seqs=256,512,1024; steps=20; else seqs=1024,2048,4096,8192; steps=200; fi
./step02 --device cpu --seq-list $seqs --mem-limit 8G --csv results/step02_cpu.csv >/dev/null
./step04 --csv results/step04.csv --csv-state results/state.csv >/dev/null
./step06 --device cpu --csv results/step06_cpu.csv >/dev/null
./step06 --train --steps $steps --csv results/train.csv >/dev/null
./step07 --break no-max --dtype fp16 --score-scale 3 --trace --csv results/trace_fp16.csv >/dev/null
./step07 --break no-max --dtype fp32 --score-scale 24 --trace --csv results/trace_fp32.csv >/dev/null
$py plots/memory.py results/step02_cpu.csv results/memory_cpu.png
$py plots/time_cpu.py results/step02_cpu.csv results/time_cpu.png
$py plots/errors.py results/step04.csv results/errors.png
$py plots/online_state.py results/state.csv results/online_state.png
$py plots/causal.py results/step06_cpu.csv results/causal_cpu.png
$py plots/loss_curves.py results/train.csv results/loss_curves.png
$py plots/break_trace.py results/break_trace.png results/trace_fp16.csv results/trace_fp32.csv
./step05 --layout-csv results/layout.csv >/dev/null     # the tensor cores' fragment layout (no GPU needed)
$py plots/mma_layout.py results/layout.csv results/mma_layout.png
./step05 --dtype fp8 --errors --csv results/fp8_errors.csv >/dev/null   # the CPU's FP8 error table (15 s)
fp8bench=""
if ./step05 --dtype fp8 --seq 64 --repeat 1 >/dev/null 2>&1; then   # an FP8 kernel runs here (H100)
    ./step05 --dtype fp8 --bench --csv results/fp8_bench.csv >/dev/null && fp8bench=results/fp8_bench.csv
fi
$py plots/fp8.py results/fp8_errors.csv results/fp8.png $fp8bench
if ./step05 --help >/dev/null 2>&1 && ./step05 --kernel 1 --seq 64 --repeat 1 >/dev/null 2>&1; then
    ./step02 --device gpu --csv results/step02_gpu.csv >/dev/null
    ./step05 --bench --dtype fp16 --csv results/bench_fp16.csv >/dev/null
    ./step05 --bench --backward --dtype fp16 --csv results/bench_backward_fp16.csv >/dev/null
    ./step06 --device gpu --dtype fp16 --csv results/step06_gpu.csv >/dev/null
    ./step06 --train --device gpu --steps $steps --csv results/train_gpu.csv >/dev/null
    if [ "$quick" = quick ]; then big="--seq 1024 --steps 2"; else big=""; fi
    ./step06 --train --device gpu --big $big --csv results/train_gpu_big.csv >/dev/null
    $py plots/memory.py results/step02_gpu.csv results/memory_gpu.png
    ref=""; bref=""   # FlashAttention-2 and cuDNN beside the kernels, where PyTorch with CUDA is installed (not in quick)
    if [ "$quick" != quick ] && $py -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
        $py plots/sdpa_reference.py results/sdpa_fp16.csv >/dev/null && ref=results/sdpa_fp16.csv
        $py plots/sdpa_reference.py results/sdpa_backward_fp16.csv --backward >/dev/null && bref=results/sdpa_backward_fp16.csv
    fi
    $py plots/throughput.py results/bench_fp16.csv results/throughput_fp16.png $ref
    if [ "$quick" != quick ]; then  # the decode benchmark (half a minute), and its references where PyTorch is
        ./step05 --decode --bench --csv results/decode_fp16.csv >/dev/null
        dref=""
        [ -n "$ref" ] && $py plots/sdpa_decode.py results/sdpa_decode_fp16.csv >/dev/null && dref=results/sdpa_decode_fp16.csv
        $py plots/decode.py results/decode_fp16.csv results/decode_fp16.png $dref
    fi
    $py plots/backward_throughput.py results/bench_backward_fp16.csv results/backward_fp16.png $bref
    $py plots/causal.py results/step06_gpu.csv results/causal_gpu.png
    $py plots/loss_curves.py results/train_gpu.csv results/loss_curves_gpu.png "./step06 --train --device gpu"
    $py plots/train_gpu.py results/train_gpu_big.csv results/train_gpu_big.png
else
    echo "plots: GPU pictures skipped (no CUDA device): memory_gpu.png, throughput_fp16.png, decode_fp16.png, backward_fp16.png, causal_gpu.png, loss_curves_gpu.png, train_gpu_big.png"
fi
for f in results/*.png; do [ -s "$f" ] || { echo "plots: $f was not written"; exit 1; }; done
echo "plots: $(ls results/*.png | wc -l) pictures in results/"
