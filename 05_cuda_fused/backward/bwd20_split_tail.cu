/*
 * Backward kernel 20: backward kernel 19 with the last round's walks split into parts.
 *
 * Extends backward kernel 19 (bwd19_diagonal_start.cu). The idea: a persistent launch walks its K/V tiles in rounds,
 * one walk per SM at a time, and FlashAttention's shapes give the backward 2048 walks at D = 128 (4096 at D = 64) at
 * every N: on the H200's 132 SMs that is 15 rounds and a last one of 68 walks (at D = 64, 31 and a last one of 4),
 * during which the other SMs have nothing to do. Not causal, every walk is as long as every other, so the last round
 * costs a whole walk's time: 1 of 16 rounds (1 of 32 at D = 64). Here the last round's walks are cut into parts, a few row tiles each, that
 * the idle SMs take from the same counter. A part's dK and dV are sums over its row tiles only: every part but the
 * last writes its sums to global memory (fp32) and counts itself done; the last part waits for the count, adds the
 * others' sums to its own in part order, and stores dK and dV as every walk does. How many parts (bwd_split_plan): as
 * few as make the tail shortest, counting each part two row tiles for what it pays once (its K_j and V_j, a pipeline
 * to fill, its sums to write or read); at FlashAttention's N = 8192, D = 128, five parts of 25-26 row tiles.
 * Causal walks are of different lengths, longest first, and are not split.
 * Why: Nsight Compute of kernel 19 at N = 8192, D = 128 (B = 2, H = 16): the SMs active in 95.2% of the kernel's
 * cycles, cuDNN's in 95.3% (SM active cycles over elapsed cycles in the two profiles of RESULTS.md#bwd-19-profile);
 * the rounds' arithmetic says a last round of 68 walks on 132 SMs idles half the GPU for one sixteenth of the kernel.
 * What it costs: one more kind of ticket (a part), an atomic for each part but the last and a wait in the last; the
 * parts' sums in the workspace (128 KiB a part at D = 128: 34 MiB at N = 8192); dK and dV add their row tiles in another order
 * where a walk is split (not causal: own_order), the same from run to run; where nothing is split (D = 128, N = 512
 * and 1024), 0.4-1.1% behind kernel 19 in all five runs.
 * Measured: H200, fp16, over kernel 19 in the same run (D = 128: five runs in three calls): +0.8% to +3.9% at N =
 * 8192, +1.5% to +4.2% at 16384, +0.5% and +0.6% at 4096; at D = 64 +1.3% to +2.5% from N = 2048 but one run at
 * 16384. Beside cuDNN at N = 8192, D = 128: 99.3% to 106.0% over its recorded runs, cuDNN ahead in a few by at most
 * 0.7%; past it at every N, causal and not, in each run of the three aims in one call (05's RESULTS.md#aims).
 * RESULTS.md#bwd-20 has the runs.
 */
#ifndef RUNG
#define RUNG 20         // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd19_diagonal_start.cu" // the rung this one extends (.extends = 19): its body and its policy

// --- the idea ----------------------------------------------------------------------

/* Which walks are split, and into how many parts: items walks of `rows` row tiles each on `grid` persistent blocks.
 * The launcher (the workspace) and thread 0 of each block (init_barriers) compute it alike. */
struct BwdSplit {
    long split_from;                              // the first walk that is split (items: none)
    int parts;                                    // its parts (1: none)
};
enum {
    BWD_SPLIT_PARTS = 8,                          // at most, a walk
    BWD_SPLIT_FIXED = 2,                          // what a part pays once, in row tiles (the header says what)
    BWD_SPLIT_WALKS = 256,                        // at most, split walks: the last round of up to 257 SMs
};
__host__ __device__ inline BwdSplit bwd_split_plan(long items, long grid, long rows, int causal)
{
    BwdSplit p = {items, 1};
    const long r = items % grid;                  // the last round's walks
    if (causal || items <= grid || r == 0 || r > BWD_SPLIT_WALKS) return p;
    long best = rows;                             // the last round whole: a walk's time, in row tiles
    for (int s = 2; s <= BWD_SPLIT_PARTS && s <= rows; s++) {
        const long rounds = (r * s + grid - 1) / grid, cost = rounds * ((rows + s - 1) / s + BWD_SPLIT_FIXED);
        if (cost < best) best = cost, p.parts = s;
    }
    if (p.parts > 1) p.split_from = items - r;
    return p;
}

