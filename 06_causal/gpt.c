/*
 * gpt.c: a small GPT in plain C, fp32, every layer's forward and backward
 * written out (the shape of karpathy/llm.c's train_gpt2.c): token and position
 * embeddings, L blocks of pre-LayerNorm causal multi-head attention and an MLP
 * with GELU, a final LayerNorm, the output head tied to the token embedding,
 * cross-entropy, AdamW.
 *
 *   x = wte[token] + wpe[t]
 *   for each layer:  x = x + attproj(attention(qkv(LayerNorm1(x))))
 *                    x = x + fcproj(GELU(fc(LayerNorm2(x))))
 *   logits = LayerNorm_f(x) wte^T,  loss = cross-entropy(softmax(logits), next token)
 *
 * The attention is the model's one variable part (m->attn, gpt.h): the same
 * model trains with naive attention, with the tiled forward and
 * FlashAttention-2's backward, or with a broken one, and nothing else changes.
 *
 * Layout: every parameter tensor in one buffer (params_mem) and its gradient
 * in another of the same shape (grads_mem); activations the same way. The
 * sizes are tables, so a tensor is found by its place in the table.
 */
#include "common.h"
#include "gpt.h"
#include "causal.h"
#include "../04_online_softmax/flash.h"

#include <math.h>
#include <string.h>

const char *const PARAM_NAMES[NUM_PARAMS] = {"wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
                                             "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

// --- the attention, two ways, behind the same three pointers (gpt.h) -------------------

size_t attn_naive_saved(long bh, long T) { return (size_t)bh * T * T; }   // P [bh, T, T]
size_t attn_tiled_saved(long bh, long T) { return (size_t)bh * T; }       // L [bh, T]

int attn_naive_forward(const Attention *a, const float *q, const float *k, const float *v, float *o, float *saved,
                       long bh, long T, long D)
{
    naive_forward_p(q, k, v, o, saved, bh, T, D, &a->kind);
    return 0;
}

int attn_naive_backward(const Attention *a, const float *q, const float *k, const float *v, const float *o,
                        const float *dO, const float *saved, float *dq, float *dk, float *dv, long bh, long T, long D)
{
    (void)o; // naive attention's backward needs P, not O
    return naive_backward(q, k, v, saved, dO, dq, dk, dv, bh, T, D, &a->kind);
}

int attn_tiled_forward(const Attention *a, const float *q, const float *k, const float *v, float *o, float *saved,
                       long bh, long T, long D)
{
    return causal_forward_cpu(q, k, v, o, saved, bh, T, D, a->kind.BR, a->kind.BC, a->kind.mask, NULL) < 0 ? -1 : 0;
}

int attn_tiled_backward(const Attention *a, const float *q, const float *k, const float *v, const float *o,
                        const float *dO, const float *saved, float *dq, float *dk, float *dv, long bh, long T, long D)
{
    return flash_backward_cpu(q, k, v, o, dO, saved, dq, dk, dv, bh, T, D, a->kind.BR, a->kind.BC, a->kind.mask, NULL);
}

// --- the layers, forward and backward ---------------------------------------------------

/* x[b,t] = wte[token] + wpe[t] */
static void encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C)
{
    for (int bt = 0; bt < B * T; bt++) {
        const float *we = wte + (size_t)tokens[bt] * C, *pe = wpe + (size_t)(bt % T) * C;
        for (int c = 0; c < C; c++) out[(size_t)bt * C + c] = we[c] + pe[c];
    }
}

static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C)
{
    for (int bt = 0; bt < B * T; bt++) {
        float *dwe = dwte + (size_t)tokens[bt] * C, *dpe = dwpe + (size_t)(bt % T) * C;
        for (int c = 0; c < C; c++) { dwe[c] += dout[(size_t)bt * C + c]; dpe[c] += dout[(size_t)bt * C + c]; }
    }
}

/* y = (x - mean) / sqrt(var + 1e-5) * w + b over the C channels of each position; mean and rstd kept. */
static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                              int BT, int C)
{
    for (int bt = 0; bt < BT; bt++) {
        const float *x = inp + (size_t)bt * C;
        float m = 0.0f, v = 0.0f;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        const float s = 1.0f / sqrtf(v / C + 1e-5f);
        for (int c = 0; c < C; c++) out[(size_t)bt * C + c] = (x[c] - m) * s * w[c] + b[c];
        mean[bt] = m;
        rstd[bt] = s;
    }
}

