/*
 * gpt_gpu.cu: gpt.c on the GPU. The same model, the same tensor tables (gpt_param_sizes, gpt_act_sizes),
 * the same initial weights (copied in from gpt_init_params), the same order of layers in forward and
 * backward; each CPU function of gpt.c has a kernel here of the same name, written so that the two read
 * side by side (the repetition is on purpose: the GPU half is the CPU half's transcription):
 *
 *   gpt.c                      here
 *   encoder_forward/backward   one thread per element / per (token, channel) and per (position, channel)
 *   layernorm_forward          one warp per row (position): the sums over C by shuffles
 *   layernorm_backward         one warp per row for dx; dw, db by column sums (below)
 *   matmul_forward/backward    cuBLAS SGEMM, fp32 with fp32 products (no TF32: the CPU's arithmetic, so
 *                              that the curves compare; TF32 would round every product to 10 bits)
 *   gelu, residual, adamw      one thread per element
 *   crossentropy_forward       one warp per row over the V logits
 *   split_heads/merge_heads    one thread per element
 *   the attention              GPU_ATTN_NAIVE (01_naive/naive_gpu.cu: S and P in memory, P kept per
 *                              layer) or GPU_ATTN_FUSED (05_cuda_fused: kernel 2 writes L, backward
 *                              kernel 1 recomputes P from it)
 *
 * Precision: everything fp32, as gpt.c (parameters, AdamW's moments, activations), and the attention
 * too with GPU_ATTN_NAIVE and GPU_ATTN_FUSED (kernel 2 / backward kernel 1). GPU_ATTN_NAIVE_BF16 and
 * GPU_ATTN_FUSED_BF16 (below) make the attention alone bf16 (mixed precision, what --big compares):
 * the tensor-core kernels of step 05 take fp16/bf16 inputs only.
 *
 * Determinism. Sums that the CPU does in one order are done here in another (a warp's shuffles, cuBLAS's
 * blocking), so the GPU's numbers are not the CPU's bit for bit; the checks compare with a tolerance. The
 * sums over many rows into one parameter gradient are done without atomics: a bias or a LayerNorm weight
 * chunk by chunk of rows into slots, then the slots in order; a row of wte or wpe by one thread per
 * element over the positions, in order. The one
 * exception is the fused attention's dQ, added by fp32 atomics from every K/V block (backward kernel 1's
 * header): a fused run is not bit-identical run to run; a naive one is.
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstring>

#include "gpu.cuh"
#include "gpt_gpu.h"
#include "../01_naive/naive.h"
#include "../05_cuda_fused/kernels.h"

// --- cuBLAS -------------------------------------------------------------------------------

static cublasHandle_t blas()
{
    static cublasHandle_t h = nullptr;
    if (!h) {
        CUBLAS_CHECK(cublasCreate(&h));
        CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH)); // fp32 products: no TF32
    }
    return h;
}

static unsigned blocks_for(size_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

// --- the attention, two ways (gpt_gpu.h) ----------------------------------------------------

static size_t naive_saved(long bh, long T) { return (size_t)bh * T * T; }   // P [bh, T, T]
static size_t naive_scratch(long bh, long T, long D) { (void)D; return (size_t)bh * T * T * sizeof(float); }
static int naive_fwd(const float *q, const float *k, const float *v, float *o, float *saved, void *scratch, long bh,
                     long T, long D)
{
    naive_attention_gpu_ws(q, k, v, o, bh, 1, T, D, DT_FP32, 1, scratch, saved, nullptr);
    return 0;
}
static int naive_bwd(const float *q, const float *k, const float *v, const float *o, const float *dO, const float *saved,
                     float *dq, float *dk, float *dv, void *scratch, long bh, long T, long D)
{
    (void)o; // naive attention's backward needs P, not O
    naive_attention_backward_gpu_ws(q, k, v, dO, saved, scratch, dq, dk, dv, bh, 1, T, D, DT_FP32, nullptr);
    return 0;
}

enum { FUSED_FWD = 2, FUSED_BWD = 1 }; // kernel 2 writes L in fp32; backward kernel 1 is its fp32 partner
static size_t fused_saved(long bh, long T) { return (size_t)bh * T; }       // L [bh, T]
static size_t fused_scratch(long bh, long T, long D) { return bwd_kernel(FUSED_BWD)->workspace(bh, 1, T, D, DT_FP32); }
static int fused_fwd(const float *q, const float *k, const float *v, float *o, float *saved, void *scratch, long bh,
                     long T, long D)
{
    (void)scratch;
    return fused_kernel(FUSED_FWD)->launch_l(q, k, v, o, saved, bh, 1, T, D, DT_FP32, 1, nullptr);
}
static int fused_bwd(const float *q, const float *k, const float *v, const float *o, const float *dO, const float *saved,
                     float *dq, float *dk, float *dv, void *scratch, long bh, long T, long D)
{
    return bwd_kernel(FUSED_BWD)->launch(q, k, v, o, dO, saved, dq, dk, dv, scratch, bh, 1, T, D, DT_FP32, 1, nullptr);
}

extern "C" const GpuAttention GPU_ATTN_NAIVE = {
    "naive", "naive: cuBLAS, S and P [B, H, T, T] in memory, P kept per layer for the backward",
    naive_saved, naive_scratch, naive_fwd, naive_bwd, nullptr};
extern "C" const GpuAttention GPU_ATTN_FUSED = {
    "fused", "fused: step 05's kernel 2 writing L [B, H, T], backward kernel 1 rebuilding P from L",
    fused_saved, fused_scratch, fused_fwd, fused_bwd, nullptr};

// --- the attention in bf16 inside the fp32 model (mixed precision) ---------------------------

__global__ void to_bf16(__nv_bfloat16 *dst, const float *src, size_t n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = __float2bfloat16_rn(src[i]);
}
__global__ void from_bf16(float *dst, const __nv_bfloat16 *src, size_t n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = __bfloat162float(src[i]);
}
static void round_in(__nv_bfloat16 *dst, const float *src, size_t n)
{
    to_bf16<<<blocks_for(n, 256), 256>>>(dst, src, n);
    CUDA_CHECK_LAST();
}
static void widen_out(float *dst, const __nv_bfloat16 *src, size_t n)
{
    from_bf16<<<blocks_for(n, 256), 256>>>(dst, src, n);
    CUDA_CHECK_LAST();
}

/* step 05's highest-numbered kernels that do the job here: a forward that writes L, a backward, bf16, D, and
 * whose launch this GPU takes (fused_fits: where a block has less shared memory than an H100's, a lower kernel) */
