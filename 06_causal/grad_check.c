/*
 * grad_check.c: the checks of the backward passes, in ./step06 --check.
 *
 *   fd64/...        naive backward (fp32) against central finite differences of
 *                   the attention written plainly in float64 (every kind: no mask,
 *                   causal, tile-relative, Break 2, Break 1)
 *   forms/...       the naive form of the causal attention and of the tile-relative
 *                   mask (what the model trains with) equal to the reference and
 *                   to the tiled form (what the chapter writes); L from the tiled
 *                   forward equal to the float64 log-sum-exp (the breaks' forms:
 *                   ./step07 --check)
 *   tiled-bwd/...   FlashAttention-2's backward against the naive backward at
 *                   odd N, several D and tile sizes, with and without masks
 *   model-fd/...    the whole GPT's gradient against finite differences, a
 *                   sample of every parameter tensor, for each attention
 */
#include "common.h"
#include "causal.h"
#include "data.h"
#include "gpt.h"
#include "naive_backward.h"
#include "train.h"

#include <math.h>
#include <string.h>

// --- attention in float64, from its definition ----------------------------------------

/* sum over all rows of dO_i . o_i, o = attention of kind a, everything in double: the scalar whose
 * gradient the backward computes (with dO as the upstream gradient). */
static double ref_loss64(const double *q, const double *k, const double *v, const double *dO, long bh, long N,
                         long D, const AttnKind *a, double *s)
{
    const double scale = 1.0 / sqrt((double)D);
    double loss = 0;
    for (long h = 0; h < bh; h++) {
        const size_t hd = (size_t)h * N * D;
        for (long i = 0; i < N; i++) {
            double z = 0;
            for (long j = 0; j < N; j++) {
                s[j] = -INFINITY;
                if (!attn_visible(a, N, i, j)) continue;
                double acc = 0;
                for (long d = 0; d < D; d++) acc += q[hd + i * D + d] * k[hd + j * D + d];
                s[j] = acc * scale;
            }
            /* the max subtracted: the row's (intact), each K/V tile's own (Break 2), none (Break 1) */
            const long span = a->brk == SOFTMAX_NO_RESCALE ? a->BC : N;
            for (long t0 = 0; t0 < N; t0 += span) {
                const long t1 = t0 + span < N ? t0 + span : N;
                double m = a->brk == SOFTMAX_NO_MAX ? 0 : -INFINITY;
                if (a->brk != SOFTMAX_NO_MAX)
                    for (long j = t0; j < t1; j++) m = s[j] > m ? s[j] : m;
                for (long j = t0; j < t1; j++) { s[j] = s[j] == -INFINITY ? 0 : exp(s[j] - m); z += s[j]; }
            }
            for (long d = 0; d < D; d++) {
                double o = 0;
                for (long j = 0; j < N; j++) o += s[j] * v[hd + j * D + d];
                loss += dO[hd + i * D + d] * (z > 0 ? o / z : 0);
            }
        }
    }
    return loss;
}

static const char *kind_name(const AttnKind *a, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s", a->mask == MASK_NONE ? "no-mask" : a->mask == MASK_ABSOLUTE ? "causal" : "relative-mask",
             a->brk == SOFTMAX_NO_RESCALE ? "+break2" : a->brk == SOFTMAX_NO_MAX ? "+break1" : "");
    return buf;
}

static void fill(float *x, size_t n, uint64_t seed, float sc)
{
    Rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)(sc * rng_normal(&r));
}

