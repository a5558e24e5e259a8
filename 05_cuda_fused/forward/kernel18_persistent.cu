/*
 * Kernel 18: kernel 14 made persistent: one block per SM, each walking row tiles handed out by a counter.
 *
 * Extends kernel 14 (kernel14_pingpong.cu). The idea: a block's start and end are paid once per SM, not once per row
 * tile. Kernel 14 launches one block per (head, row tile of 128 queries). Each block starts cold: it initialises its
 * barriers, its consumers load Q from global memory into registers, its producer's first K and V copies land before
 * the first S can be issued, and at its end the last P V and the store of O run with nothing behind them. Here the
 * grid is one block per SM, and each block loops:
 *     the producer takes a ticket (atomicAdd on a counter in global memory), passes it to the consumers through a
 *     two-slot ring in shared memory, copies that row tile's Q into shared memory with the copy engine, then its
 *     K/V tiles into the same ring of stages as before;
 *     the consumers take the ticket, read their Q fragments from shared memory (releasing it for the next tile's Q)
 *     and run kernel 14's loop.
 * The producer is one tile ahead: while the consumers run the last P V of a row tile and store its O, the next
 * tile's Q and first K/V tiles are already on their way, and the ping-pong continues across the tiles (warpgroup 0
 * starts the next tile's S while warpgroup 1 ends this one). The tickets come in kernel 14's order (tile_order.cuh:
 * causal longest first), so a block that finishes early takes the next longest tile left: the counter balances the
 * uneven causal tiles as they run, where a fixed grid only hopes to. The order is the scheduler's other half: causal,
 * the tickets come longest first inside groups of heads whose K and V fit in half of L2 (tile_order.cuh's
 * ticket_tile), where kernel 14's order, longest first across all heads, read a head's K and V from DRAM again for
 * each of its row tiles at short N (Nsight Compute, causal D = 128, N = 512: 402.7 MB read by kernel 14 where Q, K
 * and V are 201 MB; kernel 18: 237.6 MB).
 *
 * Why: at N = 16384 a row tile visits 128 K/V tiles and a block's start and end are lost in them; at N = 512 it
 * visits 4 (causal: 1 to 4), and they are a large share of the block's time.
 *
 * What it costs: Q's 16 or 32 KB of shared memory (161 KB a block at D = 128), one atomic per row tile, two more
 * mbarrier waits per row tile, and 24 bytes of the producer thread's state spilled to local memory (it has 24
 * registers and now carries the ticket, the next one and the ring's count); one atomic a block at its end, which
 * leaves the launch's counter at zero for the next (below). The consumers' tile loop is kernel 14's plus 17
 * instructions per tile at D = 64 (849 per-thread instructions against 832, counted in the machine code).
 *
 * Measured: H100, fp16, over kernel 14: +25% at N = 512 falling to 0 at N = 16384 (D = 64), +16% to -2% (D = 128);
 * causal +22% to +51% up to N = 2048 at D = 128, -4% at N = 16384; the runs, cuDNN beside them and the head groups'
 * share: RESULTS.md#kernel-18.
 */
#ifndef RUNG
#define RUNG 18 // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel14_pingpong.cu" // the rung this one extends (.extends = 14): its body and its policy

// --- the idea --------------------------------------------------------------------------------------------------

/* The tickets: TICKET_SLOTS counters in global memory, each at zero between launches. A launch takes the next slot (in
 * turn, on the host), and its blocks take tickets 0, 1, 2, ... from that slot's counter until one is past the last
 * item, which tells a block to stop; the block that stops last (g_done counts them) puts the slot back to zero. So
 * every launch finds its counter at zero however it is launched: replayed from a CUDA graph (which keeps the slot it
 * was captured with), on two streams at once (each launch its own slot), after a launch that was refused. What it
 * costs: one more atomic and two fences per block, at its end. Two launches on one slot must not run at once: at
 * most TICKET_SLOTS launches of one kernel file in flight, and a captured graph keeps its slot while it lives (64
 * launches later a plain launch takes that slot again, and two graph execs made from one capture share it). The slot
 * counter on the host is not atomic: one host thread launches. Each kernel file that includes this one has its own
 * slots. */
enum { TICKET_SLOTS = 64 };
static __device__ unsigned g_tickets[TICKET_SLOTS], g_done[TICKET_SLOTS];
static unsigned g_slot;                           // host: the slot of the next launch

