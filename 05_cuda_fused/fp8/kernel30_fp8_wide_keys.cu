/*
 * Kernel 30: kernel 28 with 192 keys a tile at D = 128: a tile of one and a half K blocks.
 *
 * Extends kernel 28 (kernel28_fp8_three_overlap.cu). The idea: FlashAttention-3's FP8 forward at D = 128 runs
 * tiles of 128 queries by 224 keys (fp8/RESULTS.md#fa3-fp8), where kernels 16-28 run 128 by 128: every cost a tile
 * pays once, whatever its width, is spread over more keys. Here a tile is 192 keys at D = 128: S_j is a 64 x 192
 * product a warpgroup (two wgmma, n = 128 and n = 64), P_j V_j six k steps of 32. K's scales are per 128 keys
 * (FP8_KBLOCK), so a tile's 192 keys fall in two K blocks: the softmax takes each 64-key group's scale, its row max
 * of each group times that group's scale. V^T arrives in three boxes of 64 keys (64-byte swizzle): a 192-byte row is
 * wider than the 128-byte swizzle allows. At D = 64 it is kernel 28.
 * Its code is the policy below: kernel 16's body's hook keys (its tile's width); the body takes any width of one
 * K block or three 64-key groups.
 * Why: at D = 128 kernel 24's warps wait on their own dependency chains half the cycles (no warp eligible 48.9%,
 * Nsight Compute, fp8/RESULTS.md#kernel-24); a wider tile gives each of them 50% more independent scores between
 * the waits of a tile (the mbarriers, the turns, the wgmma waits, the row max's shuffles).
 * What it costs: registers (S 96 a thread, P 24, against 64 and 16), 50% more shared memory a stage (K and V^T 24
 * KB each at D = 128), three scales a tile instead of one, and at short N or near the causal diagonal a wider tile
 * computes more masked scores. Built only for sm_90a.
 * Measured: H200, D = 128, two runs, against kernel 24 (kernel 28 there) in the same run: +2.0% to +2.3% from
 * N = 8192 (941.8 TFLOP/s at N = 16384), even at 4096, -1.1% at 2048 and -7.5% to -7.8% at N = 512 and 1024,
 * where 512 or 1024 keys do not fill whole 192-key tiles: 11% of the keys a row computes lie past N (3% at 2048
 * and 4096, 0.8% at 8192); causal +0.9% / +2.2% at N = 8192 / 16384. Nsight Compute at N = 8192: 1.2% fewer instructions, the warps still
 * waiting as before (no warp eligible 48.4% of the cycles against 49.1%). The runs: fp8/RESULTS.md#kernel-30.
 */
#ifndef RUNG
#define RUNG 30          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel28_fp8_three_overlap.cu"  // the rung this one extends (kernel 28): its body and its policy

// --- the idea ------------------------------------------------------------------

/* Kernel 30's policy: kernel 28's, with 192 keys a tile at D = 128. */
struct Fp8Wide : Fp8Three {
    __host__ __device__ static constexpr int keys(int D) { return D == 128 ? 192 : FP8_KBLOCK; }
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 30
template <int D> using K30 = Fp8PP<D, Fp8Wide>;

static int k30_launch(const Fp8Args *a, void *stream) { return fp8_pingpong_launch<Fp8Wide>(30, a, stream); }

static void k30_describe(long D, char *buf, size_t n)
{
    if (D == 128)
        snprintf(buf, n, "kernel 24 (2 consumer warpgroups taking turns) with tiles of BR=%d by BC=%d keys, V^T in boxes of "
                 "%d keys, %zu bytes of shared memory", K30<128>::BR, K30<128>::BC, K30<128>::VBOX, K30<128>::bytes);
    else
        snprintf(buf, n, "kernel 28 (3 consumer warpgroups, BR=%d BC=%d, each with its softmax under its own P V), %zu bytes "
                 "of shared memory", K30<64>::BR, K30<64>::BC, K30<64>::bytes);
}

static const Fp8Kernel kernel30 = {
    .id = 30, .extends = 28, .name = "fp8 wide keys",
    .idea = "at D = 128 tiles of 192 keys, one and a half K blocks (FlashAttention-3's wider key tile)",
    .launch = k30_launch, .describe = k30_describe, .unavailable = fp8_unavailable,
};
FP8_REGISTER(kernel30);
#endif