/* The naive backward's dQ, dK, dV against central differences of ref_loss64 (h = 1e-6 in double). */
static void check_fd64(long bh, long N, long D, const AttnKind *a, uint64_t seed)
{
    const size_t n = (size_t)bh * N * D;
    float *f = xmalloc(n * 4 * 4, "fd inputs"), *P = xmalloc(naive_p_bytes(bh, N), "P");
    float *g = xmalloc(n * 4 * 3, "fd grads"), *o = xmalloc(n * 4, "O");
    double *x = xmalloc(n * 8 * 4, "fd64 inputs"), *fd = xmalloc(n * 8 * 3, "fd64 grads"), *s = xmalloc(N * 8, "row");
    fill(f, 4 * n, seed, 1.0f);                           // q, k, v, dO
    for (size_t i = 0; i < 4 * n; i++) x[i] = f[i];
    naive_forward_p(f, f + n, f + 2 * n, o, P, bh, N, D, a);
    naive_backward(f, f + n, f + 2 * n, P, f + 3 * n, g, g + n, g + 2 * n, bh, N, D, a);
    const double h = 1e-6;
    for (size_t e = 0; e < 3 * n; e++) {                  // every element of q, k and v
        const double x0 = x[e];
        x[e] = x0 + h;
        const double up = ref_loss64(x, x + n, x + 2 * n, x + 3 * n, bh, N, D, a, s);
        x[e] = x0 - h;
        const double dn = ref_loss64(x, x + n, x + 2 * n, x + 3 * n, bh, N, D, a, s);
        x[e] = x0;
        fd[e] = (up - dn) / (2 * h);
    }
    char name[128], kb[32], eb[128];
    snprintf(name, sizeof name, "fd64/%s N=%ld D=%ld BR=%ld BC=%ld", kind_name(a, kb, sizeof kb), N, D, a->BR, a->BC);
    Err e = compare(g, fd, 3 * n, 1e-5, 1e-4);
    report(e.n_bad == 0, &e, name, "dQ, dK, dV vs float64 finite differences: %s (tol 1e-5 + 1e-4 |fd|)",
           fmt_err(&e, eb, sizeof eb));
    tfree(f); tfree(P); tfree(g); tfree(o); tfree(x); tfree(fd); tfree(s);
}

// --- the naive forms against the tiled forms -------------------------------------------------

static void check_forms(long N, long D, long BR, long BC, uint64_t seed)
{
    const long bh = 2;
    const size_t n = (size_t)bh * N * D;
    float *f = xmalloc(n * 4 * 3, "inputs"), *o1 = xmalloc(n * 4, "O"), *o2 = xmalloc(n * 4, "O");
    float *P = xmalloc(naive_p_bytes(bh, N), "P"), *L = xmalloc((size_t)bh * N * 4, "L");
    double *ref = xmalloc(n * 8, "ref"), *Lref = xmalloc((size_t)bh * N * 8, "L ref");
    char name[128], eb[128];
    fill(f, 3 * n, seed, 1.5f);
    const float *q = f, *k = f + n, *v = f + 2 * n;
    { /* the intact causal attention: the naive form vs the float64 causal reference (the forms of the two
       * breaks against their tiled forms, step 07's, are in ./step07 --check: step 07 imports step 06) */
        AttnKind a = {MASK_ABSOLUTE, SOFTMAX_INTACT, BR, BC};
        naive_forward_p(q, k, v, o1, P, bh, N, D, &a);
        ref_attention(q, k, v, bh, N, D, 1, ref);
        Err e = compare(o1, ref, n, 1e-5, 1e-5);
        snprintf(name, sizeof name, "forms/naive-causal N=%ld D=%ld BC=%ld", N, D, BC);
        report(e.n_bad == 0, &e, name, "naive form vs the float64 causal reference: %s", fmt_err(&e, eb, sizeof eb));
    }
    { /* the chapter's tile-relative mask: the naive form vs the tiled forward that has the bug */
        AttnKind a = {MASK_RELATIVE_ALL, SOFTMAX_INTACT, BR, BC};
        naive_forward_p(q, k, v, o1, P, bh, N, D, &a);
        causal_forward_cpu(q, k, v, o2, NULL, bh, N, D, BR, BC, MASK_RELATIVE_ALL, NULL);
        for (size_t i = 0; i < n; i++) ref[i] = o2[i];
        Err e = compare(o1, ref, n, 1e-5, 1e-5);
        snprintf(name, sizeof name, "forms/naive-relative N=%ld D=%ld BR=%ld BC=%ld", N, D, BR, BC);
        report(e.n_bad == 0, &e, name, "naive form vs the tiled forward with the tile-relative mask: %s",
               fmt_err(&e, eb, sizeof eb));
    }
    { /* L = m + log l from the tiled forward: the float64 log of each row's softmax denominator */
        causal_forward_cpu(q, k, v, o2, L, bh, N, D, BR, BC, MASK_ABSOLUTE, NULL);
        double *s = ref; // scratch row (ref is n >= N doubles)
        for (long h = 0; h < bh; h++)
            for (long i = 0; i < N; i++) {
                double m = -INFINITY, z = 0;
                for (long j = 0; j <= i; j++) {
                    double acc = 0;
                    for (long d = 0; d < D; d++) acc += (double)q[(h * N + i) * D + d] * k[(h * N + j) * D + d];
                    s[j] = acc / sqrt((double)D);
                    m = s[j] > m ? s[j] : m;
                }
                for (long j = 0; j <= i; j++) z += exp(s[j] - m);
                Lref[h * N + i] = m + log(z);
            }
        Err e = compare(L, Lref, (size_t)bh * N, 1e-5, 1e-6);
        snprintf(name, sizeof name, "forms/L N=%ld D=%ld BR=%ld BC=%ld", N, D, BR, BC);
        report(e.n_bad == 0, &e, name, "L = m + log l vs the float64 log-sum-exp of each row: %s", fmt_err(&e, eb, sizeof eb));
    }
    tfree(f); tfree(o1); tfree(o2); tfree(P); tfree(L); tfree(ref); tfree(Lref);
}

