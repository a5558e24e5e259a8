/*
 * wgmma.cuh: Hopper's warpgroup matrix product (sm_90a), the few PTX
 * instructions kernel 10 uses, each behind a thin wrapper, and those kernels
 * 11-16 and backward kernels 5-6 add (TMA, mbarriers, setmaxnreg, the bulk
 * reduce-add, wgmma with both operands in shared memory, wgmma on e4m3).
 *
 * A warpgroup is 4 consecutive warps (128 threads, the first warp index a
 * multiple of 4). wgmma.mma_async.m64nNk16 computes, for the whole warpgroup,
 *     D[64 x N] (fp32, registers) (+)= A[64 x 16] (f16/bf16) * B[16 x N]
 * with A from registers (below) and B read by the tensor cores straight from
 * shared memory, described by a 64-bit "matrix descriptor" (make_desc).
 * It is asynchronous: issue several, commit them as a group, wait for the
 * group; the accumulator registers must not be touched in between.
 *
 * Register layouts (PTX ISA, "Register Fragments" for wgmma .m64nNk16): warp w
 * of the warpgroup owns rows 16 w .. 16 w + 15, and inside a warp the layout
 * is mma.sync's (tc.cuh) repeated along N, with lane = 4 g + t:
 *   A (16 rows x 16 of k per warp), 4 registers:  a0 = A[g][2t,+1]  a1 = A[g+8][2t,+1]
 *                                                 a2 = A[g][2t+8,+9] a3 = A[g+8][2t+8,+9]
 *   D, N/2 fp32 registers: d[4i], d[4i+1] = D[g][8i + 2t, +1], d[4i+2], d[4i+3] = D[g+8][8i + 2t, +1]
 * So S = Q K^T comes out in exactly the layout kernels 3-9 have, and P packs
 * into A fragments for O = P V the same way.
 *
 * The operand lists are long (N/2 accumulators): the macros below write them
 * once for each of the two sizes used, N = 64 and N = 128.
 */
#ifndef WGMMA_CUH
#define WGMMA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "common.h"
#include "tc.cuh"   // pack2 (stmatrix_rows)

/* The shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
 * bits 0-13 start address >> 4, 16-29 leading-dimension byte offset >> 4,
 * 32-45 stride-dimension byte offset >> 4, 62-63 swizzle mode (1 = 128-byte
 * swizzle). Kernel 10 keeps every K and V tile as rows of 64 elements (128
 * bytes) in the 128-byte-swizzled layout: row r's 16-byte chunk c sits at
 * chunk c ^ (r % 8), so the 8 rows of a 1024-byte atom spread each column
 * over all 32 banks. With that layout:
 *   K-major (B = K_j for S = Q K^T, k = head dim along the row): SBO = 1024
 *     (8 rows to the next 8), LBO unused;
 *   MN-major (B = V_j for O = P V, k = keys down the rows, n = head dim along
 *     the row; imm-trans-b = 1): SBO = 1024 (8 keys to the next 8), LBO = the
 *     distance to the next 64 columns of the head dim. */
__device__ __forceinline__ uint64_t make_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes)
{
    return (uint64_t)((smem_addr & 0x3FFFF) >> 4) | (uint64_t)((lbo_bytes >> 4) & 0x3FFF) << 16 |
           (uint64_t)((sbo_bytes >> 4) & 0x3FFF) << 32 | (uint64_t)1 << 62;
}

/* Forward kernel 22: the descriptor of the same tile `bytes` further on, by one add. The start address is in the low
 * bits, in 16-byte units (bits 0-13), and shared memory ends below 256 KB, so the sum never carries into the leading
 * byte offset above it: a 64-bit add of a constant, one instruction of the uniform datapath (UIADD3.64). make_desc
 * instead masks, shifts and ors the whole word again and moves its high half back, five instructions a wgmma, and
 * every instruction, uniform or not, takes an issue slot of the warp's scheduler. */
__device__ __forceinline__ uint64_t desc_add(uint64_t desc, uint32_t bytes)
{
    return desc + (bytes >> 4);
}

/* NULL when this binary's sm_90a code runs on this GPU, else one line why not
 * (defined in kernel10_wgmma.cu, which reports itself unavailable with it). */
