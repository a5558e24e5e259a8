/*
 * Decode kernel 13: the first copy sooner.
 *
 * Extends decode kernel 12 (decode12_one_block.cu). The idea: every split block of kernels 8-12 begins with three
 * loads from memory, each issued after the one before has returned, before the copy engine is asked for a byte of K:
 * the sequence's length (a split past it has no keys and leaves), then Q's fragments (behind that test), then, behind
 * the barrier that makes the mbarriers, the block table's entries for the first tile's pages. None of the later loads
 * needs the length: Q's rows are known from the block's place in the grid, and the first tile's page entries can be
 * read for every key below max_len (a table holds ceil(max_len / page) entries a sequence, kernels.h), which of them
 * lie before the length being decided only when the boxes are issued (dec_bulk_tile issues the quarters before len,
 * as before). So here the length, the first pages and Q are loaded together, the mbarriers made while they travel,
 * and the first tile's boxes issued as soon as the length is in: by the loads' order, one trip to memory before the
 * first copy instead of three (not profiled). The arithmetic, the splits and the order of the sums are kernel 12's:
 * O is kernel 12's bit for bit.
 * Why: Nsight Compute had put a quarter of kernel 11's stall samples at B = 1, 32/8 heads, L = 2048 on the wait for
 * the first tile.
 * What it costs: blocks of splits past a short sequence's length now load Q's fragments and the first tile's four
 * page entries before they leave; entries past the length are read and never used. It needs kernel 8's boxes (a
 * cp.async copy would take the unused entries as pages): it extends a rung that has them.
 * Measured: H200, fp16, D = 128, B = 1, 32/8 heads: +4.6% / +3.9% over kernel 12 at L = 2048 (two runs), +1% to +2.7%
 * at most other lengths; a few tenths of a microsecond a step, where two trips to memory were hoped for; the runs:
 * RESULTS.md#decode-13.
 */
#ifndef RUNG
#define RUNG 13          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "decode12_one_block.cu"

// --- the idea -------------------------------------------------------------------------------------

struct Dec13FrontLoads : Dec12OneBlock {
    /* Before the length is known: the first tile's pages (read for every key below max_len, the longest sequence's
     * length, whose pages the table holds: which of them lie before this sequence's len is decided when the copies
     * are issued) and Q's fragments are loaded while the length is still on its way, and the mbarriers made
     * meanwhile. */
    template <class P, typename T, class LoadQ>
    static __device__ __forceinline__ void before_len(const DecParams<T> &p, long b, int t0, bool copier, int (&ent)[4],
                                                      uint32_t bar0, LoadQ &load_q)
    {
        if (copier) P::tile_pages(p, b, t0, (int)min(p.max_len, (long)INT_MAX), ent);
        load_q();
        dec_bars_init(bar0, P::NST);
    }
    /* Once the length is in: the first copies at once (tile 0's pages read above); nothing left for before the loop. */
    static __device__ __forceinline__ bool pages_in_first_copies(int st) { return st != 0; }
    template <class LoadQ, class FirstCopies>
    static __device__ __forceinline__ void after_len(LoadQ &load_q, FirstCopies &first_copies)
    {
        (void)load_q;
        first_copies();
    }
    template <class P, class FirstCopies>
    static __device__ __forceinline__ void before_loop(uint32_t bar0, FirstCopies &first_copies)
    {
        (void)bar0, (void)first_copies;
    }
};

// --- the launcher ---------------------------------------------------------------------------------

#if RUNG == 13
static int dk13_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec13FrontLoads>(13, a, ws, s); }
static size_t dk13_workspace(const DecodeArgs *a) { return dec_workspace<Dec13FrontLoads>(a); }
static void dk13_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec13FrontLoads>(a, buf, n); }

static const DecodeKernel decode13 = {
    .id = 13, .extends = 12, .name = "loads up front",
    .idea = "the length, the first pages and Q loaded at once: the first copy one trip to memory in",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk13_workspace, .launch = dk13_launch, .describe = dk13_describe,
    .unavailable = dec_bulk_unavailable,
    .same_sums = "the first copies issued behind one trip to memory against three",
};
DECODE_REGISTER(decode13);
#endif
