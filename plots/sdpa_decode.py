"""sdpa_decode.py: FlashAttention-2 and cuDNN timed at step 05's --decode --bench shapes through
PyTorch's scaled_dot_product_attention with one query row per sequence (q_len = 1, D = 128): the anchors
beside the decode kernels in 05_cuda_fused/README.md. The same measure as step 05 (us per call, GB/s of K
and V read = 2 B Hkv L D bytes / time), step 05's timer (plots/torch_timer.py: after a warm-up, the median of 10
samples, each on a GPU kept busy while the host dispatches and starting from a cold L2); each sample is 20 calls
captured once in a CUDA graph and replayed, so that PyTorch's per-call
dispatch on the host (36-47 us a call on one H200 machine, about 23 us on another: more than the GPU's time at the
short caches) is not what is timed, on copies of the inputs in turn when the cache is under 256 MB, so that no
call finds the last one's K and V in L2, as step 05's bench does), random normal inputs. Where a back end cannot
be captured, its 20 calls run back to back and the line says "eager" (a time near the host's per-call time is
then the host's). Grouped heads (Hkv < Hq) through enable_gqa=True. Writes step 05's
decode CSV columns with kernel -2 (FlashAttention-2) and -3 (cuDNN), so the rows sit beside a
--decode --bench --csv.

Needs PyTorch with CUDA, which the repository does not depend on and make check does not run (the lent
H100 has it):
    python3 plots/sdpa_decode.py results/sdpa_decode_fp16.csv [--dtype bf16]"""
import sys

import torch
import torch_timer
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

args = sys.argv[1:]
if not args or args[0].startswith("-"):
    sys.exit("usage: python3 plots/sdpa_decode.py OUT.csv [--dtype fp16|bf16]")
out = args[0]
dtype_name = args[args.index("--dtype") + 1] if "--dtype" in args[:-1] else "fp16"
if dtype_name not in ("fp16", "bf16") or ("--dtype" in args and "--dtype" not in args[:-1]):
    sys.exit("option --dtype: expected fp16 or bf16")
unknown = [a for i, a in enumerate(args[1:], 1) if a != "--dtype" and args[i - 1] != "--dtype"]
if unknown:
    sys.exit(f"unknown option '{unknown[0]}' (expected --dtype fp16|bf16)")
dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
esz = 2
backends = [(-2, "FlashAttention-2", SDPBackend.FLASH_ATTENTION), (-3, "cuDNN", SDPBackend.CUDNN_ATTENTION)]

shapes = [("anchor", 1, 32, 32, 4096), ("anchor", 1, 32, 32, 32768), ("anchor", 1, 32, 32, 131072),
          ("anchor", 1, 32, 8, 32768), ("anchor", 8, 32, 8, 8192), ("anchor", 64, 32, 32, 2048)]
shapes += [("sweep-mha", 1, 32, 32, 1024 << i) for i in range(8)]
shapes += [("sweep-gqa", 1, 32, 8, 1024 << i) for i in range(8)]

print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
      f"{dtype_name}, q_len = 1, D = 128: us per call and GB/s of K and V read")
rows = []
D = 128
for mode, B, Hq, Hkv, L in shapes:
    gen = torch.Generator(device="cuda").manual_seed(L + B)
    cache = 2.0 * B * Hkv * L * D * esz
    copies = 1 if cache >= 256e6 else -(-256e6 // cache)
    qkv = [(torch.randn(B, Hq, 1, D, device="cuda", dtype=dtype, generator=gen),
            torch.randn(B, Hkv, L, D, device="cuda", dtype=dtype, generator=gen),
            torch.randn(B, Hkv, L, D, device="cuda", dtype=dtype, generator=gen)) for _ in range(int(copies))]
    line = f" {mode:<9} B={B:<2} {Hq}/{Hkv:<2} heads L={L:<6} {cache / 1e6:9.1f} MB"
    def calls():                                              # the 20 calls a repeat times
        for c in range(20):
            q, k, v = qkv[c % len(qkv)]
            F.scaled_dot_product_attention(q, k, v, enable_gqa=Hkv != Hq)
    for kid, name, be in backends:
        try:
            with sdpa_kernel([be]):
                side = torch.cuda.Stream()                    # the warm-up on a side stream, as graph capture asks
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for q, k, v in qkv[:3]:
                        F.scaled_dot_product_attention(q, k, v, enable_gqa=Hkv != Hq)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                try:
                    with torch.cuda.graph(graph):
                        calls()
                    run, how = graph.replay, ""
                except RuntimeError:                          # not capturable: eager, and said so
                    torch.cuda.synchronize()
                    run, how = calls, " (eager)"
                us = torch_timer.median_ms(run, warmup=1, repeat=10) / 20 * 1e3
                del graph
            t = us
            line += f"   {name} {t:8.1f} us {cache / t / 1e3:6.0f} GB/s{how}"
            rows.append(f"{mode},{kid},{name}{how},{dtype_name},{B},{Hq},{Hkv},{L},{D},1,0,{t:.3f},{cache / t / 1e3:.1f},{cache:.0f}")
        except RuntimeError as e:
            line += f"   {name}: not run ({str(e).splitlines()[0][:60]})"
    print(line, flush=True)
    del qkv
with open(out, "w") as f:
    f.write("mode,kernel,name,dtype,B,Hq,Hkv,L,D,n,page,us,gbs,cache_bytes\n")
    f.write("\n".join(rows) + "\n")
print(f"wrote {out}")
