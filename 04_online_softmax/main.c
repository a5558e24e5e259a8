/*
 * step04: the streaming (online) softmax, then the one-pass tiled forward.
 *
 * What it adds over step 03: step 03's exact tiled version needed a first
 * pass over K for each row tile's max and sum before it could accumulate
 * P V. The online softmax removes that pass: keep a running max m and a
 * running sum l, and when a later tile raises the max, rescale what was
 * accumulated so far by alpha = e^(m_old - m_new). One pass over K and V,
 * exact (book Steps 3 and 4). The forward itself is in flash.c.
 *
 * Run:   make step04 && ./step04                 (the worked examples, the
 *                                                 chapter's Step 4 comparison,
 *                                                 the verification table)
 *        ./step04 --dtype fp16                   (fp16 inputs, fp32 softmax state)
 *        ./step04 --check
 * Expect (lines to look for):
 *        answer: not bit for bit in fp32: ...% of the elements are identical to naive's ...
 *        block size independence: max |O(BR=16) - O(BR=b)| over the table ...
 *        answer: in fp32 the tiled forward is within ~1e-7 of the float64 reference ...
 * Limits: single-threaded fp32 C, written to be read next to the chapter,
 *        not to be fast; the fast versions are step 05's CUDA kernels.
 */
#include "common.h"
#include "flash.h"
#include "../01_naive/naive.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// --- the streaming softmax on one vector ------------------------------------

/* The state after each block of the online softmax over x[0..n-1] in blocks
 * of `block`: m (running max) and d (running denominator, the sum of
 * e^(x_j - m) over what has been seen). In double, as the lesson's NumPy
 * does, so that the worked examples read exactly. Returns the block count. */
static int online_softmax(const double *x, int n, int block, double *m_out, double *d_out)
{
    double m = -INFINITY, d = 0.0;
    int nb = 0;
    for (int j = 0; j < n; j += block, nb++) {
        int end = j + block < n ? j + block : n;
        double m_blk = -INFINITY, d_blk = 0.0;
        for (int c = j; c < end; c++) m_blk = fmax(m_blk, x[c]);          // m_blk = max(block)
        for (int c = j; c < end; c++) d_blk += exp(x[c] - m_blk);          // d_blk = sum e^(x - m_blk)
        double m_new = fmax(m, m_blk);                                      // m_new = max(m, m_blk)
        d = d * exp(m - m_new) + d_blk * exp(m_blk - m_new);                // d' = d e^(m - m_new) + d_blk e^(m_blk - m_new)
        m = m_new;
        m_out[nb] = m;
        d_out[nb] = d;
    }
    return nb;
}

/* The direct (all at once) softmax's max and denominator, to compare with. */
static void direct_softmax(const double *x, int n, double *m, double *d)
{
    *m = -INFINITY;
    *d = 0.0;
    for (int j = 0; j < n; j++) *m = fmax(*m, x[j]);
    for (int j = 0; j < n; j++) *d += exp(x[j] - *m);
}

typedef struct {
    const char *source;
    double x[4];
    double m_expect[2], d_expect[2]; /* the lesson's numbers, to 4 decimals */
} Worked;

static const Worked worked[2] = {
    {"002 (IO-aware tiling lesson)", {2.0, -1.5, 0.3, 4.2}, {2.0, 4.2}, {1.0302, 1.1344}},
    {"003 (Flash Attention chapter)", {3.01, 0.09, 2.48, 1.95}, {3.01, 3.01}, {1.0539, 1.9890}},
};

/* Prints the example step by step; returns 1 if every number matches. */
static int run_worked(const Worked *w, int print)
{
    double m[2], d[2], m_dir, d_dir;
    int ok = 1;
    online_softmax(w->x, 4, 2, m, d);
    direct_softmax(w->x, 4, &m_dir, &d_dir);
    if (print)
        printf("scores [%.2f, %.2f, %.2f, %.2f] from %s, blocks of 2:\n", w->x[0], w->x[1], w->x[2], w->x[3], w->source);
    for (int b = 0; b < 2; b++) {
        if (print)
            printf("  after block %d [%5.2f, %5.2f]: m = %.4f, d = %.4f\n", b + 1, w->x[2 * b], w->x[2 * b + 1], m[b], d[b]);
        ok &= fabs(m[b] - w->m_expect[b]) < 5e-5 && fabs(d[b] - w->d_expect[b]) < 5e-5;
    }
    double p0_online = exp(w->x[0] - m[1]) / d[1], p0_direct = exp(w->x[0] - m_dir) / d_dir;
    if (print) {
        printf("  direct softmax:                m = %.4f, d = %.4f; |d_online - d_direct| = %.1e\n", m_dir, d_dir,
               fabs(d[1] - d_dir));
        printf("  softmax of the first element:  %.4f online, %.4f direct\n", p0_online, p0_direct);
    }
    ok &= fabs(d[1] - d_dir) < 1e-7 && fabs(p0_online - p0_direct) < 1e-7;
    return ok;
}

