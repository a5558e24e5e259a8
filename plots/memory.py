"""memory.py: the chapter's most important picture. Peak memory vs N, log y,
naive vs tiled (CPU) or fused (GPU), OOM points marked at what the run asked
for, the --mem-limit line drawn. Reads step 02's --csv.
    python3 plots/memory.py results/step02_cpu.csv results/memory_cpu.png"""
import matplotlib.pyplot as plt

import csvio

src, out = csvio.args(2, "STEP02.csv OUT.png")
rows = csvio.read(src, ["device", "dtype", "N", "method", "status", "peak_bytes", "need_bytes", "limit_bytes"])
fig, ax = plt.subplots(figsize=(7, 4.5))
for method, color in (("naive", "tab:red"), ("tiled", "tab:blue"), ("fused", "tab:blue")):
    rs = [r for r in rows if r["method"] == method]
    if not rs:
        continue
    ok = [(csvio.num(r, "N", src), csvio.num(r, "peak_bytes", src) / 1e9) for r in rs if r["status"] == "ok"]
    oom = [(csvio.num(r, "N", src), csvio.num(r, "need_bytes", src) / 1e9) for r in rs if r["status"] == "oom"]
    if ok:
        ax.plot(*zip(*ok), "o-", color=color, label=f"{method} (peak)")
    if oom:
        ax.plot(*zip(*oom), "x", color=color, markersize=10, mew=2, label=f"{method}: OOM (what it asked for)")
limit = csvio.num(rows[0], "limit_bytes", src) / 1e9
ax.axhline(limit, color="gray", ls="--", label=f"limit {limit:.1f} GB")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("sequence length N")
ax.set_ylabel("peak memory (GB)")
ax.set_title(f"step 02: memory vs N ({rows[0]['device']}, {rows[0]['dtype']})")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(out, dpi=120)
print(f"wrote {out}")
