/*
 * Extends: kernel21_half_diagonal.cu; idea: a wgmma's shared-memory descriptor made by one add, not rebuilt
 * Code: overlap.cuh with PINGPONG = true, PERSIST = true, WIDE_O = true, CARRY = true, HALF_PV = true, DESC_ADD = true
 *
 * Kernel 22: kernel 21 issuing fewer instructions a tile.
 *
 * What changes over kernel 21 (one idea). Each wgmma reads its shared-memory operand through a 64-bit descriptor
 * (the tile's address in 16-byte units, the byte offsets, the swizzle). Kernels 10-21 build it afresh for every k
 * step with make_desc: the compiler masks the address, shifts the 64-bit word, ors the flags and moves the high word
 * back, five instructions a wgmma (12 wgmmas a tile at D = 64, 16 at D = 128). Here the descriptor of a K or V tile
 * is made once per tile, and each k step's is that one plus the step's offset in the low word: one add (desc_add).
 * The products are the same, and so O and L are kernel 21's bit for bit (--check compares with kernel 14).
 *
 * Why: counted in kernel 21's machine code (nvdisasm, fp16), a tile without a mask is 487 instructions a consumer
 * thread at D = 64, and 93 of them are the uniform datapath's (ULOP3, UIADD3, USHF, UMOV, UISETP, ULEA), most of them
 * descriptors. Every instruction, uniform or not, takes an issue slot of its warp's scheduler, and two consumer
 * warps share a scheduler: about 974 issue cycles a tile against about 1024 of the tensor pipe's at D = 64
 * (RESULTS.md, the short causal forward profiled). Here the tile is 452 instructions (57 uniform) at D = 64, and 490
 * against 541 at D = 128.
 *
 * What it costs: nothing; the address field is 14 bits and shared memory ends below 256 KB, so the add never
 * carries into the field above it.
 *
 * Measured on the H200 against kernel 21 in the same run, N = 512 ... 16384, in two calls: `./step05 --bench --dtype
 * fp16 [--causal] --kernel 21-23` (2026-11-27, sixth session), then the race's forward run (`sh common/gpu_runs.sh OUT
 * race-forward`, kernels 14-23, the seventh):
 *                        N = 512   1024   2048   4096   8192  16384
 *     fp16, D = 64          +3.7   +0.2   +0.3   -0.9   -1.0   -0.8     second: +1.4 -0.9 -0.2 -1.1 -1.7 -1.9
 *     fp16, causal, D = 64  +1.3   -0.1   -0.2   -1.0   -1.6   -1.5             +0.3 -0.5 -0.8 -1.1 -1.3 -2.0
 *     fp16, D = 128         +0.9   +0.6   +1.0   +0.3   +0.6   +0.8             -0.2 +1.0 +0.3 +0.3 +0.2 +0.1
 *     fp16, causal, D = 128 +1.4   +1.6   +1.1   +0.4   +0.6   +0.6             +0.5 +0.1 +0.3 +0.4 +0.1 +0.4
 *     bf16, D = 64          -0.8   -0.3   +0.2   -0.8   -0.8   -1.4     (second call only)
 *     bf16, causal, D = 64  -0.9   -0.8   -1.2   -1.3   -1.6   -2.0
 *     bf16, D = 128         -0.3   +0.2   +0.0   +0.4   +0.5   +0.5
 *     bf16, causal, D = 128 -0.5   -0.1   +0.2   +0.1   +0.3   +0.2
 * So fewer instructions are not, alone, a faster tile: at D = 128 up to +1.6% (fp16), within half a percent in bf16;
 * at D = 64 from N = 4096, 0.8-2.0% slower in every run and dtype (not profiled: the same wgmmas and waits, a
 * different schedule of the rest). Kernel 23, which adds the mask on this one, is where the instructions pay.
 *
 * Sanitizers: memcheck, initcheck, synccheck and racecheck over --sanitize-shapes --kernel 22, 0 errors and 0
 * hazards. Racecheck is slow on this kernel and how slow varies: 28 s and 62 s for the 19 runs (the seventh session),
 * against 4-33 s for kernels 21 and 23 in the same calls; in the sixth session two runs were stopped at 70 s and
 * 150 s before they ended, and the kernel was held back as hanging the tool. A planted error (K's descriptor 32 bytes
 * on, desc_add(k_desc, at + 32)) made 59 and 58 of --check --kernel 22's 104 cases fail, in two sessions.
 */
#include "overlap.cuh"

static int k22_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch_l<true, true, true, true, true, true>(22, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k22_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k22_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k22_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe(D, buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, " + Q's %d bytes; one block per SM, row tiles from a counter; O stored 16 bytes a lane; "
             "the next row tile's S issued behind the last P V; causal: half the diagonal's P V in warpgroup 0; "
             "a k step's descriptor by one add", D == 64 ? K13<64>::QTILE : K13<128>::QTILE);
}

static const FusedKernel kernel22 = {
    .id = 22, .extends = 21, .name = "descriptor add",
    .idea = "kernel 21 with each k step's wgmma descriptor made by one add",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k22_launch,
    .describe = k22_describe, .unavailable = wgmma_unavailable, .launch_l = k22_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel22);
