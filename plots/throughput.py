"""throughput.py: TFLOP/s vs N for naive and each kernel of step 05, one
panel per head dim, under the chip's matrix-product ceiling (the cuBLAS GEMM
step 05 --bench times first). Reads step 05's --bench --csv, and optionally
plots/sdpa_reference.py's CSV (FlashAttention-2 and cuDNN through PyTorch, same
shapes), drawn dotted.
    python3 plots/throughput.py results/bench_fp16.csv results/throughput_fp16.png [results/sdpa_fp16.csv]"""

import matplotlib.pyplot as plt

import csvio

src, out, ref = csvio.args(2, "STEP05_BENCH.csv OUT.png [SDPA_REFERENCE.csv]", optional=1)
allrows = csvio.read(src, ["mode", "dtype", "causal", "kernel", "name", "N", "D", "ms", "tflops"])
rows = [r for r in allrows if r["mode"] == "bench"]
ceiling = [csvio.num(r, "tflops", src) for r in allrows if r["mode"] == "ceiling"]
dims = sorted({int(csvio.num(r, "D", src)) for r in rows})
if not dims:
    raise SystemExit(f"{src}: no bench rows (run ./step05 --bench --csv)")
refrows = csvio.references(ref, "bench", rows[0], src)   # only those of the same dtype and mask as the kernels
fig, axes = plt.subplots(1, len(dims), figsize=(6 * len(dims), 4.2), squeeze=False)
for ax, D in zip(axes[0], dims):
    csvio.plot_kernels(ax, rows, D, src, "naive (cuBLAS + softmax)", lambda k, name: f"kernel {k} ({name})")
    csvio.plot_references(ax, refrows, D, ref)
    if ceiling:
        ax.axhline(ceiling[0], color="gray", ls="--",
                   label=f"matrix-product ceiling: cuBLAS GEMM, {ceiling[0]:.0f} TFLOP/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N (batch = 16384/N, heads = 2048/D)")
    ax.set_ylabel("TFLOP/s (4 B H N^2 D / time)")
    ax.set_title(f"step 05 --bench, {rows[0]['dtype']}, D = {D}")
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
# one legend under both panels: inside, it would cover the curves
handles, labels = axes[0][-1].get_legend_handles_labels()
fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
fig.tight_layout(rect=(0, 0.04 + 0.035 * ((len(labels) + 3) // 4), 1, 1))
fig.savefig(out, dpi=120)
print(f"wrote {out}")