static const FusedKernel *bf16_forward(long D)
{
    int n = 0;
    const FusedKernel *const *ks = fused_kernels(&n);
    for (int i = n - 1; i >= 0; i--)
        if (ks[i]->launch_l && (ks[i]->dtypes & (1u << DT_BF16)) && ks[i]->supports_dim(D) && !FUSED_UNAVAILABLE(ks[i]) &&
            !gpu_dtype_unavailable(DT_BF16) && fused_fits(ks[i], DT_BF16, D))
            return ks[i];
    return nullptr;
}
/* The backward: the highest-numbered one but the deterministic option (backward kernel 9 makes dQ the
 * same bit for bit run to run, 28-61% slower than kernel 8; training here takes the fastest). */
static const BackwardKernel *bf16_backward(long D)
{
    int n = 0;
    const BackwardKernel *const *ks = bwd_kernels(&n);
    for (int i = n - 1; i >= 0; i--)
        if ((ks[i]->dtypes & (1u << DT_BF16)) && ks[i]->supports_dim(D) && !BWD_UNAVAILABLE(ks[i]) &&
            !ks[i]->dq_deterministic && !gpu_dtype_unavailable(DT_BF16) && bwd_fits(ks[i], DT_BF16, D))
            return ks[i];
    return nullptr;
}
extern "C" const char *gpu_attn_bf16_kernels(long D)
{
    static char buf[160];
    const FusedKernel *f = bf16_forward(D);
    const BackwardKernel *b = bf16_backward(D);
    if (!f || !b) return nullptr;
    snprintf(buf, sizeof buf, "kernel %d (%s) + backward kernel %d (%s)", f->id, f->name, b->id, b->name);
    return buf;
}
static const char *fused_bf16_unavailable(long D)
{
    if (gpu_dtype_unavailable(DT_BF16)) return gpu_dtype_unavailable(DT_BF16);
    return gpu_attn_bf16_kernels(D) ? nullptr : "no bf16 tensor-core kernel pair (a forward writing L, a backward) that this "
                                                "GPU launches at this D";
}

/* The scratch of both bf16 attentions starts with eight [bh, T, D] bf16 tensors: q, k, v, o, dO, dq, dk,
 * dv as the kernels see them; then naive's S/dS [bh, T, T] in bf16, or the fused backward's workspace. */
struct Bf16 {
    __nv_bfloat16 *q, *k, *v, *o, *dO, *dq, *dk, *dv;
    void *rest;
    size_t n;
    Bf16(void *scratch, long bh, long T, long D) : n((size_t)bh * T * D)
    {
        __nv_bfloat16 *p = (__nv_bfloat16 *)scratch;
        __nv_bfloat16 **f[8] = {&q, &k, &v, &o, &dO, &dq, &dk, &dv};
        for (auto x : f) { *x = p; p += n; }
        rest = p;
    }
};
static size_t bf16_tensors(long bh, long T, long D) { return 8 * (size_t)bh * T * D * sizeof(__nv_bfloat16); }

static size_t naive16_saved(long bh, long T) { return ((size_t)bh * T * T + 1) / 2; } // P in bf16: half a float each
static size_t naive16_scratch(long bh, long T, long D) { return bf16_tensors(bh, T, D) + (size_t)bh * T * T * 2; }
static int naive16_fwd(const float *q, const float *k, const float *v, float *o, float *saved, void *scratch, long bh,
                       long T, long D)
{
    Bf16 b(scratch, bh, T, D);
    round_in(b.q, q, b.n); round_in(b.k, k, b.n); round_in(b.v, v, b.n);
    naive_attention_gpu_ws(b.q, b.k, b.v, b.o, bh, 1, T, D, DT_BF16, 1, b.rest, saved, nullptr);
    widen_out(o, b.o, b.n);
    return 0;
}
static int naive16_bwd(const float *q, const float *k, const float *v, const float *o, const float *dO, const float *saved,
                       float *dq, float *dk, float *dv, void *scratch, long bh, long T, long D)
{
    (void)o;
    Bf16 b(scratch, bh, T, D);
    round_in(b.q, q, b.n); round_in(b.k, k, b.n); round_in(b.v, v, b.n); round_in(b.dO, dO, b.n);
    naive_attention_backward_gpu_ws(b.q, b.k, b.v, b.dO, saved, b.rest, b.dq, b.dk, b.dv, bh, 1, T, D, DT_BF16, nullptr);
    widen_out(dq, b.dq, b.n); widen_out(dk, b.dk, b.n); widen_out(dv, b.dv, b.n);
    return 0;
}

static size_t fused16_scratch(long bh, long T, long D)
{
    const BackwardKernel *bk = bf16_backward(D);
    return bf16_tensors(bh, T, D) + (bk ? bk->workspace(bh, 1, T, D, DT_BF16) : 0);
}
static int fused16_fwd(const float *q, const float *k, const float *v, float *o, float *saved, void *scratch, long bh,
                       long T, long D)
{
    const FusedKernel *f = bf16_forward(D);
    if (!f) { fprintf(stderr, "%s: fused-bf16 attention: %s (D = %ld)\n", g_prog, fused_bf16_unavailable(D), D); return -1; }
    Bf16 b(scratch, bh, T, D);
    round_in(b.q, q, b.n); round_in(b.k, k, b.n); round_in(b.v, v, b.n);
    if (f->launch_l(b.q, b.k, b.v, b.o, saved, bh, 1, T, D, DT_BF16, 1, nullptr) != 0) return -1;
    widen_out(o, b.o, b.n);
    return 0;
}
static int fused16_bwd(const float *q, const float *k, const float *v, const float *o, const float *dO, const float *saved,
                       float *dq, float *dk, float *dv, void *scratch, long bh, long T, long D)
{
    const BackwardKernel *bk = bf16_backward(D);
    if (!bk) { fprintf(stderr, "%s: fused-bf16 attention: %s (D = %ld)\n", g_prog, fused_bf16_unavailable(D), D); return -1; }
    Bf16 b(scratch, bh, T, D);
    /* O as the backward reads it: the forward's bf16 o widened and rounded again, the same bits */
    round_in(b.q, q, b.n); round_in(b.k, k, b.n); round_in(b.v, v, b.n); round_in(b.o, o, b.n); round_in(b.dO, dO, b.n);
    if (bk->launch(b.q, b.k, b.v, b.o, b.dO, saved, b.dq, b.dk, b.dv, b.rest, bh, 1, T, D, DT_BF16, 1, nullptr) != 0)
        return -1;
    widen_out(dq, b.dq, b.n); widen_out(dk, b.dk, b.n); widen_out(dv, b.dv, b.n);
    return 0;
}

