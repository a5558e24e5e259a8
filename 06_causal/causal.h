/* causal.h: step 06's causal tiled forward on the CPU. */
#ifndef CAUSAL_H
#define CAUSAL_H

#ifdef __cplusplus
extern "C" {
#endif

/* MASK_ABSOLUTE: key j0 + c hidden from query i0 + r when j0 + c > i0 + r (right).
 * MASK_RELATIVE: hidden when c > r, tile-relative indices (the chapter's Step 6 bug).
 * MASK_HIDE_ROW0: absolute, and row 0 sees no key at all (a test of the fully-masked convention). */
enum { MASK_NONE = 0, MASK_ABSOLUTE = 1, MASK_RELATIVE = 2, MASK_HIDE_ROW0 = 3 };

/* O = softmax(mask(Q K^T / sqrt(D))) V in [BR, BC] tiles, K/V tiles wholly
 * above the diagonal skipped (for every mode but MASK_NONE). Q, K, V, O are
 * [bh, N, D]. Returns the number of (row tile, K/V tile) pairs visited, or
 * -1 when the tiles do not fit under the memory limit. */
long causal_forward_cpu(const float *q, const float *k, const float *v, float *out,
                        long bh, long N, long D, long BR, long BC, int mode);

/* The tiles the causal loop visits, by formula. */
long causal_tiles_expected(long bh, long N, long BR, long BC);

#ifdef __cplusplus
}
#endif

#endif
