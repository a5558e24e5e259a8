/*
 * Backward kernel 11: backward kernel 10 made persistent, as forward kernel 18 made kernel 14 persistent.
 *
 * Extends backward kernel 10 (bwd10_dq_writer.cu). The idea: a block's start and end are paid once per SM, not once
 * per K/V tile. Kernel 10 launches one block per (head, K/V tile of 128 keys). Each block starts cold: it initialises
 * its barriers, its producer copies K_j, V_j and the first row tiles, and nothing runs on the tensor cores until they
 * land; at its end the consumers store dK_j and dV_j, the writer warps wait for the last reduce-add of dQ, and only
 * then may the next block take the SM (one block fits at a time: 193 KB of shared memory at D = 128). Here the grid
 * is one block per SM, and each block loops over items (head, K/V tile) handed out by a counter in global memory (an
 * atomicAdd by the producer's thread 0, passed to the other warps through a two-slot ring in shared memory): the
 * producer loads the next item's K_j and V_j as soon as the consumers have read the last ones (an mbarrier, kv_empty,
 * after the last row tile's dQ product), and its row tiles into the same ring of stages, whose count runs on across
 * items; the consumers store dK_j, dV_j from registers while that happens, and the writer warps go on sending dQ's
 * parts without waiting for the last item's to finish. The tickets come in kernel 10's block order (head by head,
 * tile 0 first), so the causal tiles, long first, balance across the SMs as kernel 10's blocks do under the
 * hardware's scheduler. The row tile's code is kernel 10's, unchanged: dK, dV and dQ are kernel 10's sums in the same
 * order within each item (--check compares dK and dV bit for bit with kernel 5's).
 * Why: Nsight Compute puts a block's start and end at about 8.8 us at D = 128 on the H100 (kernel 10's main kernel:
 * 463.1 us at N = 512, 8 row tiles a block, and 2609.2 us at N = 4096, 64 row tiles: 3.73 and 2.63 us per row
 * tile); the shorter N, the more they weigh.
 * What it costs: 48 bytes of shared memory (five mbarriers, two tickets), one atomic per item, a wait on the ticket
 * ring per item in every warp, and one atomic a block at its end, which leaves the launch's counter at zero.
 * Measured: H200, fp16, FlashAttention's shapes: +5.4%, +3.0%, +1.1% over kernel 10 at D = 64, N = 512, 1024, 2048;
 * +2.0%, +1.0% at D = 128, N = 512, 1024 (causal +7.6% .. +1.7%); from N = 2048 at D = 128, 0.7-2.6% slower (the item
 * loop's code or its waits, not the schedule); the runs: RESULTS.md#bwd-11.
 */
#ifndef RUNG
#define RUNG 11         // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd10_dq_writer.cu" // the rung this one extends (.extends = 10): its body and its policy

// --- the idea ----------------------------------------------------------------------

/* The tickets, one per (head, K/V tile): as forward kernel 18's (kernel18_persistent.cu says why), BWD_SLOTS counters
 * each at zero between launches; a launch takes the next slot in turn, its blocks take tickets 0, 1, 2, ... until one
 * past the end, and the block that stops last puts the slot back to zero. So a launch replayed from a CUDA graph, or
 * two at once on two streams, each find their counter at zero. The same limits as kernel 18's: two launches on one
 * slot must not run at once (at most BWD_SLOTS in flight; a captured graph keeps its slot), one host thread. */
enum { BWD_SLOTS = 64 };
/* [[maybe_unused]]: off Hopper the kernel's body, their only reader, is compiled out */
[[maybe_unused]] static __device__ unsigned g_bwd_tickets[BWD_SLOTS], g_bwd_done[BWD_SLOTS];
static unsigned g_bwd_slot;                       // host: the slot of the next launch

/* In an unnamed namespace, as the two counters above are static: each file that compiles this policy (kernel 11's,
 * kernel 12's) has its own counters and its own copy of the code that reads them. */
