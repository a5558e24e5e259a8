/*
 * breaks.c: step 04's tiled forward once more, with the lines that the
 * chapter's BREAK IT removes tagged where they stand:
 *
 *   BREAK-1  (no running max): the max subtraction and the rescaling go;
 *            p = e^s, l = l + l_tile, o = o + p V.
 *   BREAK-2  (max kept, rescaling dropped): p = e^(s - m_tile) stays, but
 *            alpha and beta go: l = l + l_tile, o = o + p V, m = m_tile.
 *   BREAK-3  (running max initialised to 0 instead of -inf).
 *
 *   BREAK-ALIBI-REL  (a score modifier, ALiBi's -slope |i - j|, from the tile's
 *            own r and c instead of the absolute i0 + r, j0 + c).
 *   BREAK-ALIBI-MAX  (the modifier added after m_tile is taken: m_tile is the
 *            max of the unbiased scores, not of those exponentiated).
 *
 * To make a break by hand, edit the tagged lines as their comments say and
 * run ./step07 --break none: the checks and the diagnosis then tell you
 * which break you made.
 */
#include "common.h"
#include "breaks.h"
#include "../06_causal/causal.h"

#include <math.h>

/* Store x as the tile arithmetic's type: fp32 as is, fp16 rounded (and so
 * overflowing to inf above 65504, as an fp16 register or buffer would). */
static float st(float x, int fp16) { return fp16 ? f16_to_f32(f32_to_f16(x)) : x; }

/* ALiBi's bias of score (i0 + r, j0 + c) for head h: -slope |i - j| with absolute indices (right), or with the
 * tile's own r and c (BREAK-ALIBI-REL: the tile-relative bug, as with the mask). 0 without slopes. */
static float alibi_bias(const float *slope, long h, int brk, long i0, long r, long j0, long c)
{
    if (!slope) return 0.0f;
    const long i = brk == BREAK_ALIBI_RELATIVE ? r : i0 + r, j = brk == BREAK_ALIBI_RELATIVE ? c : j0 + c; // BREAK-ALIBI-REL
    return -slope[h] * (float)(i > j ? i - j : j - i);
}

