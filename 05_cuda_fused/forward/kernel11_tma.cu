/*
 * Kernel 11: kernel 10 with K and V brought in by Hopper's copy engine (TMA).
 *
 * Extends kernel 10 (kernel10_wgmma.cu). The idea: take the loads off the threads. Hopper's tensor memory accelerator
 * copies a whole box of a tensor in one instruction: thread 0 issues cp.async.bulk.tensor for K_j and V_j (one box of
 * BC rows x 64 columns each, two at D = 128), the copy engine writes them in the 128-byte-swizzled layout kernel 10
 * built by hand (the tensor map asks for CU_TENSOR_MAP_SWIZZLE_128B), and zero-fills the rows past N. The threads wait
 * on an mbarrier that completes when all the tile's bytes have landed.
 *
 * Why: in kernels 4-10 every thread of the block copies a share of each K and V tile with cp.async: at D = 128,
 * BC = 64 that is 2 x 16 KB = 2048 copies of 16 bytes per tile, five or six per thread, each with its own address and
 * swizzle arithmetic, then a wait and a proxy fence per thread.
 *
 * What it costs: a tensor map per K and V, made on the host with the driver's cuTensorMapEncodeTiled (tma_map.cuh,
 * shared with kernels 12-23 and 26) and passed by value as a __grid_constant__ parameter; two mbarriers in shared memory; one
 * thread's issue. Everything else is kernel 10's, repeated on purpose so the file reads alone (the launch too: the
 * tensor maps make its signature differ from launch_tc.cuh's). Built only for sm_90a, like kernel 10.
 *
 * Like kernel 9 it writes L = m ln 2 + log l per row for the backward when asked (launch_l, L != NULL): one store per
 * row after the loop, within the timing's spread (RESULTS.md#kernel-11).
 *
 * Measured: H100, fp16, N = 4096, interleaved with kernel 10: +11% at D = 64 (374.2 TFLOP/s), +17% at D = 128
 * (461.5), 124% and 138% of FlashAttention-2 on the same GPU; the run: RESULTS.md#kernel-11.
 */
#include <cmath>
#include <cstring>

#include "gpu.cuh"
#include "../kernels.h"
#include "launch_tc.cuh"
#include "../primitives/tc.cuh"
#include "../primitives/tile_order.cuh"
#include "../primitives/tma_map.cuh"
#include "../primitives/wgmma.cuh"

// --- the kernel ------------------------------------------------------------------

constexpr int K11_WG = 3, K11_WARPS = 4 * K11_WG, K11_BR = 64 * K11_WG;  // kernel 10's shape

template <int D> struct K11Smem {
    static constexpr int BC = D == 64 ? 128 : 64;
    static constexpr int TILE = BC * D * 2;
    static constexpr size_t bytes = 4 * (size_t)TILE + 16 + 1024; /* K, V twice; 2 mbarriers; alignment */
};

template <int D, typename T>
__global__ void __launch_bounds__(K11_WARPS * 32, 1)
kernel11_tma(const T *__restrict__ Q,  // [B, H, N, D]
               const T *__restrict__ K,  // [B, H, N, D]
               const T *__restrict__ V,  // [B, H, N, D]
               T *__restrict__ O,        // [B, H, N, D]
               float *__restrict__ L,    // [B, H, N] or NULL: L = m + log l per row, for the backward
               long N, long row_tiles, int causal, float scale_log2,
               const __grid_constant__ CUtensorMap tm_k,  // K, V as [B*H][N][D] for the copy engine
               const __grid_constant__ CUtensorMap tm_v)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BC = K11Smem<D>::BC, TILE = K11Smem<D>::TILE;
    extern __shared__ unsigned char smem_raw[];
    /* The swizzle pattern repeats every 1024 bytes and the descriptors assume
     * atoms start on that boundary: align the base by hand. */
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(smem_raw);
    unsigned char *smem = smem_raw + (((raw_addr + 1023) & ~1023u) - raw_addr);
    const uint32_t smem_addr = (uint32_t)__cvta_generic_to_shared(smem);
    /* [K buf 0][K buf 1][V buf 0][V buf 1], TILE bytes each, then the two
     * mbarriers that say "buffer b has landed" */
    const uint32_t full = smem_addr + 4 * TILE;   // 8 bytes each

    long bh, tile;
    block_tile(row_tiles, causal, &bh, &tile);    // causal: longest first (tile_order.cuh)
    const long i0 = tile * K11_BR;
    const T *Qh = Q + bh * N * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long warp_row0 = i0 + warp * 16;        // warpgroup warp/4, its warp warp%4: rows 64 (warp/4) + 16 (warp%4) ..
    const long row_g = warp_row0 + g, row_g8 = row_g + 8;

    const long last_row = (i0 + K11_BR < N ? i0 + K11_BR : N) - 1;
    const long jend = causal ? last_row + 1 : N;
    /* Thread 0 asks the copy engine for K_j and V_j into buffer b; the
     * mbarrier of b completes when all 2 TILE bytes have landed. */
    auto load = [&](long j0, int b) {
        mbar_expect_tx(full + 8 * b, 2 * TILE);
#pragma unroll
        for (int blk = 0; blk < D / 64; blk++) {  // the 128-byte swizzle takes boxes 64 columns wide
            tma_load_3d(smem_addr + b * TILE + blk * BC * 128, &tm_k, blk * 64, (int)j0, (int)bh, full + 8 * b);
            tma_load_3d(smem_addr + (2 + b) * TILE + blk * BC * 128, &tm_v, blk * 64, (int)j0, (int)bh, full + 8 * b);
        }
    };
    if (threadIdx.x == 0) {
        mbar_init(full, 1);
        mbar_init(full + 8, 1);
        fence_mbar_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) load(0, 0);             // tile 0 into buffer 0

    /* Q_i's A fragments straight from global memory (read once per block):
     * the layout of wgmma.cuh, rows past N as zeros. */
    uint32_t qf[D / 16][4];
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const long row = (r % 2) ? row_g8 : row_g;
            const int col = ks * 16 + 2 * t + 8 * (r / 2);
            qf[ks][r] = row < N ? *reinterpret_cast<const uint32_t *>(Qh + row * D + col) : 0u;
        }

    float o[D / 2];                               // O accumulators: 16 rows x D per warp, wgmma's layout
