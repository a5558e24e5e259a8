/*
 * Extends: bwd07_mask_branch.cu; idea: overlap inside a consumer: p^T computed while dp^T is on the tensor cores (D = 128: ds^T while dV is)
 * Code: bwd_wgmma.cuh with BULK = false, MASK_BRANCH = true, OVERLAP = true, DET = false
 *
 * Backward kernel 8: backward kernel 7 with each wait covering only the
 * product that the next step reads.
 *
 * What changes over backward kernel 7 (one idea: wait for one product at a
 * time). Kernel 7's consumer issues s^T and dp^T as one group, waits for
 * both, then computes p^T and ds^T; the exponentials (64 ex2 per thread and
 * row tile at D = 64) run while the tensor cores wait for the next product.
 * Here s^T and dp^T are committed as two groups: the consumer waits for
 * s^T alone and computes p^T (in place, fp32) while dp^T is still on the
 * tensor cores, then waits for dp^T and computes ds^T. At D = 128 it also
 * issues dV_w += p^T dO_i before ds^T's arithmetic, which then runs under
 * it. At D = 64 not: p^T's 32 A registers beside s^T's and dp^T's 128 left
 * ptxas no room, and it serialised every wgmma of the kernel ("insufficient
 * register resources"). The arithmetic is kernel 5's (bwd.cuh: bwd_p4,
 * bwd_ds4): dK and dV are kernel 5's bit for bit (--check compares them).
 *
 * Tried and dropped (ptxas): adding row tile i's dQ part under row tile
 * i + 1's s^T and dp^T (dQ's 32 accumulators live across the loop's turn):
 * 132 bytes spilled at D = 128 and 260 at D = 64, the spills reading
 * accumulators still in flight, and ptxas serialised every wgmma ("non
 * wgmma instructions reading accumulator registers").
 *
 * What it costs: nothing in shared memory; registers: ptxas spills 0 bytes
 * at D = 64 (kernel 7: 36), 4 at D = 128.
 *
 * Measured on an NVIDIA H200 (./step05 --bench --backward --dtype fp16
 * [--causal], N = 4096, interleaved, median of 5, 2026-11-26, commit
 * 1b1f825): 365.1 TFLOP/s at D = 64 and 389.0 at D = 128 against kernel
 * 7's 357.8 and 385.0 in the same run: +2.0% and +1.0%; causal +2.2% and
 * +0.5%; bf16 +2.1% and +1.7%. Small: the tensor cores are not idle for
 * want of a product to start (Nsight Compute: the tensor pipe 39-42% busy
 * in kernels 5, 7 and 8 alike, issue slots 24-27%, three quarters of the
 * scheduler cycles with no warp eligible): the two consumer warpgroups
 * still walk in step, held by the named barrier. Against cuDNN 9.19
 * through PyTorch 2.11 SDPA in the same lease: 89% at D = 64, 80% at
 * D = 128 (409.8 and 489.2); causal 88% and 79%; FlashAttention-2 137%
 * and 136%. Kernel 10 takes dQ's additions off the consumers (+22% and +28%).
 */
#include "bwd_wgmma.cuh"

static int b8_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return bwd_wgmma_launch<false, true, true, false>(8, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b8_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    bwd_wgmma_describe<false, true, true, false>(D, buf, n);
}

static const BackwardKernel bwd8 = {
    .id = 8, .extends = 7, .name = "consumer overlap",
    .idea = "kernel 7 with p^T computed under dp^T's product (D = 128: ds^T under dV's)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = bwd_wgmma_workspace, .launch = b8_launch, .describe = b8_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5,
};
BWD_REGISTER(bwd8);