/* The merge of partial states (decode, flash-decoding): the worked example's vector in two chunks, each
 * chunk's (m, d) computed alone (on a GPU, by two blocks at once), then merged with the same rescale the
 * online softmax applies block by block. Prints it; returns 1 if the merged (m, d) is the direct softmax's and
 * the lesson's to 4 decimals (the one-pass online value, printed beside it, makes the same rescale in order). */
static int run_worked_merge(const Worked *w, int print)
{
    double m_s[2], d_s[2], m_on[2], d_on[2], m_dir, d_dir;
    for (int c = 0; c < 2; c++) online_softmax(w->x + 2 * c, 2, 2, &m_s[c], &d_s[c]); // each chunk alone
    online_softmax(w->x, 4, 2, m_on, d_on);                                             // one pass, for comparison
    direct_softmax(w->x, 4, &m_dir, &d_dir);                                            // all at once
    const double m = fmax(m_s[0], m_s[1]);                                              // m = max m_s
    const double d = exp(m_s[0] - m) * d_s[0] + exp(m_s[1] - m) * d_s[1];               // d = sum e^(m_s - m) d_s
    if (print) {
        printf("the same scores split into two chunks, each chunk's state computed alone (the decode split):\n");
        for (int c = 0; c < 2; c++)
            printf("  chunk %d [%5.2f, %5.2f]: m_%d = %.4f, d_%d = %.4f\n", c + 1, w->x[2 * c], w->x[2 * c + 1], c + 1,
                   m_s[c], c + 1, d_s[c]);
        printf("  merged: m = max(m_1, m_2) = %.4f, d = e^(m_1 - m) d_1 + e^(m_2 - m) d_2 = %.4f (one pass: %.4f): "
               "the online rescale, one chunk in place of one block\n", m, d, d_on[1]);
    }
    return m == m_dir && fabs(d - d_dir) < 1e-12 && fabs(m - w->m_expect[1]) < 5e-5 && fabs(d - w->d_expect[1]) < 5e-5;
}

/* Decode on random data: the n newest rows of a sequence of nkeys (seeded, D) against its keys, with the
 * keys in S = 1 .. tiles chunks of BC keys merged (flash_decode_cpu). Fills the worst differences from the
 * one-pass result (S = 1) and from the float64 reference over every S, and from the last n rows of the
 * causal tiled forward (decode is causal attention's last rows). */
typedef struct { double vs_one_pass, vs_ref, vs_causal; long tiles; } DecodeCase;
static DecodeCase run_decode_case(long nkeys, long n, long D, long BC, uint64_t seed)
{
    DecodeCase dc = {0, 0, 0, (nkeys + BC - 1) / BC};
    const size_t sz = (size_t)nkeys * D;
    float *q = xmalloc(sz * 4, "Q"), *k = xmalloc(sz * 4, "K"), *v = xmalloc(sz * 4, "V");
    float *one = xmalloc((size_t)n * D * 4, "one-pass O"), *out = xmalloc((size_t)n * D * 4, "merged O");
    float *causal = xmalloc(sz * 4, "causal O");
    double *ref = xmalloc((size_t)n * D * sizeof(double), "reference"), *scr = xmalloc((size_t)nkeys * sizeof(double), "scores");
    make_qkv(q, k, v, sz, seed);                                  // q's last n rows are the new query rows
    const float *qn = q + (size_t)(nkeys - n) * D;
    for (long r = 0; r < n; r++)                                  // row r sees keys 0 .. nkeys - n + r
        ref_attention_keys(qn + r * D, k, v, nkeys - n + r + 1, D, scr, ref + r * D);
    if (flash_decode_cpu(qn, k, v, one, n, nkeys, D, BC, 1) != 0 ||
        flash_forward_cpu(q, k, v, causal, 1, nkeys, D, BC, BC, 1, NULL) != 0) {
        mem_oom_line(mem_refused(), "the decode buffers");
        exit(EXIT_FAIL);
    }
    for (long S = 1; S <= dc.tiles; S++) {
        for (size_t i = 0; i < (size_t)n * D; i++) out[i] = NAN; // poisoned: an unwritten element fails
        if (flash_decode_cpu(qn, k, v, out, n, nkeys, D, BC, S) != 0) {
            mem_oom_line(mem_refused(), "the decode buffers");
            exit(EXIT_FAIL);
        }
        for (size_t i = 0; i < (size_t)n * D; i++) {
            const double a = fabs((double)out[i] - one[i]), b = fabs((double)out[i] - ref[i]);
            if (!(a <= dc.vs_one_pass)) dc.vs_one_pass = isnan(a) ? INFINITY : a; // NaN fails as infinite
            if (!(b <= dc.vs_ref)) dc.vs_ref = isnan(b) ? INFINITY : b;
        }
    }
    for (size_t i = 0; i < (size_t)n * D; i++) {
        const double c = fabs((double)one[i] - causal[(size_t)(nkeys - n) * D + i]);
        if (!(c <= dc.vs_causal)) dc.vs_causal = isnan(c) ? INFINITY : c;
    }
    tfree(q); tfree(k); tfree(v); tfree(one); tfree(out); tfree(causal); tfree(ref); tfree(scr);
    return dc;
}

