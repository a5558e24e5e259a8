/*
 * Backward kernel 4: backward kernel 3 with one barrier per row tile, not two.
 *
 * Extends backward kernel 3 (bwd03_wide_kv.cu). The idea: let the warps drift apart by a phase. In kernels 2 and 3
 * every row tile has two barriers: after ds^T is written (dQ reads all the block's keys), and at the end (the next
 * row tile's copy has landed; ds^T and this tile's buffers are free). At the second, all 8 warps have just done the
 * dQ product, whose shared-memory reads (ds^T and K_j, 1.5 ldmatrix per mma) and atomics they all issue at the same
 * time, and then all start the next row tile's score products, the mma-heavy part, at the same time too: one phase
 * at a time on the whole SM. Here ds^T has two buffers, so the end barrier has nothing left to protect: the copy of
 * the next row tile is waited for at the first barrier, and the copy of the one after next is issued right after
 * it, into the buffer of this tile, whose Q_i and dO_i nobody reads any more (dQ needs only ds^T and K_j). A warp
 * that is through with its dQ starts the next tile's products while others still do theirs. B4Policy's row_end
 * says why nothing is overwritten while it is read.
 * Why: the 8 warps of kernel 3 move through the phases of a row tile together, so the SM runs one kind of work at a
 * time; one barrier fewer lets the ldmatrix-and-atomics phase of some warps overlap the mma phase of others.
 * What it costs: +18 KB of shared memory (ds^T's second buffer): 111.6 KB at D = 64 and 177.2 KB at D = 128, one
 * block per SM. Registers (ptxas, sm_90a): 241 at D = 64, 255 at D = 128 with 20 bytes of spill.
 * Measured: H100, fp16, N = 4096: 217.9 TFLOP/s at D = 64 and 214.8 at D = 128, +6% and +0% over kernel 3 (224.3
 * and 220.8 at N = 16384); causal 199.3 and 202.7; 81% and 74% of FlashAttention-2; the runs: RESULTS.md#bwd-4.
 */
#ifndef RUNG
#define RUNG 4          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd03_wide_kv.cu" // the rung this one extends (.extends = 3): its body and its policy

// --- the idea ----------------------------------------------------------------------

struct B4Policy : B3Policy {
    static constexpr int DS_BUFS = 2;     /* ds^T of row tile i in buffer i % 2, as Q_i and dO_i */
    static constexpr const char *BARRIERS = "1 barrier";

    /* After the first row tile has landed: the second, now (the loop issues the one after next). */
    template <class F> static __device__ __forceinline__ void prologue(F &load_rows, long i_begin, long N, int BR)
    {
        if (i_begin + BR < N) load_rows(i_begin + BR, 1);
        cp_async_commit();
    }
    /* At a row tile's start: nothing; its copy was issued a row tile earlier (ds_ready). */
    template <class F> static __device__ __forceinline__ void rows_ahead(F &load_rows, long i0, long buf, long N, int BR)
    {
        (void)load_rows, (void)i0, (void)buf, (void)N, (void)BR;
    }
    /* ds^T of the row tile in Q/dO buffer buf: ds^T's buffer buf. */
    static __device__ __forceinline__ long ds_slot(long buf) { return buf; }
    /* ds^T written: the one barrier of the row tile, then the row tile after next into this one's buffer. */
    template <class F> static __device__ __forceinline__ void ds_ready(F &load_rows, long i0, long buf, long N, int BR)
    {
        cp_async_wait<0>();                   // the next row tile has landed (this thread's copies) ...
        __syncthreads();                      // ... everyone's; ds_tile^T complete; Q_i, dO_i, L_i, Delta_i read by all
        if (i0 + 2 * BR < N) load_rows(i0 + 2 * BR, (int)buf);   // the row tile after next, into this one's buffer
        cp_async_commit();
    }
    /* No barrier here. A warp may start the next row tile while others still read this ds^T: it writes the other
     * ds^T buffer, and it cannot come back to this one before everyone has passed the next barrier, after their dQ
     * of this tile. */
    static __device__ __forceinline__ void row_end() {}
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 4
static int b4_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return mma_launch<B4Policy>(4, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b4_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    mma_describe<B4Policy>(D, buf, n, "kernel 3 with ds^T double-buffered");
}

static const BackwardKernel bwd4 = {
    .id = 4, .extends = 3, .name = "one barrier",
    .idea = "kernel 3 with one barrier per row tile (ds^T double-buffered)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_mma_supports, .workspace = bwd_mma_workspace,
    .launch = b4_launch, .describe = b4_describe,
};
BWD_REGISTER(bwd4);
#endif
