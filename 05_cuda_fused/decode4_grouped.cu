/*
 * Decode kernel 4: grouped heads. One block per (sequence, KV head, split): the K/V tiles of a KV head
 * are loaded once and serve all g = Hq / Hkv query heads that read them, their g x n rows side by side
 * in the warps' 16-row fragments (grouped-query attention; multi-query at Hkv = 1).
 * Extends: decode3_split_kv.cu (the same split and merge; a block's rows are a group's, not a head's).
 *
 * Why: kernel 3 runs one block per query head, so each KV tile is read g times, from memory or, if the
 * g blocks happen to run together, from L2. Here it is read once and the tensor cores, which had 15 of
 * 16 rows padding at n = 1, get g of 16 real. What it costs: nothing more; at g n > 16 a warp pair or
 * quad shares a tile's keys (decode.cuh: R row blocks, 4 / R key slices), past 64 rows the group is cut
 * into row chunks of 64 that each read the tiles. The algorithm: decode.cuh, DecodeFlags<1, 1, 0>.
 */
#include "decode.cuh"

typedef DecodeFlags<true, true, false, 4> Dec4;

static int dk4_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec4>(4, a, ws, s); }
static size_t dk4_workspace(const DecodeArgs *a) { return dec_workspace<Dec4>(a); }
static void dk4_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec4>(a, buf, n); }

static const DecodeKernel decode4 = {4, "grouped heads", "one block per KV head: its tiles read once for every query head sharing it",
                                     (1u << DT_FP16) | (1u << DT_BF16), dec_supports, 0, dk4_workspace, dk4_launch,
                                     dk4_describe, NULL};
DECODE_REGISTER(decode4);
