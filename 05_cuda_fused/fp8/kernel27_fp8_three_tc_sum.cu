/*
 * Kernel 27: kernel 15's three consumer warpgroups at D = 64, with kernel 24's row sums by the tensor cores.
 *
 * Extends kernel 15 (kernel15_fp8.cu). The idea: kernel 24's, l_i = P times a column of ones, on the body that is
 * fastest at D = 64. Kernels 16, 17 and 24 run two consumer warpgroups taking turns at both D; at D = 64 kernel 15's
 * three warpgroups (192 query rows a block, 160 registers a thread) stay ahead of all of them. Here each k-step of
 * P V gets a second product beside it, wgmma m64n8k32 against a block of e4m3 1.0 (1 KB of shared memory, written
 * once), whose accumulator lacc holds l_i: rescaled by alpha with O, never added by the softmax, read at the end
 * without the quad's shuffles.
 * Everything else is kernel 15's (its loop, scales, V's permuted keys, 2^8 p), repeated on purpose so that make idea
 * K=27 reads as one idea; kernel 24's file (kernel24_fp8_tc_sum.cu) says why the sum of the e4m3 p is the right one.
 * Why: at D = 64 a tile's products are half of D = 128's and the softmax is the same: its 64 FADDs a thread a tile
 * (l += p) are a larger share of the issue slots, which is where kernel 24 gained most (+11-13% over kernel 17 at
 * D = 64 from N = 4096, +4-5% at D = 128).
 * What it costs: 4 small wgmma a tile (N = 8, 1/8 of P V's work at D = 64), 1 KB of shared memory, 2 registers.
 * Built only for sm_90a.
 * Measured: H200, D = 64, against kernel 15 in the same run (three runs): +1.1% to +1.5% at N = 4096 to 16384
 * (571-575, 632-633, 644-650 TFLOP/s); -2.9% at N = 512. Kernel 28 (kernel 24 on three warpgroups) is 1-2% faster
 * still. A tenth of
 * kernel 24's gain over kernel 17: kernel 15 waits out each product before its softmax, so its issue slots were not
 * the wall (Nsight Compute: 11.6% fewer instructions, 1.7% less time, the warps waiting longer instead). At D = 128
 * (two warpgroups) the extra products cost 3-6% against kernel 15, and kernel 24 stays the one to run there. The
 * runs and the profile: fp8/RESULTS.md#kernel-27.
 */
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>

#include "fp8.h"
#include "gpu.cuh"
#include "../primitives/tc.cuh"
#include "../primitives/tile_order.cuh"
#include "fp8.cuh"
#include "../primitives/tma_map.cuh"
#include "../primitives/wgmma.cuh"

// --- the kernel ------------------------------------------------------------------

template <int D> struct K27 {
    static constexpr int NWG = D == 64 ? 3 : 2;           // consumer warpgroups, 64 rows each (FP8_QBLOCK)
    static constexpr int BR = 64 * NWG, BC = FP8_KBLOCK, STAGES = 2;
    static constexpr int THREADS = 128 * (NWG + 1);       // + the producer warpgroup
    static constexpr int REG_PRODUCER = NWG == 2 ? 24 : 32, REG_CONSUMER = NWG == 2 ? 240 : 160;
    static constexpr int TILE = BC * D;                   // one K tile [BC][D] or V^T tile [D][BC], bytes
    static constexpr int ONES = 1024;                     // the block of ones: 8 rows (n) of 128 keys (k), e4m3 1.0
    static constexpr size_t bytes = 2 * STAGES * (size_t)TILE + ONES + 3 * 8 * STAGES + 1024; /* K, V^T; ones; mbarriers; alignment */
    static_assert(128 * REG_PRODUCER + 128 * NWG * REG_CONSUMER <= THREADS * ((65536 / THREADS) & ~7), "more than the block holds");
};

