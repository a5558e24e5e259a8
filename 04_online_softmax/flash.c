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

// --- decode: one row against a long K/V, the keys split, the states merged ----------------------

/* Generation (the book's Chapter 13, the KV cache) asks for the newest query row only, against every key
 * cached so far: one row, many keys. A GPU wants many blocks at once, so the keys are split into S chunks
 * that run side by side (flash-decoding), and each chunk ends with the tile loop's state for the row:
 * (m_s, l_s, o_s), o_s not yet divided by l_s. The chunks' states are then merged into the row's output.
 *
 * The merge is the tile loop once more: a chunk's state is what one big K/V tile would have given, so
 * it is folded in with the same m_new, alpha, beta and the same two updates. Folded one chunk at a time
 * that is, written out,
 *
 *   m = max_s m_s,   l = sum_s e^(m_s - m) l_s,   o = sum_s e^(m_s - m) o_s,   O = o / l,
 *
 * and with S = 1 it is the one-pass loop. The GPU's merge (05_cuda_fused/decode/decode03_split_kv.cu) computes the closed
 * form directly, every chunk's weight e^(m_s - m) at once.
 *
 * Causal among the new rows: the n query rows are the newest n positions of a sequence of nkeys, so row
 * r sits at position nkeys - n + r and sees keys 0 .. nkeys - n + r (decode is causal attention's last
 * row; with n > 1, the last n rows, as speculative decoding's verify step asks). */

/* The tile loop of flash_forward_cpu above for ONE query row q over keys [j0, j1), of which keys past
 * `last` are masked, into the state (m, l, o): the same lines, repeated for the reader (the loop above
 * runs BR rows at a time and stays as step 02 measures it). s_tile holds BC floats. */
static void row_stream(const float *q, const float *k, const float *v, long j0, long j1, long last, long D, long BC,
                       float *s_tile, float *m, float *l, float *o)
{
    const float scale = 1.0f / sqrtf((float)D);
    for (long j = j0; j < j1; j += BC) {                          // K/V tile j .. j+bc-1
        const long bc = j + BC <= j1 ? BC : j1 - j;
        float m_tile = -INFINITY, l_tile = 0.0f;
        for (long c = 0; c < bc; c++) {
            s_tile[c] = j + c > last ? -INFINITY                  // causal: key j+c after the row's position
                                     : dot_f32(q, k + (size_t)(j + c) * D, D) * scale; // s_tile = q K_j^T / sqrt(D)
            m_tile = fmaxf(m_tile, s_tile[c]);                    // m_tile = max(s_tile)
        }
        if (m_tile == -INFINITY) continue;                        // every key of the tile masked: nothing to add
        for (long c = 0; c < bc; c++) {
            s_tile[c] = expf(s_tile[c] - m_tile);                 // p_tile = exp(s_tile - m_tile)
            l_tile += s_tile[c];                                  // l_tile = sum(p_tile)
        }
        const float m_new = fmaxf(*m, m_tile);                    // m_new = max(m, m_tile)
        const float alpha = exp_diff(*m, m_new);                  // alpha = e^(m - m_new)
        const float beta = exp_diff(m_tile, m_new);               // beta  = e^(m_tile - m_new)
        *l = alpha * *l + beta * l_tile;                          // l = alpha l + beta l_tile
        for (long d = 0; d < D; d++) o[d] *= alpha;               // o = alpha o ...
        for (long c = 0; c < bc; c++) {                           // ... + beta p_tile V_j
            const float w = beta * s_tile[c];
            const float *vr = v + (size_t)(j + c) * D;
            for (long d = 0; d < D; d++) o[d] += w * vr[d];
        }
        *m = m_new;
    }
}

void flash_merge_cpu(const float *m_s, const float *l_s, const float *o_s, long S, long D, float *out)
{
    float m = -INFINITY, l = 0.0f;                                // the row's state before any chunk
    for (long d = 0; d < D; d++) out[d] = 0.0f;                   // (out holds o until the division)
    for (long s = 0; s < S; s++) {                                // chunk s's state, as the tile loop folds a tile:
        const float m_new = fmaxf(m, m_s[s]);                     // m_new = max(m, m_s)
        const float alpha = exp_diff(m, m_new);                   // alpha = e^(m - m_new)
        const float beta = exp_diff(m_s[s], m_new);               // beta  = e^(m_s - m_new)
        l = alpha * l + beta * l_s[s];                            // l = alpha l + beta l_s
        for (long d = 0; d < D; d++) out[d] = alpha * out[d] + beta * o_s[s * D + d]; // o = alpha o + beta o_s
        m = m_new;
    }
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;               // l = 0: the row saw no key at all, o = 0
    for (long d = 0; d < D; d++) out[d] *= inv_l;                 // O = o / l
}

/* Chunk s of S over `tiles` tiles of BC keys: tiles [s tiles / S, (s+1) tiles / S), as keys. */
static void chunk_keys(long s, long S, long nkeys, long BC, long *j0, long *j1)
{
    const long tiles = (nkeys + BC - 1) / BC;
    *j0 = s * tiles / S * BC;
    *j1 = (s + 1) * tiles / S * BC;
    if (*j1 > nkeys) *j1 = nkeys;
}

int flash_decode_cpu(const float *q,  // [n, D] the n newest query rows
                     const float *k,  // [nkeys, D] the cache, the new rows' keys included
                     const float *v,  // [nkeys, D]
                     float *out,      // [n, D]
                     long n, long nkeys, long D, long BC, long S)
{
    float *s_tile = tmalloc((size_t)BC * sizeof(float));
    float *m_s = tmalloc((size_t)S * sizeof(float)), *l_s = tmalloc((size_t)S * sizeof(float)); // [S] chunk states
    float *o_s = tmalloc((size_t)S * D * sizeof(float));                                        // [S, D]
    if (!s_tile || !m_s || !l_s || !o_s) {
        tfree(s_tile); tfree(m_s); tfree(l_s); tfree(o_s);
        return -1;
    }
    for (long r = 0; r < n; r++) {
        const long last = nkeys - n + r;                          // row r's position: it sees keys 0 .. last
        for (long s = 0; s < S; s++) {                            // on a GPU these S run at once, one block each
            long j0, j1;
            chunk_keys(s, S, nkeys, BC, &j0, &j1);
            m_s[s] = -INFINITY;                                   // each chunk starts as a row tile does
            l_s[s] = 0.0f;
            for (long d = 0; d < D; d++) o_s[s * D + d] = 0.0f;
            row_stream(q + r * D, k, v, j0, j1, last, D, BC, s_tile, &m_s[s], &l_s[s], o_s + s * D);
        }
        flash_merge_cpu(m_s, l_s, o_s, S, D, out + r * D);        // the S states, merged
    }
    tfree(s_tile); tfree(m_s); tfree(l_s); tfree(o_s);
    return 0;
}
