/*
 * Extends: kernel14_pingpong.cu; idea: one block per SM takes row tiles from a counter, the next tile's Q and K/V loading under this one's end
 * Code: overlap.cuh with PINGPONG = true, PERSIST = true
 *
 * Kernel 18: kernel 14 made persistent: one block per SM, each walking row tiles handed out by a counter.
 *
 * What changes over kernel 14 (one idea: a block's start and end are paid once
 * per SM, not once per row tile). Kernel 14 launches one block per (head, row
 * tile of 128 queries). Each block starts cold: it initialises its barriers,
 * its consumers load Q from global memory into registers, its producer's first
 * K and V copies land before the first S can be issued, and at its end the
 * last P V and the store of O run with nothing behind them. At N = 16384 a row
 * tile visits 128 K/V tiles and that start and end are lost in them; at
 * N = 512 it visits 4 (causal: 1 to 4), and they are a large share of the
 * block's time. Here the grid is one block per SM, and each block loops:
 *     the producer takes a ticket (atomicAdd on a counter in global memory),
 *     passes it to the consumers through a two-slot ring in shared memory,
 *     copies that row tile's Q into shared memory with the copy engine, then
 *     its K/V tiles into the same ring of stages as before;
 *     the consumers take the ticket, read their Q fragments from shared memory
 *     (releasing it for the next tile's Q) and run kernel 14's loop.
 * The producer is one tile ahead: while the consumers run the last P V of a
 * row tile and store its O, the next tile's Q and first K/V tiles are already
 * on their way, and the ping-pong continues across the tiles (warpgroup 0
 * starts the next tile's S while warpgroup 1 ends this one). The tickets come
 * in kernel 14's order (tile_order.cuh: causal longest first), so a block that
 * finishes early takes the next longest tile left: the counter balances the
 * uneven causal tiles as they run, where a fixed grid only hopes to.
 * The counter never goes back to zero: each launch takes exactly
 * tiles + blocks tickets (each block one past the end), so the launcher knows
 * where the next launch starts and no memset runs before each launch.
 *
 * The order is the scheduler's other half. Causal, the tickets come longest
 * first inside groups of heads whose K and V fit in half of L2 (tile_order.cuh's
 * ticket_tile): handed out longest first across all heads, as kernel 14's
 * blocks are, a head's K and V were read from DRAM again for each of its row
 * tiles at short N (Nsight Compute, causal D = 128, N = 512: 402.7 MB read
 * from DRAM by kernel 14 where Q, K and V are 201 MB; kernel 18: 237.6 MB).
 *
 * What it costs: Q's 16 or 32 KB of shared memory (161 KB a block at D = 128),
 * one atomic per row tile, two more mbarrier waits per row tile, and 24 bytes
 * of the producer thread's state spilled to local memory (it has 24 registers
 * and now carries the ticket, the next one and the ring's count); two launches
 * of kernel 18 must not run at once (they share the counter). The consumers'
 * tile loop is kernel 14's plus 17 instructions per tile at D = 64 (849
 * per-thread instructions against 832, counted in the machine code).
 * The code is kernel 14's, overlap.cuh with PERSIST = true: the ticket ring,
 * Q by the copy engine, and the loop over tickets are its only lines of its own.
 * Built only for sm_90a, like kernels 10 to 14.
 *
 * Measured on the H100 (NVIDIA H100 80GB HBM3, ./step05 --bench --dtype fp16
 * [--causal] --kernel 14-18 beside plots/sdpa_reference.py in one lease,
 * 2026-11-25), kernel 18 against kernel 14 at N = 512 / 1024 / 2048 / 4096 /
 * 8192 / 16384:
 *     D = 64:          +25% +14%  +7%  +3%  +1%   0
 *     D = 128:         +16%  +8%  +3%   0   -1%  -2%
 *     causal, D = 64:  +28% +27% +27% +25%  +6%   0
 *     causal, D = 128: +22% +41% +51% +11%  +2%  -4%
 * the gain where a row tile has few K/V tiles, as the idea says; without the
 * head groups (a build with G = B H, the same run) causal D = 128 gained
 * 1-3%: there the memory traffic, not the block's start, was the cost.
 * Against cuDNN (PyTorch 2.11 SDPA) in the same lease, 91% / 94% / 98% / 109% /
 * 111% / 111% at D = 64 and 87% / 95% / 98% / 107% / 114% / 113% at D = 128;
 * causal 78% / 85% / 95% / 99.6% / 111% / 111% and 73% / 86% / 96% / 102% / 115%
 * / 113% (kernel 14 at N = 512: 73-75%, causal 59-61%). The -4% at causal D = 128, N = 16384 is the
 * head groups' (three heads a group there; 639.4 against 613.2 TFLOP/s without
 * them, not profiled).
 */
#include "overlap.cuh"

static int k18_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch_l<true, true>(18, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k18_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k18_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k18_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe(D, buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, " + Q's %d bytes; one block per SM, row tiles from a counter",
             D == 64 ? K13<64>::QTILE : K13<128>::QTILE);
}

static const FusedKernel kernel18 = {
    .id = 18, .extends = 14, .name = "persistent",
    .idea = "kernel 14 with one block per SM taking row tiles from a counter (Q by TMA)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k18_launch,
    .describe = k18_describe, .unavailable = wgmma_unavailable, .launch_l = k18_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel18);
