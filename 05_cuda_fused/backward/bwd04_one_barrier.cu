/*
 * Extends: bwd03_wide_kv.cu; idea: one barrier per row tile instead of two (ds^T double-buffered)
 * Code: bwd_mma.cuh with WARPS = 8, ONE_SYNC = true
 *
 * Backward kernel 4: backward kernel 3 with one barrier per row tile, not two.
 *
 * What changes over backward kernel 3 (one idea: let the warps drift apart
 * by a phase). In kernels 2 and 3 every row tile has two barriers: after
 * ds^T is written (dQ reads all the block's keys), and at the end (the next
 * row tile's copy has landed; ds^T and this tile's buffers are free). At the
 * second, all 8 warps have just done the dQ product, whose shared-memory
 * reads (ds^T and K_j, 1.5 ldmatrix per mma) and atomics they all issue at
 * the same time, and then all start the next row tile's score products, the
 * mma-heavy part, at the same time too: one phase at a time on the whole SM.
 * Here ds^T has two buffers (+18 KB of shared memory), so the end barrier
 * has nothing left to protect: the copy of the next row tile is waited for
 * at the first barrier, and the copy of the one after next is issued right
 * after it, into the buffer of this tile, whose Q_i and dO_i nobody reads any
 * more (dQ needs only ds^T and K_j). A warp that is through with its dQ
 * starts the next tile's products while others still do theirs.
 * bwd_mma.cuh (ONE_SYNC) says why nothing is overwritten while it is read.
 *
 * Registers (ptxas, sm_90a): 241 at D = 64, 255 at D = 128 with 20 bytes of
 * spill; 111.6 KB and 177.2 KB of shared memory: one block per SM.
 *
 * Measured on the H100 80GB HBM3 (./step05 --bench --backward --dtype fp16,
 * N = 4096, interleaved, median of 5, 2026-11-23): 217.9 TFLOP/s at D = 64
 * and 214.8 at D = 128, against kernel 3's 205.9 and 214.2: +6% and +0%
 * (224.3 and 220.8 at N = 16384); causal 199.3 and 202.7. It is the fastest
 * backward here: 81% and 74% of FlashAttention-2's 270 and 290, 2.2x and 1.1x
 * the naive cuBLAS backward. RESULTS.md has the table and what is next.
 */
#include "bwd_mma.cuh"

static size_t b4_workspace(long B, long H, long N, long D, int dtype) { return bwd_mma_workspace(B, H, N, D, dtype); }

static int b4_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return bwd_mma_launch<8, true>(4, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b4_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    bwd_mma_describe<8, true>(D, buf, n, "kernel 3 with ds^T double-buffered");
}

static const BackwardKernel bwd4 = {
    .id = 4, .extends = 3, .name = "one barrier",
    .idea = "kernel 3 with one barrier per row tile (ds^T double-buffered)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_mma_supports, .workspace = b4_workspace,
    .launch = b4_launch, .describe = b4_describe,
};
BWD_REGISTER(bwd4);
