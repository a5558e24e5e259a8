"""backward_throughput.py: backward TFLOP/s vs N for the naive cuBLAS backward
and each backward kernel of step 05, one panel per head dim. Reads step 05's
--bench --backward --csv (rows of mode bench_backward), and optionally
plots/sdpa_reference.py --backward's CSV (FlashAttention-2's and cuDNN's
backward through PyTorch, same shapes), drawn dotted.
    python3 plots/backward_throughput.py results/bench_backward_fp16.csv results/backward_fp16.png [results/sdpa_backward_fp16.csv]"""
import matplotlib.pyplot as plt

import csvio

src, out, ref = csvio.args(2, "STEP05_BENCH_BACKWARD.csv OUT.png [SDPA_REFERENCE_BACKWARD.csv]", optional=1)
rows = [r for r in csvio.read(src, ["mode", "dtype", "kernel", "name", "N", "D", "causal", "ms", "tflops"])
        if r["mode"] == "bench_backward"]
dims = sorted({int(csvio.num(r, "D", src)) for r in rows})
if not dims:
    raise SystemExit(f"{src}: no bench_backward rows (run ./step05 --bench --backward --csv)")
causal = int(csvio.num(rows[0], "causal", src))
refrows = csvio.references(ref, "bench_backward", rows[0], src)
fig, axes = plt.subplots(1, len(dims), figsize=(6 * len(dims), 4.2), squeeze=False)
for ax, D in zip(axes[0], dims):
    csvio.plot_kernels(ax, rows, D, src, "naive (cuBLAS, P and dS kept)", lambda k, name: f"backward kernel {k} ({name})")
    csvio.plot_references(ax, refrows, D, ref)
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
