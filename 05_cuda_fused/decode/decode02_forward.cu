/*
 * Decode kernel 2: the forward kernel as is, on decode's shape.
 *
 * Extends decode kernel 1 (decode01_transcription.cu). The idea: the mma.sync forward (kernel09_ffma_scale.cu's
 * block: 4 warps of 16 query rows, K/V tiles of BC = 64 keys through shared memory by cp.async, S = Q K^T and O += P V
 * on the tensor cores, the online softmax on the fragments) given decode's shape: the query rows of a (sequence,
 * query head) are its n new rows, the keys its cache. The arithmetic is kernel 9's: fp32 accumulators, the running
 * max in log2 units, p = 2^(s scale_log2 - m) as one FFMA and one ex2, P packed from the score fragments into the A
 * fragments of the second product without leaving registers. A warp owns 16 query rows; the n <= 16 new rows of a
 * sequence are padded to 16: the tensor cores do the padding's work, and they are far from being what a decode
 * waits on (decode.cuh: the cache's bytes are).
 * This file is also the body of decode kernels 3-13: the kernel and its launcher are written once, here, with named
 * hooks, and Dec2Forward below holds kernel 2's code for each; a later rung's policy derives from its predecessor's
 * and replaces the hooks its idea changes (decode03_split_kv.cu's Dec3Split replaces the warps' roles, the end of
 * the block, the grid, and launches the merge).
 * Why: kernel 1 gives each query row one thread that reads the whole cache alone, in 2-byte pieces; here a block's
 * 128 threads copy each tile once, 16 bytes a thread an instruction, and the tensor cores do the products.
 * What it costs: the forward's grid is one block per (sequence, head, row tile), and decode has one row tile: B x Hq
 * blocks. At B = 1 and 32 heads that is 32 blocks for the H100's 132 SMs, each streaming a head's whole cache alone;
 * and with n <= 16 new rows only the first of the 4 warps has rows (the other three copy tiles and wait). The
 * forward's shape is right when there are many sequences, wrong for one.
 * Measured: H100, fp16, D = 128, one new row: B = 1, 32 heads, L = 32768 1036 us, 17% of the read bandwidth; B = 64,
 * L = 2048 (2048 blocks) 761 us, 92%; the runs: RESULTS.md#decode-2.
 */
#ifndef RUNG
#define RUNG 2           // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "decode.cuh"

// --- the idea -------------------------------------------------------------------------------------

/* One K/V tile (keys key0 .. key0 + 63 of sequence b, KV head hkv) into shared memory [64][LD] by cp.async, each
 * thread every 128th 16-byte chunk (consecutive threads, consecutive chunks of a row: one warp copies 512 contiguous
 * bytes an instruction); keys past len are zero-filled (the mask hides them). */
template <int D, typename T>
__device__ __forceinline__ void dec_load_tile(T *ks, T *vs, const DecParams<T> &p, long b, long hkv, long key0, int len)
{
    constexpr int LD = D + 8, CH = DEC_BC * D / 8;
    const long base = (b * p.Hkv + hkv) * p.max_len * D; // contiguous: sequence b, head hkv
    for (int c = threadIdx.x; c < CH; c += DEC_WARPS * 32) {
        const int r = c / (D / 8), col = (c % (D / 8)) * 8;
        const long key = key0 + r;
        const bool in = key < len;
        long off = 0;
        if (in) off = base + key * D + col;
        cp_async16(ks + r * LD + col, p.k + off, in ? 16 : 0);
        cp_async16(vs + r * LD + col, p.v + off, in ? 16 : 0);
    }
}

/* 16 keys (k_s rows kr .. kr + 15, absolute keys ka .. ka + 15) into one warp's state for its 16 rows: the tile loop
 * of step 04 on fragments. last[h]: the last key row g + 8h may see (-1: a padded row). Sm: the stages' layout. */
