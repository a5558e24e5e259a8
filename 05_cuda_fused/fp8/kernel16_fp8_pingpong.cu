/*
 * Extends: kernel15_fp8.cu; idea: kernel 14's schedule in FP8: the softmax of tile j under P_{j-1} V_{j-1}, two warpgroups taking turns at the tensor cores
 * Code: fp8_pingpong.cuh with POLY = 0
 *
 * Kernel 16: kernel 15 on kernel 14's schedule.
 *
 * What changes over kernel 15 (one idea: in FP8 the products take half the time, so the softmax, which
 * does not get faster, is an even larger share of each tile, and hiding it matters more than in 16 bits).
 * Kernel 15 runs each warpgroup's tile in order: S = Q K^T, wait, softmax, P V, wait; the tensor cores
 * idle during every softmax. Kernels 13 and 14 (overlap.cuh) showed the two cures in 16 bits, and here
 * they are with kernel 15's FP8 products:
 *   - inside a warpgroup, S_j is issued together with P_{j-1} V_{j-1} and the softmax of S_j runs while
 *     the P V is still on the tensor cores (p_{j-1} kept in its own registers, pf, as FP8 A fragments);
 *   - between the two consumer warpgroups, named barriers hand the tensor cores back and forth (ping-pong):
 *     one warpgroup's products run under the other's softmax.
 * Two consumer warpgroups at both D (BR = 128), as kernel 13: each holds S, O, p_{j-1} and Q at 240 registers.
 * What it costs: the registers of p_{j-1} (16 at BC = 128 in FP8, half of 16 bits' 32), one more mbarrier per
 * stage (K and V are released apart), and the turns' barriers. Everything else is kernel 15's (its FP8
 * products, scales, V's permuted layout, 2^8 p) and overlap.cuh's loop, repeated on purpose so that
 * kernel 15 against fp8_pingpong.cuh reads as one idea (make idea K=16). The code is fp8_pingpong.cuh with
 * POLY = 0, which kernel 17 shares. Built only for sm_90a.
 *
 * Measured on the H100 (./step05 --dtype fp8 --bench, commit a2635ad, kernels 15 and 16 interleaved): at
 * D = 128, N = 8192, 812.2 TFLOP/s against kernel 15's 741.0 (+10%), 779.9 against 720.9 at N = 4096 (+8%);
 * at D = 64 it loses, 499.1 against 626.1 at N = 8192 (-20%): kernel 15 runs three consumer warpgroups there,
 * kernel 16 two (as kernel 13 against kernel 12 in fp16).
 */
#include "fp8_pingpong.cuh"

// --- the launcher -------------------------------------------------------------------

template <int D> using K16 = Fp8PP<D, 0>;

static int k16_launch(const Fp8Args *a, void *stream)
{
    if (wgmma_refused()) return -1;
    if (a->D == 64) return fp8_launch_d<K16<64>, 64>(fp8_pingpong<64, 0>, 16, a, (cudaStream_t)stream);
    if (a->D == 128) return fp8_launch_d<K16<128>, 128>(fp8_pingpong<128, 0>, 16, a, (cudaStream_t)stream);
    fprintf(stderr, "%s: kernel 16 takes D = 64 or 128, not %ld\n", g_prog, a->D);
    return -1;
}

static void k16_describe(long D, char *buf, size_t n)
{
    snprintf(buf, n, "1 producer + 2 consumer warpgroups taking turns, BR=128 BC=%d, e4m3 wgmma k=32, softmax under P V, "
             "%zu bytes of shared memory", K16<64>::BC, D == 64 ? K16<64>::bytes : K16<128>::bytes);
}

static const Fp8Kernel kernel16 = {
    .id = 16, .extends = 15, .name = "fp8 ping-pong",
    .idea = "kernel 14's schedule in FP8: the softmax of tile j under P_{j-1} V_{j-1}, two warpgroups taking turns at the tensor cores",
    .launch = k16_launch, .describe = k16_describe, .unavailable = fp8_unavailable,
};
FP8_REGISTER(kernel16);
