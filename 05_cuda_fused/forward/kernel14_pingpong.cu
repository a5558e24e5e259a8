/*
 * Kernel 14: kernel 13 with its two consumer warpgroups taking turns at the tensor cores (ping-pong).
 *
 * Extends kernel 13 (kernel13_overlap.cu). The idea: schedule the warpgroups against each other, not only each one
 * against itself. In kernel 13 each consumer warpgroup overlaps its own softmax with its own P V, but the two
 * warpgroups run unsynchronised: nothing stops both from issuing their products at once and then doing their softmax
 * at once, the SM's tensor cores idle during the second. Here they alternate (FlashAttention-3's ping-pong):
 * warpgroup 0 issues S_j and P_{j-1} V_{j-1}, then hands the turn to warpgroup 1, which issues its own while
 * warpgroup 0 runs its softmax; and back. The turn is two named barriers (bar.sync / bar.arrive with an id and a
 * thread count, 256: the 128 threads that wait and the 128 that arrive):
 *     bar.sync  turn[w]      wait for my turn
 *     issue S_j, P_{j-1} V_{j-1}
 *     bar.arrive turn[1-w]   your turn
 * Warpgroup 1 arrives once on turn[0] before starting, so warpgroup 0 goes first, and skips its last arrival, so
 * every barrier is left as it started (kernel 13's body calls the turns at those places; its own are empty).
 *
 * Why: the softmax is the part of a tile the tensor cores cannot do, and its exponentials run on the slow
 * special-function unit (the H100 SXM5: 989 TFLOP/s of fp16 matrix products against 3.9 T exponentials a second,
 * the FlashAttention-3 paper's figures); with two warpgroups in turn it runs while the other's products do, instead
 * of after them. How often kernel 13's two warpgroups collide was not profiled.
 *
 * What it costs: two bar.sync / bar.arrive per tile per warpgroup, and a warpgroup that is ready before its turn
 * waits.
 *
 * Measured: H100, fp16, N = 4096: +5% over kernel 13 at D = 64 (causal +2%), where the softmax is the larger share
 * of a tile; +1% at D = 128 (causal 0%); the runs: RESULTS.md#kernel-14.
 */
#ifndef RUNG
#define RUNG 14 // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel13_overlap.cu" // the rung this one extends (.extends = 13): its body and its policy

// --- the idea --------------------------------------------------------------------------------------------------

template <int D, typename T> struct Pingpong : Overlap<D, T> {
    /* Warpgroup wg waits on named barrier 1 + wg for its turn and hands over on the other's (barrier 0 is
     * __syncthreads'). */
    static __device__ __forceinline__ void turn_wait(int wg) { asm volatile("bar.sync %0, 256;\n" ::"r"(1 + wg) : "memory"); }
    static __device__ __forceinline__ void turn_pass(int wg) { asm volatile("bar.arrive %0, 256;\n" ::"r"(1 + (wg ^ 1)) : "memory"); }
};

// --- the launcher ------------------------------------------------------------------------------------------------

#if RUNG == 14
static int k14_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch<Pingpong>(14, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k14_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k14_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k14_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe<Pingpong>(D, buf, n);
}

static const FusedKernel kernel14 = {
    .id = 14, .extends = 13, .name = "ping-pong",
    .idea = "kernel 13 with its two consumer warpgroups taking turns at the tensor cores (named barriers)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k14_launch,
    .describe = k14_describe, .unavailable = wgmma_unavailable, .launch_l = k14_launch_l,
};
FUSED_REGISTER(kernel14);
#endif
