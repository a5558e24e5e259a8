/*
 * tile_order.cuh: which (batch*head, Q row tile) a thread block computes.
 *
 * One block per (bh, row tile); the grid is B*H*row_tiles blocks and the
 * hardware starts them roughly in blockIdx order. (Kernel 18 launches one
 * block per SM instead and hands the items out from a counter: ticket_tile.)
 *
 * Non-causal, every block does the same work: head-major order, so the blocks
 * of one head run side by side and read its K and V through L2 together.
 *
 * Causal, row tile i visits only the K/V tiles up to the diagonal, about i + 1
 * of them: the blocks are uneven. Hand out the longest first across ALL heads
 * (tile-major, last row tile first: the "longest processing time first" rule)
 * so that the short ones fill the last wave. Head-major with each head's tiles
 * reversed is not enough: the last heads' longest tiles then start last, and
 * the grid's tail is a full-length block (06_causal/RESULTS.md: 1.3x to 1.6x
 * faster than non-causal with that order in one H100 run, 1.7x to 2.1x with
 * this one in a later run; not timed side by side).
 */
#ifndef TILE_ORDER_CUH
#define TILE_ORDER_CUH

__device__ __forceinline__ void block_tile(long row_tiles, int causal, long *bh, long *tile)
{
    if (causal) {
        const long heads = gridDim.x / row_tiles;
        *bh = blockIdx.x % heads;
        *tile = row_tiles - 1 - blockIdx.x / heads;
    } else {
        *bh = blockIdx.x / row_tiles;
        *tile = blockIdx.x % row_tiles;
    }
}

/* Kernel 18's order: block_tile's, for a ticket from its counter in place of blockIdx.x, with one change for causal:
 * longest first inside groups of G heads, the groups one after the other. block_tile's order is G = BH, and at short
 * N it costs memory traffic: it runs row tile 3 of every head, then row tile 2 of every head, ..., so a head's K and V
 * are read again each round, from DRAM once all heads' K and V (2 x 67 MB at N = 512, D = 128 in the bench) are more
 * than L2 holds (50 MB on the H100). Nsight Compute there (H100, fp16): kernel 14 read 402.7 MB from DRAM where Q, K
 * and V are 201 MB (DRAM 70% busy, 197 us); kernel 18 with groups 237.6 MB (55%, 162 us). The launcher picks G so
 * that a group's K and V fill half of L2, and so that a group has at least two row tiles per SM (longest first needs
 * a queue to balance). At N = 16384, D = 128 that is three heads a group, and there the groups cost 4% (not profiled).
 * Kernel 26 makes a group whole rounds of the SMs, its K and V in a third of L2. Forward kernel 52 computes this same
 * order by multiplying (its Sched::decode): a change here is a change there too. A mismatch that still maps the
 * tickets one to one onto the items changes only the order, so the speed, which --check cannot see. */
__device__ __forceinline__ void ticket_tile(long ticket, long BH, long row_tiles, int causal, long G, long *bh, long *tile)
{
    if (causal) {
        const long h0 = ticket / (G * row_tiles) * G;     // the group's first head
        const long r = ticket - h0 * row_tiles;           // the ticket's place in its group
        const long g = BH - h0 < G ? BH - h0 : G;         // heads in the group (the last may have fewer)
        *bh = h0 + r % g;
        *tile = row_tiles - 1 - r / g;
    } else {
        *bh = ticket / row_tiles;
        *tile = ticket % row_tiles;
    }
}

#endif
