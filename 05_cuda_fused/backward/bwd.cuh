/*
 * bwd.cuh: what every backward kernel (bwdNN_*.cu) shares.
 *
 * The preprocessing pass before the main loop and the dQ conversion after it (bwd_prep.cu, declared here); the
 * layout of backward kernels 10-12's tiled dQ accumulator; the PTX the backward adds to tc.cuh's (dQ's red.global.add,
 * kernel 9's acquire/release counter); and the softmax recompute on four accumulator elements that kernels 2-12
 * share (bwd_p_ds4, and kernel 8's halves of it).
 * Why a launch of its own before the main loop: the preprocessing pass is flash_backward.c's line
 *     for (long i = 0; i < N; i++) delta[i] = dot_f32(dOh + i * D, oh + i * D, D); // Delta_i = dO_i . O_i
 * and its dQ = 0, run once over every row before the kernel that walks the tiles: on the GPU a separate launch,
 * because every K/V block needs the Delta of every row tile, and a launch boundary is the only grid-wide barrier.
 * What it costs: two launches around each backward, memory-bound and small next to the main loop (bwd_prep.cu);
 * measured: RESULTS.md#bwd-prep.
 */
#ifndef BWD_CUH
#define BWD_CUH

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../primitives/tc.cuh"

/* Delta [BH, Npad] = rowsum(dO o O) in fp32 (0 on the rows N..Npad-1 that
 * pad the last row tile); lse2 [BH, Npad] (may be NULL) = L log2(e), the
 * forward's L in the units of ex2 (+inf on the padding rows, so that their
 * p = 2^(s - inf) = 0); dq_zero [BH, zrows, D] fp32 (may be NULL) set to 0
 * for the additions that follow: zrows = N, or Npad for kernel 10's tiled
 * accumulator (its padding rows too, in the same pass rather than a memset
 * of its own). o, dout in dtype. */
int bwd_preprocess(const void *o, const void *dout, const float *L, float *delta, float *lse2, float *dq_zero, long zrows,
                   long BH, long N, long Npad, long D, int dtype, cudaStream_t s);

/* dq (dtype) = dq_acc * scale, n elements (n a multiple of 4). */
int bwd_convert_dq(const float *dq_acc, void *dq, size_t n, float scale, int dtype, cudaStream_t s);

/* Backward kernel 10's dQ accumulator, tiled: [BH][Npad / 64][D / 64] blocks
 * of 64 x 64 floats, each 16 KB in one piece, so that one bulk reduce-add
 * sends a consumer warpgroup's whole part of dQ_i (its shared-memory copy
 * has the same layout). Inside a block, row r's 16-byte chunks are swizzled,
 * chunk c at c ^ (r % 8) (the TMA's 128-byte swizzle, on 256-byte rows), so
 * that the consumers' float2 stores of an accumulator fragment (8 rows x 4
 * lanes of a warp) take 4 passes through the banks and not 8 (Nsight Compute
 * counts the 4). Backward kernel 14's layout (DQ_SWZ_HALF) puts chunk c at
 * c ^ 2 (r % 4) and takes 2, the fewest (bwd14_dq_banks.cu works it through).
 * The offset in floats of element (r, c) of the block. */
enum { DQ_SWZ_ROW8 = 0, DQ_SWZ_HALF = 1 };
template <int SWZ = DQ_SWZ_ROW8> __host__ __device__ __forceinline__ int bwd_dq_tiled_off(int r, int c)
{
    return r * 64 + (((c / 4) ^ (SWZ == DQ_SWZ_ROW8 ? r % 8 : 2 * (r % 4))) * 4) + c % 4;
}

/* dq (dtype, [BH, N, D]) = dq_acc (tiled as above, swizzled as swz says, [BH, Npad, D] floats) * scale. */
int bwd_convert_dq_tiled(const float *dq_acc, void *dq, long BH, long N, long Npad, long D, float scale, int dtype,
                         cudaStream_t s, int swz = DQ_SWZ_ROW8);

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

