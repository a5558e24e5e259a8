/*
 * naive_gpu.cu: step 01 on the GPU, the way a user would write naive
 * attention with a BLAS library, and the baseline every fused kernel of
 * step 05 is measured against (time and memory).
 *
 *   S = Q K^T / sqrt(D)   cuBLAS strided-batched GEMM     S: [B, H, N, N] in device memory
 *   P = softmax(S)        softmax_rows kernel below       P: [B, H, N, N] in device memory
 *   O = P V               cuBLAS strided-batched GEMM     O: [B, H, N, D]
 *
 * fp32: fp32 storage and fp32 GEMMs (CUBLAS_COMPUTE_32F, default math: no
 * TF32). fp16 / bf16: 16-bit storage of Q, K, V, S, P, O with fp32 compute in
 * the GEMMs and in the softmax, as PyTorch's naive fp16 attention does.
 * S and P come from the tracked device allocator, so step 02 reads exactly
 * what they cost: 2*B*H*N*N*sizeof(dtype) bytes.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp8.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>

#include "gpu.cuh"
#include "naive.h"

// --- the softmax kernel --------------------------------------------------------

template <typename T> __device__ __forceinline__ float to_f(T x);
template <> __device__ __forceinline__ float to_f<float>(float x) { return x; }
template <> __device__ __forceinline__ float to_f<__half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
/* e4m3 (the FP8 ceiling's operands only): round to nearest even, saturating at +-448 */
template <> __device__ __forceinline__ __nv_fp8_e4m3 from_f<__nv_fp8_e4m3>(float x) { return __nv_fp8_e4m3(x); }

/* One warp per row of S: P[row, j] = e^(S[row, j] - m) / l, the stable way.
 * Pass 1 keeps a per-lane running max and sum (the online softmax of step 04,
 * here only to read the row once instead of twice), merged across the warp;
 * pass 2 writes P. Causal: columns j > i get p = 0. Rows are B*H*N in all. */
template <typename T>
__global__ void softmax_rows(const T *__restrict__ S,  // [B*H, N, N]
                             T *__restrict__ P,        // [B*H, N, N]
                             long rows, long N, int causal)
{
    const long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const long i = row % N;                       // the query index inside its head
    const long jend = causal ? i + 1 : N;         // keys past jend are masked
    const T *s = S + row * N;
    T *p = P + row * N;
    float m = -INFINITY, l = 0.0f;
    for (long j = lane; j < jend; j += 32) {
        const float x = to_f(s[j]);
        const float m_new = fmaxf(m, x);
        l = l * __expf(m - m_new) + __expf(x - m_new);   // l = l e^(m - m_new) + e^(x - m_new)
        m = m_new;
    }
    for (int off = 16; off > 0; off /= 2) {               // merge the 32 lanes' (m, l)
        const float m_o = __shfl_xor_sync(0xffffffffu, m, off), l_o = __shfl_xor_sync(0xffffffffu, l, off);
        const float m_new = fmaxf(m, m_o);
        l = (m == -INFINITY ? 0.0f : l * __expf(m - m_new)) + (m_o == -INFINITY ? 0.0f : l_o * __expf(m_o - m_new));
        m = m_new;
    }
    const float inv_l = 1.0f / l;
    for (long j = lane; j < N; j += 32)
        p[j] = from_f<T>(j < jend ? __expf(to_f(s[j]) - m) * inv_l : 0.0f);
}

// --- the launcher ------------------------------------------------------------------

static cublasHandle_t handle()
{
    static cublasHandle_t h;
    if (!h) {
        CUBLAS_CHECK(cublasCreate(&h));
        CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH)); /* fp32 stays fp32: no TF32 */
    }
    return h;
}

static cudaDataType_t cuda_type(int dtype)
{
    return dtype == DT_FP32 ? CUDA_R_32F : dtype == DT_FP16 ? CUDA_R_16F : CUDA_R_16BF;
}

