/*
 * Extends: decode11_merge_round.cu; idea: where the splits would be short (fewer than 8 tiles), one block an SM: fewer splits, each of more keys
 * Code: decode.cuh with SPLIT = true, GROUPED = true, PAGED = true, NST = 3, OCC = true, LEAN = true, BULK = true, MERGE8 = true, EARLY = true, ROUND = true, ONE = true
 *
 * Decode kernel 12: one block an SM at short splits. Kernels 3-11 split the keys into as many parts as fill the GPU
 * at its full occupancy: at D = 128, two blocks an SM (104 KB of stages each), so at B = 1 and 8 KV heads S = 32
 * splits from L = 2048 on (16 at L = 1024, a tile each). At L = 2048 a split is one tile of 64 keys, and a block is
 * then all prologue and epilogue: the lengths read, Q's fragments, the mbarriers, one tile, the four warps' states
 * merged through shared memory, the state written, to be read back and merged once more by the merge kernel, 32
 * states a row. Nsight Compute on the H200 (kernel 11, B = 1, 32/8 heads, L = 2048): the split kernel 10.9 us for 8.4
 * MB, its warps waiting on the first tile's mbarrier and, next, in the shared-memory merge. cuDNN's decode (Nsight
 * Compute, the record's call 4): its split kernel on 128 blocks at L = 2048 (7.3 us) and on 256 at L = 32768.
 *
 * The launcher's rule (dec_grid): where the splits at full occupancy would hold fewer than 8 tiles each, as many
 * splits as fill the SMs with one block each (sms / (B x heads x row chunks)), if that grid still fills 7/8 of the
 * SMs (at B x heads = 72 one split each would leave 60 of 132 idle: there the rule is not taken). At B = 1, 32/8
 * heads, S = 16 up to L = 8192 (32 from 16384 on: 8 tiles a split), at 32 heads S = 4 up to L = 2048. The kernel is
 * kernel 11's; a block still holds its three stages, and an SM runs one.
 *
 * What it costs: half the loads in flight on an SM, where a split's keys are few enough that the step waits on
 * latency, not on the bandwidth. The threshold (8 tiles) comes from sweeps at D = 128 on the H200 with S capped (the
 * record: kernel 11 at 32/8 heads, kernel 10 at 32 heads): at 32/8 heads one block an SM was faster up to L = 16384
 * (0.7 us there) and slower from 32768 (1.3 us); at 32 heads faster at L = 1024, level at 2048, 1.1 us slower at
 * 4096. 32/8 heads at L = 16384 and 32 heads at 4096 both have 8 tiles a split at two blocks an SM: the rule keeps
 * two there, and leaves the 0.7 us. Measured at B = 1 only; B = 8 and 64 keep their grids.
 *
 * Measured on the H200 (the record's call 5, kernel 11's numbers' call, graph-replayed, interleaved): against kernel
 * 11 at B = 1, 32/8 heads, L = 1024 the same grid (9.56 us against 9.68: 16 splits of a tile in both), 2048 10.79
 * against 12.31 (+14.0%), 4096 12.58 against 14.13 (+12.3%), 8192 16.99 against 18.21 (+7.2%), from 16384 the same
 * grid (within 1.3%); 32 heads, L = 1024 10.82 against 11.75 (+8.6%), 2048 15.12 against 15.82 (+4.7%), from 4096 the
 * same grid. cuDNN in that call: 7.88, 8.79, 11.65, 15.61 us at 32/8 heads, L = 1024-8192 (cuDNN's time 81-93% of
 * ours), 11.15 at 32 heads, L = 1024 (103% of kernel 12's: level within the call's 2.4% spread between identical
 * kernels).
 */
#include "decode.cuh"

typedef DecodeFlags<true, true, true, 3, true, true, true, true, true, true, true> Dec12;

static int dk12_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec12>(12, a, ws, s); }
static size_t dk12_workspace(const DecodeArgs *a) { return dec_workspace<Dec12>(a); }
static void dk12_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec12>(a, buf, n); }

static const DecodeKernel decode12 = {
    .id = 12, .extends = 11, .name = "one block an SM",
    .idea = "short splits merged into fewer: one block an SM where a split would be short",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk12_workspace, .launch = dk12_launch, .describe = dk12_describe,
    .unavailable = dec_bulk_unavailable,
};
DECODE_REGISTER(decode12);