/* With xhat = (x - mean) rstd and g = dy * w:  dx = rstd (g - mean(g) - xhat mean(g xhat)). */
static void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                               const float *mean, const float *rstd, int BT, int C)
{
    for (int bt = 0; bt < BT; bt++) {
        const float *dy = dout + (size_t)bt * C, *x = inp + (size_t)bt * C;
        float *dx = dinp + (size_t)bt * C;
        float g_mean = 0.0f, gx_mean = 0.0f;
        for (int c = 0; c < C; c++) {
            const float xhat = (x[c] - mean[bt]) * rstd[bt], g = dy[c] * w[c];
            g_mean += g;
            gx_mean += g * xhat;
        }
        g_mean /= C;
        gx_mean /= C;
        for (int c = 0; c < C; c++) {
            const float xhat = (x[c] - mean[bt]) * rstd[bt], g = dy[c] * w[c];
            db[c] += dy[c];
            dw[c] += dy[c] * xhat;
            dx[c] += rstd[bt] * (g - g_mean - xhat * gx_mean);
        }
    }
}

/* out [BT, OC] = inp [BT, C] weight^T + bias, weight [OC, C] (PyTorch's Linear). Four rows of inp share each
 * row of weight while it is in cache; dot_f32 keeps 8 sums in flight. */
static void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int BT, int C, int OC)
{
    for (int o = 0; o < OC; o++) {
        const float *wr = weight + (size_t)o * C;
        const float b = bias ? bias[o] : 0.0f;
        for (int bt = 0; bt < BT; bt++) out[(size_t)bt * OC + o] = b + dot_f32(inp + (size_t)bt * C, wr, C);
    }
}

/* dinp += dout weight;  dweight += dout^T inp;  dbias += colsum(dout). */
static void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int BT, int C, int OC)
{
    for (int bt = 0; bt < BT; bt++) {
        float *dx = dinp + (size_t)bt * C;
        const float *dy = dout + (size_t)bt * OC;
        for (int o = 0; o < OC; o++) {
            const float g = dy[o], *wr = weight + (size_t)o * C;
            for (int c = 0; c < C; c++) dx[c] += g * wr[c];
        }
    }
    for (int o = 0; o < OC; o++) {
        float *dw = dweight + (size_t)o * C, db = 0.0f;
        for (int bt = 0; bt < BT; bt++) {
            const float g = dout[(size_t)bt * OC + o], *x = inp + (size_t)bt * C;
            for (int c = 0; c < C; c++) dw[c] += g * x[c];
            db += g;
        }
        if (dbias) dbias[o] += db;
    }
}

/* GELU, tanh form (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
#define GELU_K 0.7978845608f /* sqrt(2/pi) */
static void gelu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
    }
}

static void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i], u = GELU_K * (x + 0.044715f * x * x * x), t = tanhf(u);
        const float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += dout[i] * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
    }
}

static void residual_forward(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void residual_backward(float *da, float *db, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) { da[i] += dout[i]; db[i] += dout[i]; }
}

/* probs = softmax(logits) per position (stable); losses = -log probs[target]. */
static void crossentropy_forward(float *probs, float *losses, const float *logits, const int *targets, int BT, int V)
{
    for (int bt = 0; bt < BT; bt++) {
        const float *x = logits + (size_t)bt * V;
        float *p = probs + (size_t)bt * V, mx = -INFINITY, sum = 0.0f;
        for (int i = 0; i < V; i++) mx = fmaxf(mx, x[i]);
        for (int i = 0; i < V; i++) { p[i] = expf(x[i] - mx); sum += p[i]; }
        for (int i = 0; i < V; i++) p[i] /= sum;
        if (targets) losses[bt] = -logf(p[targets[bt]]);
    }
}

/* d loss_mean / d logits = (probs - onehot(target)) / BT */
static void crossentropy_backward(float *dlogits, const float *probs, const int *targets, int BT, int V)
{
    const float inv = 1.0f / BT;
    for (int bt = 0; bt < BT; bt++)
        for (int i = 0; i < V; i++)
            dlogits[(size_t)bt * V + i] += (probs[(size_t)bt * V + i] - (i == targets[bt] ? 1.0f : 0.0f)) * inv;
}

/* The heads apart and back together. The model's tensors are [B, T, S] rows (S = 3C for qkv, with q, k
 * and v side by side, S = C for the attention output), head h in channels hD .. hD+D-1; the attention
 * functions take each head contiguous, [B, H, T, D]. sigma multiplies on the way (the score scale on q,
 * and by the chain rule on dq). */
static void split_heads(float *dst, const float *src, int S, float sigma, int B, int T, int H, int D)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++)
                    dst[(((size_t)b * H + h) * T + t) * D + d] = sigma * src[((size_t)b * T + t) * S + h * D + d];
}

static void merge_heads(float *dst, const float *src, int S, float sigma, int B, int T, int H, int D)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++)
                    dst[((size_t)b * T + t) * S + h * D + d] = sigma * src[(((size_t)b * H + h) * T + t) * D + d];
}

/* max of q . k / sqrt(D) over the causal scores: what Break 1 exponentiates raw. */
static float max_causal_score(const float *q, const float *k, long bh, long T, long D)
{
    const float scale = 1.0f / sqrtf((float)D);
    float mx = -INFINITY;
    for (long h = 0; h < bh; h++)
        for (long i = 0; i < T; i++)
            for (long j = 0; j <= i; j++)
                mx = fmaxf(mx, dot_f32(q + (h * T + i) * D, k + (h * T + j) * D, D) * scale);
    return mx;
}

