/*
 * naive_backward.c: attention's backward the textbook way, through the
 * materialised P, and the forward that keeps P for it. fp32, CPU.
 *
 * The forward is step 01's naive attention with P kept: S = Q K^T / sqrt(D),
 * P = softmax(S), O = P V. The backward, for dO given:
 *
 *   dV = P^T dO
 *   dP = dO V^T
 *   dS = P o (dP - rowsum(dP o P))        the softmax's backward, row by row
 *   dQ = dS K / sqrt(D)
 *   dK = dS^T Q / sqrt(D)
 *
 * P is [N, N] per head and must live from the forward to the backward: in a
 * model, one per layer, for every layer at once. That is the memory the
 * FlashAttention backward (flash_backward.c) does without.
 *
 * The same two functions compute the chapter's broken attentions as the
 * functions they are (so that a model trained with one gets the exact
 * gradient of what its forward computes, as autograd would give it in
 * PyTorch), each checked equal to its tiled form: the mask's by ./step06
 * --check (causal.c's forward), the breaks' by ./step07 --check (breaks.c's):
 *
 *   mask MASK_RELATIVE_ALL      P from the chapter's tile-relative mask (causal.h);
 *                               the backward formula is unchanged: a mask is a mask.
 *   SOFTMAX_NO_MAX (Break 1)    P = e^S / rowsum(e^S): softmax with no max subtracted,
 *                               equal to softmax until e^s overflows (s > 88.72 in fp32),
 *                               then inf / inf = NaN. Same backward.
 *   SOFTMAX_NO_RESCALE          p_ij = e^(s_ij - m_it) / sum_j e^(s_ij - m_it), with m_it
 *   (Break 2)                   the max of row i over K/V tile t = tile of j only: each tile
 *                               on its own scale, never rescaled. Its backward has one more
 *                               term. Autograd of s - max(s) sends the max's gradient to the
 *                               argmax; for the intact softmax that term is rowsum(dS) = 0 and
 *                               drops out, for Break 2 it is the per-tile sum, which is not 0:
 *                               dS_i,argmax(t) -= sum over j in t of dS_ij.
 */
#include "common.h"
#include "causal.h"
#include "naive_backward.h"

#include <math.h>
#include <string.h>

/* Is score (i, j) seen by the attention of kind a? The tiled forward's rule,
 * whole-matrix form: the K/V tile of j visited by the row tile of i, and not masked. */
int attn_visible(const AttnKind *a, long N, long i, long j)
{
    const long i0 = i / a->BR * a->BR, j0 = j / a->BC * a->BC;
    const long br = i0 + a->BR <= N ? a->BR : N - i0;
    return j0 < kv_end(a->mask, i0, br, N) && !mask_hides(a->mask, i0, i - i0, j0, j - j0);
}

size_t naive_p_bytes(long bh, long N)
{
    return (size_t)bh * (size_t)N * (size_t)N * sizeof(float);
}

void naive_forward_p(const float *q, const float *k, const float *v, // [bh, N, D] each
                     float *o,                                       // [bh, N, D]
                     float *P,                                       // [bh, N, N] kept for the backward
                     long bh, long N, long D, const AttnKind *a)
{
    const float scale = 1.0f / sqrtf((float)D);
    for (long h = 0; h < bh; h++) {
        const size_t hd = (size_t)h * N * D;
        for (long i = 0; i < N; i++) {
            float *pi = P + ((size_t)h * N + i) * N;                     // row i: S, then P, in place
            for (long j = 0; j < N; j++)
                pi[j] = attn_visible(a, N, i, j) ? dot_f32(q + hd + i * D, k + hd + j * D, D) * scale // s_ij = q_i . k_j / sqrt(D)
                                            : -INFINITY;
            float l = 0.0f;
            if (a->brk == SOFTMAX_NO_RESCALE) {
                for (long t0 = 0; t0 < N; t0 += a->BC) {                 // each K/V tile on its own max
                    const long t1 = t0 + a->BC < N ? t0 + a->BC : N;
                    float m_t = -INFINITY;
                    for (long j = t0; j < t1; j++) m_t = fmaxf(m_t, pi[j]);
                    for (long j = t0; j < t1; j++) { pi[j] = m_t == -INFINITY ? 0.0f : expf(pi[j] - m_t); l += pi[j]; }
                }
            } else {
                float m = -INFINITY;                                     // m = max_j s_ij
                if (a->brk != SOFTMAX_NO_MAX)
                    for (long j = 0; j < N; j++) m = fmaxf(m, pi[j]);
                else
                    m = 0.0f;                                            // Break 1: nothing subtracted
                for (long j = 0; j < N; j++) { pi[j] = pi[j] == -INFINITY ? 0.0f : expf(pi[j] - m); l += pi[j]; }
            }
            const float inv = l > 0.0f ? 1.0f / l : 0.0f;                // a row that sees nothing: o = 0
            for (long j = 0; j < N; j++) pi[j] *= inv;                   // p_ij = e^(s_ij - m) / l
            float *oi = o + hd + i * D;
            for (long d = 0; d < D; d++) oi[d] = 0.0f;
            for (long j = 0; j < N; j++)                                 // o_i = sum_j p_ij v_j
                for (long d = 0; d < D; d++) oi[d] += pi[j] * v[hd + j * D + d];
        }
    }
}

