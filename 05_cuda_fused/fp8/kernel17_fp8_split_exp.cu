/*
 * Extends: kernel16_fp8_pingpong.cu; idea: one exponential in eight on the FMA pipes (a cubic for 2^f) instead of the MUFU
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
#ifndef RUNG
#define RUNG 17          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel16_fp8_pingpong.cu"   // the rung this one extends (kernel 16): its body and its policy

// --- the idea ------------------------------------------------------------------

/* 2^x on the FMA and ALU pipes, fp8_exp2_poly's transcription (fp8.c): x clamped to -127, where the result is 0 (as
 * ex2.approx.ftz gives); a NaN stays NaN (max.NaN keeps it, the last multiply carries it). */
__device__ __forceinline__ float ex2_fma(float x)
{
    asm("max.NaN.f32 %0, %0, 0fC2FE0000;\n" : "+f"(x));          // x = max(x, -127)
    const float t = __fadd_rd(x, 12582912.0f);                     // 1.5 * 2^23 + floor(x), exactly
    const float fl = t - 12582912.0f;                              // floor(x)
    const float f = x - fl;                                        // in [0, 1)
    float p = fmaf(FP8_EXP2_C3, f, FP8_EXP2_C2);                   // 2^f, the cubic of fp8.h
    p = fmaf(p, f, FP8_EXP2_C1);
    p = fmaf(p, f, FP8_EXP2_C0);
    const float two_fl = __uint_as_float((__float_as_uint(t) << 23) + 0x3f800000u);  // 2^floor(x); 0 at -127
    return p * two_fl;
}

struct Fp8SplitExp : Fp8PingPong {
    static constexpr int POLY = 2;                // of every 16 scores a thread holds, how many take ex2_fma
    static_assert(POLY >= 0 && POLY <= 16, "POLY of every 16 scores");
    __device__ static __forceinline__ float exp2_score(int x, float y)
    {
        return x % 16 < POLY ? ex2_fma(y)         // POLY of every 16 on the FMA and ALU pipes
                             : ex2(y);            // the rest on the MUFU
    }
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 17
template <int D> using K17 = Fp8PP<D, Fp8SplitExp>;

static int k17_launch(const Fp8Args *a, void *stream) { return fp8_pingpong_launch<Fp8SplitExp>(17, a, stream); }

static void k17_describe(long D, char *buf, size_t n)
{
    snprintf(buf, n, "kernel 16 (1 producer + 2 consumer warpgroups taking turns, BR=128 BC=%d, e4m3 wgmma k=32) with %d of "
             "every 16 exponentials on the FMA pipes, %zu bytes of shared memory", K17<64>::BC, Fp8SplitExp::POLY,
             D == 64 ? K17<64>::bytes : K17<128>::bytes);
}

static const Fp8Kernel kernel17 = {
    .id = 17, .extends = 16, .name = "fp8 split exp",
    .idea = "one exponential in eight on the FMA pipes (a cubic for 2^f) instead of the MUFU",
    .launch = k17_launch, .describe = k17_describe, .unavailable = fp8_unavailable,
};
FP8_REGISTER(kernel17);
#endif
