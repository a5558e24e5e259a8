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
 * Measured on the H200 (./step05 --bench --dtype fp16 [--causal] --kernel 21-23, one call, 2026-11-27), against
 * kernel 21 in the same run, N = 512 ... 16384:
 *     fp16, D = 64:  +3.7% +0.2% +0.3% -0.9% -1.0% -0.8%   causal: +1.3% -0.1% -0.2% -1.0% -1.6% -1.5%
 *     fp16, D = 128: +0.9% +0.6% +1.0% +0.3% +0.6% +0.8%   causal: +1.4% +1.6% +1.1% +0.4% +0.6% +0.6%
 * Up to 3.7% at N = 512 and about 1% at D = 128; at D = 64 from N = 4096, 1-1.6% slower, both ways (not profiled).
 * One run: in the same run kernel 23, whose path without a mask is this kernel's, differs from it by up to 1.6%
 * there. bf16 not timed.
 *
 * Not landed: compute-sanitizer's racecheck over --sanitize-shapes --kernel 22 did not finish (150 s in one call; in
 * the next, its ninth run, bf16, N = 65, D = 64, not ended in 70 s), where kernels 21 and 23 take 5-6 s (RESULTS.md,
 * the sixth session of 2026-11-27).
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

static const FusedKernel kernel22 = {22, "descriptor add", "kernel 21 with each k step's wgmma descriptor made by one add",
                                     (1u << DT_FP16) | (1u << DT_BF16), tc_supports, k22_launch, k22_describe, wgmma_unavailable, k22_launch_l, NULL};
FUSED_REGISTER(kernel22);