template <int D>
__global__ void __launch_bounds__(K27<D>::THREADS, 1)
kernel27_fp8(const uint8_t *__restrict__ Q,   // [B, H, N, D] e4m3
             __half *__restrict__ O,          // [B, H, N, D] fp16 or bf16
             const float *__restrict__ SQ,    // [B*H][nqb]: Q's scale per 64 rows
             const float *__restrict__ SK,    // [B*H][nkb]: K's scale per 128 keys (one tile)
             const float *__restrict__ SV,    // [B*H]: V's scale per head
             long N, long nqb, long nkb, long row_tiles, int causal, int out_bf16, float scale_log2,
             const __grid_constant__ CUtensorMap tm_k,   // K as [B*H][N][D] bytes
             const __grid_constant__ CUtensorMap tm_v)   // V^T as [B*H][D][Npad] bytes, keys permuted
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = K27<D>;
    constexpr int BC = C::BC, TILE = C::TILE, STAGES = C::STAGES;
    extern __shared__ unsigned char smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(smem_raw);  // 1024-aligned for the swizzle
    const uint32_t smem_addr = (raw_addr + 1023) & ~1023u;
    /* [K stage 0 .. STAGES-1][V^T stage 0 .. STAGES-1], TILE bytes each, the ones, then the mbarriers */
    const uint32_t ones = smem_addr + 2 * STAGES * TILE;
    const uint32_t full_k = ones + C::ONES, full_v = full_k + 8 * STAGES, empty = full_v + 8 * STAGES;

    long bh, tile;
    block_tile(row_tiles, causal, &bh, &tile);    // causal: longest first (tile_order.cuh)
    const long i0 = tile * C::BR;
    const long last_row = (i0 + C::BR < N ? i0 + C::BR : N) - 1;
    const long jend = causal ? last_row + 1 : N;
    const long ntiles = (jend + BC - 1) / BC;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full_k + 8 * s, 1);
            mbar_init(full_v + 8 * s, 1);
            mbar_init(empty + 8 * s, 4 * C::NWG);  // one arrival per consumer warp
        }
        fence_mbar_init();
    }
    for (int x = threadIdx.x; x < C::ONES / 4; x += C::THREADS)  // e4m3 1.0 is 0x38
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(ones + 4 * x), "r"(0x38383838u) : "memory");
    fence_proxy_async();                          // the tensor cores read the ones next
    __syncthreads();

    if (threadIdx.x < 128) {                      // the producer warpgroup: kernel 12's, V^T's box instead of V's
        setmaxnreg_dec<C::REG_PRODUCER>();
        if (threadIdx.x == 0) {
            for (long j = 0; j < ntiles; j++) {
                const int s = (int)(j % STAGES), use = (int)((j / STAGES) & 1);
                mbar_wait(empty + 8 * s, use ^ 1);
                const uint32_t k_dst = smem_addr + s * TILE, v_dst = smem_addr + (STAGES + s) * TILE;
                mbar_expect_tx(full_k + 8 * s, TILE);
                tma_load_3d(k_dst, &tm_k, 0, (int)(j * BC), (int)bh, full_k + 8 * s);      // BC keys x D bytes
                mbar_expect_tx(full_v + 8 * s, TILE);
                tma_load_3d(v_dst, &tm_v, (int)(j * BC), 0, (int)bh, full_v + 8 * s);      // D rows x BC keys
            }
        }
        return;
    }
    setmaxnreg_inc<C::REG_CONSUMER>();

    const uint8_t *Qh = Q + bh * N * D;
    const int warp = threadIdx.x / 32 - 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long warp_row0 = i0 + warp * 16;
    const long row_g = warp_row0 + g, row_g8 = row_g + 8;

    uint32_t qf[D / 32][4];                       // Q_i's FP8 A fragments (four bytes a register), rows past N as zeros
#pragma unroll
    for (int ks = 0; ks < D / 32; ks++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const long row = (r % 2) ? row_g8 : row_g;
            const int col = ks * 32 + 4 * t + 16 * (r / 2);
            qf[ks][r] = row < N ? *reinterpret_cast<const uint32_t *>(Qh + row * D + col) : 0u;
        }
    const long qb = i0 / 64 + warp / 4;                   // this warpgroup's 64 rows share one Q scale
    const float sq = SQ[bh * nqb + (qb < nqb ? qb : nqb - 1)];  // (a warpgroup wholly past N reads the last)

    float o[D / 2];
#pragma unroll
    for (int n = 0; n < D / 2; n++) o[n] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY};         // rows g and g + 8, log2 units
    float lacc[4] = {0.0f, 0.0f, 0.0f, 0.0f};     // l of rows g (0, 1) and g + 8 (2, 3): P's product with the ones

    for (long j = 0; j < ntiles; j++) {
        const long j0 = j * BC;
        const int st = (int)(j % STAGES), use = (int)((j / STAGES) & 1);
        const uint32_t k_addr = smem_addr + st * TILE, v_addr = smem_addr + (STAGES + st) * TILE;
        mbar_wait(full_k + 8 * st, use);

        float s[BC / 2];                          // S8 = Q8 K8^T, k = 32 bytes an instruction
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < D / 32; ks++) {
            const uint64_t desc = D == 128 ? make_desc(k_addr + ks * 32, 16, 1024) : make_desc_sw64(k_addr + ks * 32, 512);
            wgmma_fp8<BC>(s, qf[ks], desc, ks > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();

        const float sl2 = scale_log2 * sq * SK[bh * nkb + j];  // the tile's descale, folded into the softmax scale
        const bool need_mask = j0 + BC > N || (causal && j0 + BC - 1 > warp_row0);
        const int lim = (int)(N - j0 < BC ? N - j0 : BC);
        float mt[2] = {-INFINITY, -INFINITY};
        if (need_mask) {
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int c = n * 8 + 2 * t + (e % 2), d = (int)((e < 2 ? row_g : row_g8) - j0);
                    if (c >= lim || (causal && c > d)) s[4 * n + e] = -INFINITY;
                    mt[e / 2] = fmaxf(mt[e / 2], s[4 * n + e]);
                }
        } else {
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) mt[e / 2] = fmaxf(mt[e / 2], s[4 * n + e]);
        }
        float bse[2], alpha[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
#pragma unroll
            for (int off = 1; off <= 2; off *= 2) mt[h] = fmaxf(mt[h], __shfl_xor_sync(0xffffffffu, mt[h], off));
            const float mn = fmaxf(m[h], mt[h] * sl2);           // m_new = max(m, m_tile), log2 units
            const float base = mn == -INFINITY ? 0.0f : mn;      // nothing visible yet: 2^(-inf - 0) = 0
            alpha[h] = ex2(m[h] - base);                         // alpha = e^(m - m_new)
            bse[h] = base - FP8_P_SHIFT;                         // 2^8 p: p's exponent base lowered by 8
            m[h] = mn;
        }
