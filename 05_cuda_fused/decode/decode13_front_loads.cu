/*
 * Extends: decode12_one_block.cu; idea: the first tile's copy issued behind one trip to memory, not three (the length, the page table and Q loaded together)
 * Code: decode.cuh with SPLIT = true, GROUPED = true, PAGED = true, NST = 3, OCC = true, LEAN = true, BULK = true, MERGE8 = true, EARLY = true, ROUND = true, ONE = true, FRONT = true
 *
 * Decode kernel 13: the first copy sooner. Every split block of kernels 8-12 begins with three loads from memory, each
 * issued after the one before has returned, before the copy engine is asked for a byte of K: the sequence's length (a
 * split past it has no keys and leaves), then Q's fragments (behind that test), then, behind the barrier that makes
 * the mbarriers, the block table's entries for the first tile's pages. None of the later loads needs the length: Q's
 * rows are known from the block's place in the grid, and the first tile's page entries can be read for every key
 * below max_len (a table holds ceil(max_len / page) entries a sequence, kernels.h), which of them lie before the
 * length being decided only when the boxes are issued (dec_bulk_tile issues the quarters before len, as before). So
 * here the length, the first pages and Q are loaded together, the mbarriers made while they travel, and the first
 * tile's boxes issued as soon as the length is in: by the loads' order, one trip to memory before the first copy
 * instead of three (not profiled). Nsight Compute had put a quarter of kernel 11's stall samples at B = 1, 32/8
 * heads, L = 2048 on the wait for the first tile (the record, the second session of 2026-11-27). The arithmetic, the
 * splits and the order of the sums are kernel 12's: O is kernel 12's bit for bit, and --check compares the two.
 *
 * What it costs: blocks of splits past a short sequence's length now load Q's fragments and the first tile's four
 * page entries before they leave; entries past the length are read and never used. FRONT needs BULK (a cp.async
 * copy would take the unused entries as pages).
 *
 * Measured on the H200 in two calls on two machines (the record, "Decode kernel 13, and two experiments not kept":
 * call 3 `./step05 --decode --bench --kernel 11-13`, call 6 the whole bench, fp16 and bf16; graph-replayed, the
 * kernels interleaved, `plots/sdpa_decode.py` in the same call). Against kernel 12, fp16, the B = 1 sweeps, call 3 /
 * call 6: 32/8 heads, L = 1024 +1.5 / +1.0%, 2048 +4.6 / +3.9% (10.19 against 10.66 us; 10.44 against 10.85), 4096
 * +2.1 / +1.5%, 8192 level, 16384 +2.4 / +2.7%, 32768 +1.0 / +1.7%, 65536 and 131072 +0.5 to +1.2%; 32 heads, L =
 * 1024 -0.4 / +0.1%, 2048 -2.0 / -1.4% (in both calls: not explained), 4096 +2.2 / +2.7%, 8192 +2.0 / +1.6%, 16384
 * +0.8 / +1.2%, 32768 +0.8 / +0.6%, 65536 and 131072 within 0.3%; the anchors B = 64, L = 2048 +1.2 / +1.5% (469.8
 * against 476.7 us in call 6), B = 8 level. bf16 within 0.8 points of fp16 at every shape (call 6). At B = 1 a few
 * tenths of a microsecond a step, where two trips to memory were hoped for (about a microsecond); at B = 64 (2048
 * blocks in waves, each starting once) 6.9 us of 477. cuDNN at the short grouped caches stays ahead: 7.94 / 8.99 /
 * 12.06 us at L = 1024 / 2048 / 4096 against 9.49 / 10.44 / 12.73 (call 6).
 */
#include "decode.cuh"

typedef DecodeFlags<true, true, true, 3, true, true, true, true, true, true, true, true> Dec13;

static int dk13_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec13>(13, a, ws, s); }
static size_t dk13_workspace(const DecodeArgs *a) { return dec_workspace<Dec13>(a); }
static void dk13_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec13>(a, buf, n); }

static const DecodeKernel decode13 = {
    .id = 13, .extends = 12, .name = "loads up front",
    .idea = "the length, the first pages and Q loaded at once: the first copy one trip to memory in",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk13_workspace, .launch = dk13_launch, .describe = dk13_describe,
    .unavailable = dec_bulk_unavailable,
};
DECODE_REGISTER(decode13);