extern "C" const GpuAttention GPU_ATTN_NAIVE_BF16 = {
    "naive-bf16", "naive-bf16: the same cuBLAS attention on bf16 copies of q, k, v; S and P in bf16, P kept",
    naive16_saved, naive16_scratch, naive16_fwd, naive16_bwd, nullptr};
extern "C" const GpuAttention GPU_ATTN_FUSED_BF16 = {
    "fused-bf16", "fused-bf16: step 05's tensor-core forward writing L and its tensor-core backward, on bf16 copies",
    fused_saved, fused16_scratch, fused16_fwd, fused16_bwd, fused_bf16_unavailable};

// --- the layers, forward and backward (gpt.c's functions, one kernel each) ------------------

/* x[b,t] = wte[token] + wpe[t] */
__global__ void encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int BT, int T, int C)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * C) return;
    const int bt = (int)(i / C), c = (int)(i % C);
    out[i] = wte[(size_t)tokens[bt] * C + c] + wpe[(size_t)(bt % T) * C + c];
}

/* dwte[v, c] += dout[bt, c] over the positions bt whose token is v, in the CPU's order (bt rising): one
 * thread per (v, c), so no two threads add into one element and no atomics are needed. */
__global__ void encoder_backward_wte(float *dwte, const float *dout, const int *tokens, int BT, int V, int C)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)V * C) return;
    const int v = (int)(i / C), c = (int)(i % C);
    float s = dwte[i];
    for (int bt = 0; bt < BT; bt++)
        if (tokens[bt] == v) s += dout[(size_t)bt * C + c];
    dwte[i] = s;
}

/* dwpe[t, c] += dout[b, t, c] over the batch, b rising: one thread per (t, c). */
__global__ void encoder_backward_wpe(float *dwpe, const float *dout, int B, int T, int C)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T * C) return;
    float s = dwpe[i];
    for (int b = 0; b < B; b++) s += dout[(size_t)b * T * C + i];
    dwpe[i] = s;
}

__device__ __forceinline__ float warp_sum(float x)
{
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
__device__ __forceinline__ float warp_max(float x)
{
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

constexpr int ROW_WARPS = 8; // rows (warps) per block for the row kernels

/* y = (x - mean) / sqrt(var + 1e-5) * w + b over the C channels of each position; mean and rstd kept. */
__global__ void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                                  int BT, int C)
{
    const int bt = blockIdx.x * ROW_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (bt >= BT) return;
    const float *x = inp + (size_t)bt * C;
    float m = 0.0f, v = 0.0f;
    for (int c = lane; c < C; c += 32) m += x[c];
    m = warp_sum(m) / C;
    for (int c = lane; c < C; c += 32) v += (x[c] - m) * (x[c] - m);
    const float s = 1.0f / sqrtf(warp_sum(v) / C + 1e-5f);
    for (int c = lane; c < C; c += 32) out[(size_t)bt * C + c] = (x[c] - m) * s * w[c] + b[c];
    if (lane == 0) { mean[bt] = m; rstd[bt] = s; }
}

/* With xhat = (x - mean) rstd and g = dy * w:  dx = rstd (g - mean(g) - xhat mean(g xhat)). dw and db,
 * sums over the rows, are layernorm_dwdb's. */
__global__ void layernorm_backward(float *dinp, const float *dout, const float *inp, const float *w, const float *mean,
                                   const float *rstd, int BT, int C)
{
    const int bt = blockIdx.x * ROW_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (bt >= BT) return;
    const float *dy = dout + (size_t)bt * C, *x = inp + (size_t)bt * C;
    float *dx = dinp + (size_t)bt * C;
    float g_mean = 0.0f, gx_mean = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float xhat = (x[c] - mean[bt]) * rstd[bt], g = dy[c] * w[c];
        g_mean += g;
        gx_mean += g * xhat;
    }
    g_mean = warp_sum(g_mean) / C;
    gx_mean = warp_sum(gx_mean) / C;
    for (int c = lane; c < C; c += 32) {
        const float xhat = (x[c] - mean[bt]) * rstd[bt], g = dy[c] * w[c];
        dx[c] += rstd[bt] * (g - g_mean - xhat * gx_mean);
    }
}

/* Sums over rows into one vector (a bias's gradient, LayerNorm's dw and db), without atomics: block
 * (x, chunk) sums its chunk of rows for its columns into part[chunk][col]; colsum_finish then adds the
 * chunks in order. Two launches, the same result every run. */
__global__ void colsum_partial(float *part, const float *x, int rows, int cols, int rows_per)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x, chunk = blockIdx.y;
    if (c >= cols) return;
    const int r1 = min(rows, (chunk + 1) * rows_per);
    float s = 0.0f;
    for (int r = chunk * rows_per; r < r1; r++) s += x[(size_t)r * cols + c];
    part[(size_t)chunk * cols + c] = s;
}

/* LayerNorm's dw += dy xhat and db += dy, the same way: part[chunk][c] for dw, part[chunk][C + c] for db. */
__global__ void layernorm_dwdb_partial(float *part, const float *dout, const float *inp, const float *mean,
                                       const float *rstd, int BT, int C, int rows_per)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x, chunk = blockIdx.y;
    if (c >= C) return;
    const int r1 = min(BT, (chunk + 1) * rows_per);
    float dw = 0.0f, db = 0.0f;
    for (int r = chunk * rows_per; r < r1; r++) {
        const float dy = dout[(size_t)r * C + c], xhat = (inp[(size_t)r * C + c] - mean[r]) * rstd[r];
        dw += dy * xhat;
        db += dy;
    }
    part[(size_t)chunk * 2 * C + c] = dw;
    part[(size_t)chunk * 2 * C + C + c] = db;
}

/* out0[c] += sum over chunks of part[chunk][c] for c < split, out1[c - split] for the rest. */
__global__ void colsum_finish(float *out0, float *out1, const float *part, int chunks, int cols, int split)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = 0.0f;
    for (int k = 0; k < chunks; k++) s += part[(size_t)k * cols + c];
    if (c < split) out0[c] += s;
    else out1[c - split] += s;
}

__global__ void add_bias(float *out, const float *bias, int BT, int OC)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)BT * OC) out[i] += bias[i % OC];
}

/* GELU, tanh form (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
#define GELU_K 0.7978845608f /* sqrt(2/pi) */
__global__ void gelu_forward(float *out, const float *inp, size_t n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
}

__global__ void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float x = inp[i], u = GELU_K * (x + 0.044715f * x * x * x), t = tanhf(u);
    const float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] += dout[i] * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
}

