/*
 * Kernel 29: kernel 28 with Q read by the tensor cores from shared memory, not from registers.
 *
 * Extends kernel 28 (kernel28_fp8_three_overlap.cu). The idea: FlashAttention-3's FP8 forward takes Q for
 * S = Q K^T from shared memory, the comment beside it says because "register bandwidth is actually a bottleneck"
 * (fp8/RESULTS.md#fa3-fp8). Kernels 15-28 hold Q as A fragments in registers: every k step of every S product
 * reads them from the register file, on the same register ports as the other warpgroup's softmax running beside
 * it. Here each consumer warpgroup copies its 64 rows of Q once into shared memory, in the swizzled layout the TMA
 * gives K's tiles, and S = Q K^T takes both operands by descriptor (wgmma_fp8_ss).
 * Its code is the policy below: kernel 16's body's hook QOperand, Q in shared memory instead of in qf.
 * Why: at D = 128 the consumer warps of kernel 24 wait on their own chains of dependencies about half the cycles
 * (no warp eligible 48.9%, Nsight Compute, fp8/RESULTS.md#kernel-24); the A fragments of S are 16 registers a
 * thread read at every k step, which this takes off the register file.
 * What it costs: 64 D bytes of shared memory a warpgroup (16 KB at D = 128), the tensor cores reading 64 x 32
 * bytes more from shared memory at every k step of S, one copy of Q through the banks and one named barrier a
 * warpgroup before the loop; it frees the 16 registers (8 at D = 64) of Q's fragments. Built only for sm_90a.
 */
#ifndef RUNG
#define RUNG 29          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel28_fp8_three_overlap.cu"  // the rung this one extends (kernel 28): its body and its policy

// --- the idea ------------------------------------------------------------------

/* Kernel 29's policy: kernel 28's, with Q's operand in shared memory. */
struct Fp8QShared : Fp8Three {
    template <int D> struct QOperand {
        static constexpr int BYTES = 64 * D;      // the warpgroup's 64 rows of Q, e4m3
        uint32_t at;                              // their shared-memory address
        /* The warpgroup's 128 threads copy its rows wg_row0 .. + 63 (zeros past N) to smem, 16 bytes a thread at
         * a time, row r's chunk c at chunk c ^ (r % 8) (128-byte swizzle, D = 128) or c ^ (r / 2 % 4) (64-byte, D =
         * 64): K's layout, so the descriptors are K's. Then the tensor cores may read them: the async proxy fenced,
         * the warpgroup met at its own named barrier (3 + warpgroup; the turns use 1 and 2). */
        __device__ __forceinline__ void load(const uint8_t *Qh, long N, long row_g, long row_g8, int t, long wg_row0, uint32_t smem)
        {
            (void)row_g, (void)row_g8, (void)t;
            constexpr int CH = D / 16;            // 16-byte chunks a row
#pragma unroll
            for (int x = threadIdx.x % 128; x < 64 * CH; x += 128) {
                const int r = x / CH, c = x % CH, sw = D == 128 ? r % 8 : r / 2 % 4;
                const long row = wg_row0 + r;
                uint4 v = make_uint4(0u, 0u, 0u, 0u);
                if (row < N) v = *reinterpret_cast<const uint4 *>(Qh + row * D + c * 16);
                asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(smem + (uint32_t)(r * D + (c ^ sw) * 16)),
                             "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
            }
            fence_proxy_async();
            asm volatile("bar.sync 3, %0;\n" ::"n"(128 * Fp8QShared::consumers(D)) : "memory");  // the consumers, barrier 3
            at = smem;
        }
        /* S (+)= Q's k step ks (32 bytes on in the row) times the K tile's (desc_b), both from shared memory. */
        template <int BC> __device__ __forceinline__ void product(float *s, int ks, uint64_t desc_b)
        {
            const uint64_t desc = D == 128 ? make_desc(at + 32 * ks, 16, 1024) : make_desc_sw64(at + 32 * ks, 512);
            wgmma_fp8_ss<BC>(s, desc, desc_b, ks > 0);
        }
    };
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 29
template <int D> using K29 = Fp8PP<D, Fp8QShared>;

static int k29_launch(const Fp8Args *a, void *stream) { return fp8_pingpong_launch<Fp8QShared>(29, a, stream); }

static void k29_describe(long D, char *buf, size_t n)
{
    snprintf(buf, n, "kernel 28 (%d consumer warpgroups, BR=%d BC=%d) with Q from shared memory (wgmma's A by descriptor), "
             "%zu bytes of shared memory", D == 64 ? K29<64>::NWG : K29<128>::NWG, D == 64 ? K29<64>::BR : K29<128>::BR,
             K29<64>::BC, D == 64 ? K29<64>::bytes : K29<128>::bytes);
}

static const Fp8Kernel kernel29 = {
    .id = 29, .extends = 28, .name = "fp8 Q in smem",
    .idea = "Q read by the tensor cores from shared memory, not held in registers (FlashAttention-3's FP8 S = Q K^T)",
    .launch = k29_launch, .describe = k29_describe, .unavailable = fp8_unavailable,
};
FP8_REGISTER(kernel29);
#endif
