/*
 * flash.c: the algorithm of step 04, the chapter's tiled forward with the
 * streaming softmax (Step 3), in plain C. Kept apart from main.c because
 * step 02 measures this very code (not a copy) against naive attention.
 *
 * For each row tile Q_i (BR rows) the state is m, l (one float per row) and
 * o (BR x D floats); each K/V tile (BC rows) is folded in with
 *
 *   s_tile = Q_i K_j^T / sqrt(D)                 [BR, BC]
 *   m_tile = rowmax(s_tile)
 *   p_tile = exp(s_tile - m_tile)                every entry in (0, 1]
 *   l_tile = rowsum(p_tile)
 *   m_new  = max(m, m_tile)
 *   alpha  = exp(m - m_new)                      rescales the old state
 *   beta   = exp(m_tile - m_new)                 rescales this tile
 *   l      = alpha l + beta l_tile
 *   o      = alpha o + beta p_tile V_j
 *
 * and at the end O_i = o / l. A score modifier (ALiBi's -slope |i - j|, with
 * the absolute row and column) goes on s_tile before m_tile, like the causal
 * mask: then m_tile is the max of the scores actually exponentiated and the
 * running max keeps bounding every exponent. The memory it needs beyond Q, K, V, O is
 * BR*BC + BR*D + 2*BR floats, whatever N is: that is the whole memory win.
 */
#include "common.h"
#include "flash.h"

#include <math.h>

/* exp(a - b) where a <= b, with the convention exp(-inf - (-inf)) = 1:
 * a row whose scores are all masked so far has m = -inf, and its (empty)
 * state must be carried unchanged, not turned into NaN. */
static float exp_diff(float a, float b)
{
    return a == b ? 1.0f : expf(a - b);
}

int flash_forward_cpu(const float *q,  // [bh, N, D]
                      const float *k,  // [bh, N, D]
                      const float *v,  // [bh, N, D]
                      float *out,      // [bh, N, D]
                      long bh, long N, long D, long BR, long BC, int causal,
                      const float *slope)  // [bh] ALiBi slope of each head, or NULL
{
    const float scale = 1.0f / sqrtf((float)D);
    float *s_tile = tmalloc((size_t)BR * BC * sizeof(float));  // [BR, BC], reused for p_tile
    float *o = tmalloc((size_t)BR * D * sizeof(float));        // [BR, D] running output
    float *m = tmalloc((size_t)BR * sizeof(float));            // [BR] running max
    float *l = tmalloc((size_t)BR * sizeof(float));            // [BR] running sum
    if (!s_tile || !o || !m || !l) {
        tfree(s_tile); tfree(o); tfree(m); tfree(l);
        return -1;
    }
    for (long h = 0; h < bh; h++) {
        const float *qh = q + (size_t)h * N * D, *kh = k + (size_t)h * N * D, *vh = v + (size_t)h * N * D;
        for (long i = 0; i < N; i += BR) {                       // row tile Q_i: rows i .. i+br-1
            const long br = i + BR <= N ? BR : N - i;             // the last tile may be short
            for (long r = 0; r < br; r++) {
                m[r] = -INFINITY;                                 // below every score: the first tile's max wins
                l[r] = 0.0f;
                for (long d = 0; d < D; d++) o[r * D + d] = 0.0f;
            }
            /* Causal: a K/V tile whose first column j is past the tile's last
             * row i+br-1 is wholly masked; never visit it. */
            const long jend = causal ? (i + br < N ? i + br : N) : N;
            for (long j = 0; j < jend; j += BC) {                 // K/V tile j .. j+bc-1
                const long bc = j + BC <= N ? BC : N - j;
                for (long r = 0; r < br; r++) {
                    const float *qr = qh + (size_t)(i + r) * D;
                    float *sr = s_tile + r * BC;
                    float m_tile = -INFINITY, l_tile = 0.0f;
                    for (long c = 0; c < bc; c++) {
                        sr[c] = dot_f32(qr, kh + (size_t)(j + c) * D, D) * scale; // s_tile = Q_i K_j^T / sqrt(D)
                        if (slope) {                                      // a score modifier goes here, on s_tile,
                            const long dist = i + r > j + c ? i + r - (j + c) : j + c - (i + r); // before m_tile,
                            sr[c] -= slope[h] * (float)dist;              // with absolute indices: ALiBi, -slope |i - j|
                        }
                        if (causal && j + c > i + r) sr[c] = -INFINITY; // absolute indices: key j+c vs query i+r
                        m_tile = fmaxf(m_tile, sr[c]);            // m_tile = rowmax(s_tile)
                    }
                    if (m_tile == -INFINITY) continue;            // row fully masked in this tile: contributes nothing
                    for (long c = 0; c < bc; c++) {
                        sr[c] = expf(sr[c] - m_tile);             // p_tile = exp(s_tile - m_tile)
                        l_tile += sr[c];                          // l_tile = rowsum(p_tile)
                    }
                    const float m_new = fmaxf(m[r], m_tile);      // m_new = max(m, m_tile)
                    const float alpha = exp_diff(m[r], m_new);    // alpha = e^(m - m_new)
                    const float beta = exp_diff(m_tile, m_new);   // beta  = e^(m_tile - m_new)
                    l[r] = alpha * l[r] + beta * l_tile;          // l = alpha l + beta l_tile
                    float *orow = o + r * D;
                    for (long d = 0; d < D; d++) orow[d] *= alpha;  // o = alpha o ...
                    for (long c = 0; c < bc; c++) {               // ... + beta p_tile V_j, a row of V at a time
                        const float w = beta * sr[c];             // (contiguous in V, so the d loop vectorises)
                        const float *vr = vh + (size_t)(j + c) * D;
                        for (long d = 0; d < D; d++) orow[d] += w * vr[d];
                    }
                    m[r] = m_new;
                }
            }
            for (long r = 0; r < br; r++) {
                /* l = 0 only if every key of the row was masked (not possible
                 * with the causal mask, whose diagonal is always kept): such a
                 * row is defined as o = 0, never 0/0 = NaN. */
                const float inv_l = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
                for (long d = 0; d < D; d++)
                    out[(size_t)h * N * D + (size_t)(i + r) * D + d] = o[r * D + d] * inv_l; // O_i = o / l
            }
        }
    }
    tfree(s_tile); tfree(o); tfree(m); tfree(l);
    return 0;
}