// --- sizes, build, free ------------------------------------------------------------------

void gpt_param_sizes(const GPTConfig *c, size_t *s)
{
    const size_t V = c->V, T = c->T, L = c->L, C = c->C;
    const size_t sz[NUM_PARAMS] = {V * C, T * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
                                   L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C};
    memcpy(s, sz, sizeof sz);
}

void gpt_act_sizes(const GPTConfig *c, int B, size_t saved, int grad, size_t *s)
{
    const size_t BT = (size_t)B * c->T, L = c->L, C = c->C, V = c->V;
    const size_t sz[NUM_ACTS] = {BT * C, L * BT * C, L * BT, L * BT, L * BT * 3 * C, L * BT * C, grad ? 0 : L * saved,
                                 L * BT * C, L * BT * C, L * BT * C, L * BT, L * BT, L * BT * 4 * C, L * BT * 4 * C,
                                 L * BT * C, L * BT * C, BT * C, BT, BT, BT * V, BT * V, BT, grad ? 0 : 8 * BT * C};
    memcpy(s, sz, sizeof sz);
}

size_t gpt_sum_sizes(const size_t *s, int n)
{
    size_t t = 0;
    for (int i = 0; i < n; i++) t += s[i];
    return t;
}

/* The tensors' pointers in table order, so that one loop can point them at consecutive slices of a buffer. */
static void param_fields(Params *p, float **f[NUM_PARAMS])
{
    float **const list[NUM_PARAMS] = {&p->wte, &p->wpe, &p->ln1w, &p->ln1b, &p->qkvw, &p->qkvb, &p->attprojw, &p->attprojb,
                                      &p->ln2w, &p->ln2b, &p->fcw, &p->fcb, &p->fcprojw, &p->fcprojb, &p->lnfw, &p->lnfb};
    memcpy(f, list, sizeof list);
}

static void act_fields(Acts *a, float **f[NUM_ACTS])
{
    float **const list[NUM_ACTS] = {&a->encoded, &a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->qkv, &a->atty, &a->att_saved,
                                    &a->attproj, &a->residual2, &a->ln2, &a->ln2_mean, &a->ln2_rstd, &a->fch,
                                    &a->fch_gelu, &a->fcproj, &a->residual3, &a->lnf, &a->lnf_mean, &a->lnf_rstd,
                                    &a->logits, &a->probs, &a->losses, &a->scratch};
    memcpy(f, list, sizeof list);
}

static void carve(float **fields[], float *mem, const size_t *sizes, int n)
{
    for (int i = 0; i < n; i++) { *fields[i] = sizes[i] ? mem : NULL; mem += sizes[i]; }
}

void gpt_point_params(Params *p, float *mem, const size_t *sizes)
{
    float **f[NUM_PARAMS];
    param_fields(p, f);
    carve(f, mem, sizes, NUM_PARAMS);
}

void gpt_point_acts(Acts *a, float *mem, const size_t *sizes)
{
    float **f[NUM_ACTS];
    act_fields(a, f);
    carve(f, mem, sizes, NUM_ACTS);
}

void gpt_init_params(float *p, const GPTConfig *c, const size_t *sizes, unsigned long long seed)
{
    /* GPT-2's initialisation: weights N(0, 0.02), the two projections into the residual stream
     * N(0, 0.02 / sqrt(2L)) so that the stream's variance does not grow with depth, biases 0, LayerNorm 1. */
    Rng rng;
    rng_seed(&rng, seed);
    for (int t = 0; t < NUM_PARAMS; t++) {
        const char *nm = PARAM_NAMES[t];
        const int is_ln_w = !strcmp(nm, "ln1w") || !strcmp(nm, "ln2w") || !strcmp(nm, "lnfw");
        const int is_bias = nm[strlen(nm) - 1] == 'b';
        const float std = !strcmp(nm, "attprojw") || !strcmp(nm, "fcprojw") ? 0.02f / sqrtf(2.0f * c->L) : 0.02f;
        for (size_t i = 0; i < sizes[t]; i++)
            p[i] = is_ln_w ? 1.0f : is_bias ? 0.0f : (float)(std * rng_normal(&rng));
        p += sizes[t];
    }
}

float *gpt_init_alloc(const GPTConfig *c, unsigned long long seed)
{
    size_t ps[NUM_PARAMS];
    gpt_param_sizes(c, ps);
    float *init = xmalloc(gpt_sum_sizes(ps, NUM_PARAMS) * sizeof(float), "initial weights");
    gpt_init_params(init, c, ps, seed);
    return init;
}

