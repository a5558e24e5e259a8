/*
 * Kernel 19: kernel 18 with O leaving the registers in whole 16-byte pieces.
 *
 * Extends kernel 18 (kernel18_persistent.cu). The idea: the store of O, not its values. In the accumulator's layout
 * lane t of each quad holds columns 2t and 2t+1 of every block of 8 columns of its two rows, so kernel 18 (and 13, 14)
 * store O 4 bytes a lane: D / 4 store instructions per thread and row tile, each writing 16 bytes into each of 8 rows,
 * half a 32-byte sector each. Here the quad first exchanges its words (two rounds of __shfl_xor_sync, 4 shuffles per
 * 4 blocks) so that lane t holds all of block n0 + t, and stores it with one 16-byte store: D / 16 store
 * instructions, each writing 64 contiguous bytes (two whole sectors) into each of 8 rows.
 *
 * Why: kernel 18 with its stores of O skipped (a wrong O, for timing only) ran +12% at D = 64 and +23% at D = 128 at
 * N = 512 (causal +14% and +34%), +5% and +7% at N = 2048, and +1% and +4% at N = 4096: at short N a row tile visits
 * few K/V tiles, and O's store is a large part of its time.
 *
 * What it costs: 4 shuffles and 8 selects per 16 bytes of O in the machine code (nvdisasm: SHFL 52 -> 148, SEL 188 ->
 * 380, STG 104 -> 32 over the four instances), nothing in shared memory. O and L are bit for bit kernel 14's, as
 * kernel 18's are (--check compares them).
 *
 * Measured: H100, fp16, over kernel 18: +14.0% at D = 128, N = 512, down to +1.7% at N = 16384 (causal +16.0% at
 * N = 512); at D = 64 +5.5% at N = 512 and 0.6-2.1% slower from N = 4096; the runs and cuDNN beside them:
 * RESULTS.md#kernel-19.
 */
#ifndef RUNG
#define RUNG 19 // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel18_persistent.cu" // the rung this one extends (.extends = 18): its body and its policy

// --- the idea --------------------------------------------------------------------------------------------------

template <int D, typename T> struct WideO : Persistent<D, T> {
    /* This lane's h-th row of O (inv = 1 / l), by the whole quad. Lane t of a quad holds 4 bytes (columns 2t,
     * 2t+1) of each 16-byte column block n of its row; a 4 x 4 transpose inside the quad, two rounds of shuffles on 4
     * blocks n0..n0+3, leaves lane t all 16 bytes of block n0 + t: one 16-byte store where there were four of 4
     * bytes. Round 1 (lanes t, t^1): the pair's words of blocks n0 + (t & 1) and n0 + 2 + (t & 1), 8 bytes each,
     * columns 4 (t >> 1)..; round 2 (lanes t, t^2): the other 8 bytes of one of them. The shuffles run in every lane
     * (rows past N too): __shfl_xor_sync names the whole warp. */
    template <class B> static __device__ __forceinline__ void quad_store(B &b, int h, float inv, T *Oh, long row)
    {
        const bool odd = b.t & 1, hi = b.t >> 1;
#pragma unroll
        for (int n0 = 0; n0 < D / 8; n0 += 4) {
            uint32_t w[4];
#pragma unroll
            for (int c = 0; c < 4; c++) w[c] = pack2<T>(b.o[4 * (n0 + c) + 2 * h] * inv, b.o[4 * (n0 + c) + 2 * h + 1] * inv);
            const uint32_t r0 = __shfl_xor_sync(0xffffffffu, odd ? w[0] : w[1], 1);
            const uint32_t r1 = __shfl_xor_sync(0xffffffffu, odd ? w[2] : w[3], 1);
            const uint32_t a0 = odd ? r0 : w[0], a1 = odd ? w[1] : r0;   // block n0 + odd, columns 4 hi..4 hi + 3
            const uint32_t c0 = odd ? r1 : w[2], c1 = odd ? w[3] : r1;   // block n0 + 2 + odd, the same columns
            const uint32_t s0 = __shfl_xor_sync(0xffffffffu, hi ? a0 : c0, 2);
            const uint32_t s1 = __shfl_xor_sync(0xffffffffu, hi ? a1 : c1, 2);
            const uint4 v = hi ? make_uint4(s0, s1, c0, c1) : make_uint4(a0, a1, s0, s1);
            if (row < b.N) *reinterpret_cast<uint4 *>(Oh + row * D + (n0 + b.t) * 8) = v;
        }
    }
    template <class B> static __device__ __forceinline__ void lane_store(B &, int, float, T *, long) {} // nothing left

    static void describe(char *buf, size_t n);
};

// --- the launcher ------------------------------------------------------------------------------------------------

template <int D, typename T> void WideO<D, T>::describe(char *buf, size_t n)
{
    Persistent<D, T>::describe(buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, "; O stored 16 bytes a lane");
}

#if RUNG == 19
static int k19_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch<WideO>(19, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k19_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k19_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k19_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe<WideO>(D, buf, n);
}

static const FusedKernel kernel19 = {
    .id = 19, .extends = 18, .name = "wide O stores",
    .idea = "kernel 18 with O stored 16 bytes a lane (a transpose inside each quad)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k19_launch,
    .describe = k19_describe, .unavailable = wgmma_unavailable, .launch_l = k19_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel19);
#endif