__global__ void residual_forward(float *out, const float *a, const float *b, size_t n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

__global__ void residual_backward(float *da, float *db, const float *dout, size_t n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { da[i] += dout[i]; db[i] += dout[i]; }
}

/* probs = softmax(logits) per position (stable); losses = -log probs[target]. One warp per position. */
__global__ void crossentropy_forward(float *probs, float *losses, const float *logits, const int *targets, int BT, int V)
{
    const int bt = blockIdx.x * ROW_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (bt >= BT) return;
    const float *x = logits + (size_t)bt * V;
    float *p = probs + (size_t)bt * V, mx = -INFINITY, sum = 0.0f;
    for (int i = lane; i < V; i += 32) mx = fmaxf(mx, x[i]);
    mx = warp_max(mx);
    for (int i = lane; i < V; i += 32) { p[i] = expf(x[i] - mx); sum += p[i]; }
    sum = warp_sum(sum);
    for (int i = lane; i < V; i += 32) p[i] /= sum;
    __syncwarp();
    if (targets && lane == 0) losses[bt] = -logf(p[targets[bt]]);
}

/* d loss_mean / d logits = (probs - onehot(target)) / BT */
__global__ void crossentropy_backward(float *dlogits, const float *probs, const int *targets, int BT, int V)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * V) return;
    const int bt = (int)(i / V), v = (int)(i % V);
    dlogits[i] += (probs[i] - (v == targets[bt] ? 1.0f : 0.0f)) * (1.0f / BT);
}

/* gpt.c's split_heads and merge_heads: [B, T, S] rows, head h in channels hD .. hD+D-1, to and from the
 * attention's [B, H, T, D]; sigma multiplies on the way. One thread per element of the [B, H, T, D] side. */
__global__ void split_heads(float *dst, const float *src, int S, float sigma, int B, int T, int H, int D)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * H * T * D) return;
    const int d = (int)(i % D), t = (int)(i / D % T), h = (int)(i / D / T % H), b = (int)(i / D / T / H);
    dst[i] = sigma * src[((size_t)b * T + t) * S + h * D + d];
}

__global__ void merge_heads(float *dst, const float *src, int S, float sigma, int B, int T, int H, int D)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * H * T * D) return;
    const int d = (int)(i % D), t = (int)(i / D % T), h = (int)(i / D / T % H), b = (int)(i / D / T / H);
    dst[((size_t)b * T + t) * S + h * D + d] = sigma * src[i];
}

/* AdamW, gpt_adamw's loop with one thread per parameter; c1, c2 the bias corrections. */
__global__ void adamw(float *params, const float *grads, float *mm, float *vv, size_t n, float lr, float wd, float c1,
                      float c2)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, g = grads[i];
    mm[i] = b1 * mm[i] + (1.0f - b1) * g;           // first moment
    vv[i] = b2 * vv[i] + (1.0f - b2) * g * g;       // second moment
    const float mhat = mm[i] / c1, vhat = vv[i] / c2;
    params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * params[i]);
}

// --- the launches, one per gpt.c call --------------------------------------------------------

constexpr int TPB = 256;
#define LAUNCH_1D(kernel, n, ...)                                          \
    do {                                                                   \
        kernel<<<blocks_for((n), TPB), TPB>>>(__VA_ARGS__);                \
        CUDA_CHECK_LAST();                                                 \
    } while (0)
#define LAUNCH_ROWS(kernel, rows, ...)                                     \
    do {                                                                   \
        kernel<<<blocks_for((rows), ROW_WARPS), 32 * ROW_WARPS>>>(__VA_ARGS__); \
        CUDA_CHECK_LAST();                                                 \
    } while (0)

/* Rows per chunk of the column sums: at least 32, and at most 256 chunks. */
static int chunk_rows(int rows) { return rows / 256 + 1 > 32 ? rows / 256 + 1 : 32; }
static int chunks_of(int rows) { return (rows + chunk_rows(rows) - 1) / chunk_rows(rows); }

/* out[c] += sum of x's rows (x [rows, cols]) */
static void colsum_add(float *out, const float *x, int rows, int cols, float *part)
{
    const int rp = chunk_rows(rows), ch = chunks_of(rows);
    colsum_partial<<<dim3(blocks_for(cols, 128), ch), 128>>>(part, x, rows, cols, rp);
    CUDA_CHECK_LAST();
    colsum_finish<<<blocks_for(cols, 128), 128>>>(out, nullptr, part, ch, cols, cols);
    CUDA_CHECK_LAST();
}

/* out [BT, OC] = inp [BT, C] weight^T + bias, weight [OC, C]. Row-major X is column-major X^T, so cuBLAS
 * computes out^T = weight inp^T: op(weight) = T (it is stored [OC, C]: column-major C x OC). */
static void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int BT, int C, int OC)
{
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSgemm(blas(), CUBLAS_OP_T, CUBLAS_OP_N, OC, BT, C, &one, weight, C, inp, C, &zero, out, OC));
    if (bias) LAUNCH_1D(add_bias, (size_t)BT * OC, out, bias, BT, OC);
}

/* dinp += dout weight;  dweight += dout^T inp;  dbias += colsum(dout). (beta = 1: added, as on the CPU) */
static void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int BT, int C, int OC, float *part)
{
    const float one = 1.0f;
    CUBLAS_CHECK(cublasSgemm(blas(), CUBLAS_OP_N, CUBLAS_OP_N, C, BT, OC, &one, weight, C, dout, OC, &one, dinp, C));
    CUBLAS_CHECK(cublasSgemm(blas(), CUBLAS_OP_N, CUBLAS_OP_T, C, OC, BT, &one, inp, C, dout, OC, &one, dweight, C));
    if (dbias) colsum_add(dbias, dout, BT, OC, part);
}

static void layernorm_backward_all(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                                   const float *w, const float *mean, const float *rstd, int BT, int C, float *part)
{
    LAUNCH_ROWS(layernorm_backward, BT, dinp, dout, inp, w, mean, rstd, BT, C);
    const int rp = chunk_rows(BT), ch = chunks_of(BT);
    layernorm_dwdb_partial<<<dim3(blocks_for(C, 128), ch), 128>>>(part, dout, inp, mean, rstd, BT, C, rp);
    CUDA_CHECK_LAST();
    colsum_finish<<<blocks_for(2 * C, 128), 128>>>(dw, db, part, ch, 2 * C, C);
    CUDA_CHECK_LAST();
}

// --- sizes, build, free -----------------------------------------------------------------------

/* Floats of the column-sum scratch: chunks x the widest sum (4C for fcb, 3C for qkvb, 2C for LayerNorm).
 * chunks_of(rows) is at most 256 but does not grow with rows (rows / (rows / 256 + 1) can shrink), and a
 * forward may run fewer rows than the model was built for: the most it can be, then. */
