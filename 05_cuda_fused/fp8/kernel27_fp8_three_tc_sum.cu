/*
 * Kernel 27: kernel 15's three consumer warpgroups at D = 64, with kernel 24's row sums by the tensor cores.
 *
 * Extends kernel 15 (kernel15_fp8.cu). The idea: kernel 24's, l_i = P times a column of ones, on the body that is
 * fastest at D = 64. Kernels 16, 17 and 24 run two consumer warpgroups taking turns at both D; at D = 64 kernel 15's
 * three warpgroups (192 query rows a block, 160 registers a thread) stay ahead of all of them. Here each k-step of
 * P V gets a second product beside it, wgmma m64n8k32 against a block of e4m3 1.0 (1 KB of shared memory, written
 * once), whose accumulator lacc holds l_i: rescaled by alpha with O, never added by the softmax, read at the end
 * without the quad's shuffles.
 * Its code is the policy below: kernel 24's ones and row sums (Fp8TcSum) in kernel 15's hooks; kernel 24's file says
 * why the sum of the e4m3 p is the right one.
 * Why: at D = 64 a tile's products are half of D = 128's and the softmax is the same: its 64 FADDs a thread a tile
 * (l += p) are a larger share of the issue slots, which is where kernel 24 gained most (+11-13% over kernel 17 at
 * D = 64 from N = 4096, +4-5% at D = 128).
 * What it costs: 4 small wgmma a tile (N = 8, 1/8 of P V's work at D = 64), 1 KB of shared memory, 2 registers.
 * Built only for sm_90a.
 * Measured: H200, D = 64, against kernel 15 in the same run (three runs): +1.1% to +1.5% at N = 4096 to 16384
 * (571-575, 632-633, 644-650 TFLOP/s); -2.9% at N = 512. Kernel 28 (kernel 24 on three warpgroups) is 1-2% faster
 * still. A tenth of kernel 24's gain over kernel 17: kernel 15 waits out each product before its softmax, so its issue
 * slots were not the wall (Nsight Compute: 11.6% fewer instructions, 1.7% less time, the warps waiting longer
 * instead). At D = 128 (two warpgroups) the extra products cost 3-6% against kernel 15, and kernel 24 stays the one
 * to run there. The runs and the profile: fp8/RESULTS.md#kernel-27.
 */
#ifndef RUNG
#define RUNG 27          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel15_fp8.cu"         // the rung this one extends (kernel 15): its body and its policy
#include "kernel24_fp8_tc_sum.cu"  // the idea's code, kernel 24's policy (its body is not used here)

// --- the idea ------------------------------------------------------------------

/* Kernel 27's policy: kernel 15's with kernel 24's shared memory (the ones) and row sums. Kernel 15's body calls its
 * row sums through sum (after the exponentials) and update (before O's rescale), kernel 16's through begin, add and
 * end: kernel 24's l, kept by the tensor cores, needs none of them. */
struct Fp8PlainTcSum : Fp8Plain {
    static constexpr int SMEM = Fp8TcSum::SMEM;
    template <int THREADS> __device__ static __forceinline__ void init_smem(uint32_t ones)
    {
        Fp8TcSum::init_smem(ones, THREADS);
    }
    struct RowSums : Fp8TcSum::RowSums {          // rescaled with O, added beside P V, whole at the end
        template <int BC> __device__ __forceinline__ void sum(const float *s) { (void)s; }  // no adds in the softmax
        __device__ __forceinline__ void update(const float alpha[2]) { (void)alpha; }
    };
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 27
template <int D> using K27 = K15<D, Fp8PlainTcSum>;

static int k27_launch(const Fp8Args *a, void *stream) { return fp8_plain_launch<Fp8PlainTcSum>(27, a, stream); }

static void k27_describe(long D, char *buf, size_t n)
{
    const int nwg = D == 64 ? K27<64>::NWG : K27<128>::NWG;
    snprintf(buf, n, "kernel 15 (1 producer + %d consumer warpgroups, BR=%d BC=%d) with l by the tensor cores (P times "
             "ones, m64n8k32), %zu bytes of shared memory", nwg, 64 * nwg, K27<64>::BC,
             D == 64 ? K27<64>::bytes : K27<128>::bytes);
}

static const Fp8Kernel kernel27 = {
    .id = 27, .extends = 15, .name = "fp8 3wg tc sum",
    .idea = "kernel 24's row sums by the tensor cores (P times a block of ones) on kernel 15's three consumer warpgroups",
    .launch = k27_launch, .describe = k27_describe, .unavailable = fp8_unavailable,
};
FP8_REGISTER(kernel27);
#endif
