/*
 * Extends: kernel19_wide_o.cu; idea: the next row tile's S_0 issued right behind this row tile's last P V, under O's store
 * Code: overlap.cuh with PINGPONG = true, PERSIST = true, WIDE_O = true, CARRY = true
 *
 * Kernel 20: kernel 19 with no gap at the tensor cores between two row tiles of one block.
 *
 * What changes over kernel 19 (one idea: the order of an item's end and the next item's start). A consumer
 * warpgroup of kernel 19 ends a row tile (an item) with the last O += P V, waits for it, stores O and L, and only
 * then takes the next ticket, reads the next Q_i from shared memory, issues S_0 = Q_i K_0^T and waits for it before
 * its first softmax: two round trips to the tensor cores, one after the other, with only the other warpgroup's
 * products between them. Here the warpgroup takes the next ticket and Q_i's fragments before its last P V (qf is
 * free once the last S has been waited for), and issues the next item's S_0 in the same turn, right behind the P V:
 * it runs while O is stored, and the next item starts at its softmax. S_0 is tile jb + ntiles of the K ring, which
 * kernel 18's producer loads without a break between items, so nothing changes in the producer.
 *
 * Why: a row tile at N = 512 visits 4 K/V tiles (causal: 1 to 4); each item pays one such start, and it is the part
 * of an item that the ping-pong of kernel 14 does not hide (the other warpgroup is at its own start or end then).
 *
 * What it costs: the next Q_i must be in shared memory before the last P V is issued (kernel 19 waited for it after
 * the store); kernel 18's producer loads it once the last item's K/V tiles are issued. O and L bit for bit kernel
 * 14's (--check compares them at B = 4, H = 16, N = 1000, where a block takes several row tiles).
 *
 * Measured on the H200 (./step05 --bench --dtype fp16 [--causal], interleaved: --kernel 19-20 in one call, the race's
 * --kernel 14-20 in a second, each call on a freshly started machine, 2026-11-27), against kernel 19 in the same run,
 * N = 512 ... 16384:
 *     D = 64:          +3.7% +4.1% +3.8% +4.0% +4.0% +4.3%   and +2.6% +3.8% +3.9% +4.1% +4.1% +2.6%
 *     D = 128:         -0.8% +0.1% +0.5% +1.3% +2.4% +2.5%   and -1.7% +0.2% +0.4% +0.7% +1.0% +1.2%
 *     causal, D = 64:  +6.4% +4.9% +4.1% +3.7% +3.3% +3.1%   and +5.8% +4.7% +4.1% +3.9% +3.4% +3.2%
 *     causal, D = 128: +1.1% +3.0% +1.8% +3.0% +1.7% +1.8%   and +0.6% +1.6% +2.6% +2.2% +1.1% +3.3%
 * bf16 alike (the second call). The gain is largest where row tiles are shortest (causal D = 64, N = 512), as the
 * idea says; at D = 64 it stays at +2.6% to +4.3% up to N = 16384, where a row tile visits 128 K/V tiles and one S
 * per row tile cannot account for it. Nsight Compute there (N = 16384, D = 64): 5.69 ms against kernel 19's 5.91,
 * 3.9% fewer instructions executed (2.088 G against 2.172 G) at the same issue rate (no warp eligible in 48% of
 * cycles in both); the tile loop's machine code is about the same length in both (nvdisasm). Not explained further.
 * Against cuDNN 9.19 (PyTorch 2.11 SDPA, the second call): fp16 D = 64 98% at N = 512 and 101-110% from 1024;
 * causal D = 64 92%, 96%, 98%, then 101-110% from 4096; causal D = 128 95%, 99%, then 104-112%. At D = 128, N = 512
 * kernel 19 stays the faster.
 */
#include "overlap.cuh"

static int k20_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch_l<true, true, true, true>(20, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k20_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k20_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k20_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe(D, buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, " + Q's %d bytes; one block per SM, row tiles from a counter; O stored 16 bytes a lane; "
             "the next row tile's S issued behind the last P V", D == 64 ? K13<64>::QTILE : K13<128>::QTILE);
}

static const FusedKernel kernel20 = {
    .id = 20, .extends = 19, .name = "early start",
    .idea = "kernel 19 with the next row tile's S issued behind this one's last P V",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k20_launch,
    .describe = k20_describe, .unavailable = wgmma_unavailable, .launch_l = k20_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel20);