// --- bit for bit ------------------------------------------------------------------

/* How many of the n elements of a and b hold the same 32 bits (memcmp on each
 * float: +0 and -0 differ, NaN never equals a number); *max_abs gets the largest
 * |a - b| (NaN counts as infinite). The chapter says the tiled forward is the
 * naive one "bit for bit in fp32"; this counts it. */
static size_t same_bits(const float *a, const float *b, size_t n, double *max_abs)
{
    size_t same = 0;
    *max_abs = 0;
    for (size_t i = 0; i < n; i++) {
        same += memcmp(&a[i], &b[i], sizeof(float)) == 0;
        const double d = fabs((double)a[i] - b[i]);
        if (!(d <= *max_abs)) *max_abs = d != d ? INFINITY : d;
    }
    return same;
}

// --- an fp16 baseline: naive attention with fp16 storage ----------------------

/* What a user's fp16 naive attention computes: S = Q K^T / sqrt(D) stored as
 * fp16, P = softmax(S) computed in fp32 and stored as fp16, O = P V
 * accumulated in fp32 and stored as fp16. The tiled forward with fp16 inputs
 * (fp32 m, l, o; O stored as fp16) must stay within 2x of its error
 * (FlashAttention's accuracy rule). Rows are computed one at a time, so only
 * N floats of S/P exist here: the rounding, not the memory, is the point. */
static void naive_fp16_storage(const float *q, const float *k, const float *v, float *o, long bh, long N, long D)
{
    float *p = xmalloc((size_t)N * sizeof(float), "fp16 naive row");
    const float scale = 1.0f / sqrtf((float)D);
    for (long h = 0; h < bh; h++)
        for (long i = 0; i < N; i++) {
            const float *qi = q + ((size_t)h * N + i) * D;
            const float *kh = k + (size_t)h * N * D, *vh = v + (size_t)h * N * D;
            float m = -INFINITY, l = 0.0f;
            for (long j = 0; j < N; j++) {
                float acc = 0.0f;
                for (long d = 0; d < D; d++) acc += qi[d] * kh[j * D + d];
                p[j] = f16_to_f32(f32_to_f16(acc * scale));            // S stored as fp16
                m = fmaxf(m, p[j]);
            }
            for (long j = 0; j < N; j++) { p[j] = expf(p[j] - m); l += p[j]; }
            for (long j = 0; j < N; j++) p[j] = f16_to_f32(f32_to_f16(p[j] / l)); // P stored as fp16
            for (long d = 0; d < D; d++) {
                float acc = 0.0f;
                for (long j = 0; j < N; j++) acc += p[j] * vh[j * D + d];
                o[((size_t)h * N + i) * D + d] = acc;
            }
        }
    tfree(p);
    round_to_dtype(o, (size_t)bh * N * D, DT_FP16);                   // O stored as fp16
}

// --- one verification case ------------------------------------------------------

typedef struct {
    Err e;         /* tiled vs float64 reference */
    Err base;      /* fp16: the naive fp16 baseline vs the same reference */
    float *out;    /* the tiled output (caller frees) */
} Case;

/* Runs the tiled forward on fresh random inputs (seeded), dtype-rounded,
 * NaN-poisoned output, against the float64 reference on the same rounded
 * inputs. ref may be passed in (same inputs) to save recomputing it. */
static Case run_case(long B, long H, long N, long D, long BR, long BC, int causal, int dtype, uint64_t seed,
                     double *ref_in, int alibi)
{
    Case c;
    size_t n = (size_t)B * H * N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
    double *ref = ref_in ? ref_in : xmalloc(n * sizeof(double), "reference");
    make_qkv(q, k, v, n, seed);
    round_to_dtype(q, n, dtype); round_to_dtype(k, n, dtype); round_to_dtype(v, n, dtype);
    float *slope = alibi ? xmalloc((size_t)B * H * 4, "ALiBi slopes") : NULL; // alibi: ALiBi's -slope |i - j|
    if (slope) alibi_slopes(slope, B, H);
    if (!ref_in) ref_attention_bias(q, k, v, B * H, N, D, causal, slope, ref);
    c.out = xmalloc(n * 4, "O");
    for (size_t i = 0; i < n; i++) c.out[i] = NAN;                   // poisoned: an unwritten element fails
    if (flash_forward_cpu(q, k, v, c.out, B * H, N, D, BR, BC, causal, slope) != 0) {
        mem_oom_line(mem_refused(), "the tiles");
        exit(EXIT_FAIL);
    }
    memset(&c.base, 0, sizeof c.base);
    if (dtype == DT_FP16) {
        float *nb = xmalloc(n * 4, "fp16 naive");
        round_to_dtype(c.out, n, DT_FP16);                            // the tiled O stored as fp16 too
        naive_fp16_storage(q, k, v, nb, B * H, N, D);
        c.base = compare(nb, ref, n, 2e-2, 0);
        tfree(nb);
    }
    c.e = compare(c.out, ref, n, dtype == DT_FP16 ? 2e-2 : 1e-5, dtype == DT_FP16 ? 0 : 1e-5);
    tfree(q); tfree(k); tfree(v); tfree(slope);
    if (!ref_in) tfree(ref);
    return c;
}

