/*
 * Decode kernel 3: split-KV (flash-decoding).
 *
 * Extends decode kernel 2 (decode02_forward.cu). The idea: the keys of each (sequence, query head) are split into S
 * chunks of whole K/V tiles, one block each, and inside a block the 4 warps split every tile's 64 keys (16 each)
 * instead of splitting rows. Every warp ends with the tile loop's state (m, l, o) over its keys; the block merges its
 * warps' states in shared memory, and a second kernel, decode_merge, merges the blocks': m = max m_s,
 * l = sum e^(m_s - m) l_s, O = sum e^(m_s - m) o_s / l, step 04's flash_merge_cpu, twice.
 * Why: kernel 2 gives B = 1 with 32 heads 32 blocks for 132 SMs; S is chosen so that the grid fills the GPU once (as
 * many blocks as the SMs hold at a time: split, below), and every warp computes. A split block streams one long run
 * of tiles alone on its SM, so it keeps 3 in flight (4 stages, 139 KB at D = 128, one block an SM) where kernel 2
 * keeps 2 with two blocks an SM.
 * What it costs: the partial states, B Hq n S (D + 2) floats written and read back once (at S = 4, D = 128: under 1%
 * of the cache's bytes), and the merge's launch.
 * Measured: H100, fp16, D = 128: B = 1, 32 heads, L = 32768 195 us, 90% of the read bandwidth, 5.3x kernel 2; the
 * runs: RESULTS.md#decode-3.
 */
#ifndef RUNG
#define RUNG 3           // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "decode02_forward.cu"

// --- the idea -------------------------------------------------------------------------------------

/* The merge of the S splits' states of each row (grid: B Hq n rows, D threads): the closed form of step 04's
 * flash_merge_cpu, every split's weight e^(m_s - m) at once: m = max m_s, l = sum e^(m_s - m) l_s,
 * O = sum e^(m_s - m) o_s / l. A split past the sequence's keys wrote nothing and is not read. Merge: its own
 * hooks, DecMerge here: its loops over the splits as they are (UNROLL = 1: each split's loads after the last's;
 * decode kernel 9 unrolls them), and nothing to wait for before the states are read (the kernel is launched after
 * the split kernel; decode kernel 10 launches it earlier). */
struct DecMerge {
    static constexpr int UNROLL = 1;
    static __device__ __forceinline__ void wait_for_states() {}
};

template <int D, typename T, class Merge>
__global__ void __launch_bounds__(D)
decode_merge(const DecParams<T> p)
{
    const long row = blockIdx.x, b = row / (p.Hq * p.n);
    const int tiles = (p.len[b] + DEC_BC - 1) / DEC_BC;
    const int Sb = (tiles + p.chunk_tiles - 1) / p.chunk_tiles;  // the splits that hold keys of sequence b
    const float *m_s = p.ws_m + row * p.S, *l_s = p.ws_l + row * p.S;
    Merge::wait_for_states();
    float M = -INFINITY;
#pragma unroll Merge::UNROLL
    for (int s = 0; s < Sb; s++) M = fmaxf(M, m_s[s]);          // m = max m_s
    float L = 0.0f, O = 0.0f;
#pragma unroll Merge::UNROLL
    for (int s = 0; s < Sb; s++) {
        const float wt = ex2(m_s[s] - M);                       // e^(m_s - m); an empty split: 2^(-inf) = 0
        L += wt * l_s[s];                                        // l = sum e^(m_s - m) l_s
        O += wt * p.ws_o[(row * p.S + s) * D + threadIdx.x];     // o = sum e^(m_s - m) o_s
    }
    p.o[row * D + threadIdx.x] = dec_from_float<T>(L > 0.0f ? O / L : 0.0f); // O = o / l
}

/* The SM count and shared memory per SM, read from the device once: a decode step takes tens of microseconds, and
 * host calls before each launch would be time the GPU waits (and the timer counts). */
static void dec_device(int *sms, int *smem_sm)
{
    static int s = 0, m = 0;
    if (!s) {
        int dev = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&s, cudaDevAttrMultiProcessorCount, dev));
        m = gpu_smem_sm(); /* the --gpu-as GPU's, when one is emulated */
    }
    *sms = s;
    *smem_sm = m;
}