namespace {   // as kernel 19's policy (kernel 11's counters)
/* Per launch slot (kernel 11's), the parts of each split walk that have written their sums: zero between launches
 * (each walk's last part puts its count back). [[maybe_unused]]: off Hopper the kernel's body is compiled out. */
[[maybe_unused]] static __device__ unsigned g_bwd_parts_done[BWD_SLOTS][BWD_SPLIT_WALKS];

struct B20Policy : B19Policy {
    static_assert(BWD_SPLIT_PARTS < 64, "first_step offsets a part's first step by its number, below BR (64 or 128)");
    /* After kernel 11's ring of tickets, the plan (split_from and parts as two ints) and where the sums go (floats
     * into the workspace past dQ's accumulator, B H Npad D), worked out once by thread 0 as it sets up the
     * mbarriers: their 64-bit divisions are calls, and in the consumers, beside dK and dV, they spilled. */
    static constexpr int ITEM_SMEM = B19Policy::ITEM_SMEM + 16;
    template <class A> static __device__ __forceinline__ int *plan_s(const A &a)
    {
        return reinterpret_cast<int *>(a.base_ptr + (empty_t(a) + 16 + 8 - a.base));
    }
    template <class A> static __device__ __forceinline__ long *slots_s(const A &a)
    {
        return reinterpret_cast<long *>(a.base_ptr + (empty_t(a) + 16 + 16 - a.base));
    }
    template <class A> static __device__ __forceinline__ void init_barriers(const A &a)
    {
        B19Policy::init_barriers(a);
        const BwdSplit p = bwd_split_plan(a.items, gridDim.x, (a.N + A::C::BR - 1) / A::C::BR, a.causal);
        plan_s(a)[0] = (int)p.split_from, plan_s(a)[1] = p.parts;   // items < 2^31: kernel 11's grid says so
        *slots_s(a) = (long)(a.items / a.kv_tiles) * a.Npad * A::D;
    }
    template <class A> static __device__ __forceinline__ BwdSplit plan(const A &a)
    {
        return {plan_s(a)[0], plan_s(a)[1]};
    }
    /* The tickets: one per walk up to the split, then one per part. */
    template <class A> static __device__ __forceinline__ unsigned ticket_count(const A &a)
    {
        const BwdSplit p = plan(a);
        return (unsigned)(p.split_from + ((long)a.items - p.split_from) * p.parts);
    }
    /* Ticket t: walk t whole below the split; past it, part t' % parts of walk split_from + t' / parts (t' = t -
     * split_from), its row tiles part * rows / parts .. (part + 1) * rows / parts (steps: kernel 19 rotates them). */
    template <class A> static __device__ __forceinline__ BwdWalk walk_of(const A &a, unsigned ticket)
    {
        const BwdSplit p = plan(a);
        if ((long)ticket < p.split_from) return B19Policy::walk_of(a, ticket);
        /* 32-bit: at most 2^11 parts (256 walks of 8), and rows times 8 below 2^31 */
        const unsigned t = ticket - (unsigned)p.split_from, parts = (unsigned)p.parts, x = t / parts, part = t % parts;
        BwdWalk wk = B19Policy::walk_of(a, (unsigned)p.split_from + x);
        constexpr int BR = A::C::BR;
        const unsigned rows = (unsigned)((a.N + BR - 1) / BR);
        wk.i_begin = (long)(part * rows / parts) * BR;
        wk.i_end = (long)((part + 1) * rows / parts) * BR;
        wk.part = (int)part;
        return wk;
    }
    /* The consumers' steps of a part: the last of a walk's steps to N, as many as the part has, the first offset by
     * the part's number (below BR, so the count of steps is the same). Not causal, the consumers need nothing else of a
     * step (the producer and the writers turn steps into rows), and their loop keeps kernel 19's bound, N: with the
     * part's end and number carried round it in registers, the row tile's code grew by 80 instructions (predicates
     * saved to registers and back), and that build ran 2-4.6% slower at D = 128 (the growth as the cause is inferred;
     * RESULTS.md#bwd-20). The test of causal first tells the compiler what kernel 19's code told it: causal, the first
     * step is the walk's first row tile (without it, 77 instructions more than kernel 19's). */
    template <class A> static __device__ __forceinline__ long first_step(const A &a, const BwdWalk &wk)
    {
        return a.causal || wk.part < 0 ? wk.i_begin : a.N - (wk.i_end - wk.i_begin) + wk.part;
    }
    /* The part of the walk whose consumers' first step is `first`, -1 for a whole walk (not causal, its first step is
     * 0): the steps to N are ceil((N - first) / BR), and first is N less that many BR, plus the part. */
    template <class A> static __device__ __forceinline__ int part_of(const A &a, long first)
    {
        constexpr int BR = A::C::BR;
        if (a.causal || first == 0) return -1;
        const long steps = (a.N - first + BR - 1) / BR;
        return (int)(first - (a.N - steps * BR));
    }
    /* The writer sends dK and dV of a whole walk and of a split walk's last part. */
    template <class A> static __device__ __forceinline__ bool stores_dkdv(const A &a, const BwdWalk &wk)
    {
        return wk.part < 0 || wk.part == plan(a).parts - 1;
    }

