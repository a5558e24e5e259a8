/*
 * Extends: bwd02_mma.cu; idea: 128 keys per block (8 warps): half the row-tile loads and dQ atomics
 * Code: bwd_mma.cuh with WARPS = 8, ONE_SYNC = false
 *
 * Backward kernel 3: backward kernel 2 with a K/V tile of 128 keys (8 warps).
 *
 * What changes over backward kernel 2 (one idea, the forward's kernel 8 turned
 * around): each block owns BC = 128 keys instead of 64, one warp per 16 keys
 * as before. What is per (row tile, K/V block) and not per key is then spread
 * over twice the keys:
 *   - Q_i, dO_i, L_i and Delta_i are loaded from memory once per 128 keys, not
 *     once per 64: half the loads of the row tiles (B H N^2 D / BC elements
 *     each of Q and dO over the whole backward);
 *   - each block's share of dQ_i = ds_tile K_j sums 128 keys before it is
 *     added with atomics: half the atomics (B H N^2 D / BC in all), and half
 *     of them contend for the same dQ_i rows;
 *   - the two barriers per row tile are shared by 8 warps instead of 4.
 * What it costs: 8 warps in one block wait for each other at those barriers;
 * the dQ product is split two ways along the head dim (each warp 16 queries
 * x D/2 columns), and shared memory grows to 93.2 KB at D = 64, 158.7 KB at
 * D = 128 (one block, 8 warps, per SM at D = 128, as kernel 2's two blocks of
 * 4). FlashAttention-2's own backward takes 128 keys per block at both D.
 * Everything else is bwd_mma.cuh, the code kernel 2 runs.
 *
 * Registers (ptxas, sm_90a): 239 at D = 64, 255 at D = 128 with 12 bytes of
 * spill: one block of 8 warps per SM at both D.
 *
 * Measured on the H100 80GB HBM3 (./step05 --bench --backward --dtype fp16,
 * N = 4096, interleaved, median of 5, 2026-11-23): 205.9 TFLOP/s at D = 64
 * and 214.2 at D = 128, against kernel 2's 204.3 and 197.2: +1% and +9%.
 * Where the row-tile loads and atomics are a larger share, D = 128 (twice the
 * atomics per key, and one block per SM instead of two either way), it pays;
 * at D = 64 it does not: the time is elsewhere (kernel 4). Causal, N = 4096:
 * 189.0 and 201.4 against kernel 2's 130.5 and 188.6.
 */
#include "bwd_mma.cuh"

static size_t b3_workspace(long B, long H, long N, long D, int dtype) { return bwd_mma_workspace(B, H, N, D, dtype); }

static int b3_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return bwd_mma_launch<8>(3, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b3_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    bwd_mma_describe<8>(D, buf, n, "kernel 2 with 128 keys per block");
}

static const BackwardKernel bwd3 = {
    .id = 3, .extends = 2, .name = "wide K/V tile",
    .idea = "kernel 2 with 128 keys per block: half the row-tile loads and dQ atomics",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_mma_supports, .workspace = b3_workspace,
    .launch = b3_launch, .describe = b3_describe,
};
BWD_REGISTER(bwd3);