template <int D, typename T, class Sm>
__device__ __forceinline__ void dec_warp16(const uint32_t (&qa)[D / 16][4], const T *k_s, const T *v_s, int kr, long ka,
                                           const long (&last)[2], bool need_mask, float scale_log2,
                                           float (&o)[D / 8][4], float (&m)[2], float (&l)[2])
{
    const int lane = threadIdx.x % 32, t = lane % 4;
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {                                      // s_tile = Q K^T, 16 x 16
        uint32_t kf[4];
        ldmatrix_x4(kf, k_s + Sm::ld_at(kr, (lane % 8) + 8 * (lane / 16), ks * 16, 8 * ((lane / 8) % 2)));
        mma16816<T>(s[0], qa[ks], kf);
        mma16816<T>(s[1], qa[ks], kf + 2);
    }
    float mt[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float &x = s[nt][e];
            if (need_mask && ka + nt * 8 + 2 * t + (e % 2) > last[e / 2]) x = -INFINITY; // causal, and past len
            mt[e / 2] = fmaxf(mt[e / 2], x);                                   // m_tile = rowmax(s_tile)
        }
    float bse[2], alpha[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
#pragma unroll
        for (int off = 1; off <= 2; off *= 2) mt[h] = fmaxf(mt[h], __shfl_xor_sync(0xffffffffu, mt[h], off));
        const float mn = fmaxf(m[h], mt[h] * scale_log2);                      // m_new = max(m, m_tile), log2 units
        bse[h] = mn == -INFINITY ? 0.0f : mn;                                  // nothing visible yet: 2^(-inf) = 0
        alpha[h] = ex2(m[h] - bse[h]);                                         // alpha = e^(m - m_new)
        m[h] = mn;
    }
    uint32_t pf[4];                                                            // p_tile as the A fragment
    float p[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) p[nt][e] = ex2(fmaf(s[nt][e], scale_log2, -bse[e / 2])); // p = e^(s - m_new)
    pf[0] = pack2<T>(p[0][0], p[0][1]);   // row g,   keys 2t, 2t+1
    pf[1] = pack2<T>(p[0][2], p[0][3]);   // row g+8
    pf[2] = pack2<T>(p[1][0], p[1][1]);   // row g,   keys 2t+8, 2t+9
    pf[3] = pack2<T>(p[1][2], p[1][3]);   // row g+8
#pragma unroll
    for (int h = 0; h < 2; h++)
        l[h] = alpha[h] * l[h] + p[0][2 * h] + p[0][2 * h + 1] + p[1][2 * h] + p[1][2 * h + 1]; // l = alpha l + rowsum(p)
#pragma unroll
    for (int nt = 0; nt < D / 8; nt++) {                                        // o = alpha o ...
        o[nt][0] *= alpha[0]; o[nt][1] *= alpha[0];
        o[nt][2] *= alpha[1]; o[nt][3] *= alpha[1];
    }
#pragma unroll
    for (int n2 = 0; n2 < D / 16; n2++) {                                       // ... + p_tile V
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, v_s + Sm::ld_at(kr, (lane % 8) + 8 * ((lane / 8) % 2), n2 * 16, 8 * (lane / 16)));
        mma16816<T>(o[2 * n2], pf, vf);
        mma16816<T>(o[2 * n2 + 1], pf, vf + 2);
    }
}

/* Who a warp is at the end of the tile loop: its block's sequence b, grid head h, split s and row chunk rc; the warp,
 * its lane's group g and thread t; the block's R row blocks of 16, nsl key slices; the warp's row block rb, and
 * whether it had rows (active). */
struct DecWarpAt { long b, h; int s, rc, warp, g, t, R, nsl, rb; bool active; };

/* Whether P's stages fit in a block's shared memory on this GPU. */
template <class P, int D> static bool dec_stages_fit()
{
    return P::template Smem<D, P::NST>::bytes <= (size_t)gpu_smem_block();
}

/* Decode kernel 2's hooks: the policy the body below is written on, each hook holding kernel 2's own code. A later
 * rung derives from its predecessor's policy and replaces the hooks its idea changes (each hook's comment names the
 * rungs that replace it). A hook that calls another hook, or reads the stage count, takes the kernel's whole policy
 * as its first template argument P, so that it calls the latest rung's version (and DecTwoStages<P>'s count). */
