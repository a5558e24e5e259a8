"""csvio.py: what the plot scripts share: read a step's --csv file (header
row, then rows), or exit with one clear line when it is missing or malformed;
sets matplotlib's headless backend; and draws step 05's bench curves and
plots/sdpa_reference.py's beside them (the forward and the backward pictures
draw them alike)."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")


def read(path, columns):
    """Rows of path as dicts; every column in `columns` must be in the header. Lines that start with '#' before the
    header are the run's identity (plots/record.sh writes them: GPU, date, commit, command) and are skipped."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    except OSError as e:
        sys.exit(f"{sys.argv[0]}: cannot read {path}: {e.strerror} (run the step with --csv first: make plots)")
    if not rows:
        sys.exit(f"{sys.argv[0]}: {path} has no rows")
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        sys.exit(f"{sys.argv[0]}: {path} lacks column(s) {', '.join(missing)}: not the CSV this script reads")
    return rows


def num(row, col, path):
    try:
        return float(row[col])
    except (TypeError, ValueError):
        sys.exit(f"{sys.argv[0]}: {path}: column {col} has '{row[col]}', not a number")


def args(n, usage, optional=0):
    """The script's n arguments and up to `optional` more (None where not given), or usage and exit."""
    if not n + 1 <= len(sys.argv) <= n + optional + 1:
        sys.exit(f"usage: {sys.argv[0]} {usage}")
    return sys.argv[1:] + [None] * (n + optional + 1 - len(sys.argv))


def plot_kernels(ax, rows, D, path, naive_label, kernel_label):
    """One TFLOP/s-vs-N curve per kernel of step 05's bench rows at head dim D: kernel 0 (naive) black and
    dashed, the others along one colour map so that none share a colour. kernel_label(k, name) names a curve."""
    import matplotlib.pyplot as plt
    at_d = [r for r in rows if int(num(r, "D", path)) == D]
    kernels = sorted({int(num(r, "kernel", path)) for r in at_d})
    for k in kernels:
        rs = [r for r in at_d if int(num(r, "kernel", path)) == k and num(r, "ms", path) > 0]
        if not rs:
            continue
        pts = sorted((num(r, "N", path), num(r, "tflops", path)) for r in rs)
        color = "black" if k == 0 else plt.cm.viridis(kernels.index(k) / max(1, len(kernels) - 1) * 0.9)
        ax.plot(*zip(*pts), "o--" if k == 0 else "o-", color=color,
                label=naive_label if k == 0 else kernel_label(k, rs[0]["name"]))


def references(ref, mode, like, like_path):
    """plots/sdpa_reference.py's rows of `mode` in ref (None: none) of the dtype and mask of row `like`."""
    if not ref:
        return []
    rows = [r for r in read(ref, ["mode", "dtype", "causal", "kernel", "name", "N", "D", "tflops"]) if r["mode"] == mode]
    same = [r for r in rows if r["dtype"] == like["dtype"] and int(num(r, "causal", ref)) == int(num(like, "causal", like_path))]
    if not same:
        print(f"{ref}: no {mode} rows of {like['dtype']}, causal = {like['causal']}: drawn without the references")
    return same


def plot_references(ax, refrows, D, ref):
    """FlashAttention-2 (kernel -2) and cuDNN (kernel -3) at head dim D, dotted."""
    for k, style, color in ((-2, "s:", "tab:red"), (-3, "^:", "tab:orange")):
        rs = [r for r in refrows if int(num(r, "D", ref)) == D and int(num(r, "kernel", ref)) == k]
        if rs:
            pts = sorted((num(r, "N", ref), num(r, "tflops", ref)) for r in rs)
            ax.plot(*zip(*pts), style, color=color, label=rs[0]["name"])