#pragma unroll
    for (int n = 0; n < D / 2; n++) o[n] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g and g + 8, log2 units

    for (long j0 = 0, buf = 0, use = 0; j0 < jend; j0 += BC, buf ^= 1, use += buf == 0) {
        const uint32_t k_addr = smem_addr + (uint32_t)(buf * TILE), v_addr = smem_addr + (uint32_t)((2 + buf) * TILE);
        if (threadIdx.x == 0 && j0 + BC < jend) load(j0 + BC, (int)(buf ^ 1)); // tile j+1 into the other buffer
        mbar_wait(full + 8 * buf, (int)(use & 1));  // tile j has landed (the buffer's use-th fill)

        /* S = Q_i K_j^T: D/16 products of k = 16 over the head dim. K_j is
         * K-major (a key's D values along its row); step ks starts 32 bytes
         * further into the row, in block ks / 4 of 64 columns. */
        float s[BC / 2];
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            const uint64_t desc = make_desc(k_addr + (ks / 4) * BC * 128 + (ks % 4) * 32, 16, 1024);
            if constexpr (BC == 64) wgmma_m64n64k16<T, 0>(s, qf[ks], desc, ks > 0);   // ks = 0: S = Q K^T, no +=
            else wgmma_m64n128k16<T, 0>(s, qf[ks], desc, ks > 0);
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

        /* ... + P V_j: BC/16 products of k = 16 keys. V_j is MN-major for this
         * product (the head dim, n, runs along its rows): imm-trans-b = 1,
         * step ks starts 16 rows (2048 bytes) further; the next 64 columns of
         * the head dim are BC rows of 128 bytes away (LBO). */
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < BC / 16; ks++) {
            const uint64_t desc = make_desc(v_addr + ks * 2048, BC * 128, 1024);
            if constexpr (D == 64) wgmma_m64n64k16<T, 1>(o, pf[ks], desc, 1);
            else wgmma_m64n128k16<T, 1>(o, pf[ks], desc, 1);
        }
        wgmma_commit();
        wgmma_wait<0>();

        __syncthreads();                          // nobody reads buffer j any more: it may be refilled
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
    (void)Q, (void)K, (void)V, (void)O, (void)L, (void)N, (void)row_tiles, (void)causal, (void)scale_log2, (void)tm_k, (void)tm_v;
#endif
}


// --- the launcher -------------------------------------------------------------------

template <int D, typename T>
static int launch_dt(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, int dtype,
                     int causal, cudaStream_t s)
{
    using S = K11Smem<D>;
    static KvMaps maps;                           // K and V for the copy engine (tma_map.cuh)
    if (maps.get(k, v, B * H, N, D, S::BC, dtype, "kernel 11")) return -1;
    if (smem_opt_in(kernel11_tma<D, T>, S::bytes, "kernel", 11, D)) return -1;
    const long row_tiles = (N + K11_BR - 1) / K11_BR;
    const float scale_log2 = softmax_scale_log2(D);
    kernel11_tma<D, T><<<(unsigned)(B * H * row_tiles), K11_WARPS * 32, S::bytes, s>>>(
        (const T *)q, (const T *)k, (const T *)v, (T *)o, Lp, N, row_tiles, causal, scale_log2, maps.k, maps.v);
    CUDA_CHECK_LAST();
    return 0;
}

static int k11_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (wgmma_refused()) return -1;
    if (dtype == DT_FP16 && D == 64) return launch_dt<64, __half>(q, k, v, o, Lp, B, H, N, dtype, causal, s);
    if (dtype == DT_FP16 && D == 128) return launch_dt<128, __half>(q, k, v, o, Lp, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 64) return launch_dt<64, __nv_bfloat16>(q, k, v, o, Lp, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 128) return launch_dt<128, __nv_bfloat16>(q, k, v, o, Lp, B, H, N, dtype, causal, s);
    fprintf(stderr, "%s: kernel 11 takes fp16/bf16 and D = 64 or 128, not %s D=%ld\n", g_prog, dtype_name(dtype), D);
    return -1;
}

static int k11_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k11_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k11_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    snprintf(buf, n, "kernel 10 with K/V by TMA (thread 0, mbarriers), BR=%d BC=%d, %zu bytes of shared memory", K11_BR,
             D == 64 ? K11Smem<64>::BC : K11Smem<128>::BC, D == 64 ? K11Smem<64>::bytes : K11Smem<128>::bytes);
}

static const FusedKernel kernel11 = {
    .id = 11, .extends = 10, .name = "wgmma + TMA",
    .idea = "kernel 10 with K and V copied by the tensor memory accelerator",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k11_launch,
    .describe = k11_describe, .unavailable = wgmma_unavailable, .launch_l = k11_launch_l,
};
FUSED_REGISTER(kernel11);