size_t gpt_bytes(const GPTConfig *c, int B, const Attention *a, size_t *saved_per_layer)
{
    size_t ps[NUM_PARAMS], as[NUM_ACTS], gs[NUM_ACTS];
    const size_t saved = a->saved_floats((long)B * c->H, c->T);
    gpt_param_sizes(c, ps);
    gpt_act_sizes(c, B, saved, 0, as);
    gpt_act_sizes(c, B, saved, 1, gs);
    if (saved_per_layer) *saved_per_layer = saved * sizeof(float);
    return (4 * gpt_sum_sizes(ps, NUM_PARAMS) + gpt_sum_sizes(as, NUM_ACTS) + gpt_sum_sizes(gs, NUM_ACTS)) * sizeof(float);
}

int gpt_build(GPT *m, const GPTConfig *c, int B, const Attention *a, float score_scale, unsigned long long seed)
{
    size_t gs[NUM_ACTS];
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    m->attn = a;
    m->score_scale = score_scale;
    m->B = B;
    gpt_param_sizes(c, m->param_sizes);
    m->num_params = gpt_sum_sizes(m->param_sizes, NUM_PARAMS);
    gpt_act_sizes(c, B, a->saved_floats((long)B * c->H, c->T), 0, m->act_sizes);
    gpt_act_sizes(c, B, 0, 1, gs);
    m->num_acts = gpt_sum_sizes(m->act_sizes, NUM_ACTS);
    m->num_grad_acts = gpt_sum_sizes(gs, NUM_ACTS);
    const size_t np = m->num_params * sizeof(float);
    m->params_mem = tmalloc(np);
    m->grads_mem = tmalloc(np);
    m->m_mem = tmalloc(np);
    m->v_mem = tmalloc(np);
    m->acts_mem = tmalloc(m->num_acts * sizeof(float));
    m->grad_acts_mem = tmalloc(m->num_grad_acts * sizeof(float));
    if (!m->params_mem || !m->grads_mem || !m->m_mem || !m->v_mem || !m->acts_mem || !m->grad_acts_mem) {
        gpt_free(m);
        return -1;
    }
    gpt_point_params(&m->params, m->params_mem, m->param_sizes);
    gpt_point_params(&m->grads, m->grads_mem, m->param_sizes);
    gpt_point_acts(&m->acts, m->acts_mem, m->act_sizes);
    gpt_point_acts(&m->grad_acts, m->grad_acts_mem, gs);
    memset(m->m_mem, 0, np);
    memset(m->v_mem, 0, np);
    gpt_init_params(m->params_mem, c, m->param_sizes, seed);
    return 0;
}

void gpt_free(GPT *m)
{
    tfree(m->params_mem); tfree(m->grads_mem); tfree(m->m_mem); tfree(m->v_mem);
    tfree(m->acts_mem); tfree(m->grad_acts_mem);
    memset(m, 0, sizeof *m);
}

// --- forward, backward, AdamW -------------------------------------------------------------

