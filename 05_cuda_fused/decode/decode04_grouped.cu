/*
 * Extends: decode03_split_kv.cu; idea: one block per KV head, its tiles read once for all the query heads that share it
 * Code: decode.cuh with SPLIT = true, GROUPED = true, PAGED = false, NST = 4
 *
 * Decode kernel 4: grouped heads. One block per (sequence, KV head, split): the K/V tiles of a KV head
 * are loaded once and serve all g = Hq / Hkv query heads that read them, their g x n rows side by side
 * in the warps' 16-row fragments (grouped-query attention; multi-query at Hkv = 1).
 *
 * Why: kernel 3 runs one block per query head, so each KV tile is read g times, from memory or, if the
 * g blocks happen to run together, from L2. Here it is read once and the tensor cores, which had 15 of
 * 16 rows padding at n = 1, get g of 16 real. What it costs: nothing more; at g n > 16 a warp pair or
 * quad shares a tile's keys (decode.cuh: R row blocks, 4 / R key slices), past 64 rows the group is cut
 * into row chunks of 64 that each read the tiles.
 *
 * Measured on the H100 (./step05 --decode --bench, fp16, D = 128, 32 query heads over 8 KV heads): B = 1,
 * L = 32768: 60.3 us, 2225 GB/s of cache, 2.2x kernel 3 (133.9 us); B = 8, L = 8192: 105.3 us, 2548
 * GB/s, 2.4x. With multi-head (g = 1) it is kernel 3. README.md has the table.
 */
#include "decode.cuh"

typedef DecodeFlags<true, true, false, 4> Dec4;

static int dk4_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec4>(4, a, ws, s); }
static size_t dk4_workspace(const DecodeArgs *a) { return dec_workspace<Dec4>(a); }
static void dk4_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec4>(a, buf, n); }

static const DecodeKernel decode4 = {
    .id = 4, .extends = 3, .name = "grouped heads",
    .idea = "one block per KV head: its tiles read once for every query head sharing it",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .workspace = dk4_workspace,
    .launch = dk4_launch, .describe = dk4_describe,
};
DECODE_REGISTER(decode4);