int break_forward_cpu(const float *q, const float *k, const float *v, float *out, long bh, long N, long D, long BR,
                      long BC, int brk, int causal, int fp16, long trace_row, TraceTile *trace, FirstInf *first,
                      const float *slope)
{
    const float scale = 1.0f / sqrtf((float)D);
    float *s = tmalloc((size_t)BR * BC * 4), *o = tmalloc((size_t)BR * D * 4);
    float *m = tmalloc((size_t)BR * 4), *l = tmalloc((size_t)BR * 4);
    if (!s || !o || !m || !l) { tfree(s); tfree(o); tfree(m); tfree(l); return -1; }
    if (first) { first->tile = first->col = first->row = first->head = -1; first->s = 0; first->what = ""; }
    for (long h = 0; h < bh; h++) {
        const float *qh = q + (size_t)h * N * D, *kh = k + (size_t)h * N * D, *vh = v + (size_t)h * N * D;
        for (long i0 = 0; i0 < N; i0 += BR) {
            const long br = i0 + BR <= N ? BR : N - i0;
            for (long r = 0; r < br; r++) {
                m[r] = brk == BREAK_MAX_ZERO ? 0.0f : -INFINITY;  // BREAK-3: start at 0 instead of -inf
                l[r] = 0.0f;
                for (long d = 0; d < D; d++) o[r * D + d] = 0.0f;
            }
            const long jend = causal ? kv_end(MASK_ABSOLUTE, i0, br, N) : N; // step 06's mask and block skipping
            for (long j0 = 0, t = 0; j0 < jend; j0 += BC, t++) {
                const long bc = j0 + BC <= N ? BC : N - j0;
                for (long r = 0; r < br; r++) {
                    float *sr = s + r * BC, m_tile = -INFINITY, l_tile = 0.0f, max_s = -INFINITY, max_p = 0.0f;
                    for (long c = 0; c < bc; c++) {
                        sr[c] = st(dot_f32(qh + (i0 + r) * D, kh + (j0 + c) * D, D) * scale, fp16); // s_tile
                        if (brk != BREAK_ALIBI_AFTER_MAX)                                       // the modifier, before m_tile
                            sr[c] = st(sr[c] + alibi_bias(slope, h, brk, i0, r, j0, c), fp16); // BREAK-ALIBI-MAX: moved below
                        if (causal && mask_hides(MASK_ABSOLUTE, i0, r, j0, c)) sr[c] = -INFINITY;
                        m_tile = fmaxf(m_tile, sr[c]);                 // m_tile = rowmax(s_tile)
                        max_s = fmaxf(max_s, sr[c]);
                    }
                    if (m_tile == -INFINITY) continue;                 // causal: nothing visible in this tile
                    for (long c = 0; c < bc; c++) {
                        const float sc = sr[c];
                        if (brk == BREAK_NO_MAX) sr[c] = st(expf(sc), fp16);      // BREAK-1: p = e^s, no max subtracted
                        else if (brk == BREAK_ALIBI_AFTER_MAX)                     // BREAK-ALIBI-MAX: the bias after m_tile:
                            sr[c] = st(expf(sc + alibi_bias(slope, h, brk, i0, r, j0, c) - m_tile), fp16); // m_tile no
                        else sr[c] = st(expf(sc - m_tile), fp16);                 // longer the max: p_tile = e^(s - m_tile)
                        l_tile = st(l_tile + sr[c], fp16);                        // l_tile = rowsum(p_tile)
                        max_p = fmaxf(max_p, sr[c]);
                        if (first && first->tile < 0 && !f32_is_finite(sr[c])) {
                            first->tile = t; first->col = j0 + c; first->row = i0 + r; first->head = h; first->s = sc; first->what = "p";
                        }
                    }
                    float alpha = 1.0f, beta = 1.0f;
                    float m_new = fmaxf(m[r], m_tile);                             // m_new = max(m, m_tile)
                    if (brk != BREAK_NO_MAX && brk != BREAK_NO_RESCALE) {
                        alpha = expf(m[r] - m_new);                               // BREAK-1, BREAK-2: alpha = e^(m - m_new)
                        beta = expf(m_tile - m_new);                              // BREAK-1, BREAK-2: beta = e^(m_tile - m_new)
                    }
                    l[r] = st(alpha * l[r] + beta * l_tile, fp16);               // l = alpha l + beta l_tile
                    for (long d = 0; d < D; d++) {
                        float pv = 0.0f;
                        for (long c = 0; c < bc; c++) pv = st(pv + sr[c] * vh[(j0 + c) * D + d], fp16); // (p_tile V_j)[d]
                        o[r * D + d] = st(alpha * o[r * D + d] + beta * pv, fp16); // o = alpha o + beta p_tile V_j
                    }
                    if (brk == BREAK_NO_RESCALE) m_new = m_tile;                  // BREAK-2: m = m_tile
                    m[r] = m_new;                                                 // m = m_new
                    int bad = !f32_is_finite(l[r]);
                    for (long d = 0; d < D; d++) bad |= !f32_is_finite(o[r * D + d]);
                    if (first && first->tile < 0 && bad) {
                        first->tile = t; first->col = j0; first->row = i0 + r; first->head = h; first->s = max_s;
                        first->what = f32_is_finite(l[r]) ? "o" : "l";
                    }
                    if (trace && h == 0 && i0 + r == trace_row) {
                        trace[t].max_s = max_s; trace[t].max_p = max_p; trace[t].l = l[r];
                        trace[t].max_o = 0.0f;
                        for (long d = 0; d < D; d++) trace[t].max_o = fmaxf(trace[t].max_o, fabsf(o[r * D + d]));
                        trace[t].nonfinite = bad || (t > 0 && trace[t - 1].nonfinite);
                    }
                }
            }
            for (long r = 0; r < br; r++)
                for (long d = 0; d < D; d++)
                    out[(size_t)h * N * D + (i0 + r) * D + d] = st(o[r * D + d] / l[r], fp16); // O_i = o / l
        }
    }
    tfree(s); tfree(o); tfree(m); tfree(l);
    return 0;
}

void break_inputs(float *q, float *k, float *v, long bh, long N, long D, double scale, int kind, uint64_t seed)
{
    const size_t n = (size_t)bh * N * D;
    make_qkv(q, k, v, n, seed);
    if (kind == INPUTS_NEG_ROWS) { /* keys share a +3 offset; queries of the first half point the other way, hard */
        for (size_t i = 0; i < n; i++) k[i] += 3.0f;
        for (long h = 0; h < bh; h++)
            for (long i = 0; i < N / 2; i++)
                for (long d = 0; d < D; d++) q[((size_t)h * N + i) * D + d] = -12.0f;
    }
    if (kind == INPUTS_FAR_KEY) /* rows N/2.. of each head point at key 0 alone: score 300 there, 1/8 of it elsewhere */
        for (long h = 0; h < bh; h++) {
            const float *k0 = k + (size_t)h * N * D;
            double kk = 0;
            for (long d = 0; d < D; d++) kk += (double)k0[d] * k0[d];
            for (long i = N / 2; i < N; i++)
                for (long d = 0; d < D; d++)
                    q[((size_t)h * N + i) * D + d] = (float)(300.0 * sqrt((double)D) / kk * k0[d]);
        }
    for (size_t i = 0; i < n; i++) q[i] *= (float)scale;
    round_to_dtype(q, n, DT_FP16); /* the same inputs for fp16 and fp32 runs: fp16-representable */
    round_to_dtype(k, n, DT_FP16);
    round_to_dtype(v, n, DT_FP16);
}