// --- FlashAttention-2's backward against the naive one -----------------------------------

static void check_tiled(long bh, long N, long D, long BR, long BC, int mask, uint64_t seed)
{
    const size_t n = (size_t)bh * N * D;
    float *f = xmalloc(n * 4 * 4, "inputs"), *o = xmalloc(n * 4, "O"), *L = xmalloc((size_t)bh * N * 4, "L");
    float *P = xmalloc(naive_p_bytes(bh, N), "P"), *gn = xmalloc(n * 4 * 3, "naive grads"), *gt = xmalloc(n * 4 * 3, "tiled grads");
    double *ref = xmalloc(n * 8 * 3, "ref grads");
    const float *q = f, *k = f + n, *v = f + 2 * n, *dO = f + 3 * n;
    fill(f, 4 * n, seed, 1.0f);
    AttnKind a = {mask, SOFTMAX_INTACT, BR, BC};
    naive_forward_p(q, k, v, o, P, bh, N, D, &a);
    naive_backward(q, k, v, P, dO, gn, gn + n, gn + 2 * n, bh, N, D, &a);
    for (size_t i = 0; i < 3 * n; i++) gt[i] = NAN;       // poisoned: what the tiled backward does not write fails
    causal_forward_cpu(q, k, v, o, L, bh, N, D, BR, BC, mask, NULL);
    size_t scratch = 0;
    flash_backward_cpu(q, k, v, o, dO, L, gt, gt + n, gt + 2 * n, bh, N, D, BR, BC, mask, &scratch);
    for (size_t i = 0; i < 3 * n; i++) ref[i] = gn[i];
    Err e = compare(gt, ref, 3 * n, 2e-5, 1e-4);
    char name[128], kb[32], eb[128], b1[32], b2[32];
    snprintf(name, sizeof name, "tiled-bwd/%s N=%ld D=%ld BR=%ld BC=%ld", kind_name(&a, kb, sizeof kb), N, D, BR, BC);
    report(e.n_bad == 0, &e, name, "dQ, dK, dV vs naive backward: %s (tol 2e-5 + 1e-4 |ref|); scratch %s vs naive's P + dS %s",
           fmt_err(&e, eb, sizeof eb), fmt_bytes((double)scratch, b1, sizeof b1),
           fmt_bytes((double)naive_p_bytes(bh, N) + (double)N * N * 4, b2, sizeof b2));
    tfree(f); tfree(o); tfree(L); tfree(P); tfree(gn); tfree(gt); tfree(ref);
}

// --- the whole model against finite differences ---------------------------------------------

/* d loss / d theta by the five-point stencil: its error is O(h^4), so h can be large (1e-2) and the fp32
 * rounding of the loss (about 1e-7 of it) costs only about 5e-6 in the difference quotient: hence the
 * tolerance's absolute 2e-5. The model itself is fp32; its attention parts are checked against float64
 * above. */
typedef struct { GPT *m; const int *x, *y; int B, T; } ModelF;
static double model_loss(void *ctx)
{
    const ModelF *mf = ctx;
    return gpt_forward(mf->m, mf->x, mf->y, mf->B, mf->T, NULL);
}
static double model_fd(GPT *m, float *p, const int *x, const int *y, int B, int T, float h)
{
    ModelF mf = {m, x, y, B, T};
    return gpt_fd5(model_loss, &mf, p, h);
}

