/*
 * Kernel 24: kernel 17 without the softmax's adds: the row sums l by the tensor cores.
 *
 * Extends kernel 17 (kernel17_fp8_split_exp.cu). The idea: l_i = sum over keys of p_ij is P times a column of ones,
 * and P V is already on the tensor cores with P in registers. A second product beside each k-step of P V, wgmma
 * m64n8k32 with B a block of 1.0 (1 KB of shared memory, written once), puts l_i in an accumulator beside O:
 * rescaled with O by alpha each tile (4 FMUL), never added by the softmax. The sum is over the e4m3 p that P V
 * multiplies, not over the floats before their rounding, so O = (sum p v) / (sum p) divides by the weights it used.
 * Its code is the policy below: the ones (init_smem) and l kept by the tensor cores (RowSums). Kernel 27 puts the
 * same policy on kernel 15's body, kernel 28 runs this one on three warpgroups at D = 64.
 * Why: at D = 128 the tensor cores need about 512 cycles a tile for one warpgroup's S = Q K^T and P V, and while
 * they run the other warpgroup's softmax must fit beside them: about 580 instructions a thread a tile after kernel
 * 17, on the issue slots that kernel 17's sweep found to be the next wall. 64 of them are the row sums, l += p, one
 * FADD a score.
 * What it costs: 4 small wgmma a tile (N = 8, 1/16 of P V's work), 1 KB of shared memory, 4 registers. Built only
 * for sm_90a.
 * Measured: H200, D = 128, N = 4096 / 8192 / 16384: +4.1% / +4.8% / +5.0% over kernel 17 (825.1 / 828.3 / 848.2
 * TFLOP/s), +10.8% to +12.6% at D = 64 from N = 4096, nothing at D = 128 below N = 2048; the runs, the profile and
 * what was tried on top: fp8/RESULTS.md#kernel-24.
 */
#ifndef RUNG
#define RUNG 24          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel17_fp8_split_exp.cu"  // the rung this one extends (kernel 17): its body and its policy

// --- the idea ------------------------------------------------------------------

/* Kernel 24's policy: kernel 17's with its own shared memory (the ones) and the row sums replaced. l lives in the
 * accumulator of an m64n8 product: a thread holds rows g and g + 8, columns 2t and 2t + 1 of each, and as B is all
 * ones every column is the whole row's sum: no adds in the softmax, no shuffles at the end. */
struct Fp8TcSum : Fp8SplitExp {
    static constexpr int SMEM = 1024;             // the block of ones: 8 rows (n) of 128 keys (k), e4m3 1.0
    __device__ static __forceinline__ void init_smem(uint32_t ones, int nthreads)
    {
        for (int x = threadIdx.x; x < SMEM / 4; x += nthreads)  // e4m3 1.0 is 0x38
            asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(ones + 4 * x), "r"(0x38383838u) : "memory");
        fence_proxy_async();                      // the tensor cores read it next
    }
    struct RowSums {
        float lacc[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // l of rows g (0, 1) and g + 8 (2, 3), P's accumulator times ones
        __device__ __forceinline__ void reset()   // a persistent block's next item
        {
#pragma unroll
            for (int e = 0; e < 4; e++) lacc[e] = 0.0f;
        }
        __device__ __forceinline__ void begin() {}
        __device__ __forceinline__ void add(int x, float p) { (void)x, (void)p; }  // no adds in the softmax
        __device__ __forceinline__ void end(const float alpha[2]) { (void)alpha; }
        __device__ __forceinline__ void rescale(const float alpha[2])  // l is scaled as O is: it sits beside O
        {
#pragma unroll
            for (int e = 0; e < 4; e++) lacc[e] *= alpha[e / 2];
        }
        __device__ __forceinline__ void pv(const uint32_t a[4], uint32_t ones)
        {
            wgmma_fp8<8>(lacc, a, make_desc(ones, 16, 1024), 1);  // l += P_j's 32 keys times 1
        }
        __device__ __forceinline__ float total(int h) const { return lacc[2 * h]; }  // the whole row's already
    };
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 24
template <int D> using K24 = Fp8PP<D, Fp8TcSum>;

static int k24_launch(const Fp8Args *a, void *stream) { return fp8_pingpong_launch<Fp8TcSum>(24, a, stream); }

static void k24_describe(long D, char *buf, size_t n)
{
    snprintf(buf, n, "kernel 17 (2 consumer warpgroups taking turns, BR=128 BC=%d, %d of every 16 exponentials on the FMA "
             "pipes) with l by the tensor cores (P times ones, m64n8k32), %zu bytes of shared memory", K24<64>::BC,
             Fp8TcSum::POLY, D == 64 ? K24<64>::bytes : K24<128>::bytes);
}

static const Fp8Kernel kernel24 = {
    .id = 24, .extends = 17, .name = "fp8 tc row sum",
    .idea = "the softmax's row sums l by the tensor cores, P times a block of ones",
    .launch = k24_launch, .describe = k24_describe, .unavailable = fp8_unavailable,
};
FP8_REGISTER(kernel24);
#endif
