/*
 * Kernel 22: kernel 21 issuing fewer instructions a tile. Off the lesson's ladder: a measured step, kept because
 * kernel 23 is built on it.
 *
 * Extends kernel 21 (kernel21_half_diagonal.cu). The idea: each wgmma reads its shared-memory operand through a 64-bit
 * descriptor (the tile's address in 16-byte units, the byte offsets, the swizzle). Kernels 10-21 build it afresh for
 * every k step with make_desc: the compiler masks the address, shifts the 64-bit word, ors the flags and moves the
 * high word back, five instructions a wgmma (12 wgmmas a tile at D = 64, 16 at D = 128). Here the descriptor of a K or
 * V tile is made once per tile, and each k step's is that one plus the step's offset in the low word: one add
 * (desc_add). The products are the same, and so O and L are kernel 21's bit for bit (--check compares with kernel 14).
 *
 * Why: counted in kernel 21's machine code (nvdisasm, fp16), a tile without a mask is 487 instructions a consumer
 * thread at D = 64, and 93 of them are the uniform datapath's (ULOP3, UIADD3, USHF, UMOV, UISETP, ULEA), most of them
 * descriptors. Every instruction, uniform or not, takes an issue slot of its warp's scheduler, and two consumer warps
 * share a scheduler: about 974 issue cycles a tile against about 1024 of the tensor pipe's at D = 64 (the short causal
 * forward profiled: RESULTS.md#kernel-22). Here the tile is 452 instructions (57 uniform) at D = 64, and 490 against
 * 541 at D = 128.
 *
 * What it costs: nothing; the address field is 14 bits and shared memory ends below 256 KB, so the add never carries
 * into the field above it.
 *
 * Measured: H200, over kernel 21: within the run-to-run spread or slower: up to +1.6% at D = 128 (fp16; bf16 within
 * half a percent), and 0.8-2.0% slower at D = 64 from N = 4096 in every run and dtype. Fewer instructions are not, alone,
 * a faster tile (not profiled: the same wgmmas and waits, a different schedule of the rest). So this rung is off the
 * lesson's ladder; it stays in the code because kernel 23, which adds the mask on it, is where the instructions pay.
 * The runs: RESULTS.md#kernel-22.
 */
#ifndef RUNG
#define RUNG 22 // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel21_half_diagonal.cu" // the rung this one extends (.extends = 21): its body and its policy

// --- the idea --------------------------------------------------------------------------------------------------

template <int D, typename T> struct DescAdd : HalfDiagonal<D, T> {
    /* A k step's descriptor: the tile's (made once per tile, tile_desc) plus the step's offset, one add (wgmma.cuh's
     * desc_add). */
    static __device__ __forceinline__ uint64_t step_desc(uint32_t tile_addr, uint64_t tile_desc, uint32_t at, uint32_t lbo)
    {
        (void)tile_addr, (void)lbo;
        return desc_add(tile_desc, at);
    }

    static void describe(char *buf, size_t n);
};

// --- the launcher ------------------------------------------------------------------------------------------------

template <int D, typename T> void DescAdd<D, T>::describe(char *buf, size_t n)
{
    HalfDiagonal<D, T>::describe(buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, "; a k step's descriptor by one add");
}

#if RUNG == 22
static int k22_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch<DescAdd>(22, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k22_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k22_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k22_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe<DescAdd>(D, buf, n);
}

static const FusedKernel kernel22 = {
    .id = 22, .extends = 21, .name = "descriptor add",
    .idea = "kernel 21 with each k step's wgmma descriptor made by one add",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k22_launch,
    .describe = k22_describe, .unavailable = wgmma_unavailable, .launch_l = k22_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel22);
#endif
