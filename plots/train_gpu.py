"""train_gpu.py: step 06's training on the GPU against the context length T (./step06 --train --device gpu
--big --csv FILE): left, tokens per second of each attention (naive and fused, fp32 and with the attention
in bf16); right, the device memory of the whole training run, with the T where a run did not fit marked
at the bytes it asked for, and the memory it had (the device, or --mem-limit) as a line. (The CSV's fits:
1 trained, 0 out of memory, -1 the attention refused to run: left out.)
    python3 plots/train_gpu.py BIG.csv OUT.png [TITLE] [LIMIT_BYTES]"""

import matplotlib.pyplot as plt

import csvio

src, out, title, limit = csvio.args(2, "BIG.csv OUT.png [TITLE] [LIMIT_BYTES]", optional=2)
title = title or "./step06 --train --device gpu --big"
limit = float(limit) if limit is not None else None
rows = csvio.read(src, ["T", "attention", "fits", "bytes", "peak_bytes", "tokens_per_s"])
STYLE = {
    "naive": dict(color="tab:blue", ls="--", marker="o", label="naive fp32 (P kept)"),
    "fused": dict(color="tab:blue", ls="-", marker="o", label="fused fp32 (kernel 2 + backward 1)"),
    "naive-bf16": dict(color="tab:orange", ls="--", marker="s", label="naive, attention in bf16"),
    "fused-bf16": dict(color="tab:orange", ls="-", marker="s", label="fused, attention in bf16 (tensor cores)"),
}
runs = [a for a in STYLE if any(r["attention"] == a for r in rows)]
runs += sorted({r["attention"] for r in rows} - set(runs))
fig, (ax_s, ax_m) = plt.subplots(1, 2, figsize=(12, 4.8))
ooms = {}  # T -> the runs that did not fit there
for a in runs:
    st = STYLE.get(a, dict(marker="o", label=a))
    rs = [r for r in rows if r["attention"] == a]
    fit = sorted((csvio.num(r, "T", src), csvio.num(r, "tokens_per_s", src), csvio.num(r, "peak_bytes", src) / 1e9)
                 for r in rs if csvio.num(r, "fits", src) == 1)
    oom = sorted((csvio.num(r, "T", src), csvio.num(r, "bytes", src) / 1e9) for r in rs if csvio.num(r, "fits", src) == 0)
    if fit:
        ax_s.plot([f[0] for f in fit], [f[1] for f in fit], **st)
        ax_m.plot([f[0] for f in fit], [f[2] for f in fit], **st)
    for T, asked in oom:  # did not fit: where it would have been, hollow, with a cross on the T axis of speed
        ax_m.plot([T], [asked], marker=st.get("marker", "o"), mfc="none", ms=10, color=st.get("color", "k"), ls="none")
        k = len(ooms.get(T, []))  # runs that did not fit at this T so far: alternate above / below the marker
        ax_m.annotate(f"{a}: OOM, asked {asked:.0f} GB", (T, asked), fontsize=7, ha="right",
                      va="bottom" if k % 2 == 0 else "top", color=st.get("color", "k"))
        ooms.setdefault(T, []).append(a)
for T, names in ooms.items():  # on the speed panel: one line per T, naming every run that did not fit
    ax_s.axvline(T, color="gray", ls=":", lw=1)
    ax_s.annotate("OOM: " + ", ".join(names), (T, 0.02), xycoords=("data", "axes fraction"), rotation=90,
                  fontsize=7, ha="right", va="bottom", color="gray")
if limit:
    ax_m.axhline(limit / 1e9, color="red", lw=1, label=f"memory available: {limit / 1e9:.0f} GB")
for ax in (ax_s, ax_m):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length T")
    ax.grid(True, alpha=0.3, which="both")
ax_m.set_yscale("log")
ax_s.set_ylabel("tokens per second (forward + backward + AdamW)")
ax_m.set_ylabel("device memory of the training run (GB)")
ax_s.set_title("training speed")
ax_m.set_title("training memory (hollow: did not fit, at the bytes asked)")
ax_s.legend(fontsize=8)
ax_m.legend(fontsize=8)
fig.suptitle(f"step 06: the GPT trained on the GPU, naive against fused attention ({title})")
fig.tight_layout()
fig.savefig(out, dpi=120)
print(f"wrote {out}")
