"""mma_layout.py: which thread of a warp holds which element of one mma.sync.m16n8k16 (D = A B + C: A 16 x 16,
B 16 x 8, C and D 16 x 8), the layout kernels 3-9 are written around (tc.cuh). Each cell: the lane (4 g + t) and
its register (a0-a3, b0-b1, c0-c3; a 16-bit register holds two neighbours). The colour is the group g = lane / 4:
a row of C, the scores, lives in one quad (4 lanes of one g), so a row's max and sum are two shuffles; and C's
layout is, pair by pair, A's, so P goes from the scores' registers into the next product without moving.
Reads step 05's --layout-csv.
    ./step05 --layout-csv results/layout.csv && python3 plots/mma_layout.py results/layout.csv results/mma_layout.png"""
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

import csvio

src, out = csvio.args(2, "LAYOUT.csv OUT.png")
rows = csvio.read(src, ["matrix", "row", "col", "lane", "group", "thread", "register", "half"])
shape = {"A": (16, 16), "B": (16, 8), "C": (16, 8)}
title = {"A": "A (16 x 16): Q_i, or P, rows x k",
         "B": "B (16 x 8): K_j^T, or V_j, k x n",
         "C": "C, D (16 x 8, fp32): S, or O, rows x n"}
cmap = plt.get_cmap("tab10")
fig, axes = plt.subplots(1, 3, figsize=(17, 7.2), gridspec_kw={"width_ratios": [16, 8, 8]})
for ax, m in zip(axes, "ABC"):
    nr, nc = shape[m]
    cells = [r for r in rows if r["matrix"] == m]
    if len(cells) != nr * nc:
        raise SystemExit(f"{src}: {len(cells)} elements of {m}, expected {nr * nc}")
    for r in cells:
        i, j = int(csvio.num(r, "row", src)), int(csvio.num(r, "col", src))
        g = int(csvio.num(r, "group", src))
        ax.add_patch(Rectangle((j, i), 1, 1, facecolor=cmap(g % 10), alpha=0.35 + 0.08 * int(csvio.num(r, "thread", src)),
                               edgecolor="white"))
        ax.text(j + 0.5, i + 0.5, f"T{int(csvio.num(r, 'lane', src))}\n{r['register']}", ha="center", va="center",
                fontsize=6.2)
    ax.set_xlim(0, nc)
    ax.set_ylim(nr, 0)
    ax.set_aspect("equal")
    ax.set_xticks(range(0, nc + 1, 4 if nc > 8 else 2))
    ax.set_yticks(range(0, nr + 1, 4))
    ax.set_title(title[m], fontsize=10)
    if m in "AB":  # the k = 16 product is two m16n8k8 on Turing: k 0..7, then k 8..15
        if m == "A":
            ax.axvline(8, color="black", lw=1.5)
        else:
            ax.axhline(8, color="black", lw=1.5)
fig.suptitle("mma.sync.m16n8k16 (tc.cuh): lane = 4 g + t holds the cell marked T<lane>; colour = g (the quad), "
             "shade = t.\nThe black line splits k: on Turing the product is two m16n8k8, a0 a1 b0 then a2 a3 b1 "
             "(the same registers).", fontsize=10)
fig.tight_layout()
fig.savefig(out, dpi=120)
print(f"wrote {out}")
