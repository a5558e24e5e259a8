/*
 * Extends: decode01_transcription.cu; idea: the forward kernel's block (4 tensor-core warps of 16 rows, K/V tiles in shared memory) on decode's shape
 * Code: decode.cuh with SPLIT = false, GROUPED = false, PAGED = false, NST = 3
 *
 * Decode kernel 2: the forward kernel as is. The mma.sync forward (kernel 9's block: 4 warps of 16 query
 * rows, K/V tiles of 64 keys through shared memory by cp.async, S = Q K^T and O += P V on the tensor
 * cores, the online softmax on the fragments) given decode's shape: the query rows of a (sequence, query
 * head) are its n new rows, the keys its cache.
 *
 * What it costs: the forward's grid is one block per (sequence, head, row tile), and decode has one row
 * tile: B x Hq blocks. At B = 1 and 32 heads that is 32 blocks for the H100's 132 SMs, each streaming a
 * head's whole cache alone; and with n <= 16 new rows only the first of the 4 warps has rows (the other
 * three copy tiles and wait). Decode kernel 3 splits the keys instead, across blocks and across warps.
 *
 * Measured on the H100 (./step05 --decode --bench, fp16, D = 128, one new row): at B = 1, 32 heads,
 * L = 32768, 1036 us, 518 GB/s of the measured 3055 (17%); where the batch fills the GPU (B = 64, 32
 * heads, L = 2048: 2048 blocks) 761 us, 2821 GB/s (92%). The forward's shape is right when there are
 * many sequences, wrong for one. README.md has the table.
 */
#include "decode.cuh"

typedef DecodeFlags<false, false, false, 3> Dec2;

static int dk2_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec2>(2, a, ws, s); }
static void dk2_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec2>(a, buf, n); }

static const DecodeKernel decode2 = {
    .id = 2, .extends = 1, .name = "forward as is",
    .idea = "the forward's block: one per (sequence, query head), warps over rows",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .launch = dk2_launch,
    .describe = dk2_describe,
};
DECODE_REGISTER(decode2);
