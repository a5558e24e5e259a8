/*
 * Decode kernel 11: the merge's loads in one round.
 *
 * Extends decode kernel 10 (decode10_early_merge.cu). The idea: kernel 10 hid the merge kernel's launch under the
 * split kernel's last blocks; what is left of the merge is its reads. decode_merge (kernel 9's) reads the Sb states of
 * its row 8 splits at a time, and twice: the m_s first, for m = max m_s, then m_s, l_s and o_s for the sums: at S = 32,
 * 8 trips to memory one after the other once griddepcontrol.wait has returned, with nothing to hide them.
 * decode_merge_round sets off every load first: each of the block's D threads its column of the first 32 splits' o_s
 * into registers, then thread s split s's m_s and l_s into shared memory; one barrier, and the sums. They are
 * decode_merge's, in its order, every thread walking the same m_s and l_s: O is kernel 10's bit for bit.
 * Why: Nsight Compute on the H200 (B = 1, 32 query heads over 8 KV heads, kernel 10) gives decode_merge 7.4 us at
 * L = 2048 and 7.6 at 32768 against the split kernel's 10.6 and 39.4.
 * What it costs: 32 registers a thread for the o_s in flight, 2 S floats of shared memory a merge block, and past 32
 * splits one more trip per 32. The split kernel is kernel 10's.
 * Measured: H200, fp16, D = 128, B = 1, 32/8 heads: decode_merge_round 4.1 us where decode_merge took 7.4-7.6; the
 * step +2.9% (L = 32768) to +11.9% (L = 2048) over kernel 10; the runs: RESULTS.md#decode-11.
 */
#ifndef RUNG
#define RUNG 11          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "decode10_early_merge.cu"

// --- the idea -------------------------------------------------------------------------------------

/* decode_merge's loads in one round: each thread first sets off the loads of its column of the first MERGE_CH splits'
 * o_s, into registers, then thread s reads split s's m_s and l_s into shared memory: all in flight at once, one trip
 * for Sb <= MERGE_CH (one more per MERGE_CH after). The sums are decode_merge's, in its order (each thread walks the
 * m_s and l_s in shared memory, the same values for every thread): O bit for bit. Launched early (kernel 10's
 * griddepcontrol.wait, kept). Shared memory: 2 S floats. */
constexpr int MERGE_CH = 32;

template <int D, typename T>
__global__ void __launch_bounds__(D)
decode_merge_round(const DecParams<T> p)
{
    extern __shared__ float ml[];                                // [S] m_s, then [S] l_s
    const long row = blockIdx.x, b = row / (p.Hq * p.n);
    const int tiles = (p.len[b] + DEC_BC - 1) / DEC_BC;
    const int Sb = min((tiles + p.chunk_tiles - 1) / p.chunk_tiles, p.S); // the splits that hold keys of sequence b
    const float *o_s = p.ws_o + row * p.S * D + threadIdx.x;     // this thread's column of split 0's o_s
    dec_wait_prerequisite();                                     // (kernel 10's early launch, kept)
    float ov[MERGE_CH];
#pragma unroll
    for (int c = 0; c < MERGE_CH; c++) ov[c] = c < Sb ? o_s[c * D] : 0.0f;       // the first MERGE_CH splits' o_s ...
    for (int s = threadIdx.x; s < Sb; s += D) { ml[s] = p.ws_m[row * p.S + s]; ml[p.S + s] = p.ws_l[row * p.S + s]; }
    __syncthreads();                                             // ... in flight with every m_s and l_s
    float M = -INFINITY;
    for (int s = 0; s < Sb; s++) M = fmaxf(M, ml[s]);            // m = max m_s
    float L = 0.0f, O = 0.0f;
    for (int s0 = 0; s0 < Sb; s0 += MERGE_CH) {
        if (s0 > 0) {                                            // past MERGE_CH splits: the next MERGE_CH, together
#pragma unroll
            for (int c = 0; c < MERGE_CH; c++) ov[c] = s0 + c < Sb ? o_s[(s0 + c) * D] : 0.0f;
        }
#pragma unroll
        for (int c = 0; c < MERGE_CH; c++) {
            if (s0 + c >= Sb) break;
            const float wt = ex2(ml[s0 + c] - M);                // e^(m_s - m); an empty split: 2^(-inf) = 0
            L += wt * ml[p.S + s0 + c];                          // l = sum e^(m_s - m) l_s
            O += wt * ov[c];                                     // o = sum e^(m_s - m) o_s
        }
    }
    p.o[row * D + threadIdx.x] = dec_from_float<T>(L > 0.0f ? O / L : 0.0f); // O = o / l
}

struct Dec11MergeRound : Dec10EarlyMerge {
    template <class P, int D, typename T>
    static void after(const DecParams<T> &p, const DecGrid &gr, size_t rows_total, cudaStream_t s)
    {
        if (gr.S > 1) dec_launch_early(decode_merge_round<D, T>, p, rows_total, D, 2 * (size_t)gr.S * sizeof(float), s);
    }
    static const char *merge_words(const DecGrid &gr)
    {
        return gr.S == 1 ? "" : ", then the merge kernel, launched early, its loads in one round";
    }
};

// --- the launcher ---------------------------------------------------------------------------------

#if RUNG == 11
static int dk11_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec11MergeRound>(11, a, ws, s); }
static size_t dk11_workspace(const DecodeArgs *a) { return dec_workspace<Dec11MergeRound>(a); }
static void dk11_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec11MergeRound>(a, buf, n); }

static const DecodeKernel decode11 = {
    .id = 11, .extends = 10, .name = "merge round",
    .idea = "the merge kernel's loads of every split's state at once",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk11_workspace, .launch = dk11_launch, .describe = dk11_describe,
    .unavailable = dec_bulk_unavailable,
    .same_sums = "the merge's loads in one round against 8 at a time, twice",
};
DECODE_REGISTER(decode11);
#endif