struct Dec2Forward {
    /* The stages and their layout: 3 stages (104 KB at D = 128: two blocks an SM, 2 tiles in flight each), rows
     * padded (decode.cuh). Kernel 3 takes 4 stages, kernel 5 3 again; kernel 8 the copy engine's layout. */
    static constexpr int NST = 3;
    template <int D, int NST> using Smem = DecSmem<D, NST>;

    /* At the block's start: nothing (kernel 10 lets the merge kernel be scheduled here). */
    static __device__ __forceinline__ void at_start() {}

    /* Heads: grid head h is query head h; it reads KV head h / (Hq / Hkv), and its rows gr are new rows i = gr
     * (kernel 4: grid head h is KV head h, its rows those of its g query heads). */
    template <typename T> static __device__ __forceinline__ long kv_head(const DecParams<T> &p, long h)
    {
        return h / (p.Hq / p.Hkv);
    }
    template <typename T>
    static __device__ __forceinline__ void row(const DecParams<T> &p, long h, int gr, long *hq, long *i)
    {
        (void)p;
        *hq = h; *i = gr;
    }

    /* Who does what: warp w takes row block w and every key of each tile (kernel 3: the warps split the keys). */
    static __device__ __forceinline__ void roles(int warp, int R, int *nsl, int *rb, int *sl)
    {
        (void)R;
        *nsl = 1; *rb = warp; *sl = 0;
    }

    /* The cache: contiguous, [B, Hkv, max_len, D]. No page table: copier (the threads that read it: kernel 8's warp
     * 0) and tile_pages (its read a tile ahead: kernel 5) have nothing to do. */
    static __device__ __forceinline__ bool copier(int warp) { (void)warp; return true; }
    template <typename T>
    static __device__ __forceinline__ void tile_pages(const DecParams<T> &p, long b, long tile, int len, int (&ent)[4])
    {
        (void)p, (void)b, (void)tile, (void)len, (void)ent;
    }
    /* whether the first copies read their tile's pages first (kernel 13 reads tile 0's up front) */
    static __device__ __forceinline__ bool pages_in_first_copies(int st) { (void)st; return true; }

    /* One tile into a stage (bar: the stage's mbarrier, kernel 8's), and the wait for tile it: cp.async here, kernel
     * 5's through the pages, kernel 7's lean, kernel 8's by the copy engine. */
    template <class P, int D, typename T>
    static __device__ __forceinline__ void copy_tile(T *ks, T *vs, const DecParams<T> &p, long b, long hkv, long key0,
                                                     int len, const int (&ent)[4], uint32_t bar)
    {
        (void)ent, (void)bar;
        dec_load_tile<D>(ks, vs, p, b, hkv, key0, len);
    }
    template <class P, int D, typename T>
    static __device__ __forceinline__ void wait_tile(T *k_s, T *v_s, uint32_t bar0, int it, int t0, int len)
    {
        (void)k_s, (void)v_s, (void)bar0, (void)it, (void)t0, (void)len;
        cp_async_commit();                                       // (empty near the end: the count stays uniform)
        cp_async_wait<P::NST - 1>();                             // tile it has landed ...
        __syncthreads();                                         // ... for every thread
    }

    /* The order of the block's first loads: before the length is known, nothing; once the split's tiles are known, Q's
     * fragments (load_q); before the tile loop, the first NST - 1 tiles' copies (first_copies; kernel 8 makes its
     * mbarriers first; kernel 13 moves all three). */
    template <class P, typename T, class LoadQ>
    static __device__ __forceinline__ void before_len(const DecParams<T> &p, long b, int t0, bool copier, int (&ent)[4],
                                                      uint32_t bar0, LoadQ &load_q)
    {
        (void)p, (void)b, (void)t0, (void)copier, (void)ent, (void)bar0, (void)load_q;
    }
    template <class LoadQ, class FirstCopies>
    static __device__ __forceinline__ void after_len(LoadQ &load_q, FirstCopies &first_copies)
    {
        (void)first_copies;
        load_q();
    }
    template <class P, class FirstCopies>
    static __device__ __forceinline__ void before_loop(uint32_t bar0, FirstCopies &first_copies)
    {
        (void)bar0;
        first_copies();
    }