static size_t colsum_floats(const GPTConfig *c, int B)
{
    const int rows = B * c->T;
    return (size_t)(rows >= 256 * 32 ? 256 : chunks_of(rows)) * 4 * c->C;
}

extern "C" size_t gpt_gpu_bytes(const GPTConfig *c, int B, const GpuAttention *a, size_t *saved_per_layer)
{
    size_t ps[NUM_PARAMS], as[NUM_ACTS], gs[NUM_ACTS];
    const long bh = (long)B * c->H;
    const size_t saved = a->saved_floats(bh, c->T);
    gpt_param_sizes(c, ps);
    gpt_act_sizes(c, B, saved, 0, as);
    gpt_act_sizes(c, B, saved, 1, gs);
    if (saved_per_layer) *saved_per_layer = saved * sizeof(float);
    return (4 * gpt_sum_sizes(ps, NUM_PARAMS) + gpt_sum_sizes(as, NUM_ACTS) + gpt_sum_sizes(gs, NUM_ACTS) +
            colsum_floats(c, B)) * sizeof(float) +
           a->scratch_bytes(bh, c->T, c->C / c->H) + 2 * (size_t)B * c->T * sizeof(int);
}

extern "C" void gpt_gpu_free(GPTGpu *m)
{
    void *const list[] = {m->params_mem, m->grads_mem, m->m_mem, m->v_mem, m->acts_mem, m->grad_acts_mem,
                          m->attn_scratch, m->colsum, m->tokens, m->targets};
    for (void *p : list) dfree(p);
    for (void *e : m->ev)
        if (e) CUDA_CHECK(cudaEventDestroy((cudaEvent_t)e));
    tfree(m->losses_host);
    memset(m, 0, sizeof *m);
}

extern "C" int gpt_gpu_build(GPTGpu *m, const GPTConfig *c, int B, const GpuAttention *a, float score_scale,
                             const float *params, int say_oom)
{
    size_t gs[NUM_ACTS];
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    m->attn = a;
    m->score_scale = score_scale;
    m->B = B;
    const long bh = (long)B * c->H;
    gpt_param_sizes(c, m->param_sizes);
    m->num_params = gpt_sum_sizes(m->param_sizes, NUM_PARAMS);
    gpt_act_sizes(c, B, a->saved_floats(bh, c->T), 0, m->act_sizes);
    gpt_act_sizes(c, B, 0, 1, gs);
    m->num_acts = gpt_sum_sizes(m->act_sizes, NUM_ACTS);
    m->num_grad_acts = gpt_sum_sizes(gs, NUM_ACTS);
    const size_t np = m->num_params * sizeof(float), bt = (size_t)B * c->T;
    /* every buffer or none: each dmalloc_try honours --mem-limit and the device's own memory */
    struct { void **p; size_t bytes; } want[] = {
        {(void **)&m->params_mem, np}, {(void **)&m->grads_mem, np}, {(void **)&m->m_mem, np}, {(void **)&m->v_mem, np},
        {(void **)&m->acts_mem, m->num_acts * sizeof(float)}, {(void **)&m->grad_acts_mem, m->num_grad_acts * sizeof(float)},
        {&m->attn_scratch, a->scratch_bytes(bh, c->T, c->C / c->H)}, {(void **)&m->colsum, colsum_floats(c, B) * sizeof(float)},
        {(void **)&m->tokens, bt * sizeof(int)}, {(void **)&m->targets, bt * sizeof(int)}};
    const size_t total = gpt_gpu_bytes(c, B, a, nullptr);
    for (auto &w : want) {
        *w.p = dmalloc_try(w.bytes);
        if (!*w.p) {
            char b1[32], b2[32], lim[160];
            if (say_oom)
                fprintf(stderr, "%s: out of device memory: asked for %zu bytes (%s) for the %s model in all (a buffer of "
                        "%zu did not fit), %s in use by this program, %s\n", g_prog, total,
                        fmt_bytes((double)total, b1, sizeof b1), a->name, w.bytes,
                        fmt_bytes((double)dmem_current(), b2, sizeof b2), dmem_limit_desc(lim, sizeof lim));
            gpt_gpu_free(m);
            return -1;
        }
    }
    m->losses_host = (float *)xmalloc(bt * sizeof(float), "losses");
    m->bytes = total;
    CUDA_CHECK(cudaEventCreate((cudaEvent_t *)&m->ev[0]));
    CUDA_CHECK(cudaEventCreate((cudaEvent_t *)&m->ev[1]));
    gpt_point_params(&m->params, m->params_mem, m->param_sizes);
    gpt_point_params(&m->grads, m->grads_mem, m->param_sizes);
    gpt_point_acts(&m->acts, m->acts_mem, m->act_sizes);
    gpt_point_acts(&m->grad_acts, m->grad_acts_mem, gs);
    CUDA_WAITED("the model's upload", cudaMemcpy(m->params_mem, params, np, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(m->m_mem, 0, np));
    CUDA_CHECK(cudaMemset(m->v_mem, 0, np));
    /* activations zeroed once: the slices past B*T rows of a shorter batch are then never uninitialised */
    CUDA_CHECK(cudaMemset(m->acts_mem, 0, m->num_acts * sizeof(float)));
    return 0;
}

extern "C" void gpt_gpu_download(const GPTGpu *m, float *params, float *grads)
{
    if (params) CUDA_WAITED("the model's download", cudaMemcpy(params, m->params_mem, m->num_params * sizeof(float), cudaMemcpyDeviceToHost));
    if (grads) CUDA_WAITED("the model's download", cudaMemcpy(grads, m->grads_mem, m->num_params * sizeof(float), cudaMemcpyDeviceToHost));
}

// --- forward, backward, AdamW: gpt.c's, call for call -----------------------------------------

/* time_attn: the events around one attention call, and the wait for its end */
static void attn_timer(GPTGpu *m, int stop)
{
    if (!m->time_attn) return;
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)m->ev[stop]));
    if (!stop) return;
    float ms = 0;
    CUDA_WAITED("the attention timer", cudaEventSynchronize((cudaEvent_t)m->ev[1]));
    CUDA_CHECK(cudaEventElapsedTime(&ms, (cudaEvent_t)m->ev[0], (cudaEvent_t)m->ev[1]));
    m->attn_ms += ms;
}

