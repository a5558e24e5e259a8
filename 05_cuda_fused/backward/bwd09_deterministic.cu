/*
 * Backward kernel 9: backward kernel 8 with dQ the same bit for bit run after run.
 *
 * Extends backward kernel 8 (bwd08_overlap.cu). The idea: order the additions. Every K/V tile j adds its part of dQ_i
 * into one fp32 accumulator; with atomics the parts arrive in whatever order the blocks run, and fp32 addition is not
 * associative, so dQ differs in its last bits from one run to the next (--check's rerun lines count the elements).
 * Here each consumer warpgroup waits, before adding its 64 x 64 part of dQ_i, until a counter for that row tile and
 * warpgroup reads j (tiles 0 .. j - 1 are in), adds its part with the same red.global.add.v2, and sets the counter to
 * j + 1: thread 0 spins with ld.acquire.gpu, a named barrier of the warpgroup's 128 threads lets them go, and after
 * their additions each fences, the barrier again, and thread 0 stores j + 1 with st.release.gpu. Every element of dQ
 * receives its parts in the order j = 0, 1, 2, ..., so the sum is one fixed sum (FlashAttention-3 has this as its
 * deterministic mode).
 * Why: a dQ that is the same bit for bit from run to run (kernel 8's differed in 10 of --check's 72 cases).
 * What it costs: the counters (2 per row tile of 64 queries and head, zeroed at each launch), and per row tile and
 * warpgroup a wait for the tile before it, two named barriers and a fence; a block that waits holds its SM. Causal,
 * a K/V tile's walk starts at its diagonal, so tile j reaches each row tile with fewer row tiles behind it than tile
 * j - 1 and waits there for it, at every row tile: the head's blocks go in a staircase. In the other order (J first)
 * the causal blocks would not wait, but a block would wait for one launched after it, which deadlocks once a head has
 * more K/V tiles than the GPU has SMs (N > 16896 on the H200); not done.
 * Measured: H200, fp16, N = 4096: 250.6 TFLOP/s at D = 64 and 285.6 at D = 128, 31% and 28% slower than kernel 8
 * (24-26% at N = 16384); causal 61% and 57% slower (the staircase); the runs: RESULTS.md#bwd-9.
 */
#ifndef RUNG
#define RUNG 9          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd08_overlap.cu" // the rung this one extends (.extends = 8): its body and its policy

// --- the idea ----------------------------------------------------------------------

struct B9Policy : B8Policy {
    /* This warpgroup's part goes in after K/V tiles 0 .. jt - 1 have added theirs to the same part of dQ_i, and before
     * tile jt + 1's: one counter per row tile and warpgroup (after dQ's accumulator in the workspace, zeroed by the
     * launch), which thread 0 of the warpgroup waits to see equal jt, and sets to jt + 1 once the 128 threads'
     * additions (kernel 5's, red.global.add.v2) are done. The tiles of one row tile are 0 .. some J, causal too (a K/V
     * tile's walk starts at the row tile holding its first key), and tile jt - 1's block starts no later than this
     * one's (the grid goes in order), so the wait ends. */
    template <class A>
    static __device__ __forceinline__ void add_dq(const A &a, const BwdWgThread &w, const BwdWgRow &rt, const float *dq)
    {
        constexpr int D = A::D, BR = A::C::BR;
        const long row_tiles = (a.N + BR - 1) / BR;
        unsigned *sem = reinterpret_cast<unsigned *>(a.dq_acc + (long)(gridDim.x / a.kv_tiles) * a.N * D) +
                        (w.bh * row_tiles + rt.i0 / BR) * 2 + w.wg;
        if (threadIdx.x % 128 == 0)
            while (ld_acquire_gpu(sem) != (unsigned)w.jt) {
            }
        asm volatile("bar.sync %0, 128;\n" ::"r"(2 + w.wg) : "memory");   // the warpgroup's 128 threads, after the wait
        B8Policy::add_dq(a, w, rt, dq);
        __threadfence();                          // this thread's additions performed before the counter moves
        asm volatile("bar.sync %0, 128;\n" ::"r"(2 + w.wg) : "memory");
        if (threadIdx.x % 128 == 0) st_release_gpu(sem, (unsigned)w.jt + 1);
    }

    /* The workspace: kernel 5's, and after it a counter per row tile (of 64 queries, the smaller BR) and consumer
     * warpgroup. */
    static size_t workspace(long B, long H, long N, long D, int dtype)
    {
        return B8Policy::workspace(B, H, N, D, dtype) + (size_t)B * H * ((N + 63) / 64) * 2 * sizeof(unsigned);
    }
    /* The counters, zeroed before the main kernel. */
    static void before_main(float *dq_acc, long BH, long N, long D, int BR, cudaStream_t s)
    {
        CUDA_CHECK(cudaMemsetAsync(dq_acc + BH * N * D, 0, (size_t)BH * ((N + BR - 1) / BR) * 2 * sizeof(unsigned), s));
    }

    static const char *desc_dq() { return "fp32 red.global.add in the order of the K/V tiles (a counter per row tile): deterministic"; }
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 9
static int b9_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return wg_launch<B9Policy>(9, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b9_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B9Policy>(D, buf, n);
}

static const BackwardKernel bwd9 = {
    .id = 9, .extends = 8, .name = "deterministic dQ",
    .idea = "kernel 8 with dQ's parts added in the order of the K/V tiles: dQ bit-identical run to run",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B9Policy::workspace, .launch = b9_launch, .describe = b9_describe,
    .unavailable = wgmma_unavailable, .dq_deterministic = 1, .dkdv_as = 5,
};
BWD_REGISTER(bwd9);
#endif
