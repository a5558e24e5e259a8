/*
 * Extends: bwd01_transcription.cu; idea: the five products on mma.sync, key-major: p^T and ds^T stay in registers
 * Code: bwd_mma.cuh with WARPS = 4, ONE_SYNC = false
 *
 * Backward kernel 2: the backward on the tensor cores, FlashAttention-2's
 * scheme with mma.sync (fp16/bf16, D = 64 or 128, causal or not, any N).
 *
 * What changes over backward kernel 1 (one idea: the five products of a
 * (row tile, K/V tile) pair become mma.sync m16n8k16 on 16-bit inputs with
 * fp32 accumulators, the softmax recompute stays fp32): kernel 1's threads
 * each owned output elements and read every operand from shared memory, one
 * float per multiply-add. Here a warp owns 16 keys of the K/V tile and
 * computes its part of s_tile^T, dp_tile^T, dV_j and dK_j as 16x8x16
 * products: p^T and ds^T never leave registers, dK_j and dV_j stay in
 * registers for the whole walk over the row tiles, and only ds^T goes through
 * shared memory, for dQ. The algorithm, its layouts and why dQ is added with
 * fp32 atomics (not bit-identical run to run) are in bwd_mma.cuh, written once
 * for this kernel and the next.
 *
 * Shape: 4 warps, a K/V tile of BC = 64 keys, row tiles of BR = 64 queries,
 * Q_i and dO_i double-buffered by cp.async; 65.5 KB of shared memory at
 * D = 64 (K_w and V_w fragments kept in registers), 114.7 KB at D = 128
 * (they are re-read from shared memory: two blocks per SM still fit, 2 x
 * 115.7 KB with the 1 KB each block reserves, of the SM's 228 KB).
 *
 * Registers (ptxas, sm_90a): 240 at D = 64, no spill; 255 at D = 128 with
 * 28 bytes of spill (dK_w and dV_w alone take 128).
 *
 * Measured on the H100 80GB HBM3 (./step05 --bench --backward --dtype fp16,
 * N = 4096, interleaved with the others, median of 5, 2026-11-23): 204.3
 * TFLOP/s at D = 64 and 197.2 at D = 128 (2.5 x 4 B H N^2 D / time, the whole
 * backward: Delta and dQ's conversion included); the naive cuBLAS backward
 * 97.9 and 189.2 in the same run: 2.1x and 1.04x. FlashAttention-2's
 * backward on the same GPU model (PyTorch 2.11 SDPA): 270 and 290. RESULTS.md has
 * the table.
 */
#include "bwd_mma.cuh"

static size_t b2_workspace(long B, long H, long N, long D, int dtype) { return bwd_mma_workspace(B, H, N, D, dtype); }

static int b2_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return bwd_mma_launch<4>(2, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b2_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    bwd_mma_describe<4>(D, buf, n, "mma.sync, key-major");
}

static const BackwardKernel bwd2 = {
    .id = 2, .extends = 1, .name = "mma.sync",
    .idea = "the five products on mma.sync, key-major: p and ds stay in registers",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_mma_supports, .workspace = b2_workspace,
    .launch = b2_launch, .describe = b2_describe,
};
BWD_REGISTER(bwd2);
