/*
 * Decode kernel 7: lean copies.
 *
 * Extends decode kernel 6 (decode06_occupancy.cu). The idea: the same tile, the same cp.async, the address arithmetic
 * hoisted. Kernel 6's copy (dec_load_tile) works out every 16-byte chunk's row, column, page and 64-bit offset from
 * its index. Here (dec_load_tile_lean) a thread keeps one column for the whole tile (col, from threadIdx) and its rows
 * are r0, r0 + RSTEP, ... (RSTEP = 8 at D = 128, 16 at D = 64), so that which quarter (16 keys: one page) a row falls
 * in is known when compiling: per quarter one page lookup and one 64-bit address, then its rows at constant offsets
 * from it. The same bytes, the same cp.async, the same math after them: O is kernel 6's bit for bit.
 * Why: a decode step is nothing but these copies and a little math per tile, and kernel 6's copy costs about 17 PTX
 * instructions per cp.async at D = 128 (a division, a 4-way choice of page, 64-bit multiplies), 8 chunks of K and 8
 * of V per thread per tile. Nsight Compute on kernel 6 at B = 64, 32 heads, L = 2048: each scheduler issued an
 * instruction every 1.8 cycles, 0.9 warps eligible, DRAM 73% busy: the issue slots, not the memory, set the pace.
 * What it costs: nothing measured; the thread-to-chunk map is kernel 6's (a warp copies two whole 256-byte rows an
 * instruction at D = 128). The PTX of the tile's copy at D = 128: 1902 lines for the two-stage kernel against 2321,
 * no branch and no 64-bit multiply per chunk.
 * Measured: H200, fp16, D = 128, pages of 64: B = 64, 32 heads, L = 2048 507.9 us against kernel 6's 519.5 (+2.3%),
 * 95% of the read bandwidth; +2.9% at B = 8 and at B = 1, 32/8 heads, L = 32768; the runs: RESULTS.md#decode-7.
 */
#ifndef RUNG
#define RUNG 7           // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "decode06_occupancy.cu"

// --- the idea -------------------------------------------------------------------------------------

/* One K/V tile of the paged cache (keys key0 .. key0 + 63 of KV head hkv, quarter q in page ent[q]) into shared
 * memory [64][LD] by cp.async, each thread one column of every row r0 + RSTEP i. */
template <int D, typename T>
__device__ __forceinline__ void dec_load_tile_lean(T *ks, T *vs, const DecParams<T> &p, long hkv, long key0, int len,
                                                   const int (&ent)[4])
{
    constexpr int LD = D + 8, CPR = D / 8;                 // 16-byte chunks per row: 16 at D = 128, 8 at D = 64
    constexpr int RSTEP = DEC_WARPS * 32 / CPR;            // rows the block covers in one pass: 8 or 16
    constexpr int PASSES = 16 / RSTEP;                     // passes per 16-key quarter: 2 or 1
    const int r0 = threadIdx.x / CPR, col = (threadIdx.x % CPR) * 8;
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const long kq = key0 + 16 * q;                     // the quarter's first key, 16-aligned: one page holds it all
        const long row = (((long)ent[q] * p.Hkv + hkv) << p.page_shift) | (kq & ((1L << p.page_shift) - 1)); // kernel 5's row
        const T *kq_g = p.k + row * D + col, *vq_g = p.v + row * D + col;
#pragma unroll
        for (int i = 0; i < PASSES; i++) {
            const int r = r0 + RSTEP * i;                  // the row within the quarter
            const bool in = kq + r < len;                  // past len: zero-filled, nothing read (the mask hides it)
            /* the address is inside the pool even past len (the quarter's own page, or page 0 for a quarter wholly
             * past len: dec_tile_pages), so no select */
            cp_async16(ks + (16 * q + r) * LD + col, kq_g + r * D, in ? 16 : 0);
            cp_async16(vs + (16 * q + r) * LD + col, vq_g + r * D, in ? 16 : 0);
        }
    }
}

struct Dec7Lean : Dec6Occupancy {
    template <class P, int D, typename T>
    static __device__ __forceinline__ void copy_tile(T *ks, T *vs, const DecParams<T> &p, long b, long hkv, long key0,
                                                     int len, const int (&ent)[4], uint32_t bar)
    {
        (void)b, (void)bar;
        dec_load_tile_lean<D>(ks, vs, p, hkv, key0, len, ent);
    }
};

// --- the launcher ---------------------------------------------------------------------------------

#if RUNG == 7
static int dk7_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec7Lean>(7, a, ws, s); }
static size_t dk7_workspace(const DecodeArgs *a) { return dec_workspace<Dec7Lean>(a); }
static void dk7_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec7Lean>(a, buf, n); }

static const DecodeKernel decode7 = {
    .id = 7, .extends = 6, .name = "lean copies",
    .idea = "copy addresses once per quarter tile, not per 16 bytes",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk7_workspace, .launch = dk7_launch, .describe = dk7_describe,
};
DECODE_REGISTER(decode7);
#endif
