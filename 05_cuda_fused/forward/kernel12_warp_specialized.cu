/*
 * Kernel 12: kernel 11 split into a producer and consumers (warp specialisation).
 *
 * Extends kernel 11 (kernel11_tma.cu). The idea: give the loads and the arithmetic to different warps, and let nothing
 * wait for the whole block. Here the block has one more warpgroup, the producer, whose one thread does nothing but
 * issue the copies of K_j and V_j into a ring of STAGES buffers; the consumer warpgroups only compute. They talk
 * through mbarriers, per stage s:
 *   full_k[s], full_v[s]: the copy engine's bytes of K_j, V_j have landed
 *                         (the producer's expect_tx, the TMA's complete_tx);
 *   empty[s]:             every consumer warp has finished reading the stage
 *                         (one arrival per warp after its P V_j is done).
 * A consumer waits only for its own data: K_j before S = Q_i K_j^T, V_j only before P V_j, so V_j's copy hides behind
 * the softmax. No warp waits at a barrier for the other consumer warpgroups; they are coupled only through the ring (a
 * stage is refilled once all have released it), and the producer runs up to STAGES tiles ahead.
 *
 * What it makes possible: the producer needs few registers and the consumers many. setmaxnreg moves them: the
 * producer warpgroup drops to 24 (32 with three consumer warpgroups) and the consumers rise to 240 (160): the whole of
 * the block's registers (384 x 168 = 64512; 512 x 128 = 65536) goes where the work is. With 240 a thread holds a
 * 64 x 128 tile of S at D = 128 beside its O (kernel 11 at 168 could hold only BC = 64): BC = 128 at both D, so half
 * as many tiles, mbarrier waits and softmax rescales per row at D = 128. The shapes are FlashAttention-3's: D = 64,
 * three consumer warpgroups (BR = 192) at 160 registers; D = 128, two (BR = 128) at 240.
 *
 * Why: in kernel 11 every warp computes, thread 0 also issues the copies, and each K/V tile ends with a block-wide
 * barrier (__syncthreads) before its buffer may be refilled: the three warpgroups wait for the slowest of them once
 * per tile, and an Nsight Compute run of kernel 11 put a third of the cycles between two issued instructions at a
 * block-wide barrier (RESULTS.md#kernel-12).
 *
 * What it costs: a fourth warpgroup that computes nothing (128 threads of which one issues), three mbarriers per stage
 * instead of one, and the parities to track (the empty barriers start "already released": the producer's first wait
 * on each passes at once, parity 1 of a fresh barrier). Everything else is kernel 11's, repeated on purpose so the
 * file reads alone. Built only for sm_90a, like kernels 10 and 11.
 *
 * Measured: H100, fp16, N = 4096, interleaved with kernel 11: +29% at D = 64 (463.9 TFLOP/s), +21% at D = 128 (539.7);
 * causal +23% and +16%; the runs and cuDNN beside them: RESULTS.md#kernel-12.
 */
#include <cmath>

#include "gpu.cuh"
#include "../kernels.h"
#include "launch_tc.cuh"
#include "../primitives/tc.cuh"
#include "../primitives/tile_order.cuh"
#include "../primitives/tma_map.cuh"
#include "../primitives/wgmma.cuh"

// --- the kernel ------------------------------------------------------------------

template <int D> struct K12 {
    static constexpr int NWG = D == 64 ? 3 : 2;           // consumer warpgroups, 64 rows each
    static constexpr int BR = 64 * NWG, BC = 128, STAGES = 2;
    static constexpr int THREADS = 128 * (NWG + 1);       // + the producer warpgroup
    static constexpr int REG_PRODUCER = NWG == 2 ? 24 : 32, REG_CONSUMER = NWG == 2 ? 240 : 160;
    static constexpr int TILE = BC * D * 2;               // one K or V tile, bytes
    static constexpr size_t bytes = 2 * STAGES * (size_t)TILE + 3 * 8 * STAGES + 1024; /* K, V; mbarriers; alignment */
    /* setmaxnreg moves registers inside the block's own allocation, fixed at launch: THREADS x (65536 / THREADS,
     * rounded down to 8), 64 K at D = 64 (512 threads x 128), 64512 at D = 128 (384 x 168) */
    static_assert(128 * REG_PRODUCER + 128 * NWG * REG_CONSUMER <= THREADS * ((65536 / THREADS) & ~7), "more than the block holds");
};

