/*
 * Backward kernel 14: backward kernel 13 with dQ's part stored in half the passes through shared memory's banks.
 *
 * Extends backward kernel 13 (bwd13_dkdv_writer.cu). The idea: a swizzle made for the store that uses it. Each row
 * tile, every consumer thread stores its 32 floats of dQ's part as 16 float2 (bwd_put_dq, kernel 10). Shared memory
 * serves an 8-byte store a half-warp at a time: 16 lanes, 128 bytes, one pass if the 16 land on the 16 different
 * 8-byte bank pairs. Lane 4 g + t stores rows 16 wiw + g and + 8, columns 8 n + 2 t and + 1: in a 256-byte row
 * that is bank pair 4 n + t, the same 4 pairs in every row, so the 4 rows of a half-warp (g = 0..3, or 4..7) must be
 * told apart by the swizzle alone. Kernel 10's swizzle moves 16-byte chunk c = 2 n + t / 2 of row r to c ^ (r % 8):
 * the low bit of g lands on the bit t / 2 already varies, so the 8 combinations of g and t / 2 reach only 4 chunk
 * positions: 8 pairs, each twice, two passes a half-warp (Nsight Compute, kernel 12 at D = 128: 4 wavefronts a store
 * where 2 would do, at N = 512; at N = 4096, 21.7% of its shared-store wavefronts were bank conflicts). Here chunk c
 * goes to c ^ 2 (r % 4): t / 2's bit is left alone and n is moved by g % 4, so the 8 combinations reach 8 positions:
 * 16 pairs, one pass. The global accumulator takes the same layout (the copy engine copies the buffer as it is) and
 * the conversion reads it back so (bwd_dq_tiled_off<DQ_SWZ_HALF>, bwd.cuh).
 * Why: in kernel 12's row tile, the consumers' fence after these stores (fence.proxy.async waits for them) held 1 536
 * warp samples and the arrival after it 546, of about 21 000 in the row tiles' code (Nsight Compute, D = 128, N = 512,
 * H200): the stores take the shared-memory pipe the tensor cores read their operands through.
 * What it costs: nothing; the same stores, another address per store (the XOR's operand). dK and dV are kernel 5's
 * bit for bit; dQ is the same sums in the same order (--check).
 * Measured: H200, fp16, over kernel 13 in the same run, two runs in two calls: +1.4% to +4.5% at D = 64 at every N
 * from 512 to 16384, causal and not, where the best backward is now 108-118% of cuDNN's; at D = 128 within the spread
 * (-0.6% to +1.4%; one run's -3.3% at N = 16384 was -0.6% in the other). The runs: RESULTS.md#bwd-14.
 */
#ifndef RUNG
#define RUNG 14         // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd13_dkdv_writer.cu" // the rung this one extends (.extends = 13): its body and its policy

// --- the idea ----------------------------------------------------------------------

namespace {   // as kernel 13's policy (kernel 11's counters)
struct B14Policy : B13Policy {
    /* The part into the buffer, chunk c of row r at c ^ 2 (r % 4). */
    template <class A> static __device__ __forceinline__ void put_dq(const A &a, const BwdWgThread &w, const float *dq)
    {
        (void)a;
        bwd_put_dq<DQ_SWZ_HALF>(w.dq_part, dq, w.wg, w.wiw, w.g, w.t);
    }
    /* The accumulator read back in the same layout. */
    static int convert_dq(const float *dq_acc, void *dq, long BH, long N, long Npad, long D, float scale, int dtype,
                          cudaStream_t s)
    {
        return bwd_convert_dq_tiled(dq_acc, dq, BH, N, Npad, D, scale, dtype, s, DQ_SWZ_HALF);
    }
};
} // namespace

// --- the launcher -------------------------------------------------------------------

#if RUNG == 14
static int b14_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                      void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                      void *stream)
{
    return wg_launch<B14Policy>(14, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b14_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B14Policy>(D, buf, n);
}

static const BackwardKernel bwd14 = {
    .id = 14, .extends = 13, .name = "dQ banks",
    .idea = "kernel 13 with dQ's part swizzled for its 8-byte stores: one pass through the banks a half-warp",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B14Policy::workspace, .launch = b14_launch, .describe = b14_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5, .persistent = 1,
};
BWD_REGISTER(bwd14);
#endif
