/*
 * Decode kernel 6: the stages chosen for the SM's loads in flight.
 *
 * Extends decode kernel 5 (decode05_paged.cu). The idea: a decode step is a read of the cache, and an SM reads at the
 * device's rate only with enough bytes in flight. Kernel 5 buys them per block: 3 cp.async stages, two K/V tiles of
 * 64 keys in flight while a third is used, 104 KB of shared memory at D = 128, so two blocks (8 warps) an SM. That is
 * right while the split has to make the blocks (one sequence: 32 heads x a few splits), and wrong at a serving batch,
 * where B x heads blocks fill the GPU many times over with no split at all. Kernel 6 takes two stages (one tile in
 * flight a block, 70 KB) where the grid fills every SM without a split even at two stages' occupancy: B x heads x row
 * chunks >= SMs x the blocks of two stages an SM holds (3 at D = 128): three blocks, 12 warps, an SM. Elsewhere it is
 * kernel 5. A choice of the launcher (fewer, below); the kernel is kernel 5's.
 * Why: at B = 64, 32 heads, L = 2048 (2048 blocks, 15.5 waves) Nsight Compute saw kernel 4 at 6.25% occupancy (4
 * warps an SM), 70% of the schedulers' cycles with no warp eligible, DRAM 62% busy.
 * What it costs: a block waits on each tile's copy with one tile in flight, not two; where the blocks are few (B = 8,
 * 32/8 heads, L = 8192: 64 blocks before the split) that loses (87.6 us against 79.8 for kernel 4 with two stages
 * there), so the rule keeps kernel 5's stages there.
 * Measured: H200, fp16, D = 128, pages of 64: B = 64, 32 heads, L = 2048 529.0 us against kernel 5's 553.4 (+4.6%),
 * 93% of the read bandwidth; elsewhere kernel 5 (within 0.5%); the runs: RESULTS.md#decode-6.
 */
#ifndef RUNG
#define RUNG 6           // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "decode05_paged.cu"

// --- the idea -------------------------------------------------------------------------------------

struct Dec6Occupancy : Dec5Paged {
    /* Two stages where kernel 5's do not fit, and where the grid fills every SM without a split even at two stages'
     * occupancy: B x heads x row chunks >= SMs x the blocks of two stages an SM holds (3 at D = 128 against kernel 5's
     * 2). Each block then keeps one tile in flight instead of two, but an SM runs 12 warps instead of 8, and the SM's
     * loads in flight are what a memory-bound step needs. */
    template <class P, int D, typename T> static bool fewer(const DecodeArgs *a)
    {
        if (Dec5Paged::fewer<P, D, T>(a)) return true;
        if (dec_per_sm<D, 2>() > dec_per_sm<D, P::NST>()) {
            int sms, smem_sm;
            dec_device(&sms, &smem_sm);
            const DecGrid gr = dec_grid<P, D, T>(a);
            if (a->B * gr.heads * gr.rchunks >= (long)sms * dec_per_sm<D, 2>()) return true;
        }
        return false;
    }
};

// --- the launcher ---------------------------------------------------------------------------------

#if RUNG == 6
static int dk6_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec6Occupancy>(6, a, ws, s); }
static size_t dk6_workspace(const DecodeArgs *a) { return dec_workspace<Dec6Occupancy>(a); }
static void dk6_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec6Occupancy>(a, buf, n); }

static const DecodeKernel decode6 = {
    .id = 6, .extends = 5, .name = "occupancy",
    .idea = "two stages, three blocks an SM, where the grid fills the GPU unsplit",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk6_workspace, .launch = dk6_launch, .describe = dk6_describe,
};
DECODE_REGISTER(decode6);
#endif