/* The next ticket of the launch on slot `slot`: 0, 1, 2, ... in the order they are taken. */
__device__ __forceinline__ unsigned next_ticket(unsigned slot) { return atomicAdd(&g_tickets[slot], 1u); }
/* A block has taken its ticket past the end: its last atomic on the slot's counter is done (its value was used), so
 * the block that gets here last may put the slot back to zero for the next launch that takes it. */
__device__ __forceinline__ void tickets_done(unsigned slot)
{
    __threadfence();                              // this block's ticket atomics before its count in g_done
    if (atomicAdd(&g_done[slot], 1u) == gridDim.x - 1) {
        __threadfence();                          // every block's count (so every ticket taken) before the reset
        atomicExch(&g_tickets[slot], 0u);
        atomicExch(&g_done[slot], 0u);
    }
}

/* Causal tickets come longest first inside groups of heads (tile_order.cuh's ticket_tile). Heads per group: as many
 * as fit their K and V (4 N D bytes a head) into `bytes`, but at least two row tiles per SM in a group (longest first
 * needs a queue to balance), and at most the BH heads there are. */
static long group_heads(long bytes, long N, long D, long row_tiles, long sms, long BH)
{
    long G = bytes / (4 * N * D);
    if (G * row_tiles < 2L * sms) G = (2L * sms + row_tiles - 1) / row_tiles;
    return G > BH ? BH : G;
}

