/*
 * Kernel 28: kernel 24 at D = 64 with three consumer warpgroups, each its own softmax under its own P V, no ping-pong.
 *
 * Extends kernel 24 (kernel24_fp8_tc_sum.cu). The idea: FlashAttention-3's configuration at D = 64, from its source
 * (fp8/RESULTS.md#fa3-fp8): three consumer warpgroups of 160 registers (192 query rows a block, as kernel 15), and in
 * each the softmax of S_j running while P_{j-1} V_{j-1} is on the tensor cores (kernel 16's overlap inside a
 * warpgroup), but no turns between the warpgroups: with three, one warpgroup's products can always run under the
 * others' softmax without named barriers to order them. At D = 128 it is kernel 24, two warpgroups taking turns.
 * Its code is the policy below: two hooks of kernel 16's body, consumers (how many warpgroups) and Turns (none).
 * Why: at D = 64 kernel 15's three warpgroups beat the two of kernels 16-24 by 8-13% (fp8/RESULTS.md#kernel-24), and
 * kernel 27 showed that on kernel 15's body the softmax's adds were not the wall: each warpgroup waits out every
 * product (Nsight Compute: no warp eligible 49% of the cycles). Kernel 16's overlap is the cure for that wait, and
 * at D = 64 its registers fit: ptxas keeps the body in 128 registers a thread, without spills, for 512 threads.
 * What it costs: nothing in the code beyond the hooks; three warpgroups share the tensor cores in whatever order the
 * schedulers pick, so no warpgroup is promised the tensor cores for its products while another runs its softmax.
 * Built only for sm_90a.
 * Measured: H200, D = 64, two runs, each kernel against the others in the same run: from N = 2048 +11.0% to +16.1%
 * over kernel 24, +2.6% to +3.2% over kernel 15 (the fastest at D = 64 before), +1.1% to +2.4% over kernel 27:
 * 583.6-583.9 TFLOP/s at N = 4096, 652.0-654.8 at 16384; causal +2.4% to +4.1% over kernel 15 from N = 2048. At
 * N = 512 kernel 15 leads by 2.5%. At D = 128 its code is kernel 24's instruction for instruction (PTX, names aside).
 * The runs: fp8/RESULTS.md#kernel-28.
 */
#ifndef RUNG
#define RUNG 28          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include <type_traits>

#include "kernel24_fp8_tc_sum.cu"  // the rung this one extends (kernel 24): its body and its policy

// --- the idea ------------------------------------------------------------------

/* Kernel 28's policy: kernel 24's with three consumer warpgroups at D = 64, none of them waiting for a turn. */
struct Fp8Three : Fp8TcSum {
    __host__ __device__ static constexpr int consumers(int D) { return D == 64 ? 3 : 2; }
    struct Free {                                 // no turns: each warpgroup issues its products when it is ready
        int wg;
        __device__ __forceinline__ void mine() const {}
        __device__ __forceinline__ void yours() const {}
        __device__ __forceinline__ void first() const {}
        __device__ __forceinline__ void last() const {}
    };
    template <int NWG> using Turns = std::conditional_t<NWG == 2, Fp8TcSum::Turns<2>, Free>;  // D = 128: kernel 24's
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 28
template <int D> using K28 = Fp8PP<D, Fp8Three>;

static int k28_launch(const Fp8Args *a, void *stream) { return fp8_pingpong_launch<Fp8Three>(28, a, stream); }

static void k28_describe(long D, char *buf, size_t n)
{
    if (D == 64)
        snprintf(buf, n, "kernel 24 with 3 consumer warpgroups (BR=%d BC=%d), each with its softmax under its own P V, no "
                 "turns, %zu bytes of shared memory", K28<64>::BR, K28<64>::BC, K28<64>::bytes);
    else
        snprintf(buf, n, "kernel 24 (2 consumer warpgroups taking turns, BR=%d BC=%d), %zu bytes of shared memory",
                 K28<128>::BR, K28<128>::BC, K28<128>::bytes);
}

static const Fp8Kernel kernel28 = {
    .id = 28, .extends = 24, .name = "fp8 3wg overlap",
    .idea = "at D = 64 three consumer warpgroups, each with its softmax under its own P V and no ping-pong (FlashAttention-3's D = 64)",
    .launch = k28_launch, .describe = k28_describe, .unavailable = fp8_unavailable,
};
FP8_REGISTER(kernel28);
#endif
