/*
 * Backward kernel 15: backward kernel 14 with each k step's wgmma descriptor made by one add.
 *
 * Extends backward kernel 14 (bwd14_dq_banks.cu). The idea: forward kernel 22's, in the backward. Every wgmma reads
 * its shared-memory operands through 64-bit descriptors; kernels 5-14 build each afresh from the step's address with
 * make_desc (mask the address, shift, or the flags into the 64-bit word, move the high word back). Here a tile's
 * descriptor is made once per product and each k step's is that one plus the step's offset in 16-byte units
 * (desc_add): the five products of a row tile (s^T, dp^T, dV, dK and dQ's part) take one add a step.
 * Why: Nsight Compute beside cuDNN's backward at D = 128, N = 4096 (H200): kernel 14 executes 10% more instructions
 * at a similar issue rate; of a consumer warp's 777 instructions a row tile (kernel 12, N = 512), 222 are
 * uniform-datapath ULOP3, R2UR, UMOV, UIADD3 and USHF, most of them make_desc's (backward/RESULTS.md#bwd-14).
 * What it costs: nothing; the address field is 14 bits and shared memory ends below 256 KB, so the add never carries
 * into the field above it (wgmma.cuh, desc_add). The products are the same: dK and dV are kernel 5's bit for bit.
 * Measured: H200, fp16, over kernel 14 in the same run, two runs in one call: at D = 64 +1.5% to +3.2% at every N,
 * causal and not; at D = 128 +0.6% to +2.4% from N = 1024 (causal too), -0.2% to +0.6% at 512, but -2.0% / -2.7%
 * at N = 16384 not causal (where one profiled launch of it is 0.9% faster than kernel 14's). The backward at D = 128
 * is then at or past cuDNN's but at N = 4096 (a tie, 99.8-100.0%) and 8192 (99.0-99.6%), both not causal. Nsight
 * Compute at N = 4096: 683 M instructions against kernel 14's 822 M and cuDNN's 747 M, in 4.15 M cycles against
 * 4.21 M and 4.07 M: what is left is not instructions. The runs and profiles: RESULTS.md#bwd-15.
 */
#ifndef RUNG
#define RUNG 15         // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd14_dq_banks.cu" // the rung this one extends (.extends = 14): its body and its policy

// --- the idea ----------------------------------------------------------------------

namespace {   // as kernel 14's policy (kernel 11's counters)
struct B15Policy : B14Policy {
    static constexpr bool DESC_ADD = true;        /* bwd_desc (bwd05_wgmma.cu): the tile's descriptor plus the offset */
};
} // namespace

// --- the launcher -------------------------------------------------------------------

#if RUNG == 15
static int b15_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                      void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                      void *stream)
{
    return wg_launch<B15Policy>(15, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b15_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B15Policy>(D, buf, n);
}

static const BackwardKernel bwd15 = {
    .id = 15, .extends = 14, .name = "descriptor add",
    .idea = "kernel 14 with each k step's wgmma descriptor made by one add to its tile's",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B15Policy::workspace, .launch = b15_launch, .describe = b15_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5, .persistent = 1,
};
BWD_REGISTER(bwd15);
#endif