template <int D, typename T>
__global__ void __launch_bounds__(K12<D>::THREADS, 1)
kernel12_warp_specialized(const T *__restrict__ Q,  // [B, H, N, D]
               T *__restrict__ O,        // [B, H, N, D]
               float *__restrict__ L,    // [B, H, N] or NULL: L = m + log l per row, for the backward
               long N, long row_tiles, int causal, float scale_log2,
               const __grid_constant__ CUtensorMap tm_k,  // K, V as [B*H][N][D] for the copy engine
               const __grid_constant__ CUtensorMap tm_v)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = K12<D>;
    constexpr int BC = C::BC, TILE = C::TILE, STAGES = C::STAGES;
    extern __shared__ unsigned char smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(smem_raw);  // 1024-aligned for the swizzle
    const uint32_t smem_addr = (raw_addr + 1023) & ~1023u;
    /* [K stage 0 .. STAGES-1][V stage 0 .. STAGES-1], TILE bytes each, then
     * the mbarriers full_k[STAGES], full_v[STAGES], empty[STAGES], 8 bytes each */
    const uint32_t full_k = smem_addr + 2 * STAGES * TILE, full_v = full_k + 8 * STAGES, empty = full_v + 8 * STAGES;

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
    __syncthreads();                              // the last block-wide barrier of the kernel

    if (threadIdx.x < 128) {
        /* The producer warpgroup: registers back to the pool, then one thread
         * walks the K/V tiles. Tile j goes to stage j % STAGES once every
         * consumer warp has released that stage's previous tile, j - STAGES. */
        setmaxnreg_dec<C::REG_PRODUCER>();
        if (threadIdx.x == 0) {
            for (long j = 0; j < ntiles; j++) {
                const int s = (int)(j % STAGES), use = (int)((j / STAGES) & 1);
                mbar_wait(empty + 8 * s, use ^ 1);     // first use of a stage: passes at once
                const uint32_t k_dst = smem_addr + s * TILE, v_dst = smem_addr + (STAGES + s) * TILE;
                mbar_expect_tx(full_k + 8 * s, TILE);
#pragma unroll
                for (int blk = 0; blk < D / 64; blk++)
                    tma_load_3d(k_dst + blk * BC * 128, &tm_k, blk * 64, (int)(j * BC), (int)bh, full_k + 8 * s);
                mbar_expect_tx(full_v + 8 * s, TILE);
#pragma unroll
                for (int blk = 0; blk < D / 64; blk++)
                    tma_load_3d(v_dst + blk * BC * 128, &tm_v, blk * 64, (int)(j * BC), (int)bh, full_v + 8 * s);
            }
        }
        return;
    }
    setmaxnreg_inc<C::REG_CONSUMER>();

    /* A consumer warp: kernel 11's loop on its 16 rows. */
    const T *Qh = Q + bh * N * D;
    const int warp = threadIdx.x / 32 - 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long warp_row0 = i0 + warp * 16;        // consumer warpgroup warp/4, its warp warp%4
    const long row_g = warp_row0 + g, row_g8 = row_g + 8;

    uint32_t qf[D / 16][4];                       // Q_i's A fragments, rows past N as zeros
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const long row = (r % 2) ? row_g8 : row_g;
            const int col = ks * 16 + 2 * t + 8 * (r / 2);
            qf[ks][r] = row < N ? *reinterpret_cast<const uint32_t *>(Qh + row * D + col) : 0u;
        }

    float o[D / 2];
#pragma unroll
    for (int n = 0; n < D / 2; n++) o[n] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g and g + 8, log2 units

    for (long j = 0; j < ntiles; j++) {
        const long j0 = j * BC;
        const int st = (int)(j % STAGES), use = (int)((j / STAGES) & 1);
        const uint32_t k_addr = smem_addr + st * TILE, v_addr = smem_addr + (STAGES + st) * TILE;
        mbar_wait(full_k + 8 * st, use);          // K_j has landed

        float s[BC / 2];                          // S = Q_i K_j^T
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            const uint64_t desc = make_desc(k_addr + (ks / 4) * BC * 128 + (ks % 4) * 32, 16, 1024);
            wgmma_m64n128k16<T, 0>(s, qf[ks], desc, ks > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();

        /* Kernel 9's softmax, on this warp's 16 rows. */
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
            const float mn = fmaxf(m[h], mt[h] * scale_log2);   // m_new = max(m, m_tile), log2 units
            bse[h] = mn == -INFINITY ? 0.0f : mn;                // nothing visible yet: 2^(-inf - 0) = 0
            alpha[h] = ex2(m[h] - bse[h]);                       // alpha = e^(m - m_new)
            m[h] = mn;
        }
        uint32_t pf[BC / 16][4];                  // p_tile as A fragments of O = P V
        float ls[2] = {0.0f, 0.0f};
#pragma unroll
        for (int n = 0; n < BC / 8; n++) {
            const float p0 = ex2(fmaf(s[4 * n + 0], scale_log2, -bse[0])), p1 = ex2(fmaf(s[4 * n + 1], scale_log2, -bse[0]));
            const float p2 = ex2(fmaf(s[4 * n + 2], scale_log2, -bse[1])), p3 = ex2(fmaf(s[4 * n + 3], scale_log2, -bse[1]));
            ls[0] += p0 + p1;
            ls[1] += p2 + p3;
            pf[n / 2][(n % 2) * 2 + 0] = pack2<T>(p0, p1);
            pf[n / 2][(n % 2) * 2 + 1] = pack2<T>(p2, p3);
        }
#pragma unroll
        for (int h = 0; h < 2; h++) l[h] = alpha[h] * l[h] + ls[h];
#pragma unroll
        for (int n = 0; n < D / 8; n++) {         // o = alpha o ...
            o[4 * n + 0] *= alpha[0]; o[4 * n + 1] *= alpha[0];
            o[4 * n + 2] *= alpha[1]; o[4 * n + 3] *= alpha[1];
        }

        mbar_wait(full_v + 8 * st, use);          // V_j has landed (its copy ran during the softmax)
        wgmma_fence();                            // ... + P V_j, V_j MN-major as in kernel 10
#pragma unroll
        for (int ks = 0; ks < BC / 16; ks++) {
            const uint64_t desc = make_desc(v_addr + ks * 2048, BC * 128, 1024);
            if constexpr (D == 64) wgmma_m64n64k16<T, 1>(o, pf[ks], desc, 1);
            else wgmma_m64n128k16<T, 1>(o, pf[ks], desc, 1);
        }
        wgmma_commit();
        wgmma_wait<0>();
        __syncwarp();
        if (lane == 0) mbar_arrive(empty + 8 * st);  // this warp is done with stage st: the producer may refill it
    }

    T *Oh = O + bh * N * D;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float lr = l[h];