/* Backward kernel 9's ordered additions: a counter in global memory read with
 * acquire and written with release at the GPU's scope (PTX ISA, "Memory
 * Consistency Model"): what a block did before its release is seen by the
 * block whose acquire reads the value. */
__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_release_gpu(unsigned *p, unsigned v)
{
    asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
/* Kernel 20's count of a split walk's parts: raised by one with release (a reduction: several parts add to it). */
__device__ __forceinline__ void red_release_gpu_add(unsigned *p, unsigned v)
{
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

/* The softmax recomputed and its gradient on four elements of a key-major
 * tile (kernels 2-4's mma.sync, kernels 5-20's wgmma): s[e], dp[e] of keys key0 + 8 (e / 2)
 * and queries qry + e % 2, whose L log2 e and Delta are lse, dl (.x: query
 * qry, .y: qry + 1). Returns p^T and ds^T packed as the two A-fragment
 * registers of those keys: pa[0], ds[0] key key0, pa[1], ds[1] key key0 + 8.
 * Masks (need_mask: this warp's, or warpgroup's, keys can be hidden here): keys past N, and
 * causal, keys after the query, absolute indices (the forward's mask). */
template <typename T>
__device__ __forceinline__ void bwd_p_ds4(const float *s, const float *dp, float2 lse, float2 dl, float scale_log2,
                                          bool need_mask, long key0, long qry, long N, int causal, uint32_t *pa,
                                          uint32_t *dsa)
{
    float p[4], ds[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        /* p = e^(s / sqrt(D) - L) = 2^(s scale_log2 - L log2 e): one FFMA, one ex2 (forward kernel 9's fold) */
        p[e] = ex2(fmaf(s[e], scale_log2, -(e % 2 ? lse.y : lse.x)));
        if (need_mask) {
            const long key = key0 + 8 * (e / 2), q = qry + e % 2;
            if (key >= N || (causal && key > q)) p[e] = 0.0f;
        }
        ds[e] = p[e] * (dp[e] - (e % 2 ? dl.y : dl.x));          // ds = p o (dp - Delta_i)
    }
    pa[0] = pack2<T>(p[0], p[1]), pa[1] = pack2<T>(p[2], p[3]);
    dsa[0] = pack2<T>(ds[0], ds[1]), dsa[1] = pack2<T>(ds[2], ds[3]);
}

/* The same in two halves, for backward kernel 8, which computes p^T while dp^T
 * is still on the tensor cores: bwd_p4 turns s into p in place (fp32, kept for
 * ds^T), bwd_pack4 packs four floats into two A-fragment registers, bwd_ds4
 * computes and packs ds^T once dp^T is in. The same operations on the same
 * values as bwd_p_ds4 (kernel 8's p^T and ds^T are kernel 5's bit for bit);
 * written apart rather than bwd_p_ds4 made of them, which changed the machine
 * code of kernels 5 and 6 (their measured lines). */
__device__ __forceinline__ void bwd_p4(float *s, float2 lse, float scale_log2, bool need_mask, long key0, long qry,
                                       long N, int causal)
{
#pragma unroll
    for (int e = 0; e < 4; e++) {
        s[e] = ex2(fmaf(s[e], scale_log2, -(e % 2 ? lse.y : lse.x)));
        if (need_mask) {
            const long key = key0 + 8 * (e / 2), q = qry + e % 2;
            if (key >= N || (causal && key > q)) s[e] = 0.0f;
        }
    }
}

template <typename T> __device__ __forceinline__ void bwd_pack4(const float *x, uint32_t *a)
{
    a[0] = pack2<T>(x[0], x[1]), a[1] = pack2<T>(x[2], x[3]);
}

template <typename T>
__device__ __forceinline__ void bwd_ds4(const float *p, const float *dp, float2 dl, uint32_t *dsa)
{
    float ds[4];
#pragma unroll
    for (int e = 0; e < 4; e++) ds[e] = p[e] * (dp[e] - (e % 2 ? dl.y : dl.x));
    bwd_pack4<T>(ds, dsa);
}

#endif
