"""break_trace.py: Break 1 per K/V tile: max p and l of the traced row, fp16
and fp32, log y, with fp16's 65504 and fp32's 3.4e38 drawn and the first inf
marked. Reads step 07's --trace --csv files (one or more).
    python3 plots/break_trace.py OUT.png TRACE_FP16.csv TRACE_FP32.csv"""
import math
import sys

import matplotlib.pyplot as plt

import csvio

if len(sys.argv) < 3:
    sys.exit(f"usage: {sys.argv[0]} OUT.png TRACE.csv [TRACE.csv ...]")
out, srcs = sys.argv[1], sys.argv[2:]
fig, ax = plt.subplots(figsize=(7, 4.5))
for src in srcs:
    rows = csvio.read(src, ["break", "dtype", "score_scale", "tile", "max_p", "l", "nonfinite"])
    dt, sc = rows[0]["dtype"], rows[0]["score_scale"]
    for col, style in (("max_p", "o-"), ("l", "s--")):
        pts = [(csvio.num(r, "tile", src), csvio.num(r, col, src)) for r in rows]
        fin = [(t, v) for t, v in pts if math.isfinite(v)]
        line = ax.plot(*zip(*fin), style, label=f"{col}, {dt}, score scale {sc}")[0] if fin else None
        inf = [t for t, v in pts if not math.isfinite(v)]
        if inf:  # inf cannot be drawn on a log axis: a marker on the top edge at each tile where it is inf
            ax.plot(inf, [1e39] * len(inf), "v", ms=9, color=line.get_color() if line else "k",
                    label=f"{col} = inf ({dt}), first at tile {inf[0]:.0f}")
ax.axhline(65504, color="tab:orange", ls="--", label="fp16 max 65504")
ax.axhline(3.4e38, color="tab:purple", ls="--", label="fp32 max 3.4e38")
ax.set_yscale("log")
ax.set_xlabel("K/V tile")
ax.set_ylabel("value")
ax.set_title("step 07, Break 1 (no running max): p and l per tile")
ax.grid(True, alpha=0.3)
ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(out, dpi=120)
print(f"wrote {out}")
