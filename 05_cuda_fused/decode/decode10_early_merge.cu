/*
 * Extends: decode09_merge_in_flight.cu; idea: the merge kernel launched while the split kernel runs (programmatic dependent launch), waiting on the SMs for its states
 * Code: decode.cuh with SPLIT = true, GROUPED = true, PAGED = true, NST = 3, OCC = true, LEAN = true, BULK = true, MERGE8 = true, EARLY = true
 *
 * Decode kernel 10: the merge launched early. Split-KV (kernel 3) is two launches: the split kernel, whose Sb
 * blocks per row leave their states (m_s, l_s, o_s) in the workspace, then decode_merge, one block per new row.
 * Launched the usual way, the second kernel's blocks are placed only once the first kernel has ended: the GPU
 * waits for the split's last block, then for the merge's launch and its blocks' start, then for their loads. At
 * B = 1, 32 query heads over 8 KV heads (S = 32), kernel 9's whole step takes 17-46 us (L = 2048 to 32768), and
 * those microseconds are part of it. Kernel 10 launches decode_merge as a programmatic dependent of the split kernel
 * (cudaLaunchKernelEx with cudaLaunchAttributeProgrammaticStreamSerialization; Hopper's griddepcontrol): every split
 * block says at its start that the dependent may be scheduled, so that once the split's last block is resident the
 * merge's 32 blocks are placed beside it, read the sequence lengths, and wait in griddepcontrol.wait, which returns
 * when the split kernel has completed and its writes are visible. The merge is kernel 9's, the same sums in the
 * same order: O is kernel 9's bit for bit (--check compares the two).
 *
 * What it costs: the merge's blocks hold warp slots (4 warps each, no shared memory) while they wait; one more
 * instruction in each split block; the launch through cudaLaunchKernelEx. Nothing where S = 1 (B = 64: no merge).
 * A design measured before this one and not kept (the record): no merge kernel at all, the last split block of each
 * row group merging its rows (an atomic counter per group): 0.2-17.5% slower than kernel 9 at B = 1, the merge of a
 * group on one SM instead of spread over 32 blocks.
 *
 * Measured on the H200 (2026-11-27, `./step05 --decode --bench`, fp16, D = 128, one new row, the kernels interleaved;
 * two calls on two machines, the record's call 9 first, then its call 7): B = 1, 32 query heads over 8 KV heads (S =
 * 32): L = 1024 11.7 us against kernel 9's 12.2 (+4%; 11.9 against 12.6), L = 4096 17.6 against 18.0 (+2%; 17.8
 * against 18.7), L = 32768 44.2 against 45.2 (+2.3%; 45.1 against 46.2); 32 heads: L = 1024 13.9 against 14.7 (+6%),
 * L = 4096 25.3 against 26.0 (+2.8%; 25.6 against 26.5), L = 32768 131.9 against 132.6 (+0.5%), L = 131072 level; B = 8, 32/8 heads, L = 8192 70.5 against
 * 72.2 (+2.4%; 71.3 against 73.0); B = 64 (S = 1) level. cuDNN in call 9 (PyTorch's calls replayed from a CUDA
 * graph): 38.2 us at 32/8 heads, L = 32768 (kernel 10 14% behind), 67.9 at B = 8 (4% behind).
 */
#include "decode.cuh"

typedef DecodeFlags<true, true, true, 3, true, true, true, true, true> Dec10;

static int dk10_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec10>(10, a, ws, s); }
static size_t dk10_workspace(const DecodeArgs *a) { return dec_workspace<Dec10>(a); }
static void dk10_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec10>(a, buf, n); }

static const DecodeKernel decode10 = {
    .id = 10, .extends = 9, .name = "early merge",
    .idea = "the merge kernel launched while the split runs, waiting for its states",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk10_workspace, .launch = dk10_launch, .describe = dk10_describe,
    .unavailable = dec_bulk_unavailable,
};
DECODE_REGISTER(decode10);
