/*
 * flash_backward.c: the backward of the tiled forward (causal.c), the way
 * FlashAttention-2 computes it, on the CPU in fp32. Read it beside
 * causal_forward_cpu: the same names, tiles, mask and block skipping.
 *
 * The forward kept no P. It kept one float per row, L_i = m_i + log l_i, so
 * that any p_ij = e^(s_ij - m_i) / l_i = e^(s_ij - L_i) can be rebuilt from
 * q_i and k_j alone. The gradients, with s = Q K^T / sqrt(D), P = softmax(s),
 * O = P V and dO given:
 *
 *   dV = P^T dO                     dV_j = sum over row tiles i of p_tile^T dO_i
 *   dP = dO V^T                     dp_tile = dO_i V_j^T
 *   dS = P o (dP - Delta)           ds_tile = p_tile o (dp_tile - Delta_i)
 *   dQ = dS K / sqrt(D)             dQ_i += ds_tile K_j / sqrt(D)
 *   dK = dS^T Q / sqrt(D)           dK_j += ds_tile^T Q_i / sqrt(D)
 *
 * where Delta_i = sum_j p_ij dp_ij. Naive attention sums that over a whole row
 * of P; here it comes from O: sum_j p_ij (dO_i . v_j) = dO_i . (sum_j p_ij v_j)
 * = dO_i . O_i, one dot product per row, computed once before the loop (the
 * "preprocessing" pass of FlashAttention-2 and of Triton's tutorial).
 *
 * The loop is the forward's turned inside out: a K/V tile outside, the row
 * tiles inside, so that dK_j and dV_j are summed in a [BC, D] buffer each (the
 * GPU keeps them in registers) and written once, while dQ_i is added to from
 * every K/V tile (the GPU needs atomics or a second pass for that). With the
 * causal mask the row tiles before the one holding row j0 are wholly masked
 * for this K/V tile and skipped: the same tiles the forward skips.
 *
 * Memory beyond the inputs and the gradients: Delta [N] (one head at a time),
 * the p and ds tiles [BR, BC] and dK_j, dV_j [BC, D]: O(N + BR*BC + BC*D)
 * floats, whatever N is. Naive attention's backward needs P [N, N] per head
 * kept from the forward, and a [N, N] dS besides.
 */
#include "common.h"
#include "causal.h"

#include <math.h>

int flash_backward_cpu(const float *q, const float *k, const float *v, // [bh, N, D] each
                       const float *o, const float *dO,                // [bh, N, D] each
                       const float *L,                                 // [bh, N] from the forward
                       float *dq, float *dk, float *dv,                // [bh, N, D] each, written
                       long bh, long N, long D, long BR, long BC, int mode, size_t *scratch_bytes)
{
    const float scale = 1.0f / sqrtf((float)D);
    const size_t bytes = ((size_t)N + 2 * (size_t)BR * BC + 2 * (size_t)BC * D) * sizeof(float);
    float *delta = tmalloc((size_t)N * 4);                 // [N]      Delta_i = dO_i . O_i
    float *p = tmalloc((size_t)BR * BC * 4);               // [BR, BC] p_tile, rebuilt from L
    float *ds = tmalloc((size_t)BR * BC * 4);              // [BR, BC] dp_tile, then ds_tile
    float *dk_j = tmalloc((size_t)BC * D * 4);             // [BC, D]  dK_j, summed over the row tiles
    float *dv_j = tmalloc((size_t)BC * D * 4);             // [BC, D]  dV_j
    if (scratch_bytes) *scratch_bytes = bytes;
    if (!delta || !p || !ds || !dk_j || !dv_j) {
        tfree(delta); tfree(p); tfree(ds); tfree(dk_j); tfree(dv_j);
        return -1;
    }
    for (long h = 0; h < bh; h++) {
        const size_t off = (size_t)h * N * D;
        const float *qh = q + off, *kh = k + off, *vh = v + off, *oh = o + off, *dOh = dO + off;
        const float *Lh = L + (size_t)h * N;
        float *dqh = dq + off, *dkh = dk + off, *dvh = dv + off;
        for (long i = 0; i < N; i++) delta[i] = dot_f32(dOh + i * D, oh + i * D, D); // Delta_i = dO_i . O_i
        for (size_t x = 0; x < (size_t)N * D; x++) dqh[x] = 0.0f;  // dQ is summed into from every K/V tile

        for (long j0 = 0; j0 < N; j0 += BC) {                     // K/V tile j0 .. j0+bc-1: outside
            const long bc = j0 + BC <= N ? BC : N - j0;
            for (long x = 0; x < bc * D; x++) dk_j[x] = dv_j[x] = 0.0f;
            /* row tiles: inside, from the first that sees key j0 (q_begin: the forward visits this K/V tile from
             * that row tile on, so every tile the loop meets is one the forward visited) */
            for (long i0 = q_begin(mode, j0, BR); i0 < N; i0 += BR) {
                const long br = i0 + BR <= N ? BR : N - i0;
                for (long r = 0; r < br; r++) {
                    const float *qr = qh + (i0 + r) * D, *dOr = dOh + (i0 + r) * D;
                    float *pr = p + r * BC, *dsr = ds + r * BC;
                    for (long c = 0; c < bc; c++) {
                        const float s = dot_f32(qr, kh + (j0 + c) * D, D) * scale;   // s_tile = Q_i K_j^T / sqrt(D)
                        pr[c] = mask_hides(mode, i0, r, j0, c) ? 0.0f               // the forward's mask
                                                               : expf(s - Lh[i0 + r]); // p_tile = e^(s_tile - L_i)
                        dsr[c] = dot_f32(dOr, vh + (j0 + c) * D, D);             // dp_tile = dO_i V_j^T
                        dsr[c] = pr[c] * (dsr[c] - delta[i0 + r]);               // ds_tile = p o (dp - Delta_i)
                    }
                }
                for (long r = 0; r < br; r++) {
                    const float *qr = qh + (i0 + r) * D, *dOr = dOh + (i0 + r) * D;
                    float *dqr = dqh + (i0 + r) * D;
                    for (long c = 0; c < bc; c++) {
                        const float pw = p[r * BC + c], sw = ds[r * BC + c] * scale;
                        const float *kc = kh + (j0 + c) * D;
                        float *dvc = dv_j + c * D, *dkc = dk_j + c * D;
                        for (long d = 0; d < D; d++) dvc[d] += pw * dOr[d];          // dV_j += p_tile^T dO_i
                        for (long d = 0; d < D; d++) dqr[d] += sw * kc[d];           // dQ_i += ds_tile K_j / sqrt(D)
                        for (long d = 0; d < D; d++) dkc[d] += sw * qr[d];           // dK_j += ds_tile^T Q_i / sqrt(D)
                    }
                }
            }
            for (long x = 0; x < bc * D; x++) {                   // dK_j, dV_j written once
                dkh[j0 * D + x] = dk_j[x];
                dvh[j0 * D + x] = dv_j[x];
            }
        }
    }
    tfree(delta); tfree(p); tfree(ds); tfree(dk_j); tfree(dv_j);
    return 0;
}
