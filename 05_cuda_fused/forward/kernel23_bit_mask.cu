/*
 * Extends: kernel22_desc_add.cu; idea: the mask of a tile as one 32-bit word a row, tested bit by bit
 * Code: overlap.cuh with PINGPONG = true, PERSIST = true, WIDE_O = true, CARRY = true, HALF_PV = true, DESC_ADD = true, BITMASK = true
 *
 * Kernel 23: kernel 22 masking with fewer instructions.
 *
 * What changes over kernel 22 (one idea). A tile that needs a mask (the causal diagonal, the sequence's end) has
 * each lane decide, for each of its 64 scores, whether key c is visible from its row: kernel 22 computes c,
 * compares it with the sequence's end and with the diagonal, and selects -inf, three to four instructions a score.
 * The keys a lane holds in a row are c = 8n + 2t + b (n < 16, b = 0, 1), so the visible ones are the first `keep`
 * of them in that order, keep = 2 floor(v / 8) + min(v mod 8, 2) with v the row's visible keys less 2t: one word
 * per row, 2^keep - 1, made once per tile. A score then costs a test of a constant bit, which the compiler turns
 * into predicates two at a time (the R2P instruction), and the select. The masked scores and O are the same as
 * kernel 22's, bit for bit (--check compares with kernel 14).
 *
 * Why: Nsight Compute on kernel 21 at causal N = 512, D = 64 finds the ALU the busiest pipe, and the mask adds 130 to
 * 193 ALU instructions a masked tile to its 487 (RESULTS.md, the short causal forward profiled); at N = 512, 4 of
 * the 10 K/V tiles a head visits are diagonals.
 *
 * What it costs: the two words, about 20 instructions a masked tile (28 causal); nothing on the tiles without a
 * mask. Counted in the machine code (fp16, D = 64): a causal diagonal tile's mask and row max are about 208
 * instructions a consumer thread against kernel 22's 261; at the sequence's end (no causal mask) 198 against 196.
 *
 * Measured on the H200 against kernel 21 in the same run (kernel 22's own gain or loss included), N = 512 ... 16384,
 * in two calls: `./step05 --bench --dtype fp16 [--causal] --kernel 21-23` (2026-11-27, sixth session), then the race's
 * forward run (`sh common/gpu_runs.sh OUT race-forward`, kernels 14-23, the seventh):
 *                        N = 512   1024   2048   4096   8192  16384
 *     fp16, causal, D = 64  +3.9   +1.5   +0.9   -0.6   -0.1   -0.8     second: +2.2 +1.2 +0.3 -0.6 -1.1 -1.8
 *     fp16, causal, D = 128 +2.3   +2.4   +2.0   +0.9   +1.6   +2.6             +0.1 +0.5 +1.7 +1.6 +2.2 +2.0
 *     fp16, D = 64          +4.8   +0.3   +0.7   -0.3   -0.3   -0.2             +0.1 +0.1 +0.1 -0.4 -1.6 -3.6
 *     fp16, D = 128         +1.1   +0.2   +1.8   +1.2   +2.2   +2.4             -0.7 +0.7 +1.3 +1.0 +1.0 +1.2
 *     bf16, causal, D = 64  +2.8   +1.3   +0.1   -0.5   -0.8   -1.9     (second call only)
 *     bf16, causal, D = 128 +0.2   +0.9   +1.2   +1.6   +2.4   +1.8
 *     bf16, D = 64          -0.2   +0.2   +0.4   -0.2   +0.2   -1.2
 *     bf16, D = 128         +0.4   +0.6   +0.6   +1.6   +1.8   +1.9
 * Without a mask its tiles are kernel 22's. The gain: causal at N = 512 and 1024 (D = 64, where the diagonal is 4 of
 * a head's 10 tiles at N = 512), and +0.6% to +2.6% at D = 128 from N = 2048, both dtypes, causal or not; at D = 64
 * from N = 4096 kernel 22's loss remains. Against cuDNN 9.19 (PyTorch 2.11 SDPA, same call), causal, N = 512 and
 * 1024: D = 64 94.2% and 95.2% (first call; kernel 21 90.6%, 93.8%), 93.2% and 97.1% (second; kernel 21 91.2%,
 * 96.0%), bf16 93.7% and 96.4% (kernel 21 91.1%, 95.2%); D = 128 89.6% and 98.2%, then 92.3% and 99.3%.
 *
 * Sanitizers: memcheck, initcheck, synccheck and racecheck over --sanitize-shapes --kernel 23, 0 errors and 0 hazards.
 * A planted error (the word one bit too long, keep + 1) made 46 of --check --kernel 23's 104 cases fail.
 */
#include "overlap.cuh"

static int k23_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch_l<true, true, true, true, true, true, true>(23, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k23_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k23_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k23_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe(D, buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, " + Q's %d bytes; one block per SM, row tiles from a counter; O stored 16 bytes a lane; "
             "the next row tile's S issued behind the last P V; causal: half the diagonal's P V in warpgroup 0; "
             "a k step's descriptor by one add; the mask as a word of bits a row", D == 64 ? K13<64>::QTILE : K13<128>::QTILE);
}

static const FusedKernel kernel23 = {
    .id = 23, .extends = 22, .name = "bit mask",
    .idea = "kernel 22 with the mask as a 32-bit word a row, tested bit by bit",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k23_launch,
    .describe = k23_describe, .unavailable = wgmma_unavailable, .launch_l = k23_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel23);
