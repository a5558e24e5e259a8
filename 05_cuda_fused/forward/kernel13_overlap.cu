/*
 * Extends: kernel12_warp_specialized.cu; idea: the softmax of tile j runs while P_{j-1} V_{j-1} is on the tensor cores
 * Code: overlap.cuh with PINGPONG = false
 *
 * Kernel 13: kernel 12 with the softmax of tile j run under the product of tile j-1.
 *
 * What changes over kernel 12 (one idea: software-pipeline the consumer's
 * loop so the tensor cores and the exponentials work at the same time). In
 * kernel 12 a consumer warpgroup does, per K/V tile, S_j = Q_i K_j^T, wait,
 * softmax, O += P_j V_j, wait: while the softmax runs (max, exp2, sums, the
 * rescale: FP32 and MUFU work, no tensor core) its tensor cores idle, and
 * while the products run its FP32 units do. wgmma is asynchronous, so
 * reorder the loop by half a tile (FlashAttention-3's intra-warpgroup
 * overlap):
 *     issue S_j = Q_i K_j^T;  issue O += P_{j-1} V_{j-1};
 *     wait for S_j only (wgmma.wait_group 1): the P V product is still running;
 *     softmax of S_j: m_j, alpha_j, p_j (kept in S_j's registers as floats);
 *     wait for P V; O *= alpha_j; pack p_j into the A fragments of the next P V.
 * The softmax of tile j now runs while tile j-1's P V is on the tensor cores.
 * The algebra is the chapter's, unchanged: O still holds
 * sum_{k<j} e^(m_k - m_j) P_k V_k when alpha_j rescales it, because
 * P_{j-1} V_{j-1} has landed by then (the second wait comes before the
 * rescale). The first tile has no P V before it and the last P V no S after
 * it: a prologue and an epilogue.
 *
 * What it costs: registers, P_{j-1} (as A fragments, BC/16 x 4) must live
 * while S_j does, so a thread holds S_j, P_{j-1}, O and Q_i at once: 192
 * values at D = 128 of the 240 setmaxnreg gives. And K_j's stage is now done
 * before V_j's (K_j is read in iteration j, V_j in j+1), so the ring gets a
 * release barrier each: empty_k[s] after S_j, empty_v[s] after P_j V_j, and
 * the producer waits on each before refilling K or V of that stage.
 * The code is overlap.cuh (kernel 14 runs it too, with its turns); the
 * rest of it is kernel 12's, repeated on purpose so that file reads alone.
 * Built only for sm_90a, like kernels 10 to 12.
 *
 * The three consumer warpgroups kernel 12 runs at D = 64 get 160 registers
 * each, too few for this (ptxas spills 104 bytes and serialises the wgmma,
 * C7512): kernel 13 runs two at both D, BR = 128.
 *
 * Measured on the H100 (NVIDIA H100 80GB HBM3, ./step05 --bench --dtype fp16
 * [--causal], every kernel interleaved, 2026-11-23, commit 935357c), N = 4096:
 * 614.1 TFLOP/s at D = 128 against kernel 12's 539.7 (+14%; causal 485.0 vs
 * 447.9, +8%; in the run beside PyTorch's SDPA 623.2, 107% of cuDNN's 580.0);
 * at D = 64 434.2 against
 * 463.9 (-6%; causal -10%). Not separated by a measurement: the guess is that
 * two warpgroups with the overlap hide less than kernel 12's three without it
 * when the products are short (k = 64).
 */
#include "overlap.cuh"

static int k13_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch_l<false>(13, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k13_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k13_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k13_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe(D, buf, n);
}

static const FusedKernel kernel13 = {
    .id = 13, .extends = 12, .name = "softmax under P V",
    .idea = "kernel 12 with the softmax of tile j overlapping the P V product of tile j-1 (intra-warpgroup pipelining)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k13_launch,
    .describe = k13_describe, .unavailable = wgmma_unavailable, .launch_l = k13_launch_l,
};
FUSED_REGISTER(kernel13);
