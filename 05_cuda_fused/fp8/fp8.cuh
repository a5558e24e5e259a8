/*
 * fp8.cuh: what the FP8 kernels (15 to 48) share and is not their algorithm, as launch_tc.cuh is for the
 * forward's kernels 3-12: P's four e4m3 a register (pack4_e4m3), O's two outputs a word in fp16 or bf16 (pack_o2),
 * the row sums the softmax keeps (Fp8QuadSums), and the launch (fp8_launch_d: the tensor maps of K and V^T, kept
 * while the tensors are the same; the shared-memory opt-in; the grid of B*H*row tiles; log2(e)/sqrt(D), which each
 * kernel multiplies by its tiles' scales).
 */
#ifndef FP8_CUH
#define FP8_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>

#include "fp8.h"
#include "gpu.cuh"
#include "../kernels.h"
#include "../primitives/tma_map.cuh"

/* Four e4m3 from four floats, the first in the low byte (two cvt.rn.satfinite.e4m3x2.f32). */
__device__ __forceinline__ uint32_t pack4_e4m3(float a, float b, float c, float d)
{
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
    return lo | hi << 16;
}

/* Two outputs as one 32-bit word: an fp16 pair, or a bf16 pair when bf16 (Fp8Args.out_dtype). */
__device__ __forceinline__ uint32_t pack_o2(float a, float b, int bf16)
{
    if (bf16) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
        return *reinterpret_cast<const uint32_t *>(&v);
    }
    const __half2 v = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t *>(&v);
}

/* The row sums l of rows g and g + 8 kept by the softmax (kernels 15 and 16, each policy's RowSums builds on it):
 * each thread holds its 2 columns of every 8, a quarter of the row, in l, and the tile's sum of 2^8 p in ls until
 * fold; the quad's four quarters are added at the end (total). l is not rescaled with O (rescale) and nothing runs
 * beside P V (pv): kernel 24's RowSums, whose l sits beside O on the tensor cores, replaces all of it. */
struct Fp8QuadSums {
    float l[2] = {0.0f, 0.0f};                    // this thread's part of l, rows g and g + 8
    float ls[2];                                  // the tile's sum of 2^8 p
    __device__ __forceinline__ void reset() { l[0] = 0.0f, l[1] = 0.0f; }  // a persistent block's next item
    __device__ __forceinline__ void fold(const float alpha[2])  // l_new = alpha l + sum 2^8 p
    {
#pragma unroll
        for (int h = 0; h < 2; h++) l[h] = alpha[h] * l[h] + ls[h];
    }
    __device__ __forceinline__ void rescale(const float alpha[2]) { (void)alpha; }  // with O's: nothing here
    __device__ __forceinline__ void pv(const uint32_t a[4], uint32_t smem) { (void)a, (void)smem; }  // beside P V
    __device__ __forceinline__ float total(int h) const   // the whole row's l
    {
        float lr = l[h];
#pragma unroll
        for (int off = 1; off <= 2; off *= 2) lr += __shfl_xor_sync(0xffffffffu, lr, off);
        return lr;
    }
};

/* Every FP8 kernel's signature. */
using Fp8KernelFn = void (*)(const uint8_t *__restrict__, __half *__restrict__, const float *__restrict__,
                             const float *__restrict__, const float *__restrict__, long, long, long, long, int, int, float,
                             const CUtensorMap, const CUtensorMap, long, const CUtensorMap);

/* Launch kernel fn of traits C (BR, BC, VBOX, THREADS, bytes, PERSISTENT, O_BY_TMA) at head dim D, kernel number id:
 * a block per work item (a head's row tile), or, PERSISTENT, one block per SM looping over items (the grid's stride).
 * K is [BH][N][D] bytes, 128 bytes a row at D = 128 (the 128-byte swizzle) and 64 at D = 64 (the 64-byte one), boxes
 * of BC rows; V^T is [BH][D][Npad], boxes of VBOX keys by D rows, 128-byte swizzled (VBOX = 128) or 64-byte (VBOX =
 * 64); O_BY_TMA, O (16-bit [BH][N][D]) as a map too, for kernel 48's stores. */
template <class C, int D>
static int fp8_launch_d(Fp8KernelFn fn, int id, const Fp8Args *a, cudaStream_t s)
{
    static CUtensorMap mk, mv;                    // the last pair made, kept: the bench launches the same tensors
    static const void *ck = nullptr, *cv = nullptr;
    static long cBH = -1, cN = -1;
    char who[16];
    snprintf(who, sizeof who, "kernel %d", id);
    const long BH = a->B * a->H;
    if (a->k != ck || a->vt != cv || BH != cBH || a->N != cN) {
        if (tma_map_bytes(&mk, a->k, BH, a->N, D, D, C::BC, D == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B, who) ||
            tma_map_bytes(&mv, a->vt, BH, D, a->Npad, C::VBOX, D, C::VBOX == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B, who)) {
            ck = cv = nullptr;
            return -1;
        }
        ck = a->k, cv = a->vt, cBH = BH, cN = a->N;
    }
    static int opted = 0;
    if (!opted) {
        if (smem_opt_in(fn, C::bytes, "kernel", id, D)) return -1;
        opted = 1;
    }
    static int sms = 0;                           // the SM count, asked once (a host call in the timer's window costs)
    if (C::PERSISTENT && sms == 0) {
        int dev = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    }
    static KvMaps omaps;                          // C::O_BY_TMA: O's map, boxes of 16 rows (the pair both O's, as in
    static const CUtensorMap none = {};           // forward kernel 18's launcher); the other kernels get zeros, unread
    if (C::O_BY_TMA && omaps.get(a->o, a->o, BH, a->N, D, 16, a->out_dtype, who)) return -1;
    const long row_tiles = (a->N + C::BR - 1) / C::BR, items = BH * row_tiles;   // work items: (head, row tile)
    const long grid = C::PERSISTENT && items > sms ? sms : items;  // persistent: one block per SM, each many items
    const float scale_log2 = softmax_scale_log2(D);   /* log2(e) / sqrt(D), folded with the scales in the kernel */
    fn<<<(unsigned)grid, C::THREADS, C::bytes, s>>>(a->q, (__half *)a->o, a->sq, a->sk, a->sv, a->N, a->nqb, a->nkb,
                                                    row_tiles, a->causal, a->out_dtype == DT_BF16, scale_log2, mk, mv, items,
                                                    C::O_BY_TMA ? omaps.k : none);
    CUDA_CHECK_LAST();
    if constexpr (C::O_BY_TMA) {                  // initcheck: O is written, by the copy engine
        void *const ranges[1] = {a->o};
        tma_stores_written(ranges, (size_t)(BH * a->N * D * 2), s);
    }
    return 0;
}

#endif