#pragma unroll
        for (int x = 0; x < BC / 2; x++) s[x] = ex2(fmaf(s[x], sl2, -bse[x % 4 / 2])); // 2^8 p, in place
        uint32_t pf[BC / 32][4];                  // 2^8 p as FP8 A fragments: columns 2t, 2t+1, 2t+8, 2t+9 of each 16,
#pragma unroll                                    // which V's permuted keys make k = 4t .. 4t+3 (fp8_key_perm)
        for (int c = 0; c < BC / 32; c++) {
            const float *x = s + 16 * c;
            pf[c][0] = pack4_e4m3(x[0], x[1], x[4], x[5]);      // row g,   keys 32c + {2t, 2t+1, 8+2t, 9+2t}
            pf[c][1] = pack4_e4m3(x[2], x[3], x[6], x[7]);      // row g+8
            pf[c][2] = pack4_e4m3(x[8], x[9], x[12], x[13]);    // row g,   keys 32c + 16 + ...
            pf[c][3] = pack4_e4m3(x[10], x[11], x[14], x[15]);  // row g+8
        }
#pragma unroll
        for (int n = 0; n < D / 8; n++) {         // o = alpha o ...
            o[4 * n + 0] *= alpha[0]; o[4 * n + 1] *= alpha[0];
            o[4 * n + 2] *= alpha[1]; o[4 * n + 3] *= alpha[1];
        }
#pragma unroll
        for (int e = 0; e < 4; e++) lacc[e] *= alpha[e / 2];   // ... and l with it: l sits beside O

        mbar_wait(full_v + 8 * st, use);
        wgmma_fence();                            // ... + P V_j: V^T's rows are K-major, 32 keys a step
#pragma unroll
        for (int kk = 0; kk < BC / 32; kk++) {
            wgmma_fp8<D>(o, pf[kk], make_desc(v_addr + kk * 32, 16, 1024), 1);
            wgmma_fp8<8>(lacc, pf[kk], make_desc(ones, 16, 1024), 1);  // l += P_j's 32 keys times 1
        }
        wgmma_commit();
        wgmma_wait<0>();
        __syncwarp();
        if (lane == 0) mbar_arrive(empty + 8 * st);
    }

    __half *Oh = O + bh * N * D;
    const float sv = SV[bh];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const float lr = lacc[2 * h];                            // every column of P times ones is the whole row's l
        const float inv = lr > 0.0f ? sv / lr : 0.0f;            // O = o s_v / l
        const long row = h ? row_g8 : row_g;
        if (row < N) {
#pragma unroll
            for (int n = 0; n < D / 8; n++)
                *reinterpret_cast<uint32_t *>(Oh + row * D + n * 8 + 2 * t) =
                    pack_o2(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv, out_bf16);
        }
    }
#else
    (void)Q, (void)O, (void)SQ, (void)SK, (void)SV, (void)N, (void)nqb, (void)nkb, (void)row_tiles, (void)causal, (void)out_bf16,
        (void)scale_log2, (void)tm_k, (void)tm_v;
#endif
}

// --- the launcher -------------------------------------------------------------------

static int k27_launch(const Fp8Args *a, void *stream)
{
    if (wgmma_refused()) return -1;
    if (a->D == 64) return fp8_launch_d<K27<64>, 64>(kernel27_fp8<64>, 27, a, (cudaStream_t)stream);
    if (a->D == 128) return fp8_launch_d<K27<128>, 128>(kernel27_fp8<128>, 27, a, (cudaStream_t)stream);
    fprintf(stderr, "%s: kernel 27 takes D = 64 or 128, not %ld\n", g_prog, a->D);
    return -1;
}

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