extern "C" double gpt_gpu_forward(GPTGpu *m, const int *tokens, const int *targets, int B, int T)
{
    const int V = m->cfg.V, L = m->cfg.L, H = m->cfg.H, C = m->cfg.C, D = C / H;
    const size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;
    const size_t saved = m->act_sizes[6] / L;
    Params *p = &m->params;
    Acts *a = &m->acts;
    float *q = a->scratch, *k = q + BTC, *v = k + BTC, *o = v + BTC;
    if (B > m->B || T > m->cfg.T || m->attn->saved_floats((long)B * H, T) > saved) {
        fprintf(stderr, "%s: gpt_gpu_forward: B=%d T=%d beyond the model built for B=%d T=%d\n", g_prog, B, T, m->B, m->cfg.T);
        return -1.0;
    }
    CUDA_WAITED("the model's upload", cudaMemcpy(m->tokens, tokens, BT * sizeof(int), cudaMemcpyHostToDevice));
    if (targets) CUDA_WAITED("the model's upload", cudaMemcpy(m->targets, targets, BT * sizeof(int), cudaMemcpyHostToDevice));
    LAUNCH_1D(encoder_forward, BTC, a->encoded, m->tokens, p->wte, p->wpe, (int)BT, T, C);
    for (int l = 0; l < L; l++) {
        const float *x = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BTC;
        float *ln1 = a->ln1 + l * BTC, *qkv = a->qkv + l * BTC * 3, *atty = a->atty + l * BTC;
        float *att_saved = a->att_saved + l * saved, *attproj = a->attproj + l * BTC, *res2 = a->residual2 + l * BTC;
        float *ln2 = a->ln2 + l * BTC, *fch = a->fch + l * BTC * 4, *fchg = a->fch_gelu + l * BTC * 4;
        float *fcproj = a->fcproj + l * BTC, *res3 = a->residual3 + l * BTC;
        LAUNCH_ROWS(layernorm_forward, BT, ln1, a->ln1_mean + l * BT, a->ln1_rstd + l * BT, x, p->ln1w + l * C,
                    p->ln1b + l * C, (int)BT, C);
        matmul_forward(qkv, ln1, p->qkvw + (size_t)l * 3 * C * C, p->qkvb + l * 3 * C, (int)BT, C, 3 * C);
        LAUNCH_1D(split_heads, BTC, q, qkv, 3 * C, m->score_scale, B, T, H, D);
        LAUNCH_1D(split_heads, BTC, k, qkv + C, 3 * C, 1.0f, B, T, H, D);
        LAUNCH_1D(split_heads, BTC, v, qkv + 2 * C, 3 * C, 1.0f, B, T, H, D);
        attn_timer(m, 0);
        if (m->attn->forward(q, k, v, o, att_saved, m->attn_scratch, (long)B * H, T, D) != 0) return -1.0;
        attn_timer(m, 1);
        LAUNCH_1D(merge_heads, BTC, atty, o, C, 1.0f, B, T, H, D);
        matmul_forward(attproj, atty, p->attprojw + (size_t)l * C * C, p->attprojb + l * C, (int)BT, C, C);
        LAUNCH_1D(residual_forward, BTC, res2, x, attproj, BTC);
        LAUNCH_ROWS(layernorm_forward, BT, ln2, a->ln2_mean + l * BT, a->ln2_rstd + l * BT, res2, p->ln2w + l * C,
                    p->ln2b + l * C, (int)BT, C);
        matmul_forward(fch, ln2, p->fcw + (size_t)l * 4 * C * C, p->fcb + l * 4 * C, (int)BT, C, 4 * C);
        LAUNCH_1D(gelu_forward, BTC * 4, fchg, fch, BTC * 4);
        matmul_forward(fcproj, fchg, p->fcprojw + (size_t)l * C * 4 * C, p->fcprojb + l * C, (int)BT, 4 * C, C);
        LAUNCH_1D(residual_forward, BTC, res3, res2, fcproj, BTC);
    }
    LAUNCH_ROWS(layernorm_forward, BT, a->lnf, a->lnf_mean, a->lnf_rstd, a->residual3 + (size_t)(L - 1) * BTC, p->lnfw,
                p->lnfb, (int)BT, C);
    matmul_forward(a->logits, a->lnf, p->wte, nullptr, (int)BT, C, V); // the output head is wte, tied
    LAUNCH_ROWS(crossentropy_forward, BT, a->probs, a->losses, a->logits, targets ? m->targets : nullptr, (int)BT, V);
    if (!targets) { CUDA_WAITED("the model's sync", cudaDeviceSynchronize()); return 0.0; }
    CUDA_WAITED("the model's download", cudaMemcpy(m->losses_host, a->losses, BT * sizeof(float), cudaMemcpyDeviceToHost));
    double sum = 0.0;
    for (size_t i = 0; i < BT; i++) sum += m->losses_host[i];
    return sum / BT;
}