const char *wgmma_unavailable(void);
/* 0 when it runs, else -1 after that line (the launchers' first test). */
static inline int wgmma_refused(void)
{
    const char *why = wgmma_unavailable();
    if (why) fprintf(stderr, "%s: %s\n", g_prog, why);
    return why ? -1 : 0;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
/* Shared memory written by the threads (cp.async, st.shared) and read next by the
 * tensor cores (the "async proxy") needs this fence before the barrier. */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* The 32 accumulators of an n = 64 product: register list for the asm text, and operands (C: the constraint). */
#define WGMMA_D64 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WGMMA_OPS64(C) \
    C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]), \
    C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]), \
    C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]), \
    C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31])
/* The 64 accumulators of an n = 128 product: register list for the asm text, and operands (C: the constraint). */
#define WGMMA_D128 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define WGMMA_OPS128(C) \
    C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]), \
    C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]), \
    C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]), \
    C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31]), \
    C(d[32]), C(d[33]), C(d[34]), C(d[35]), C(d[36]), C(d[37]), C(d[38]), C(d[39]), \
    C(d[40]), C(d[41]), C(d[42]), C(d[43]), C(d[44]), C(d[45]), C(d[46]), C(d[47]), \
    C(d[48]), C(d[49]), C(d[50]), C(d[51]), C(d[52]), C(d[53]), C(d[54]), C(d[55]), \
    C(d[56]), C(d[57]), C(d[58]), C(d[59]), C(d[60]), C(d[61]), C(d[62]), C(d[63])
#define WGMMA_RW(x) "+f"(x)

/* D[64 x 64] = A[64 x 16] B[16 x 64] + (scale_d ? D : 0); A from registers, B
 * by descriptor; TRANS_B = 0: B is K-major in shared memory, 1: MN-major. */
template <typename T, int TRANS_B>
__device__ __forceinline__ void wgmma_m64n64k16(float *d, const uint32_t *a, uint64_t desc_b, int scale_d)
{
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " WGMMA_D64 ", "
                     "{%32, %33, %34, %35}, %36, p, 1, 1, %37;\n}\n"
                     : WGMMA_OPS64(WGMMA_RW)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B), "r"(scale_d));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WGMMA_D64 ", "
                     "{%32, %33, %34, %35}, %36, p, 1, 1, %37;\n}\n"
                     : WGMMA_OPS64(WGMMA_RW)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B), "r"(scale_d));
}

/* D[64 x 128] = A[64 x 16] B[16 x 128] + (scale_d ? D : 0); A from registers, B
 * by descriptor; TRANS_B = 0: B is K-major in shared memory, 1: MN-major. */
template <typename T, int TRANS_B>
__device__ __forceinline__ void wgmma_m64n128k16(float *d, const uint32_t *a, uint64_t desc_b, int scale_d)
{
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %70, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " WGMMA_D128 ", "
                     "{%64, %65, %66, %67}, %68, p, 1, 1, %69;\n}\n"
                     : WGMMA_OPS128(WGMMA_RW)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B), "r"(scale_d));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %70, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WGMMA_D128 ", "
                     "{%64, %65, %66, %67}, %68, p, 1, 1, %69;\n}\n"
                     : WGMMA_OPS128(WGMMA_RW)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B), "r"(scale_d));
}

/* D[64 x N] = A[64 x 16] B[16 x N] + (scale_d ? D : 0) with BOTH operands read
 * from shared memory by descriptor (backward kernel 5, whose A operands K_j,
 * V_j and dS^T are tiles in shared memory, not fragments a thread holds);
 * TRANS_A, TRANS_B = 0: K-major, 1: MN-major (16-bit types only). N = 64, 128. */