double gpt_forward(GPT *m, const int *tokens, const int *targets, int B, int T, const Attention *attn)
{
    const int V = m->cfg.V, L = m->cfg.L, H = m->cfg.H, C = m->cfg.C, D = C / H, Tm = m->cfg.T;
    const size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;
    const size_t saved = m->act_sizes[6] / L;                   // per layer, for batch m->B at context Tm
    Params *p = &m->params;
    Acts *a = &m->acts;
    float *q = a->scratch, *k = q + BTC, *v = k + BTC, *o = v + BTC;
    if (!attn) attn = m->attn;
    if (B > m->B || T > Tm || attn->saved_floats((long)B * H, T) > saved) {
        fprintf(stderr, "%s: gpt_forward: B=%d T=%d (attention %s) beyond the model built for B=%d T=%d\n", g_prog, B, T,
                attn->name, m->B, Tm);
        return -1.0;
    }
    m->max_score = -INFINITY;
    encoder_forward(a->encoded, tokens, p->wte, p->wpe, B, T, C);
    for (int l = 0; l < L; l++) {
        /* layer l's slices; with T < Tm or B < m->B only the first B*T rows of each are used */
        const float *x = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BTC;
        float *ln1 = a->ln1 + l * BTC, *qkv = a->qkv + l * BTC * 3, *atty = a->atty + l * BTC;
        float *att_saved = a->att_saved + l * saved, *attproj = a->attproj + l * BTC, *res2 = a->residual2 + l * BTC;
        float *ln2 = a->ln2 + l * BTC, *fch = a->fch + l * BTC * 4, *fchg = a->fch_gelu + l * BTC * 4;
        float *fcproj = a->fcproj + l * BTC, *res3 = a->residual3 + l * BTC;
        layernorm_forward(ln1, a->ln1_mean + l * BT, a->ln1_rstd + l * BT, x, p->ln1w + l * C, p->ln1b + l * C, (int)BT, C);
        matmul_forward(qkv, ln1, p->qkvw + (size_t)l * 3 * C * C, p->qkvb + l * 3 * C, (int)BT, C, 3 * C);
        split_heads(q, qkv, 3 * C, m->score_scale, B, T, H, D);
        split_heads(k, qkv + C, 3 * C, 1.0f, B, T, H, D);
        split_heads(v, qkv + 2 * C, 3 * C, 1.0f, B, T, H, D);
        if (attn->kind.brk) m->max_score = fmaxf(m->max_score, max_causal_score(q, k, (long)B * H, T, D));
        if (attn->forward(attn, q, k, v, o, att_saved, (long)B * H, T, D) != 0) return -1.0;
        merge_heads(atty, o, C, 1.0f, B, T, H, D);
        matmul_forward(attproj, atty, p->attprojw + (size_t)l * C * C, p->attprojb + l * C, (int)BT, C, C);
        residual_forward(res2, x, attproj, BTC);
        layernorm_forward(ln2, a->ln2_mean + l * BT, a->ln2_rstd + l * BT, res2, p->ln2w + l * C, p->ln2b + l * C, (int)BT, C);
        matmul_forward(fch, ln2, p->fcw + (size_t)l * 4 * C * C, p->fcb + l * 4 * C, (int)BT, C, 4 * C);
        gelu_forward(fchg, fch, BTC * 4);
        matmul_forward(fcproj, fchg, p->fcprojw + (size_t)l * C * 4 * C, p->fcprojb + l * C, (int)BT, 4 * C, C);
        residual_forward(res3, res2, fcproj, BTC);
    }
    layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, a->residual3 + (size_t)(L - 1) * BTC, p->lnfw, p->lnfb, (int)BT, C);
    matmul_forward(a->logits, a->lnf, p->wte, NULL, (int)BT, C, V); // the output head is wte, tied
    crossentropy_forward(a->probs, a->losses, a->logits, targets, (int)BT, V);
    if (!targets) return 0.0;
    double sum = 0.0;
    for (size_t i = 0; i < BT; i++) sum += a->losses[i];
    return sum / BT;
}

// --- decode: the same layers, n new rows at a time, K and V from the cache ------------------------

/* The scratch of one gpt_decode call, per row: x, ln, atty, attproj, res2, lnf (C each), qkv (3C),
 * fch and its GELU (4C each), q and o of the heads (C each), and LayerNorm's mean and rstd. */
static size_t decode_row_floats(const GPTConfig *c) { return (size_t)c->C * (6 + 3 + 8 + 2) + 2; }

int kv_cache_init(KVCache *kv, const GPTConfig *c, int max_new, long split, long BC)
{
    memset(kv, 0, sizeof *kv);
    kv->max_new = max_new;
    kv->split = split;
    kv->BC = BC;
    const size_t per = (size_t)c->L * c->T * c->C;               // [L, H, T, D] = L T C floats
    kv->bytes = 2 * per * sizeof(float);
    kv->k = tmalloc(per * sizeof(float));
    kv->v = tmalloc(per * sizeof(float));
    kv->scratch = tmalloc((size_t)max_new * decode_row_floats(c) * sizeof(float));
    if (!kv->k || !kv->v || !kv->scratch) { kv_cache_free(kv); return -1; }
    return 0;
}

void kv_cache_free(KVCache *kv)
{
    tfree(kv->k); tfree(kv->v); tfree(kv->scratch);
    memset(kv, 0, sizeof *kv);
}

