/*
 * Decode kernel 5: the paged cache. The cache is a pool of pages of P keys ([pages, Hkv, P, D]), a
 * sequence's keys are the pages its row of the block table names, in any order, and a page can be named
 * by several sequences (a shared prompt is stored once): vLLM's PagedAttention, "the same tiled idea
 * applied to the inference-time KV cache", in the chapter's words. A cache grows by whole pages, so
 * nothing is reserved for the longest possible sequence and nothing is copied when one grows.
 * Extends: decode4_grouped.cu (the same kernel; where a key's row is).
 *
 * What it costs: one more load per 16 bytes copied (the table entry of the key's page, which stays in
 * L1), and at P = 16 or 32 a K/V tile of 64 keys gathers 4 or 2 pages. The algorithm: decode.cuh,
 * DecodeFlags<1, 1, 1> (dec_load_tile's PAGED branch).
 */
#include "decode.cuh"

typedef DecodeFlags<true, true, true, 3> Dec5;

static int dk5_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec5>(5, a, ws, s); }
static size_t dk5_workspace(const DecodeArgs *a) { return dec_workspace<Dec5>(a); }
static void dk5_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec5>(a, buf, n); }

static const DecodeKernel decode5 = {5, "paged", "the cache in pages of P keys found through a block table",
                                     (1u << DT_FP16) | (1u << DT_BF16), dec_supports, 1, dk5_workspace, dk5_launch,
                                     dk5_describe, NULL};
DECODE_REGISTER(decode5);
