/*
 * Extends: bwd04_one_barrier.cu; idea: the five products on wgmma from swizzled shared memory, a TMA producer warpgroup
 * Code: bwd_wgmma.cuh with BULK = false, MASK_BRANCH = false, OVERLAP = false, DET = false
 *
 * Backward kernel 5: the backward on Hopper's wgmma and TMA, warp-specialised
 * (FlashAttention-3's scheme; fp16/bf16, D = 64 or 128, causal or not, any N).
 *
 * What changes over backward kernel 4 (one idea: the forward's kernels 10-12
 * applied to the backward: the five products read their tiles straight from
 * swizzled shared memory, a producer warpgroup feeds them, and the consumers
 * get the registers). Kernel 4's warps each own 16 keys and read the whole
 * Q_i and dO_i tile through ldmatrix for every 16 keys, twice (straight for
 * s^T and dp^T, transposed for dK and dV): 1.8 mma per ldmatrix, 240-255
 * registers, one block of 8 warps per SM and a block-wide barrier per row
 * tile. Here a consumer warpgroup owns 64 keys (wgmma's M) and each product
 * is one wgmma per k step, from shared memory the TMA filled; the copies run
 * in a producer warpgroup, ahead by a 2-stage ring; p^T and ds^T stay in
 * registers as A operands, as in kernel 4; the consumer threads write only
 * ds^T (for dQ) to shared memory, and read L_i and Delta_i from the ring's
 * stage, where the producer's warp 1 put them (bwd_wgmma.cuh says why not the
 * TMA). bwd_wgmma.cuh is the algorithm, written once for this kernel and the
 * next; dQ leaves by red.global.add.v2, as in kernels 2-4.
 *
 * Registers: setmaxnreg 24 (producer) / 240 (consumers); ptxas (sm_90a)
 * reports the launch's 168 and spills 4 bytes at D = 128, 20 at D = 64 (where
 * the row tile is BR = 128: s^T and dp^T take 128 registers). 167.0 KB of
 * shared memory at D = 64, 165.9 KB at D = 128: one block per SM.
 *
 * Measured on the H100 80GB HBM3 (./step05 --bench --backward --dtype fp16
 * [--causal], N = 4096, interleaved, median of 5, 2026-11-23, commit
 * 9cd5e42): 333.5 TFLOP/s at D = 64 and 370.4 at D = 128 against kernel 4's
 * 214.0 and 209.9 in the same run: +56% and +76%; causal 293.5 and 325.9
 * against 198.3 and 199.8 (+48%, +63%). Against FlashAttention-2's 270 and
 * 290 (PyTorch 2.11 SDPA): 124% and 128% (causal 231 and 255: 127% and 128%); against
 * cuDNN's 426 and 489: 78% and 76% (causal 364 and 450: 81% and 72%).
 * Faster than kernel 6; kernels 7 and 8 are faster still (the masks
 * computed in every row tile here cost 7%). How L_i and Delta_i reach the
 * consumers was worth +37% at D = 64 (bwd_wgmma.cuh: three designs,
 * measured).
 */
#include "bwd_wgmma.cuh"

static int b5_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return bwd_wgmma_launch<false, false, false, false>(5, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b5_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    bwd_wgmma_describe<false, false, false, false>(D, buf, n);
}

static const BackwardKernel bwd5 = {
    .id = 5, .extends = 4, .name = "wgmma + TMA",
    .idea = "the five products on wgmma from swizzled shared memory, a TMA producer warpgroup, setmaxnreg",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = bwd_wgmma_workspace, .launch = b5_launch, .describe = b5_describe,
    .unavailable = wgmma_unavailable,
};
BWD_REGISTER(bwd5);
