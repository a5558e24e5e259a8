/*
 * Kernel 52: kernel 39 with each ticket's head and row tile found by multiplying, not dividing.
 *
 * Extends kernel 39 (kernel39_o_by_tma.cu). The idea: integer division. A persistent block takes a ticket per item
 * and turns it into the item's head and row tile (tile_order.cuh's ticket_tile): causal, ticket / (G row_tiles), then
 * a remainder divided by the group's heads; not causal, ticket / row_tiles. The GPU has no integer divide: each `/`
 * and `%` is about twenty instructions through a float reciprocal (I2F, MUFU.RCP, F2I, R2UR, then some fifteen
 * uniform-datapath corrections), on 64-bit operands a test and a subroutine besides; in kernel 39's machine code each
 * of its consumer warps runs two such chains in a row at every causal item's start, before it may issue the item's
 * last P V and the next item's S_0. But every divisor is fixed for the launch (row_tiles, G row_tiles, G and the last
 * group's heads), so each division can be prepared once: with s = ceil(log2 d) and m = ceil(2^(32+s) / d) - 2^32,
 * n / d = (n + umulhi(n, m)) >> s for every n < 2^31: a multiply-high, an add and a shift (Granlund and Montgomery's
 * division by an invariant integer, in the form of PyTorch's IntDivider; CUTLASS's FastDivmod, which FlashAttention-3's
 * schedulers use, is another form of it). The tickets fit, and so does every divisor: the launcher refuses more than
 * 2^31 - 1 items.
 * Why it is exact: d > 2^(s-1), so 2^32 <= 2^32 + m < 2^33 and m fits 32 bits; (2^32 + m) d = 2^(32+s) + e with
 * 0 <= e < d <= 2^s. Then n (2^32 + m) / 2^(32+s) = n / d + n e / (d 2^(32+s)), and the error term is below
 * 2^31 2^s / (d 2^(32+s)) = 1 / (2d): the fractional part of n / d is at most (d - 1) / d, so the floor stays
 * floor(n / d). The code computes that floor: floor(n (2^32 + m) / 2^32) = n + umulhi(n, m), then >> s (a floor of a
 * floor); and n + umulhi(n, m) <= 2n - 1 < 2^32 cannot wrap (n >= 1), which is where n < 2^31 is needed.
 * Why: at causal N = 512, D = 64 an item is one to four K/V tiles, so what an item pays once is a large share of its
 * time, and kernel 38 (tried, RESULTS.md#kernel-38-tried), which moved the divisions to the producer, gained 1.0-1.6%
 * there.
 * What it costs: three prepared divisors a thread (each d, m and s; in the machine code they sit in uniform registers),
 * computed once per block in setup with 64-bit divisions; nothing in the tile loop. O and L are kernel 14's bit for bit
 * (--check compares them). In the machine code (fp16, D = 64): 3272 instructions against kernel 39's 3600, and ptxas's
 * spills down from 68 to 44 bytes stored (runs/k52_ticket_by_multiply/: sass_counts.csv, ptxas_k39_k52.txt).
 * Measured: H200, over kernel 39 in the same runs (fp16 and bf16): causal, D = 64, +4.8% to +5.0% at N = 512 (four
 * runs), +3.0% to +3.1% at 1024, +1.6% to +1.8% at 2048, -0.3% to +0.9% from 4096; causal, D = 128, +0.7% to +3.5%
 * from N = 512 to 2048; not causal, +3.6% and +3.7% at N = 512, D = 64, within 0.6% from N = 2048. Beside cuDNN,
 * causal fp16 at N = 512, D = 64, in two further runs: 100.9% and 101.7% (kernel 39: 97.3% and 96.9%), the first
 * kernel here past cuDNN at that shape. The runs: RESULTS.md#kernel-52.
 */
#ifndef RUNG
#define RUNG 52 // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel39_o_by_tma.cu" // the rung this one extends (.extends = 39): its body and its policy

// --- the idea --------------------------------------------------------------------------------------------------

/* n / d for 0 <= n < 2^31 and 1 <= d < 2^31, prepared once for d (the header says why it is exact). d = 1: s = 0,
 * m = 0, n / 1 = n; d a power of two: m = 0, a shift. */
struct DivByMul {
    unsigned d, m, s;
    __device__ __forceinline__ void prepare(unsigned d_)
    {
        d = d_;
        s = 32 - __clz(d_ - 1);                   // ceil(log2 d): 0 for d = 1
        m = (unsigned)((((1ull << (32 + s)) + d_ - 1) / d_) - (1ull << 32));
    }
    __device__ __forceinline__ unsigned div(unsigned n) const { return (n + __umulhi(n, m)) >> s; }
};

template <int D, typename T> struct TicketByMultiply : OByCopyEngine<D, T> {
    using Base = OByCopyEngine<D, T>;

    /* Kernel 18's scheduler state and three prepared divisors: causal, G row_tiles (a group's tickets), G (its heads)
     * and the last group's heads (fewer than G when G does not divide BH); not causal, row_tiles in per_group. */
    struct Sched : Base::Sched {
        DivByMul per_group, per_head, last_heads;
        unsigned rt;                              // row tiles a head
        __device__ __forceinline__ void prepare(long row_tiles, int causal)
        {
            rt = (unsigned)row_tiles;
            const unsigned G = (unsigned)this->G, BH = (unsigned)this->BH;
            per_group.prepare(causal ? G * rt : rt);
            per_head.prepare(G);
            last_heads.prepare(BH - (BH - 1) / G * G);
        }
        /* tile_order.cuh's ticket_tile, each division by its prepared divisor */
        __device__ __forceinline__ void decode(unsigned ticket, long, int causal, long *bh, long *tile) const
        {
            if (causal) {
                const unsigned G = (unsigned)this->G, BH = (unsigned)this->BH;
                const unsigned h0 = per_group.div(ticket) * G;  // the group's first head
                const unsigned r = ticket - h0 * rt;            // the ticket's place in its group
                const bool last = BH - h0 < G;                  // the last group may have fewer heads
                const unsigned g = last ? last_heads.d : G;
                const unsigned q = last ? last_heads.div(r) : per_head.div(r);
                *bh = h0 + (r - q * g);
                *tile = rt - 1 - q;
            } else {
                const unsigned q = per_group.div(ticket);
                *bh = q;
                *tile = ticket - q * rt;
            }
        }
    };
    template <class B> static __device__ __forceinline__ void setup(B &b)
    {
        Base::setup(b);
        b.sched.prepare(b.row_tiles, b.causal);
    }

    static void describe(char *buf, size_t n);
};

// --- the launcher ------------------------------------------------------------------------------------------------

template <int D, typename T> void TicketByMultiply<D, T>::describe(char *buf, size_t n)
{
    Base::describe(buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, "; tickets decoded by multiplying");
}

#if RUNG == 52
static int k52_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch<TicketByMultiply>(52, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k52_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k52_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k52_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe<TicketByMultiply>(D, buf, n);
}

static const FusedKernel kernel52 = {
    .id = 52, .extends = 39, .name = "fast divmod",
    .idea = "kernel 39 with each ticket's head and row tile found by a multiply-high and a shift, not a division",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k52_launch,
    .describe = k52_describe, .unavailable = wgmma_unavailable, .launch_l = k52_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel52);
#endif
