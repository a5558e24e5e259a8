/*
 * Extends: decode08_bulk_copies.cu; idea: the merge kernel's loads of the S splits' states issued 8 at a time, not one after another
 * Code: decode.cuh with SPLIT = true, GROUPED = true, PAGED = true, NST = 3, OCC = true, LEAN = true, BULK = true, MERGE8 = true
 *
 * Decode kernel 9: the merge with its loads in flight. Split-KV (kernel 3) ends in a second kernel, decode_merge:
 * one block per new row, D threads, each running step 04's merge over the S splits' states, m = max m_s, then
 * l = sum e^(m_s - m) l_s and o = sum e^(m_s - m) o_s. Written as plain loops over s, each iteration's loads
 * (m_s, l_s, and a float of o_s) wait for the one before to be issued: S round trips to L2 of several hundred
 * cycles each, on only B Hq n blocks, 32 at B = 1. Where the split is deep that is the tail of every decode step:
 * grouped heads at B = 1 (8 KV heads: S = 32 splits to fill 132 SMs) spend it on 32 rows. Kernel 9 unrolls both
 * loops 8 times (`#pragma unroll 8`), so that 8 splits' loads are in flight together; the additions are the same
 * and in the same order, so O is kernel 8's bit for bit.
 *
 * What it costs: nothing but code size (the merge's loops 8 wide, a remainder loop after them); nothing to gain where
 * S is small (the serving batch, B = 64: S = 1, no merge at all).
 *
 * Measured on the H200 (2026-11-26, `./step05 --decode --bench`, fp16, D = 128, one new row, pages of 64, the
 * kernels interleaved): B = 1, 32 query heads over 8 KV heads (S = 32): L = 32768 45.7 us against kernel 8's 49.8
 * (+9%), L = 4096 18.1 against 23.5 (+30%), L = 131072 136.3 against 141.3 (+4%); 32 heads (S = 8): L = 1024 14.1
 * against 15.5, L = 32768 132.8 against 134.7; B = 64 (no merge) and B = 8 level (487.5 and 486.3, 71.7 and 71.2).
 * cuDNN in the same call: 22.5 us at L = 4096 grouped, 40.8 at L = 32768 (kernel 9 12% behind); that 22.5 was
 * PyTorch's time per call on the host, timed back to back: replayed from a CUDA graph (2026-11-27) cuDNN takes 11.7
 * us there against kernel 9's 18.0. Before it was a kernel, the unrolled merge alone (an environment switch, kernels 3-8) measured 50.6 ->
 * 45.6 us at 32/8 heads, L = 32768, on another H200.
 */
#include "decode.cuh"

typedef DecodeFlags<true, true, true, 3, true, true, true, true> Dec9;

static int dk9_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec9>(9, a, ws, s); }
static size_t dk9_workspace(const DecodeArgs *a) { return dec_workspace<Dec9>(a); }
static void dk9_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec9>(a, buf, n); }

static const DecodeKernel decode9 = {
    .id = 9, .extends = 8, .name = "merge in flight",
    .idea = "the merge's loads of the splits' states 8 at a time",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk9_workspace, .launch = dk9_launch, .describe = dk9_describe, .unavailable = dec_bulk_unavailable,
};
DECODE_REGISTER(decode9);
