/*
 * Backward kernel 12: backward kernel 11 with the end of each row tile moved under the next one's products.
 *
 * Extends backward kernel 11 (bwd11_persistent.cu). The idea: the tensor cores are not left idle between row tiles.
 * In kernels 10 and 11 a consumer warpgroup ends row tile i with dQ_i += ds K_j: it issues the product, waits for it,
 * arrives on the stage's barrier, stores the 64 x 64 part for the writer warp (after the writer's barrier says the
 * buffer is free), goes round the loop, waits for tile i + 1's stage and only then issues s^T. From the dQ product's
 * end to the next s^T's start nothing of this warpgroup is on the tensor cores, and the other warpgroup is at the
 * same place (the named barrier before dQ holds them together). Here tile i + 1 starts by issuing tile i's dQ product
 * (it needs ds^T_i, already in shared memory behind the named barrier, and K_j, not the new stage), then waits for its
 * stage and issues its own s^T behind it; once dQ is in (wait<1>: s^T still running) it stores dQ's part for the
 * writer and issues dp^T. So dQ, s^T and dp^T follow each other on the tensor cores, and the part's stores, the
 * writer's barrier and the stage's wait run under them. Tile i ends at the named barrier: wait for dV and dK, release
 * the stage. The walk's last dQ is issued after the loop (then kernel 11's kv_empty).
 * Why: in kernels 10 and 11, the dQ product's wait, the part's stores, two barriers and the next stage's wait stand
 * between one row tile's last product and the next one's first.
 * What it costs: 32 registers (dQ's part, live from the tile's start to its store), and 1/8 of a dQ product per walk:
 * in a walk's first row tile there is no last dQ, but one k step of it is issued anyway (on whatever the ds^T buffer
 * holds, thrown away), so that dQ's registers are written by the tensor cores on every path: issued under a branch,
 * ptxas serialised every wgmma of the kernel ("insufficient register resources"); with s^T instead issued at a tile's
 * end and carried across the loop's back edge, it injected waits and serialised them too. Kernel 12 has 20
 * WARPGROUP.DEPBAR for 164 HGMMA (kernel 11: 12 for 128); spills as kernel 11's (24-28 bytes, the producer's).
 * Measured: H200, fp16, N = 512 .. 16384, over kernel 11: +3.1% .. +4.8% at D = 64, +4.1% .. +10.0% at D = 128 (causal
 * D = 128 +3.1 .. +11.7%, bf16 D = 128 +5.0 .. +12.0%); at D = 128, 95% to 110% of cuDNN from N = 512 to 16384; the
 * runs: RESULTS.md#bwd-12.
 */
#ifndef RUNG
#define RUNG 12         // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd11_persistent.cu" // the rung this one extends (.extends = 11): its body and its policy

// --- the idea ----------------------------------------------------------------------

/* dQ_i's part of consumer warpgroup (qblk, dblk): this warpgroup's 64 x 64 of ds K_j, k = the BC keys (ds^T read
 * MN-major from its buffer, K_j MN-major), issued, not committed. ONE_STEP_IF_NOT_WHOLE: only the first k step when
 * !whole (the header says why), with the fences ptxas would otherwise add itself, and say so as it builds
 * ("warpgroup.arrive is injected"), where the branch leaves the products and where the paths meet again. */
template <typename T, int BC, bool ONE_STEP_IF_NOT_WHOLE = false, bool DESC_ADD = false>
__device__ __forceinline__ void bwd_issue_dq(float *dq, uint32_t ds_buf, uint32_t k_tile, int qblk, int dblk, bool whole = true)
{
    auto step = [&](int ks) {
        wgmma_ss<T, 64, 1, 1>(dq, bwd_desc<DESC_ADD>(ds_buf + qblk * BC * 128, ks * 2048, BC * 128),
                              bwd_desc<DESC_ADD>(k_tile + dblk * BC * 128, ks * 2048, BC * 128), ks > 0);
    };
    if constexpr (!ONE_STEP_IF_NOT_WHOLE) {
#pragma unroll
        for (int ks = 0; ks < BC / 16; ks++) step(ks);
    } else {
        step(0);
        if (whole) {
            wgmma_fence();
#pragma unroll
            for (int ks = 1; ks < BC / 16; ks++) step(ks);
        }
        wgmma_fence();
    }
}