/* Blocks of NST stages an SM holds at a time: its shared memory over one block's (1 KB of it reserved per block), at
 * most 4 (the registers of 4 x 128 threads at about 128 each). Counted with padded stages for every kernel: decode
 * kernel 8's unpadded ones are 3-5% smaller, the same count on every GPU the tables name (1-3 blocks). */
template <int D, int NST> static long dec_per_sm()
{
    int sms, smem_sm;
    dec_device(&sms, &smem_sm);
    const long per_sm = (long)smem_sm / (long)(DecSmem<D, NST>::bytes + 1024);
    return per_sm < 1 ? 1 : per_sm > 4 ? 4 : per_sm;
}

struct Dec3Split : Dec2Forward {
    /* 4 stages: a split block streams its run of tiles alone on its SM */
    static constexpr int NST = 4;

    /* Who does what: warp w takes row block w % R and key slice w / R of nsl = 4 / R slices of each tile. */
    static __device__ __forceinline__ void roles(int warp, int R, int *nsl, int *rb, int *sl)
    {
        *nsl = DEC_WARPS / R; *rb = warp % R; *sl = warp / R;
    }

    /* The end of the block: the warps that shared a row block merge their states, through shared memory (the K/V
     * stages are free now: the copies still counted are empty groups, waited for here all the same):
     * m = max m_w, l = sum e^(m_w - m) l_w, o = sum e^(m_w - m) o_w. With one split that is the row's output; else
     * the split's state, for decode_merge. */
    template <class P, int D, typename T>
    static __device__ __forceinline__ void epilogue(const DecParams<T> &p, unsigned char *smem, const DecWarpAt &who,
                                                    float (&o)[D / 8][4], float (&m)[2], float (&l)[2])
    {
        cp_async_wait<0>();
        float *ms = reinterpret_cast<float *>(smem);             // [4 warps][16]
        float *ls = ms + DEC_WARPS * 16;                         // [4][16]
        float *os = ls + DEC_WARPS * 16;                         // [4][16][D]
        if (who.active) {
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int r16 = who.g + 8 * hh;
                if (who.t == 0) { ms[who.warp * 16 + r16] = m[hh]; ls[who.warp * 16 + r16] = l[hh]; }
#pragma unroll
                for (int nt = 0; nt < D / 8; nt++) {
                    os[(who.warp * 16 + r16) * D + nt * 8 + 2 * who.t] = o[nt][2 * hh];
                    os[(who.warp * 16 + r16) * D + nt * 8 + 2 * who.t + 1] = o[nt][2 * hh + 1];
                }
            }
        }
        __syncthreads();
        const int R = who.R, nsl = who.nsl;
        for (int x = threadIdx.x; x < R * 16 * D; x += DEC_WARPS * 32) {
            const int rbx = x / (16 * D), r16 = (x / D) % 16, d = x % D;
            const int gr = who.rc * DEC_ROWS + rbx * 16 + r16;
            if (gr >= p.rows) continue;
            float M = -INFINITY;
            for (int w = rbx; w < R * nsl; w += R) M = fmaxf(M, ms[w * 16 + r16]);      // m = max over the slices
            float L = 0.0f, O = 0.0f;
            for (int w = rbx; w < R * nsl; w += R) {
                const float wt = M == -INFINITY ? 0.0f : ex2(ms[w * 16 + r16] - M);    // e^(m_w - m)
                L += wt * ls[w * 16 + r16];
                O += wt * os[(w * 16 + r16) * D + d];
            }
            long hq, i;
            P::row(p, who.h, gr, &hq, &i);
            const long row = (who.b * p.Hq + hq) * p.n + i;
            if (p.S == 1) {                                      // one split: this is the row's output
                p.o[row * D + d] = dec_from_float<T>(L > 0.0f ? O / L : 0.0f);
            } else {                                             // the split's state, for decode_merge
                p.ws_o[(row * p.S + who.s) * D + d] = O;
                if (d == 0) { p.ws_m[row * p.S + who.s] = M; p.ws_l[row * p.S + who.s] = L; }
            }
        }
    }

    /* The grid: S is what fills the GPU once, as many blocks as the SMs hold at a time, B x heads x row chunks of
     * them before the split (whole waves, rounded down: a split more would start a wave mostly empty), never a split
     * without a tile. --splits forces S. short_splits: decode kernel 12's rule, none here. */
    static void short_splits(const DecodeArgs *a, DecGrid *gr, int sms, long per_sm, long base, long *S)
    {
        (void)a, (void)gr, (void)sms, (void)per_sm, (void)base, (void)S;
    }
    template <class P, int D> static void split(const DecodeArgs *a, DecGrid *gr)
    {
        int sms, smem_sm;
        dec_device(&sms, &smem_sm);
        const long per_sm = dec_per_sm<D, P::NST>();
        const long base = a->B * gr->heads * gr->rchunks, want = (long)sms * per_sm;
        long S = a->splits > 0 ? a->splits : want / base; /* whole waves: a split more would start a wave mostly empty */
        P::short_splits(a, gr, sms, per_sm, base, &S);
        if (S > gr->tiles) S = gr->tiles;
        if (S < 1) S = 1;
        gr->chunk_tiles = (int)((gr->tiles + S - 1) / S);
        gr->S = (gr->tiles + gr->chunk_tiles - 1) / gr->chunk_tiles;  // no split left without a tile
    }

    /* The states' workspace (ws: B Hq n S (D + 2) floats, dec_workspace below), and the merge kernel after the split
     * kernel where there are splits. */
    template <int D, typename T>
    static int params(int id, const DecodeArgs *a, void *ws, const DecGrid &gr, DecParams<T> *p)
    {
        const size_t rows_total = (size_t)a->B * a->Hq * a->n;
        p->ws_m = (float *)ws; p->ws_l = p->ws_m + rows_total * gr.S; p->ws_o = p->ws_l + rows_total * gr.S;
        return Dec2Forward::params<D>(id, a, ws, gr, p);
    }
    using Merge = DecMerge;
    template <class P, int D, typename T>
    static void after(const DecParams<T> &p, const DecGrid &gr, size_t rows_total, cudaStream_t s)
    {
        if (gr.S > 1) {
            decode_merge<D, T, typename P::Merge><<<(unsigned)rows_total, D, 0, s>>>(p);
            CUDA_CHECK_LAST();
        }
    }
    static const char *merge_words(const DecGrid &gr) { return gr.S == 1 ? "" : ", then the merge kernel"; }
};

