/*
 * Kernel 10: kernel 9's algorithm on Hopper's warpgroup matrix instructions.
 *
 * Extends kernel 9 (kernel09_ffma_scale.cu). The idea: let the tensor cores read K and V from shared memory
 * themselves, 64 query rows x a whole tile per instruction. Kernels 3-9 feed mma.sync: every K and V fragment goes
 * shared memory -> registers by ldmatrix, then into an m16n8k16 product per warp. wgmma (sm_90a) is issued by a
 * warpgroup of 4 warps for 64 query rows at once and reads its B operand (K_j for S = Q K^T, V_j for O = P V) from
 * shared memory through a descriptor, with no ldmatrix and no register copy of K or V:
 *     S (64 x BC)  = Q (64 x D, registers) K_j^T    D/16 wgmma of n = BC
 *     O (64 x D)  += P (64 x BC, registers) V_j     BC/16 wgmma of n = D
 * The accumulators come back in the layout kernels 3-9 use (wgmma.cuh), so the online softmax between the two
 * products is kernel 9's, line for line: max on the raw scores, p = 2^(fmaf(s, scale_log2, -m_new)), alpha, l, o.
 * What the tensor cores need instead of ldmatrix-friendly padding: K_j and V_j stored in the 128-byte-swizzled layout
 * (load_tile_sw below), tiles aligned to 1024 bytes, and a proxy fence between the cp.async that fills a buffer and
 * the wgmma that reads it.
 *
 * Why: on Hopper the mma.sync path reaches about two thirds of the tensor cores' peak (the FlashAttention-3 paper's
 * figure); kernel 9 reaches 46% of the cuBLAS matrix product.
 *
 * What it costs: a warpgroup waits for its own products (wgmma.wait_group 0 after each), so one warpgroup's softmax
 * does not overlap its own matrix products; the other warpgroups of the SM fill that gap (K10_WG of them per block,
 * one block per SM). FlashAttention-3 goes further (a producer warp with TMA, two consumer warpgroups ping-ponging,
 * the softmax of tile j overlapped with the products of tile j+1): kernels 11-14 take those steps one at a time.
 * Built only for sm_90a (compute capability 9.0, the -gencode the Makefile adds for sm_90); elsewhere it reports
 * itself unavailable.
 *
 * Measured: H100, fp16, N = 4096, interleaved with kernel 9: +17% at D = 64 (338.4 TFLOP/s), +21% at D = 128 (393.7),
 * 112% and 118% of FlashAttention-2 on the same GPU; the run: RESULTS.md#kernel-10.
 */
#include <cmath>

#include "gpu.cuh"
#include "../kernels.h"
#include "launch_tc.cuh"
#include "../primitives/tc.cuh"
#include "../primitives/tile_order.cuh"
#include "../primitives/wgmma.cuh"

// --- the kernel ------------------------------------------------------------------

/* 3 warpgroups (BR = 192, 384 threads, one block per SM): at most 65536 / 384
 * = 170 registers per thread, and the kernel needs 168. Measured on the H100,
 * N = 4096: 2 warpgroups (181 registers) gave 257.7 TFLOP/s at D = 64 and
 * 303.2 at D = 128 against 333.3 and 393.2 with 3: the third warpgroup is
 * what hides each one's softmax. BC = 128 at D = 128 fits only with 2
 * (228 registers; 336.1) and spills with 3. */
constexpr int K10_WG = 3, K10_WARPS = 4 * K10_WG, K10_BR = 64 * K10_WG;  // a warpgroup per 64 query rows

template <int D> struct K10Smem {
    static constexpr int BC = D == 64 ? 128 : 64;  /* keys per K/V tile */
    static constexpr int TILE = BC * D * 2;                 /* one K or V tile, bytes (no padding: swizzled) */
    static constexpr size_t bytes = 4 * (size_t)TILE + 1024; /* K, V twice; + 1024 to align the base */
};

/* rows x D tile of a [N, D] matrix into shared memory by cp.async, in the
 * 128-byte-swizzled layout wgmma reads: D/64 blocks of [rows][64] elements,
 * each row 128 bytes, its 16-byte chunk c at position c ^ (row % 8). Rows past
 * N are zero-filled (src_bytes = 0). No wait here. */
template <int D, int ROWS, typename T>
__device__ __forceinline__ void load_tile_sw(unsigned char *dst, const T *src, long row0, long N)
{
    constexpr int CHUNKS = ROWS * D / 8;
    for (int c = threadIdx.x; c < CHUNKS; c += K10_WARPS * 32) {
        const int r = c / (D / 8), col = c % (D / 8), blk = col / 8, cc = col % 8;
        const bool in = row0 + r < N;
        cp_async16(dst + blk * ROWS * 128 + r * 128 + ((cc ^ (r % 8)) * 16), src + (in ? row0 + r : 0) * D + col * 8,
                   in ? 16 : 0);
    }
}

