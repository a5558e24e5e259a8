/*
 * Kernel 15: kernel 12 in FP8: Q, K and V stored as e4m3 bytes, both products on the tensor cores' FP8 path.
 *
 * Extends kernel 12 (../forward/kernel12_warp_specialized.cu). The idea: store a byte per element and let the tensor
 * cores multiply bytes: wgmma.m64nNk32.e4m3 takes k = 32 an instruction where 16 bits take k = 16. fp8.c's header says
 * what FP8 demands; here is where each demand lands:
 *   - Q, K, V arrive as e4m3 bytes with scales (fp8_quantize): S8 = Q8 K8^T accumulates in fp32 on
 *     wgmma.m64nNk32.e4m3, and the scales come back once per tile, folded into the softmax's
 *     scale: sl2 = log2(e)/sqrt(D) s_q s_k(j), the same one multiply-add per score as before.
 *   - P is written to e4m3 in registers (cvt.rn.satfinite.e4m3x2, two scores an instruction). That works because of
 *     the running max: p = 2^(s - m) lies in [0, 1] whatever the scores, so e4m3 rounds each weight by at most 2^-4
 *     of itself (the scores could not be stored so: S rounds by 2^-4 of itself, at a score of 100 +-4, a factor of
 *     e^4 on p; step 07's break it in FP8, 07_break_it/break_fp8.c, measures both). It is stored as 2^8 p, by
 *     subtracting m - 8 instead of m: free, and e4m3's flush to zero moves from p < 2^-10 to p < 2^-18.
 *   - The second product takes P straight from those registers: S's accumulator gives a thread columns
 *     2t, 2t+1, 2t+8, 2t+9 of every 16 where the FP8 A operand wants 4t .. 4t+3, and instead of trading
 *     bytes between threads the quantizer stores V's keys in that order (fp8_key_perm), so the four bytes a
 *     thread packs are, for the tensor cores, four consecutive keys.
 *   - V is stored transposed, [D, N]: for 8-bit types wgmma reads B only K-major, keys along the row. A V^T
 *     tile is D rows of 128 keys, 128 bytes: the same swizzled layout as a 16-bit K tile of D = 64, so the
 *     descriptors are kernel 12's. K at D = 128 is 128 bytes a row too; at D = 64 it is 64 bytes a row and
 *     lands in the 64-byte swizzle (make_desc_sw64).
 *   - O = o s_v / l, written in fp16 or bf16.
 * Everything else is kernel 12's, repeated on purpose so the file reads alone (make idea K=15 shows the changes).
 * Why: the two products are most of a tile's work, and the tensor cores run e4m3 at twice the 16-bit rate (on the
 * H100, cublasLt's e4m3 GEMM 1487 TFLOP/s against cuBLAS's fp16 755).
 * What it costs: the quantizer's pass over Q, K, V (fp8_quantize, or fp8_quantize_gpu for Q and K; the kernels' times
 * leave it out, as FlashAttention-3's benchmark takes FP8 inputs), V stored transposed, and accuracy: e4m3's 3-bit
 * mantissa gives an RMS error of about 2.7e-3 on Gaussian inputs where fp16 storage gives 2.2e-5 (the table of
 * ./step05 --dtype fp8 --errors). Built only for sm_90a.
 * Measured: H200, N = 4096: 735.9 TFLOP/s at D = 128, 1.14x kernel 14 in fp16 (kernel 12, which it extends, is slower
 * than 14), 560.8 at D = 64, 1.24x; the runs, checks and profile: fp8/RESULTS.md#kernel-15.
 *
 * The body, kernel15_fp8<D, P>, is kernel 27's too: Fp8Plain holds kernel 15's code for the two things kernel 27
 * changes, shared memory of its own (SMEM, init_smem) and how the row sums l are kept (RowSums).
 */
#ifndef RUNG
#define RUNG 15          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
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

