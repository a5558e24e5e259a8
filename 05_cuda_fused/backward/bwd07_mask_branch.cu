/*
 * Extends: bwd05_wgmma.cu; idea: the masks only in the row tiles that need them (the loop twice, need_mask choosing once)
 * Code: bwd_wgmma.cuh with BULK = false, MASK_BRANCH = true, OVERLAP = false, DET = false
 *
 * Backward kernel 7: backward kernel 5 without the mask arithmetic in the
 * row tiles that have nothing to mask.
 *
 * What changes over backward kernel 5 (one idea: decide once per row tile).
 * In kernel 5 the loop that turns s^T and dp^T into p^T and ds^T takes
 * need_mask as a value: a warpgroup's keys can be hidden in this row tile
 * (keys past N, or causal and the tile crosses the diagonal). nvcc keeps one
 * loop, computes every element's mask (a 64-bit compare of key against N
 * and against the query) in every row tile, and schedules all of it before
 * the wgmma of s^T and dp^T, whose results it does not need: 260 integer
 * instructions per thread and row tile at D = 64, between the wait for the
 * ring's stage and the tensor cores' next product, while both consumer
 * warpgroups (in step at the named barrier) leave the tensor cores idle.
 * Here the loop is written twice, masked and not (bwd_wgmma.cuh's
 * p_ds_tile(true) and p_ds_tile(false)), and need_mask picks one: the mask
 * costs only in the row tiles that cross the diagonal or the end of the
 * keys. The arithmetic is kernel 5's: dK and dV are kernel 5's bit for bit
 * (--check compares them).
 *
 * What it costs: the loop twice in the binary (the kernel's machine code
 * +8% at D = 64, +5% at D = 128), and ptxas spills 36 bytes at D = 64
 * (kernel 5: 20), 4 at D = 128.
 *
 * Measured on an NVIDIA H200 (the device lent that day; the same sm_90 and
 * clocks as the H100, more memory bandwidth), ./step05 --bench --backward
 * --dtype fp16 [--causal], N = 4096, interleaved, median of 5, 2026-11-26,
 * commit 1b1f825: 357.8 TFLOP/s at D = 64 and 385.0 at D = 128 against
 * kernel 5's 334.2 and 369.5 in the same run: +7.1% and +4.2%; causal
 * +6.2% and +3.2%; bf16 +7.0% and +2.8%; at N = 16384 +7.3% and +3.9%.
 * Nsight Compute (same GPU, B = 4, H = 32, N = 4096, D = 64, fp16):
 * 0.92 billion instructions executed against kernel 5's 1.45 (-36%),
 * issue slots busy 27% against 39%, 3.59 ms against 3.94.
 */
#include "bwd_wgmma.cuh"

static int b7_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return bwd_wgmma_launch<false, true, false, false>(7, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b7_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    bwd_wgmma_describe<false, true, false, false>(D, buf, n);
}

static const BackwardKernel bwd7 = {
    .id = 7, .extends = 5, .name = "mask branch",
    .idea = "kernel 5 with the masks only in the row tiles that need them",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = bwd_wgmma_workspace, .launch = b7_launch, .describe = b7_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5,
};
BWD_REGISTER(bwd7);
