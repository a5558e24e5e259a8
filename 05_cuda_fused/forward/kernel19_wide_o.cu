/*
 * Extends: kernel18_persistent.cu; idea: O stored 16 bytes a lane, after a 4 x 4 transpose of the quad's words by shuffles
 * Code: overlap.cuh with PINGPONG = true, PERSIST = true, WIDE_O = true
 *
 * Kernel 19: kernel 18 with O leaving the registers in whole 16-byte pieces.
 *
 * What changes over kernel 18 (one idea: the store of O, not its values). In
 * the accumulator's layout lane t of each quad holds columns 2t and 2t+1 of
 * every block of 8 columns of its two rows, so kernel 18 (and 13, 14) store O
 * 4 bytes a lane: D / 4 store instructions per thread and row tile, each
 * writing 16 bytes into each of 8 rows, half a 32-byte sector each. Here the
 * quad first exchanges its words (two rounds of __shfl_xor_sync, 4
 * shuffles per 4 blocks) so that lane t holds all of block n0 + t, and stores
 * it with one 16-byte store: D / 16 store instructions, each writing 64
 * contiguous bytes (two whole sectors) into each of 8 rows.
 *
 * Why: kernel 18 with its stores of O skipped (wrong O, timing only: ./step05
 * --bench --dtype fp16 [--causal] --kernel 18, one run, H100, 2026-11-26) ran
 * +12% at D = 64 and +23% at D = 128 at N = 512 (causal +14% and +34%), +5% and
 * +7% at N = 2048, and +1% and +4% at N = 4096: at short N a row tile visits
 * few K/V tiles, and O's store is a large part of its time.
 *
 * What it costs: 4 shuffles and 8 selects per 16 bytes of O in the machine
 * code (nvdisasm: SHFL 52 -> 148, SEL 188 -> 380, STG 104 -> 32 over the four
 * instances), nothing in shared memory. O and L bit for bit kernel 14's, as
 * kernel 18's are (--check compares them).
 *
 * Measured on the H100 (NVIDIA H100 80GB HBM3, ./step05 --bench --dtype
 * fp16 [--causal] --kernel 14-19, interleaved, 2026-11-26, commit 1e0f033),
 * against kernel 18 in the same run: at D = 128 +14.0% at N = 512, +8.2% at
 * 1024, +5.1% at 2048, +3.1% at 4096, +1.7% at 16384 (causal +16.0% at 512,
 * +10.3% at 1024); at D = 64 +5.5% at 512, +2.4% at 1024, +0.7% at 2048, and
 * -0.6% to -2.1% from 4096 up (12 instructions in place of 3 stores; not
 * profiled): there kernel 18 stays the faster. bf16 alike. Against cuDNN
 * 9.19 through PyTorch 2.11 SDPA in the same lease: 102% at D = 128, N = 512
 * (kernel 18: 90%), 95% at D = 64; 101% and 97% at N = 1024; causal 85% and
 * 83% at N = 512 (kernel 18: 73%, 78%).
 */
#include "overlap.cuh"

static int k19_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch_l<true, true, true>(19, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k19_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k19_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k19_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe(D, buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, " + Q's %d bytes; one block per SM, row tiles from a counter; O stored 16 bytes a lane",
             D == 64 ? K13<64>::QTILE : K13<128>::QTILE);
}

static const FusedKernel kernel19 = {
    .id = 19, .extends = 18, .name = "wide O stores",
    .idea = "kernel 18 with O stored 16 bytes a lane (a transpose inside each quad)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k19_launch,
    .describe = k19_describe, .unavailable = wgmma_unavailable, .launch_l = k19_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel19);