// --- the launcher ---------------------------------------------------------------------------------

template <class P, int D, typename T> static size_t dec_ws_dt(const DecodeArgs *a)
{
    const DecGrid gr = dec_grid<P, D, T>(a);
    return gr.S > 1 ? (size_t)a->B * a->Hq * a->n * gr.S * (D + 2) * sizeof(float) : 0;
}
template <class P, int D, typename T> static size_t dec_ws_fit(const DecodeArgs *a)
{
    return P::template fewer<P, D, T>(a) ? dec_ws_dt<DecTwoStages<P>, D, T>(a) : dec_ws_dt<P, D, T>(a);
}
/* The DecodeKernel entry's workspace of kernel 3 and those after it. */
template <class P> static size_t dec_workspace(const DecodeArgs *a)
{
    if (a->dtype == DT_FP16 && a->D == 64) return dec_ws_fit<P, 64, __half>(a);
    if (a->dtype == DT_FP16 && a->D == 128) return dec_ws_fit<P, 128, __half>(a);
    if (a->dtype == DT_BF16 && a->D == 64) return dec_ws_fit<P, 64, __nv_bfloat16>(a);
    if (a->dtype == DT_BF16 && a->D == 128) return dec_ws_fit<P, 128, __nv_bfloat16>(a);
    return 0;
}

#if RUNG == 3
static int dk3_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec3Split>(3, a, ws, s); }
static size_t dk3_workspace(const DecodeArgs *a) { return dec_workspace<Dec3Split>(a); }
static void dk3_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec3Split>(a, buf, n); }

static const DecodeKernel decode3 = {
    .id = 3, .extends = 2, .name = "split-KV",
    .idea = "the keys split across blocks and warps, the (m, l, o) states merged",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .workspace = dk3_workspace,
    .launch = dk3_launch, .describe = dk3_describe,
};
DECODE_REGISTER(decode3);
#endif
