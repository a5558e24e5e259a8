# step07_student.py: a student's tiled attention in NumPy, the chapter's Step 3 loop line for line, run on every
# set of step 07's assignment (./step07 --assignment DIR), with each mistake the grader knows as a mode.
#   python3 plots/gallery/step07_student.py DIR MODE      writes DIR/out_SET.npy for every set; MODE is one of:
# fixed                 the chapter's loop, the K/V tiles above the diagonal skipped when causal: right
# chapter               the chapter's snippet as printed: every K/V tile visited
# float64               fixed, in float64 (the scale 1/np.sqrt(D), out = np.zeros(...))
# no-max                Break 1: p = e^s, no rescaling (float32)
# no-max-float64        Break 1 in float64 (the scale 1/np.sqrt(D))
# no-rescale            Break 2: alpha = beta = 1, m = m_tile
# max-zero              Break 3: m starts at 0 (float32)
# max-zero-float64      Break 3 in float64
# max-minus-10000       m starts at -10000, a finite stand-in for -inf
# first-max             m kept from the first K/V tile: p = e^(s - m_0) in every later tile
# p-before-max-float64  p = e^(s - m) before m_new is taken, then rescaled (float64)
# relative-mask         the chapter's loop, the causal mask from tile-relative indices
# drop-last             the K/V loop stops at (N // BC) * BC
# drop-last-rows        the row loop stops at (N // BR) * BR (those rows stay 0)
# pad                   K, V zero-padded to whole tiles, the padded keys not masked
# no-scale              no 1/sqrt(D)
# no-division           no final / l
# fp16                  everything in float16
# alibi-relative        ALiBi's bias from tile-relative indices
# alibi-after-max       ALiBi's bias added after m_tile is taken
# diagonal              the causal mask hides the diagonal too: a bug no break makes
# bad-files             fixed, but five files saved wrong (float16, int32, 3-D, text, cut short), out_huge.npy not at all
# step07_grade_numpy.sh runs each mode through ./step07 --grade (its transcript: step07_grade_numpy.txt).
import os
import sys
import numpy as np

SETS = ["multi", "one_tile", "negative", "causal", "large", "huge", "alibi", "late_max", "very_neg", "ragged"]


def tiled_attention(q, k, v, BR=64, BC=64, causal=False, slope=None, mode="fixed"):
    B, H, N, D = q.shape
    mode = "fixed" if mode == "bad-files" else mode
    f64 = mode in ("float64", "no-max-float64", "max-zero-float64", "p-before-max-float64")
    dt = np.float16 if mode == "fp16" else np.float32
    q, k, v = q.astype(dt), k.astype(dt), v.astype(dt)
    scale = 1 / np.sqrt(D) if f64 else dt(1 / np.sqrt(D))   # np.sqrt returns a float64: it promotes s
    if mode == "no-scale":
        scale = dt(1)
    if mode == "pad":                                        # zero keys and values up to whole tiles
        Np = -(-N // BC) * BC
        k = np.concatenate([k, np.zeros((B, H, Np - N, D), dt)], axis=2)
        v = np.concatenate([v, np.zeros((B, H, Np - N, D), dt)], axis=2)
    out = np.zeros(q.shape) if f64 else np.zeros_like(q)     # np.zeros without a dtype: float64
    m0 = {"max-zero": 0, "max-zero-float64": 0, "max-minus-10000": -10000}.get(mode, -np.inf)
    kv_end = N // BC * BC if mode == "drop-last" else k.shape[2]
    for i in range(0, N // BR * BR if mode == "drop-last-rows" else N, BR):
        qi = q[:, :, i:i + BR]
        m = np.full(qi.shape[:3] + (1,), m0, dt)
        l = np.zeros(qi.shape[:3] + (1,), dt)
        o = np.zeros_like(qi)
        jend = min(kv_end, i + BR) if causal and mode not in ("chapter", "relative-mask") else kv_end
        for j in range(0, jend, BC):
            s = qi @ k[:, :, j:j + BC].transpose(0, 1, 3, 2) * scale
            rows, cols = np.arange(i, i + s.shape[2])[:, None], np.arange(j, j + s.shape[3])[None, :]
            bias = 0
            if slope is not None:                                # ALiBi: -slope_h |i - j|, absolute indices
                r, c = (rows - i, cols - j) if mode == "alibi-relative" else (rows, cols)
                bias = (-slope[None, :, None, None] * np.abs(r - c)).astype(dt)
            if mode != "alibi-after-max":
                s = s + bias                                     # a score modifier: on s, before the max
            if causal:                                           # key j hidden from row i when j > i
                r, c = (rows - i, cols - j) if mode == "relative-mask" else (rows, cols)  # arange from 0
                s = np.where(c >= r if mode == "diagonal" else c > r, -np.inf, s)
            m_tile = s.max(-1, keepdims=True)                    # the chapter's Step 3, line for line
            p = np.exp(s - m_tile)
            l_tile = p.sum(-1, keepdims=True)
            m_new = np.maximum(m, m_tile)
            alpha = np.exp(m - m_new)
            beta = np.exp(m_tile - m_new)
            if mode.startswith("no-max"):                        # Break 1: no max, no rescaling
                p = np.exp(s)
                l_tile, m_new, alpha, beta = p.sum(-1, keepdims=True), m, 1, 1
            elif mode == "no-rescale":                           # Break 2: the tile's max, no rescaling
                m_new, alpha, beta = m_tile, 1, 1
            elif mode == "alibi-after-max":                      # the bias after m_tile is taken
                p = np.exp(s + bias - m_tile)
                l_tile = p.sum(-1, keepdims=True)
            elif mode == "first-max" and j > 0:                  # m stays the first tile's
                p = np.exp(s - m)
                l_tile, m_new, alpha, beta = p.sum(-1, keepdims=True), m, 1, 1
            elif mode == "p-before-max-float64" and j > 0:       # p against the old m, then rescaled
                p = np.exp(s - m)
                l_tile, beta = p.sum(-1, keepdims=True), alpha
            l = alpha * l + beta * l_tile
            o = alpha * o + beta * (p @ v[:, :, j:j + BC])
            m = m_new
        out[:, :, i:i + BR] = o if mode == "no-division" else o / l
    return out


d, mode = sys.argv[1], sys.argv[2]
np.seterr(all="ignore")
for name in SETS:
    q, k, v = (np.load(f"{d}/{x}_{name}.npy") for x in "qkv")
    slope = 2.0 ** -np.arange(1, 9, dtype=np.float32) if name == "alibi" else None  # 1/2 .. 1/256 for H = 8
    o = tiled_attention(q, k, v, causal=name == "causal", slope=slope, mode=mode)
    o = o if mode == "float64" else o.astype(np.float32)
    path = f"{d}/out_{name}.npy"
    if mode == "bad-files" and name in ("multi", "one_tile", "negative", "causal", "large", "huge"):
        if name == "multi":
            np.save(path, o.astype(np.float16))                  # float16
        elif name == "one_tile":
            np.save(path, o.astype(np.int32))                    # int32
        elif name == "negative":
            np.save(path, o[0])                                  # the batch axis dropped: 3-D
        elif name == "causal":
            np.savetxt(path, o.reshape(-1, o.shape[-1]))         # text, not .npy
        elif name == "large":
            np.save(path, o)
            with open(path, "r+b") as f:                         # cut short, as by a full disk
                f.truncate(1000)
        elif os.path.exists(path):
            os.remove(path)                                      # huge: not saved (nor left from a run before)
        continue
    np.save(path, o)
