/*
 * Extends: decode04_grouped.cu; idea: the cache in pages of P keys, in any order and shared, found through a block table
 * Code: decode.cuh with SPLIT = true, GROUPED = true, PAGED = true, NST = 3
 *
 * Decode kernel 5: the paged cache. The cache is a pool of pages of P keys ([pages, Hkv, P, D]), a
 * sequence's keys are the pages its row of the block table names, in any order, and a page can be named
 * by several sequences (a shared prompt is stored once): vLLM's PagedAttention, "the same tiled idea
 * applied to the inference-time KV cache", in the chapter's words. A cache grows by whole pages, so
 * nothing is reserved for the longest possible sequence and nothing is copied when one grows.
 *
 * What it costs: the table's entries of each tile's four 16-key quarters, read a tile ahead
 * (dec_tile_pages), and at P = 16 or 32 a tile of 64 keys gathered from 4 or 2 pages. And its stages: with
 * kernel 4's one block an SM (4 stages) the scattered pages cost 20-25% (measured side by side: 2203 GB/s
 * against 2699 at B = 1, 32 heads, L = 32768); two blocks an SM (3 stages each) hide them.
 *
 * Measured on the H100 (./step05 --decode --bench, fp16, D = 128, pages of 64 keys): within 5% of kernel 4
 * at every benchmark shape (B = 8, 32/8 heads, L = 8192: 102.0 us against 105.3; B = 1, 32 heads,
 * L = 32768: 197.6 against 194.3); pages of 16 to 256 keys within 6% of each other. README.md has the table.
 */
#include "decode.cuh"

typedef DecodeFlags<true, true, true, 3> Dec5;

static int dk5_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec5>(5, a, ws, s); }
static size_t dk5_workspace(const DecodeArgs *a) { return dec_workspace<Dec5>(a); }
static void dk5_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec5>(a, buf, n); }

static const DecodeKernel decode5 = {
    .id = 5, .extends = 4, .name = "paged",
    .idea = "the cache in pages of P keys found through a block table",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk5_workspace, .launch = dk5_launch, .describe = dk5_describe,
};
DECODE_REGISTER(decode5);
