"""throughput.py: TFLOP/s vs N for naive and each kernel of step 05, one
panel per head dim, under the chip's matrix-product ceiling (the cuBLAS GEMM
step 05 --bench times first). Reads step 05's --bench --csv, and optionally
plots/sdpa_reference.py's CSV (FlashAttention-2 and cuDNN through PyTorch, same
shapes), drawn dotted.
    python3 plots/throughput.py results/bench_fp16.csv results/throughput_fp16.png [results/sdpa_fp16.csv]"""

import matplotlib.pyplot as plt

import csvio

src, out, ref = csvio.args(2, "STEP05_BENCH.csv OUT.png [SDPA_REFERENCE.csv]", optional=1)
refrows = [r for r in csvio.read(ref, ["mode", "dtype", "causal", "kernel", "name", "N", "D", "tflops"]) if r["mode"] == "bench"] if ref else []
allrows = csvio.read(src, ["mode", "dtype", "causal", "kernel", "name", "N", "D", "ms", "tflops"])
rows = [r for r in allrows if r["mode"] == "bench"]
ceiling = [csvio.num(r, "tflops", src) for r in allrows if r["mode"] == "ceiling"]
dims = sorted({int(csvio.num(r, "D", src)) for r in rows})
if not dims:
    raise SystemExit(f"{src}: no bench rows (run ./step05 --bench --csv)")
if ref:  # only the references of the same dtype and mask as the kernels
    same = [r for r in refrows if r["dtype"] == rows[0]["dtype"] and int(csvio.num(r, "causal", ref)) == int(csvio.num(rows[0], "causal", src))]
    if not same:
        print(f"{ref}: no rows of {rows[0]['dtype']}, causal = {rows[0]['causal']}: drawn without the references")
    refrows = same
fig, axes = plt.subplots(1, len(dims), figsize=(6 * len(dims), 4.2), squeeze=False)
for ax, D in zip(axes[0], dims):
    csvio.plot_kernels(ax, rows, D, src, "naive (cuBLAS + softmax)", lambda k, name: f"kernel {k} ({name})")
    for k, style, color in ((-2, "s:", "tab:red"), (-3, "^:", "tab:orange")):
        rs = [r for r in refrows if int(csvio.num(r, "D", ref)) == D and int(csvio.num(r, "kernel", ref)) == k]
        if rs:
            pts = sorted((csvio.num(r, "N", ref), csvio.num(r, "tflops", ref)) for r in rs)
            ax.plot(*zip(*pts), style, color=color, label=rs[0]["name"])
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
