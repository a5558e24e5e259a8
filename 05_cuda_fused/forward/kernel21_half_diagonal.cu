/*
 * Kernel 21: kernel 20 doing less of the work the causal mask throws away.
 *
 * Extends kernel 20 (kernel20_early_start.cu). The idea: with BR = BC = 128 a causal row tile's last K/V tile is its
 * diagonal, and of its 128 keys warpgroup 0 (rows 0-63 of the row tile) sees only the first 64: p = 0 for the other 64
 * in every one of its rows. Kernels 14-20 multiply those zeros into O all the same (8 k steps of 16 keys); here
 * warpgroup 0 issues the first 4. O changes by exact zeros only, so it stays bit for bit kernel 14's (--check).
 *
 * Why: at N = 512 a causal row tile visits 1 to 4 K/V tiles, and one of them is always the diagonal.
 *
 * What it costs: a branch on the warpgroup around the last P V, outside the tile loop (inside it, a shape chosen at run
 * time cost the whole loop: RESULTS.md#kernel-21); S and the softmax of the diagonal stay full width.
 *
 * Measured: H200, causal, over kernel 20: up to +3.8% at D = 64 (bf16 at N = 1024; +0.4% to +2.8% in fp16), where the
 * 4 k steps left out are m64n64k16, and none at D = 128 (-1.3% to +1.3%), where they are m64n128k16; the runs:
 * RESULTS.md#kernel-21.
 */
#ifndef RUNG
#define RUNG 21 // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel20_early_start.cu" // the rung this one extends (.extends = 20): its body and its policy

// --- the idea --------------------------------------------------------------------------------------------------

template <int D, typename T> struct HalfDiagonal : EarlyStart<D, T> {
    /* A row tile's last P V. Causal, the last K/V tile is the diagonal (j0 = i0: BR = BC), and warpgroup 0's 64 rows
     * see only its first 64 keys; the other 64 have p = 0 in every row (masked, e^-inf), so their half of the last
     * P V adds exact zeros: warpgroup 0 leaves it out, 4 of its 8 k steps (BC / 16). The branch is on a warp-uniform
     * value (the shuffle tells the compiler so) and outside the tile loop (kernel 20's loop over items calls this
     * hook after it). */
    template <class B> static __device__ __forceinline__ void last_pv(B &b, long j)
    {
        const bool half = b.causal && __shfl_sync(0xffffffffu, b.wg, 0) == 0;   // warpgroup 0 on the diagonal
        if (half) b.issue_pv(j, K13<D>::BC / 32);
        else b.issue_pv(j);
    }

    static void describe(char *buf, size_t n);
};

// --- the launcher ------------------------------------------------------------------------------------------------

template <int D, typename T> void HalfDiagonal<D, T>::describe(char *buf, size_t n)
{
    EarlyStart<D, T>::describe(buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, "; causal: half the diagonal's P V in warpgroup 0");
}

#if RUNG == 21
static int k21_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch<HalfDiagonal>(21, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k21_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k21_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k21_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe<HalfDiagonal>(D, buf, n);
}

static const FusedKernel kernel21 = {
    .id = 21, .extends = 20, .name = "half diagonal",
    .idea = "kernel 20 with warpgroup 0's causal diagonal P V at half width",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k21_launch,
    .describe = k21_describe, .unavailable = wgmma_unavailable, .launch_l = k21_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel21);
#endif
