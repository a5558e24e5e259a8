/*
 * tc.cuh: the tensor-core primitives of kernels 3 to 9, each a thin wrapper
 * over one PTX instruction, with the fragment layout it implies written down
 * once here (PTX ISA, "Matrix Fragments for mma.m16n8k16").
 *
 * In a warp, lane = 4 g + t (g = lane / 4 is the "group", t = lane % 4).
 *   A, 16 x 16 (row-major), 4 registers of 2 halves:
 *       a0 = A[g][2t, 2t+1]     a1 = A[g+8][2t, 2t+1]
 *       a2 = A[g][2t+8, +9]     a3 = A[g+8][2t+8, +9]
 *   B, 16 x 8 (k x n, "col": n-major), 2 registers:
 *       b0 = B[2t, 2t+1][g]     b1 = B[2t+8, 2t+9][g]
 *   C, D: 16 x 8 fp32, 4 registers:
 *       c0, c1 = C[g][2t, 2t+1]   c2, c3 = C[g+8][2t, 2t+1]
 * The C layout of S = Q K^T is, pair by pair, the A layout that P needs for
 * O = P V: that is why P never leaves registers (see pack_p below).
 */
#ifndef TC_CUH
#define TC_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

/* D (fp32) += A (16x16) * B (16x8), f16 or bf16 inputs, fp32 accumulate.
 *
 * Turing (sm_75: the T4, RTX 20) has the fp16 tensor cores but only the m16n8k8 shape: the same product is
 * two of them, k = 0..7 then k = 8..15. The fragment layout above splits the same way (a0, a1 and b0 hold
 * columns / rows 2t, 2t+1 of the first half of k; a2, a3 and b1 those of the second), so the registers are
 * handed over as they are: no shuffle, no reload, twice the instructions for the same work. Turing has no
 * bf16 tensor cores at all: that instance is compiled out there, and the launchers never reach it (the
 * dtype is refused first: common/gpu.h, gpu_dtype_unavailable). */
template <typename T> __device__ __forceinline__ void mma16816(float *d, const uint32_t *a, const uint32_t *b);
template <> __device__ __forceinline__ void mma16816<__half>(float *d, const uint32_t *a, const uint32_t *b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[2]), "r"(a[3]), "r"(b[1]));
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
template <> __device__ __forceinline__ void mma16816<__nv_bfloat16>(float *d, const uint32_t *a, const uint32_t *b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    (void)d, (void)a, (void)b;
    __trap(); /* unreachable: bf16 is refused on compute capability < 8.0 before any launch */
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* Four 8x8 matrices of 16-bit elements from shared memory: lane i gives the
 * address of row i % 8 of matrix i / 8; register j receives matrix j's
 * fragment (lane holds row lane / 4, elements 2 (lane % 4), +1). .trans
 * delivers the transpose (lane holds column lane / 4, rows 2 (lane % 4), +1). */
__device__ __forceinline__ void ldmatrix_x4(uint32_t *r, const void *smem_row)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t *r, const void *smem_row)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

/* 16 bytes global -> shared without passing through registers (Ampere's
 * cp.async); src_bytes = 0 fills the 16 bytes with zeros (rows past N).
 *
 * Turing has no cp.async: there the copy is a plain 16-byte load into registers and a store to shared
 * memory, done at once, and commit/wait do nothing. That is one of the schedules cp.async itself allows
 * (the copy may land any time between issue and wait), so every kernel stays correct; what is lost is the
 * overlap, kernel 4's idea: on Turing the next tile's load no longer hides under this tile's math. */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int src_bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    uint4 x = make_uint4(0, 0, 0, 0);
    if (src_bytes == 16) x = *reinterpret_cast<const uint4 *>(gmem);
    else for (int i = 0; i < src_bytes; i++) reinterpret_cast<unsigned char *>(&x)[i] = reinterpret_cast<const unsigned char *>(gmem)[i];
    *reinterpret_cast<uint4 *>(smem) = x;
#else
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(gmem), "r"(src_bytes));
#endif
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
__device__ __forceinline__ void cp_async_commit() {}
template <int N> __device__ __forceinline__ void cp_async_wait() {}
#else
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
#endif

/* ROWS x D tile of a row-major [N, D] matrix into shared memory [ROWS][LD] by
 * cp.async, THREADS threads each taking every THREADS-th 16-byte chunk (8
 * halves); rows past N are zero-filled by the copy (src_bytes = 0). Kernels
 * 4-9 load Q, K and V tiles with it; no wait here (cp_async_commit/wait). */
template <int D, int ROWS, int LD, int THREADS, typename T>
__device__ __forceinline__ void load_tile_async(T *dst, const T *src, long row0, long N)
{
    constexpr int CHUNKS = ROWS * D / 8;
    for (int c = threadIdx.x; c < CHUNKS; c += THREADS) {
        const int r = c / (D / 8), col = (c % (D / 8)) * 8;
        const bool in = row0 + r < N;
        cp_async16(dst + r * LD + col, src + (in ? row0 + r : 0) * D + col, in ? 16 : 0);
    }
}

/* Two fp32 -> one register of two 16-bit values (lower half = first). */
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi)
{
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

/* e^x computed as 2^(x log2 e): the softmax scale 1/sqrt(D) and log2 e are
 * folded into one multiplier, so each probability is one FFMA + one MUFU.EX2. */
__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

#endif
