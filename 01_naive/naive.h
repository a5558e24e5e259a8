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
/* The same with ALiBi (question 5): - slope[h] |i - j| added to head h's scores (slope: bh floats; NULL
 * is naive_attention_cpu). The textbook yardstick of the tiled forwards with the bias. */
int naive_attention_bias_cpu(const float *q, const float *k, const float *v, float *o, long bh, long N, long D,
                             int causal, const float *slope);

/* GPU path (naive_gpu.cu). The baseline the fused kernels are measured
 * against: S = Q K^T / sqrt(D) with a cuBLAS strided-batched GEMM, a row-wise
 * stable softmax kernel, O = P V with cuBLAS; S and P are real tracked device
 * buffers [B, H, N, N] of dtype (fp32: fp32 GEMMs, no TF32; fp16: fp16
 * storage, fp32 compute in the GEMMs). q, k, v, o are device pointers
 * [B, H, N, D] in dtype; stream is a cudaStream_t (void * so that C can
 * include this header). Returns 0, or -1 when S and P cannot be allocated
 * (dmalloc_try said no: over --mem-limit or cudaMalloc out of memory; the
 * error is cleared, nothing is computed and nothing leaks). Asynchronous. */
int naive_attention_gpu(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D,
                        int dtype, int causal, void *stream);

/* The same with S and P given (each [B, H, N, N] of dtype), as a caching
 * allocator (PyTorch's) hands them to a user: benchmarks time this, so that
 * cudaMalloc and cudaFree are not what is timed. */
void naive_attention_gpu_ws(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D,
                            int dtype, int causal, void *S, void *P, void *stream);
/* The backward of naive_attention_gpu_ws, with P [B, H, N, N] as that forward
 * left it (causal: zeros above the diagonal): dV = P^T dO, dP = dO V^T,
 * dS = P o (dP - rowsum(dP o P)), dQ = dS K / sqrt(D), dK = dS^T Q / sqrt(D),
 * with cuBLAS and one row kernel. dS ([B, H, N, N] of dtype) holds dP, then dS
 * (the forward's S buffer may be passed). dout, dq, dk, dv: [B, H, N, D].
 * Asynchronous; the baseline of step 05's backward kernels. */
void naive_attention_backward_gpu_ws(const void *q, const void *k, const void *v, const void *dout, const void *P,
                                     void *dS, void *dq, void *dk, void *dv, long B, long H, long N, long D, int dtype,
                                     void *stream);

/* The naive GPU result's max abs error against the float64 reference at this
 * shape and seed (inputs rounded to dtype): the yardstick of FlashAttention's
 * accuracy rule for the fp16/bf16 kernels. -1 if S and P do not fit. */
double naive_gpu_error(long B, long H, long N, long D, int dtype, int causal, uint64_t seed);

/* The GPU's matrix-product ceiling in dtype: TFLOP/s (2 n^3 / time) of one
 * cuBLAS GEMM n x n x n, fp32 accumulate (no TF32), random inputs, median of
 * repeat runs after two warm-ups; *ms_out gets the time. -1 if it does not fit. */
double gemm_ceiling_tflops(int dtype, long n, int repeat, double *ms_out);
/* The same for e4m3 inputs on cublasLt (fp32 accumulation, fast accumulation on, fp16 out): step 05's FP8 ceiling. */
double gemm_ceiling_fp8_tflops(long n, int repeat, double *ms_out);

/* The step's GPU run and its checks. */
int naive_gpu_main(const Opts *o);
int naive_gpu_checks(void); /* runs the GPU grid, then returns report_finish() */

#ifdef __cplusplus
}
#endif

#endif
