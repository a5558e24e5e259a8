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

#ifdef __cplusplus
}
#endif

#endif
