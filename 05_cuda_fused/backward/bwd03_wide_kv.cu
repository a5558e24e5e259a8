/*
 * Backward kernel 3: backward kernel 2 with a K/V tile of 128 keys (8 warps).
 *
 * Extends backward kernel 2 (bwd02_mma.cu). The idea, the forward's kernel 8 turned around: each block owns
 * BC = 128 keys instead of 64, one warp per 16 keys as before. What is per (row tile, K/V block) and not per key is
 * then spread over twice the keys:
 *   - Q_i, dO_i, L_i and Delta_i are loaded from memory once per 128 keys, not once per 64: half the loads of the
 *     row tiles (B H N^2 D / BC elements each of Q and dO over the whole backward);
 *   - each block's share of dQ_i = ds_tile K_j sums 128 keys before it is added with atomics: half the atomics
 *     (B H N^2 D / BC in all), and half of them contend for the same dQ_i rows;
 *   - the two barriers per row tile are shared by 8 warps instead of 4.
 * The dQ product is split two ways along the head dim (each warp 16 queries x D/2 columns: the body's CW, DC).
 * FlashAttention-2's own backward takes 128 keys per block at both D. Everything else is kernel 2's body.
 * Why: where the row-tile loads and atomics are a large share of the time, D = 128 (twice the atomics per key, and
 * one block per SM either way), halving them pays; at D = 64 the time is elsewhere (kernel 4).
 * What it costs: 8 warps in one block wait for each other at those barriers; shared memory grows to 93.2 KB at
 * D = 64, 158.7 KB at D = 128 (one block of 8 warps per SM at D = 128, as kernel 2's two blocks of 4). Registers
 * (ptxas, sm_90a): 239 at D = 64, 255 at D = 128 with 12 bytes of spill.
 * Measured: H100, fp16, N = 4096: 205.9 TFLOP/s at D = 64 and 214.2 at D = 128, +1% and +9% over kernel 2; causal
 * 189.0 and 201.4 against kernel 2's 130.5 and 188.6; the runs: RESULTS.md#bwd-3.
 */
#ifndef RUNG
#define RUNG 3          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd02_mma.cu" // the rung this one extends (.extends = 2): its body and its policy

// --- the idea ----------------------------------------------------------------------

struct B3Policy : B2Policy {
    static constexpr int WARPS = 8;       /* 16 keys a warp: BC = 128 */
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 3
static int b3_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return mma_launch<B3Policy>(3, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b3_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    mma_describe<B3Policy>(D, buf, n, "kernel 2 with 128 keys per block");
}

static const BackwardKernel bwd3 = {
    .id = 3, .extends = 2, .name = "wide K/V tile",
    .idea = "kernel 2 with 128 keys per block: half the row-tile loads and dQ atomics",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_mma_supports, .workspace = bwd_mma_workspace,
    .launch = b3_launch, .describe = b3_describe,
};
BWD_REGISTER(bwd3);
#endif
