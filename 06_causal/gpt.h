/* gpt.h: the small GPT of step 06's --train (gpt.c), with its attention behind one interface. */
#ifndef GPT_H
#define GPT_H

#include <stddef.h>

#include "naive_backward.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ the attention */

/* The one thing that changes between the runs of --train: how attention is
 * computed. The model calls forward and backward on [bh, T, D] tensors, and
 * keeps `saved` from one to the other for each layer: P [bh, T, T] for naive
 * attention, L [bh, T] for the tiled one. Nothing else in the model knows
 * which attention it has (the chapter: "the interface is identical"). */
typedef struct Attention Attention;
struct Attention {
    const char *name;        /* "naive", "tiled", ... */
    AttnKind kind;           /* the mask, the break and the tiles */
    /* floats kept per layer from forward to backward, for bh heads of T rows */
    size_t (*saved_floats)(long bh, long T);
    /* o from q, k, v; saved gets what the backward needs. 0, or -1 out of memory. */
    int (*forward)(const Attention *a, const float *q, const float *k, const float *v, float *o, float *saved,
                   long bh, long T, long D);
    /* dq, dk, dv from dO and what the forward saved. 0, or -1 out of memory. */
    int (*backward)(const Attention *a, const float *q, const float *k, const float *v, const float *o,
                    const float *dO, const float *saved, float *dq, float *dk, float *dv, long bh, long T, long D);
};

/* Naive attention: saves P [bh, T, T]; naive_forward_p and naive_backward (naive_backward.c). */
size_t attn_naive_saved(long bh, long T);
int attn_naive_forward(const Attention *a, const float *q, const float *k, const float *v, float *o, float *saved,
                       long bh, long T, long D);
int attn_naive_backward(const Attention *a, const float *q, const float *k, const float *v, const float *o,
                        const float *dO, const float *saved, float *dq, float *dk, float *dv, long bh, long T, long D);
/* Tiled attention: saves L [bh, T]; causal_forward_cpu and flash_backward_cpu (causal.c, flash_backward.c). */
size_t attn_tiled_saved(long bh, long T);
int attn_tiled_forward(const Attention *a, const float *q, const float *k, const float *v, float *o, float *saved,
                       long bh, long T, long D);
int attn_tiled_backward(const Attention *a, const float *q, const float *k, const float *v, const float *o,
                        const float *dO, const float *saved, float *dq, float *dk, float *dv, long bh, long T, long D);
#define ATTENTION_NAIVE(name, mask, brk, BR, BC) {name, {mask, brk, BR, BC}, attn_naive_saved, attn_naive_forward, attn_naive_backward}
#define ATTENTION_TILED(name, mask, BR, BC) {name, {mask, 0, BR, BC}, attn_tiled_saved, attn_tiled_forward, attn_tiled_backward}

/* ---------------------------------------------------------------------- the model */

typedef struct {
    int V;   /* vocabulary: distinct symbols */
    int T;   /* context length */
    int L;   /* layers */
    int H;   /* heads; head dim D = C / H */
    int C;   /* channels */
} GPTConfig;

enum { NUM_PARAMS = 16 };
/* The parameter tensors, in one contiguous buffer (llm.c's layout); per-layer ones stacked [L, ...]. */
typedef struct {
    float *wte;      /* [V, C]       token embedding, also the output head (tied) */
    float *wpe;      /* [T, C]       position embedding */
    float *ln1w;     /* [L, C] */
    float *ln1b;     /* [L, C] */
    float *qkvw;     /* [L, 3C, C] */
    float *qkvb;     /* [L, 3C] */
    float *attprojw; /* [L, C, C] */
    float *attprojb; /* [L, C] */
    float *ln2w;     /* [L, C] */
    float *ln2b;     /* [L, C] */
    float *fcw;      /* [L, 4C, C] */
    float *fcb;      /* [L, 4C] */
    float *fcprojw;  /* [L, C, 4C] */
    float *fcprojb;  /* [L, C] */
    float *lnfw;     /* [C] */
    float *lnfb;     /* [C] */
} Params;
extern const char *const PARAM_NAMES[NUM_PARAMS];

enum { NUM_ACTS = 23 };
/* Activations of a forward, kept for the backward; per-layer ones stacked [L, ...]. */
typedef struct {
    float *encoded;   /* [B, T, C]    wte + wpe */
    float *ln1;       /* [L, B, T, C] */
    float *ln1_mean;  /* [L, B, T] */
    float *ln1_rstd;  /* [L, B, T] */
    float *qkv;       /* [L, B, T, 3C] */
    float *atty;      /* [L, B, T, C]  attention output, heads side by side */
    float *att_saved; /* [L, saved]    P [B, H, T, T] (naive) or L [B, H, T] (tiled) */
    float *attproj;   /* [L, B, T, C] */
    float *residual2; /* [L, B, T, C] */
    float *ln2;       /* [L, B, T, C] */
    float *ln2_mean;  /* [L, B, T] */
    float *ln2_rstd;  /* [L, B, T] */
    float *fch;       /* [L, B, T, 4C] */
    float *fch_gelu;  /* [L, B, T, 4C] */
    float *fcproj;    /* [L, B, T, C] */
    float *residual3; /* [L, B, T, C] */
    float *lnf;       /* [B, T, C] */
    float *lnf_mean;  /* [B, T] */
    float *lnf_rstd;  /* [B, T] */
    float *logits;    /* [B, T, V] */
    float *probs;     /* [B, T, V] */
    float *losses;    /* [B, T] */
    float *scratch;   /* [8, B, T, C]   q, k, v, o and dq, dk, dv, dO in the attention's [B, H, T, D] */
} Acts;