    /* The consumers, after the walk. A part but the last: its sums (dk unscaled, dv) to its slot, element n of
     * consumer thread c at n * 256 + c (a warp's 32 lanes side by side), the count up once all 256 threads' stores
     * are out, then only the writer's handshake (kernel 13's barriers, nothing staged). The last part: the count
     * awaited, the others' sums added in part order, then kernel 13's store. */
    template <class A>
    static __device__ __forceinline__ void store_dkdv(const A &a, const BwdWgThread &w, float *dk, float *dv)
    {
        const int part = part_of(a, w.i_begin);
        if (part >= 0) {
            constexpr int V = A::D / 2;           // floats of dK (and of dV) a consumer thread holds
            const BwdSplit p = plan(a);
            const long x = w.bh * a.kv_tiles + w.jt - p.split_from;   // the split walk's index
            const int c = (int)threadIdx.x - 128;
            float *slots = a.dq_acc + *slots_s(a);   // after dQ's accumulator
            unsigned *done = &g_bwd_parts_done[a.slot][x];
            if (part < p.parts - 1) {
                float *mine = slots + (x * (p.parts - 1) + part) * (2 * V * 256) + c;
#pragma unroll
                for (int n = 0; n < V; n++) __stcg(mine + n * 256, dk[n]), __stcg(mine + (V + n) * 256, dv[n]);
                __threadfence();
                asm volatile("bar.sync 1, 256;\n" ::: "memory");   // the 256 consumer threads' sums are all out
                if (c == 0) red_release_gpu_add(done, 1u);
                /* kernel 13's store_dkdv's two barriers, written again without the staging between them: the writer
                 * warp keeps its count of them and sends nothing (stores_dkdv) */
                asm volatile("bar.sync %0, 160;\n" ::"r"(6 + w.wg) : "memory");
                asm volatile("bar.arrive %0, 160;\n" ::"r"(4 + w.wg) : "memory");
                return;
            }
            if (c == 0) {
                while (ld_acquire_gpu(done) < (unsigned)(p.parts - 1)) {
                }
                *done = 0u;                       // zero for the next launch on this slot (nothing else reads it now)
            }
            asm volatile("bar.sync 1, 256;\n" ::: "memory");   // the count seen by thread 0: the sums are out
            __threadfence();
            for (int q = 0; q < p.parts - 1; q++) {
                const float *other = slots + (x * (p.parts - 1) + q) * (2 * V * 256) + c;
#pragma unroll
                for (int n = 0; n < V; n++) dk[n] += __ldcg(other + n * 256), dv[n] += __ldcg(other + (V + n) * 256);
            }
        }
        B19Policy::store_dkdv(a, w, dk, dv);
    }

