/*
 * Extends: bwd05_wgmma.cu; idea: dQ's additions handed to the copy engine (bulk reduce-add from shared memory)
 * Code: bwd_wgmma.cuh with BULK = true, MASK_BRANCH = false, OVERLAP = false, DET = false
 *
 * Backward kernel 6: backward kernel 5 with dQ added by the copy engine.
 *
 * What changes over backward kernel 5 (one idea: hand dQ's additions to the
 * TMA, as FlashAttention-3 does). In kernel 5 each consumer thread adds its
 * share of the 64 x 64 dQ part with 16 red.global.add.v2 per row tile: 2048
 * eight-byte atomics per warpgroup, each its own request to L2, issued by the
 * threads that should be computing. Here each warp writes its 16 rows of the
 * part to shared memory (fp32, rows padded to 72 floats: the float2 stores
 * of a half-warp hit 32 banks), and 16 of its lanes each issue one
 * cp.reduce.async.bulk .add.f32 of a 256-byte row: 16 requests per warp, the
 * additions done in L2 by the copy engine while the warp goes on. The
 * buffer is reused at the next row tile once the engine has read it
 * (cp.async.bulk.wait_group.read: long done by then), and the kernel waits
 * for its last additions before it exits.
 *
 * What it costs: 36.9 KB more shared memory (203.8 KB at D = 64, 202.8 KB at
 * D = 128), and per row tile and warp the stores, a fence.proxy.async, two
 * __syncwarp and the wait for the engine's reads of the previous tile.
 *
 * Measured on the H100 80GB HBM3 (./step05 --bench --backward --dtype fp16
 * [--causal], N = 4096, interleaved with kernel 5, median of 5, 2026-11-23,
 * commit 9cd5e42): 320.1 TFLOP/s at D = 64 against kernel 5's 333.5 (-4%),
 * 356.6 at D = 128 against 370.4 (-4%); causal 286.3 and 315.4 against 293.5
 * and 325.9 (-2%, -3%); at N = 16384, -6% and -4%. It does not pay any
 * more. It did while kernel 5's consumer threads also loaded L and Delta
 * from global memory (bwd_wgmma.cuh): +5% at D = 64 (257.0 against 244.5),
 * +0.5% at D = 128; and in the first version, where the TMA brought them,
 * +8% at D = 64 and -5% at D = 128. None of it profiled; a guess: with the
 * consumers issuing no global loads, kernel 5's 2048 atomics per warpgroup
 * and tile no longer wait behind anything, while here each warp still
 * waits for the engine to have read its buffer, stores 64 floats, fences
 * and syncs twice per tile. Kept as the lesson it is: FlashAttention-3's
 * way out of the threads' atomics, measured, slower here. Step 06's
 * fused-bf16 training took it while it was the highest-numbered backward;
 * it takes kernel 8 now.
 */
#include "bwd_wgmma.cuh"

static int b6_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return bwd_wgmma_launch<true, false, false, false>(6, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b6_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    bwd_wgmma_describe<true, false, false, false>(D, buf, n);
}

static const BackwardKernel bwd6 = {
    .id = 6, .extends = 5, .name = "bulk dQ",
    .idea = "kernel 5 with dQ added by the copy engine (bulk reduce-add from shared memory)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = bwd_wgmma_workspace, .launch = b6_launch, .describe = b6_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5,
};
BWD_REGISTER(bwd6);
