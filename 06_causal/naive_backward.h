/* naive_backward.h: naive attention with P kept, and its backward through P (naive_backward.c). */
#ifndef NAIVE_BACKWARD_H
#define NAIVE_BACKWARD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which attention function: mask (causal.h's MASK_*), break (07's BREAK_NONE,
 * BREAK_NO_MAX or BREAK_NO_RESCALE), and the tiles the tiled form would use;
 * the intact causal attention does not depend on them, the broken ones do. */
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
