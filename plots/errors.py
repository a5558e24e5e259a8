"""errors.py: the verification at a glance: max abs error vs the float64
reference across N for each block size and D. Reads step 04's --csv.
    python3 plots/errors.py results/step04.csv results/errors.png"""
import matplotlib.pyplot as plt

import csvio

src, out = csvio.args(2, "STEP04.csv OUT.png")
rows = csvio.read(src, ["dtype", "N", "D", "BR", "max_abs"])
fig, ax = plt.subplots(figsize=(7, 4.2))
for D in sorted({int(csvio.num(r, "D", src)) for r in rows}):
    for BR in sorted({int(csvio.num(r, "BR", src)) for r in rows}):
        pts = sorted((csvio.num(r, "N", src), max(csvio.num(r, "max_abs", src), 1e-12)) for r in rows
                     if int(csvio.num(r, "D", src)) == D and int(csvio.num(r, "BR", src)) == BR)
        if pts:
            ax.plot(*zip(*pts), "o-", ms=3, lw=0.8, label=f"D={D} BR=BC={BR}")
ax.axhline(1e-5, color="red", ls="--", label="tolerance 1e-5")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("N")
ax.set_ylabel("max abs error vs float64 (0 drawn at 1e-12)")
ax.set_title(f"step 04: the tiled forward's error, {rows[0]['dtype']}")
ax.grid(True, alpha=0.3)
ax.legend(fontsize=6, ncol=2)
fig.tight_layout()
fig.savefig(out, dpi=120)
print(f"wrote {out}")
