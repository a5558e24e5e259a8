/*
 * Extends: decode02_forward.cu; idea: the keys split across blocks and warps, each ending with (m, l, o), the states merged
 * Code: decode.cuh with SPLIT = true, GROUPED = false, PAGED = false, NST = 4
 *
 * Decode kernel 3: split-KV (flash-decoding). The keys of each (sequence, query head) are split into S
 * chunks of whole K/V tiles, one block each, and inside a block the 4 warps split every tile's 64 keys
 * (16 each) instead of splitting rows. Every warp ends with the tile loop's state (m, l, o) over its
 * keys; the block merges its warps' states in shared memory, and a second kernel merges the blocks':
 * m = max m_s, l = sum e^(m_s - m) l_s, O = sum e^(m_s - m) o_s / l, step 04's flash_merge_cpu.
 *
 * Why: kernel 2 gives B = 1 with 32 heads 32 blocks; S is chosen so that the grid fills the GPU once (as
 * many blocks as the SMs hold at a time, decode.cuh: dec_grid), and every warp computes. A split block
 * streams one long run of tiles alone on its SM, so it keeps 3 in flight (4 stages, 139 KB at D = 128,
 * one block an SM) where kernel 2 keeps 2 with two blocks an SM.
 * What it costs: the partial states, B Hq n S (D + 2) floats written and read back once (at S = 4,
 * D = 128: under 1% of the cache's bytes), and the merge's launch.
 *
 * Measured on the H100 (./step05 --decode --bench, fp16, D = 128): B = 1, 32 heads, L = 32768: 195 us,
 * 2748 GB/s, 90% of the measured read bandwidth, 5.3x kernel 2; L = 4096: 34.5 us, 4.2x; L = 131072:
 * 736 us, 96%. With 3 stages (two blocks an SM, measured beside it) 1-5% slower at the large caches.
 * README.md has the table.
 */
#include "decode.cuh"

typedef DecodeFlags<true, false, false, 4> Dec3;

static int dk3_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec3>(3, a, ws, s); }
static size_t dk3_workspace(const DecodeArgs *a) { return dec_workspace<Dec3>(a); }
static void dk3_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec3>(a, buf, n); }

static const DecodeKernel decode3 = {
    .id = 3, .extends = 2, .name = "split-KV",
    .idea = "the keys split across blocks and warps, the (m, l, o) states merged",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .workspace = dk3_workspace,
    .launch = dk3_launch, .describe = dk3_describe,
};
DECODE_REGISTER(decode3);