    /* The end of the block: the forward's epilogue, each warp its own rows, O = o / l (kernel 3: the warps' states
     * merged). */
    template <class P, int D, typename T>
    static __device__ __forceinline__ void epilogue(const DecParams<T> &p, unsigned char *smem, const DecWarpAt &who,
                                                    float (&o)[D / 8][4], float (&m)[2], float (&l)[2])
    {
        (void)smem, (void)m;
        if (!who.active) return;
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int gr = who.rc * DEC_ROWS + who.rb * 16 + who.g + 8 * hh;
            if (gr >= p.rows) continue;
            long hq, i;
            P::row(p, who.h, gr, &hq, &i);
            const float inv = l[hh] > 0.0f ? 1.0f / l[hh] : 0.0f;
            T *orow = p.o + ((who.b * p.Hq + hq) * p.n + i) * D;
#pragma unroll
            for (int nt = 0; nt < D / 8; nt++)                   // O = o / l
                *reinterpret_cast<uint32_t *>(orow + nt * 8 + 2 * who.t) =
                    pack2<T>(o[nt][2 * hh] * inv, o[nt][2 * hh + 1] * inv);
        }
    }

    /* The launcher's hooks. The grid: one block per (sequence, query head, row chunk), one split of every tile
     * (kernel 4: KV heads; kernel 3: splits, kernel 12's short_splits inside). */
    static void grid_heads(const DecodeArgs *a, int *heads, int *g) { *heads = (int)a->Hq; *g = 1; }
    template <class P, int D> static void split(const DecodeArgs *a, DecGrid *gr) { (void)a, (void)gr; }
    /* Whether to launch with two stages instead of NST (DecTwoStages): where NST's do not fit the GPU's shared memory
     * (99 KB a block on the RTX 30/40/50 and the L4, 64 KB on Turing), two, the fewest that still overlap a tile's
     * load with the last one's math (the kernels' idea survives; 68 KB at D = 128, 36 KB at D = 64: so on Turing's
     * 64 KB D = 64 runs and D = 128 is still refused, a SKIP). Kernel 6 takes two where the grid fills the GPU. */
    template <class P, int D, typename T> static bool fewer(const DecodeArgs *a)
    {
        (void)a;
        return !dec_stages_fit<P, D>();
    }
    /* What a launch refuses before anything (-1 after one line: kernel 5's page sizes), what it sets in p besides the
     * arguments (the cache's address; kernel 3's workspace, kernel 5's pools, kernel 8's tensor maps), and what it
     * launches after the kernel (kernel 3's merge, launched early from kernel 10, kernel 11's). */
    static int refuse(int id, const DecodeArgs *a) { (void)id, (void)a; return 0; }
    template <int D, typename T>
    static int params(int id, const DecodeArgs *a, void *ws, const DecGrid &gr, DecParams<T> *p)
    {
        (void)id, (void)ws, (void)gr;
        p->k = (const T *)a->k; p->v = (const T *)a->v;
        return 0;
    }
    template <class P, int D, typename T>
    static void after(const DecParams<T> &p, const DecGrid &gr, size_t rows_total, cudaStream_t s)
    {
        (void)p, (void)gr, (void)rows_total, (void)s;
    }
    /* describe's words: whose heads the grid runs (kernel 4), what follows the kernel (3, 10, 11, 12), how the cache
     * is read (5) */
    static constexpr const char *heads_words = "query";
    static const char *merge_words(const DecGrid &gr) { (void)gr; return ""; }
    static constexpr const char *cache_words = "";
};

/* P with two stages instead of its own (the launcher's choice: fewer, above). */
template <class P> struct DecTwoStages : P { static constexpr int NST = 2; };

// --- the body -------------------------------------------------------------------------------------

