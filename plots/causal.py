"""causal.py: what block skipping buys, per kernel: the speed-up of causal over non-causal attention
(non-causal time / causal time) as the bar, on a linear axis, with the ideal 2x drawn (about half the
tiles are skipped) and each bar's two times written under it. Reads step 06's --csv.
    python3 plots/causal.py results/step06.csv results/causal.png"""
import matplotlib.pyplot as plt

import csvio

src, out = csvio.args(2, "STEP06.csv OUT.png")
rows = csvio.read(src, ["device", "dtype", "kernel", "B", "H", "N", "D", "ms_full", "ms_causal"])
shape = lambda r: f"B={r['B']} H={r['H']} N={r['N']} D={r['D']}, {r['dtype']}"
shapes = sorted({shape(r) for r in rows})
one_shape = len(shapes) == 1
full = [csvio.num(r, "ms_full", src) for r in rows]
causal = [csvio.num(r, "ms_causal", src) for r in rows]
speedup = [f / c for f, c in zip(full, causal)]
fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows) + 2), 4.6))
xs = list(range(len(rows)))
colors = ["tab:gray" if r["device"] == "cpu" else "tab:blue" for r in rows]
ax.bar(xs, speedup, 0.6, color=colors)
ax.axhline(2.0, color="tab:green", ls="--", lw=1.2, label="ideal: 2x (half the tiles skipped)")
ax.axhline(1.0, color="0.4", ls=":", lw=1, label="1x: no gain")
for x, s, f, c in zip(xs, speedup, full, causal):
    ax.text(x, s + 0.03, f"{s:.2f}x", ha="center", va="bottom", fontsize=8)
    ax.text(x, 0.05, f"{f:.3g} ms\n{c:.3g} ms", ha="center", va="bottom", fontsize=6.5, color="white")
ax.set_xticks(xs)
ax.set_xticklabels([f"{r['device']} {r['kernel']}" + ("" if one_shape else f"\n{shape(r)}") for r in rows], fontsize=8)
ax.set_ylim(0, max(speedup + [2.0]) * 1.32)
ax.set_xlabel("in each bar: the non-causal time over the causal time", fontsize=8)
ax.set_ylabel("speed-up: non-causal time / causal time")
ax.set_title("step 06: what causal block skipping buys" + (f" ({shapes[0]})" if one_shape else ""), fontsize=10)
ax.legend(fontsize=8, loc="upper center", ncol=2)
ax.grid(True, axis="y", alpha=0.3)
fig.tight_layout()
fig.savefig(out, dpi=120)
print(f"wrote {out}")
