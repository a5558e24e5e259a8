/*
 * Extends: decode05_paged.cu; idea: where the sequences and heads alone fill the GPU, two stages so that three blocks share an SM
 * Code: decode.cuh with SPLIT = true, GROUPED = true, PAGED = true, NST = 3, OCC = true
 *
 * Decode kernel 6: the stages chosen for the SM's loads in flight. A decode step is a read of the cache, and
 * an SM reads at the device's rate only with enough bytes in flight. Kernel 5 buys them per block: 3 cp.async
 * stages, two K/V tiles of 64 keys in flight while a third is used, 104 KB of shared memory at D = 128, so two
 * blocks (8 warps) an SM; kernel 4's 4 stages take 139 KB, one block (4 warps) an SM. That is right while the
 * split has to make the blocks (one sequence: 32 heads x a few splits), and wrong at a serving batch, where
 * B x heads blocks fill the GPU many times over with no split at all: at B = 64, 32 heads, L = 2048 (2048
 * blocks, 15.5 waves) Nsight Compute saw kernel 4 at 6.25% occupancy (4 warps an SM), 70% of the schedulers'
 * cycles with no warp eligible, DRAM 62% busy. Kernel 6 takes two stages (one tile in flight a block, 70 KB)
 * where the grid fills every SM without a split even at two stages' occupancy (B x heads x row chunks >= SMs x
 * 3 at D = 128, dec_fewer in decode.cuh): three blocks, 12 warps, an SM. Elsewhere it is kernel 5.
 *
 * What it costs: a block waits on each tile's copy with one tile in flight, not two; where the blocks are few
 * (B = 8, 32/8 heads, L = 8192: 64 blocks before the split) that loses (kernel 4 measured with two stages
 * there: 87.6 us against 79.8), so the rule keeps kernel 5's stages there.
 *
 * Measured on the H200 (2026-11-26, `./step05 --decode --bench`, fp16, D = 128, one new row, pages of 64, the
 * kernels interleaved): B = 64, 32 heads, L = 2048 (2.15 GB): 529.0 us against kernel 5's 553.4 (+4.6%), 4060 GB/s,
 * 93% of the read bandwidth measured in the same run; at the other anchor shapes the rule keeps three stages and
 * kernel 6 is kernel 5 (within 0.5%). cuDNN in the same call (plots/sdpa_decode.py): 474.7 us at B = 64, still 10%
 * ahead.
 */
#include "decode.cuh"

typedef DecodeFlags<true, true, true, 3, true> Dec6;

static int dk6_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec6>(6, a, ws, s); }
static size_t dk6_workspace(const DecodeArgs *a) { return dec_workspace<Dec6>(a); }
static void dk6_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec6>(a, buf, n); }

static const DecodeKernel decode6 = {
    .id = 6, .extends = 5, .name = "occupancy",
    .idea = "two stages, three blocks an SM, where the grid fills the GPU unsplit",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk6_workspace, .launch = dk6_launch, .describe = dk6_describe,
};
DECODE_REGISTER(decode6);