int gpt_decode(GPT *m, KVCache *kv, const int *tokens, int n, float *logits)
{
    const int V = m->cfg.V, L = m->cfg.L, H = m->cfg.H, C = m->cfg.C, D = C / H, T = m->cfg.T, pos0 = kv->len;
    if (n < 1 || n > kv->max_new || pos0 + n > T) {
        fprintf(stderr, "%s: gpt_decode: %d new rows at position %d: the cache holds %d positions, %d rows a call\n",
                g_prog, n, pos0, T, kv->max_new);
        return -1;
    }
    const Params *p = &m->params;
    float *x = kv->scratch, *ln = x + (size_t)n * C, *atty = ln + (size_t)n * C, *attproj = atty + (size_t)n * C;
    float *res2 = attproj + (size_t)n * C, *lnf = res2 + (size_t)n * C, *qkv = lnf + (size_t)n * C;
    float *fch = qkv + (size_t)n * 3 * C, *fchg = fch + (size_t)n * 4 * C, *q = fchg + (size_t)n * 4 * C;
    float *o = q + (size_t)n * C, *mean = o + (size_t)n * C, *rstd = mean + n;
    for (int r = 0; r < n; r++)                                   // x = wte[token] + wpe[position]
        for (int c = 0; c < C; c++) x[r * C + c] = p->wte[(size_t)tokens[r] * C + c] + p->wpe[(size_t)(pos0 + r) * C + c];
    for (int l = 0; l < L; l++) {
        layernorm_forward(ln, mean, rstd, x, p->ln1w + l * C, p->ln1b + l * C, n, C);
        matmul_forward(qkv, ln, p->qkvw + (size_t)l * 3 * C * C, p->qkvb + l * 3 * C, n, C, 3 * C);
        for (int h = 0; h < H; h++) {
            float *kc = kv->k + (((size_t)l * H + h) * T) * D, *vc = kv->v + (((size_t)l * H + h) * T) * D; // [T, D]
            for (int r = 0; r < n; r++)
                for (int d = 0; d < D; d++) {
                    const float *row = qkv + (size_t)r * 3 * C + h * D + d;
                    q[((size_t)h * n + r) * D + d] = m->score_scale * row[0]; // q, with the score scale as gpt_forward
                    kc[(size_t)(pos0 + r) * D + d] = row[C];                  // k and v of the new rows: into the
                    vc[(size_t)(pos0 + r) * D + d] = row[2 * C];              // cache at their positions
                }
            /* the new rows against every position cached, their own included: causal attention's last rows */
            if (flash_decode_cpu(q + (size_t)h * n * D, kc, vc, o + (size_t)h * n * D, n, pos0 + n, D, kv->BC, kv->split) != 0) {
                mem_oom_line(mem_refused(), "gpt_decode's attention tiles");
                return -1;
            }
        }
        merge_heads(atty, o, C, 1.0f, 1, n, H, D);
        matmul_forward(attproj, atty, p->attprojw + (size_t)l * C * C, p->attprojb + l * C, n, C, C);
        residual_forward(res2, x, attproj, (size_t)n * C);
        layernorm_forward(ln, mean, rstd, res2, p->ln2w + l * C, p->ln2b + l * C, n, C);
        matmul_forward(fch, ln, p->fcw + (size_t)l * 4 * C * C, p->fcb + l * 4 * C, n, C, 4 * C);
        gelu_forward(fchg, fch, (size_t)n * 4 * C);
        matmul_forward(attproj, fchg, p->fcprojw + (size_t)l * C * 4 * C, p->fcprojb + l * C, n, 4 * C, C);
        residual_forward(x, res2, attproj, (size_t)n * C);          // the stream leaving layer l
    }
    layernorm_forward(lnf, mean, rstd, x, p->lnfw, p->lnfb, n, C);
    matmul_forward(logits, lnf, p->wte, NULL, n, C, V);           // the output head is wte, tied
    kv->len += n;
    return 0;
}