namespace {   // as kernel 11's policy (its counters)
struct B12Policy : B11Policy {
    /* The last row tile's dQ first (it needs no new stage), into dq; then, once the stage has landed, s^T; once dQ is
     * in, its part to the writer, under s^T; then dp^T. In the walk's first row tile there is no last dQ: one k step
     * of it still runs, on whatever ds^T buffer holds, and is thrown away, so that dq is written by the tensor cores
     * on every path (written conditionally, ptxas serialised every wgmma of the kernel: "insufficient register
     * resources"). */
    template <class A>
    static __device__ __forceinline__ void scores(const A &a, const BwdWgThread &w, const BwdWgRow &rt, float *s, float *dp,
                                                  float *dq)
    {
        using C = typename A::C;
        wgmma_fence();
        bwd_issue_dq<typename A::T, C::BC, true, A::P::DESC_ADD>(dq, a.base + C::OFF_DS + (int)((rt.it - 1) & 1) * C::DS_TILE, a.base + C::OFF_K,
                                                 w.qblk, w.dblk, rt.i0 > w.i_begin);
        wgmma_commit();
        A::P::dq_issued(a, w, rt);                // kernel 18: the last row tile's dV, dK waited for here
        mbar_wait(a.full + 8 * rt.st, rt.use);    // Q_i, dO_i, L_i, Delta_i have landed
        A::P::template stage_landed<A>(rt, w.t);  // kernel 17: the first pairs of L_i and Delta_i read now
        wgmma_fence();
        bwd_wg_scores<A>(s, w.k_w, rt.q_s);
        wgmma_commit();
        /* The last tile's dQ is in: its part to the writer, under s^T. (This wait comes before this tile's named
         * barrier, so ds^T[(it - 1) % 2] is read before the next tile overwrites it: the double buffer's argument
         * holds.) */
        wgmma_wait<1>();
        if (rt.i0 > w.i_begin) A::P::put_dq(a, w, dq);
        wgmma_fence();
        bwd_wg_scores<A>(dp, w.v_w, rt.do_s);
        wgmma_commit();
        wgmma_wait<1>();                          // s^T is in; dp^T still running
    }
    /* After the named barrier: dV and dK in, the stage freed; dQ_i waits for the next tile's start, or the walk's end. */
    template <class A>
    static __device__ __forceinline__ void end_row(const A &a, const BwdWgThread &w, const BwdWgRow &rt, float *dq)
    {
        (void)w, (void)dq;
        wgmma_wait<0>();                          // dV, dK in: this thread is done with stage st
        mbar_arrive(a.empty + 8 * rt.st);
    }
    /* The walk's last dQ, then kernel 11's end of an item. */
    template <class A>
    static __device__ __forceinline__ void end_walk(const A &a, const BwdWgThread &w, long it, float *dq)
    {
        using C = typename A::C;
        if (w.i_begin < a.N) {
            wgmma_fence();
            bwd_issue_dq<typename A::T, C::BC, false, A::P::DESC_ADD>(dq, a.base + C::OFF_DS + (int)((it - 1) & 1) * C::DS_TILE, a.base + C::OFF_K,
                                               w.qblk, w.dblk);
            wgmma_commit();
            wgmma_wait<0>();
            A::P::put_dq(a, w, dq);
        }
        B11Policy::end_walk(a, w, it, dq);
    }

    static const char *desc_late() { return "; each row tile's dQ issued with the next one's s^T and dp^T"; }
};
} // namespace

// --- the launcher -------------------------------------------------------------------

#if RUNG == 12
static int b12_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                      void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                      void *stream)
{
    return wg_launch<B12Policy>(12, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b12_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B12Policy>(D, buf, n);
}

static const BackwardKernel bwd12 = {
    .id = 12, .extends = 11, .name = "late dQ",
    .idea = "kernel 11 with each row tile's dQ product issued at the next tile's start, with its s^T",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B12Policy::workspace, .launch = b12_launch, .describe = b12_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5, .persistent = 1,
};
BWD_REGISTER(bwd12);
#endif
