/* causal.h: step 06's causal tiled forward (causal.c) and its backward (flash_backward.c) on the CPU. */
#ifndef CAUSAL_H
#define CAUSAL_H

#ifdef __cplusplus
extern "C" {
#endif

/* MASK_ABSOLUTE: key j0 + c hidden from query i0 + r when j0 + c > i0 + r (right).
 * MASK_RELATIVE: hidden when c > r, tile-relative indices, K/V tiles above the diagonal skipped:
 *     below the diagonal it hides keys that are in the past.
 * MASK_HIDE_ROW0: absolute, and row 0 sees no key at all (a test of the fully-masked convention).
 * MASK_RELATIVE_ALL: the chapter's Step 6 bug exactly as its snippet would have it: every K/V tile
 *     visited (the snippet skips none) and the mask built from arange(0): hidden when c > r. Below the
 *     diagonal it hides past keys, as MASK_RELATIVE does; above it, it shows future ones. */
enum { MASK_NONE = 0, MASK_ABSOLUTE = 1, MASK_RELATIVE = 2, MASK_HIDE_ROW0 = 3, MASK_RELATIVE_ALL = 4 };

/* Is score (row i0 + r, column j0 + c) hidden? i0, j0: the tile's first row and column.
 * The forward and the backward call this one function, so they mask the same scores. */
static inline int mask_hides(int mode, long i0, long r, long j0, long c)
{
    switch (mode) {
    case MASK_ABSOLUTE: return j0 + c > i0 + r;                   // key after query, absolute indices: right
    case MASK_RELATIVE:                                           // tile-relative: right only when i0 == j0
    case MASK_RELATIVE_ALL: return c > r;
    case MASK_HIDE_ROW0: return j0 + c > i0 + r || i0 + r == 0;  // test hook: row 0 sees nothing
    default: return 0;
    }
}

/* Block skipping. The row tile i0 .. i0+br-1 visits the K/V tiles that start before kv_end: with a
 * causal mask, tiles starting after its last row are wholly masked and never visited. The backward
 * walks the other way (a K/V tile j0, then the row tiles): the first row tile that visits j0 is
 * the one holding row j0, q_begin. */
static inline int mask_skips(int mode) { return mode == MASK_ABSOLUTE || mode == MASK_RELATIVE || mode == MASK_HIDE_ROW0; }
static inline long kv_end(int mode, long i0, long br, long N) { return mask_skips(mode) && i0 + br < N ? i0 + br : N; }
static inline long q_begin(int mode, long j0, long BR) { return mask_skips(mode) ? j0 / BR * BR : 0; }

/* O = softmax(mask(Q K^T / sqrt(D))) V in [BR, BC] tiles, K/V tiles wholly
 * above the diagonal skipped (for the modes that skip). Q, K, V, O are
 * [bh, N, D]. L (may be NULL) gets one float per row for the backward,
 * L = m + log l, the log of the row's softmax denominator (-inf for a row that
 * saw no key). slope (may be NULL): ALiBi, -slope[x] (i - j) on head x's scores,
 * absolute indices, on s_tile before the mask and m_tile (step 04's --alibi).
 * Returns the number of (row tile, K/V tile) pairs visited, or
 * -1 when the tiles do not fit under the memory limit. */
long causal_forward_cpu(const float *q, const float *k, const float *v, float *out, float *L,
                        long bh, long N, long D, long BR, long BC, int mode, const float *slope);

/* The tiles the causal loop visits, by formula. */
long causal_tiles_expected(long bh, long N, long BR, long BC);

/* FlashAttention-2's backward (flash_backward.c): dQ, dK, dV of
 * O = softmax(mask(Q K^T / sqrt(D))) V from Q, K, V, O, dO and the forward's
 * L, recomputing each [BR, BC] tile of P instead of keeping it. All [bh, N, D]
 * but L [bh, N]. Returns 0, or -1 when its scratch does not fit. *scratch_bytes
 * (may be NULL) gets the bytes it allocated beyond its arguments. */
int flash_backward_cpu(const float *q, const float *k, const float *v, const float *o, const float *dO,
                       const float *L, float *dq, float *dk, float *dv, long bh, long N, long D, long BR,
                       long BC, int mode, size_t *scratch_bytes);

#ifdef __cplusplus
}
#endif

#endif