namespace {
struct B11Policy : B10Policy {
    /* After the ring's mbarriers: kv_empty (the consumers are done with K_j, V_j), full_t[2], empty_t[2] (the ring
     * of tickets), and the ring's two slots, 4 bytes each. */
    static constexpr int ITEM_SMEM = 8 * 5 + 8;
    static constexpr bool ITEM_LOOP = true;       /* the consumers walk item after item */
    static constexpr int TICKET_READERS = 128 * 2 + 32 + 32 * 2;   /* the consumers, warp 1, the writer warps */
    /* read here too: off Hopper the kernel's body, their reader, is compiled out (an unread member of a type in an
     * unnamed namespace is a warning, warnings are errors, and nvcc's front end does not take [[maybe_unused]] on a
     * member) */
    static_assert(ITEM_LOOP && TICKET_READERS == 352, "the consumers, warp 1 and the writer warps read the ring");

    template <class A> static __device__ __forceinline__ uint32_t kv_empty(const A &a) { return a.empty + 8 * A::C::STAGES; }
    template <class A> static __device__ __forceinline__ uint32_t full_t(const A &a) { return kv_empty(a) + 8; }
    template <class A> static __device__ __forceinline__ uint32_t empty_t(const A &a) { return full_t(a) + 16; }
    template <class A> static __device__ __forceinline__ volatile unsigned *tickets(const A &a)
    {
        return reinterpret_cast<volatile unsigned *>(a.base_ptr + (empty_t(a) + 16 - a.base));
    }
    /* The row tile holding row j0 (i_begin of an item). */
    template <class A> static __device__ __forceinline__ long first_row(const A &a, long j0)
    {
        return a.causal ? j0 / A::C::BR * A::C::BR : 0L;
    }
    /* The tickets a launch hands out, and the walk of each: one per (head, K/V tile), the whole walk (kernel 20 splits
     * the last round's). */
    template <class A> static __device__ __forceinline__ unsigned ticket_count(const A &a) { return a.items; }
    template <class A> static __device__ __forceinline__ BwdWalk walk_of(const A &a, unsigned ticket)
    {
        const long bh = (long)(ticket / a.kv_tiles), jt = (long)(ticket % a.kv_tiles);
        return {bh, jt, first_row(a, jt * A::C::BC), a.N, -1};
    }