extern "C" int gpt_gpu_backward(GPTGpu *m, int B, int T)
{
    const int V = m->cfg.V, L = m->cfg.L, H = m->cfg.H, C = m->cfg.C, D = C / H;
    const size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;
    const size_t saved = m->act_sizes[6] / L;
    Params *p = &m->params, *g = &m->grads;
    Acts *a = &m->acts, *ga = &m->grad_acts;
    float *q = a->scratch, *k = q + BTC, *v = k + BTC, *o = v + BTC;
    float *dq = o + BTC, *dk = dq + BTC, *dv = dk + BTC, *dO = dv + BTC;
    float *part = m->colsum;
    CUDA_CHECK(cudaMemsetAsync(m->grads_mem, 0, m->num_params * sizeof(float)));
    CUDA_CHECK(cudaMemsetAsync(m->grad_acts_mem, 0, m->num_grad_acts * sizeof(float)));

    LAUNCH_1D(crossentropy_backward, BT * V, ga->logits, a->probs, m->targets, (int)BT, V);
    matmul_backward(ga->lnf, g->wte, nullptr, ga->logits, a->lnf, p->wte, (int)BT, C, V, part);
    float *dres = ga->residual3 + (size_t)(L - 1) * BTC;
    layernorm_backward_all(dres, g->lnfw, g->lnfb, ga->lnf, a->residual3 + (size_t)(L - 1) * BTC, p->lnfw, a->lnf_mean,
                           a->lnf_rstd, (int)BT, C, part);
    for (int l = L - 1; l >= 0; l--) {
        const float *x = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BTC;
        float *dx = l == 0 ? ga->encoded : ga->residual3 + (size_t)(l - 1) * BTC;
        const size_t lc = (size_t)l * C;
        dres = ga->residual3 + l * BTC;
        LAUNCH_1D(residual_backward, BTC, ga->residual2 + l * BTC, ga->fcproj + l * BTC, dres, BTC);
        matmul_backward(ga->fch_gelu + l * BTC * 4, g->fcprojw + lc * 4 * C, g->fcprojb + lc, ga->fcproj + l * BTC,
                        a->fch_gelu + l * BTC * 4, p->fcprojw + lc * 4 * C, (int)BT, 4 * C, C, part);
        LAUNCH_1D(gelu_backward, BTC * 4, ga->fch + l * BTC * 4, a->fch + l * BTC * 4, ga->fch_gelu + l * BTC * 4, BTC * 4);
        matmul_backward(ga->ln2 + l * BTC, g->fcw + lc * 4 * C, g->fcb + lc * 4, ga->fch + l * BTC * 4, a->ln2 + l * BTC,
                        p->fcw + lc * 4 * C, (int)BT, C, 4 * C, part);
        layernorm_backward_all(ga->residual2 + l * BTC, g->ln2w + lc, g->ln2b + lc, ga->ln2 + l * BTC,
                               a->residual2 + l * BTC, p->ln2w + lc, a->ln2_mean + l * BT, a->ln2_rstd + l * BT, (int)BT,
                               C, part);
        LAUNCH_1D(residual_backward, BTC, dx, ga->attproj + l * BTC, ga->residual2 + l * BTC, BTC);
        matmul_backward(ga->atty + l * BTC, g->attprojw + lc * C, g->attprojb + lc, ga->attproj + l * BTC,
                        a->atty + l * BTC, p->attprojw + lc * C, (int)BT, C, C, part);
        const float *qkv = a->qkv + l * BTC * 3;
        float *dqkv = ga->qkv + l * BTC * 3;
        LAUNCH_1D(split_heads, BTC, q, qkv, 3 * C, m->score_scale, B, T, H, D);
        LAUNCH_1D(split_heads, BTC, k, qkv + C, 3 * C, 1.0f, B, T, H, D);
        LAUNCH_1D(split_heads, BTC, v, qkv + 2 * C, 3 * C, 1.0f, B, T, H, D);
        LAUNCH_1D(split_heads, BTC, o, a->atty + l * BTC, C, 1.0f, B, T, H, D);
        LAUNCH_1D(split_heads, BTC, dO, ga->atty + l * BTC, C, 1.0f, B, T, H, D);
        attn_timer(m, 0);
        if (m->attn->backward(q, k, v, o, dO, a->att_saved + l * saved, dq, dk, dv, m->attn_scratch, (long)B * H, T, D) != 0)
            return -1;
        attn_timer(m, 1);
        LAUNCH_1D(merge_heads, BTC, dqkv, dq, 3 * C, m->score_scale, B, T, H, D);
        LAUNCH_1D(merge_heads, BTC, dqkv + C, dk, 3 * C, 1.0f, B, T, H, D);
        LAUNCH_1D(merge_heads, BTC, dqkv + 2 * C, dv, 3 * C, 1.0f, B, T, H, D);
        matmul_backward(ga->ln1 + l * BTC, g->qkvw + lc * 3 * C, g->qkvb + lc * 3, dqkv, a->ln1 + l * BTC,
                        p->qkvw + lc * 3 * C, (int)BT, C, 3 * C, part);
        layernorm_backward_all(dx, g->ln1w + lc, g->ln1b + lc, ga->ln1 + l * BTC, x, p->ln1w + lc, a->ln1_mean + l * BT,
                               a->ln1_rstd + l * BT, (int)BT, C, part);
    }
    LAUNCH_1D(encoder_backward_wte, (size_t)V * C, g->wte, ga->encoded, m->tokens, (int)BT, V, C);
    LAUNCH_1D(encoder_backward_wpe, (size_t)T * C, g->wpe, ga->encoded, B, T, C);
    return 0;
}

extern "C" void gpt_gpu_adamw(GPTGpu *m, float lr, float weight_decay)
{
    m->step++;
    const float c1 = 1.0f - powf(0.9f, (float)m->step), c2 = 1.0f - powf(0.95f, (float)m->step); // bias corrections
    LAUNCH_1D(adamw, m->num_params, m->params_mem, m->grads_mem, m->m_mem, m->v_mem, m->num_params, lr, weight_decay, c1, c2);
}

// --- decode with a KV cache (--generate --device gpu): gpt.c's gpt_decode, call for call ----------------

/* x[r] = wte[token r] + wpe[pos0 + r]: encoder_forward for n new rows at their positions. */
__global__ void encoder_forward_at(float *out, const int *tokens, const float *wte, const float *wpe, int n, int pos0, int C)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n * C) return;
    const int r = (int)(i / C), c = (int)(i % C);
    out[i] = wte[(size_t)tokens[r] * C + c] + wpe[(size_t)(pos0 + r) * C + c];
}

/* The new rows' q [H, n, D] (times the score scale), and their k and v into the cache [H, T, D] of this
 * layer at positions pos0 .. pos0 + n - 1 (gpt_decode's loop over heads, one thread per element). */
__global__ void kv_append(float *q, float *kc, float *vc, const float *qkv, int n, int pos0, int H, int D, int T,
                          float sigma)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)H * n * D) return;
    const int d = (int)(i % D), r = (int)(i / D % n), h = (int)(i / D / n), C = H * D;
    const float *row = qkv + (size_t)r * 3 * C + h * D + d;
    q[i] = sigma * row[0];
    kc[((size_t)h * T + pos0 + r) * D + d] = row[C];
    vc[((size_t)h * T + pos0 + r) * D + d] = row[2 * C];
}

enum { DEC_MAX_NEW = 16 };

struct GpuDecoder {
    GPTGpu m;                     /* the model (B = 1); its own forward serves the check's full forward */
    float *kc, *vc;               /* [L, H, T, D] each: the cache */
    float *rows;                  /* the activations of DEC_MAX_NEW rows, gpt_decode's scratch */
    int *tokens, *len_d;
    int len;
    const DecodeKernel *dk;       /* step 05's decode kernel 1: fp32, one thread per query row */
    char what[192];
};

