/*
 * Kernel 23: kernel 22 masking with fewer instructions: the causal mask as one 32-bit word a row.
 *
 * Extends kernel 22 (kernel22_desc_add.cu). The idea: a tile that needs a mask (the causal diagonal, the sequence's
 * end) has each lane decide, for each of its 64 scores, whether key c is visible from its row: kernel 22 computes c,
 * compares it with the sequence's end and with the diagonal, and selects -inf, three to four instructions a score. The
 * keys a lane holds in a row are c = 8n + 2t + b (n < 16, b = 0, 1), so the visible ones are the first `keep` of them
 * in that order, keep = 2 floor(v / 8) + min(v mod 8, 2) with v the row's visible keys less 2t: one word per row,
 * 2^keep - 1, made once per tile. A score then costs a test of a constant bit, which the compiler turns into predicates
 * two at a time (the R2P instruction), and the select. The masked scores and O are the same as kernel 22's, bit for
 * bit (--check compares with kernel 14).
 *
 * Why: Nsight Compute on kernel 21 at causal N = 512, D = 64 finds the ALU the busiest pipe, and the mask adds 130 to
 * 193 ALU instructions a masked tile to its 487 (the short causal forward profiled: RESULTS.md#kernel-22); at N = 512,
 * 4 of the 10 K/V tiles a head visits are diagonals.
 *
 * What it costs: the two words, about 20 instructions a masked tile (28 causal); nothing on the tiles without a mask.
 * Counted in the machine code (fp16, D = 64): a causal diagonal tile's mask and row max are about 208 instructions a
 * consumer thread against kernel 22's 261; at the sequence's end (no causal mask) 198 against 196.
 *
 * Measured: H200, over kernel 21 (kernel 22's own gain or loss included): causal, N = 512: +2.2% to +3.9% (D = 64),
 * +0.1% to +2.3% (D = 128); +0.6% to +2.6% at D = 128 from N = 2048, both dtypes, causal or not; at D = 64 from
 * N = 4096 kernel 22's loss remains; the runs and cuDNN beside them: RESULTS.md#kernel-23.
 */
#ifndef RUNG
#define RUNG 23 // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel22_desc_add.cu" // the rung this one extends (.extends = 22): its body and its policy

// --- the idea --------------------------------------------------------------------------------------------------

template <int D, typename T> struct BitMask : DescAdd<D, T> {
    /* A masked tile's scores and row maxima. This lane holds, of each of its two rows, the keys c = 8n + 2t + b
     * (n < BC / 8, b = 0, 1): number them k = 2n + b, 0 ... 31. Key c is seen when c < vis (vis: the row's visible keys
     * in this tile, the causal diagonal's d + 1, the sequence's end lim), that is when 8n + b < vis - 2t, when
     * k < 2 floor(v / 8) + min(v mod 8, 2) with v = vis - 2t: the first `keep` bits of the word are set. Each score then
     * costs a bit test with a constant (the compiler turns two at a time into predicates, R2P) and a select, not kernel
     * 22's column, compares and or. */
    template <class B> static __device__ __forceinline__ void mask_max(B &b, long j0, int lim, float mt[2])
    {
        constexpr int BC = K13<D>::BC;
        static_assert(BC / 4 == 32, "a row's keys on this lane fill one 32-bit word");
        uint32_t word[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int d = (int)((h == 0 ? b.row_g : b.row_g8) - j0);     // keys 0 ... d of this tile: at or left of the diagonal
            const int vis = b.causal && d + 1 < lim ? d + 1 : lim;        // keys 0 ... vis - 1 visible in this row
            const int v = vis - 2 * b.t < 0 ? 0 : vis - 2 * b.t;          // at most BC
            const int keep = (v / 8) * 2 + (v % 8 < 2 ? v % 8 : 2);       // bits 0 ... keep - 1
            word[h] = keep >= 32 ? 0xffffffffu : (1u << keep) - 1u;
        }
#pragma unroll
        for (int n = 0; n < BC / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                if (!((word[e / 2] >> (2 * n + e % 2)) & 1u)) b.s[4 * n + e] = -INFINITY;
                mt[e / 2] = fmaxf(mt[e / 2], b.s[4 * n + e]);
            }
    }

    static void describe(char *buf, size_t n);
};

// --- the launcher ------------------------------------------------------------------------------------------------

template <int D, typename T> void BitMask<D, T>::describe(char *buf, size_t n)
{
    DescAdd<D, T>::describe(buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, "; the mask as a word of bits a row");
}

#if RUNG == 23
static int k23_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch<BitMask>(23, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k23_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k23_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k23_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe<BitMask>(D, buf, n);
}

static const FusedKernel kernel23 = {
    .id = 23, .extends = 22, .name = "bit mask",
    .idea = "kernel 22 with the mask as a 32-bit word a row, tested bit by bit",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k23_launch,
    .describe = k23_describe, .unavailable = wgmma_unavailable, .launch_l = k23_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel23);
#endif
