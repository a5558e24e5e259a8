"""time_cpu.py: time and TFLOP/s vs N of naive attention and the tiled
forward on the CPU (step 02's sweep), and where the tiled one overtakes naive
if it does. Reads step 02's --csv (CPU mode).
    python3 plots/time_cpu.py results/step02_cpu.csv results/time_cpu.png"""
import matplotlib.pyplot as plt

import csvio

src, out = csvio.args(2, "STEP02.csv OUT.png")
allrows = csvio.read(src, ["device", "dtype", "B", "H", "N", "D", "method", "status", "ms"])
rows = [r for r in allrows if r["status"] == "ok"]
if not rows:
    raise SystemExit(f"{src}: no completed runs to draw")
fig, (ax_t, ax_f) = plt.subplots(1, 2, figsize=(11, 4.2))
series = {}
for method, color in (("naive", "tab:red"), ("tiled", "tab:blue"), ("fused", "tab:blue")):
    rs = sorted((csvio.num(r, "N", src), r) for r in rows if r["method"] == method)
    if not rs:
        continue
    ns = [n for n, _ in rs]
    ms = [csvio.num(r, "ms", src) for _, r in rs]
    tf = [4 * csvio.num(r, "B", src) * csvio.num(r, "H", src) * n * n * csvio.num(r, "D", src) / (t * 1e6)
          for (n, r), t in zip(rs, ms)]
    series[method] = dict(zip(ns, ms))
    ax_t.plot(ns, ms, "o-", color=color, label=method)
    oom = sorted(csvio.num(r, "N", src) for r in allrows if r["method"] == method and r["status"] != "ok")
    if oom:  # say why a line stops: the run did not fit under the memory limit
        ax_t.annotate(f"{method}: out of memory\nfrom N = {oom[0]:.0f}", (ns[-1], ms[-1]), textcoords="offset points",
                      xytext=(6, -34), fontsize=8, color=color)
    ax_f.plot(ns, tf, "o-", color=color, label=method)
other = "tiled" if "tiled" in series else "fused"
if "naive" in series and other in series:
    both = sorted(set(series["naive"]) & set(series[other]))
    faster = [n for n in both if series[other][n] < series["naive"][n]]
    note = f"{other} faster from N = {faster[0]:.0f}" if faster else f"{other} never faster here"
    ax_t.set_title(f"time vs N ({note})")
else:
    ax_t.set_title("time vs N")
for ax in (ax_t, ax_f):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length N")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
ax_t.set_yscale("log")
ax_t.set_ylabel("ms")
ax_f.set_ylabel("GFLOP/s (4 B H N^2 D / time)")
ax_f.set_title(f"step 02 sweep, {rows[0]['device']}, {rows[0]['dtype']}, B={rows[0]['B']} H={rows[0]['H']} D={rows[0]['D']}")
fig.tight_layout()
fig.savefig(out, dpi=120)
print(f"wrote {out}")
