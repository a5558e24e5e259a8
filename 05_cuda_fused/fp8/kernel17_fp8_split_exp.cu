/*
 * Extends: kernel16_fp8_pingpong.cu; idea: one exponential in eight on the FMA pipes (a cubic for 2^f) instead of the MUFU
 * Code: fp8_pingpong.cuh with POLY = 2
 *
 * Kernel 17: kernel 16 with its exponentials split between two pipes.
 *
 * What Nsight Compute showed on kernel 16 (D = 128, N = 8192; the record has the run): the tensor pipe and the
 * MUFU (the "XU" pipe, 16 exponentials per clock per SM, against 8192 FP8 FLOP per clock on the tensor cores)
 * were each busy 45% of the time, and the softmax's exponentials held 48% of a consumer warp's samples: about
 * 1100 of the 2400 cycles a tile takes, twice the 528 that one warp's 66 MUFU instructions need (4 lanes per
 * scheduler), so the two consumer warps of a scheduler were in their exponentials at once. At D = 128 a score
 * costs 4D = 512 FLOP of products and one exponential: 8192 / 512 = 16 per clock, so the MUFU needs as many
 * cycles as the tensor cores. In 16 bits the products take twice as long; in FP8 they no longer hide it.
 *
 * The one idea (FlashAttention-4's, there for Blackwell): compute some of the exponentials without the MUFU.
 * 2^x = 2^floor(x) * 2^f with f in [0, 1): floor(x) by the add of 1.5 * 2^23 rounding down (the integer lands
 * in the mantissa's low bits), 2^f by a cubic (Horner, three FMAs; its largest relative error 7.5e-5, checked
 * on the CPU by fp8_exp2_poly, where e4m3's rounding of p is 6.25e-2), and 2^floor(x) by writing
 * floor(x) + 127 into a float's exponent. Nine instructions on the FMA and ALU pipes instead of one MUFU
 * instruction that holds the MUFU for eight cycles: POLY of every 16 scores a thread holds go that way
 * (POLY = 2: 1 in 8).
 * What it costs: 8 more issue slots per such score (the issue slots were 44% busy), four constants.
 *
 * How many: the sweep (the record) moved 0, 1, 2, 3, 4 and 5 of every 8 exponentials at D = 128, N = 8192,
 * against kernel 16 in the same runs: 1 in 8 gained 3.6-3.9%, 2 in 8 nothing, 3 in 8 lost 1%, 4 in 8 lost 6%,
 * 5 in 8 lost 11%.
 * The arithmetic above said the MUFU was the wall; the sweep says the issue slots are the next one, one
 * eighth away: nine instructions in place of one cost more issue time than the MUFU time they free.
 * Nsight Compute on the chosen split (same shape): MUFU pipe 46% -> 42% busy, issue slots 46% -> 54%,
 * tensor pipe 45% -> 46%, stalls on the MUFU's queue (mio throttle) halved.
 *
 * Measured on the H100 (./step05 --dtype fp8 --bench, kernels 15-17 interleaved, the 05 README's run): at
 * D = 128, 807.1 / 829.2 / 797.1 TFLOP/s at N = 4096 / 8192 / 16384 against kernel 16's 781.1 / 799.0 / 768.2
 * (+3-4%), causal 874.5 against 845.0 at N = 16384; at D = 64, +3-6% over kernel 16 and still behind kernel
 * 15's three consumer warpgroups. A small gain, near the machine's noise: five later default runs at D = 128
 * (on another machine, after O could be bf16) gave kernel 17 / kernel 16 = 0.99, 1.02, 1.02, 1.02, 1.02.
 * The aim of 900 at D = 128 is still 8% away.
 *
 * The code is kernel 16's, fp8_pingpong.cuh with POLY = 2: ex2_fma there, and the one line of the softmax
 * that reads POLY, are its only lines of its own (make idea K=17 shows the line). Built only for sm_90a.
 */
#include "fp8_pingpong.cuh"

// --- the launcher -------------------------------------------------------------------

template <int D> using K17 = Fp8PP<D, 2>;

static int k17_launch(const Fp8Args *a, void *stream)
{
    if (wgmma_refused()) return -1;
    if (a->D == 64) return fp8_launch_d<K17<64>, 64>(fp8_pingpong<64, 2>, 17, a, (cudaStream_t)stream);
    if (a->D == 128) return fp8_launch_d<K17<128>, 128>(fp8_pingpong<128, 2>, 17, a, (cudaStream_t)stream);
    fprintf(stderr, "%s: kernel 17 takes D = 64 or 128, not %ld\n", g_prog, a->D);
    return -1;
}

static void k17_describe(long D, char *buf, size_t n)
{
    snprintf(buf, n, "kernel 16 (1 producer + 2 consumer warpgroups taking turns, BR=128 BC=%d, e4m3 wgmma k=32) with %d of "
             "every 16 exponentials on the FMA pipes, %zu bytes of shared memory", K17<64>::BC, K17<64>::POLY,
             D == 64 ? K17<64>::bytes : K17<128>::bytes);
}

static const Fp8Kernel kernel17 = {
    .id = 17, .extends = 16, .name = "fp8 split exp",
    .idea = "one exponential in eight on the FMA pipes (a cubic for 2^f) instead of the MUFU",
    .launch = k17_launch, .describe = k17_describe, .unavailable = fp8_unavailable,
};
FP8_REGISTER(kernel17);
