"""throughput.py: TFLOP/s vs N for naive and each kernel of step 05, one
panel per head dim, under the chip's matrix-product ceiling (the cuBLAS GEMM
step 05 --bench times first). Reads step 05's --bench --csv.
    python3 plots/throughput.py results/bench_fp16.csv results/throughput_fp16.png"""
import matplotlib.pyplot as plt

import csvio

src, out = csvio.args(2, "STEP05_BENCH.csv OUT.png")
allrows = csvio.read(src, ["mode", "dtype", "kernel", "name", "N", "D", "ms", "tflops"])
rows = [r for r in allrows if r["mode"] == "bench"]
ceiling = [csvio.num(r, "tflops", src) for r in allrows if r["mode"] == "ceiling"]
dims = sorted({int(csvio.num(r, "D", src)) for r in rows})
if not dims:
    raise SystemExit(f"{src}: no bench rows (run ./step05 --bench --csv)")
fig, axes = plt.subplots(1, len(dims), figsize=(6 * len(dims), 4.2), squeeze=False)
for ax, D in zip(axes[0], dims):
    kernels = sorted({int(csvio.num(r, "kernel", src)) for r in rows if int(csvio.num(r, "D", src)) == D})
    for k in kernels:
        rs = [r for r in rows if int(csvio.num(r, "D", src)) == D and int(csvio.num(r, "kernel", src)) == k
              and csvio.num(r, "ms", src) > 0]
        pts = sorted((csvio.num(r, "N", src), csvio.num(r, "tflops", src)) for r in rs)
        label = "naive (cuBLAS + softmax)" if k == 0 else f"kernel {k} ({rs[0]['name']})"
        # naive in black; the kernels along one colour map, so nine of them never share a colour
        color = "black" if k == 0 else plt.cm.viridis(kernels.index(k) / max(1, len(kernels) - 1) * 0.9)
        ax.plot(*zip(*pts), "o--" if k == 0 else "o-", label=label, color=color)
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
