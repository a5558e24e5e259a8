/*
 * Kernel 26: kernel 23 with the causal head groups sized by the SMs' rounds and by L2 beside Q and O.
 *
 * Extends kernel 23 (kernel23_bit_mask.cu). The idea: the schedule, not the tile's arithmetic. Causal, kernel 18's
 * tickets come longest first inside groups of G heads (tile_order.cuh): row tile r of each of the G heads, then row
 * tile r - 1 of each, and so on, so each head's K and V must stay in L2 from its longest row tile, early in the group,
 * to its shortest, at the group's end. Kernel 18 sizes G by bytes alone: the group's K and V fill half of L2. Two
 * things that rule leaves out:
 *     each row tile also reads its Q and writes its O, as many bytes as its share of K and V, through the same L2;
 *     the blocks, one per SM, take the tickets in rounds (132 on the H200), at first in step; when G times the row
 *     tiles is not a whole number of rounds, a round straddles two tile lengths and two groups.
 * Here a group is whole rounds: u heads make one (u = SMs / gcd(row tiles, SMs): 33 on the H200 at the bench's N),
 * and G is the most rounds whose K and V fit a third of L2 (fp16, 60 MiB: 132 heads at D = 64, N = 512, where kernel
 * 23 takes 240); where not one round fits a third, one round if its K and V and a round's Q and O fit in L2 (33 heads
 * at D = 128, N = 2048, kernel 23's 30); beyond that (N = 4096 and up, but D = 64 at 4096) kernel 18's half of L2.
 * The kernel's code is kernel 23's instruction for instruction (cuobjdump, sm_90a): only the launcher's G changes, and
 * O and L are kernel 14's bit for bit (--check compares them).
 *
 * Why: at causal N = 512, D = 64 (H200, Nsight Compute) kernel 23 keeps DRAM busy 10% more cycles than cuDNN's
 * forward for the same work (185.8 k against 168.9 k), and its launch is 5% longer. G swept by hand on kernel 23
 * (fp16, causal, N = 512 ... 2048): the best G at all six shapes is a whole number of rounds, and at five of them its
 * K and V are 16.5 MiB, near a quarter of L2; at D = 128, N = 2048, 33 heads (33 MiB) beat kernel 23's 30 (30 MiB) by
 * 5% (RESULTS.md#kernel-26).
 *
 * What it costs: nothing in the kernel; the rule is a few lines of the launcher. At long N, where a round's K and V
 * would overflow L2, it keeps kernel 23's G: a third of L2 there, five heads a group against seven, lost 2.2% and
 * 2.3% (two runs, D = 64, N = 16384 and D = 128, N = 8192).
 *
 * Measured: H200, fp16, causal, over kernel 23 in the same call (N = 512 ... 2048 in four runs, longer N in two):
 * +1.8% to +2.6% up to N = 2048 and +2.7% at 4096 (D = 64), +4.2% to +6.0% up to N = 2048 (D = 128); from N = 8192
 * (D = 64) and 4096 (D = 128), where G is kernel 23's, -0.3% to +0.4%. Beside cuDNN, two calls: 95.6-95.9% /
 * 99.4-100.1% / 101.5-102.1% at N = 512 / 1024 / 2048 (D = 64) and 100.1-100.3% / 105.6-105.7% / 109.6-110.8%
 * (D = 128), where kernel 23 is at 93.7-94.1% / 97.2-97.9% / 99.5-100.0% and 94.5-94.7% / 100.9-101.3% /
 * 104.9-105.2%; the sweep, the runs and the rule that lost at long N: RESULTS.md#kernel-26.
 */
#ifndef RUNG
#define RUNG 26 // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel23_bit_mask.cu" // the rung this one extends (.extends = 23): its body and its policy

// --- the idea --------------------------------------------------------------------------------------------------

template <int D, typename T> struct SmRounds : BitMask<D, T> {
    /* Heads per causal group: whole rounds of the SMs, their K and V in a third of L2. u heads make a round (u times
     * the row tiles is a multiple of the SMs): take the most rounds whose K and V fit a third of L2; where not one
     * does, one round if its K and V fit in L2 beside one round's Q and O; where not even that, kernel 18's half of L2
     * (the long N, where a round's K, V, Q and O overflow L2). */
    static long heads_per_group(long l2, long N, long row_tiles, long sms, long BH)
    {
        const long head = 4 * N * D;                                   // a head's K and V, fp16 or bf16
        long a = row_tiles, b = sms;                                   // u = sms / gcd(row_tiles, sms)
        while (b) { const long t = a % b; a = b; b = t; }
        const long u = sms / a, round_qo = sms * 4L * BitMask<D, T>::C::BR * D; // a round's Q tiles and O tiles
        long G = l2 / 3 / head / u * u;
        if (G == 0 && u * head + round_qo <= l2) G = u;
        return group_heads(G ? G * head : l2 / 2, N, D, row_tiles, sms, BH);
    }

    static void describe(char *buf, size_t n);
};

// --- the launcher ------------------------------------------------------------------------------------------------

template <int D, typename T> void SmRounds<D, T>::describe(char *buf, size_t n)
{
    BitMask<D, T>::describe(buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, "; causal head groups of whole SM rounds, K and V in a third of L2");
}

#if RUNG == 26
static int k26_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch<SmRounds>(26, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k26_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k26_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k26_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe<SmRounds>(D, buf, n);
}

static const FusedKernel kernel26 = {
    .id = 26, .extends = 23, .name = "SM rounds",
    .idea = "kernel 23 with the causal head groups whole rounds of the SMs, their K and V in a third of L2",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k26_launch,
    .describe = k26_describe, .unavailable = wgmma_unavailable, .launch_l = k26_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel26);
#endif