extern "C" void naive_attention_gpu_ws(const void *q, const void *k, const void *v, void *o, long B, long H, long N,
                                      long D, int dtype, int causal, void *S, void *P, void *stream)
{
    const long bh = B * H;
    cudaStream_t st = (cudaStream_t)stream;
    cudaDataType_t t = cuda_type(dtype);
    const float scale = 1.0f / sqrtf((float)D), one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSetStream(handle(), st));
    /* Row-major S = Q K^T is column-major S^T: with Q and K seen as
     * column-major D x N matrices, S^T = op_T(K) * Q, m = n = N, k = D. */
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle(), CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)N, (int)D, &scale,
                                            k, t, (int)D, (long long)N * D, q, t, (int)D, (long long)N * D, &zero,
                                            S, t, (int)N, (long long)N * N, (int)bh, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    const long rows = bh * N;
    const int warps = 8;
    const unsigned grid = (unsigned)((rows + warps - 1) / warps);
    if (dtype == DT_FP32)
        softmax_rows<float><<<grid, 32 * warps, 0, st>>>((const float *)S, (float *)P, rows, N, causal);
    else if (dtype == DT_FP16)
        softmax_rows<__half><<<grid, 32 * warps, 0, st>>>((const __half *)S, (__half *)P, rows, N, causal);
    else
        softmax_rows<__nv_bfloat16><<<grid, 32 * warps, 0, st>>>((const __nv_bfloat16 *)S, (__nv_bfloat16 *)P, rows, N, causal);
    CUDA_CHECK_LAST();
    /* Row-major O = P V is column-major O^T = V^T P^T = V(col, D x N) * P(col, N x N). */
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle(), CUBLAS_OP_N, CUBLAS_OP_N, (int)D, (int)N, (int)N, &one,
                                            v, t, (int)D, (long long)N * D, P, t, (int)N, (long long)N * N, &zero,
                                            o, t, (int)D, (long long)N * D, (int)bh, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// --- the backward, the same way ----------------------------------------------------

/* dS = P o (dP - Delta) with Delta_i = sum_j dP_ij P_ij, the row's dot product of
 * dP and P (naive attention has the whole row of P, so it needs no O), in place
 * over dP. One warp per row: pass 1 sums Delta, pass 2 writes dS. Masked
 * entries have P = 0, so they get dS = 0 with no test. */
template <typename T>
__global__ void softmax_backward_rows(const T *__restrict__ P,  // [B*H, N, N]
                                      T *__restrict__ dS,       // [B*H, N, N]: dP in, dS out
                                      long rows, long N)
{
    const long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const T *p = P + row * N;
    T *ds = dS + row * N;
    float delta = 0.0f;
    for (long j = lane; j < N; j += 32) delta += to_f(p[j]) * to_f(ds[j]);      // Delta_i = sum_j p_ij dp_ij
    for (int off = 16; off > 0; off /= 2) delta += __shfl_xor_sync(0xffffffffu, delta, off);
    for (long j = lane; j < N; j += 32) ds[j] = from_f<T>(to_f(p[j]) * (to_f(ds[j]) - delta)); // ds = p o (dp - Delta)
}

/* The backward of naive attention with P kept from the forward (the P
 * naive_attention_gpu_ws wrote), four cuBLAS GEMMs and the kernel above:
 *     dV = P^T dO,  dP = dO V^T,  dS = P o (dP - rowsum(dP o P)),
 *     dQ = dS K / sqrt(D),  dK = dS^T Q / sqrt(D),
 * dP and dS stored in dS ([B, H, N, N], dtype; the forward's S buffer can be
 * passed: S is dead once P is made). Same storage rule as the forward: 16-bit
 * dP and dS, fp32 accumulation in the GEMMs and the kernel. */
