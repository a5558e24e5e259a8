/*
 * Extends: bwd08_overlap.cu; idea: deterministic dQ: the K/V tiles add their parts of each row tile in order, a counter per row tile
 * Code: bwd_wgmma.cuh with BULK = false, MASK_BRANCH = true, OVERLAP = true, DET = true
 *
 * Backward kernel 9: backward kernel 8 with dQ the same bit for bit run
 * after run.
 *
 * What changes over backward kernel 8 (one idea: order the additions). Every
 * K/V tile j adds its part of dQ_i into one fp32 accumulator; with atomics
 * the parts arrive in whatever order the blocks run, and fp32 addition is
 * not associative, so dQ differs in its last bits from one run to the next
 * (--check's rerun lines count the elements). Here each consumer warpgroup
 * waits, before adding its 64 x 64 part of dQ_i, until a counter for that
 * row tile and warpgroup reads j (tiles 0 .. j - 1 are in), adds its part
 * with the same red.global.add.v2, and sets the counter to j + 1: thread 0
 * spins with ld.acquire.gpu, a named barrier of the warpgroup's 128
 * threads lets them go, and after their additions each fences, the
 * barrier again, and thread 0 stores j + 1 with st.release.gpu. Every
 * element of dQ receives its parts in the order j = 0, 1, 2, ..., so the sum
 * is one fixed sum (FlashAttention-3 has this as its deterministic mode).
 * The tiles that add into a row tile are 0 .. some J, causal too, and the
 * grid runs head by head in order of j, so tile j - 1 has started when
 * tile j waits for it.
 *
 * What it costs: the counters (2 per row tile of 64 queries and head, zeroed
 * at each launch), and per row tile and warpgroup a wait for the tile before
 * it, two named barriers and a fence; a block that waits holds its SM.
 *
 * Measured on an NVIDIA H200 (./step05 --bench --backward --dtype fp16
 * [--causal] --kernel 8-9, N = 4096, interleaved, median of 5, 2026-11-26,
 * the code of commit b903c93):
 * 250.6 TFLOP/s at D = 64 and 285.6 at D = 128 against kernel 8's 365.4
 * and 395.7: -31% and -28% (bf16 the same); at N = 16384 -24% and -26%.
 * Causal: -61% and -57% (127.9 and 149.3 against 324.5 and 349.8): a K/V
 * tile's walk starts at its diagonal, so tile j reaches each row tile with
 * fewer row tiles behind it than tile j - 1 and waits there for it, at every
 * row tile: the head's blocks go in a staircase. In the other order (J
 * first) the causal blocks would not wait, but a block would wait for one
 * launched after it, which deadlocks once a head has more K/V tiles than
 * the GPU has SMs (N > 16896 here); not done. That is the price of a dQ
 * that is the same bit for bit: --check's rerun lines now say so for dQ
 * too, where kernel 8's dQ differed in 10 of its 72 cases.
 */
#include "bwd_wgmma.cuh"

static int b9_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return bwd_wgmma_launch<false, true, true, true>(9, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b9_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    bwd_wgmma_describe<false, true, true, true>(D, buf, n);
}

static const BackwardKernel bwd9 = {
    .id = 9, .extends = 8, .name = "deterministic dQ",
    .idea = "kernel 8 with dQ's parts added in the order of the K/V tiles: dQ bit-identical run to run",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = bwd_wgmma_workspace_det, .launch = b9_launch, .describe = b9_describe,
    .unavailable = wgmma_unavailable, .dq_deterministic = 1, .dkdv_as = 5,
};
BWD_REGISTER(bwd9);
