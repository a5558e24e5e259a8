/*
 * Extends: decode06_occupancy.cu; idea: each thread's copy addresses worked out once per 16-key quarter of a tile, not once per 16 bytes
 * Code: decode.cuh with SPLIT = true, GROUPED = true, PAGED = true, NST = 3, OCC = true, LEAN = true
 *
 * Decode kernel 7: lean copies. A decode step is a stream of the cache through shared memory and a little
 * math per tile, and kernel 6's stream costs instructions: dec_load_tile derives each 16-byte chunk's row,
 * column, page and 64-bit offset from the chunk's index, about 17 PTX instructions per cp.async at D = 128
 * (a division, a 4-way choice of page, 64-bit multiplies), 8 chunks of K and 8 of V per thread per tile.
 * Nsight Compute on kernel 6 at B = 64, 32 heads, L = 2048: each scheduler issued an instruction every 1.8
 * cycles, 0.9 warps eligible, DRAM 73% busy: the issue slots, not the memory, set the pace. Kernel 7
 * (dec_load_tile_lean) gives a thread one column for the whole tile and rows r0, r0 + 8, ... (r0 + 16 at
 * D = 64), so the quarter (16 keys, within one page) of each row is known when compiling: one page lookup and
 * one 64-bit address per quarter, the rows at constant offsets from it. The same bytes, the same cp.async,
 * the same math after them: O is kernel 6's bit for bit.
 *
 * What it costs: nothing measured; the thread-to-chunk map is kernel 6's (a warp copies two whole 256-byte rows
 * an instruction at D = 128). The PTX of the tile's copy at D = 128: 1902 lines for the two-stage kernel against
 * 2321, no branch and no 64-bit multiply per chunk.
 *
 * Measured on the H200 (2026-11-26, `./step05 --decode --bench`, fp16, D = 128, one new row, pages of 64, the
 * kernels interleaved): B = 64, 32 heads, L = 2048: 507.9 us against kernel 6's 519.5 (+2.3%), 4228 GB/s, 95% of
 * the read bandwidth measured in the same run; B = 8, 32/8 heads, L = 8192: 75.7 against 77.9 (+2.9%); B = 1,
 * 32/8 heads, L = 32768: 47.6 against 49.0 (+2.9%); B = 1, 32 heads, L = 131072: 526.7 against 529.3 (+0.5%).
 * cuDNN in the same call (plots/sdpa_decode.py): 468.8 us at B = 64, still 8% ahead. On another H200 the same day,
 * where kernels 5 and 6 ran 8-10% slower and kernel 7 held its time: +9% at B = 64 and at L = 131072, +6% at B = 8.
 */
#include "decode.cuh"

typedef DecodeFlags<true, true, true, 3, true, true> Dec7;

static int dk7_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec7>(7, a, ws, s); }
static size_t dk7_workspace(const DecodeArgs *a) { return dec_workspace<Dec7>(a); }
static void dk7_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec7>(a, buf, n); }

static const DecodeKernel decode7 = {
    .id = 7, .extends = 6, .name = "lean copies",
    .idea = "copy addresses once per quarter tile, not per 16 bytes",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk7_workspace, .launch = dk7_launch, .describe = dk7_describe,
};
DECODE_REGISTER(decode7);