static void check_model(const Corpus *c, const Attention *att, uint64_t seed)
{
    const GPTConfig cfg = {c->V, 16, 2, 2, 16};
    const int B = 2, T = 16, per = 4;
    GPT m;
    if (gpt_build(&m, &cfg, B, att, 1.0f, seed) != 0) {
        char lim[96];
        report(0, NULL, "model-fd", "out of host memory: the model asked for %zu bytes, %s", gpt_bytes(&cfg, B, att, NULL),
               mem_limit_desc(lim, sizeof lim));
        return;
    }
    int x[32], y[32];
    Rng r;
    rng_seed(&r, seed + 7);
    corpus_batch(c, &r, B, T, x, y);
    /* A few AdamW steps first, so the gradients are those of a model that is learning, not of its init
     * (where LayerNorm biases and many products are exactly zero). */
    for (int s = 0; s < 5; s++) {
        gpt_forward(&m, x, y, B, T, NULL);
        gpt_backward(&m, x, y, B, T);
        gpt_adamw(&m, 1e-2f, 0.0f);
    }
    gpt_forward(&m, x, y, B, T, NULL);
    gpt_backward(&m, x, y, B, T);
    float *p = m.params_mem, *g = m.grads_mem;
    double worst = 0;
    int bad = 0;
    char detail[256] = "";
    for (int t = 0; t < NUM_PARAMS; t++) {
        double gmax = 0;
        for (size_t i = 0; i < m.param_sizes[t]; i++) gmax = fabs(g[i]) > gmax ? fabs(g[i]) : gmax;
        for (int k = 0; k < per; k++) {
            /* the largest gradient of the tensor, then random elements */
            size_t e = 0;
            if (k == 0) { for (size_t i = 0; i < m.param_sizes[t]; i++) if (fabs(g[i]) == gmax) { e = i; break; } }
            else e = rng_next(&r) % m.param_sizes[t];
            const double fd = model_fd(&m, p + e, x, y, B, T, 1e-2f);
            const double err = fabs(fd - g[e]), tol = 2e-5 + 2e-3 * gmax + 1e-2 * fabs(fd);
            if (err / tol > worst) worst = err / tol;
            if (!(err <= tol) && !bad++)
                snprintf(detail, sizeof detail, "; first bad: %s[%zu] backward %.6e, finite differences %.6e",
                         PARAM_NAMES[t], e, g[e], fd);
        }
        p += m.param_sizes[t];
        g += m.param_sizes[t];
    }
    char name[128];
    snprintf(name, sizeof name, "model-fd/%s", att->name);
    report(bad == 0, NULL, name, "GPT gradient vs finite differences, %d elements of each of the %d parameter tensors: "
           "%d outside tolerance (2e-5 + 2e-3 max|g| + 1e-2 |fd|), worst at %.2f of it%s", per, NUM_PARAMS, bad, worst, detail);
    gpt_free(&m);
}

void backward_checks(void)
{
    static const long fdN[] = {1, 6, 13};
    for (int a = 0; a < 3; a++) {
        static const int kinds[][2] = {{MASK_NONE, SOFTMAX_INTACT}, {MASK_ABSOLUTE, SOFTMAX_INTACT}, {MASK_RELATIVE_ALL, SOFTMAX_INTACT},
                                       {MASK_ABSOLUTE, SOFTMAX_NO_RESCALE}, {MASK_ABSOLUTE, SOFTMAX_NO_MAX}};
        for (int k = 0; k < 5; k++) {
            AttnKind kd = {kinds[k][0], kinds[k][1], 4, 4};
            check_fd64(2, fdN[a], 8, &kd, 100 + a * 10 + k);
        }
    }
    check_forms(17, 16, 16, 16, 201);
    check_forms(100, 16, 32, 16, 202);
    check_forms(100, 8, 16, 32, 203);

    static const long tN[] = {1, 17, 65, 100};
    static const long blk[][2] = {{16, 16}, {32, 16}, {16, 64}};
    static const int masks[] = {MASK_NONE, MASK_ABSOLUTE, MASK_RELATIVE_ALL};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++)
            for (int mk = 0; mk < 3; mk++)
                check_tiled(2, tN[a], a % 2 ? 64 : 8, blk[b][0], blk[b][1], masks[mk], 300 + a * 9 + b * 3 + mk);
    check_tiled(1, 130, 128, 64, 32, MASK_ABSOLUTE, 340);
    check_tiled(1, 70, 40, 16, 16, MASK_ABSOLUTE, 341);

    Corpus c;
    corpus_generate(&c, 20000, 1);
    Attention att[4] = {ATTENTION_NAIVE("naive", MASK_ABSOLUTE, SOFTMAX_INTACT, 4, 4),
                        ATTENTION_TILED("tiled", MASK_ABSOLUTE, 4, 4),
                        ATTENTION_TILED("relative", MASK_RELATIVE_ALL, 4, 4),
                        ATTENTION_NAIVE("break2", MASK_ABSOLUTE, SOFTMAX_NO_RESCALE, 4, 4)};
    gpt_layer_checks();
    for (int i = 0; i < 4; i++) check_model(&c, &att[i], 400 + i);
    corpus_free(&c);
}
