/*
 * Extends: decode10_early_merge.cu; idea: the merge kernel's loads of its row's split states in one round instead of 8 at a time, twice
 * Code: decode.cuh with SPLIT = true, GROUPED = true, PAGED = true, NST = 3, OCC = true, LEAN = true, BULK = true, MERGE8 = true, EARLY = true, ROUND = true
 *
 * Decode kernel 11: the merge's loads in one round. Kernel 10 hid the merge kernel's launch under the split kernel's
 * last blocks; what is left of the merge is its reads. decode_merge (kernel 9's) reads the Sb states of its row 8
 * splits at a time, and twice: the m_s first, for m = max m_s, then m_s, l_s and o_s for the sums. At S = 32 that is
 * 8 trips to memory one after the other, once griddepcontrol.wait has returned, with nothing to hide them: Nsight
 * Compute on the H200 (B = 1, 32 query heads over 8 KV heads, kernel 10) gives decode_merge 7.4 us at L = 2048 and
 * 7.6 at 32768 against the split kernel's 10.6 and 39.4; 3.9 us at 32 heads, L = 4096 (S = 8). decode_merge_round
 * (decode.cuh) sets off every load first: each of the block's D threads its column of the first 32 splits' o_s into
 * registers, then thread s split s's m_s and l_s into shared memory; one barrier, and the sums. They are
 * decode_merge's, in its order, every thread walking the same m_s and l_s: O is kernel 10's bit for bit (--check
 * compares the two).
 *
 * What it costs: 32 registers a thread for the o_s in flight, 2 S floats of shared memory a merge block, and past 32
 * splits one more trip per 32. The split kernel is kernel 10's.
 *
 * Measured on the H200 (2026-11-27). Nsight Compute (the record's calls 2 and 3): decode_merge_round 4.1 us at B = 1,
 * 32/8 heads, L = 2048 and 32768 (decode_merge 7.4 and 7.6), 3.5 at 32 heads, L = 4096 (3.9). The step (call 5:
 * `./step05 --decode --bench`, fp16, D = 128, one new row, each kernel's 20 launches replayed from a CUDA graph,
 * interleaved), against kernel 10, at 32/8 heads (S = 32; 16 at L = 1024): L = 1024 9.68 us against 10.36 (+7.0%),
 * 2048 12.31 against 13.78 (+11.9%), 4096 14.13 against 15.45 (+9.3%), 8192 +7.3%, 16384 +4.8%, 32768 41.74 against
 * 42.94 (+2.9%), 131072 +1.7%; at 32 heads (S = 8) level to +1%; B = 8, 32/8 heads, L = 8192 68.7 against 69.2.
 */
#include "decode.cuh"

typedef DecodeFlags<true, true, true, 3, true, true, true, true, true, true> Dec11;

static int dk11_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec11>(11, a, ws, s); }
static size_t dk11_workspace(const DecodeArgs *a) { return dec_workspace<Dec11>(a); }
static void dk11_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec11>(a, buf, n); }

static const DecodeKernel decode11 = {
    .id = 11, .extends = 10, .name = "merge round",
    .idea = "the merge kernel's loads of every split's state at once",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk11_workspace, .launch = dk11_launch, .describe = dk11_describe,
    .unavailable = dec_bulk_unavailable,
};
DECODE_REGISTER(decode11);