int naive_backward(const float *q, const float *k, const float *v, // [bh, N, D] each
                   const float *P,                                 // [bh, N, N] from the forward
                   const float *dO,                                // [bh, N, D]
                   float *dq, float *dk, float *dv,                // [bh, N, D] each, written
                   long bh, long N, long D, const AttnKind *a)
{
    const float scale = 1.0f / sqrtf((float)D);
    float *dS = tmalloc((size_t)N * N * sizeof(float));            // [N, N] dP, then dS, one head at a time
    if (!dS) return -1;
    memset(dq, 0, (size_t)bh * N * D * sizeof(float));
    memset(dk, 0, (size_t)bh * N * D * sizeof(float));
    memset(dv, 0, (size_t)bh * N * D * sizeof(float));
    for (long h = 0; h < bh; h++) {
        const size_t hd = (size_t)h * N * D;
        const float *Ph = P + (size_t)h * N * N;
        for (long i = 0; i < N; i++) {
            const float *pi = Ph + i * N, *dOi = dO + hd + i * D;
            float *dSi = dS + i * N, delta = 0.0f;
            for (long j = 0; j < N; j++) {
                for (long d = 0; d < D; d++) dv[hd + j * D + d] += pi[j] * dOi[d]; // dV = P^T dO
                dSi[j] = dot_f32(dOi, v + hd + j * D, D);                     // dP = dO V^T
                delta += dSi[j] * pi[j];                                       // rowsum(dP o P)
            }
            for (long j = 0; j < N; j++) dSi[j] = pi[j] * (dSi[j] - delta);    // dS = P o (dP - rowsum(dP o P))
            if (a->brk == SOFTMAX_NO_RESCALE)                                    // the argmax term of each tile's max
                for (long t0 = 0; t0 < N; t0 += a->BC) {
                    const long t1 = t0 + a->BC < N ? t0 + a->BC : N;
                    long arg = -1;
                    float best = -INFINITY, sum = 0.0f;
                    for (long j = t0; j < t1; j++) {
                        if (!attn_visible(a, N, i, j)) continue;
                        const float s = dot_f32(q + hd + i * D, k + hd + j * D, D); // (scale > 0: same argmax)
                        if (arg < 0 || s > best) { best = s; arg = j; }
                        sum += dSi[j];
                    }
                    if (arg >= 0) dSi[arg] -= sum;                             // dS_i,argmax(t) -= sum_t dS_ij
                }
        }
        for (long i = 0; i < N; i++)
            for (long j = 0; j < N; j++) {
                const float w = dS[i * N + j] * scale;
                if (w == 0.0f) continue;                                       // masked: no contribution
                for (long d = 0; d < D; d++) dq[hd + i * D + d] += w * k[hd + j * D + d]; // dQ = dS K / sqrt(D)
                for (long d = 0; d < D; d++) dk[hd + j * D + d] += w * q[hd + i * D + d]; // dK = dS^T Q / sqrt(D)
            }
    }
    tfree(dS);
    return 0;
}
