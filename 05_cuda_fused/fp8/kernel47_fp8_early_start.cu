/*
 * Kernel 47: kernel 46 with each row tile's S_0 issued behind the row tile before's last P V.
 *
 * Extends kernel 46 (kernel46_fp8_short_keys.cu). The idea: forward kernel 20's, in FP8. A consumer warpgroup of
 * kernel 46 ends a row tile (an item) with the last O += P V, waits for it, stores O, and only then loads the next
 * item's Q, issues S_0 = Q K_0^T and waits for it before its first softmax: a gap at every item's end and start,
 * which forward kernel 20's profile showed in 16 bits. Here the warpgroup loads the next item's Q before its last P V
 * (qf is free once the last S has been waited for) and issues the next item's S_0 in the same turn, right behind that
 * P V: S_0 runs while O is stored, and the next item starts at its softmax. S_0 is tile kt + ntiles of the ring of
 * stages, which the producer loads without a break between items, so the producer does not change.
 * Its code is the policies below: kernel 16's body's hook EARLY_START on kernel 46's (D = 128) and kernel 45's (D = 64)
 * persistent policies; the body orders its item loop so (the first S_0 issued before it, the last item ended apart).
 * Why: at D = 128 a row tile pays about 4.5-5.2 us once (a fit of the gallery's times: its first tile's softmax with
 * no P V under it, Q's loads, the last P V and O's store), 11-12.5% of its time at N = 4096 (fp8/RESULTS.md#fp8-n4096);
 * that part is what ping-pong does not hide, the other warpgroup being at its own end or start then.
 * What it costs: the next item's Q is loaded before the last P V is issued, while the other warpgroup holds the
 * tensor cores; the persistent loop is slower than kernel 30's grid from N = 8192 at D = 128 (1-2%, causal up to 6%)
 * and from 4096 at D = 64 (3-4%, causal from 8192), so it runs up to N = 4096 at D = 128 and 2048 at D = 64, kernel
 * 30's grid past them. Built only for sm_90a.
 * Measured: H200, two runs with it persistent at every N, against kernel 46 in the same run: at D = 128 +2.4% / +2.8%
 * at N = 512 (507.3 / 513.6 TFLOP/s), +2.6% to +3.4% from 1024 to 4096 (849.9 / 863.2 TFLOP/s at N = 4096, 3.4% past
 * kernel 30, the fastest there before); causal +7.1% / +5.6%, +5.2% / +4.7%, +1.0% / +0.5%, +2.3% / +2.1% up to
 * N = 4096; at D = 64 (one run) +4.4%, +3.2%, +1.6% at N = 512, 1024, 2048, causal +1.1% to +2.1%. The runs, checks and
 * plant: fp8/RESULTS.md#kernel-47.
 */
#ifndef RUNG
#define RUNG 47          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel46_fp8_short_keys.cu"  // the rung this one extends (kernel 46): its body and its policies

// --- the idea ------------------------------------------------------------------

/* Kernel 47's policies: kernel 46's at D = 128 (128-key tiles) and kernel 45's at D = 64, persistent, each item's
 * S_0 issued behind the item before's last P V. Persistent up to persistent_to(D, causal) keys a row, causal or not:
 * the crossings measured with it persistent at every N (ahead of kernel 46 up to N = 4096 at D = 128 and 2048 at
 * D = 64, behind past them). */
struct Fp8EarlyStart : Fp8ShortKeys {
    static constexpr bool EARLY_START = true;
    static constexpr long persistent_to(long D, int causal) { return (void)causal, D == 64 ? 2048 : 4096; }
};
struct Fp8EarlyStart64 : Fp8ShortRows {
    static constexpr bool EARLY_START = true;
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 47
static int k47_launch(const Fp8Args *a, void *stream)
{
    if (a->N <= Fp8EarlyStart::persistent_to(a->D, a->causal))
        return fp8_pingpong_launch<Fp8EarlyStart64, Fp8EarlyStart>(47, a, stream);
    return fp8_pingpong_launch<Fp8Wide>(47, a, stream);   // long rows: kernel 30's grid, a block per item
}

static void k47_describe(long D, char *buf, size_t n)
{
    if (D == 128)
        snprintf(buf, n, "kernel 46 (BR=%d BC=%d, persistent) with each row tile's S_0 issued behind the last P V of the "
                 "one before, up to N = %ld, %zu bytes of shared memory", Fp8PP<128, Fp8EarlyStart>::BR,
                 Fp8PP<128, Fp8EarlyStart>::BC, Fp8EarlyStart::persistent_to(128, 0), Fp8PP<128, Fp8EarlyStart>::bytes);
    else
        snprintf(buf, n, "kernel 45 (BR=%d BC=%d, persistent) with each row tile's S_0 issued behind the last P V of the "
                 "one before, up to N = %ld, %zu bytes of shared memory", Fp8PP<64, Fp8EarlyStart64>::BR,
                 Fp8PP<64, Fp8EarlyStart64>::BC, Fp8EarlyStart::persistent_to(64, 0), Fp8PP<64, Fp8EarlyStart64>::bytes);
}

static const Fp8Kernel kernel47 = {
    .id = 47, .extends = 46, .name = "fp8 early start",
    .idea = "each row tile's S_0 issued behind the last P V of the row tile before, its Q loaded before that P V",
    .launch = k47_launch, .describe = k47_describe, .unavailable = fp8_unavailable, .persistent = 1,
    .persistent_of = 28,   // kernel 28's tiles at both D, in kernel 28's order: O bit for bit
};
FP8_REGISTER(kernel47);
#endif