extern "C" GpuDecoder *gpt_gpu_decoder_open(const GPTConfig *c, const float *params)
{
    GpuDecoder *g = (GpuDecoder *)xmalloc(sizeof *g, "GPU decoder");
    memset(g, 0, sizeof *g);
    g->dk = decode_kernel(1);
    if (!g->dk || !g->dk->supports_dim(c->C / c->H)) {
        fprintf(stderr, "%s: --generate --device gpu: decode kernel 1 does not take this model's D = %d (16, 32, 64, 128)\n",
                g_prog, c->C / c->H);
        tfree(g);
        return nullptr;
    }
    if (gpt_gpu_build(&g->m, c, 1, &GPU_ATTN_FUSED, 1.0f, params, 1) != 0) { tfree(g); return nullptr; }
    const size_t cache = (size_t)c->L * c->T * c->C, per_row = (size_t)c->C * 19 + 2 + c->V;
    g->kc = (float *)dmalloc_try(cache * sizeof(float));
    g->vc = g->kc ? (float *)dmalloc_try(cache * sizeof(float)) : nullptr;
    g->rows = g->vc ? (float *)dmalloc_try(DEC_MAX_NEW * per_row * sizeof(float)) : nullptr;
    g->tokens = g->rows ? (int *)dmalloc_try(DEC_MAX_NEW * sizeof(int)) : nullptr;
    g->len_d = g->tokens ? (int *)dmalloc_try(sizeof(int)) : nullptr;
    if (!g->len_d) {
        char b1[32], b2[32], lim[160];
        const size_t want = (2 * cache + DEC_MAX_NEW * per_row) * sizeof(float) + (DEC_MAX_NEW + 1) * sizeof(int);
        fprintf(stderr, "%s: out of device memory: asked for %zu bytes (%s) for the KV cache and decode rows, %s in use by "
                "this program, %s\n", g_prog, want, fmt_bytes((double)want, b1, sizeof b1),
                fmt_bytes((double)dmem_current(), b2, sizeof b2), dmem_limit_desc(lim, sizeof lim));
        gpt_gpu_decoder_close(g);
        return nullptr;
    }
    snprintf(g->what, sizeof g->what, "the fp32 model of --train --device gpu (cuBLAS SGEMM), each new row's attention by "
             "step 05's decode kernel %d (%s)", g->dk->id, g->dk->name);
    return g;
}

extern "C" const char *gpt_gpu_decoder_what(const GpuDecoder *g) { return g->what; }

extern "C" void gpt_gpu_decoder_reset(void *d) { ((GpuDecoder *)d)->len = 0; }

extern "C" int gpt_gpu_decoder_decode(void *d, const int *tokens, int n, float *logits)
{
    GpuDecoder *g = (GpuDecoder *)d;
    GPTGpu *m = &g->m;
    const int V = m->cfg.V, L = m->cfg.L, H = m->cfg.H, C = m->cfg.C, D = C / H, T = m->cfg.T, pos0 = g->len;
    if (n < 1 || n > DEC_MAX_NEW || pos0 + n > T) {
        fprintf(stderr, "%s: gpt_gpu_decoder_decode: %d new rows at position %d: the cache holds %d positions, %d rows a "
                "call\n", g_prog, n, pos0, T, DEC_MAX_NEW);
        return -1;
    }
    const Params *p = &m->params;
    const size_t nC = (size_t)n * C;
    float *x = g->rows, *ln = x + nC, *atty = ln + nC, *attproj = atty + nC, *res2 = attproj + nC, *lnf = res2 + nC;
    float *qkv = lnf + nC, *fch = qkv + 3 * nC, *fchg = fch + 4 * nC, *q = fchg + 4 * nC, *o = q + nC;
    float *mean = o + nC, *rstd = mean + n, *lg = rstd + n;
    const int len = pos0 + n;
    CUDA_WAITED("the model's upload", cudaMemcpy(g->tokens, tokens, (size_t)n * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_WAITED("the model's upload", cudaMemcpy(g->len_d, &len, sizeof(int), cudaMemcpyHostToDevice));
    LAUNCH_1D(encoder_forward_at, nC, x, g->tokens, p->wte, p->wpe, n, pos0, C);
    for (int l = 0; l < L; l++) {
        float *kc = g->kc + (size_t)l * T * C, *vc = g->vc + (size_t)l * T * C;   /* this layer's [H, T, D] */
        LAUNCH_ROWS(layernorm_forward, n, ln, mean, rstd, x, p->ln1w + l * C, p->ln1b + l * C, n, C);
        matmul_forward(qkv, ln, p->qkvw + (size_t)l * 3 * C * C, p->qkvb + l * 3 * C, n, C, 3 * C);
        LAUNCH_1D(kv_append, nC, q, kc, vc, qkv, n, pos0, H, D, T, m->score_scale);
        /* the new rows against every cached position: one sequence, H heads over H KV heads, its cache [H, T, D] */
        const DecodeArgs a = {1, H, H, D, n, T, g->len_d, DT_FP32, q, o, kc, vc, nullptr, nullptr, nullptr, 0, 0, 0, 0};
        if (g->dk->launch(&a, nullptr, nullptr) != 0) return -1;
        LAUNCH_1D(merge_heads, nC, atty, o, C, 1.0f, 1, n, H, D);
        matmul_forward(attproj, atty, p->attprojw + (size_t)l * C * C, p->attprojb + l * C, n, C, C);
        LAUNCH_1D(residual_forward, nC, res2, x, attproj, nC);
        LAUNCH_ROWS(layernorm_forward, n, ln, mean, rstd, res2, p->ln2w + l * C, p->ln2b + l * C, n, C);
        matmul_forward(fch, ln, p->fcw + (size_t)l * 4 * C * C, p->fcb + l * 4 * C, n, C, 4 * C);
        LAUNCH_1D(gelu_forward, 4 * nC, fchg, fch, 4 * nC);
        matmul_forward(attproj, fchg, p->fcprojw + (size_t)l * C * 4 * C, p->fcprojb + l * C, n, 4 * C, C);
        LAUNCH_1D(residual_forward, nC, x, res2, attproj, nC);
    }
    LAUNCH_ROWS(layernorm_forward, n, lnf, mean, rstd, x, p->lnfw, p->lnfb, n, C);
    matmul_forward(lg, lnf, p->wte, nullptr, n, C, V);
    CUDA_WAITED("the model's download", cudaMemcpy(logits, lg, (size_t)n * V * sizeof(float), cudaMemcpyDeviceToHost));
    g->len = len;
    return 0;
}

extern "C" int gpt_gpu_decoder_full(void *d, const int *tokens, int T, float *logits)
{
    GpuDecoder *g = (GpuDecoder *)d;
    if (gpt_gpu_forward(&g->m, tokens, nullptr, 1, T) < 0) return -1;
    CUDA_WAITED("the model's download", cudaMemcpy(logits, g->m.acts.logits, (size_t)T * g->m.cfg.V * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
}

extern "C" void gpt_gpu_decoder_close(GpuDecoder *g)
{
    if (!g) return;
    dfree(g->kc); dfree(g->vc); dfree(g->rows); dfree(g->tokens); dfree(g->len_d);
    gpt_gpu_free(&g->m);
    tfree(g);
}