template <int D, class P> struct K15 {
    static constexpr int NWG = D == 64 ? 3 : 2;           // consumer warpgroups, 64 rows each (FP8_QBLOCK)
    static constexpr bool PERSISTENT = false;             // a block per work item
    static constexpr bool O_BY_TMA = false;               // O stored by the threads
    static constexpr int BR = 64 * NWG, BC = FP8_KBLOCK, STAGES = 2;
    static constexpr int VBOX = BC;                       // keys a V^T box holds: the tile, one 128-byte-swizzled row
    static constexpr int THREADS = 128 * (NWG + 1);       // + the producer warpgroup
    static constexpr int REG_PRODUCER = NWG == 2 ? 24 : 32, REG_CONSUMER = NWG == 2 ? 240 : 160;
    static constexpr int TILE = BC * D;                   // one K tile [BC][D] or V^T tile [D][BC], bytes
    static constexpr size_t bytes = 2 * STAGES * (size_t)TILE + P::SMEM + 3 * 8 * STAGES + 1024; /* K, V^T; P's; mbarriers; alignment */
    static_assert(128 * REG_PRODUCER + 128 * NWG * REG_CONSUMER <= THREADS * ((65536 / THREADS) & ~7), "more than the block holds");
};

/* Kernel 15's hooks, with kernel 15's code in them; kernel 27's policy replaces them. */
struct Fp8Plain {
    /* Shared memory of the policy's own, bytes, after K's and V^T's stages (1024-aligned): none. */
    static constexpr int SMEM = 0;
    /* Every thread, before the loop: fill that shared memory (at smem). Nothing here. */
    template <int THREADS> __device__ static __forceinline__ void init_smem(uint32_t smem) { (void)smem; }
    /* The row sums l of rows g and g + 8: the softmax adds them after its exponentials (sum), Fp8QuadSums (fp8.cuh)
     * keeps them. */
    struct RowSums : Fp8QuadSums {
        template <int BC> __device__ __forceinline__ void sum(const float *s)  // after the exponentials
        {
            ls[0] = 0.0f, ls[1] = 0.0f;
#pragma unroll
            for (int n = 0; n < BC / 8; n++) { ls[0] += s[4 * n] + s[4 * n + 1]; ls[1] += s[4 * n + 2] + s[4 * n + 3]; }
        }
        __device__ __forceinline__ void update(const float alpha[2]) { fold(alpha); }  // before O's rescale
    };
};

template <int D, class P>
__global__ void __launch_bounds__(K15<D, P>::THREADS, 1)
kernel15_fp8(const uint8_t *__restrict__ Q,   // [B, H, N, D] e4m3
             __half *__restrict__ O,          // [B, H, N, D] fp16 or bf16
             const float *__restrict__ SQ,    // [B*H][nqb]: Q's scale per 64 rows
             const float *__restrict__ SK,    // [B*H][nkb]: K's scale per 128 keys (one tile)
             const float *__restrict__ SV,    // [B*H]: V's scale per head
             long N, long nqb, long nkb, long row_tiles, int causal, int out_bf16, float scale_log2,
             const __grid_constant__ CUtensorMap tm_k,   // K as [B*H][N][D] bytes
             const __grid_constant__ CUtensorMap tm_v,   // V^T as [B*H][D][Npad] bytes, keys permuted
             long items,                                 // work items (B*H*row_tiles): the grid, one block each
             const __grid_constant__ CUtensorMap tm_o)   // O as [B*H][N][D], boxes of 16 rows: O_BY_TMA only
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = K15<D, P>;
    constexpr int BC = C::BC, TILE = C::TILE, STAGES = C::STAGES;
    extern __shared__ unsigned char smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(smem_raw);  // 1024-aligned for the swizzle
    const uint32_t smem_addr = (raw_addr + 1023) & ~1023u;
    /* [K stage 0 .. STAGES-1][V^T stage 0 .. STAGES-1], TILE bytes each, P's own (P::SMEM bytes), the mbarriers */
    const uint32_t own = smem_addr + 2 * STAGES * TILE;
    const uint32_t full_k = own + P::SMEM, full_v = full_k + 8 * STAGES, empty = full_v + 8 * STAGES;

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
    P::template init_smem<C::THREADS>(own);
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
    typename P::RowSums l;                        // l of rows g and g + 8, as P keeps it

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
        l.template sum<BC>(s);
        uint32_t pf[BC / 32][4];                  // 2^8 p as FP8 A fragments: columns 2t, 2t+1, 2t+8, 2t+9 of each 16,