/* The fp16 rule: at most 2x the naive fp16 error, and never above 2e-2. */
static int fp16_ok(const Case *c)
{
    return c->e.n_bad == 0 && c->e.max_abs <= tol_16bit(c->base.max_abs);   /* 2x naive, at most 2e-2 (common.c) */
}

// --- the verification table and the checks ------------------------------------

static const long BLOCKS[] = {16, 32, 64, 128};
static const long TABLE_N[] = {1, 7, 63, 64, 65, 257, 513};
static const long TABLE_D[] = {16, 32, 64, 128};
#define NB 4

/* For each (N, D): the error of every block size against the reference and
 * the largest difference between block sizes. check=1: PASS/FAIL lines. */
static double g_worst_err; /* the largest error in the table, for the answer line */

static int verification_table(int check, FILE *csv, uint64_t seed)
{
    int all_ok = 1;
    double worst_indep = 0;
    if (!check)
        printf("\nverification (B=1 H=2, fp32, BR = BC): max abs error vs the float64 reference\n"
               "     N    D     BR=16     BR=32     BR=64    BR=128   max |O(b) - O(b')|\n");
    for (size_t a = 0; a < sizeof TABLE_N / sizeof *TABLE_N; a++)
        for (size_t b = 0; b < sizeof TABLE_D / sizeof *TABLE_D; b++) {
            long N = TABLE_N[a], D = TABLE_D[b];
            size_t n = (size_t)2 * N * D;
            double *ref = xmalloc(n * sizeof(double), "reference");
            float *outs[NB];
            double err[NB], indep = 0;
            int ok = 1;
            Err worst;
            memset(&worst, 0, sizeof worst);
            {   /* the reference once per (N, D), on the inputs run_case makes from the same seed */
                float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
                make_qkv(q, k, v, n, seed + a * 10 + b);
                ref_attention(q, k, v, 2, N, D, 0, ref);
                tfree(q); tfree(k); tfree(v);
            }
            for (int t = 0; t < NB; t++) {
                Case c = run_case(1, 2, N, D, BLOCKS[t], BLOCKS[t], 0, DT_FP32, seed + a * 10 + b, ref, 0);
                outs[t] = c.out;
                err[t] = c.e.max_abs;
                if (!(c.e.max_abs <= g_worst_err)) g_worst_err = c.e.max_abs;
                if (c.e.n_bad && ok) worst = c.e;
                ok &= c.e.n_bad == 0;
                if (csv) fprintf(csv, "fp32,%ld,%ld,%ld,%ld,%.3e,%.3e\n", N, D, BLOCKS[t], BLOCKS[t], c.e.max_abs, c.e.rel_l2);
            }
            for (int t = 1; t < NB; t++)
                for (size_t i = 0; i < n; i++) {
                    double dlt = fabs((double)outs[t][i] - outs[0][i]);
                    if (!(dlt <= indep)) indep = dlt;                 /* NaN propagates as a failure */
                }
            if (indep > worst_indep || indep != indep) worst_indep = indep;
            if (check) {
                char name[64];
                snprintf(name, sizeof name, "tiled-fp32 N=%ld D=%ld", N, D);
                report(ok, &worst, name, "max abs vs reference %.1e %.1e %.1e %.1e (BR=BC=16,32,64,128; tol 1e-5)",
                       err[0], err[1], err[2], err[3]);
                snprintf(name, sizeof name, "block-size-independence N=%ld D=%ld", N, D);
                report(indep <= 1e-5, NULL, name, "max |O(BR=b) - O(BR=16)| = %.1e (tol 1e-5)", indep);
            } else {
                printf("%6ld %4ld  %8.1e  %8.1e  %8.1e  %8.1e   %8.1e%s\n", N, D, err[0], err[1], err[2], err[3], indep,
                       ok ? "" : "  <-- WRONG");
            }
            all_ok &= ok && indep <= 1e-5;
            for (int t = 0; t < NB; t++) tfree(outs[t]);
            tfree(ref);
        }
    if (!check)
        printf("block size independence: max |O(BR=16) - O(BR=b)| over the table = %.1e (the chapter's second sanity check)\n",
               worst_indep);
    return all_ok;
}