int gpt_backward(GPT *m, const int *tokens, const int *targets, int B, int T)
{
    const int V = m->cfg.V, L = m->cfg.L, H = m->cfg.H, C = m->cfg.C, D = C / H;
    const size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;
    const size_t saved = m->act_sizes[6] / L;
    Params *p = &m->params, *g = &m->grads;
    Acts *a = &m->acts, *ga = &m->grad_acts;
    float *q = a->scratch, *k = q + BTC, *v = k + BTC, *o = v + BTC;
    float *dq = o + BTC, *dk = dq + BTC, *dv = dk + BTC, *dO = dv + BTC;
    memset(m->grads_mem, 0, m->num_params * sizeof(float));
    memset(m->grad_acts_mem, 0, m->num_grad_acts * sizeof(float));

    crossentropy_backward(ga->logits, a->probs, targets, (int)BT, V);
    matmul_backward(ga->lnf, g->wte, NULL, ga->logits, a->lnf, p->wte, (int)BT, C, V);
    float *dres = ga->residual3 + (size_t)(L - 1) * BTC;  // d loss / d (the residual stream leaving the last layer)
    layernorm_backward(dres, g->lnfw, g->lnfb, ga->lnf, a->residual3 + (size_t)(L - 1) * BTC, p->lnfw, a->lnf_mean,
                       a->lnf_rstd, (int)BT, C);
    for (int l = L - 1; l >= 0; l--) {
        const float *x = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BTC;
        float *dx = l == 0 ? ga->encoded : ga->residual3 + (size_t)(l - 1) * BTC;
        const size_t lc = (size_t)l * C;
        dres = ga->residual3 + l * BTC;
        /* x + fcproj(GELU(fc(LayerNorm2(res2)))) */
        residual_backward(ga->residual2 + l * BTC, ga->fcproj + l * BTC, dres, BTC);
        matmul_backward(ga->fch_gelu + l * BTC * 4, g->fcprojw + lc * 4 * C, g->fcprojb + lc, ga->fcproj + l * BTC,
                        a->fch_gelu + l * BTC * 4, p->fcprojw + lc * 4 * C, (int)BT, 4 * C, C);
        gelu_backward(ga->fch + l * BTC * 4, a->fch + l * BTC * 4, ga->fch_gelu + l * BTC * 4, BTC * 4);
        matmul_backward(ga->ln2 + l * BTC, g->fcw + lc * 4 * C, g->fcb + lc * 4, ga->fch + l * BTC * 4, a->ln2 + l * BTC,
                        p->fcw + lc * 4 * C, (int)BT, C, 4 * C);
        layernorm_backward(ga->residual2 + l * BTC, g->ln2w + lc, g->ln2b + lc, ga->ln2 + l * BTC, a->residual2 + l * BTC,
                           p->ln2w + lc, a->ln2_mean + l * BT, a->ln2_rstd + l * BT, (int)BT, C);
        /* res2 = x + attproj(attention(qkv(LayerNorm1(x)))) */
        residual_backward(dx, ga->attproj + l * BTC, ga->residual2 + l * BTC, BTC);
        matmul_backward(ga->atty + l * BTC, g->attprojw + lc * C, g->attprojb + lc, ga->attproj + l * BTC,
                        a->atty + l * BTC, p->attprojw + lc * C, (int)BT, C, C);
        /* the attention: the heads apart again (q, k, v from qkv, o from atty, dO from datty), its backward,
         * and dq, dk, dv back into dqkv; dq gets the score scale as q did (the chain rule through sigma q) */
        const float *qkv = a->qkv + l * BTC * 3;
        float *dqkv = ga->qkv + l * BTC * 3;
        split_heads(q, qkv, 3 * C, m->score_scale, B, T, H, D);
        split_heads(k, qkv + C, 3 * C, 1.0f, B, T, H, D);
        split_heads(v, qkv + 2 * C, 3 * C, 1.0f, B, T, H, D);
        split_heads(o, a->atty + l * BTC, C, 1.0f, B, T, H, D);
        split_heads(dO, ga->atty + l * BTC, C, 1.0f, B, T, H, D);
        if (m->attn->backward(m->attn, q, k, v, o, dO, a->att_saved + l * saved, dq, dk, dv, (long)B * H, T, D) != 0)
            return -1;
        merge_heads(dqkv, dq, 3 * C, m->score_scale, B, T, H, D);
        merge_heads(dqkv + C, dk, 3 * C, 1.0f, B, T, H, D);
        merge_heads(dqkv + 2 * C, dv, 3 * C, 1.0f, B, T, H, D);
        matmul_backward(ga->ln1 + l * BTC, g->qkvw + lc * 3 * C, g->qkvb + lc * 3, dqkv, a->ln1 + l * BTC,
                        p->qkvw + lc * 3 * C, (int)BT, C, 3 * C);
        layernorm_backward(dx, g->ln1w + lc, g->ln1b + lc, ga->ln1 + l * BTC, x, p->ln1w + lc, a->ln1_mean + l * BT,
                           a->ln1_rstd + l * BT, (int)BT, C);
    }
    encoder_backward(g->wte, g->wpe, ga->encoded, tokens, B, T, C);
    return 0;
}

void gpt_adamw(GPT *m, float lr, float weight_decay)
{
    const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f;
    m->step++;
    const float c1 = 1.0f - powf(b1, (float)m->step), c2 = 1.0f - powf(b2, (float)m->step); // bias corrections
    for (size_t i = 0; i < m->num_params; i++) {
        const float g = m->grads_mem[i];
        m->m_mem[i] = b1 * m->m_mem[i] + (1.0f - b1) * g;           // first moment
        m->v_mem[i] = b2 * m->v_mem[i] + (1.0f - b2) * g * g;       // second moment
        const float mhat = m->m_mem[i] / c1, vhat = m->v_mem[i] / c2;
        m->params_mem[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * m->params_mem[i]);
    }
}

// --- each layer's backward against finite differences of its own forward (./step06 --check) ----------

/* The model's gradient is checked whole against finite differences (grad_check.c), but at GPT-2's
 * initialisation every pre-activation is near 0, where GELU is x/2 + x^2/sqrt(2 pi): a slip in its cubic
 * term, or anything else that only shows away from 0, moves the model's gradient less than that check's
 * tolerance (seen: GELU's backward with 2.9 for its 3 passed it). So each layer is also checked alone, on
 * inputs of unit scale (std 1.5): its backward against the five-point difference quotient of
 * f = sum_k g_k y_k (cross-entropy: the mean loss), every element of every input. */
enum { LC_LAYERNORM, LC_MATMUL, LC_GELU, LC_CROSSENTROPY, LC_N };
enum { FB = 5, FC = 8, FO = 6, FV = 7 }; /* rows, channels, output channels, vocabulary */
typedef struct {
    float x[FB * FC], w[FO * FC], b[FO > FC ? FO : FC], g[FB * FO > FB * FC ? FB * FO : FB * FC];
    float y[FB * FC], mean[FB], rstd[FB], probs[FB * FV], losses[FB];
    float dx[FB * FC], dw[FO * FC], db[FC];
    int tgt[FB];
} LayerCase;

static const char *const LC_NAME[LC_N] = {"layernorm", "matmul", "gelu", "crossentropy"};

