/*
 * bwd.cuh: what every backward kernel (bwdN_*.cu) shares: the preprocessing
 * pass before the main loop and the dQ conversion after it (bwd_prep.cu), and
 * the one PTX wrapper the tensor-core backward adds to tc.cuh's.
 *
 * The preprocessing pass is flash_backward.c's line
 *     for (long i = 0; i < N; i++) delta[i] = dot_f32(dOh + i * D, oh + i * D, D); // Delta_i = dO_i . O_i
 * and its dQ = 0, run once over every row before the kernel that walks the
 * tiles: on the GPU a separate launch, because every K/V block needs the Delta
 * of every row tile, and a launch boundary is the only grid-wide barrier.
 */
#ifndef BWD_CUH
#define BWD_CUH

#include <cuda_runtime.h>

#include <cstddef>

/* Delta [BH, Npad] = rowsum(dO o O) in fp32 (0 on the rows N..Npad-1 that
 * pad the last row tile); lse2 [BH, Npad] (may be NULL) = L log2(e), the
 * forward's L in the units of ex2 (+inf on the padding rows, so that their
 * p = 2^(s - inf) = 0); dq_zero [BH, N, D] fp32 (may be NULL) set to 0 for
 * the atomics that follow. o, dout in dtype. One warp per row. */
int bwd_preprocess(const void *o, const void *dout, const float *L, float *delta, float *lse2, float *dq_zero, long BH,
                   long N, long Npad, long D, int dtype, cudaStream_t s);

/* dq (dtype) = dq_acc * scale, n elements (n a multiple of 4). */
int bwd_convert_dq(const float *dq_acc, void *dq, size_t n, float scale, int dtype, cudaStream_t s);

/* p[0] += a, p[1] += b in global memory, without reading the result back
 * (RED, not ATOM). sm_90 has one instruction for the pair (8-byte aligned p);
 * older GPUs, two. */
__device__ __forceinline__ void red_add2(float *p, float a, float b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
#endif
}

#endif