template <int D, typename T, class P>
__global__ void __launch_bounds__(DEC_WARPS * 32)
decode_kernel(const __grid_constant__ DecParams<T> p)     // (__grid_constant__: the tensor maps' address is taken)
{
    P::at_start();
    using Sm = typename P::template Smem<D, P::NST>;
    constexpr int LD = Sm::LD, NST = P::NST;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    constexpr int A = Sm::ALIGN;                                 // the stages from the first A-byte boundary
    unsigned char *stage0 = smem_raw + ((A - ((uint32_t)__cvta_generic_to_shared(smem_raw) & (A - 1))) & (A - 1));
    T *k_buf = reinterpret_cast<T *>(stage0);                    // [NST][BC][LD]
    T *v_buf = k_buf + NST * DEC_BC * LD;                    // [NST][BC][LD]
    const uint32_t bar0 = (uint32_t)__cvta_generic_to_shared(stage0 + Sm::stages); // decode kernel 8: [NST] mbarriers
    const long b = blockIdx.x / p.heads, h = blockIdx.x % p.heads;
    const int s = blockIdx.y, rc = blockIdx.z;                   // split s of the keys, row chunk rc
    const long hkv = P::kv_head(p, h);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int t0 = s * p.chunk_tiles;
    int ent[4] = {0, 0, 0, 0};                                   // decode kernel 5: the pages of the next tile to copy
    const bool copier = P::copier(warp);                         // the threads that read those pages
    const int len = p.len[b];

    /* Who does what. rows_here query rows (of the rows of this sequence and grid head) in R blocks of 16; warp w
     * takes row block rb and key slice sl of the nsl slices of each tile (P::roles). */
    const int rows_here = min(DEC_ROWS, p.rows - rc * DEC_ROWS), R = (rows_here + 15) / 16;
    int nsl, rb, sl;
    P::roles(warp, R, &nsl, &rb, &sl);
    const bool active = rb < R && sl < nsl;
    const int slice_keys = DEC_BC / nsl;                         // 16, 32 or 64

    /* This lane's two rows (g and g + 8 of the row block): their new-row index i, whether they are real, and Q's
     * A fragments, straight from memory. */
    long qi[2];
    bool qreal[2];
    uint32_t qa[D / 16][4];
    auto load_q = [&]() {
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int gr = rc * DEC_ROWS + rb * 16 + g + 8 * hh;
            long hq = 0, i = 0;
            const bool real = active && gr < p.rows;
            if (real) P::row(p, h, gr, &hq, &i);
            qi[hh] = i;
            qreal[hh] = real;
            const T *qrow = p.q + ((b * p.Hq + hq) * p.n + i) * D;
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) {
                qa[ks][hh] = real ? *reinterpret_cast<const uint32_t *>(qrow + ks * 16 + 2 * t) : 0u;
                qa[ks][2 + hh] = real ? *reinterpret_cast<const uint32_t *>(qrow + ks * 16 + 8 + 2 * t) : 0u;
            }
        }
    };
    P::template before_len<P>(p, b, t0, copier, ent, bar0, load_q);
    const int tiles = (len + DEC_BC - 1) / DEC_BC;
    const int t1 = min(t0 + p.chunk_tiles, tiles);
    if (t0 >= t1) return;                                        // a split past this sequence's keys: no state

    /* The K/V tiles t0 .. t1 - 1 through NST stages: tile it + NST - 1 is copied while tile it is used. */
    auto first_copies = [&]() {
#pragma unroll
        for (int st = 0; st < NST - 1; st++) {
            if (t0 + st < t1) {
                if (copier && P::pages_in_first_copies(st)) P::tile_pages(p, b, t0 + st, len, ent);
                P::template copy_tile<P, D>(k_buf + st * DEC_BC * LD, v_buf + st * DEC_BC * LD, p, b, hkv,
                                            (long)(t0 + st) * DEC_BC, len, ent, bar0 + 8 * st);
            }
            cp_async_commit();
        }
        if (copier && t0 + NST - 1 < t1) P::tile_pages(p, b, t0 + NST - 1, len, ent);
    };
    P::after_len(load_q, first_copies);

    /* The last key each of this lane's rows sees: row i sits at position len - n + i. A padded row (past the
     * block's rows) is never masked: its q is 0, so every score is 0 and nothing overflows, and what it computes
     * is never written. */
    long last[2];
