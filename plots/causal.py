"""causal.py: causal vs non-causal time per kernel (CPU tiled forward and
each GPU kernel). Reads step 06's --csv.
    python3 plots/causal.py results/step06.csv results/causal.png"""
import matplotlib.pyplot as plt

import csvio

src, out = csvio.args(2, "STEP06.csv OUT.png")
rows = csvio.read(src, ["device", "kernel", "ms_full", "ms_causal"])
labels = [f"{r['device']} {r['kernel']}" for r in rows]
full = [csvio.num(r, "ms_full", src) for r in rows]
causal = [csvio.num(r, "ms_causal", src) for r in rows]
fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(rows)), 4))
xs = range(len(rows))
ax.bar([x - 0.2 for x in xs], full, 0.4, label="non-causal")
ax.bar([x + 0.2 for x in xs], causal, 0.4, label="causal (tiles above the diagonal skipped)")
for x, f, c in zip(xs, full, causal):
    ax.text(x, max(f, c), f"{f / c:.2f}x", ha="center", va="bottom", fontsize=8)
ax.set_xticks(list(xs))
ax.set_xticklabels(labels, fontsize=8)
ax.set_yscale("log")
ax.set_ylabel("ms (log)")
ax.set_title("step 06: causal vs non-causal time")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(out, dpi=120)
print(f"wrote {out}")
