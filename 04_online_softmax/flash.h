/* flash.h: step 04's one-pass tiled forward (the chapter's Step 3) on the CPU. */
#ifndef FLASH_H
#define FLASH_H

#ifdef __cplusplus
extern "C" {
#endif

/* O = softmax(Q K^T / sqrt(D)) V, one row tile of BR query rows at a time,
 * streaming K/V tiles of BC rows through a running max m, running sum l and
 * running output o (all fp32). Never more than a [BR, BC] score tile exists.
 * causal: key j > query i masked (absolute indices), tiles wholly above the
 * diagonal skipped. slope (may be NULL): ALiBi, head x's scores get
 * -slope[x] |i - j| (absolute indices) before m_tile. Q, K, V, O are [bh, N, D]. Returns 0, or -1 (nothing
 * computed) when its small tracked buffers do not fit under the memory limit. */
int flash_forward_cpu(const float *q, const float *k, const float *v, float *o,
                      long bh, long N, long D, long BR, long BC, int causal, const float *slope);

/* Decode (flash-decoding on the CPU): the n newest query rows q [n, D] of a sequence of nkeys positions
 * against its cached k, v [nkeys, D], causal among themselves (row r sees keys 0 .. nkeys - n + r). The
 * keys are split into S chunks of whole BC tiles; each chunk runs the tile loop into its own state
 * (m_s, l_s, o_s), and flash_merge_cpu folds the S states into the output [n, D]. S = 1 is the one-pass
 * loop; any S gives the same output up to fp32 rounding. 0, or -1 when its buffers do not fit. */
int flash_decode_cpu(const float *q, const float *k, const float *v, float *out, long n, long nkeys, long D, long BC,
                     long S);
/* The merge: S partial states of one row (m_s [S], l_s [S], o_s [S, D], o_s not divided by l_s), each
 * over its own keys, into O = o / l [D]: m = max m_s, l = sum e^(m_s - m) l_s, o = sum e^(m_s - m) o_s,
 * folded one state at a time with the tile loop's alpha and beta. A state with l_s = 0 (no visible key)
 * adds nothing; if every state is empty, O = 0. */
void flash_merge_cpu(const float *m_s, const float *l_s, const float *o_s, long S, long D, float *out);

#ifdef __cplusplus
}
#endif

#endif
