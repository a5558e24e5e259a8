/*
 * Kernel 17: kernel 16 with one exponential in eight computed on the FMA pipes.
 *
 * Extends kernel 16 (kernel16_fp8_pingpong.cu). The idea (FlashAttention-4's, there for Blackwell): compute some of
 * the exponentials without the MUFU. 2^x = 2^floor(x) * 2^f with f in [0, 1): floor(x) by the add of 1.5 * 2^23
 * rounding down (the integer lands in the mantissa's low bits), 2^f by a cubic (Horner, three FMAs; its largest
 * relative error 7.5e-5, checked on the CPU by fp8_exp2_poly, where e4m3's rounding of p is 6.25e-2), and
 * 2^floor(x) by writing floor(x) + 127 into a float's exponent. Nine instructions on the FMA and ALU pipes (ex2_fma)
 * instead of one MUFU instruction that holds the MUFU for eight cycles: POLY of every 16 scores a thread holds go
 * that way (POLY = 2: 1 in 8), the hook exp2_score.
 * Why: the MUFU (the "XU" pipe, 16 exponentials per clock per SM) is as slow as the tensor cores here. At D = 128 a
 * score costs 4D = 512 FLOP of products and one exponential, and the tensor cores do 8192 FP8 FLOP per clock per SM:
 * 8192 / 512 = 16, the MUFU's rate. In 16 bits the products take twice as long; in FP8 they no longer hide it.
 * Nsight Compute on kernel 16 (D = 128, N = 8192): the tensor pipe and the MUFU each busy 45% of the time, and the
 * exponentials 48% of a consumer warp's samples: about 1100 of the 2400 cycles a tile takes, twice the 528 that one
 * warp's 66 MUFU instructions need (4 lanes per scheduler), so the two consumer warps of a scheduler were in their
 * exponentials at once.
 * What it costs: 8 more issue slots per such score (the issue slots were 44% busy), four constants. That is why only
 * 1 in 8: more costs issue slots faster than it frees the MUFU (2 in 8 gained nothing, 5 in 8 lost 11%): the issue
 * slots are the next wall, one eighth away. Built only for sm_90a.
 * Measured: H200, D = 128, N = 4096 / 8192 / 16384: +1.8% / +2.2% / +2.3% over kernel 16 (792.8 / 790.7 / 808.0
 * TFLOP/s), 1.0-1.4% slower at D = 64 (the H100: +2-4% at D = 128): a small step, near the runs' spread; the sweep,
 * the profiles and the runs: fp8/RESULTS.md#kernel-17.
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

/* Kernel 17's policy: kernel 16's with one hook replaced, the exponential of a score. */
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
