/*
 * Extends: bwd08_overlap.cu; idea: dQ's additions off the consumers: each part to shared memory, one bulk reduce-add sent by a producer warp
 * Code: bwd_wgmma.cuh with BULK = false, MASK_BRANCH = true, OVERLAP = true, DET = false, WRITER = true
 *
 * Backward kernel 10: backward kernel 8 with the consumers no longer adding
 * into dQ themselves.
 *
 * What changes over backward kernel 8 (one idea: hand dQ's additions to a
 * warp that does nothing else, FlashAttention-3's dQ writer). In kernel 8
 * each consumer thread ends every row tile with 16 red.global.add.v2 of its
 * 32 floats of the 64 x 64 part of dQ_i: 4096 warp-wide reductions per
 * block and row tile, each touching 8 rows of dQ, issued by the warps the
 * tensor cores wait for. Here each consumer thread stores its 32 floats to
 * a 16 KB buffer in shared memory (8-byte stores, 2 passes through the
 * banks each: the layout of bwd.cuh), fences them for the copy engine and
 * arrives on a named barrier without waiting; warp 2 + w of the producer
 * warpgroup, idle until now, waits there and sends the whole part with one
 * cp.reduce.async.bulk ... add.f32 of 16 KB, waits until the engine has read
 * the buffer and frees it (a second named barrier, on which the consumers
 * wait only when their next part is ready). One bulk operation of 16 KB
 * needs the part in one piece in global memory too: the accumulator is laid
 * out in blocks of 64 x 64 floats (bwd.cuh, bwd_dq_tiled_off), and the
 * conversion to dQ reads it back in that layout. Kernel 6 sent the same
 * additions through shared memory from the consumers themselves, one bulk
 * operation of 256 bytes per row, and lost 4% against kernel 5.
 *
 * Why: with the additions removed (wrong dQ, timing only: kernel 8 with
 * its red.global.add skipped, ./step05 --bench --backward --dtype fp16
 * --kernel 8, one run, H100, 2026-11-26) kernel 8 went from 366.5 to 485.4
 * TFLOP/s at D = 64 and from 374.3 to 592.4 at D = 128 (N = 4096): a third
 * and a half of the time was the consumers sending dQ.
 *
 * What it costs: 32 KB more shared memory (a 16 KB buffer per consumer
 * warpgroup); the accumulator padded to whole row tiles of 64 (zeroed by a
 * memset of its own until 2026-11-27, now by the preprocessing pass, its
 * padding rows too: bwd_prep.cu); two named barriers per row tile
 * and consumer warpgroup. The additions are the same fp32 sums in another
 * order: dQ is no more bit-identical run to run than kernel 8's; dK and dV
 * are kernel 5's bit for bit (--check compares them).
 *
 * Measured on the H100 (NVIDIA H100 80GB HBM3, ./step05 --bench --backward
 * --dtype fp16 [--causal] --repeat 5, N = 4096, interleaved, 2026-11-26,
 * commit 981a8e9): 438.6 TFLOP/s at D = 64 and 491.3 at D = 128
 * against kernel 8's 360.3 and 384.8 in the same run: +22% and +28%; causal
 * +18% and +24%; bf16 (--kernel 8-10) +22% and +27%. Nsight Compute (the
 * same shapes): the tensor pipe 49% and 55% busy (kernel 8: 39%, 42%), issue
 * slots 36% and 34% (27%, 24%), 6-7% more instructions (the stores, the
 * barriers). Against cuDNN 9.19 through PyTorch 2.11 SDPA in the same lease:
 * 108% at D = 64 and 100% at D = 128 (405.6, 491.1); 164% and 171% of
 * FlashAttention-2. The fastest backward here; step 06's bf16 training
 * takes it.
 */
#include "bwd_wgmma.cuh"

static int b10_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                      void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                      void *stream)
{
    return bwd_wgmma_launch<false, true, true, false, true>(10, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal,
                                                            stream);
}

static void b10_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    bwd_wgmma_describe<false, true, true, false, true>(D, buf, n);
}

static const BackwardKernel bwd10 = {
    .id = 10, .extends = 8, .name = "dQ writer warps",
    .idea = "kernel 8 with dQ's parts sent to the copy engine by producer warps, one bulk reduce-add each",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = bwd_wgmma_workspace_tiled, .launch = b10_launch, .describe = b10_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5,
};
BWD_REGISTER(bwd10);