#pragma unroll
        for (int off = 1; off <= 2; off *= 2) lr += __shfl_xor_sync(0xffffffffu, lr, off);
        const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
        const long row = h ? row_g8 : row_g;
        if (row < N) {
#pragma unroll
            for (int n = 0; n < D / 8; n++)
                *reinterpret_cast<uint32_t *>(Oh + row * D + n * 8 + 2 * t) = pack2<T>(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv);
            if (L != nullptr && t == 0)   // the quad's four lanes hold the same m and l
                L[bh * N + row] = lr > 0.0f ? m[h] * 0.69314718055994531f + logf(lr) : -INFINITY; // L = m + log l
        }
    }
#else
    (void)Q, (void)O, (void)L, (void)N, (void)row_tiles, (void)causal, (void)scale_log2, (void)tm_k, (void)tm_v;
#endif
}


// --- the launcher -------------------------------------------------------------------

template <int D, typename T>
static int launch_dt(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, int dtype,
                     int causal, cudaStream_t s)
{
    using C = K12<D>;
    static KvMaps maps;                           // K and V for the copy engine (tma_map.cuh)
    if (maps.get(k, v, B * H, N, D, C::BC, dtype, "kernel 12")) return -1;
    if (smem_opt_in(kernel12_warp_specialized<D, T>, C::bytes, "kernel", 12, D)) return -1;
    const long row_tiles = (N + C::BR - 1) / C::BR;
    const float scale_log2 = softmax_scale_log2(D);
    kernel12_warp_specialized<D, T><<<(unsigned)(B * H * row_tiles), C::THREADS, C::bytes, s>>>(
        (const T *)q, (T *)o, Lp, N, row_tiles, causal, scale_log2, maps.k, maps.v);
    CUDA_CHECK_LAST();
    return 0;
}

static int k12_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (wgmma_refused()) return -1;
    if (dtype == DT_FP16 && D == 64) return launch_dt<64, __half>(q, k, v, o, Lp, B, H, N, dtype, causal, s);
    if (dtype == DT_FP16 && D == 128) return launch_dt<128, __half>(q, k, v, o, Lp, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 64) return launch_dt<64, __nv_bfloat16>(q, k, v, o, Lp, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 128) return launch_dt<128, __nv_bfloat16>(q, k, v, o, Lp, B, H, N, dtype, causal, s);
    fprintf(stderr, "%s: kernel 12 takes fp16/bf16 and D = 64 or 128, not %s D=%ld\n", g_prog, dtype_name(dtype), D);
    return -1;
}

static int k12_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k12_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k12_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    const int nwg = D == 64 ? K12<64>::NWG : K12<128>::NWG;
    snprintf(buf, n, "1 producer + %d consumer warpgroups (%d/%d registers), BR=%d BC=%d, %d-stage K/V ring, %zu bytes of "
             "shared memory", nwg, D == 64 ? K12<64>::REG_PRODUCER : K12<128>::REG_PRODUCER,
             D == 64 ? K12<64>::REG_CONSUMER : K12<128>::REG_CONSUMER, 64 * nwg, K12<64>::BC, K12<64>::STAGES,
             D == 64 ? K12<64>::bytes : K12<128>::bytes);
}

static const FusedKernel kernel12 = {
    .id = 12, .extends = 11, .name = "warp-specialized",
    .idea = "kernel 11 with a producer warpgroup for the copies and consumer warpgroups that only compute, mbarriers instead of __syncthreads",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k12_launch,
    .describe = k12_describe, .unavailable = wgmma_unavailable, .launch_l = k12_launch_l,
};
FUSED_REGISTER(kernel12);