typedef struct {
    GPTConfig cfg;
    const Attention *attn;
    float score_scale;           /* scores multiplied by this (1: the model as it is) */
    int B;                       /* batch the activations are sized for */
    size_t param_sizes[NUM_PARAMS], num_params;
    Params params, grads;
    float *params_mem, *grads_mem, *m_mem, *v_mem; /* AdamW's first and second moments */
    size_t act_sizes[NUM_ACTS], num_acts, num_grad_acts;
    Acts acts, grad_acts;
    float *acts_mem, *grad_acts_mem;
    long step;                   /* AdamW steps taken */
    float max_score;             /* largest attention score of the last forward (Break 1 overflows past 88.72) */
} GPT;

/* The layout behind gpt_build, shared with the GPU model (gpt_gpu.cu), which keeps the very same tables on
 * the device so that its parameters and gradients compare with the CPU's element for element.
 * gpt_param_sizes: NUM_PARAMS sizes, in floats. gpt_act_sizes: NUM_ACTS sizes for batch B with `saved`
 * floats per layer for the attention; grad = 1 gives the gradient activations' (no saved tensors, no
 * scratch). gpt_point_*: the struct's pointers at consecutive slices of mem. gpt_init_params: GPT-2's
 * initialisation from seed (the same numbers on every machine). */
void gpt_param_sizes(const GPTConfig *c, size_t *sizes);
void gpt_act_sizes(const GPTConfig *c, int B, size_t saved, int grad, size_t *sizes);
size_t gpt_sum_sizes(const size_t *sizes, int n);
void gpt_point_params(Params *p, float *mem, const size_t *sizes);
void gpt_point_acts(Acts *a, float *mem, const size_t *sizes);
void gpt_init_params(float *params, const GPTConfig *c, const size_t *sizes, unsigned long long seed);
/* The initial weights gpt_build gives a model of config c from seed, in a new host array (tfree it): the
 * GPU runs start from these numbers. */
float *gpt_init_alloc(const GPTConfig *c, unsigned long long seed);

/* Bytes gpt_build would allocate for this config, batch B and attention a:
 * params, grads and AdamW's moments, activations and their grads. */
size_t gpt_bytes(const GPTConfig *c, int B, const Attention *a, size_t *saved_per_layer);
/* Allocate (tracked) and initialise from seed (GPT-2's: N(0, 0.02), the
 * residual projections 0.02/sqrt(2L), LayerNorm 1 and 0). 0, or -1 if it does
 * not fit under the memory limit (nothing left allocated). */
int gpt_build(GPT *m, const GPTConfig *c, int B, const Attention *a, float score_scale, unsigned long long seed);
void gpt_free(GPT *m);
/* Forward on tokens [B, T] (T <= cfg.T); targets [B, T] or NULL. With targets,
 * the mean cross-entropy (NaN if anything overflowed); else 0. attn: the
 * attention to run (NULL: the model's own). -1 on out of memory. */
double gpt_forward(GPT *m, const int *tokens, const int *targets, int B, int T, const Attention *attn);
/* Backward of the last forward (which had targets): fills m->grads. 0, or -1 out of memory. */
int gpt_backward(GPT *m, const int *tokens, const int *targets, int B, int T);
/* One AdamW step on m->grads (betas 0.9, 0.95, eps 1e-8). */
void gpt_adamw(GPT *m, float lr, float weight_decay);
/* --------------------------------------------------------------- decode with a KV cache */

/* Generation (--generate): one new token at a time, each a single query row. Its keys and values are
 * appended to a cache and every earlier position's are read back from it, instead of recomputing the
 * whole prefix through every layer for each token (the book's Chapter 13). */
typedef struct {
    int len;          /* positions cached so far (0 .. cfg.T) */
    int max_new;      /* the most rows one gpt_decode call takes (16) */
    long split;       /* S: the keys of each row split into S chunks, merged (flash_decode_cpu; 1: one pass) */
    long BC;          /* the K/V tile of the attention (the tiled attention's, so that S = 1 is its loop) */
    float *k, *v;     /* [L, H, T, D] each: the cache */
    float *scratch;   /* the activations of max_new rows, one layer at a time */
    size_t bytes;     /* what the cache (k and v) takes */
} KVCache;
/* The cache for model config c: 0, or -1 if it does not fit under the memory limit. */
int kv_cache_init(KVCache *kv, const GPTConfig *c, int max_new, long split, long BC);
void kv_cache_free(KVCache *kv);
/* The n (1 .. max_new) tokens at positions kv->len .. kv->len + n - 1 through the model: each layer's k and v
 * of the new rows written into the cache, then the new rows' attention against every cached position
 * (causal among the new rows) by flash_decode_cpu, the rest of the layer row by row as gpt_forward does it.
 * logits [n, V] get each new row's logits; kv->len grows by n. 0, or -1 (one line why) if the cache is full
 * or n is out of range, or the attention's buffers do not fit. */
int gpt_decode(GPT *m, KVCache *kv, const int *tokens, int n, float *logits);

/* ./step06 --check: each layer's backward (LayerNorm, linear, GELU, cross-entropy) against finite differences
 * of its own forward on unit-scale inputs (PASS/FAIL lines). */
void gpt_layer_checks(void);
/* d f / d *p by the five-point stencil (f(p-2h) - 8 f(p-h) + 8 f(p+h) - f(p+2h)) / 12h, O(h^4): f(ctx) is
 * evaluated with *p moved, then *p restored. Serves layer-fd (above) and model-fd (grad_check.c). */
double gpt_fd5(double (*f)(void *ctx), void *ctx, float *p, float h);

#ifdef __cplusplus
}
#endif

#endif
