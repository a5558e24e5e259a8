/*
 * Extends: kernel13_overlap.cu; idea: the two consumer warpgroups take turns at the tensor cores (ping-pong)
 * Code: overlap.cuh with PINGPONG = true
 *
 * Kernel 14: kernel 13 with its two consumer warpgroups taking turns at the tensor cores (ping-pong).
 *
 * What changes over kernel 13 (one idea: schedule the warpgroups against each
 * other, not only each one against itself). In kernel 13 each consumer
 * warpgroup overlaps its own softmax with its own P V, but the two warpgroups
 * run unsynchronised: nothing stops both from issuing their products at once
 * and then doing their softmax at once, the SM's tensor cores idle during
 * the second (how often that happens was not profiled). Here they alternate (FlashAttention-3's ping-pong): warpgroup 0
 * issues S_j and P_{j-1} V_{j-1}, then hands the turn to warpgroup 1, which
 * issues its own while warpgroup 0 runs its softmax; and back. The turn is
 * two named barriers (bar.sync / bar.arrive with an id and a thread count,
 * 256: the 128 threads that wait and the 128 that arrive):
 *     bar.sync  turn[w]      wait for my turn
 *     issue S_j, P_{j-1} V_{j-1}
 *     bar.arrive turn[1-w]   your turn
 * Warpgroup 1 arrives once on turn[0] before starting, so warpgroup 0 goes
 * first, and skips its last arrival, so every barrier is left as it started.
 * The softmax is the part of a tile the tensor cores cannot do, and its
 * exponentials run on the slow special-function unit (the H100 SXM5: 989
 * TFLOP/s of fp16 matrix products against 3.9 T exponentials a second, the
 * FlashAttention-3 paper's figures); with two warpgroups in turn it runs
 * while the other's products do, instead of after them.
 *
 * What it costs: two bar.sync / bar.arrive per tile per warpgroup, and a
 * warpgroup that is ready before its turn waits.
 * The code is kernel 13's, overlap.cuh with PINGPONG = true: my_turn and
 * your_turn are its only lines of its own (empty for kernel 13).
 * Built only for sm_90a, like kernels 10 to 13.
 *
 * Measured on the H100 (NVIDIA H100 80GB HBM3, ./step05 --bench --dtype fp16
 * [--causal], every kernel interleaved, 2026-11-23, commit 935357c), N = 4096:
 * 454.3 TFLOP/s at D = 64 against kernel 13's 434.2 (+5%; causal +2%), where
 * the softmax is the larger share of a tile; 617.7 at D = 128 against 614.1
 * (+1%; causal 0%): presumably kernel 13's own overlap had already hidden it
 * there (not profiled).
 */
#include "overlap.cuh"

static int k14_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch_l<true>(14, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k14_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k14_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k14_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe(D, buf, n);
}

static const FusedKernel kernel14 = {
    .id = 14, .extends = 13, .name = "ping-pong",
    .idea = "kernel 13 with its two consumer warpgroups taking turns at the tensor cores (named barriers)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k14_launch,
    .describe = k14_describe, .unavailable = wgmma_unavailable, .launch_l = k14_launch_l,
};
FUSED_REGISTER(kernel14);