template <int D, typename T>
__global__ void __launch_bounds__(K10_WARPS * 32, 1)
kernel10_wgmma(const T *__restrict__ Q,  // [B, H, N, D]
               const T *__restrict__ K,  // [B, H, N, D]
               const T *__restrict__ V,  // [B, H, N, D]
               T *__restrict__ O,        // [B, H, N, D]
               long N, long row_tiles, int causal, float scale_log2)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BC = K10Smem<D>::BC, TILE = K10Smem<D>::TILE;
    extern __shared__ unsigned char smem_raw[];
    /* The swizzle pattern repeats every 1024 bytes and the descriptors assume
     * atoms start on that boundary: align the base by hand. */
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(smem_raw);
    unsigned char *smem = smem_raw + (((raw_addr + 1023) & ~1023u) - raw_addr);
    const uint32_t smem_addr = (uint32_t)__cvta_generic_to_shared(smem);
    /* [K buf 0][K buf 1][V buf 0][V buf 1], TILE bytes each */

    long bh, tile;
    block_tile(row_tiles, causal, &bh, &tile);    // causal: longest first (tile_order.cuh)
    const long i0 = tile * K10_BR;
    const T *Qh = Q + bh * N * D, *Kh = K + bh * N * D, *Vh = V + bh * N * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long warp_row0 = i0 + warp * 16;        // warpgroup warp/4, its warp warp%4: rows 64 (warp/4) + 16 (warp%4) ..
    const long row_g = warp_row0 + g, row_g8 = row_g + 8;

    const long last_row = (i0 + K10_BR < N ? i0 + K10_BR : N) - 1;
    const long jend = causal ? last_row + 1 : N;
    load_tile_sw<D, BC>(smem, Kh, 0, N);          // tile 0 into buffer 0
    load_tile_sw<D, BC>(smem + 2 * TILE, Vh, 0, N);
    cp_async_commit();

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

    cp_async_wait<0>();
    fence_proxy_async();                          // cp.async wrote, the tensor cores read next
    __syncthreads();

    for (long j0 = 0, buf = 0; j0 < jend; j0 += BC, buf ^= 1) {
        const uint32_t k_addr = smem_addr + (uint32_t)(buf * TILE), v_addr = smem_addr + (uint32_t)((2 + buf) * TILE);
        if (j0 + BC < jend) {                     // start tile j+1 into the other buffer, do not wait
            load_tile_sw<D, BC>(smem + (buf ^ 1) * TILE, Kh, j0 + BC, N);
            load_tile_sw<D, BC>(smem + (2 + (buf ^ 1)) * TILE, Vh, j0 + BC, N);
        }
        cp_async_commit();

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

        cp_async_wait<0>();                       // tile j+1 has landed ...
        fence_proxy_async();                      // ... is visible to the tensor cores ...
        __syncthreads();                          // ... for every thread, and nobody reads buffer j any more
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
        }
    }
#else
    (void)Q, (void)K, (void)V, (void)O, (void)N, (void)row_tiles, (void)causal, (void)scale_log2;
#endif
}

// --- the launcher -------------------------------------------------------------------

/* Whether this binary holds kernel 10's sm_90a code for this device: a
 * one-thread probe compiled the same way as the kernel. */
__global__ void wgmma_probe(int *ok)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    *ok = 1;
#else
    *ok = 0;
#endif
}

const char *wgmma_unavailable(void)
{
    static int state = -1; /* -1 not asked yet, 0 runs here, 1 does not */
    static char why[200];
    if (state < 0) {
        int major = 0, minor = 0;
        gpu_cc(&major, &minor); /* the --gpu-as GPU's, when one is emulated */
        const int ok = major == 9 && minor == 0 && gpu_probe(wgmma_probe);
        state = !ok;
        if (!ok)
            snprintf(why, sizeof why, "Hopper's wgmma and TMA (kernels 10-52, backward 5-20, FP8) need compute capability "
                     "9.0 and an sm_90a build (this GPU: %d.%d%s)", major, minor,
                     major == 9 && minor == 0 ? ", built without sm_90a: make CUDA_ARCH=sm_90" : "");
    }
    return state ? why : NULL;
}

template <int D, typename T, int BC = 0> struct K10Launch { /* bc = 0: Hopper only, 227 KB a block */
    static constexpr size_t bytes = K10Smem<D>::bytes;
    static constexpr int br = K10_BR, threads = K10_WARPS * 32, bc = 0;
    static constexpr TcKernel<T> fn = kernel10_wgmma<D, T>;
};

static int k10_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    if (wgmma_refused()) return -1;
    return tc_launch<K10Launch>(10, q, k, v, o, B, H, N, D, dtype, causal, stream);
}

static void k10_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    snprintf(buf, n, "wgmma m64nNk16, %d warpgroups x 64 rows, BR=%d BC=%d, K/V 128-byte swizzled, %zu bytes of shared memory",
             K10_WG, K10_BR, D == 64 ? K10Smem<64>::BC : K10Smem<128>::BC, D == 64 ? K10Smem<64>::bytes : K10Smem<128>::bytes);
}

static const FusedKernel kernel10 = {
    .id = 10, .extends = 9, .name = "wgmma",
    .idea = "kernel 9 on Hopper's wgmma: K and V read by the tensor cores from swizzled shared memory",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k10_launch,
    .describe = k10_describe, .unavailable = wgmma_unavailable,
};
FUSED_REGISTER(kernel10);
