/*
 * Kernel 20: kernel 19 with no gap at the tensor cores between two row tiles of one block.
 *
 * Extends kernel 19 (kernel19_wide_o.cu). The idea: the order of an item's end and the next item's start. A consumer
 * warpgroup of kernel 19 ends a row tile (an item) with the last O += P V, waits for it, stores O and L, and only then
 * takes the next ticket, reads the next Q_i from shared memory, issues S_0 = Q_i K_0^T and waits for it before its
 * first softmax: two round trips to the tensor cores, one after the other, with only the other warpgroup's products
 * between them. Here the warpgroup takes the next ticket and Q_i's fragments before its last P V (qf is free once the
 * last S has been waited for), and issues the next item's S_0 in the same turn, right behind the P V: it runs while O
 * is stored, and the next item starts at its softmax. S_0 is tile jb + ntiles of the K ring, which kernel 18's
 * producer loads without a break between items, so nothing changes in the producer: the idea is one hook, the
 * consumers' loop over items.
 *
 * Why: a row tile at N = 512 visits 4 K/V tiles (causal: 1 to 4); each item pays one such start, and it is the part
 * of an item that the ping-pong of kernel 14 does not hide (the other warpgroup is at its own start or end then).
 *
 * What it costs: the next Q_i must be in shared memory before the last P V is issued (kernel 19 waited for it after
 * the store); kernel 18's producer loads it once the last item's K/V tiles are issued. O and L are bit for bit kernel
 * 14's (--check compares them at B = 4, H = 16, N = 1000, where a block takes several row tiles).
 *
 * Measured: H200, fp16, over kernel 19: +2.6% to +4.3% at D = 64 at every N from 512 to 16384, +3.1% to +6.4% causal;
 * at D = 128 -0.8% to -1.7% at N = 512, up to +2.5% at N = 16384; the runs, a profile and cuDNN beside them:
 * RESULTS.md#kernel-20.
 */
#ifndef RUNG
#define RUNG 20 // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel19_wide_o.cu" // the rung this one extends (.extends = 19): its body and its policy

// --- the idea --------------------------------------------------------------------------------------------------

template <int D, typename T> struct EarlyStart : WideO<D, T> {
    using Base = WideO<D, T>;
    using C = K13<D>;

    /* The loop over the block's items, each item's S_0 issued at the end of the item before. ptxas must never see two
     * ways meet where an S is running on one and not on the other (an S_0 issued under a branch and waited for after
     * it): it then serialises every wgmma (warning C7515). So the first item's S_0 is issued before the loop, and a
     * block with no item leaves at once; and the block's last item ends apart, with a break. */
    template <class B> static __device__ __forceinline__ void items(B &b)
    {
        float alpha[2];
        if (!Base::take_ticket(b, 0, &b.bh, &b.tile)) { // every ticket taken before this block's first
            if (b.wg == 0) b.my_turn();           // the turn warpgroup 1 handed over at the start
            return;
        }
        b.ntiles = b.kv_tiles(b.tile);
        b.start_item(0, b.tile);
        b.my_turn();
        b.issue_s(0);
        b.your_turn();
        for (long it = 0;; it++) {
            wgmma_wait<0>();
            b.clear();                            // after S_0's wait, not under it (O is a wgmma accumulator)
            b.tile_loop(alpha);
            /* The next item's ticket and Q are taken now, and its S_0 goes to the tensor cores right behind this
             * item's last P V (it is tile jb + ntiles of the K ring), so it runs under O's store and the next item
             * starts at its softmax. O's rows are this item's: start_item has moved row_g on. */
            long nbh = 0, ntile = 0;
            if (!Base::take_ticket(b, it + 1, &nbh, &ntile)) { // the ticket past the last: this was the block's last item
                b.my_turn();
                b.issue_last_pv(b.ntiles - 1);
                b.your_turn();
                wgmma_wait<0>();
                b.store_o(b.tile * C::BR + b.warp * 16 + b.g);
                break;
            }
            b.start_item(it + 1, ntile);          // qf is free: S_{ntiles-1} has been waited for
            b.my_turn();
            b.issue_last_pv(b.ntiles - 1);        // the last P V ...
            b.issue_s(b.ntiles);                  // ... and the next item's S_0 behind it
            b.your_turn();
            wgmma_wait<1>();                      // the P V is in; S_0 still running
            b.store_o(b.tile * C::BR + b.warp * 16 + b.g);
            b.jb += b.ntiles;
            b.bh = nbh, b.tile = ntile, b.ntiles = b.kv_tiles(b.tile);
        }
        if (b.wg == 0) b.my_turn();               // the turn warpgroup 1 handed over after its last item
    }

    static void describe(char *buf, size_t n);
};

// --- the launcher ------------------------------------------------------------------------------------------------

template <int D, typename T> void EarlyStart<D, T>::describe(char *buf, size_t n)
{
    WideO<D, T>::describe(buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, "; the next row tile's S issued behind the last P V");
}

#if RUNG == 20
static int k20_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch<EarlyStart>(20, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k20_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k20_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k20_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe<EarlyStart>(D, buf, n);
}

static const FusedKernel kernel20 = {
    .id = 20, .extends = 19, .name = "early start",
    .idea = "kernel 19 with the next row tile's S issued behind this one's last P V",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k20_launch,
    .describe = k20_describe, .unavailable = wgmma_unavailable, .launch_l = k20_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel20);
#endif