extern "C" void naive_attention_backward_gpu_ws(const void *q, const void *k, const void *v, const void *dout,
                                               const void *P, void *dS, void *dq, void *dk, void *dv, long B, long H,
                                               long N, long D, int dtype, void *stream)
{
    const long bh = B * H;
    cudaStream_t st = (cudaStream_t)stream;
    cudaDataType_t t = cuda_type(dtype);
    const float scale = 1.0f / sqrtf((float)D), one = 1.0f, zero = 0.0f;
    const long long sND = (long long)N * D, sNN = (long long)N * N;
    CUBLAS_CHECK(cublasSetStream(handle(), st));
    /* Row-major X [r, c] is column-major X^T: each product below is written
     * for the transposes. dV^T = dO^T P: op(dO) = N, op(P) = T. */
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle(), CUBLAS_OP_N, CUBLAS_OP_T, (int)D, (int)N, (int)N, &one, dout, t,
                                            (int)D, sND, P, t, (int)N, sNN, &zero, dv, t, (int)D, sND, (int)bh,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    /* dP = dO V^T, as the forward's S = Q K^T with (K, Q) -> (V, dO). */
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle(), CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)N, (int)D, &one, v, t,
                                            (int)D, sND, dout, t, (int)D, sND, &zero, dS, t, (int)N, sNN, (int)bh,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    const long rows = bh * N;
    const int warps = 8;
    const unsigned grid = (unsigned)((rows + warps - 1) / warps);
    if (dtype == DT_FP32)
        softmax_backward_rows<float><<<grid, 32 * warps, 0, st>>>((const float *)P, (float *)dS, rows, N);
    else if (dtype == DT_FP16)
        softmax_backward_rows<__half><<<grid, 32 * warps, 0, st>>>((const __half *)P, (__half *)dS, rows, N);
    else
        softmax_backward_rows<__nv_bfloat16><<<grid, 32 * warps, 0, st>>>((const __nv_bfloat16 *)P, (__nv_bfloat16 *)dS, rows, N);
    CUDA_CHECK_LAST();
    /* dQ^T = K^T dS^T (as the forward's O = P V), times 1/sqrt(D). */
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle(), CUBLAS_OP_N, CUBLAS_OP_N, (int)D, (int)N, (int)N, &scale, k, t,
                                            (int)D, sND, dS, t, (int)N, sNN, &zero, dq, t, (int)D, sND, (int)bh,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    /* dK^T = Q^T dS, times 1/sqrt(D). */
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle(), CUBLAS_OP_N, CUBLAS_OP_T, (int)D, (int)N, (int)N, &scale, q, t,
                                            (int)D, sND, dS, t, (int)N, sNN, &zero, dk, t, (int)D, sND, (int)bh,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// --- the matrix-product ceiling ----------------------------------------------------

/* Values in [-1, 1) from a hash of the index: random enough that the GEMM is
 * not timed on zeros or on a pattern, made on the device in one pass. */
template <typename T> __global__ void fill_hash(T *x, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
        x[i] = from_f<T>((float)h * (2.0f / 4294967296.0f) - 1.0f);
    }
}

typedef struct { const void *a, *b; void *c; int n; cudaDataType_t t; } GemmCtx;
static void gemm_run(void *p)
{
    const GemmCtx *g = (const GemmCtx *)p;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(handle(), CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->a, g->t, g->n, g->b, g->t, g->n,
                              &zero, g->c, g->t, g->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

extern "C" double gemm_ceiling_tflops(int dtype, long n, int repeat, double *ms_out)
{
    const size_t elems = (size_t)n * (size_t)n, bytes = elems * dtype_size(dtype);
    void *a = dmalloc_try(bytes), *b = a ? dmalloc_try(bytes) : NULL, *c = b ? dmalloc_try(bytes) : NULL;
    if (!c) {
        dfree(a), dfree(b);
        return -1;
    }
    void *bufs[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        if (dtype == DT_FP32) fill_hash<float><<<1024, 256>>>((float *)bufs[i], elems, 17u + i);
        else if (dtype == DT_FP16) fill_hash<__half><<<1024, 256>>>((__half *)bufs[i], elems, 17u + i);
        else fill_hash<__nv_bfloat16><<<1024, 256>>>((__nv_bfloat16 *)bufs[i], elems, 17u + i);
        CUDA_CHECK_LAST();
    }
    CUBLAS_CHECK(cublasSetStream(handle(), 0));
    GemmCtx g = {a, b, c, (int)n, cuda_type(dtype)};
    const double ms = gpu_time_median_ms(gemm_run, &g, 2, repeat);
    dfree(a), dfree(b), dfree(c);
    if (ms_out) *ms_out = ms;
    return 2.0 * n * n * n / ms / 1e9;
}

/* The FP8 ceiling (step 05's --dtype fp8 --bench): an n x n x n product of e4m3 matrices on cublasLt, fp32
 * accumulation, fp16 out; cuBLAS reaches FP8 only through cublasLt, which wants both operands with k along
 * the row ("TN"). Fast accumulation on, as wgmma's own in the FP8 kernels (cuBLAS's default promotes the
 * partial sums to fp32 every so often, on the CUDA cores). -1 if it does not fit or cublasLt has no algorithm. */
typedef struct {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulHeuristicResult_t algo;
    const void *a, *b;
    void *c, *ws;
    size_t ws_bytes;
} LtCtx;
static void lt_run(void *p)
{
    const LtCtx *g = (const LtCtx *)p;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(g->lt, g->op, &one, g->a, g->la, g->b, g->lb, &zero, g->c, g->lc, g->c, g->lc, &g->algo.algo,
                                g->ws, g->ws_bytes, 0));
}

extern "C" double gemm_ceiling_fp8_tflops(long n, int repeat, double *ms_out)
{
    const size_t elems = (size_t)n * (size_t)n, ws_bytes = (size_t)32 << 20;
    void *a = dmalloc_try(elems), *b = a ? dmalloc_try(elems) : NULL, *c = b ? dmalloc_try(elems * 2) : NULL,
         *ws = c ? dmalloc_try(ws_bytes) : NULL;
    if (!ws) {
        dfree(a), dfree(b), dfree(c);
        return -1;
    }
    fill_hash<__nv_fp8_e4m3><<<1024, 256>>>((__nv_fp8_e4m3 *)a, elems, 17u);
    fill_hash<__nv_fp8_e4m3><<<1024, 256>>>((__nv_fp8_e4m3 *)b, elems, 18u);
    CUDA_CHECK_LAST();
    LtCtx g;
    g.a = a, g.b = b, g.c = c, g.ws = ws, g.ws_bytes = ws_bytes;
    CUBLAS_CHECK(cublasLtCreate(&g.lt));
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const int8_t fast = 1;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g.la, CUDA_R_8F_E4M3, (uint64_t)n, (uint64_t)n, n));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g.lb, CUDA_R_8F_E4M3, (uint64_t)n, (uint64_t)n, n));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g.lc, CUDA_R_16F, (uint64_t)n, (uint64_t)n, n));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g.lt, g.op, g.la, g.lb, g.lc, g.lc, pref, 1, &g.algo, &found);
    double ms = -1;
    if (st == CUBLAS_STATUS_SUCCESS && found > 0) ms = gpu_time_median_ms(lt_run, &g, 2, repeat);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(g.la), cublasLtMatrixLayoutDestroy(g.lb), cublasLtMatrixLayoutDestroy(g.lc);
    cublasLtMatmulDescDestroy(g.op);
    cublasLtDestroy(g.lt);
    dfree(a), dfree(b), dfree(c), dfree(ws);
    if (ms_out) *ms_out = ms;
    return ms > 0 ? 2.0 * n * n * n / ms / 1e9 : -1;
}