static int run_checks(uint64_t seed)
{
    char name[96], eb[128];
    for (int w = 0; w < 2; w++) {
        snprintf(name, sizeof name, "worked-example/%s", w ? "003" : "002");
        report(run_worked(&worked[w], 0), NULL, name, "m and d after each block match the lesson to 4 decimals, d and p_0 match the direct softmax to 1e-7");
    }
    verification_table(1, NULL, seed);
    /* BR != BC, causal, and N not a multiple of either. */
    static const long pairs[][2] = {{16, 64}, {64, 16}, {128, 32}, {7, 5}};
    for (size_t t = 0; t < 4; t++)
        for (int causal = 0; causal < 2; causal++) {
            long N = causal ? 65 : 257;
            Case c = run_case(2, 1, N, 64, pairs[t][0], pairs[t][1], causal, DT_FP32, seed + 100 + t, NULL, 0);
            snprintf(name, sizeof name, "tiled-fp32 BR=%ld BC=%ld N=%ld D=64%s", pairs[t][0], pairs[t][1], N, causal ? " causal" : "");
            report(c.e.n_bad == 0, &c.e, name, "%s (tol 1e-5)", fmt_err(&c.e, eb, sizeof eb));
            tfree(c.out);
        }
    /* A score modifier, ALiBi: -slope_h |i - j| on s_tile before m_tile, absolute indices (question 5). */
    for (size_t t = 0; t < 4; t++)
        for (int causal = 0; causal < 2; causal++) {
            static const long aN[] = {1, 65, 257, 100};
            Case c = run_case(2, 3, aN[t], 32, pairs[t][0], pairs[t][1], causal, DT_FP32, seed + 300 + t, NULL, 1);
            snprintf(name, sizeof name, "alibi-fp32 BR=%ld BC=%ld N=%ld D=32 H=3%s", pairs[t][0], pairs[t][1], aN[t],
                     causal ? " causal" : "");
            report(c.e.n_bad == 0, &c.e, name, "vs the float64 reference with the same bias: %s (tol 1e-5)",
                   fmt_err(&c.e, eb, sizeof eb));
            tfree(c.out);
        }
    /* Decode: the keys split in S chunks and merged, every S from 1 to the number of tiles (flash.c). */
    report(run_worked_merge(&worked[0], 0) && run_worked_merge(&worked[1], 0), NULL, "merge/worked-examples",
           "two chunks' (m, d) merged with e^(m_s - m) give the direct softmax's m and d and the lesson's, to 4 decimals");
    static const long decN[] = {1, 17, 64, 65, 257, 1000}, decn[] = {1, 5};
    for (size_t t = 0; t < 6; t++)
        for (size_t u = 0; u < 2; u++) {
            if (decn[u] > decN[t]) continue;
            const DecodeCase dc = run_decode_case(decN[t], decn[u], 64, 16, seed + 400 + t * 2 + u);
            snprintf(name, sizeof name, "decode-merge nkeys=%ld n=%ld D=64 BC=16", decN[t], decn[u]);
            report(dc.vs_one_pass <= 1e-5 && dc.vs_ref <= 1e-5, NULL, name, "keys in S = 1..%ld chunks, merged: max |O(S) - "
                   "O(1)| %.1e, vs float64 %.1e (tol 1e-5 each)", dc.tiles, dc.vs_one_pass, dc.vs_ref);
            snprintf(name, sizeof name, "decode-is-causal-last-rows nkeys=%ld n=%ld", decN[t], decn[u]);
            report(dc.vs_causal <= 1e-5, NULL, name, "the decode rows vs the last %ld rows of the causal tiled forward: "
                   "max diff %.1e (tol 1e-5)", decn[u], dc.vs_causal);
        }
    {   /* bit for bit: the counter itself (equal arrays; one element one ulp off; +0 against -0), then the
         * tiled forward against itself run twice (the same bits: CPU results are deterministic) */
        float a[4] = {1.0f, -2.5f, 0.0f, 3.0f}, b[4];
        double d0, d1, d2, dr;
        memcpy(b, a, sizeof a);
        const size_t s0 = same_bits(a, b, 4, &d0);
        b[1] = nextafterf(b[1], 0.0f);
        const size_t s1 = same_bits(a, b, 4, &d1);
        b[2] = -0.0f;
        const size_t s2 = same_bits(a, b, 4, &d2);
        report(s0 == 4 && d0 == 0 && s1 == 3 && d1 == fabs((double)a[1] - b[1]) && d1 > 0 && s2 == 2 && d2 == d1, NULL,
               "bitwise/counter", "equal: %zu of 4 identical (max abs %.1e); one ulp off: %zu (max abs %.1e); and -0 for +0: %zu",
               s0, d0, s1, d1, s2);
        Case c1 = run_case(1, 2, 257, 64, 32, 32, 0, DT_FP32, seed + 500, NULL, 0);
        Case c2 = run_case(1, 2, 257, 64, 32, 32, 0, DT_FP32, seed + 500, NULL, 0);
        const size_t n2 = (size_t)2 * 257 * 64, same = same_bits(c1.out, c2.out, n2, &dr);
        report(same == n2, NULL, "bitwise/run-to-run", "the tiled forward twice on the same inputs: %zu of %zu elements "
               "identical (max abs %.1e)", same, n2, dr);
        tfree(c1.out); tfree(c2.out);
    }
    static const long fpN[] = {64, 257, 513};
    for (size_t t = 0; t < 3; t++) {
        Case c = run_case(1, 2, fpN[t], 64, 64, 64, 0, DT_FP16, seed + 200 + t, NULL, 0);
        snprintf(name, sizeof name, "tiled-fp16 N=%ld D=64", fpN[t]);
        report(fp16_ok(&c), &c.e, name, "max abs %.2e vs naive-fp16 %.2e (rule: <= 2x naive, at most 2e-2: tol %.2e)",
               c.e.max_abs, c.base.max_abs, tol_16bit(c.base.max_abs));
        tfree(c.out);
    }
    return report_finish();
}