    /* A launch's walks, and its plan on this GPU as the launch's (its grid, its tiles); none where the launch refuses
     * the shape (grid's line says why). */
    static long host_walks(long B, long H, long N)
    {
        constexpr long BC = BwdWg<64, B20Policy>::BC;    // the same at both D
        return B * H * ((N + BC - 1) / BC);
    }
    static BwdSplit host_plan(long B, long H, long N, long D, int causal)
    {
        const long BR = D == 64 ? BwdWg<64, B20Policy>::BR : BwdWg<128, B20Policy>::BR, items = host_walks(B, H, N);
        const long grid = B11Policy::grid(items, "backward kernel 20");
        return grid < 0 ? BwdSplit{items, 1} : bwd_split_plan(items, grid, (N + BR - 1) / BR, causal);
    }
    /* Kernel 10's workspace, then the split walks' sums: (parts - 1) slots a split walk, 1024 D bytes each (not
     * causal: the plan that splits). */
    static size_t workspace(long B, long H, long N, long D, int dtype)
    {
        const BwdSplit p = host_plan(B, H, N, D, 0);
        const size_t sums = (size_t)(host_walks(B, H, N) - p.split_from) * (p.parts - 1) * D * 1024;
        return B19Policy::workspace(B, H, N, D, dtype) + sums;
    }

    static const char *desc_items()
    {
        return "one block per SM taking K/V tiles from a counter, the next one loading under this one's end, the last "
               "round's walks in parts; ";
    }
};
} // namespace

// --- the launcher -------------------------------------------------------------------

#if RUNG == 20
static int b20_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                      void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                      void *stream)
{
    return wg_launch<B20Policy>(20, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b20_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B20Policy>(D, buf, n);
}

/* Not causal, a split walk's dK and dV add their parts' sums (and at D = 128 every walk its rotated row tiles) in
 * this kernel's own order (the checks: kernels.h). */
static int b20_own_order(long D, int causal)
{
    (void)D;
    return !causal;
}

/* For --check's lines: whether a case is split depends on the GPU's SM count (the check's split case, B = 3, H = 10,
 * N = 600: five parts on an H200's 132 SMs, three on an H100 PCIe's 114, none on an H20's 78). */
static void b20_split_note(long B, long H, long N, long D, int causal, char *buf, size_t n)
{
    const BwdSplit p = B20Policy::host_plan(B, H, N, D, causal);
    if (p.parts > 1)
        snprintf(buf, n, "; last round: %ld walks in %d parts on %ld SMs", B20Policy::host_walks(B, H, N) - p.split_from,
                 p.parts, B11Policy::sm_count());
    else
        snprintf(buf, n, "; nothing split on %ld SMs", B11Policy::sm_count());
}

static const BackwardKernel bwd20 = {
    .id = 20, .extends = 19, .name = "last round split",
    .idea = "kernel 19 with the last round's walks, not causal, split into parts for the idle SMs, the last part adding the others' sums",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B20Policy::workspace, .launch = b20_launch, .describe = b20_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5, .own_order = b20_own_order, .persistent = 1,
    .split_note = b20_split_note,
};
BWD_REGISTER(bwd20);
#endif
