"""fp8.py: step 05 in FP8. Left: what FP8 costs in accuracy, the RMS error against float64 of the loop the
FP8 kernels run, for each scaling (per tensor, per block, per block after the Walsh-Hadamard rotation), on
Gaussian inputs and on inputs with outliers, beside fp16 storage's (./step05 --dtype fp8 --errors --csv).
Right, where the bench CSV is given: TFLOP/s of the FP8 kernels against N beside kernel 14 in fp16
(./step05 --dtype fp8 --bench --csv).
    python3 plots/fp8.py results/fp8_errors.csv results/fp8.png [results/fp8_bench.csv]"""

import matplotlib.pyplot as plt

import csvio

err_src, out, bench_src = csvio.args(2, "FP8_ERRORS.csv OUT.png [FP8_BENCH.csv]", optional=1)
rows = csvio.read(err_src, ["inputs", "N", "D", "causal", "fp16_rms", "tensor_rms", "block_rms", "hadamard_rms"])
fig, axes = plt.subplots(1, 2 if bench_src else 1, figsize=(17 if bench_src else 7, 4.6), squeeze=False)
ax = axes[0][0]
cols = [("fp16_rms", "fp16 storage", "tab:gray"), ("tensor_rms", "fp8 per-tensor", "tab:blue"),
        ("block_rms", "fp8 per-block", "tab:orange"), ("hadamard_rms", "fp8 per-block + Hadamard", "tab:green")]
labels = [f"{r['inputs']}\nD={r['D']} {'causal' if r['causal'] == '1' else 'full'}" for r in rows]
w = 0.2
for i, (c, name, color) in enumerate(cols):
    ax.bar([x + (i - 1.5) * w for x in range(len(rows))], [csvio.num(r, c, err_src) for r in rows], w, label=name, color=color)
ax.set_yscale("log")
ax.set_xticks(range(len(rows)))
ax.set_xticklabels(labels, fontsize=7)
ax.set_ylabel("RMS error against float64")
ax.set_title(f"step 05 --dtype fp8 --errors: the FP8 loop on the CPU, N = {rows[0]['N']}", fontsize=9)
ax.grid(True, axis="y", alpha=0.3)
ax.legend(fontsize=8)
if bench_src:
    b = csvio.read(bench_src, ["mode", "dtype", "kernel", "name", "N", "D", "tflops"])
    ax = axes[0][1]
    b = [r for r in b if r["mode"] == "bench"]
    series = sorted({(r["dtype"], int(csvio.num(r, "kernel", bench_src)), r["name"]) for r in b})
    for D, style in ((64, "--"), (128, "-")):
        for dt, k, name in series:
            pts = sorted((csvio.num(r, "N", bench_src), csvio.num(r, "tflops", bench_src)) for r in b
                         if int(csvio.num(r, "D", bench_src)) == D and r["dtype"] == dt and int(csvio.num(r, "kernel", bench_src)) == k)
            if pts:
                color = {15: "tab:blue", 16: "tab:green", 17: "tab:purple", 24: "tab:red", 27: "tab:cyan", 28: "tab:orange",
                         30: "tab:brown", 45: "tab:olive", 46: "tab:pink",
                         47: "darkblue", 48: "magenta", 14: "tab:gray"}.get(k, "black")
                ax.plot(*zip(*pts), "o" + style, color=color, label=f"{name}, D = {D}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length N (batch = 16384/N, heads = 2048/D)")
    ax.set_ylabel("TFLOP/s (4 B H N^2 D / time)")
    ax.set_title("step 05 --dtype fp8 --bench", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes: 24 series
fig.tight_layout()
fig.savefig(out, dpi=120, bbox_inches="tight")
print(f"wrote {out}")
