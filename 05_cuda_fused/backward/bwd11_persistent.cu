/*
 * Extends: bwd10_dq_writer.cu; idea: one block per SM takes K/V tiles from a counter, the next tile's K, V and row tiles loading under this one's end
 * Code: bwd_wgmma.cuh with BULK = false, MASK_BRANCH = true, OVERLAP = true, DET = false, WRITER = true, PERSIST = true
 *
 * Backward kernel 11: backward kernel 10 made persistent, as forward kernel
 * 18 made kernel 14 persistent.
 *
 * What changes over backward kernel 10 (one idea: a block's start and end
 * are paid once per SM, not once per K/V tile). Kernel 10 launches one
 * block per (head, K/V tile of 128 keys). Each block starts cold: it
 * initialises its barriers, its producer copies K_j, V_j and the first row
 * tiles, and nothing runs on the tensor cores until they land; at its end
 * the consumers store dK_j and dV_j, the writer warps wait for the last
 * reduce-add of dQ, and only then may the next block take the SM (one block
 * fits at a time: 193 KB of shared memory at D = 128). Nsight Compute's
 * kernel times (H100, fp16, 2026-11-26) put that start and end at about
 * 8.8 us a block at D = 128: kernel 10's main kernel took 463.1 us at
 * N = 512 (8 row tiles a block) and 2609.2 us at N = 4096 (64 row tiles),
 * 3.73 and 2.63 us per row tile, 2048 blocks on 132 SMs; cuDNN's kernel in
 * the same run, 395.7 and 2362.9 us (6.5 us a block by the same sum).
 *
 * Here the grid is one block per SM, and each block loops over items
 * (head, K/V tile) handed out by a counter in global memory (an atomicAdd
 * by the producer's thread 0, passed to the other warps through a two-slot
 * ring in shared memory): the producer loads the next item's K_j and V_j
 * as soon as the consumers have read the last ones (an mbarrier, kv_empty,
 * after the last row tile's dQ product), and its row tiles into the same
 * ring of stages, whose count runs on across items; the consumers store
 * dK_j, dV_j from registers while that happens, and the writer warps go on
 * sending dQ's parts without waiting for the last item's to finish. The
 * tickets come in kernel 10's block order (head by head, tile 0 first),
 * so the causal tiles, long first, balance across the SMs as kernel 10's
 * blocks do under the hardware's scheduler.
 *
 * What it costs: 48 bytes of shared memory (five mbarriers, two tickets),
 * one atomic per item, a wait on the ticket ring per item in every warp;
 * two launches of kernel 11 must not run at once (they share the counter).
 * The row tile's code is kernel 10's, unchanged: dK, dV and dQ are kernel
 * 10's sums in the same order within each item (--check compares dK and dV
 * bit for bit with kernel 5's).
 *
 * Measured (H200, fp16, FlashAttention's shapes, kernel 10 in the same run,
 * 2026-11-26): +5.4%, +3.0%, +1.1% at D = 64, N = 512, 1024, 2048; +2.0%,
 * +1.0% at D = 128, N = 512, 1024; causal +7.6%, +5.1%, +2.9% and +3.2%,
 * +1.7%: the shorter N, the more a block's start and end weigh. From
 * N = 2048 at D = 128 it is 0.7-2.6% slower (bf16 from 4096, 1.4-1.5%), and the same
 * with a grid of one block per item (the tickets still handed out by the
 * counter), so the cost is in the item loop's code or its waits, not in the
 * schedule; kernels 5-10 keep their machine code (the roles' work is the
 * same lambdas, called once there). Against cuDNN 9.19 in the same session:
 * 93% / 95% at D = 64, N = 512 / 1024 (kernel 10: 88% / 92%), 87% / 93% at
 * D = 128 (85% / 92%). --check: dK, dV bit-identical to kernel 5's at
 * B = 4, H = 24, N = 257 (288 K/V tiles, 2.2 per SM); restarting dK, dV at
 * 1e-3 instead of 0 for a block's later items fails it (4 FAIL lines per
 * dtype). 05_cuda_fused/RESULTS.md has the run.
 */
#include "bwd_wgmma.cuh"

static int b11_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                      void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                      void *stream)
{
    return bwd_wgmma_launch<false, true, true, false, true, true>(11, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype,
                                                                  causal, stream);
}

static void b11_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    bwd_wgmma_describe<false, true, true, false, true, true>(D, buf, n);
}

static const BackwardKernel bwd11 = {
    .id = 11, .extends = 10, .name = "persistent",
    .idea = "kernel 10 with one block per SM taking K/V tiles from a counter, the next tile loading under this one's end",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = bwd_wgmma_workspace_tiled, .launch = b11_launch, .describe = b11_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5, .persistent = 1,
};
BWD_REGISTER(bwd11);
