/*
 * Kernel 45: kernel 30 made persistent where rows are short: one block per SM walking its share of the row tiles.
 *
 * Extends kernel 30 (kernel30_fp8_wide_keys.cu). The idea: forward kernel 18's, in FP8, where it pays. A block pays
 * once for its start and its end: its mbarriers set up, Q loaded into registers, its first K tile on its way before
 * the first product, and at the end its last P V and O's store with nothing behind them. Kernel 30 launches one block
 * per (head, row tile) and pays that for every row tile; here, up to N = 2048 at D = 64 and 1024 at D = 128, the
 * grid is one block per SM and block b takes work items b, b + grid, b + 2 grid, ... (in a block per item's order:
 * causal, the longest first), its producer loading the next item's K and V while the consumers finish this one. The
 * ring of stages runs on from item to item: producer and consumers count the key tiles of the items behind them (kt
 * in the body), whose parities the next item's waits continue. No counter: the items cost the same when not causal,
 * and a launch needs nothing reset (a CUDA graph replays it as it is). Past those N it launches kernel 30's grid.
 * Its code is the policy below: kernel 16's body's hook PERSISTENT; the body walks the items, fp8_launch_d sizes the
 * grid, and the launcher here picks the schedule by N.
 * Why: at N = 512 a row tile visits 3 or 4 key tiles, so what a block pays once is a large share of its time; at
 * N = 16384 it visits 86 and it is not. Persistent at every N (kernel 31, fp8/RESULTS.md#kernel-31-tried), kernel 30
 * loses 3-8% from N = 4096 (up to 11% causal): the producer's loop over items needs more registers, and the
 * consumers' loop with the ring's position carried runs slower. The crossings measured there, not causal, are
 * between N = 2048 and 4096 at D = 64 and between 1024 and 2048 at D = 128: the two limits above.
 * What it costs: the producer's 40 (56 at D = 64) registers, taken from the consumers (232, 152), where persistent;
 * the round robin does not balance causal rows, whose lengths differ (forward kernel 18 takes tickets from a counter
 * for that); Q's load at an item's start is not hidden. Built only for sm_90a.
 * Measured: H200, two runs, against kernel 30 in the same run: +18.3% at N = 512 and +6.6% / +6.8% at 1024, D = 64
 * (384.4 TFLOP/s at N = 512, 15.5% past kernel 15, the fastest FP8 kernel there before); causal +19.6%, +11.9%,
 * +5.7% up to N = 2048; at D = 128 +5.5% to +6.3% at N = 512, +1.6% / +1.7% at 1024; past the limits kernel 30's
 * code, within the spread. The runs, checks and plant: fp8/RESULTS.md#kernel-45.
 */
#ifndef RUNG
#define RUNG 45          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel30_fp8_wide_keys.cu"  // the rung this one extends (kernel 30): its body and its policy

// --- the idea ------------------------------------------------------------------

/* Kernel 45's policy: kernel 30's, one block per SM walking the items, where rows are at most persistent_to(D) long. */
struct Fp8ShortRows : Fp8Wide {
    static constexpr bool PERSISTENT = true;
    static constexpr long persistent_to(long D) { return D == 64 ? 2048 : 1024; }
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 45
template <int D> using K45 = Fp8PP<D, Fp8ShortRows>;

static int k45_launch(const Fp8Args *a, void *stream)
{
    if (a->N <= Fp8ShortRows::persistent_to(a->D)) return fp8_pingpong_launch<Fp8ShortRows>(45, a, stream);
    return fp8_pingpong_launch<Fp8Wide>(45, a, stream);   // long rows: kernel 30's grid, a block per item
}

static void k45_describe(long D, char *buf, size_t n)
{
    snprintf(buf, n, "kernel 30 (BR=%d BC=%d) persistent up to N = %ld: one block per SM, each taking every grid-th "
             "row tile, %zu bytes of shared memory", D == 64 ? K45<64>::BR : K45<128>::BR,
             D == 64 ? K45<64>::BC : K45<128>::BC, Fp8ShortRows::persistent_to(D),
             D == 64 ? K45<64>::bytes : K45<128>::bytes);
}

static const Fp8Kernel kernel45 = {
    .id = 45, .extends = 30, .name = "fp8 short rows",
    .idea = "where rows are short, one block per SM walking its share of the row tiles, the next tile's K and V loading under this one's end",
    .launch = k45_launch, .describe = k45_describe, .unavailable = fp8_unavailable, .persistent = 1,
};
FP8_REGISTER(kernel45);
#endif
