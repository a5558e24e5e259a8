/*
 * causal.c: the algorithm of step 06, step 04's one-pass tiled forward with
 * the causal mask on s_tile (after the scores, before m_tile) and the causal
 * loop bound, and (for the backward, flash_backward.c) the one float per row
 * that the backward needs, L = m + log l. Kept apart from main.c because step
 * 07's --diagnose runs the tile-relative mask through this very code, and the
 * training of --train runs the model's attention through it.
 */
#include "common.h"
#include "causal.h"

#include <math.h>

// --- the algorithm: step 04's forward with the mask and the loop bound ---------------

/* Returns the number of (row tile, K/V tile) pairs visited, or -1 on OOM. */
long causal_forward_cpu(const float *q, const float *k, const float *v, float *out, // [bh, N, D] each
                        float *L,                                                   // [bh, N] or NULL
                        long bh, long N, long D, long BR, long BC, int mode,
                        const float *slope)                                         // [bh] ALiBi or NULL
{
    const float scale = 1.0f / sqrtf((float)D);
    float *s = tmalloc((size_t)BR * BC * 4), *o = tmalloc((size_t)BR * D * 4);
    float *m = tmalloc((size_t)BR * 4), *l = tmalloc((size_t)BR * 4);
    long visited = 0;
    if (!s || !o || !m || !l) { tfree(s); tfree(o); tfree(m); tfree(l); return -1; }
    for (long h = 0; h < bh; h++) {
        const float *qh = q + (size_t)h * N * D, *kh = k + (size_t)h * N * D, *vh = v + (size_t)h * N * D;
        for (long i0 = 0; i0 < N; i0 += BR) {
            const long br = i0 + BR <= N ? BR : N - i0;
            for (long r = 0; r < br; r++) { m[r] = -INFINITY; l[r] = 0; for (long d = 0; d < D; d++) o[r * D + d] = 0; }
            /* Block skipping: K/V tiles starting after this tile's last row are wholly masked. */
            const long jend = kv_end(mode, i0, br, N);
            for (long j0 = 0; j0 < jend; j0 += BC) {
                const long bc = j0 + BC <= N ? BC : N - j0;
                visited++;
                for (long r = 0; r < br; r++) {
                    float *sr = s + r * BC, m_tile = -INFINITY, l_tile = 0;
                    for (long c = 0; c < bc; c++) {
                        sr[c] = dot_f32(qh + (i0 + r) * D, kh + (j0 + c) * D, D) * scale; // s_tile
                        if (slope) { const long dist = i0 + r - (j0 + c); sr[c] -= slope[h] * (float)(dist < 0 ? -dist : dist); }
                        if (mask_hides(mode, i0, r, j0, c)) sr[c] = -INFINITY;          // the mask, before m_tile
                        m_tile = fmaxf(m_tile, sr[c]);
                    }
                    if (m_tile == -INFINITY) continue;       // nothing visible in this tile: contributes nothing
                    for (long c = 0; c < bc; c++) { sr[c] = expf(sr[c] - m_tile); l_tile += sr[c]; }
                    const float m_new = fmaxf(m[r], m_tile);
                    const float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new); // nothing seen yet: alpha = 0
                    const float beta = expf(m_tile - m_new);
                    l[r] = alpha * l[r] + beta * l_tile;
                    for (long d = 0; d < D; d++) o[r * D + d] *= alpha;
                    for (long c = 0; c < bc; c++) {
                        const float w = beta * sr[c];
                        for (long d = 0; d < D; d++) o[r * D + d] += w * vh[(j0 + c) * D + d];
                    }
                    m[r] = m_new;
                }
            }
            for (long r = 0; r < br; r++) {
                const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f; // a row that saw nothing: o = 0
                for (long d = 0; d < D; d++) out[(size_t)h * N * D + (i0 + r) * D + d] = o[r * D + d] * inv;
                /* What the backward needs to rebuild any p_ij = e^(s_ij - m) / l = e^(s_ij - L_i):
                 * one float per row, where naive attention keeps the whole row of P. */
                if (L) L[(size_t)h * N + i0 + r] = l[r] > 0 ? m[r] + logf(l[r]) : -INFINITY; // L = m + log l
            }
        }
    }
    tfree(s); tfree(o); tfree(m); tfree(l);
    return visited;
}

/* Tiles the causal loop visits, by formula: row tile t covers rows up to
 * min(t*BR + BR, N) - 1 and visits ceil(that / BC) K/V tiles. With BR = BC and
 * N a multiple of it, Tr (Tr + 1) / 2 of Tr^2 per head. */
long causal_tiles_expected(long bh, long N, long BR, long BC)
{
    long t = 0;
    for (long i0 = 0; i0 < N; i0 += BR) {
        long end = i0 + BR < N ? i0 + BR : N;
        t += (end + BC - 1) / BC;
    }
    return t * bh;
}

