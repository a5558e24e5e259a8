"""autograd_check.py: step 05's backward on tensors you give it, checked against PyTorch's autograd.

Writes random Q, K, V and dO = dLoss/dO (normal, rounded to the dtype, saved as float32 .npy), runs
    ./step05 --backward --dtype fp16 --q q.npy --k k.npy --v v.npy --do do.npy \\
             --out-dq dq.npy --out-dk dk.npy --out-dv dv.npy [--causal]
and compares the dQ, dK, dV it wrote with torch.autograd in float64 on the same values; for scale,
PyTorch's own scaled_dot_product_attention backward in the same dtype (on the GPU) against the same
float64. A gradient passes when step 05's largest error is at most twice PyTorch's (the rule step 05's
own checks use against naive attention in the same dtype). Any .npy files of your own work the same way
with step 05 alone; this script is one way to check them.

Needs PyTorch with CUDA and NumPy, which the repository does not depend on and make check does not run
(the lent H100 has them):
    python3 plots/autograd_check.py [--dtype fp16|bf16] [--causal] [--batch B] [--heads H] [--seq N] [--dim D]"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

args = sys.argv[1:]
opts = {"--dtype": "fp16", "--batch": "2", "--heads": "4", "--seq": "1000", "--dim": "64"}
causal = False
i = 0
while i < len(args):
    if args[i] == "--causal":
        causal = True
        i += 1
    elif args[i] in opts and i + 1 < len(args):
        opts[args[i]] = args[i + 1]
        i += 2
    else:
        sys.exit(f"unknown option '{args[i]}' (expected --dtype fp16|bf16, --causal, --batch, --heads, --seq, --dim)")
if opts["--dtype"] not in ("fp16", "bf16"):
    sys.exit("option --dtype: expected fp16 or bf16")
try:
    B, H, N, D = (int(opts[k]) for k in ("--batch", "--heads", "--seq", "--dim"))
except ValueError:
    sys.exit("options --batch, --heads, --seq, --dim take integers")
tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[opts["--dtype"]]

g = torch.Generator().manual_seed(1)
x = {n: torch.randn(B, H, N, D, generator=g).to(tdt) for n in ("q", "k", "v", "do")}   # values the dtype holds
tmp = tempfile.mkdtemp()
path = {n: os.path.join(tmp, n + ".npy") for n in ("q", "k", "v", "do", "dq", "dk", "dv")}
for n in ("q", "k", "v", "do"):
    np.save(path[n], x[n].float().numpy())
cmd = ["./step05", "--backward", "--dtype", opts["--dtype"], "--repeat", "3"] + (["--causal"] if causal else [])
for n in ("q", "k", "v", "do"):
    cmd += ["--" + n, path[n]]
for n in ("dq", "dk", "dv"):
    cmd += ["--out-" + n, path[n]]
print("$ " + " ".join(c.replace(tmp, "$TMP") for c in cmd))
run = subprocess.run(cmd, capture_output=True, text=True)
for line in run.stdout.splitlines():
    if line.startswith(("inputs:", "the gradients of", "wrote")) or "WRONG" in line:
        print("  " + line.replace(tmp, "$TMP"))
if run.returncode != 0:
    sys.exit(f"step05 exited {run.returncode}: {run.stderr.strip()}")


def grads(q, k, v, do, dt, dev):
    q, k, v = (t.to(dev, dt).requires_grad_() for t in (q, k, v))
    if dt == torch.float64:                                    # the definition, in float64
        s = q @ k.transpose(-1, -2) / math.sqrt(D)
        if causal:
            s = s.masked_fill(torch.ones(N, N, dtype=torch.bool, device=dev).triu(1), float("-inf"))
        o = torch.softmax(s, dim=-1) @ v
    else:                                                      # PyTorch's fused kernel in the dtype
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    o.backward(do.to(dev, dt))
    return [t.grad.double().cpu() for t in (q, k, v)]


ref = grads(x["q"], x["k"], x["v"], x["do"], torch.float64, "cpu")
pt = grads(x["q"], x["k"], x["v"], x["do"], tdt, "cuda")
ok = True
print(f"B={B} H={H} N={N} D={D} {opts['--dtype']}{' causal' if causal else ''}: max abs error against float64 autograd")
for n, r, p in zip(("dQ", "dK", "dV"), ref, pt):
    ours = torch.from_numpy(np.load(path[n.lower()])).double()
    e_ours, e_pt = (ours - r).abs().max().item(), (p - r).abs().max().item()
    good = e_ours == e_ours and e_ours <= 2 * e_pt                # NaN never passes
    ok &= good
    print(f"  {n}: step 05 {e_ours:.2e}, PyTorch SDPA {opts['--dtype']} {e_pt:.2e}, largest |{n}| {r.abs().max().item():.2e}: "
          f"{'PASS' if good else 'FAIL'}")
sys.exit(0 if ok else 1)