extern "C" int naive_attention_gpu(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D,
                                   int dtype, int causal, void *stream)
{
    const size_t nn = (size_t)B * H * N * N * dtype_size(dtype);
    void *S = dmalloc_try(nn);                    // [B, H, N, N]
    void *P = S ? dmalloc_try(nn) : NULL;         // [B, H, N, N]
    if (!S || !P) {
        dfree(S);
        return -1;
    }
    naive_attention_gpu_ws(q, k, v, o, B, H, N, D, dtype, causal, S, P, stream);
    dfree(P);                                     // cudaFree waits for the GEMM that reads P
    dfree(S);
    return 0;
}

// --- one run on the device, checked against the float64 reference -----------------

typedef struct {
    double max_abs, rel_l2;
    size_t n_bad;
    int oom;
} GpuErr;

/* Fresh random inputs (seeded, rounded to dtype), poisoned output, one run,
 * compared on all rows (or every stride-th row) with the float64 reference. */
static GpuErr run_checked(long B, long H, long N, long D, int dtype, int causal, uint64_t seed, double atol, Err *e_out)
{
    GpuErr r = {0, 0, 0, 0};
    const size_t n = (size_t)B * H * N * D;
    float *q = (float *)xmalloc(n * 4, "Q"), *k = (float *)xmalloc(n * 4, "K"), *v = (float *)xmalloc(n * 4, "V");
    float *out = (float *)xmalloc(n * 4, "O");
    make_qkv(q, k, v, n, seed);
    round_to_dtype(q, n, dtype); round_to_dtype(k, n, dtype); round_to_dtype(v, n, dtype);
    void *dq = dupload(q, n, dtype, "Q"), *dk = dupload(k, n, dtype, "K"), *dv = dupload(v, n, dtype, "V");
    void *dout = dmalloc(n * dtype_size(dtype), "O");
    dpoison(dout, n, dtype);
    if (naive_attention_gpu(dq, dk, dv, dout, B, H, N, D, dtype, causal, 0) != 0) {
        r.oom = 1;
    } else {
        CUDA_WAITED("naive's sync", cudaDeviceSynchronize());
        ddownload(out, dout, n, dtype);
        const long stride = N <= 2048 ? 1 : 61;
        const long rows = (N + stride - 1) / stride;
        double *ref = (double *)xmalloc((size_t)B * H * rows * D * sizeof(double), "reference");
        float *got = (float *)xmalloc((size_t)B * H * rows * D * 4, "sampled rows");
        double *scratch = (double *)xmalloc((size_t)N * sizeof(double), "scores");
        size_t w = 0;
        for (long h = 0; h < B * H; h++)
            for (long i = 0; i < N; i += stride, w++) {
                const size_t hd = (size_t)h * N * D;
                ref_attention_row(q + hd, k + hd, v + hd, N, D, causal, i, scratch, ref + w * D);
                memcpy(got + w * D, out + hd + (size_t)i * D, (size_t)D * 4);
            }
        Err e = compare(got, ref, w * (size_t)D, atol, dtype == DT_FP32 ? 1e-5 : 0);
        r.max_abs = e.max_abs; r.rel_l2 = e.rel_l2; r.n_bad = e.n_bad;
        if (e_out) *e_out = e;
        tfree(ref); tfree(got); tfree(scratch);
    }
    dfree(dq); dfree(dk); dfree(dv); dfree(dout);
    tfree(q); tfree(k); tfree(v); tfree(out);
    return r;
}