template <int D, typename T> struct Persistent : Pingpong<D, T> {
    using C = K13<D>;

    /* The scheduler's state: its arguments, then Q's mbarriers full_q, empty_q and the ticket ring's full_t[2],
     * empty_t[2] (after the K/V ring's in shared memory), the ring's two slots. */
    struct Sched {
        const CUtensorMap *tm_q;                  // Q as [B*H][N][D] for the copy engine
        const CUtensorMap *tm_o;                  // O as [B*H][N][D], boxes of 16 rows (kernel 39's stores)
        long BH, G;                               // heads; causal: heads per group (tile_order.cuh)
        unsigned slot;                            // this launch's ticket counter (g_tickets[slot])
        uint32_t full_q, empty_q, full_t, empty_t;
        volatile unsigned *tickets;
        unsigned items;                           // BH x row tiles
        /* A ticket's head and row tile, in tile_order.cuh's order (kernel 52 divides by multiplying instead). */
        __device__ __forceinline__ void decode(unsigned ticket, long row_tiles, int causal, long *bh, long *tile) const
        {
            ticket_tile(ticket, BH, row_tiles, causal, G, bh, tile);
        }
    };
    static constexpr uint32_t q_bytes = C::QTILE; // Q's tile, after the K/V ring
    static constexpr size_t smem_bytes = C::bytes_persist;  // the block's dynamic shared memory
    static constexpr int o_box_rows = 0;          // O as a tensor map: not needed (kernel 39: its box's rows)
    static void o_written(void *, size_t, cudaStream_t) {}  // kernel 39: O written by TMA stores
    template <class B> static __device__ __forceinline__ void setup(B &b)
    {
        auto &q = b.sched;
        q.full_q = b.empty_v + 8 * C::STAGES, q.empty_q = q.full_q + 8, q.full_t = q.empty_q + 8, q.empty_t = q.full_t + 16;
        q.tickets = reinterpret_cast<volatile unsigned *>(smem_raw + (q.empty_t + 16 - b.raw_addr));
        q.items = (unsigned)(q.BH * b.row_tiles);
    }
    template <class B> static __device__ __forceinline__ void init_barriers(B &b)
    {
        auto &q = b.sched;
        mbar_init(q.full_q, 1);
        mbar_init(q.empty_q, 4 * C::NWG);
        for (int s = 0; s < 2; s++) {
            mbar_init(q.full_t + 8 * s, 1);
            mbar_init(q.empty_t + 8 * s, 128 * C::NWG);  // one arrival per consumer thread (take_ticket: racecheck)
        }
    }

    /* The producer thread: take a ticket, hand it to the consumers through the ring, then load its Q (once they have
     * read the last one into registers) and its K/V tiles; the next ticket is taken before the loads, so the atomic's
     * round trip to L2 hides under them. jb counts on across the items, so the K/V ring runs on unbroken. */
    template <class B> static __device__ __forceinline__ void produce(B &b)
    {
        auto &q = b.sched;
        unsigned ticket = next_ticket(q.slot);
        long jb = 0;
        for (long it = 0;; it++) {
            const int slot = (int)(it % 2);
            mbar_wait(q.empty_t + 8 * slot, (int)((it / 2) & 1) ^ 1);
            q.tickets[slot] = ticket;
            mbar_arrive(q.full_t + 8 * slot);     // release: the ticket is visible to whoever waits
            if (ticket >= q.items) {              // past the last item: this block is done
                tickets_done(q.slot);
                break;
            }
            const unsigned next = next_ticket(q.slot);
            q.decode(ticket, b.row_tiles, b.causal, &b.bh, &b.tile);
            mbar_wait(q.empty_q, (int)(it & 1) ^ 1);
            mbar_expect_tx(q.full_q, C::QTILE);
#pragma unroll
            for (int blk = 0; blk < D / 64; blk++)
                tma_load_3d(b.q_addr + blk * C::BR * 128, q.tm_q, blk * 64, (int)(b.tile * C::BR), (int)b.bh, q.full_q);
            b.ntiles = b.kv_tiles(b.tile);
            b.load_kv(b.bh, b.ntiles, jb);
            jb += b.ntiles;
            ticket = next;
        }
    }

    /* A consumer's next item, ticket `it` from the ring; false past the last. */
    template <class B> static __device__ __forceinline__ bool take_ticket(B &b, long it, long *nbh, long *ntile)
    {
        auto &q = b.sched;
        const int slot = (int)(it % 2);
        mbar_wait(q.full_t + 8 * slot, (int)((it / 2) & 1));
        /* Every lane reads the ticket and every thread arrives on empty_t itself: compute-sanitizer's racecheck
         * follows an mbarrier between the threads that arrive and wait on it, not a __syncwarp before one lane's
         * arrival (one arrival per warp: it reported the producer's next write to the slot against these reads).
         * The shuffle from lane 0 changes no value; it tells the compiler the ticket is the same on every lane, so
         * the tile loop keeps its addresses and barrier phases in uniform registers, as kernel 14's does (without it,
         * counted in the machine code at D = 64: 958 per-thread instructions per tile iteration instead of 849;
         * kernel 14: 832). */
        const unsigned ticket = __shfl_sync(0xffffffffu, q.tickets[slot], 0);
        mbar_arrive(q.empty_t + 8 * slot);
        if (ticket >= q.items) return false;
        q.decode(ticket, b.row_tiles, b.causal, nbh, ntile);
        return true;
    }
    /* Q_i's fragments from the tile the copy engine left in shared memory (128-byte swizzle: row r's 16-byte chunk c
     * at c ^ (r % 8); rows past N arrived as zeros), then the tile is released for the next item's. */
    template <class B> static __device__ __forceinline__ void load_q(B &b, long it)
    {
        mbar_wait(b.sched.full_q, (int)(it & 1));
        const unsigned char *qs = smem_raw + (b.q_addr - b.raw_addr);
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int row = b.warp * 16 + b.g + 8 * (r % 2), col = (ks % 4) * 16 + 2 * b.t + 8 * (r / 2);
                b.qf[ks][r] = *reinterpret_cast<const uint32_t *>(qs + (ks / 4) * C::BR * 128 + row * 128 +
                                                                   (((col / 8) ^ (row % 8)) * 16) + (col % 8) * 2);
            }
        b.release(b.sched.empty_q);
    }

    /* The loop over the block's items, one ticket each, until a ticket past the last. */
    template <class B> static __device__ __forceinline__ void items(B &b)
    {
        float alpha[2];
        for (long it = 0;; it++) {
            if (!take_ticket(b, it, &b.bh, &b.tile)) break;
            b.ntiles = b.kv_tiles(b.tile);
            b.start_item(it, b.tile);
            b.clear();
            b.my_turn();
            b.issue_s(0);
            b.your_turn();
            wgmma_wait<0>();
            b.tile_loop(alpha);
            b.my_turn();
            b.issue_pv(b.ntiles - 1);
            b.your_turn();                        // the next item's turns follow
            wgmma_wait<0>();
            b.store_o(b.row_g);
            b.jb += b.ntiles;
        }
        if (b.wg == 0) b.my_turn();               // the turn warpgroup 1 handed over after its last item
    }

    /* Causal: the heads of a group of tickets (tile_order.cuh's ticket_tile), so that a group's K and V fill half of L2
     * (kernel 26: whole rounds of the SMs). */
    static long heads_per_group(long l2, long N, long row_tiles, long sms, long BH)
    {
        return group_heads(l2 / 2, N, D, row_tiles, sms, BH);
    }

    template <class Self>
    static int launch(int id, const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N,
                      int dtype, int causal, cudaStream_t s);
    static void describe(char *buf, size_t n);
};

