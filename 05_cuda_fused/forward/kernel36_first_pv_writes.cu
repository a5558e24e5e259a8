/*
 * Kernel 36: kernel 26 with each item's first P V writing O instead of adding to zeros.
 *
 * Extends kernel 26 (kernel26_rounds.cu). The idea: an item (a row tile) starts with O = 0, and its first tile then
 * rescales that O by alpha_0 and adds P_0 V_0 to it. Both are work on nothing: the wgmma's scale-d operand, 0 on the
 * first k step of the item's first P V, makes that product write O (O = P_0 V_0, the accumulator's old contents
 * ignored), so O need not be zeroed, nor rescaled on tile 0. The registers keep what the last item left in them (a
 * block's first item, whatever they held: the product overwrites it).
 * Why: the short causal forward, where an item is one to four tiles (N = 512), pays a row tile's start often. Beside
 * cuDNN's (forward/RESULTS.md, the per-instruction counts after kernel 25) kernel 23 executes 2.72 M register moves
 * (IMAD.MOV) against 0.56 M: in its machine code, 32 a consumer warp at every item's start copy one register, O's
 * zero times alpha_0 (0 * alpha is not 0 to the compiler: alpha could be infinite), into all of O's, and 32 more again
 * where the item has a second tile.
 * What it costs: nothing in the products; a predicate on the P V's first k step (tile j = 0 of the item).
 * Measured: H200, over kernel 26 in the same run, two calls: +0.3% to +3.0% at N = 512 and 1024 (fp16 and bf16,
 * causal or not), within the spread from N = 2048 but at D = 64 causal from N = 4096 (-0.3% to -1.0%). Causal fp16
 * beside cuDNN: 96.2% to 96.7% at N = 512, D = 64; 99.7% to 100.8% at D = 128. RESULTS.md#kernel-36 has the runs.
 */
#ifndef RUNG
#define RUNG 36 // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel26_rounds.cu" // the rung this one extends (.extends = 26): its body and its policy

// --- the idea --------------------------------------------------------------------------------------------------

template <int D, typename T> struct FirstPvWrites : SmRounds<D, T> {
    template <class B> static __device__ __forceinline__ void clear_o(B &) {}  // the first P V writes O
    static __device__ __forceinline__ bool pv_adds(long j) { return j > 0; }   // tile 0's: scale-d 0
    template <class B> static __device__ __forceinline__ void rescale_o(B &b, const float alpha[2], long j)
    {
        if (j > 0) SmRounds<D, T>::rescale_o(b, alpha, j);                   // tile 0: nothing in O to rescale yet
    }

    static void describe(char *buf, size_t n);
};

// --- the launcher ------------------------------------------------------------------------------------------------

template <int D, typename T> void FirstPvWrites<D, T>::describe(char *buf, size_t n)
{
    SmRounds<D, T>::describe(buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, "; each item's first P V writes O");
}

#if RUNG == 36
static int k36_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch<FirstPvWrites>(36, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k36_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k36_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k36_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe<FirstPvWrites>(D, buf, n);
}

static const FusedKernel kernel36 = {
    .id = 36, .extends = 26, .name = "first P V writes",
    .idea = "kernel 26 with each item's first P V writing O (wgmma scale-d 0): O neither zeroed nor rescaled on tile 0",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k36_launch,
    .describe = k36_describe, .unavailable = wgmma_unavailable, .launch_l = k36_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel36);
#endif
