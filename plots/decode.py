"""decode.py: step 05's decode kernels, GB/s of K and V read against the cache length, one panel for
multi-head (32 query over 32 KV heads) and one for grouped heads (32 over 8), under the device's read
bandwidth measured in the same run; FlashAttention-2 and cuDNN (plots/sdpa_decode.py, PyTorch SDPA with
one query row) drawn dotted where their CSV is given. Reads step 05's --decode --bench --csv.
    python3 plots/decode.py results/decode_fp16.csv results/decode_fp16.png [results/sdpa_decode_fp16.csv]"""

import matplotlib.pyplot as plt

import csvio

src, out, ref = csvio.args(2, "STEP05_DECODE_BENCH.csv OUT.png [SDPA_DECODE.csv]", optional=1)
cols = ["mode", "kernel", "name", "dtype", "B", "Hq", "Hkv", "L", "gbs", "cache_bytes"]
rows = csvio.read(src, cols)
refrows = csvio.read(ref, cols) if ref else []
bw = [csvio.num(r, "gbs", src) for r in rows if r["mode"] == "bandwidth"]
panels = [("sweep-mha", "B = 1, 32 heads (multi-head)"), ("sweep-gqa", "B = 1, 32 query heads over 8 KV heads")]
if not any(r["mode"] == p for p, _ in panels for r in rows):
    raise SystemExit(f"{src}: no sweep rows (run ./step05 --decode --bench --csv)")
fig, axes = plt.subplots(1, 2, figsize=(12, 4.4), squeeze=False)
for ax, (mode, title) in zip(axes[0], panels):
    rs = [r for r in rows if r["mode"] == mode]
    kernels = sorted({int(csvio.num(r, "kernel", src)) for r in rs})
    for k in kernels:
        pts = sorted((csvio.num(r, "L", src), csvio.num(r, "gbs", src)) for r in rs if int(csvio.num(r, "kernel", src)) == k)
        name = next(r["name"] for r in rs if int(csvio.num(r, "kernel", src)) == k)
        ax.plot(*zip(*pts), "o-", color=plt.cm.viridis(kernels.index(k) / max(1, len(kernels) - 1) * 0.9),
                label=f"decode kernel {k} ({name})")
    for k, style, color in ((-2, "s:", "tab:red"), (-3, "^:", "tab:orange")):
        pts = sorted((csvio.num(r, "L", ref), csvio.num(r, "gbs", ref)) for r in refrows
                     if r["mode"] == mode and int(csvio.num(r, "kernel", ref)) == k)
        if pts:
            name = next(r["name"] for r in refrows if int(csvio.num(r, "kernel", ref)) == k)
            ax.plot(*zip(*pts), style, color=color, label=f"{name} (PyTorch SDPA)")
    if bw:
        ax.axhline(bw[0], color="gray", ls="--", label=f"the device's read bandwidth, measured: {bw[0]:.0f} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("cache length L (keys per sequence)")
    ax.set_ylabel("GB/s of K and V read")
    ax.set_title(f"step 05 --decode --bench, {rows[0]['dtype']}, D = 128, {title}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
handles, labels = axes[0][0].get_legend_handles_labels()
fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
fig.tight_layout(rect=(0, 0.05 + 0.04 * ((len(labels) + 2) // 3), 1, 1))
fig.savefig(out, dpi=120)
print(f"wrote {out}")