template <typename T, int N, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void wgmma_ss(float *d, uint64_t desc_a, uint64_t desc_b, int scale_d)
{
    static_assert(N == 64 || N == 128, "wgmma_ss: N = 64 or 128");
    constexpr bool H = std::is_same<T, __half>::value;
    if constexpr (N == 64 && H)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %36, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " WGMMA_D64 ", %32, %33, p, 1, 1, %34, %35;\n}\n"
                     : WGMMA_OPS64(WGMMA_RW)
                     : "l"(desc_a), "l"(desc_b), "n"(TRANS_A), "n"(TRANS_B), "r"(scale_d));
    else if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %36, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WGMMA_D64 ", %32, %33, p, 1, 1, %34, %35;\n}\n"
                     : WGMMA_OPS64(WGMMA_RW)
                     : "l"(desc_a), "l"(desc_b), "n"(TRANS_A), "n"(TRANS_B), "r"(scale_d));
    else if constexpr (H)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %68, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " WGMMA_D128 ", %64, %65, p, 1, 1, %66, %67;\n}\n"
                     : WGMMA_OPS128(WGMMA_RW)
                     : "l"(desc_a), "l"(desc_b), "n"(TRANS_A), "n"(TRANS_B), "r"(scale_d));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %68, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WGMMA_D128 ", %64, %65, p, 1, 1, %66, %67;\n}\n"
                     : WGMMA_OPS128(WGMMA_RW)
                     : "l"(desc_a), "l"(desc_b), "n"(TRANS_A), "n"(TRANS_B), "r"(scale_d));
}

/* FP8 (kernel 15): D[64 x N] (+)= A[64 x 32] B[32 x N], A and B in e4m3, fp32 accumulate, k = 32 per
 * instruction (the same 32 bytes of k as k16 in 16 bits). A from registers, four .b32 of four e4m3 each
 * (PTX ISA, "Register Fragments" for .m64nNk32; element 0 in the low byte), warp w's rows as above:
 *   a0 = A[g][4t .. 4t+3]   a1 = A[g+8][4t .. 4t+3]   a2 = A[g][16+4t .. 16+4t+3]   a3 = A[g+8][16+4t ..]
 * B by descriptor, K-major only: for 8-bit types wgmma has no transposed B, k must run along the rows. */
template <int N>
__device__ __forceinline__ void wgmma_fp8(float *d, const uint32_t *a, uint64_t desc_b, int scale_d)
{
    static_assert(N == 8 || N == 64 || N == 128, "wgmma_fp8: N = 8, 64 or 128");
    if constexpr (N == 8)    // kernel 24's row sums: d0, d1 row g, d2, d3 row g + 8 (columns 2t, 2t + 1), as above
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, "
                     "{%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
    else if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " WGMMA_D64 ", "
                     "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
                     : WGMMA_OPS64(WGMMA_RW)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " WGMMA_D128 ", "
                     "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
                     : WGMMA_OPS128(WGMMA_RW)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

/* The descriptor of a 64-byte-swizzled tile (kernel 15's K at D = 64: rows of 64 one-byte elements): the
 * atom is 8 rows of 64 bytes (512), so SBO = 512; swizzle mode 2 in bits 62-63. */
__device__ __forceinline__ uint64_t make_desc_sw64(uint32_t smem_addr, uint32_t sbo_bytes)
{
    return (uint64_t)((smem_addr & 0x3FFFF) >> 4) | (uint64_t)1 << 16 | (uint64_t)((sbo_bytes >> 4) & 0x3FFF) << 32 |
           (uint64_t)2 << 62;
}

/* The register-A product at either N (kernel 12's two calls, by N). */
template <typename T, int N, int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float *d, const uint32_t *a, uint64_t desc_b, int scale_d)
{
    static_assert(N == 64 || N == 128, "wgmma_rs: N = 64 or 128");
    if constexpr (N == 64) wgmma_m64n64k16<T, TRANS_B>(d, a, desc_b, scale_d);
    else wgmma_m64n128k16<T, TRANS_B>(d, a, desc_b, scale_d);
}

/* --- the copy engine (TMA) and the mbarrier that counts its bytes (kernel 11) ---
 * An mbarrier is a 64-bit counter in shared memory. mbar_expect_tx arrives on
 * it (count 1) and says how many bytes the copies will deliver; each
 * cp.async.bulk.tensor completes its bytes on it; the phase is over when both
 * are in, and waiting threads pass once they see the phase's parity flip. */
__device__ __forceinline__ void mbar_init(uint32_t bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/* Makes initialized mbarriers visible to the copy engine (the async proxy). */
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, int bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, int parity)
{
    asm volatile("{\n.reg .pred done;\n"
                 "WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT_%=;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}
/* One arrival (count 1) on an mbarrier, from this thread (kernel 12: a consumer
 * warp's lane 0 saying "my warp has finished reading this stage"). */
__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* setmaxnreg (sm_90a, kernels 12-14, 16-18): a warpgroup gives registers back to its
 * block's pool (dec) or takes them from it (inc; the pool is what the block got
 * at launch, which is all it can share out), so a block whose warpgroups do
 * different jobs can size each one's register file to its job. R: a multiple
 * of 8 in 24..256; every warp of the warpgroup executes it. */
template <int R> __device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)); }
template <int R> __device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)); }

