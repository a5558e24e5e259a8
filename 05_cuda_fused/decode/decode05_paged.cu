/*
 * Decode kernel 5: the paged cache.
 *
 * Extends decode kernel 4 (decode04_grouped.cu). The idea: the cache is a pool of pages of P keys ([pages, Hkv, P,
 * D]); a sequence's keys are the pages its row of the block table names, in any order, and a page can be named by
 * several sequences (a shared prompt is stored once): vLLM's PagedAttention, "the same tiled idea applied to the
 * inference-time KV cache", in the chapter's words. Key `key` of sequence b is row key % P of page
 * table[b][key / P]; a page holds 16 keys or more, so a 16-key quarter of a tile lies in one page, and each tile's
 * four quarters' pages are read from the table one tile before they are needed (dec_tile_pages).
 * Why: a cache grows by whole pages, so nothing is reserved for the longest possible sequence and nothing is copied
 * when one grows.
 * What it costs: the table's entries of each tile's four quarters, and at P = 16 or 32 a tile of 64 keys gathered
 * from 4 or 2 pages. And its stages: with kernel 4's one block an SM (4 stages) the scattered pages cost 20-25%
 * (2203 GB/s against 2699 at B = 1, 32 heads, L = 32768); two blocks an SM (3 stages each) hide them.
 * Measured: H100, fp16, D = 128, pages of 64 keys: within 5% of kernel 4 at every benchmark shape (B = 8, 32/8
 * heads, L = 8192: 102.0 us against 105.3); pages of 16 to 256 keys within 6% of each other; the runs:
 * RESULTS.md#decode-5.
 */
#ifndef RUNG
#define RUNG 5           // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "decode04_grouped.cu"

// --- the idea -------------------------------------------------------------------------------------

/* The pages of tile `tile`'s four 16-key quarters (a page holds 16 keys or more, so a quarter is in one page), read
 * from the block table one tile before they are needed: the loads' latency is then under a tile's work instead of
 * in front of its copies (where it cost 5 to 9% with one block an SM). A quarter wholly past len takes page 0. */
template <typename T>
__device__ __forceinline__ void dec_tile_pages(const DecParams<T> &p, long b, long tile, int len, int (&ent)[4])
{
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const long key = tile * DEC_BC + 16 * q;
        ent[q] = key < len ? p.table[b * p.max_pages + (key >> p.page_shift)] : 0;
    }
}

/* One K/V tile, kernel 2's dec_load_tile with each key's row found through its page: key `key` of KV head hkv is
 * row key % P of page ent[quarter of key] in the pools seen as rows of D elements, (page Hkv + hkv) P + key % P.
 * The loop is kernel 2's, repeated so that the row's arithmetic is written inside it (a function of its own for the
 * row, or for the chunk's offset, changes the machine code the compiler makes of the loop). */
template <int D, typename T>
__device__ __forceinline__ void dec_load_tile_paged(T *ks, T *vs, const DecParams<T> &p, long hkv, long key0, int len,
                                                    const int (&ent)[4])
{
    constexpr int LD = D + 8, CH = DEC_BC * D / 8;
    for (int c = threadIdx.x; c < CH; c += DEC_WARPS * 32) {
        const int r = c / (D / 8), col = (c % (D / 8)) * 8;
        const long key = key0 + r;
        const bool in = key < len;
        long off = 0;
        if (in) {
            const int q = r / 16, page = q == 0 ? ent[0] : q == 1 ? ent[1] : q == 2 ? ent[2] : ent[3]; // (no local array)
            off = (((long)page * p.Hkv + hkv) << p.page_shift | (key & ((1L << p.page_shift) - 1))) * D + col;
        }
        cp_async16(ks + r * LD + col, p.k + off, in ? 16 : 0);
        cp_async16(vs + r * LD + col, p.v + off, in ? 16 : 0);
    }
}

struct Dec5Paged : Dec4Grouped {
    /* 3 stages, two blocks an SM: the pages' scattered reads want more loads in flight an SM than one block's */
    static constexpr int NST = 3;

    template <class P, int D, typename T>
    static __device__ __forceinline__ void copy_tile(T *ks, T *vs, const DecParams<T> &p, long b, long hkv, long key0,
                                                     int len, const int (&ent)[4], uint32_t bar)
    {
        (void)b, (void)bar;
        dec_load_tile_paged<D>(ks, vs, p, hkv, key0, len, ent);
    }
    template <typename T>
    static __device__ __forceinline__ void tile_pages(const DecParams<T> &p, long b, long tile, int len, int (&ent)[4])
    {
        dec_tile_pages(p, b, tile, len, ent);
    }

    /* The launch: pages of 16 to 256 keys, a power of two (a quarter tile in one page; the row by a shift and a
     * mask); K and V are the pools. */
    static int refuse(int id, const DecodeArgs *a)
    {
        if (a->page < 16 || a->page > 256 || (a->page & (a->page - 1))) { /* a quarter tile in one page */
            fprintf(stderr, "%s: decode kernel %d takes pages of 16 to 256 keys, a power of two, not %ld\n", g_prog, id, a->page);
            return -1;
        }
        return 0;
    }
    template <int D, typename T>
    static int params(int id, const DecodeArgs *a, void *ws, const DecGrid &gr, DecParams<T> *p)
    {
        if (Dec4Grouped::params<D>(id, a, ws, gr, p)) return -1;
        p->k = (const T *)a->k_pool; p->v = (const T *)a->v_pool;
        while ((1L << p->page_shift) < a->page) p->page_shift++;
        return 0;
    }
    static constexpr const char *cache_words = ", pages through the block table";
};

// --- the launcher ---------------------------------------------------------------------------------

#if RUNG == 5
static int dk5_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec5Paged>(5, a, ws, s); }
static size_t dk5_workspace(const DecodeArgs *a) { return dec_workspace<Dec5Paged>(a); }
static void dk5_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec5Paged>(a, buf, n); }

static const DecodeKernel decode5 = {
    .id = 5, .extends = 4, .name = "paged",
    .idea = "the cache in pages of P keys found through a block table",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk5_workspace, .launch = dk5_launch, .describe = dk5_describe,
};
DECODE_REGISTER(decode5);
#endif
