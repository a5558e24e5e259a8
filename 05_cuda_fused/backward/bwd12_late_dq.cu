/*
 * Extends: bwd11_persistent.cu; idea: each row tile's dQ product goes to the tensor cores at the next tile's start, with its s^T
 * Code: bwd_wgmma.cuh with BULK = false, MASK_BRANCH = true, OVERLAP = true, DET = false, WRITER = true, PERSIST = true, LATE_DQ = true
 *
 * Backward kernel 12: backward kernel 11 with the end of each row tile
 * moved under the next one's products.
 *
 * What changes over backward kernel 11 (one idea: the tensor cores are not
 * left idle between row tiles). In kernels 10 and 11 a consumer warpgroup
 * ends row tile i with dQ_i += ds K_j: it issues the product, waits for it,
 * arrives on the stage's barrier, stores the 64 x 64 part for the writer
 * warp (after the writer's barrier says the buffer is free), goes round the
 * loop, waits for tile i + 1's stage and only then issues s^T. From the dQ
 * product's end to the next s^T's start nothing of this warpgroup is on the
 * tensor cores, and the other warpgroup is at the same place (the named
 * barrier before dQ holds them together).
 *
 * Here tile i + 1 starts by issuing tile i's dQ product (it needs ds^T_i,
 * already in shared memory behind the named barrier, and K_j, not the new
 * stage), then waits for its stage and issues its own s^T behind it; once dQ
 * is in (wait<1>: s^T still running) it stores dQ's part for the writer and
 * issues dp^T. So dQ, s^T and dp^T follow each other on the tensor cores,
 * and the part's stores, the writer's barrier and the stage's wait run
 * under them. Tile i ends at the named barrier: wait for dV and dK, release
 * the stage. The walk's last dQ is issued after the loop (then kernel 11's
 * kv_empty). The one-step branch is in bwd_issue_dq (bwd_wgmma.cuh).
 *
 * What it costs: 32 registers (dQ's part, live from the tile's start to its
 * store), and 1/8 of a dQ product per walk: in a walk's first row tile there
 * is no last dQ, but one k step of it is issued anyway (on whatever the
 * ds^T buffer holds, thrown away), so that dQ's registers are written by
 * the tensor cores on every path: issued under a branch, ptxas serialised
 * every wgmma of the kernel ("insufficient register resources"); with s^T
 * instead issued at a tile's end and carried across the loop's back edge,
 * it injected waits and serialised them too. ptxas -v and the SASS say which:
 * kernel 12 has 20 WARPGROUP.DEPBAR for 164 HGMMA (kernel 11: 12 for 128),
 * spills as kernel 11's (24-28 bytes, the producer's).
 *
 * Measured (H200, FlashAttention's shapes, kernels 10 and 11 in the same
 * run, 2026-11-27), kernel 12 over kernel 11, fp16, N = 512 .. 16384:
 * D = 64 +3.1, +3.2, +4.1, +4.8, +4.7, +4.0%; D = 128 +4.1, +6.6, +8.7,
 * +10.0, +9.0, +6.9%; causal D = 128 +3.1 .. +11.7%; bf16 D = 128 +5.0 ..
 * +12.0%; why D = 128 gains about twice what D = 64 does was not profiled
 * (per warpgroup the dQ product is the same size as s^T's at both D). Against cuDNN 9.19
 * in that run: D = 128 94.7%, 98%, 101%, 109%, 110%, 110% (kernel 11: 91%
 * .. 102%); D = 64 105-115%. --check: dK, dV bit-identical to kernel 5's
 * (the same sums in the same order); the walk's last dQ from the other
 * ds^T buffer fails it (121 FAIL lines). 05_cuda_fused/RESULTS.md has the
 * runs (there the kernel is still called "next s^T", its first name).
 */
#include "bwd_wgmma.cuh"

static int b12_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                      void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                      void *stream)
{
    return bwd_wgmma_launch<false, true, true, false, true, true, true>(12, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D,
                                                                        dtype, causal, stream);
}

static void b12_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    bwd_wgmma_describe<false, true, true, false, true, true, true>(D, buf, n);
}

static const BackwardKernel bwd12 = {
    .id = 12, .extends = 11, .name = "late dQ",
    .idea = "kernel 11 with each row tile's dQ product issued at the next tile's start, with its s^T",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = bwd_wgmma_workspace_tiled, .launch = b12_launch, .describe = b12_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5, .persistent = 1,
};
BWD_REGISTER(bwd12);
