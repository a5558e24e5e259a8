"""break_trace.py: Break 1 (no running max), the traced query row's state after each K/V tile, one column
per trace file (fp16, fp32). Top: max p, l and max |o| of the row (log), with the dtype's largest finite
number, which is what they overflow past; an inf is drawn in a grey band above, one marker per quantity
side by side, so that no inf hides another. Bottom: max s of the tile, with the score at which e^s
passes that number (11.09 for fp16, 88.72 for fp32). Reads step 07's --trace --csv files.
    python3 plots/break_trace.py OUT.png TRACE_FP16.csv [TRACE_FP32.csv ...]"""
import math
import sys

import matplotlib.pyplot as plt

import csvio

MAXF = {"fp16": (65504.0, "65504"), "fp32": (3.4028235e38, "3.4e38")}
SERIES = (("max_p", "o", "tab:blue", "max p"), ("l", "s", "tab:orange", "l"), ("max_o", "^", "tab:green", "max |o|"))

if len(sys.argv) < 3:
    sys.exit(f"usage: {sys.argv[0]} OUT.png TRACE.csv [TRACE.csv ...]")
out, srcs = sys.argv[1], sys.argv[2:]
fig, axes = plt.subplots(2, len(srcs), figsize=(6.2 * len(srcs), 6.6), squeeze=False, sharex="col",
                         gridspec_kw={"height_ratios": [2.2, 1]})
for col, src in enumerate(srcs):
    ax, axs = axes[0][col], axes[1][col]
    rows = csvio.read(src, ["break", "dtype", "score_scale", "row", "tile", "max_s", "max_p", "l", "max_o", "nonfinite"])
    dt, sc, row = rows[0]["dtype"], rows[0]["score_scale"], rows[0]["row"]
    if dt not in MAXF:
        sys.exit(f"{sys.argv[0]}: {src}: dtype '{dt}', expected fp16 or fp32")
    top, top_s = MAXF[dt]
    tiles = [int(csvio.num(r, "tile", src)) for r in rows]
    vals = {c: [csvio.num(r, c, src) for r in rows] for c, *_ in SERIES}
    fin = [v for c in vals for v in vals[c] if math.isfinite(v) and v > 0]
    lo, hi = math.log10(min(fin + [top]) / 10), math.log10(max(fin + [top]) * 10)
    band = (10 ** hi, 10 ** (hi + 0.25 * (hi - lo)))  # the "inf" band: a quarter of the axis above the data
    ax.axhspan(*band, color="0.9")
    mid = math.sqrt(band[0] * band[1])
    ax.text(tiles[0] - 0.45, mid, "inf", va="center", ha="left", fontsize=9, color="0.3")
    for k, (c, mk, color, name) in enumerate(SERIES):
        y = [v if math.isfinite(v) and v > 0 else float("nan") for v in vals[c]]  # NaN breaks the line at an inf
        ax.plot(tiles, y, mk + "-", color=color, label=name)
        inf = [t for t, v in zip(tiles, vals[c]) if not math.isfinite(v)]
        if inf:  # side by side in the band: p left, l middle, |o| right
            ax.plot([t + (k - 1) * 0.16 for t in inf], [mid] * len(inf), mk, color=color, ms=9,
                    label=f"{name} = inf, from tile {inf[0]}")
    ax.axhline(top, color="tab:red", ls="--", lw=1.2, label=f"{dt}'s largest number, {top_s}")
    ax.set_yscale("log")
    ax.set_ylim(10 ** lo, band[1])
    ax.set_ylabel("the row's max p, l, max |o|")
    ax.set_title(f"{dt}, score scale {sc}: query row {row}")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, alpha=0.3)
    s = [csvio.num(r, "max_s", src) for r in rows]
    axs.plot(tiles, s, "D-", color="0.3", label="max s of the tile")
    axs.axhline(math.log(top), color="tab:red", ls="--", lw=1.2,
                label=f"s = {math.log(top):.2f}: e^s passes {top_s}")
    axs.set_ylim(0, max(s + [math.log(top)]) * 1.25)
    axs.set_ylabel("max s (score)")
    axs.set_xlabel("K/V tile")
    axs.set_xticks(tiles)
    axs.set_xlim(tiles[0] - 0.5, tiles[-1] + 0.5)
    axs.legend(fontsize=7, loc="lower right")
    axs.grid(True, alpha=0.3)
fig.suptitle("step 07, Break 1 (no running max): the traced row after each K/V tile (./step07 --trace)")
fig.tight_layout()
fig.savefig(out, dpi=120)
print(f"wrote {out}")