extern "C" double naive_gpu_error(long B, long H, long N, long D, int dtype, int causal, uint64_t seed)
{
    GpuErr r = run_checked(B, H, N, D, dtype, causal, seed, 1.0, NULL);
    return r.oom ? -1.0 : r.max_abs;
}

/* fp32 must be at fp32 noise. fp16/bf16 storage of P and O costs half an ulp
 * of the output's magnitude (|o| < ~1): 2^-11 ~ 5e-4 for fp16, 2^-8 ~ 4e-3
 * for bf16, plus P's rounding; the tolerances below are those, with margin. */
static double naive_tol(int dtype) { return dtype == DT_FP32 ? 1e-5 : dtype == DT_FP16 ? 4e-3 : 3e-2; }

extern "C" int naive_gpu_checks(void)
{
    static const long Ns[] = {1, 2, 17, 64, 65, 257, 1000};
    static const long Ds[] = {16, 64, 128};
    char name[128], eb[128];
    for (int dt = 0; dt < 3; dt++)
        for (size_t a = 0; a < sizeof Ns / sizeof *Ns; a++)
            for (size_t b = 0; b < sizeof Ds / sizeof *Ds; b++) {
                if (dt != DT_FP32 && Ds[b] == 16) continue;
                const int causal = (a + b) % 3 == 0;
                Err e;
                memset(&e, 0, sizeof e);
                GpuErr r = run_checked(2, 3, Ns[a], Ds[b], dt, causal, 40 + a * 7 + b, naive_tol(dt), &e);
                snprintf(name, sizeof name, "naive-gpu %s B=2 H=3 N=%ld D=%ld%s", dtype_name(dt), Ns[a], Ds[b], causal ? " causal" : "");
                report(!r.oom && r.n_bad == 0, &e, name, "%s (tol %.0e)", fmt_err(&e, eb, sizeof eb), naive_tol(dt));
            }
    return report_finish();
}

// --- step 01's GPU run -----------------------------------------------------------------

typedef struct { const void *q, *k, *v; void *o; long B, H, N, D; int dtype, causal; void *S, *P; } Ctx;
static void run_ctx(void *p)
{
    Ctx *c = (Ctx *)p;
    naive_attention_gpu_ws(c->q, c->k, c->v, c->o, c->B, c->H, c->N, c->D, c->dtype, c->causal, c->S, c->P, 0);
}

