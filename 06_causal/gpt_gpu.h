/* gpt_gpu.h: step 06's GPT on the GPU (gpt_gpu.cu): the same model as gpt.c, the same tensor tables, on
 * the device; the linear layers through cuBLAS, every other layer a small kernel of gpt_gpu.cu, the
 * attention naive (cuBLAS, P kept) or fused (step 05's kernels, L kept), in fp32 or in bf16. */
#ifndef GPT_GPU_H
#define GPT_GPU_H

#include <stddef.h>

#include "gpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The attention on the GPU, as Attention (gpt.h) is on the CPU: the model calls forward and backward on
 * device [bh, T, D] fp32 tensors and keeps `saved` per layer between them (P [bh, T, T] for naive, L [bh, T]
 * for fused); `scratch` is scratch_bytes() of device memory shared by the layers (naive: S, then dP and dS,
 * [bh, T, T]; fused: the backward kernel's workspace, Delta [bh, T]). 0, or -1 after one line. */
typedef struct GpuAttention GpuAttention;
struct GpuAttention {
    const char *name;
    const char *what;    /* one line for the output */
    size_t (*saved_floats)(long bh, long T);
    size_t (*scratch_bytes)(long bh, long T, long D);
    int (*forward)(const float *q, const float *k, const float *v, float *o, float *saved, void *scratch, long bh,
                   long T, long D);
    int (*backward)(const float *q, const float *k, const float *v, const float *o, const float *dO,
                    const float *saved, float *dq, float *dk, float *dv, void *scratch, long bh, long T, long D);
    /* NULL if it runs for any D this model allows; else NULL when it runs at head dim D on this GPU, or one
     * line saying why not */
    const char *(*unavailable)(long D);
};
/* fp32, the model's own precision: naive (cuBLAS) and fused (kernel 2 + backward kernel 1). */
extern const GpuAttention GPU_ATTN_NAIVE, GPU_ATTN_FUSED;
/* Mixed precision: the model stays fp32, the attention's q, k, v (and for the backward o and dO) are
 * rounded to bf16 on the way in, its results widened back to fp32; inside, bf16 storage and fp32
 * accumulation. naive-bf16: cuBLAS with S and P in bf16 (P kept, half naive fp32's bytes); fused-bf16:
 * step 05's best tensor-core forward that writes L and its best backward kernel (D = 64, 128). */
extern const GpuAttention GPU_ATTN_NAIVE_BF16, GPU_ATTN_FUSED_BF16;
/* "kernel 18 (persistent) + backward kernel 6 (bulk dQ)": what fused-bf16 runs at D here, or NULL. */
const char *gpu_attn_bf16_kernels(long D);

/* The model on the device: the CPU model's fields (GPT, gpt.h) with device pointers, plus the batch, the
 * attention's scratch and the column-sum scratch of the bias and LayerNorm gradients. */
typedef struct {
    GPTConfig cfg;
    const GpuAttention *attn;
    float score_scale;
    int B;
    size_t param_sizes[NUM_PARAMS], num_params;
    Params params, grads;
    float *params_mem, *grads_mem, *m_mem, *v_mem;
    size_t act_sizes[NUM_ACTS], num_acts, num_grad_acts;
    Acts acts, grad_acts;
    float *acts_mem, *grad_acts_mem;
    void *attn_scratch;
    float *colsum;       /* partial column sums [chunks, 4C] */
    int *tokens, *targets; /* [B, T] */
    float *losses_host;  /* host [B, T]: the loss is summed on the host in double, as gpt.c sums it */
    size_t bytes;        /* device bytes this model holds (tracked) */
    long step;
    int time_attn;       /* 1: each attention call bracketed by CUDA events, its time added to attn_ms (it waits for
                          * each call to finish: for measuring, not for training) */
    double attn_ms;
    void *ev[2];         /* the two cudaEvent_t of time_attn */
} GPTGpu;

/* Device bytes gpt_gpu_build would allocate (model, AdamW state, activations and their grads, attention's
 * saved tensors and scratch, batch and column-sum scratch). *saved_per_layer: the attention's, in bytes. */
size_t gpt_gpu_bytes(const GPTConfig *c, int B, const GpuAttention *a, size_t *saved_per_layer);
/* Allocate on the device (tracked: dmalloc_try, under --mem-limit) and copy params (host, the layout of
 * gpt_param_sizes) in. 0; or -1 if it does not fit, nothing left allocated (with say_oom: after one line on
 * stderr with the bytes asked for). */
int gpt_gpu_build(GPTGpu *m, const GPTConfig *c, int B, const GpuAttention *a, float score_scale, const float *params,
                  int say_oom);
void gpt_gpu_free(GPTGpu *m);
/* gpt_forward (gpt.h) on the device: tokens, targets on the host [B, T]. With targets, the mean cross-entropy
 * (the losses summed on the host in double, in gpt.c's order); else 0. -1.0 if the attention refused. */
double gpt_gpu_forward(GPTGpu *m, const int *tokens, const int *targets, int B, int T);
/* gpt_backward of the last forward (which had targets). 0, or -1 if the attention refused. */
int gpt_gpu_backward(GPTGpu *m, int B, int T);
void gpt_gpu_adamw(GPTGpu *m, float lr, float weight_decay);
/* Parameters and gradients back to the host (either may be NULL), num_params floats each. */
void gpt_gpu_download(const GPTGpu *m, float *params, float *grads);

/* --generate --device gpu: the model on the device with a KV cache (fp32, [L, H, T, D] per k and v), the new
 * rows' attention by step 05's decode kernel 1 (fp32). The three calls generate.c's Decoder asks for:
 * decode (n new tokens appended, their logits [n, V] to the host), reset (an empty cache), full (the whole
 * window through gpt_gpu_forward, logits [T, V] to the host, for the check). open: NULL after one line. */
typedef struct GpuDecoder GpuDecoder;
GpuDecoder *gpt_gpu_decoder_open(const GPTConfig *c, const float *params);
int gpt_gpu_decoder_decode(void *d, const int *tokens, int n, float *logits);
void gpt_gpu_decoder_reset(void *d);
int gpt_gpu_decoder_full(void *d, const int *tokens, int T, float *logits);
const char *gpt_gpu_decoder_what(const GpuDecoder *d);
void gpt_gpu_decoder_close(GpuDecoder *d);

#ifdef __cplusplus
}
#endif

#endif