#pragma unroll
    for (int hh = 0; hh < 2; hh++) last[hh] = qreal[hh] ? len - p.n + qi[hh] : LONG_MAX;
    /* The warp's rows: below lastmin no key is masked for any of them (no compare needed), past lastmax every
     * key is (the warp stops there). */
    long lastmin = min(last[0], last[1]);
    long lastmax = max(last[0] == LONG_MAX ? -1 : last[0], last[1] == LONG_MAX ? -1 : last[1]);
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
        lastmin = min(lastmin, __shfl_xor_sync(0xffffffffu, lastmin, off));
        lastmax = max(lastmax, __shfl_xor_sync(0xffffffffu, lastmax, off));
    }

    float o[D / 8][4];
#pragma unroll
    for (int nt = 0; nt < D / 8; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    P::template before_loop<P>(bar0, first_copies);
    for (int it = 0; it < t1 - t0; it++) {
        const int nxt = it + NST - 1;
        if (t0 + nxt < t1) {
            P::template copy_tile<P, D>(k_buf + (nxt % NST) * DEC_BC * LD, v_buf + (nxt % NST) * DEC_BC * LD, p, b, hkv,
                                        (long)(t0 + nxt) * DEC_BC, len, ent, bar0 + 8 * (nxt % NST));
            if (copier && t0 + nxt + 1 < t1) P::tile_pages(p, b, t0 + nxt + 1, len, ent); // next iteration's
        }
        T *k_s = k_buf + (it % NST) * DEC_BC * LD, *v_s = v_buf + (it % NST) * DEC_BC * LD;
        P::template wait_tile<P, D>(k_s, v_s, bar0, it, t0, len);
        if (active) {
            for (int kr = sl * slice_keys; kr < (sl + 1) * slice_keys; kr += 16) {
                const long ka = (long)(t0 + it) * DEC_BC + kr;   // the 16 keys' absolute index
                if (ka > lastmax) break;                         // every key from here on is masked for this warp
                dec_warp16<D, T, Sm>(qa, k_s, v_s, kr, ka, last, ka + 15 > lastmin, p.scale_log2, o, m, l);
            }
        }
        __syncthreads();                                         // nobody reads stage it % NST any more
    }

#pragma unroll
    for (int hh = 0; hh < 2; hh++)                               // l across the quad (each lane summed its keys)
#pragma unroll
        for (int off = 1; off <= 2; off *= 2) l[hh] += __shfl_xor_sync(0xffffffffu, l[hh], off);

    const DecWarpAt who = {b, h, s, rc, warp, g, t, R, nsl, rb, active};
    P::template epilogue<P, D>(p, smem_raw, who, o, m, l);
}

// --- the launcher ---------------------------------------------------------------------------------

/* The launcher is the body's too: a later rung changes it through its policy's launcher hooks (the grid, the stage
 * count, the cache's address, what follows the kernel). */
template <class P, int D, typename T>
static DecGrid dec_grid(const DecodeArgs *a)
{
    DecGrid gr;
    P::grid_heads(a, &gr.heads, &gr.g);
    gr.rows = gr.g * (int)a->n;
    gr.rchunks = (gr.rows + DEC_ROWS - 1) / DEC_ROWS;
    gr.tiles = (int)((a->max_len + DEC_BC - 1) / DEC_BC);
    gr.S = 1;
    gr.chunk_tiles = gr.tiles;
    gr.one = false;
    P::template split<P, D>(a, &gr);
    return gr;
}

template <class P, int D, typename T>
static int dec_launch_dt(int id, const DecodeArgs *a, void *ws, cudaStream_t s)
{
    if (P::refuse(id, a)) return -1;
    using Sm = typename P::template Smem<D, P::NST>;
    static int opted = 0;                                        /* once per instantiation, not per launch */
    if (!opted) {
        if (smem_opt_in(decode_kernel<D, T, P>, Sm::bytes, "decode kernel", id, D)) return -1;
        opted = 1;
    }
    const DecGrid gr = dec_grid<P, D, T>(a);
    DecParams<T> p = {};
    p.q = (const T *)a->q; p.o = (T *)a->o;
    p.len = a->len; p.table = a->table;
    const size_t rows_total = (size_t)a->B * a->Hq * a->n;
    p.Hq = a->Hq; p.Hkv = a->Hkv; p.n = a->n; p.max_len = a->max_len; p.max_pages = a->max_pages;
    p.page_shift = 0;
    p.heads = gr.heads; p.g = gr.g; p.rows = gr.rows; p.S = gr.S; p.chunk_tiles = gr.chunk_tiles;
    p.scale_log2 = softmax_scale_log2(D);                        // log2(e) / sqrt(D)
    if (P::template params<D>(id, a, ws, gr, &p)) return -1;
    decode_kernel<D, T, P><<<dim3((unsigned)(a->B * gr.heads), (unsigned)gr.S, (unsigned)gr.rchunks), DEC_WARPS * 32,
                             Sm::bytes, s>>>(p);
    CUDA_CHECK_LAST();
    P::template after<P, D>(p, gr, rows_total, s);
    return 0;
}

