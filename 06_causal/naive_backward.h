/* naive_backward.h: naive attention with P kept, and its backward through P (naive_backward.c). */
#ifndef NAIVE_BACKWARD_H
#define NAIVE_BACKWARD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which softmax: the intact one, or one of the chapter's two breaks of it (BREAK IT), as a model trains
 * with them. They are step 07's Break 1 and Break 2, which break its tiled forward (07_break_it/breaks.c,
 * BREAK_NO_MAX and BREAK_NO_RESCALE) the same two ways, and ./step07 --check holds each form here equal
 * to its tiled break on the same inputs. Named here, not taken from step 07: step 07 runs step 06's code
 * (the causal mask, and the tile-relative one that it diagnoses), so its headers include this step's and
 * never the other way; a step 06 that included step 07's header would make the two import each other. */
enum { SOFTMAX_INTACT = 0, SOFTMAX_NO_MAX = 1, SOFTMAX_NO_RESCALE = 2 };

/* Which attention function: mask (causal.h's MASK_*), break (SOFTMAX_*), and the tiles the tiled form
 * would use; the intact causal attention does not depend on them, the broken ones do. */
typedef struct { int mask, brk; long BR, BC; } AttnKind;

/* Is score (row i, key j) seen (not masked, its tile visited)? */
int attn_visible(const AttnKind *a, long N, long i, long j);

/* O = P V with P = softmax(mask(Q K^T / sqrt(D))) (or the broken P of a->brk)
 * kept in P. Q, K, V, O [bh, N, D]; P [bh, N, N]. */
void naive_forward_p(const float *q, const float *k, const float *v, float *o, float *P, long bh, long N, long D,
                     const AttnKind *a);
size_t naive_p_bytes(long bh, long N);

/* dQ, dK, dV from P and dO. Allocates one [N, N] dS (returns -1 if it does not fit). */
int naive_backward(const float *q, const float *k, const float *v, const float *P, const float *dO, float *dq,
                   float *dk, float *dv, long bh, long N, long D, const AttnKind *a);

#ifdef __cplusplus
}
#endif

#endif
