/*
 * Decode kernel 4: grouped heads.
 *
 * Extends decode kernel 3 (decode03_split_kv.cu). The idea: one block per (sequence, KV head, split): the K/V tiles
 * of a KV head are loaded once and serve all g = Hq / Hkv query heads that read them, their g x n rows side by side
 * in the warps' 16-row fragments (grouped-query attention; multi-query at Hkv = 1). The block's row gr is new row
 * i = gr % n of query head hkv g + gr / n.
 * Why: kernel 3 runs one block per query head, so each KV tile is read g times, from memory or, if the g blocks
 * happen to run together, from L2. Here it is read once, and the tensor cores, which had 15 of 16 rows padding at
 * n = 1, get g of 16 real.
 * What it costs: nothing more; at g n > 16 a warp pair or quad shares a tile's keys (kernel 3's R row blocks, 4 / R
 * key slices), past 64 rows the group is cut into row chunks of 64 that each read the tiles. With multi-head (g = 1)
 * it is kernel 3.
 * Measured: H100, fp16, D = 128, 32 query heads over 8 KV heads: B = 1, L = 32768 60.3 us, 2.2x kernel 3; B = 8,
 * L = 8192 105.3 us, 2.4x; the runs: RESULTS.md#decode-4.
 */
#ifndef RUNG
#define RUNG 4           // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "decode03_split_kv.cu"

// --- the idea -------------------------------------------------------------------------------------

struct Dec4Grouped : Dec3Split {
    /* Grid head h is KV head h; its rows gr are new row i = gr % n of query head h g + gr / n. */
    template <typename T> static __device__ __forceinline__ long kv_head(const DecParams<T> &p, long h)
    {
        (void)p;
        return h;
    }
    template <typename T>
    static __device__ __forceinline__ void row(const DecParams<T> &p, long h, int gr, long *hq, long *i)
    {
        *hq = h * p.g + gr / p.n; *i = gr % p.n;
    }
    /* The grid: one block per (sequence, KV head, row chunk, split), g n rows a (sequence, KV head). */
    static void grid_heads(const DecodeArgs *a, int *heads, int *g) { *heads = (int)a->Hkv; *g = (int)(a->Hq / a->Hkv); }
    static constexpr const char *heads_words = "KV";
};

// --- the launcher ---------------------------------------------------------------------------------

#if RUNG == 4
static int dk4_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec4Grouped>(4, a, ws, s); }
static size_t dk4_workspace(const DecodeArgs *a) { return dec_workspace<Dec4Grouped>(a); }
static void dk4_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec4Grouped>(a, buf, n); }

static const DecodeKernel decode4 = {
    .id = 4, .extends = 3, .name = "grouped heads",
    .idea = "one block per KV head: its tiles read once for every query head sharing it",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .workspace = dk4_workspace,
    .launch = dk4_launch, .describe = dk4_describe,
};
DECODE_REGISTER(decode4);
#endif
