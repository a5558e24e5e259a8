/*
 * Decode kernel 12: one block an SM at short splits.
 *
 * Extends decode kernel 11 (decode11_merge_round.cu). The idea: kernels 3-11 split the keys into as many parts as fill
 * the GPU at its full occupancy: at D = 128, two blocks an SM (104 KB of stages each), so at B = 1 and 8 KV heads
 * S = 32 splits from L = 2048 on, a tile each. Where the splits at full occupancy would hold fewer than 8 tiles each,
 * kernel 12 takes as many splits as fill the SMs with one block each (sms / (B x heads x row chunks)), each twice as
 * long, if that grid still fills 7/8 of the SMs (at B x heads = 72 one split each would leave 60 of 132 idle: there
 * the rule is not taken). At B = 1, 32/8 heads, S = 16 up to L = 8192 (32 from 16384 on: 8 tiles a split), at 32 heads
 * S = 4 up to L = 2048. A choice of the launcher (short_splits, below); the kernel is kernel 11's, a block still holds
 * its three stages, and an SM runs one.
 * Why: a split of one tile is all prologue and epilogue: the lengths read, Q's fragments, the mbarriers, one tile,
 * the four warps' states merged through shared memory, the state written, to be read back and merged once more by
 * the merge kernel, 32 states a row. Nsight Compute on the H200 (kernel 11, B = 1, 32/8 heads, L = 2048): the split
 * kernel 10.9 us for 8.4 MB, its warps waiting on the first tile's mbarrier and, next, in the shared-memory merge.
 * What it costs: half the loads in flight on an SM, where a split's keys are few enough that the step waits on
 * latency, not on the bandwidth. The threshold (8 tiles) comes from sweeps at D = 128 with S capped: at 32/8 heads one
 * block an SM was faster up to L = 16384 and slower from 32768; at 32 heads faster at L = 1024, level at 2048, slower
 * at 4096. Measured at B = 1 only; B = 8 and 64 keep their grids.
 * Measured: H200, fp16, D = 128, B = 1: 32/8 heads +14.0% over kernel 11 at L = 2048 (10.79 us against 12.31), +7.2% at
 * 8192, the same grid from 16384; 32 heads +8.6% at L = 1024; the runs: RESULTS.md#decode-12.
 */
#ifndef RUNG
#define RUNG 12          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "decode11_merge_round.cu"

// --- the idea -------------------------------------------------------------------------------------

struct Dec12OneBlock : Dec11MergeRound {
    /* Splits of fewer than 8 tiles (512 keys) are all prologue and epilogue: there one block an SM, fewer splits of
     * more keys each, where such a grid still fills 7/8 of the SMs. Not where --splits forces S. */
    static void short_splits(const DecodeArgs *a, DecGrid *gr, int sms, long per_sm, long base, long *S)
    {
        if (a->splits <= 0 && per_sm > 1 && *S > 1 && (gr->tiles + *S - 1) / *S < 8 && 8 * base * (sms / base) >= 7L * sms) {
            *S = sms / base;
            gr->one = true;
        }
    }
    static const char *merge_words(const DecGrid &gr)
    {
        return gr.S != 1 && gr.one ? ", one block an SM (short splits), then the merge kernel, launched early, its loads in one round"
                                   : Dec11MergeRound::merge_words(gr);
    }
};

// --- the launcher ---------------------------------------------------------------------------------

#if RUNG == 12
static int dk12_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec12OneBlock>(12, a, ws, s); }
static size_t dk12_workspace(const DecodeArgs *a) { return dec_workspace<Dec12OneBlock>(a); }
static void dk12_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec12OneBlock>(a, buf, n); }

static const DecodeKernel decode12 = {
    .id = 12, .extends = 11, .name = "one block an SM",
    .idea = "short splits merged into fewer: one block an SM where a split would be short",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk12_workspace, .launch = dk12_launch, .describe = dk12_describe,
    .unavailable = dec_bulk_unavailable,
};
DECODE_REGISTER(decode12);
#endif
