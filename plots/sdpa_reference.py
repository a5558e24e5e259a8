"""sdpa_reference.py: FlashAttention-2 and cuDNN timed at step 05's --bench shapes
(batch = 16384/N, heads = 2048/D, N = 512..16384, D = 64 and 128) through
PyTorch's scaled_dot_product_attention, the yardsticks beside kernels 11-14 in
05_cuda_fused/LOG.md. Same count as step 05 (4 B H N^2 D flops, half of it
causal), step 05's timer (plots/torch_timer.py: after a warm-up, the median of 10 samples, each on a GPU kept
busy while the host dispatches and with the same cold L2 as step 05's kernels), random normal inputs. Writes step 05's CSV columns with kernel -2
(FlashAttention-2) and -3 (cuDNN), so the rows sit beside a --bench --csv.
--backward times the backward alone (torch.autograd.grad of O with a random dO, the forward run once
before, its graph kept), with step 05's --bench --backward count (2.5x the forward's flops), beside a
--bench --backward --csv. --seq N: N = 512..N only, beside step 05's --bench --seq N (--seq 2048: the short
sequences).

Needs PyTorch with CUDA, which the repository does not depend on and make
check does not run (the lent H100 has it):
    python3 plots/sdpa_reference.py results/sdpa_fp16.csv [--causal] [--dtype bf16] [--backward] [--seq N]"""
import sys

import torch
import torch.nn.functional as F
import torch_timer
from torch.nn.attention import SDPBackend, sdpa_kernel

args = sys.argv[1:]
if not args or args[0].startswith("-"):
    sys.exit("usage: python3 plots/sdpa_reference.py OUT.csv [--causal] [--dtype fp16|bf16] [--backward] [--seq N]")
out, causal, backward = args[0], "--causal" in args, "--backward" in args
dtype_name = args[args.index("--dtype") + 1] if "--dtype" in args[:-1] else "fp16"
if dtype_name not in ("fp16", "bf16") or ("--dtype" in args and "--dtype" not in args[:-1]):
    sys.exit("option --dtype: expected fp16 or bf16")
NS = (512, 1024, 2048, 4096, 8192, 16384)
seq = args[args.index("--seq") + 1] if "--seq" in args[:-1] else ("?" if "--seq" in args else "16384")
if not seq.isdigit() or int(seq) not in NS:
    sys.exit(f"option --seq: the last N of the benchmark's (512, 1024, ..., 16384), not {seq}")
NS = tuple(n for n in NS if n <= int(seq))
unknown = [a for i, a in enumerate(args[1:], 1)
           if a not in ("--causal", "--dtype", "--backward", "--seq") and args[i - 1] not in ("--dtype", "--seq")]
if unknown:
    sys.exit(f"unknown option '{unknown[0]}' (expected --causal, --dtype fp16|bf16, --backward, --seq N)")
dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
backends = [(-2, "FlashAttention-2 (SDPA flash)", SDPBackend.FLASH_ATTENTION),
            (-3, "cuDNN (SDPA cudnn)", SDPBackend.CUDNN_ATTENTION)]
print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
      f"{dtype_name}{', causal' if causal else ''}{', backward' if backward else ''}: TFLOP/s")
rows = []
for D in (64, 128):
    print(f" D={D:<4}         N:" + "".join(f" {N:7d}" for N in NS))
    line = {k: f" {name.split(' (')[0]:<16}" for k, name, _ in backends}
    for N in NS:
        B, H = 16384 // N, 2048 // D
        gen = torch.Generator(device="cuda").manual_seed(N)
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dtype, generator=gen) for _ in range(3))
        if backward:
            q, k, v = (x.requires_grad_() for x in (q, k, v))
            dout = torch.randn(B, H, N, D, device="cuda", dtype=dtype, generator=gen)
        for kid, name, be in backends:
            with sdpa_kernel([be]):
                if backward:  # the back end chosen here, at the forward, also runs the backward
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    call = lambda: torch.autograd.grad(o, (q, k, v), dout, retain_graph=True)
                else:
                    call = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                t = torch_timer.median_ms(call, warmup=3, repeat=10)
                o = None
            tflops = (2.5 if backward else 1.0) * 4.0 * B * H * N * N * D / (2 if causal else 1) / t / 1e9
            line[kid] += f" {tflops:7.1f}"
            mode = "bench_backward" if backward else "bench"
            rows.append(f"{mode},{dtype_name},{kid},{name},{B},{H},{N},{D},{int(causal)},{t:.6f},{tflops:.4f},0,0,0")
    for kid, _, _ in backends:
        print(line[kid])
with open(out, "w") as f:
    f.write("mode,dtype,kernel,name,B,H,N,D,causal,ms,tflops,peak_bytes,max_abs,rel_l2\n")
    f.write("\n".join(rows) + "\n")
print(f"wrote {out}")