#pragma unroll                                    // which V's permuted keys make k = 4t .. 4t+3 (fp8_key_perm)
        for (int c = 0; c < BC / 32; c++) {
            const float *x = s + 16 * c;
            pf[c][0] = pack4_e4m3(x[0], x[1], x[4], x[5]);      // row g,   keys 32c + {2t, 2t+1, 8+2t, 9+2t}
            pf[c][1] = pack4_e4m3(x[2], x[3], x[6], x[7]);      // row g+8
            pf[c][2] = pack4_e4m3(x[8], x[9], x[12], x[13]);    // row g,   keys 32c + 16 + ...
            pf[c][3] = pack4_e4m3(x[10], x[11], x[14], x[15]);  // row g+8
        }
        l.update(alpha);
#pragma unroll
        for (int n = 0; n < D / 8; n++) {         // o = alpha o ...
            o[4 * n + 0] *= alpha[0]; o[4 * n + 1] *= alpha[0];
            o[4 * n + 2] *= alpha[1]; o[4 * n + 3] *= alpha[1];
        }
        l.rescale(alpha);

        mbar_wait(full_v + 8 * st, use);
        wgmma_fence();                            // ... + P V_j: V^T's rows are K-major, 32 keys a step
#pragma unroll
        for (int kk = 0; kk < BC / 32; kk++) {
            wgmma_fp8<D>(o, pf[kk], make_desc(v_addr + kk * 32, 16, 1024), 1);
            l.pv(pf[kk], own);                    // P's product beside it, if any
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
        const float lr = l.total(h);
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
        (void)scale_log2, (void)tm_k, (void)tm_v, (void)items, (void)tm_o;
#endif
}

// --- the launcher -------------------------------------------------------------------

/* Kernel 15's launcher, with P's kernel: kernel 27 launches its with it too. */
template <class P> static int fp8_plain_launch(int id, const Fp8Args *a, void *stream)
{
    if (wgmma_refused()) return -1;
    if (a->D == 64) return fp8_launch_d<K15<64, P>, 64>(kernel15_fp8<64, P>, id, a, (cudaStream_t)stream);
    if (a->D == 128) return fp8_launch_d<K15<128, P>, 128>(kernel15_fp8<128, P>, id, a, (cudaStream_t)stream);
    fprintf(stderr, "%s: kernel %d takes D = 64 or 128, not %ld\n", g_prog, id, a->D);
    return -1;
}

#if RUNG == 15
extern "C" const char *fp8_unavailable(void) { return wgmma_unavailable(); }

static int k15_launch(const Fp8Args *a, void *stream) { return fp8_plain_launch<Fp8Plain>(15, a, stream); }

static void k15_describe(long D, char *buf, size_t n)
{
    const int nwg = D == 64 ? K15<64, Fp8Plain>::NWG : K15<128, Fp8Plain>::NWG;
    snprintf(buf, n, "1 producer + %d consumer warpgroups, BR=%d BC=%d, e4m3 wgmma k=32, %zu bytes of shared memory", nwg,
             64 * nwg, K15<64, Fp8Plain>::BC, D == 64 ? K15<64, Fp8Plain>::bytes : K15<128, Fp8Plain>::bytes);
}

static const Fp8Kernel kernel15 = {
    .id = 15, .extends = 12, .name = "fp8",
    .idea = "Q, K, V in FP8 (e4m3) with scales: both products on wgmma's k = 32 FP8 path, twice the 16-bit rate",
    .launch = k15_launch, .describe = k15_describe, .unavailable = fp8_unavailable,
};
FP8_REGISTER(kernel15);
#endif