// --- main ---------------------------------------------------------------------

typedef struct { const float *q, *k, *v; float *o; long bh, N, D, BR, BC; int causal, naive; } Run;
static void run_once(void *p)
{
    Run *r = p;
    int rc = r->naive ? naive_attention_cpu(r->q, r->k, r->v, r->o, r->bh, r->N, r->D, r->causal)
                      : flash_forward_cpu(r->q, r->k, r->v, r->o, r->bh, r->N, r->D, r->BR, r->BC, r->causal, NULL);
    if (rc != 0) {
        mem_oom_line(mem_refused(), r->naive ? "naive attention's S or P ([B,H,N,N] floats each)" : "the tiles");
        exit(EXIT_FAIL);
    }
}

static void usage(const Opts *o)
{
    printf("usage: ./step04 [options]\n"
           "The online softmax on a vector, then the one-pass tiled forward (book Steps 3, 4).\n");
    print_common_usage(o);
    printf("  --csv-state FILE       write the online-softmax state (m, l) per K/V tile for query row 0 of head 0\n"
           "  --alibi                also run the tiled forward with ALiBi, -slope_h |i - j| on s_tile before m_tile\n");
}

int main(int argc, char **argv)
{
    Opts o;
    const char *csv_state = NULL;
    int alibi = 0;
    opts_expand(&argc, &argv);
    opts_init(&o, "step04", OPT_SHAPE | OPT_BLOCK | OPT_DTYPE | OPT_CAUSAL | OPT_SEED | OPT_REPEAT | OPT_CSV |
                  OPT_CHECK | OPT_NPY, (1u << DT_FP32) | (1u << DT_FP16));
    o.B = 2; o.H = 4; o.N = 256; o.D = 32; o.BR = 32; o.BC = 32; /* the chapter's Step 4 */
    o.repeat = 3;
    for (int i = 1; i < argc; i++) {
        if (opts_parse_common(&o, argc, argv, &i)) continue;
        if (!strcmp(argv[i], "--alibi")) { alibi = 1; continue; }
        if (!strcmp(argv[i], "--csv-state")) { csv_state = opt_value(argc, argv, &i); if (!*csv_state) usage_error("option --csv-state: empty file name"); continue; }
        usage_error("unknown option '%s' (see --help)", argv[i]);
    }
    if (o.help) { usage(&o); return 0; }
    opts_validate(&o, sizeof(float));
    if (o.check) return run_checks(o.seed);

    char eb[128], b1[32], b2[32];
    size_t n = (size_t)o.B * o.H * o.N * o.D;
    float *q, *k, *v;
    inputs_load_or_make(&o, &q, &k, &v); /* first: a bad --q file is refused before anything is printed */
    printf("step04: the online softmax, then the one-pass tiled forward\n\n");
    printf("-- the streaming softmax on one vector (the lessons' worked examples)\n");
    int ok = run_worked(&worked[0], 1);
    printf("  (the lesson prints d = 1.030 then 1.135: it rounds e^(2.0-4.2) to 0.111 before multiplying; unrounded, 1.1344)\n");
    ok &= run_worked(&worked[1], 1);
    ok &= run_worked_merge(&worked[0], 1);

    /* The chapter's Step 4: B=2 H=4 N=256 D=32, BR=BC=32, against naive. */
    round_to_dtype(q, n, o.dtype); round_to_dtype(k, n, o.dtype); round_to_dtype(v, n, o.dtype);
    float *out = xmalloc(n * 4, "O"), *nv = xmalloc(n * 4, "naive O");
    double *ref = xmalloc(n * sizeof(double), "reference");
    printf("\n-- the tiled forward: B=%ld H=%ld N=%ld D=%ld, BR=%ld BC=%ld, %s%s\n", o.B, o.H, o.N, o.D, o.BR, o.BC,
           o.dtype == DT_FP16 ? "fp16 inputs, fp32 m/l/o, O stored as fp16" : "fp32", o.causal ? ", causal" : "");
    Run rn = {q, k, v, nv, o.B * o.H, o.N, o.D, o.BR, o.BC, o.causal, 1};
    Run rt = rn;
    rt.o = out; rt.naive = 0;
    mem_reset_peak();
    size_t base = mem_current();
    double t_naive = time_median(run_once, &rn, 1, (int)o.repeat);
    size_t peak_naive = mem_peak() - base;
    mem_reset_peak();
    double t_tiled = time_median(run_once, &rt, 1, (int)o.repeat);
    size_t peak_tiled = mem_peak() - base;
    ref_attention(q, k, v, o.B * o.H, o.N, o.D, o.causal, ref);
    if (o.dtype == DT_FP16) round_to_dtype(out, n, DT_FP16);
    double diff = 0;
    for (size_t i = 0; i < n; i++) {
        double dl = fabs((double)out[i] - nv[i]);
        if (!(dl <= diff)) diff = dl;
    }
    const double naive_err = compare(nv, ref, n, 1, 0).max_abs, tol = tol_fp32(naive_err);
    Err e = compare(out, ref, n, o.dtype == DT_FP16 ? 2e-2 : tol, o.dtype == DT_FP16 ? 0 : 1e-5);
    printf("max absolute difference vs naive (step 01's code, fp32): %.6e\n", diff);
    printf("error vs float64 reference: %s (tol %.1e%s)\n", fmt_err(&e, eb, sizeof eb), o.dtype == DT_FP16 ? 2e-2 : tol,
           o.dtype == DT_FP16 ? "" : ": 2x naive fp32's error on these inputs, at least 1e-5");
    if (o.dtype == DT_FP32) {
        /* The chapter: "the math is identical, bit for bit in fp32". Count it: the same
         * function in exact arithmetic, but the tiled loop takes e^x of s - m_tile (not
         * s - m), sums l tile by tile, rescales by alpha, and divides by l once at the
         * end instead of dividing each p: other roundings. With one K/V tile (BC >= N)
         * m_tile is the row's max and l sums in naive's order, so only the place of
         * the division is left. */
        double d_bits, d_one;
        const size_t same = same_bits(out, nv, n, &d_bits);
        float *one = xmalloc(n * 4, "one-tile O");
        if (flash_forward_cpu(q, k, v, one, o.B * o.H, o.N, o.D, o.BR, o.N, o.causal, NULL) != 0) {
            mem_oom_line(mem_refused(), "the one-tile run's tile");
            exit(EXIT_FAIL);
        }
        const size_t same_one = same_bits(one, nv, n, &d_one);
        tfree(one);
        printf("bit for bit vs naive (fp32): %zu of %zu elements identical (%.1f%%), max abs %.1e; vs float64: naive %.1e, "
               "tiled %.1e\n", same, n, 100.0 * same / n, d_bits, naive_err, e.max_abs);
        printf("  with one K/V tile (BC = N = %ld): %zu of %zu identical (%.1f%%), max abs %.1e: the same e^(s - m) and l,\n"
               "  only the division moved (naive divides each p by l before P V, the tiled loop divides o by l at the end)\n",
               o.N, same_one, n, 100.0 * same_one / n, d_one);
        printf("answer: not bit for bit in fp32: %.1f%% of the elements are identical to naive's, the rest differ by at most "
               "%.1e, as far from naive as naive is from float64 (%.1e): the same function, other roundings (e^x of s - "
               "m_tile, l summed tile by tile and rescaled by alpha, the division by l at the end)\n", 100.0 * same / n,
               d_bits, naive_err);
        ok &= d_bits <= tol && d_one <= tol;
    }
    printf("time: naive %.2f ms, tiled %.2f ms (median of %ld)\n", t_naive * 1e3, t_tiled * 1e3, o.repeat);
    printf("memory beyond Q, K, V, O: naive %s (S and P), tiled %s (one [BR,BC] tile, o, m, l)\n",
           fmt_bytes((double)peak_naive, b1, sizeof b1), fmt_bytes((double)peak_tiled, b2, sizeof b2));
    ok &= e.n_bad == 0;
    if (o.dtype == DT_FP16) {
        Case c = run_case(o.B, o.H, o.N, o.D, o.BR, o.BC, o.causal, DT_FP16, o.seed, NULL, 0);
        printf("fp16: tiled max abs %.2e, naive with fp16 storage %.2e: %s (rule: <= 2x naive, < 2e-2)\n", c.e.max_abs,
               c.base.max_abs, fp16_ok(&c) ? "within the rule" : "OUTSIDE the rule");
        ok &= fp16_ok(&c);
        tfree(c.out);
    }
    if (alibi) { /* question 5: where a score modifier goes */
        Case c = run_case(o.B, o.H, o.N, o.D, o.BR, o.BC, o.causal, DT_FP32, o.seed, NULL, 1);
        printf("\n-- ALiBi (--alibi): s_tile -= slope_h |i - j|, absolute row i = i0 + r and key j = j0 + c, before m_tile;\n"
               "   slopes 2^(-8(h+1)/H) (%g .. %g for H = %ld), random inputs from --seed\n",
               alibi_slope(0, o.H), alibi_slope(o.H - 1, o.H), o.H);
        printf("tiled with ALiBi vs the float64 reference with the same bias: %s%s\n", fmt_err(&c.e, eb, sizeof eb),
               c.e.n_bad ? "  <-- WRONG" : "");
        if (c.e.n_bad == 0)
            printf("answer: a score modifier goes where the mask goes, on s_tile before m_tile, computed from absolute "
                   "indices: then m_tile is the max of the scores that are exponentiated (the running max still bounds "
                   "every e^(s - m)), and a key's bias does not depend on which tile it falls in (./step07 --break "
                   "alibi-after-max and alibi-relative show the two wrong places)\n");
        ok &= c.e.n_bad == 0;
        tfree(c.out);
    }
    if (o.outfile) {
        long shp[4] = {o.B, o.H, o.N, o.D};
        if (npy_save(o.outfile, out, shp, 4, o.dtype == DT_FP16 ? DT_FP16 : DT_FP32) != 0) {
            fprintf(stderr, "step04: cannot write %s\n", o.outfile);
            return EXIT_FAIL;
        }
        printf("wrote O to %s\n", o.outfile);
    }
    if (csv_state) {
        /* Row 0 of head 0: its scores in double, then the online state per K/V tile of BC. */
        int nb = (int)((o.N + o.BC - 1) / o.BC);
        double *s = xmalloc((size_t)o.N * sizeof(double), "row scores");
        double *ms = xmalloc((size_t)nb * sizeof(double), "m"), *ds = xmalloc((size_t)nb * sizeof(double), "d");
        double m_dir, d_dir;
        for (long j = 0; j < o.N; j++) {
            double acc = 0;
            for (long d = 0; d < o.D; d++) acc += (double)q[d] * k[j * o.D + d];
            s[j] = acc / sqrt((double)o.D);
        }
        online_softmax(s, (int)o.N, (int)o.BC, ms, ds);
        direct_softmax(s, (int)o.N, &m_dir, &d_dir);
        FILE *f = csv_open(csv_state, "tile,cols_seen,m,l,m_direct,l_direct");
        for (int b = 0; b < nb; b++)
            fprintf(f, "%d,%ld,%.9g,%.9g,%.9g,%.9g\n", b, (b + 1) * o.BC < o.N ? (b + 1) * o.BC : o.N, ms[b], ds[b], m_dir, d_dir);
        fclose(f);
        tfree(s); tfree(ms); tfree(ds);
        printf("wrote the online-softmax state of row 0 (%d tiles) to %s\n", nb, csv_state);
    }
    tfree(out); tfree(nv); tfree(ref); tfree(q); tfree(k); tfree(v);

    { /* decode: one new row against the cache, the keys split and merged (flash-decoding on the CPU) */
        const DecodeCase dc = run_decode_case(o.N, 1, o.D, o.BC, o.seed);
        printf("\n-- decode: a new token's query row against the N = %ld keys cached before it and its own, the keys split\n"
               "   into S chunks of whole BC = %ld tiles, each chunk's (m_s, l_s, o_s) computed alone, then merged\n"
               "S = 1..%ld: max |O(S) - O(1)| = %.1e, vs float64 %.1e; one pass vs the causal forward's last row %.1e\n",
               o.N, o.BC, dc.tiles, dc.vs_one_pass, dc.vs_ref, dc.vs_causal);
        ok &= dc.vs_one_pass <= 1e-5 && dc.vs_ref <= 1e-5 && dc.vs_causal <= 1e-5;
    }

    FILE *csv = o.csv ? csv_open(o.csv, "dtype,N,D,BR,BC,max_abs,rel_l2") : NULL;
    ok &= verification_table(0, csv, o.seed);
    if (csv) fclose(csv);
    printf("answer: in fp32 the tiled forward is within %.1e of the float64 reference for every block size, N and D above%s\n",
           g_worst_err, ok ? "" : " -- but something above is WRONG");
    return ok ? EXIT_OK : EXIT_FAIL;
}