/* One box of a 3-D tensor map (x innermost) into shared memory at dst, its
 * bytes completing on mbarrier bar. The map says the box shape and the
 * swizzle; rows outside the tensor arrive as zeros. */
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void *tmap, int x, int y, int z, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                 ::"r"(dst), "l"(reinterpret_cast<uint64_t>(tmap)), "r"(x), "r"(y), "r"(z), "r"(bar) : "memory");
}

/* The copy engine adding: global dst[i] += shared src[i] for bytes / 4
 * floats (a multiple of 16 bytes), done by the copy engine, which reads src
 * and adds into L2 (backward kernel 6's dQ). Tracked in this thread's bulk
 * groups: commit, then wait until the engine has read src (before src is
 * written again) or until the sums are done. */
__device__ __forceinline__ void bulk_reduce_add_f32(float *dst, uint32_t src, int bytes)
{
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
                 ::"l"(dst), "r"(src), "r"(bytes) : "memory");
}
/* Four 8 x 8 blocks of 16-bit values from the warp's registers to shared memory (sm_90; backward kernel 13, forward
 * kernel 39): register i of lane 4 g + t holds block i's row g, columns 2 t and 2 t + 1 (a wgmma accumulator's
 * layout, packed); lane l gives the address of row l % 8 of block l / 8. */
__device__ __forceinline__ void stmatrix_x4(uint32_t row_addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(row_addr), "r"(r0), "r"(r1),
                 "r"(r2), "r"(r3)
                 : "memory");
}
/* A warp's 16 rows of a wgmma accumulator x, as 16-bit values, into shared memory for the copy engine: x[4 n], x[4 n + 1]
 * are row g's columns 8 n + 2 t, 8 n + 2 t + 1, x[4 n + 2], x[4 n + 3] row g + 8's (lane 4 g + t); row g is multiplied
 * by mul0, row g + 8 by mul1. The tile is D / 64 boxes of box_rows rows x 64 columns in the 128-byte swizzle (16-byte
 * chunk c of row r at c ^ (r % 8): the 8 rows of a block land in 8 different chunks, so no two lanes share a bank), box
 * b at buf + b box_rows 128, the warp's rows from row0 of each box. D / 16 stmatrix, n / 2 writing column blocks n and
 * n + 1 (lane l gives the address of row l % 8 of block l / 8: rows 0-7, then 8-15, of block n, then of n + 1).
 * Backward kernel 13's dK and dV, forward kernel 39's O. */
template <typename T, int D>
__device__ __forceinline__ void stmatrix_rows(uint32_t buf, int box_rows, int row0, int lane, const float *x, float mul0,
                                              float mul1)
{
    const int blk = lane / 8, row = row0 + (blk % 2) * 8 + lane % 8;
#pragma unroll
    for (int n = 0; n < D / 8; n += 2) {
        const int cb = n + blk / 2;               // this lane's row address: column block cb
        const uint32_t at = buf + (cb / 8) * (box_rows * 128) + row * 128 + (((cb % 8) ^ (row % 8)) * 16);
        stmatrix_x4(at, pack2<T>(x[4 * n] * mul0, x[4 * n + 1] * mul0), pack2<T>(x[4 * n + 2] * mul1, x[4 * n + 3] * mul1),
                    pack2<T>(x[4 * n + 4] * mul0, x[4 * n + 5] * mul0), pack2<T>(x[4 * n + 6] * mul1, x[4 * n + 7] * mul1));
    }
}
/* One box of a 3-D tensor map from shared memory at src to global memory (the copy engine; rows outside the tensor
 * are not written). Tracked in this thread's bulk groups, as bulk_reduce_add_f32. */
__device__ __forceinline__ void tma_store_3d(const void *tmap, uint32_t src, int x, int y, int z)
{
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                     reinterpret_cast<uint64_t>(tmap)),
                 "r"(src), "r"(x), "r"(y), "r"(z)
                 : "memory");
}

__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

#endif