    template <class A> static __device__ __forceinline__ void init_barriers(const A &a)
    {
        mbar_init(kv_empty(a), 128 * A::C::NWG);
        for (int s = 0; s < 2; s++) {
            mbar_init(full_t(a) + 8 * s, 1);
            mbar_init(empty_t(a) + 8 * s, TICKET_READERS);
        }
    }
    /* Thread 0: item after item, from the counter; each ticket goes into slot item % 2 of the ring for the others. */
    template <class A, class F>
    static __device__ __forceinline__ void produce_items(const A &a, F &produce, long bh, long j0, long i_begin,
                                                         long i_end, long &it)
    {
        (void)bh, (void)j0, (void)i_begin, (void)i_end;
        constexpr int BC = A::C::BC;
        volatile unsigned *tickets = B11Policy::tickets(a);
        unsigned ticket = atomicAdd(&g_bwd_tickets[a.slot], 1u);
        for (long item = 0;; item++) {
            const int slot = (int)(item % 2);     // hand the ticket to the others
            mbar_wait(empty_t(a) + 8 * slot, (int)((item / 2) & 1) ^ 1);
            tickets[slot] = ticket;
            mbar_arrive(full_t(a) + 8 * slot);
            if (ticket >= A::P::ticket_count(a)) {   // past the last item: the last block to stop resets the slot
                __threadfence();                  // as kernel 18's tickets_done: the tickets, the count, the reset
                if (atomicAdd(&g_bwd_done[a.slot], 1u) == gridDim.x - 1) {
                    __threadfence();
                    atomicExch(&g_bwd_tickets[a.slot], 0u);
                    atomicExch(&g_bwd_done[a.slot], 0u);
                }
                break;
            }
            const BwdWalk wk = A::P::walk_of(a, ticket);
            if (item > 0) mbar_wait(kv_empty(a), (int)((item - 1) & 1));   // the consumers are done with the last K_j, V_j
            produce(wk.bh, wk.jt * BC, wk.i_begin, wk.i_end, it);
            /* The next item, taken once this one's copies are all issued, while the consumers still have its last two
             * row tiles to do (the atomic's round trip hides there). Taken at the item's start, as kernel 18 takes its
             * row tiles, a block held its next K/V tile for a whole walk (up to 256 row tiles at N = 16384), and the
             * causal tiles, long first, balanced worse than kernel 10's blocks (causal, D = 128: 3% slower than kernel
             * 10 at N = 4096, 7% at 16384). */
            ticket = atomicAdd(&g_bwd_tickets[a.slot], 1u);
        }
    }
    /* The walk in slot item % 2 of the ring; false past the last. Every thread that reads the ring arrives on empty_t
     * itself (racecheck follows an mbarrier between the threads that arrive and wait, as kernel 18 found). */
    template <class A> static __device__ __forceinline__ bool take_item(const A &a, long item, BwdWalk &wk)
    {
        const int slot = (int)(item % 2);
        mbar_wait(full_t(a) + 8 * slot, (int)((item / 2) & 1));
        const unsigned ticket = __shfl_sync(0xffffffffu, tickets(a)[slot], 0);   // uniform: see kernel 18's note
        mbar_arrive(empty_t(a) + 8 * slot);
        wk = A::P::walk_of(a, ticket);
        return ticket < A::P::ticket_count(a);
    }
    /* The ring's walks in order: f(wk). */
    template <class A, class F> static __device__ __forceinline__ void each_tile(const A &a, F &&f)
    {
        for (long item = 0;; item++) {
            BwdWalk wk;
            if (!take_item(a, item, wk)) break;
            f(wk);
        }
    }
    /* Warp 1 and the writer warps: f's work on each item (its head, its K/V tile's first key, its walk's first step and
     * end), in the ring's order. */
    template <class A, class F, class... X>
    static __device__ __forceinline__ void each_item(const A &a, F &f, long bh, long j0, long i_begin, long i_end, X &...x)
    {
        (void)bh, (void)j0, (void)i_begin, (void)i_end;
        each_tile(a, [&](const BwdWalk &wk) { f(wk.bh, wk.jt * A::C::BC, wk.i_begin, wk.i_end, x...); });
    }
    /* After the walk: K_j, V_j read for the last time; the next item's may load. */
    template <class A>
    static __device__ __forceinline__ void end_walk(const A &a, const BwdWgThread &w, long it, float *dq)
    {
        B10Policy::end_walk(a, w, it, dq);
        mbar_arrive(kv_empty(a));
    }

    /* The GPU's SMs (asked once). */
    static long sm_count()
    {
        static int sms = 0;
        if (sms == 0) {
            int dev = 0;
            CUDA_CHECK(cudaGetDevice(&dev));
            CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        }
        return sms;
    }
    /* The grid: one block per SM, or one per item if there are fewer. */
    static long grid(long items, const char *who)
    {
        const long sms = sm_count();
        if (items > 0x7fffffffL) {
            fprintf(stderr, "%s: %s: %ld K/V tiles, more than its 32-bit tickets count\n", g_prog, who, items);
            return -1;
        }
        return items > sms ? sms : items;
    }
    static unsigned slot() { return g_bwd_slot; }
    static void launched(long items, long grid) { (void)items, (void)grid; g_bwd_slot = (g_bwd_slot + 1) % BWD_SLOTS; }

    static const char *desc_items() { return "one block per SM taking K/V tiles from a counter, the next one loading under this one's end; "; }
};
} // namespace

// --- the launcher -------------------------------------------------------------------

#if RUNG == 11
static int b11_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                      void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                      void *stream)
{
    return wg_launch<B11Policy>(11, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b11_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B11Policy>(D, buf, n);
}

static const BackwardKernel bwd11 = {
    .id = 11, .extends = 10, .name = "persistent",
    .idea = "kernel 10 with one block per SM taking K/V tiles from a counter, the next tile loading under this one's end",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B11Policy::workspace, .launch = b11_launch, .describe = b11_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5, .persistent = 1,
};
BWD_REGISTER(bwd11);
#endif
