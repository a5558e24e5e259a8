/* naive.h: step 01's naive attention, on the CPU (naive.c) and the GPU (naive_gpu.cu). */
#ifndef NAIVE_H
#define NAIVE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* O = softmax(Q K^T / sqrt(D)) V with S and P as whole tracked [bh, N, N]
 * buffers. Returns 0, or -1 (nothing computed) when S and P do not fit under
 * the host memory limit. Q, K, V, O are [bh, N, D]. */
int naive_attention_cpu(const float *q, const float *k, const float *v, float *o,
                        long bh, long N, long D, int causal);

/* GPU path (naive_gpu.cu): the step's GPU run and its checks. */
int naive_gpu_main(const Opts *o);
int naive_gpu_checks(void); /* runs the GPU grid, then returns report_finish() */

#ifdef __cplusplus
}
#endif

#endif
