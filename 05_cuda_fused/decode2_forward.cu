/*
 * Decode kernel 2: the forward kernel as is. The mma.sync forward (kernel 9's block: 4 warps of 16 query
 * rows, K/V tiles of 64 keys through shared memory by cp.async, S = Q K^T and O += P V on the tensor
 * cores, the online softmax on the fragments) given decode's shape: the query rows of a (sequence, query
 * head) are its n new rows, the keys its cache.
 * Extends: decode1_transcription.cu (the same loop, a block of tensor-core warps in place of a thread).
 *
 * What it costs: the forward's grid is one block per (sequence, head, row tile), and decode has one row
 * tile: B x Hq blocks. At B = 1 and 32 heads that is 32 blocks for the H100's 132 SMs, each streaming a
 * head's whole cache alone through one SM's share of the memory system; and with n <= 16 new rows only
 * the first of the 4 warps has rows (the other three copy tiles and wait). Decode kernel 3 splits the
 * keys instead, across blocks and across warps. The algorithm: decode.cuh, DecodeFlags<0, 0, 0>.
 */
#include "decode.cuh"

typedef DecodeFlags<false, false, false, 3> Dec2;

static int dk2_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec2>(2, a, ws, s); }
static void dk2_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec2>(a, buf, n); }

static const DecodeKernel decode2 = {2, "forward as is", "the forward's block: one per (sequence, query head), warps over rows",
                                     (1u << DT_FP16) | (1u << DT_BF16), dec_supports, 0, NULL, dk2_launch, dk2_describe, NULL};
DECODE_REGISTER(decode2);
