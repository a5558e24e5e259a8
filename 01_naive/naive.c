/*
 * naive.c: the algorithm of step 01 on the CPU, the textbook formula.
 * Kept apart from main.c because step 02 measures this very code (not a copy)
 * when it probes where naive attention dies.
 */
#include "common.h"
#include "naive.h"

#include <math.h>

// --- the algorithm ----------------------------------------------------------

/* S = Q K^T / sqrt(D): one [N, N] block per head; with a slope (ALiBi, question 5), - slope |i - j| added. */
static void scores(const float *q, const float *k, float *s, long N, long D, int causal, float slope)
{
    const float scale = 1.0f / sqrtf((float)D);
    for (long i = 0; i < N; i++)
        for (long j = 0; j < N; j++) {
            const float acc = dot_f32(q + i * D, k + j * D, D);    // s_ij = q_i . k_j
            s[i * N + j] = (causal && j > i) ? -INFINITY : acc * scale - slope * (float)(i > j ? i - j : j - i);
        }
}

/* P = softmax(S) row by row, the stable way: subtract the row max first. */
static void softmax_rows(const float *s, float *p, long N)
{
    for (long i = 0; i < N; i++) {
        const float *si = s + i * N;
        float *pi = p + i * N;
        float m = -INFINITY, l = 0.0f;
        for (long j = 0; j < N; j++) m = fmaxf(m, si[j]);      // m = max_j s_ij
        for (long j = 0; j < N; j++) { pi[j] = expf(si[j] - m); l += pi[j]; } // l = sum_j e^(s_ij - m)
        for (long j = 0; j < N; j++) pi[j] /= l;               // p_ij = e^(s_ij - m) / l
    }
}

/* O = P V */
static void pv(const float *p, const float *v, float *o, long N, long D)
{
    for (long i = 0; i < N; i++) {
        for (long d = 0; d < D; d++) o[i * D + d] = 0.0f;
        for (long j = 0; j < N; j++) {                         // o_i = sum_j p_ij v_j, a row of V at a time
            const float pij = p[i * N + j];
            for (long d = 0; d < D; d++) o[i * D + d] += pij * v[j * D + d];
        }
    }
}

/* The whole naive forward: S and P are real [B, H, N, N] buffers, allocated
 * here and tracked, so mem_peak() shows exactly what they cost. Returns 0,
 * or -1 (nothing computed) if S and P do not fit under the memory limit:
 * step02 uses that to mark a row OOM. */
int naive_attention_cpu(const float *q,  // [B, H, N, D]
                        const float *k,  // [B, H, N, D]
                        const float *v,  // [B, H, N, D]
                        float *o,        // [B, H, N, D]
                        long bh, long N, long D, int causal)
{
    return naive_attention_bias_cpu(q, k, v, o, bh, N, D, causal, NULL);
}

int naive_attention_bias_cpu(const float *q, const float *k, const float *v, float *o, long bh, long N, long D,
                             int causal, const float *slope)
{
    size_t nn;
    if (!size_mul((size_t)bh, (size_t)N * (size_t)N, &nn) || !size_mul(nn, sizeof(float), &nn))
        return -1;
    float *S = tmalloc(nn), *P = S ? tmalloc(nn) : NULL;  // [B, H, N, N] each
    if (!S || !P) { tfree(S); return -1; }
    for (long h = 0; h < bh; h++) {
        size_t hd = (size_t)h * N * D, hn = (size_t)h * N * N;
        scores(q + hd, k + hd, S + hn, N, D, causal, slope ? slope[h] : 0.0f);
        softmax_rows(S + hn, P + hn, N);
        pv(P + hn, v + hd, o + hd, N, D);
    }
    tfree(P);
    tfree(S);
    return 0;
}

