"""decode_check.py: step 05's decode kernels on a KV cache you give them, checked against PyTorch.

Writes new query rows and a KV cache (normal values, rounded to the dtype, saved as float32 .npy):
Q [B, Hq, n, D], K and V [B, Hkv, L, D], with ragged lengths (sequence b's cache is lens[b] keys long, its
n new rows are its last n keys; the keys past lens[b] are padding), runs
    ./step05 --decode --dtype fp16 --q q.npy --k k.npy --v v.npy --lens a,b,c --page 16 --out o.npy
(every decode kernel checked by step 05 itself against float64, the paged one on the cache paged there),
and compares the O it wrote (the last kernel's) with attention in float64 on the same values (PyTorch on the
CPU); for scale, PyTorch's scaled_dot_product_attention in the same dtype on the GPU (grouped heads through
enable_gqa) against the same float64. It passes when step 05's largest error is at most twice PyTorch's,
the rule step 05's own checks use against naive attention in the same dtype.

The causal offset: new row i of a sequence whose cache holds len keys sees keys 0 .. len - n + i (aligned
to the bottom right of the [n, len] score matrix). PyTorch's is_causal=True aligns to the top left (row i
sees keys 0 .. i), which is the wrong mask for a decode step with n > 1; the mask is built here instead.
--wrong-offset hands step 05 every length one longer than the reference's (the new rows one position
later, each seeing one key more): the comparison must then FAIL, which shows the check can.

Needs PyTorch (2.5 or later, for enable_gqa) with CUDA and NumPy, which the repository does not depend on
and make check does not run:
    python3 plots/decode_check.py [--dtype fp16|bf16] [--batch B] [--heads Hq] [--kv-heads Hkv] [--new n]
                                  [--seq L] [--dim D] [--page P] [--wrong-offset]"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

args = sys.argv[1:]
opts = {"--dtype": "fp16", "--batch": "3", "--heads": "8", "--kv-heads": "2", "--new": "3", "--seq": "1000",
        "--dim": "128", "--page": "16"}
wrong = False
i = 0
while i < len(args):
    if args[i] == "--wrong-offset":
        wrong = True
        i += 1
    elif args[i] in opts and i + 1 < len(args):
        opts[args[i]] = args[i + 1]
        i += 2
    else:
        sys.exit(f"unknown option '{args[i]}' (expected --dtype fp16|bf16, --batch, --heads, --kv-heads, --new, --seq, "
                 "--dim, --page, --wrong-offset)")
if opts["--dtype"] not in ("fp16", "bf16"):
    sys.exit("option --dtype: expected fp16 or bf16")
try:
    B, Hq, Hkv, n, L, D, page = (int(opts[k]) for k in ("--batch", "--heads", "--kv-heads", "--new", "--seq", "--dim",
                                                        "--page"))
except ValueError:
    sys.exit("options --batch, --heads, --kv-heads, --new, --seq, --dim, --page take integers")
if Hkv < 1 or Hq % Hkv or not 1 <= n <= 16 or L < n + 2 or B < 1:
    sys.exit("expected Hq a multiple of Hkv, 1 <= n <= 16, L >= n + 2, B >= 1")
tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[opts["--dtype"]]

g = torch.Generator().manual_seed(7)
# ragged lengths, each leaving one padding key so that --wrong-offset's longer lengths still fit the cache
lens = [L - 1, n] + [int(x) for x in torch.randint(n, L, (max(B - 2, 0),), generator=g)]
lens = lens[:B]
x = {"q": torch.randn(B, Hq, n, D, generator=g).to(tdt),
     "k": torch.randn(B, Hkv, L, D, generator=g).to(tdt),
     "v": torch.randn(B, Hkv, L, D, generator=g).to(tdt)}
tmp = tempfile.mkdtemp()
path = {name: os.path.join(tmp, name + ".npy") for name in ("q", "k", "v", "o")}
for name in ("q", "k", "v"):
    np.save(path[name], x[name].float().numpy())
told = [ln + 1 for ln in lens] if wrong else lens
cmd = ["./step05", "--decode", "--dtype", opts["--dtype"], "--repeat", "3", "--page", str(page),
       "--lens", ",".join(str(ln) for ln in told), "--out", path["o"]]
for name in ("q", "k", "v"):
    cmd += ["--" + name, path[name]]
print("$ " + " ".join(c.replace(tmp, "$TMP") for c in cmd))
run = subprocess.run(cmd, capture_output=True, text=True)
for line in run.stdout.splitlines():
    if line.startswith(("inputs:", "reference:", "  decode kernel", "wrote")):
        print("  " + line.replace(tmp, "$TMP"))
if run.returncode != 0:
    print(f"step05 exited {run.returncode}: {run.stderr.strip()}", file=sys.stderr)
    sys.exit(2)                                   # 2: the round trip did not run; 1 is kept for a comparison that FAILs


def attention(dt, dev):
    """O [B, Hq, n, D]: each sequence's new rows against its own cache, bottom-right causal."""
    out = torch.empty(B, Hq, n, D, dtype=torch.float64)
    for b, ln in enumerate(lens):
        q = x["q"][b:b + 1].to(dev, dt)
        k, v = (x[t][b:b + 1, :, :ln].to(dev, dt) for t in ("k", "v"))
        rows = torch.arange(n, device=dev).unsqueeze(1)
        visible = torch.arange(ln, device=dev).unsqueeze(0) <= ln - n + rows   # [n, ln]: True where row sees key
        if dt == torch.float64:                                                   # the definition, in float64
            kk, vv = (t.repeat_interleave(Hq // Hkv, dim=1) for t in (k, v))
            s = q @ kk.transpose(-1, -2) / D ** 0.5
            o = torch.softmax(s.masked_fill(~visible, float("-inf")), dim=-1) @ vv
        else:                                                                     # PyTorch's kernel in the dtype
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, enable_gqa=True)
        out[b] = o[0].double().cpu()
    return out


ref = attention(torch.float64, "cpu")
pt = attention(tdt, "cuda")
ours = torch.from_numpy(np.load(path["o"])).double()
e_ours, e_pt = (ours - ref).abs().max().item(), (pt - ref).abs().max().item()
good = e_ours == e_ours and e_ours <= 2 * e_pt                                    # NaN never passes
print(f"B={B} Hq={Hq} Hkv={Hkv} n={n} D={D} {opts['--dtype']}, lengths {','.join(map(str, lens))}"
      f"{' (step 05 told ' + ','.join(map(str, told)) + ': the wrong causal offset)' if wrong else ''}:")
print(f"  O: step 05 {e_ours:.2e}, PyTorch SDPA {opts['--dtype']} {e_pt:.2e} (max abs error against float64), "
      f"largest |O| {ref.abs().max().item():.2e}: {'PASS' if good else 'FAIL'}")
sys.exit(0 if good else 1)                        # 1: step 05 ran and its O is not PyTorch's