extern "C" int naive_gpu_main(const Opts *o)
{
    char b1[32], b2[32], b3[32], eb[128];
    const size_t n = (size_t)o->B * o->H * o->N * o->D, esz = dtype_size(o->dtype);
    const size_t sp = 2 * (size_t)o->B * o->H * o->N * o->N * esz;
    printf("step01: naive attention on the GPU (cuBLAS + softmax kernel), %s, B=%ld H=%ld N=%ld D=%ld%s\n",
           dtype_name(o->dtype), o->B, o->H, o->N, o->D, o->causal ? ", causal" : "");
    printf("device: %s\n", gpu_describe());
    printf("S and P: 2 x %s = %s (2*B*H*N*N*%zu bytes); Q, K, V, O: 4 x %s\n", fmt_bytes((double)sp / 2, b1, sizeof b1),
           fmt_bytes((double)sp, b2, sizeof b2), esz, fmt_bytes((double)n * esz, b3, sizeof b3));
    Opts oo = *o;
    float *q, *k, *v;
    inputs_load_or_make(&oo, &q, &k, &v);
    round_to_dtype(q, n, o->dtype); round_to_dtype(k, n, o->dtype); round_to_dtype(v, n, o->dtype);
    dmem_reset_peak();
    const size_t used0 = dmem_device_used();
    void *dq = dupload(q, n, o->dtype, "Q"), *dk = dupload(k, n, o->dtype, "K"), *dv = dupload(v, n, o->dtype, "V");
    void *dout = dmalloc(n * esz, "O");
    dpoison(dout, n, o->dtype);
    /* S and P allocated once, outside the timed region, as a caching
     * allocator (PyTorch's) would hand them to a user: the time is the work. */
    void *S = dmalloc(sp / 2, "S"), *P = dmalloc(sp / 2, "P");
    Ctx c = {dq, dk, dv, dout, o->B, o->H, o->N, o->D, o->dtype, o->causal, S, P};
    const double ms = gpu_time_median_ms(run_ctx, &c, 2, (int)o->repeat);
    const double flops = 4.0 * o->B * o->H * o->N * o->N * o->D / (o->causal ? 2.0 : 1.0);
    printf("time: %.3f ms (median of %ld after 2 warm-ups), %.1f TFLOP/s (4*B*H*N*N*D / time)\n", ms,
           o->repeat, flops / ms / 1e9);
    printf("peak tracked device memory: %s (inputs, output, S, P); cudaMemGetInfo: %s used by the whole device now, %s before\n",
           fmt_bytes((double)dmem_peak(), b1, sizeof b1), fmt_bytes((double)dmem_device_used(), b2, sizeof b2),
           fmt_bytes((double)used0, b3, sizeof b3));
    float *out = (float *)xmalloc(n * 4, "O");
    ddownload(out, dout, n, o->dtype);
    const long stride = o->N <= 2048 ? 1 : 7, rows = (o->N + stride - 1) / stride;
    double *ref = (double *)xmalloc((size_t)o->B * o->H * rows * o->D * sizeof(double), "reference");
    float *got = (float *)xmalloc((size_t)o->B * o->H * rows * o->D * 4, "sampled rows");
    double *scratch = (double *)xmalloc((size_t)o->N * sizeof(double), "scores");
    size_t w = 0;
    for (long h = 0; h < o->B * o->H; h++)
        for (long i = 0; i < o->N; i += stride, w++) {
            const size_t hd = (size_t)h * o->N * o->D;
            ref_attention_row(q + hd, k + hd, v + hd, o->N, o->D, o->causal, i, scratch, ref + w * o->D);
            memcpy(got + w * o->D, out + hd + (size_t)i * o->D, (size_t)o->D * 4);
        }
    Err e = compare(got, ref, w * (size_t)o->D, naive_tol(o->dtype), o->dtype == DT_FP32 ? 1e-5 : 0);
    printf("error vs float64 reference on the %s-rounded inputs (%s): %s%s\n", dtype_name(o->dtype),
           stride == 1 ? "all rows" : "every 7th row", fmt_err(&e, eb, sizeof eb), e.n_bad ? "  <-- WRONG" : "");
    if (o->outfile) {
        long shp[4] = {o->B, o->H, o->N, o->D};
        if (npy_save(o->outfile, out, shp, 4, o->dtype == DT_FP16 ? DT_FP16 : DT_FP32) != 0) {
            fprintf(stderr, "%s: cannot write %s\n", g_prog, o->outfile);
            return EXIT_FAIL;
        }
        printf("wrote O to %s\n", o->outfile);
    }
    if (o->csv) {
        FILE *f = csv_open(o->csv, "step,device,dtype,B,H,N,D,causal,ms,gflops,peak_bytes,sp_bytes,max_abs,rel_l2");
        fprintf(f, "01,gpu,%s,%ld,%ld,%ld,%ld,%d,%.6f,%.4f,%zu,%zu,%.3e,%.3e\n", dtype_name(o->dtype), o->B, o->H, o->N,
                o->D, o->causal, ms, flops / ms / 1e6, dmem_peak(), sp, e.max_abs, e.rel_l2);
        fclose(f);
    }
    dfree(S); dfree(P); dfree(dq); dfree(dk); dfree(dv); dfree(dout);
    tfree(q); tfree(k); tfree(v); tfree(out); tfree(ref); tfree(got); tfree(scratch);
    return e.n_bad ? EXIT_FAIL : EXIT_OK;
}
