/*
 * Kernel 46: kernel 45 on kernel 28's 128-key tiles at D = 128 where rows are short.
 *
 * Extends kernel 45 (kernel45_fp8_short_rows.cu). The idea: where rows are short, the tile and the schedule that
 * each win there, together. At D = 128 kernel 45 is persistent on kernel 30's 192-key tiles, which lose where rows
 * are short: 512 or 1024 keys do not fill whole 192-key tiles (11% of the keys a row computes lie past N), and
 * kernel 28's 128-key tiles stay ahead there. Here, up to N = 2048 at D = 128 (4096 causal), the persistent grid
 * walks 128-key tiles (kernel 28's at D = 128, one K block a tile); past it, and at D = 64, it is kernel 45.
 * Its code is the policy below, kernel 45's with the hook keys back to one K block, and the launcher's pick by N.
 * Why: what a block pays once (its mbarriers, Q, the first K tile, the last P V and O's store) is a large share of
 * a short row's time, and persistent, kernel 45 pays it once an SM; kernel 28's tiles have nothing past N at N = 512
 * or 1024, and with 64 registers of S a thread (not 96) its consumers keep room for the persistent loop's state
 * (inferred, not profiled: kernel 31, persistent on 192-key tiles, lost in its loop, fp8/RESULTS.md#kernel-31-tried).
 * What it costs: one more instantiation of the body (the 128-key persistent one at D = 128); the causal rows'
 * balance as kernel 45's (a round robin, no counter); from N = 8192 the persistent loop is slower than kernel 28's
 * grid (1.4-2.6%, causal 3-6%), so it stops at the limits above. Built only for sm_90a.
 * Measured: H200, D = 128, two runs with it persistent at every N, against kernel 28 (the fastest FP8 kernel there up
 * to N = 2048 before) in the same run: +14.3% at N = 512 (497.4 / 498.0 TFLOP/s), +7.2% / +7.6% at 1024, +3.6% /
 * +3.1% at 2048, +0.1% at 4096; causal +8.2% / +8.5%, +6.4% / +6.6%, +7.9%, +2.7% / +3.1% up to 4096. Over kernel 45:
 * +16% / +17% at N = 512, +15% at 1024. The runs, checks and plant: fp8/RESULTS.md#kernel-46.
 */
#ifndef RUNG
#define RUNG 46          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel45_fp8_short_rows.cu"  // the rung this one extends (kernel 45): its body and its policies

// --- the idea ------------------------------------------------------------------

/* Kernel 46's policy at D = 128: kernel 45's, one block per SM walking the items, on one K block a tile (kernel
 * 28's). Persistent up to persistent_to(D, causal) keys a row: at D = 128 the crossings measured with it persistent
 * at every N (past 2048 it is level with kernel 28 at 4096 and behind from 8192; causal, ahead up to 4096); at
 * D = 64 kernel 45's limit. */
struct Fp8ShortKeys : Fp8ShortRows {
    __host__ __device__ static constexpr int keys(int D) { return (void)D, FP8_KBLOCK; }
    static constexpr long persistent_to(long D, int causal)
    {
        return D == 64 ? Fp8ShortRows::persistent_to(64) : causal ? 4096 : 2048;
    }
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 46
static int k46_launch(const Fp8Args *a, void *stream)
{
    if (a->N <= Fp8ShortKeys::persistent_to(a->D, a->causal))   // short rows: kernel 45's at D = 64, 128-key tiles at 128
        return fp8_pingpong_launch<Fp8ShortRows, Fp8ShortKeys>(46, a, stream);
    return fp8_pingpong_launch<Fp8Wide>(46, a, stream);   // long rows: kernel 30's grid, a block per item
}

static void k46_describe(long D, char *buf, size_t n)
{
    using C = Fp8PP<128, Fp8ShortKeys>;
    if (D == 128)
        snprintf(buf, n, "kernel 28 (BR=%d BC=%d) persistent up to N = %ld (causal %ld), kernel 30 (BC=%d) past it: one "
                 "block per SM, each taking every grid-th row tile, %zu bytes of shared memory", C::BR, C::BC,
                 Fp8ShortKeys::persistent_to(128, 0), Fp8ShortKeys::persistent_to(128, 1), Fp8PP<128, Fp8Wide>::BC, C::bytes);
    else
        snprintf(buf, n, "kernel 45 (BR=%d BC=%d, persistent up to N = %ld), %zu bytes of shared memory",
                 Fp8PP<64, Fp8ShortRows>::BR, Fp8PP<64, Fp8ShortRows>::BC, Fp8ShortRows::persistent_to(64),
                 Fp8PP<64, Fp8ShortRows>::bytes);
}

static const Fp8Kernel kernel46 = {
    .id = 46, .extends = 45, .name = "fp8 short keys",
    .idea = "at D = 128 where rows are short, kernel 45's persistent grid on kernel 28's 128-key tiles",
    .launch = k46_launch, .describe = k46_describe, .unavailable = fp8_unavailable, .persistent = 1,
    .persistent_of = 28,   // at both D its persistent path computes kernel 28's tiles (at D = 64, 28's are 30's and 45's)
};
FP8_REGISTER(kernel46);
#endif