/* The launch, its workspace (decode kernel 3 on) and its describe line all go through the stage count chosen here,
 * so that the split count (sized from the stages' bytes) is the same in each. */
template <class P, int D, typename T> static int dec_launch_fit(int id, const DecodeArgs *a, void *ws, cudaStream_t s)
{
    return P::template fewer<P, D, T>(a) ? dec_launch_dt<DecTwoStages<P>, D, T>(id, a, ws, s) : dec_launch_dt<P, D, T>(id, a, ws, s);
}
template <class P, int D, typename T> static DecGrid dec_grid_fit(const DecodeArgs *a, int *stages)
{
    const bool fewer = P::template fewer<P, D, T>(a);
    *stages = fewer ? 2 : P::NST;
    return fewer ? dec_grid<DecTwoStages<P>, D, T>(a) : dec_grid<P, D, T>(a);
}

/* The DecodeKernel entries of kernel `id` with policy P: fp16 / bf16, D = 64 or 128. */
template <class P> static int dec_launch(int id, const DecodeArgs *a, void *ws, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (a->dtype == DT_FP16 && a->D == 64) return dec_launch_fit<P, 64, __half>(id, a, ws, s);
    if (a->dtype == DT_FP16 && a->D == 128) return dec_launch_fit<P, 128, __half>(id, a, ws, s);
    if (a->dtype == DT_BF16 && a->D == 64) return dec_launch_fit<P, 64, __nv_bfloat16>(id, a, ws, s);
    if (a->dtype == DT_BF16 && a->D == 128) return dec_launch_fit<P, 128, __nv_bfloat16>(id, a, ws, s);
    fprintf(stderr, "%s: decode kernel %d takes fp16/bf16 and D = 64 or 128, not %s D=%ld\n", g_prog, id,
            dtype_name(a->dtype), a->D);
    return -1;
}

template <class P> static void dec_describe(const DecodeArgs *a, char *buf, size_t n)
{
    DecGrid gr;
    int st;
    if (a->D == 64) gr = a->dtype == DT_BF16 ? dec_grid_fit<P, 64, __nv_bfloat16>(a, &st) : dec_grid_fit<P, 64, __half>(a, &st);
    else gr = a->dtype == DT_BF16 ? dec_grid_fit<P, 128, __nv_bfloat16>(a, &st) : dec_grid_fit<P, 128, __half>(a, &st);
    const long blocks = a->B * gr.heads * (long)gr.S * gr.rchunks;
    snprintf(buf, n, "%ld blocks of 4 warps: %ld sequences x %d %s heads%s x %d split%s of %d K/V tiles of %d keys, "
             "%d stages; %d query rows a block%s%s", blocks, a->B, gr.heads, P::heads_words,
             gr.rchunks > 1 ? " x row chunks" : "", gr.S, gr.S == 1 ? "" : "s", gr.chunk_tiles, DEC_BC, st,
             gr.rows < DEC_ROWS ? gr.rows : DEC_ROWS, P::merge_words(gr), P::cache_words);
}

#if RUNG == 2
static int dk2_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec2Forward>(2, a, ws, s); }
static void dk2_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec2Forward>(a, buf, n); }

static const DecodeKernel decode2 = {
    .id = 2, .extends = 1, .name = "forward as is",
    .idea = "the forward's block: one per (sequence, query head), warps over rows",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .launch = dk2_launch,
    .describe = dk2_describe,
};
DECODE_REGISTER(decode2);
#endif
