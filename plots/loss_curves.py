"""loss_curves.py: step 06's training, the loss per step of each attention. Left: the training
loss, a running mean over 10 steps (naive and tiled drawn on top of each other; the breaks apart). Right: the validation loss,
every model with its own attention and the right mask (the tile-relative run also with its own mask,
dotted). Reads ./step06 --train [--device gpu] --csv FILE.
    python3 plots/loss_curves.py TRAIN.csv OUT.png [TITLE]"""

import math

import matplotlib.pyplot as plt

import csvio

src, out, what = csvio.args(2, "TRAIN.csv OUT.png [TITLE]", optional=1)
what = what or "./step06 --train"
rows = csvio.read(src, ["run", "step", "split", "loss"])
curves = {}  # (run, split) -> [(step, loss)]
for r in rows:
    curves.setdefault((r["run"], r["split"]), []).append((csvio.num(r, "step", src), csvio.num(r, "loss", src)))

STYLE = {  # naive wide and light under tiled, so that both show where they coincide
    "naive": dict(color="tab:blue", lw=5, alpha=0.35, label="naive (P kept)"),
    "tiled": dict(color="tab:blue", lw=1.2, label="tiled + FlashAttention-2 backward"),
    "relative": dict(color="tab:red", lw=1.2, label="tile-relative mask (Step 6 bug)"),
    "break2": dict(color="tab:orange", lw=1.2, label="Break 2 (no rescaling)"),
    "break1": dict(color="tab:green", lw=1.2, ls="--", label="Break 1 (no running max)"),
    # ./step06 --train --device gpu: the same model on the GPU, beside its CPU run
    "cpu-naive": dict(color="gray", lw=6, alpha=0.35, label="CPU, naive (gpt.c)"),
    "gpu-naive": dict(color="tab:blue", lw=2.5, alpha=0.7, label="GPU, naive (cuBLAS, P kept)"),
    "gpu-fused": dict(color="tab:orange", lw=1.2, ls="--", label="GPU, fused (kernel 2 + backward kernel 1)"),
}
runs = [r for r in STYLE if (r, "train") in curves] + sorted({r for r, s in curves if r not in STYLE and s == "train"})
fig, (ax_t, ax_v) = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
for run in runs:
    st = STYLE.get(run, dict(lw=1.2, label=run))
    pts = curves.get((run, "train"), [])
    fin = [(s, l) for s, l in pts if math.isfinite(l)]
    if fin:  # a running mean over 10 steps: one batch's loss is noisy, the curve is what the eye compares
        mean = [(fin[i][0], sum(l for _, l in fin[max(0, i - 9):i + 1]) / (i + 1 - max(0, i - 9))) for i in range(len(fin))]
        ax_t.plot(*zip(*mean), **st)
    bad = [s for s, l in pts if not math.isfinite(l)]
    if bad:  # a NaN loss cannot be drawn: mark where the run died
        ax_t.axvline(bad[0], color=st.get("color", "k"), ls=":", lw=1)
        ax_t.annotate(f"{run}: NaN from step {bad[0]:.0f}", (bad[0], 0.98), xycoords=("data", "axes fraction"),
                      fontsize=8, ha="right", va="top", rotation=90, color=st.get("color", "k"))
    val = [(s, l) for s, l in curves.get((run, "val"), []) if math.isfinite(l)]
    if val:
        vs = dict(st, marker="o", ms=4)
        ax_v.plot(*zip(*val), **vs)
    own = [(s, l) for s, l in curves.get((run, "val_own_mask"), []) if math.isfinite(l)]
    if own and run == "relative":
        ax_v.plot(*zip(*own), color=st.get("color"), ls=":", marker="x", ms=4, lw=1,
                  label="tile-relative run, with its own mask")
for ax in (ax_t, ax_v):  # the corpus's floor for a model that cannot look back
    for _, floor in curves.get(("bigram-floor", "floor"), []):
        ax.axhline(floor, color="gray", ls="--", lw=1, label=f"no attention can beat {floor:.2f} (bigram floor)")
ax_t.set_title("training loss, mean of 10 steps (same batches, seed and init)")
ax_v.set_title("validation loss (held-out text, right mask)")
for ax in (ax_t, ax_v):
    ax.set_xlabel("step")
    ax.grid(True, alpha=0.3)
ax_t.set_ylabel("cross-entropy (nats per character)")
ax_t.legend(fontsize=8)
ax_v.legend(fontsize=8)
fig.suptitle(f"step 06: the same GPT trained with each attention ({what})")
fig.tight_layout()
fig.savefig(out, dpi=120)
print(f"wrote {out}")
