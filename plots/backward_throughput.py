"""backward_throughput.py: backward TFLOP/s vs N for the naive cuBLAS backward
and each backward kernel of step 05, one panel per head dim, with
FlashAttention-2's and cuDNN's backward at N = 4096 marked where the CSV is
fp16 from an H100 (measured through PyTorch 2.11 SDPA, flash and cudnn back
ends, on an H100 80GB HBM3 at the same shapes; 05_cuda_fused/RESULTS.md).
Reads step 05's --bench --backward --csv (rows of mode bench_backward).
    python3 plots/backward_throughput.py results/bench_backward_fp16.csv results/backward_fp16.png"""
import matplotlib.pyplot as plt

import csvio

src, out = csvio.args(2, "STEP05_BENCH_BACKWARD.csv OUT.png")
rows = [r for r in csvio.read(src, ["mode", "dtype", "kernel", "name", "N", "D", "causal", "ms", "tflops"])
        if r["mode"] == "bench_backward"]
dims = sorted({int(csvio.num(r, "D", src)) for r in rows})
if not dims:
    raise SystemExit(f"{src}: no bench_backward rows (run ./step05 --bench --backward --csv)")
causal = int(csvio.num(rows[0], "causal", src))
# FlashAttention-2 and cuDNN through PyTorch 2.11 SDPA, backward TFLOP/s (2.5x convention), N = 4096, fp16, H100 80GB HBM3
REF = {(64, 0): (270, 426), (128, 0): (290, 489), (64, 1): (231, 364), (128, 1): (255, 450)}
fig, axes = plt.subplots(1, len(dims), figsize=(6 * len(dims), 4.2), squeeze=False)
for ax, D in zip(axes[0], dims):
    csvio.plot_kernels(ax, rows, D, src, "naive (cuBLAS, P and dS kept)", lambda k, name: f"backward kernel {k} ({name})")
    if rows[0]["dtype"] == "fp16" and (D, causal) in REF:
        fa2, cudnn = REF[(D, causal)]
        ax.plot([4096], [fa2], "s", color="tab:red", label="FlashAttention-2 (PyTorch SDPA), N = 4096, H100")
        ax.plot([4096], [cudnn], "^", color="tab:orange", label="cuDNN (PyTorch SDPA), N = 4096, H100")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N (batch = 16384/N, heads = 2048/D)")
    ax.set_ylabel(f"TFLOP/s (2.5 x {'2' if causal else '4'} B H N^2 D / time)")
    ax.set_title(f"step 05 --bench --backward, {rows[0]['dtype']}{', causal' if causal else ''}, D = {D}")
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
handles, labels = axes[0][-1].get_legend_handles_labels()
fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
fig.tight_layout(rect=(0, 0.04 + 0.035 * ((len(labels) + 2) // 3), 1, 1))
fig.savefig(out, dpi=120)
print(f"wrote {out}")