double gpt_fd5(double (*f)(void *ctx), void *ctx, float *p, float h)
{
    static const float at[4] = {-2, -1, 1, 2};
    const float p0 = *p;
    double v[4];
    for (int s = 0; s < 4; s++) {
        *p = p0 + at[s] * h;
        v[s] = f(ctx);
    }
    *p = p0;
    return (v[0] - 8 * v[1] + 8 * v[2] - v[3]) / (12.0 * h);
}

static double layer_f(int kind, LayerCase *L)
{
    double f = 0;
    size_t ny = 0;
    switch (kind) {
    case LC_LAYERNORM: layernorm_forward(L->y, L->mean, L->rstd, L->x, L->w, L->b, FB, FC); ny = FB * FC; break;
    case LC_MATMUL: matmul_forward(L->y, L->x, L->w, L->b, FB, FC, FO); ny = FB * FO; break;
    case LC_GELU: gelu_forward(L->y, L->x, FB * FC); ny = FB * FC; break;
    default:
        crossentropy_forward(L->probs, L->losses, L->x, L->tgt, FB, FV);
        for (int i = 0; i < FB; i++) f += L->losses[i];
        return f / FB;
    }
    for (size_t i = 0; i < ny; i++) f += (double)L->g[i] * L->y[i];
    return f;
}

typedef struct { int kind; LayerCase *L; } LayerF;
static double layer_f_ctx(void *ctx) { const LayerF *lf = ctx; return layer_f(lf->kind, lf->L); }

static void layer_backward(int kind, LayerCase *L)
{
    memset(L->dx, 0, sizeof L->dx); memset(L->dw, 0, sizeof L->dw); memset(L->db, 0, sizeof L->db);
    layer_f(kind, L); /* the forward's saved values (mean, rstd, probs) */
    switch (kind) {
    case LC_LAYERNORM: layernorm_backward(L->dx, L->dw, L->db, L->g, L->x, L->w, L->mean, L->rstd, FB, FC); break;
    case LC_MATMUL: matmul_backward(L->dx, L->dw, L->db, L->g, L->x, L->w, FB, FC, FO); break;
    case LC_GELU: gelu_backward(L->dx, L->x, L->g, FB * FC); break;
    default: crossentropy_backward(L->dx, L->probs, L->tgt, FB, FV); break;
    }
}

void gpt_layer_checks(void)
{
    Rng r;
    rng_seed(&r, 77);
    for (int kind = 0; kind < LC_N; kind++) {
        LayerCase L;
        memset(&L, 0, sizeof L);
        const size_t nx = kind == LC_CROSSENTROPY ? FB * FV : FB * FC;
        for (size_t i = 0; i < nx; i++) L.x[i] = (float)(1.5 * rng_normal(&r));
        for (size_t i = 0; i < FO * FC; i++) L.w[i] = (float)(kind == LC_MATMUL ? rng_normal(&r) / sqrt(FC) : 1 + 0.5 * rng_normal(&r));
        for (size_t i = 0; i < FC; i++) L.b[i] = (float)(0.5 * rng_normal(&r));
        for (size_t i = 0; i < sizeof L.g / sizeof L.g[0]; i++) L.g[i] = (float)rng_normal(&r);
        for (int i = 0; i < FB; i++) L.tgt[i] = (int)(rng_next(&r) % FV);
        layer_backward(kind, &L);
        /* the inputs this layer has a gradient for: x always, w and b for LayerNorm and the linear layer */
        float *in[3] = {L.x, L.w, L.b}, *grad[3] = {L.dx, L.dw, L.db};
        const size_t n[3] = {nx, kind == LC_MATMUL ? FO * FC : FC, kind == LC_MATMUL ? FO : FC};
        const int tensors = kind == LC_LAYERNORM || kind == LC_MATMUL ? 3 : 1;
        double worst = 0;
        size_t bad = 0, total = 0;
        for (int t = 0; t < tensors; t++)
            for (size_t i = 0; i < n[t]; i++, total++) {
                LayerF lf = {kind, &L};
                const double fd = gpt_fd5(layer_f_ctx, &lf, &in[t][i], 1e-2f);
                /* fp32 forward, sums in double: the quotient's rounding is about 1e-5 at this h (LayerNorm up
                 * to 5e-5: one input moves its whole row) */
                const double err = fabs(fd - grad[t][i]), tol = 1e-4 + 2e-4 * fabs(fd);
                if (!(err <= tol)) bad++;
                if (!(err / tol <= worst)) worst = err / tol;
            }
        char name[64];
        snprintf(name, sizeof name, "layer-fd/%s", LC_NAME[kind]);
        report(bad == 0, NULL, name, "its backward against five-point finite differences of its forward, inputs of std "
               "1.5: %zu of %zu elements outside 1e-4 + 2e-4 |fd|, worst at %.2f of it", bad, total, worst);
    }
}
