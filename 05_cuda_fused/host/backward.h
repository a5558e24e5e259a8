/* backward.h: step 05's backward, the backward family's driver (backward.c): the float64 reference of the
 * gradients, and the checks, the default run and the benchmark of the backward kernels (backward/bwdNN_*.cu)
 * against the naive cuBLAS backward. */
#ifndef BACKWARD_H
#define BACKWARD_H

#include <stdio.h>

#include "common.h"

/* The gradients of O = softmax(Q K^T / sqrt(D)) V (causal: keys j <= i) for
 * dO given, in float64, for the heads [h0, h1) of [bh, N, D] inputs: L (and
 * the output O) of the rows i = 0, stride, 2 stride, ...; dQ of those rows;
 * dK and dV of the keys j = 0, stride, ... . Every row's L and Delta is needed
 * for any key's dK, so the cost is 2 N^2 D per head plus 7 N D per sampled
 * row (stride 1: about 7 N^2 D). Arrays: L [bh, N] (all rows), o, dq, dk, dv
 * [bh, rows, D] with rows = ceil(N / stride). Runs on all CPU cores. */
void bwd_reference(const float *q, const float *k, const float *v, const float *dO, long bh, long N, long D, int causal,
                   long stride, double *L, double *o, double *dq, double *dk, double *dv);

/* The step's head-dim rule for --backward, decidable without a GPU: fp32
 * (backward kernel 1, with forward kernel 2) D in 16..128 in steps of 16;
 * fp16/bf16 D = 64 or 128. */
int bwd_dim_ok(int dtype, long D);

/* The GPU parts (HAVE_CUDA builds). `only` is a backward kernel id or 0. */
void bwd_run_checks(long only);               /* PASS/FAIL lines; the caller calls report_finish() */
/* ./step05 --backward --q Q.npy --k K.npy --v V.npy --do dO.npy [--out-dq F --out-dk F --out-dv F]: the
 * reader's tensors instead of the seed's (Q, K, V through o's --q --k --v); the gradients of the last
 * backward kernel run are written as float32 .npy. All NULL: the seed's problem. */
typedef struct { const char *dout, *dq, *dk, *dv; } BwdFiles;
int bwd_run_default(const Opts *o, FILE *csv, const BwdFiles *f); /* ./step05 --backward */
int bwd_run_bench(const Opts *o, FILE *csv);   /* ./step05 --bench --backward */
int bwd_run_sanitize(const Opts *o);           /* the backward kernels (--kernel: those) at N = 65, 257 under compute-sanitizer */

#endif
