/*
 * tile_order.cuh: which (batch*head, Q row tile) a thread block computes.
 *
 * One block per (bh, row tile); the grid is B*H*row_tiles blocks and the
 * hardware starts them roughly in blockIdx order.
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

#endif
