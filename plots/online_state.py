"""online_state.py: the streaming softmax's state per K/V tile for one row
(running max m and running sum l) beside the direct softmax's. Reads step
04's --csv-state.
    python3 plots/online_state.py results/state.csv results/online_state.png"""
import matplotlib.pyplot as plt

import csvio

src, out = csvio.args(2, "STATE.csv OUT.png")
rows = csvio.read(src, ["tile", "cols_seen", "m", "l", "m_direct", "l_direct"])
x = [csvio.num(r, "cols_seen", src) for r in rows]
fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
a1.plot(x, [csvio.num(r, "m", src) for r in rows], "o-", label="running max m")
a1.axhline(csvio.num(rows[0], "m_direct", src), color="gray", ls="--", label="direct softmax's max")
a2.plot(x, [csvio.num(r, "l", src) for r in rows], "o-", color="tab:green", label="running sum l (at the running max)")
a2.axhline(csvio.num(rows[0], "l_direct", src), color="gray", ls="--", label="direct softmax's denominator")
for a in (a1, a2):
    a.set_xlabel("keys seen")
    a.grid(True, alpha=0.3)
    a.legend(fontsize=8)
a1.set_title("step 04: m after each K/V tile (query row 0)")
a2.set_title("l after each tile: rescaled by alpha when m grows")
fig.tight_layout()
fig.savefig(out, dpi=120)
print(f"wrote {out}")
