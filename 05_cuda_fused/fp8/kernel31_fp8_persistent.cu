/*
 * Kernel 31: kernel 30 made persistent: one block per SM, each walking its share of the row tiles.
 *
 * Extends kernel 30 (kernel30_fp8_wide_keys.cu). The idea: forward kernel 18's, in FP8: a block's start and end are
 * paid once per SM, not once per row tile. The grid is one block per SM; block b takes work items b, b + grid, b +
 * 2 grid, ... (a head's row tile each, in block_tile's order: causal, the longest first), its producer loading the
 * next item's K and V while the consumers finish this one's last P V and store its O. No counter: every item costs
 * the same when not causal, so a fixed share is as good as a queue, and a launch needs nothing reset (a CUDA graph
 * replays it as it is). The ring of stages runs on from item to item: producer and consumers count the key tiles of
 * the items behind them (kt in the body), whose parities the next item's waits continue.
 * Its code is the policy below: one hook of kernel 16's body, PERSISTENT; the body walks the items, the launcher
 * sizes the grid.
 * Why: at D = 128 kernel 30 runs at 836 TFLOP/s at N = 4096 and 942 at 16384, the same 2048 blocks (15.5 rounds of
 * the 132 SMs) each over 22 or 86 key tiles: the difference is what a block pays once, about four key tiles' time,
 * and most of it is the SM idle between one block's end and the next one's first product (mbarriers set up, Q
 * loaded, the first K tile on its way).
 * What it costs: the round robin cannot balance causal rows (their lengths differ; forward kernel 18 takes tickets
 * from a counter for that), and Q's load at an item's start is not hidden. Built only for sm_90a.
 */
#ifndef RUNG
#define RUNG 31          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel30_fp8_wide_keys.cu"  // the rung this one extends (kernel 30): its body and its policy

// --- the idea ------------------------------------------------------------------

/* Kernel 31's policy: kernel 30's, one block per SM walking the items. */
struct Fp8Persist : Fp8Wide {
    static constexpr bool PERSISTENT = true;
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 31
template <int D> using K31 = Fp8PP<D, Fp8Persist>;

static int k31_launch(const Fp8Args *a, void *stream) { return fp8_pingpong_launch<Fp8Persist>(31, a, stream); }

static void k31_describe(long D, char *buf, size_t n)
{
    snprintf(buf, n, "kernel 30 (BR=%d BC=%d) persistent: one block per SM, each taking every grid-th row tile, %zu bytes of "
             "shared memory", D == 64 ? K31<64>::BR : K31<128>::BR, D == 64 ? K31<64>::BC : K31<128>::BC,
             D == 64 ? K31<64>::bytes : K31<128>::bytes);
}

static const Fp8Kernel kernel31 = {
    .id = 31, .extends = 30, .name = "fp8 persistent",
    .idea = "one block per SM walking its share of the row tiles, the next tile's K and V loading under this one's end",
    .launch = k31_launch, .describe = k31_describe, .unavailable = fp8_unavailable, .persistent = 1,
};
FP8_REGISTER(kernel31);
#endif
