/*
 * fp8_pingpong.cuh: the FP8 forward of kernels 16, 17 and 24 written once (as overlap.cuh is kernels 13 and 14's):
 * kernel 15's FP8 products, scales, V's permuted layout and 2^8 p on kernel 14's schedule, the softmax of
 * tile j under P_{j-1} V_{j-1} and the two consumer warpgroups taking turns (kernel 16's idea, its header
 * says it); with POLY > 0, POLY of every 16 exponentials computed on the FMA pipes by ex2_fma instead of the
 * MUFU (kernel 17's); with TC_SUM, the row sums l by the tensor cores beside P V (kernel 24's). Built only for
 * sm_90a.
 */
#ifndef FP8_PINGPONG_CUH
#define FP8_PINGPONG_CUH

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

/* Kernel 17's idea: 2^x on the FMA and ALU pipes, fp8_exp2_poly's transcription (fp8.c; kernel17_fp8_split_exp.cu
 * says why): x clamped to -127, where the result is 0 (as ex2.approx.ftz gives); a NaN stays NaN (max.NaN
 * keeps it, the last multiply carries it). */
__device__ __forceinline__ float ex2_fma(float x)
{
    asm("max.NaN.f32 %0, %0, 0fC2FE0000;\n" : "+f"(x));          // x = max(x, -127)
    const float t = __fadd_rd(x, 12582912.0f);                     // 1.5 * 2^23 + floor(x), exactly
    const float fl = t - 12582912.0f;                              // floor(x)
    const float f = x - fl;                                        // in [0, 1)
    float p = fmaf(FP8_EXP2_C3, f, FP8_EXP2_C2);                   // 2^f, the cubic of fp8.h
    p = fmaf(p, f, FP8_EXP2_C1);
    p = fmaf(p, f, FP8_EXP2_C0);
    const float two_fl = __uint_as_float((__float_as_uint(t) << 23) + 0x3f800000u);  // 2^floor(x); 0 at -127
    return p * two_fl;
}

// --- the kernel ------------------------------------------------------------------

/* POLY: of every 16 scores a thread holds, how many take ex2_fma (the rest: ex2, the MUFU). TC_SUM (kernel 24):
 * the row sums l by the tensor cores, P times a block of ones, in place of the softmax's adds. */
template <int D, int POLY_, bool TC_SUM_ = false> struct Fp8PP {
    static constexpr int POLY = POLY_;
    static constexpr bool TC_SUM = TC_SUM_;
    static constexpr int NWG = 2;                         // consumer warpgroups, 64 rows each (FP8_QBLOCK)
    static constexpr int BR = 64 * NWG, BC = FP8_KBLOCK, STAGES = 2;
    static constexpr int THREADS = 128 * (NWG + 1);       // + the producer warpgroup
    static constexpr int REG_PRODUCER = 24, REG_CONSUMER = 240;
    static constexpr int TILE = BC * D;                   // one K tile [BC][D] or V^T tile [D][BC], bytes
    static constexpr int ONES = TC_SUM ? 1024 : 0;  // kernel 24's block of ones: 8 rows of 128 e4m3 1.0
    static constexpr size_t bytes = 2 * STAGES * (size_t)TILE + ONES + 4 * 8 * STAGES + 1024; /* K, V^T; ones; mbarriers; alignment */
    static_assert(128 * REG_PRODUCER + 128 * NWG * REG_CONSUMER <= THREADS * ((65536 / THREADS) & ~7), "more than the block holds");
    static_assert(POLY >= 0 && POLY <= 16, "POLY of every 16 scores");
};