/* Kernel 18's kernel: kernel 13's arguments, and Q as a tensor map, the heads BH, the heads per group G (causal), the
 * launch's ticket slot and O as a tensor map (kernel 39's stores; the other rungs are given Q's and never read it). */
template <int D, typename T, class P>
__global__ void __launch_bounds__(K13<D>::THREADS, 1)
wgmma_persist(const T *__restrict__ Q, T *__restrict__ O, float *__restrict__ L, long N, long row_tiles, int causal,
              float scale_log2, const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v,
              const __grid_constant__ CUtensorMap tm_q, long BH, long G, unsigned slot, const __grid_constant__ CUtensorMap tm_o)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    run_overlap<D, T, P>(Q, O, L, N, row_tiles, causal, scale_log2, tm_k, tm_v, {&tm_q, &tm_o, BH, G, slot});
#else
    (void)Q, (void)O, (void)L, (void)N, (void)row_tiles, (void)causal, (void)scale_log2, (void)tm_k, (void)tm_v, (void)tm_q,
        (void)BH, (void)G, (void)slot, (void)tm_o;
#endif
}

// --- the launcher ------------------------------------------------------------------------------------------------

/* One block per SM (fewer when there are fewer items), Q's tensor map beside K's and V's (KvMaps makes pairs: Q's
 * twice; kernel 39's O's twice), the tickets from the next slot. The shared-memory opt-in and the SM count are asked
 * on the first launch of each instance only: a host call between the timer's start and the launch is in the time. */
template <int D, typename T>
template <class Self>
int Persistent<D, T>::launch(int id, const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H,
                             long N, int dtype, int causal, cudaStream_t s)
{
    char who[16];
    snprintf(who, sizeof who, "kernel %d", id);
    static KvMaps maps, qmaps, omaps;
    if (maps.get(k, v, B * H, N, D, C::BC, dtype, who) || qmaps.get(q, q, B * H, N, D, C::BR, dtype, who)) return -1;
    if (Self::o_box_rows && omaps.get(o, o, B * H, N, D, Self::o_box_rows, dtype, who)) return -1;
    static int sms = 0, l2 = 0;
    if (sms == 0) {
        int dev = 0;
        if (smem_opt_in(wgmma_persist<D, T, Self>, Self::smem_bytes, "kernel", id, D)) return -1;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    }
    const long row_tiles = (N + C::BR - 1) / C::BR, items = B * H * row_tiles;
    if (items > 0x7fffffffL) {
        fprintf(stderr, "%s: %s: %ld row tiles, more than its 32-bit tickets count\n", g_prog, who, items);
        return -1;
    }
    const long grid = items < sms ? items : sms;
    const long G = Self::heads_per_group(l2, N, row_tiles, sms, B * H);   // causal: heads per group
    const float scale_log2 = softmax_scale_log2(D);
    wgmma_persist<D, T, Self><<<(unsigned)grid, C::THREADS, Self::smem_bytes, s>>>(
        (const T *)q, (T *)o, Lp, N, row_tiles, causal, scale_log2, maps.k, maps.v, qmaps.k, B * H, G, g_slot,
        Self::o_box_rows ? omaps.k : qmaps.k);
    CUDA_CHECK_LAST();
    Self::o_written(o, (size_t)B * H * N * D * sizeof(T), s);
    g_slot = (g_slot + 1) % TICKET_SLOTS;         // taken only by a launch that was made
    return 0;
}

template <int D, typename T> void Persistent<D, T>::describe(char *buf, size_t n)
{
    Pingpong<D, T>::describe(buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, " + Q's %d bytes; one block per SM, row tiles from a counter", C::QTILE);
}

#if RUNG == 18
static int k18_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch<Persistent>(18, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k18_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k18_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k18_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe<Persistent>(D, buf, n);
}

static const FusedKernel kernel18 = {
    .id = 18, .extends = 14, .name = "persistent",
    .idea = "kernel 14 with one block per SM taking row tiles from a counter (Q by TMA)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k18_launch,
    .describe = k18_describe, .unavailable = wgmma_unavailable, .launch_l = k18_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel18);
#endif
