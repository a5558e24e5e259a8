/*
 * Decode kernel 9: the merge with its loads in flight.
 *
 * Extends decode kernel 8 (decode08_bulk_copies.cu). The idea: split-KV (kernel 3) ends in a second kernel,
 * decode_merge: one block per new row, D threads, each running step 04's merge over the S splits' states, m = max m_s,
 * then l = sum e^(m_s - m) l_s and o = sum e^(m_s - m) o_s. Written as plain loops over s, each iteration's loads (m_s,
 * l_s, and a float of o_s) are issued after the last's have returned. Kernel 9 unrolls both loops 8 times
 * (DecMerge8: `#pragma unroll 8`), so that 8 splits' loads are in flight together; the additions are the same and in
 * the same order, so O is kernel 8's bit for bit.
 * Why: S round trips to L2 of several hundred cycles each, on only B Hq n blocks (32 at B = 1), are the tail of every
 * decode step where the split is deep: grouped heads at B = 1 (8 KV heads: S = 32 splits to fill 132 SMs).
 * What it costs: nothing but code size (the merge's loops 8 wide, a remainder loop after them); nothing to gain where
 * S is small (the serving batch, B = 64: S = 1, no merge at all).
 * Measured: H200, fp16, D = 128: B = 1, 32 query heads over 8 KV heads (S = 32), L = 32768 45.7 us against kernel 8's
 * 49.8 (+9%), L = 4096 +30%; B = 64 and B = 8 level; the runs: RESULTS.md#decode-9.
 */
#ifndef RUNG
#define RUNG 9           // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "decode08_bulk_copies.cu"

// --- the idea -------------------------------------------------------------------------------------

/* decode_merge's loops over the splits unrolled 8 times: 8 splits' loads in flight at once. */
struct DecMerge8 : DecMerge {
    static constexpr int UNROLL = 8;
};

struct Dec9Merge8 : Dec8Bulk {
    using Merge = DecMerge8;
};

// --- the launcher ---------------------------------------------------------------------------------

#if RUNG == 9
static int dk9_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec9Merge8>(9, a, ws, s); }
static size_t dk9_workspace(const DecodeArgs *a) { return dec_workspace<Dec9Merge8>(a); }
static void dk9_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec9Merge8>(a, buf, n); }

static const DecodeKernel decode9 = {
    .id = 9, .extends = 8, .name = "merge in flight",
    .idea = "the merge's loads of the splits' states 8 at a time",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk9_workspace, .launch = dk9_launch, .describe = dk9_describe, .unavailable = dec_bulk_unavailable,
};
DECODE_REGISTER(decode9);
#endif