template <int D, int POLY, bool TC_SUM = false>
__global__ void __launch_bounds__(Fp8PP<D, POLY, TC_SUM>::THREADS, 1)
fp8_pingpong(const uint8_t *__restrict__ Q,   // [B, H, N, D] e4m3
             __half *__restrict__ O,          // [B, H, N, D] fp16 or bf16
             const float *__restrict__ SQ,    // [B*H][nqb]
             const float *__restrict__ SK,    // [B*H][nkb]
             const float *__restrict__ SV,    // [B*H]
             long N, long nqb, long nkb, long row_tiles, int causal, int out_bf16, float scale_log2,
             const __grid_constant__ CUtensorMap tm_k,   // K as [B*H][N][D] bytes
             const __grid_constant__ CUtensorMap tm_v)   // V^T as [B*H][D][Npad] bytes, keys permuted
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = Fp8PP<D, POLY, TC_SUM>;
    constexpr int BC = C::BC, TILE = C::TILE, STAGES = C::STAGES;
    extern __shared__ unsigned char smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(smem_raw);
    const uint32_t smem_addr = (raw_addr + 1023) & ~1023u;
    const uint32_t ones = smem_addr + 2 * STAGES * TILE;  // kernel 24's ones (C::ONES bytes, 1024-aligned)
    const uint32_t full_k = ones + C::ONES, full_v = full_k + 8 * STAGES;
    const uint32_t empty_k = full_v + 8 * STAGES, empty_v = empty_k + 8 * STAGES;

    long bh, tile;
    block_tile(row_tiles, causal, &bh, &tile);
    const long i0 = tile * C::BR;
    const long last_row = (i0 + C::BR < N ? i0 + C::BR : N) - 1;
    const long jend = causal ? last_row + 1 : N;
    const long ntiles = (jend + BC - 1) / BC;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full_k + 8 * s, 1);
            mbar_init(full_v + 8 * s, 1);
            mbar_init(empty_k + 8 * s, 4 * C::NWG);
            mbar_init(empty_v + 8 * s, 4 * C::NWG);
        }
        fence_mbar_init();
    }
    if (TC_SUM) {                                 // e4m3 1.0 is 0x38; the tensor cores read it next
        for (int x = threadIdx.x; x < C::ONES / 4; x += C::THREADS)
            asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(ones + 4 * x), "r"(0x38383838u) : "memory");
        fence_proxy_async();
    }
    __syncthreads();

    if (threadIdx.x < 128) {                      // the producer: K_j and V^T_j released apart (overlap.cuh)
        setmaxnreg_dec<C::REG_PRODUCER>();
        if (threadIdx.x == 0) {
            for (long j = 0; j < ntiles; j++) {
                const int s = (int)(j % STAGES), use = (int)((j / STAGES) & 1);
                const uint32_t k_dst = smem_addr + s * TILE, v_dst = smem_addr + (STAGES + s) * TILE;
                mbar_wait(empty_k + 8 * s, use ^ 1);
                mbar_expect_tx(full_k + 8 * s, TILE);
                tma_load_3d(k_dst, &tm_k, 0, (int)(j * BC), (int)bh, full_k + 8 * s);
                mbar_wait(empty_v + 8 * s, use ^ 1);
                mbar_expect_tx(full_v + 8 * s, TILE);
                tma_load_3d(v_dst, &tm_v, (int)(j * BC), 0, (int)bh, full_v + 8 * s);
            }
        }
        return;
    }
    setmaxnreg_inc<C::REG_CONSUMER>();

    const uint8_t *Qh = Q + bh * N * D;
    const int warp = threadIdx.x / 32 - 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long warp_row0 = i0 + warp * 16;
    const long row_g = warp_row0 + g, row_g8 = row_g + 8;

    uint32_t qf[D / 32][4];
#pragma unroll
    for (int ks = 0; ks < D / 32; ks++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const long row = (r % 2) ? row_g8 : row_g;
            const int col = ks * 32 + 4 * t + 16 * (r / 2);
            qf[ks][r] = row < N ? *reinterpret_cast<const uint32_t *>(Qh + row * D + col) : 0u;
        }
    const long qb = i0 / 64 + warp / 4;
    const float sq = SQ[bh * nqb + (qb < nqb ? qb : nqb - 1)];

    float o[D / 2];
#pragma unroll
    for (int n = 0; n < D / 2; n++) o[n] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float lacc[4] = {0.0f, 0.0f, 0.0f, 0.0f};    // kernel 24: l of rows g (0, 1) and g + 8 (2, 3), by the tensor cores

    float s[BC / 2];                              // S_j, then 2^8 p_j as floats
    uint32_t pf[BC / 32][4];                      // 2^8 p_{j-1} as FP8 A fragments of O += P V
    auto stage = [&](long j, uint32_t base) { return base + 8 * (uint32_t)(j % STAGES); };
    auto parity = [&](long j) { return (int)((j / STAGES) & 1); };
    auto issue_s = [&](long j) {                  // S8_j = Q8 K8_j^T, issued, not waited for
        const uint32_t k_addr = smem_addr + (uint32_t)(j % STAGES) * TILE;
        mbar_wait(stage(j, full_k), parity(j));
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < D / 32; ks++) {
            const uint64_t desc = D == 128 ? make_desc(k_addr + ks * 32, 16, 1024) : make_desc_sw64(k_addr + ks * 32, 512);
            wgmma_fp8<BC>(s, qf[ks], desc, ks > 0);
        }
        wgmma_commit();
    };
    auto issue_pv = [&](long j) {                 // O += P_j V_j, issued, not waited for
        const uint32_t v_addr = smem_addr + (uint32_t)(STAGES + j % STAGES) * TILE;
        mbar_wait(stage(j, full_v), parity(j));
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BC / 32; kk++) {
            wgmma_fp8<D>(o, pf[kk], make_desc(v_addr + kk * 32, 16, 1024), 1);
            if (TC_SUM) wgmma_fp8<8>(lacc, pf[kk], make_desc(ones, 16, 1024), 1);  // l += P_j's 32 keys times 1
        }
        wgmma_commit();
    };
    auto release = [&](uint32_t bar) {
        __syncwarp();
        if (lane == 0) mbar_arrive(bar);
    };
    auto softmax = [&](long j, float alpha[2]) {  // kernel 15's softmax of S_j: m, l updated, 2^8 p_j left in s
        const long j0 = j * BC;
        const float sl2 = scale_log2 * sq * SK[bh * nkb + j];
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
        float bse[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
#pragma unroll
            for (int off = 1; off <= 2; off *= 2) mt[h] = fmaxf(mt[h], __shfl_xor_sync(0xffffffffu, mt[h], off));
            const float mn = fmaxf(m[h], mt[h] * sl2);
            const float base = mn == -INFINITY ? 0.0f : mn;
            alpha[h] = ex2(m[h] - base);
            bse[h] = base - FP8_P_SHIFT;
            m[h] = mn;
        }
        float ls[2] = {0.0f, 0.0f};
#pragma unroll
        for (int x = 0; x < BC / 2; x++) {
            const float y = fmaf(s[x], sl2, -bse[x % 4 / 2]);
            if (x % 16 < POLY) {                          // kernel 17: POLY of every 16 on the FMA and ALU pipes
                s[x] = ex2_fma(y);
            } else {                                      // the rest (all of kernel 16's) on the MUFU
                s[x] = ex2(y);
            }
            if (!TC_SUM) ls[x % 4 / 2] += s[x];           // kernel 24: not here, by P V's next products
        }
        if (!TC_SUM) {
#pragma unroll
            for (int h = 0; h < 2; h++) l[h] = alpha[h] * l[h] + ls[h];
        }
    };
    auto rescale_and_pack = [&](const float alpha[2]) {  // O *= alpha_j; 2^8 p_j into pf, kernel 15's key order
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            o[4 * n + 0] *= alpha[0]; o[4 * n + 1] *= alpha[0];
            o[4 * n + 2] *= alpha[1]; o[4 * n + 3] *= alpha[1];
        }
        if (TC_SUM) {                             // l is scaled as O is: it sits beside O in P V's accumulators
#pragma unroll
            for (int e = 0; e < 4; e++) lacc[e] *= alpha[e / 2];
        }
#pragma unroll
        for (int c = 0; c < BC / 32; c++) {
            const float *x = s + 16 * c;
            pf[c][0] = pack4_e4m3(x[0], x[1], x[4], x[5]);
            pf[c][1] = pack4_e4m3(x[2], x[3], x[6], x[7]);
            pf[c][2] = pack4_e4m3(x[8], x[9], x[12], x[13]);
            pf[c][3] = pack4_e4m3(x[10], x[11], x[14], x[15]);
        }
    };

    const int wg = warp / 4;                      // kernel 14's turns: named barriers 1 and 2
    auto my_turn = [&]() { asm volatile("bar.sync %0, 256;\n" ::"r"(1 + wg) : "memory"); };
    auto your_turn = [&]() { asm volatile("bar.arrive %0, 256;\n" ::"r"(1 + (wg ^ 1)) : "memory"); };
    if (wg == 1) your_turn();

    float alpha[2];
    my_turn();
    issue_s(0);
    your_turn();
    wgmma_wait<0>();
    release(stage(0, empty_k));
    softmax(0, alpha);
    rescale_and_pack(alpha);
    for (long j = 1; j < ntiles; j++) {
        my_turn();
        issue_s(j);                               // S_j ...
        issue_pv(j - 1);                          // ... and O += P_{j-1} V_{j-1} behind it
        your_turn();
        wgmma_wait<1>();                          // S_j is in; P V still running
        release(stage(j, empty_k));
        softmax(j, alpha);                        // under P_{j-1} V_{j-1}
        wgmma_wait<0>();
        release(stage(j - 1, empty_v));
        rescale_and_pack(alpha);
    }
    my_turn();
    issue_pv(ntiles - 1);
    if (wg == 0) your_turn();
    wgmma_wait<0>();
    release(stage(ntiles - 1, empty_v));

    __half *Oh = O + bh * N * D;
    const float sv = SV[bh];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float lr = TC_SUM ? lacc[2 * h] : l[h];   // kernel 24's is the whole row's already
        if (!TC_SUM) {
#pragma unroll
            for (int off = 1; off <= 2; off *= 2) lr += __shfl_xor_sync(0xffffffffu, lr, off);
        }
        const float inv = lr > 0.0f ? sv / lr : 0.0f;
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

#endif
