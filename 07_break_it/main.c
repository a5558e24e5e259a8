/*
 * step07: BREAK IT. The chapter's two breakages of the streaming softmax,
 * measured, plus the diagnosis that names a broken kernel's bug from its
 * output.
 *
 * What it adds over step 04: the same forward (breaks.c, break_gpu.cu) with
 * the lines each break removes tagged BREAK-1 / BREAK-2 / BREAK-3.
 *   Break 1, no running max: p = e^s overflows (fp16 from s > 11.09, fp32
 *     from s > 88.72), l and o become inf, o / l becomes NaN.
 *   Break 2, max kept, no rescaling: every tile is stable on its own but the
 *     tiles are added on different scales: finite and wrong, unless one tile
 *     covers all of N.
 * With unit-variance random inputs at D = 64 the scores stay below ~6, so
 * Break 1 does not overflow at all at --score-scale 1, in fp16 or fp32: the
 * program says so and sweeps the score scale to show where each overflows.
 *
 * Run:   make step07 && ./step07                       (everything, CPU; GPU too if present)
 *        ./step07 --break no-max --dtype fp16 --score-scale 4 --trace
 *        ./step07 --check        ./step07 --diagnose
 * Expect (last lines):
 *        answer: Break 1 overflows in fp16 from score scale ... and in fp32 only from ...
 *        answer: Break 2 ... with 4 K/V tiles ... with one tile ...
 * Limits: fp16 is emulated on the CPU by rounding every stored s, p, l, o
 *        through fp16 (the GPU kernel uses __half for them).
 */
#include "common.h"
#include "gpu.h"
#include "breaks.h"
#include "grade.h"
#include "break_fp8.h"
#include "../06_causal/causal.h"          /* step 06's mask, and its tile-relative bug that --diagnose names */
#include "../06_causal/naive_backward.h"  /* the breaks as step 06's training runs them (check_training_forms) */

#include <math.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

static const char *const break_names[] = {"none", "no-max", "no-rescale", "max-zero", "alibi-relative", "alibi-after-max"};

// --- one run ------------------------------------------------------------------------

typedef struct {
    long B, H, N, D, BR, BC;
    double scale;      /* Q is multiplied by this: scores scale with it */
    uint64_t seed;
    int inputs;        /* INPUTS_* (breaks.h): random, very negative rows, rows pointing at a far key */
} Setup;

typedef struct { float *q, *k, *v; double *ref; size_t n; float max_s; } Inputs;

static Inputs make_inputs(const Setup *u)
{
    Inputs in;
    long bh = u->B * u->H;
    in.n = (size_t)bh * u->N * u->D;
    in.q = xmalloc(in.n * 4, "Q"); in.k = xmalloc(in.n * 4, "K"); in.v = xmalloc(in.n * 4, "V");
    break_inputs(in.q, in.k, in.v, bh, u->N, u->D, u->scale, u->inputs, u->seed);
    in.ref = xmalloc(in.n * sizeof(double), "reference");
    ref_attention(in.q, in.k, in.v, bh, u->N, u->D, 0, in.ref);
    in.max_s = -INFINITY;
    for (long h = 0; h < bh; h++)
        for (long i = 0; i < u->N; i++)
            for (long j = 0; j < u->N; j++) {
                float s = dot_f32(in.q + ((size_t)h * u->N + i) * u->D, in.k + ((size_t)h * u->N + j) * u->D, u->D) /
                          sqrtf((float)u->D);
                if (s > in.max_s) in.max_s = s;
            }
    return in;
}

static void free_inputs(Inputs *in) { tfree(in->q); tfree(in->k); tfree(in->v); tfree(in->ref); }

typedef struct { Err e; FirstInf first; int gpu_ok; } Result;

/* The broken (or intact) forward on the CPU (gpu = 0) or GPU, compared with
 * the float64 reference. trace: one TraceTile per K/V tile for row trace_row. */
static Result run(const Setup *u, const Inputs *in, int brk, int fp16, int gpu, long BC, long trace_row, TraceTile *trace)
{
    Result r;
    long bh = u->B * u->H;
    float *o = xmalloc(in->n * 4, "O");
    memset(&r, 0, sizeof r);
    r.gpu_ok = 1;
    for (size_t i = 0; i < in->n; i++) o[i] = NAN;
    if (gpu) {
        r.first.tile = -1;
#ifdef HAVE_CUDA
        r.gpu_ok = break_forward_gpu(in->q, in->k, in->v, o, bh, u->N, u->D, BC, brk, fp16) == 0;
#else
        r.gpu_ok = 0; /* never asked for: gpu is 0 without CUDA */
#endif
    } else if (break_forward_cpu(in->q, in->k, in->v, o, bh, u->N, u->D, u->BR, BC, brk, 0, fp16, trace_row, trace, &r.first, NULL) != 0) {
        mem_oom_line(mem_refused(), "the tiles");
        exit(EXIT_FAIL);
    }
    r.e = compare(o, in->ref, in->n, 1e-5, 1e-5);
    tfree(o);
    return r;
}

// --- Break 1: the sweep over score scales -------------------------------------------------

static const double SCALES[] = {1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32};
#define NSCALES (sizeof SCALES / sizeof *SCALES)

typedef struct { double scale; float max_s; FirstInf first; int nonfinite; } Overflow;

/* The smallest score scale at which Break 1 gives non-finite output, in fp16
 * (fp16 = 1) or fp32. Returns its index in SCALES, or -1. */
static int first_overflow(const Setup *base, int fp16, int gpu, Overflow *out, int print)
{
    for (size_t i = 0; i < NSCALES; i++) {
        Setup u = *base;
        u.scale = SCALES[i];
        Inputs in = make_inputs(&u);
        Result r = run(&u, &in, BREAK_NO_MAX, fp16, gpu, u.BC, 0, NULL);
        int bad = r.e.n_nonfinite > 0;
        if (print)
            printf("  %s scale %5.1f: max score %7.2f  %s", fp16 ? "fp16" : "fp32", SCALES[i], in.max_s,
                   bad ? "inf/NaN" : "finite");
        if (print && bad && !gpu)
            printf(" (first inf in %s at K/V tile %ld, %s %ld, query row %ld, %s %.2f)", r.first.what, r.first.tile,
                   *r.first.what == 'p' ? "key" : "tile from key", r.first.col, r.first.row,
                   *r.first.what == 'p' ? "score there" : "largest score in the tile", r.first.s);
        if (print) printf("\n");
        free_inputs(&in);
        if (bad) {
            out->scale = SCALES[i]; out->max_s = in.max_s; out->first = r.first; out->nonfinite = 1;
            return (int)i;
        }
    }
    return -1;
}

// --- the diagnosis of each known break -----------------------------------------------------

/* Runs a break and builds its signature the way a checker that knows only
 * the output would: the multi-tile result, the one-tile result on the same
 * inputs, and (for the very-negative-rows inputs) which rows broke. */
static const char *diagnose_break(const Setup *u, int brk)
{
    Setup s = *u;
    s.inputs = brk == BREAK_MAX_ZERO ? INPUTS_NEG_ROWS : INPUTS_RANDOM;
    s.scale = brk == BREAK_NO_MAX ? 16 : 1; /* Break 1 needs scores past 11 to overflow fp16 */
    Inputs in = make_inputs(&s);
    const int fp16 = brk == BREAK_NO_MAX; /* fp16 where it overflows; fp32 elsewhere, so "right" means 1e-5 */
    Result multi = run(&s, &in, brk, fp16, 0, s.BC, 0, NULL);
    Result single = run(&s, &in, brk, fp16, 0, s.N, 0, NULL);
    Signature g;
    memset(&g, 0, sizeof g);
    g.multi = &multi.e;
    g.single = &single.e;
    if (s.inputs == INPUTS_NEG_ROWS) { /* rows 0 .. N/2-1 of each head are the very negative ones */
        long bh = s.B * s.H;
        float *o = xmalloc(in.n * 4, "O");
        break_forward_cpu(in.q, in.k, in.v, o, bh, s.N, s.D, s.BR, s.BC, brk, 0, fp16, 0, NULL, NULL, NULL);
        int neg_bad = 1, other_ok = 1;
        for (long h = 0; h < bh; h++)
            for (long i = 0; i < s.N; i++) {
                int row_bad = 1;
                for (long d = 0; d < s.D; d++) {
                    size_t x = ((size_t)h * s.N + i) * s.D + d;
                    float val = o[x];
                    if (f32_is_finite(val) && val != 0.0f) row_bad = 0;
                    if (i >= s.N / 2 && !(fabs((double)val - in.ref[x]) < 2e-2)) other_ok = 0;
                }
                if (i < s.N / 2 && !row_bad) neg_bad = 0;
            }
        g.neg_rows_known = 1; g.neg_rows_broken = neg_bad; g.other_rows_ok = other_ok;
        tfree(o);
    }
    free_inputs(&in);
    return diagnose(&g);
}

/* The tile-relative causal mask (step 06's code), through the same diagnosis. */
static const char *diagnose_relative(void)
{
    long bh = 2, N = 200, D = 32, BR = 32;
    size_t n = (size_t)bh * N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V"), *o = xmalloc(n * 4, "O");
    double *ref = xmalloc(n * sizeof(double), "reference");
    make_qkv(q, k, v, n, 5);
    ref_attention(q, k, v, bh, N, D, 1, ref);
    causal_forward_cpu(q, k, v, o, NULL, bh, N, D, BR, BR, MASK_RELATIVE, NULL);
    Err e = compare(o, ref, n, 1e-5, 1e-5);
    Signature g;
    memset(&g, 0, sizeof g);
    g.multi = &e;
    g.causal_split = 1;
    for (long h = 0; h < bh; h++)
        for (size_t x = 0; x < (size_t)N * D; x++) {
            double err = fabs((double)o[h * N * D + x] - ref[h * N * D + x]);
            double *slot = (long)(x / D) < BR ? &g.first_tile_err : &g.later_tiles_err;
            if (!(err <= *slot)) *slot = err;
        }
    tfree(q); tfree(k); tfree(v); tfree(o); tfree(ref);
    return diagnose(&g);
}

// --- a score modifier in the wrong place (the chapter's question 5) -------------------------

/* ALiBi's -slope_h |i - j| computed right, and in one of its two wrong places (brk), on inputs of kind
 * `inputs`; errors against the float64 reference with the bias. Returns the broken run's Err; cause (may be
 * NULL) gets what the diagnosis (grade.c) names from the broken output, and *tile its tile size. */
static Err alibi_run(const Setup *base, int inputs, int brk, int fp16, long BR, long BC, Err *intact,
                     const char **cause, long *tile)
{
    Setup s = *base;
    s.inputs = inputs;
    s.scale = 1;
    Inputs in = make_inputs(&s);
    const long bh = s.B * s.H;
    float *slope = xmalloc((size_t)bh * 4, "ALiBi slopes"), *o = xmalloc(in.n * 4, "O");
    alibi_slopes(slope, s.B, s.H);
    ref_attention_bias(in.q, in.k, in.v, bh, s.N, s.D, 0, slope, in.ref);
    break_forward_cpu(in.q, in.k, in.v, o, bh, s.N, s.D, BR, BC, BREAK_NONE, 0, fp16, 0, NULL, NULL, slope);
    *intact = compare(o, in.ref, in.n, fp16 ? 2e-2 : 1e-5, fp16 ? 0 : 1e-5);
    break_forward_cpu(in.q, in.k, in.v, o, bh, s.N, s.D, BR, BC, brk, 0, fp16, 0, NULL, NULL, slope);
    const Err e = compare(o, in.ref, in.n, fp16 ? 2e-2 : 1e-5, fp16 ? 0 : 1e-5);
    if (cause) *cause = alibi_diagnosis(in.q, in.k, in.v, o, slope, bh, s.N, s.D, 1e-4, tile);
    tfree(o);
    tfree(slope);
    free_inputs(&in);
    return e;
}

static int run_alibi(const Setup *u, int brk, int fp16)
{
    char eb[128], ib[128];
    printf("ALiBi, -slope_h |i - j| on every score (slopes 2^(-8(h+1)/H): %g .. %g for H = %ld), %s, BR=%ld BC=%ld, "
           "and --break %s:\n", alibi_slope(0, u->H), alibi_slope(u->H - 1, u->H), u->H, fp16 ? "fp16" : "fp32", u->BR,
           u->BC, break_names[brk]);
    Err in0, e = alibi_run(u, INPUTS_RANDOM, brk, fp16, u->BR, u->BC, &in0, NULL, NULL);
    printf("  random inputs: bias in the right place %s; --break %s %s%s\n", fmt_err(&in0, ib, sizeof ib), break_names[brk],
           e.n_nonfinite ? "inf/NaN, " : "", fmt_err(&e, eb, sizeof eb));
    if (brk == BREAK_ALIBI_RELATIVE) {
        Err one0, one = alibi_run(u, INPUTS_RANDOM, brk, fp16, u->N, u->N, &one0, NULL, NULL);
        printf("  one tile (BR = BC = N): --break %s %s\n", break_names[brk], fmt_err(&one, eb, sizeof eb));
        const int shown = e.n_bad > 0 && e.n_nonfinite == 0 && one.n_bad == 0 && in0.n_bad == 0 && one0.n_bad == 0;
        if (shown)
            printf("answer: ALiBi's bias from tile-relative indices is finite and wrong (max abs %.3f) with several tiles "
                   "and right with one (%.1e): -slope |r - c| is -slope |i - j| only where i0 = j0, so every tile off the "
                   "diagonal gets the diagonal's bias; a score modifier needs the absolute i0 + r, j0 + c, as the mask "
                   "does\n", e.max_abs, one.max_abs);
        else if (in0.n_bad || one0.n_bad)
            printf("answer: none: the bias in the right place is itself wrong here (max abs %.1e, %.1e with one tile), "
                   "so nothing can be said of the break\n", in0.max_abs, one0.max_abs);
        else if (e.n_nonfinite)
            printf("answer: the tile-relative bias gave inf/NaN (%zu of %zu outputs): that is not this break's signature, "
                   "which is finite and wrong\n", e.n_nonfinite, e.n);
        else if (one.n_bad)
            printf("answer: the tile-relative bias is wrong even with one tile (max abs %.1e): that is not this break's "
                   "signature (with one tile r = i and c = j)\n", one.max_abs);
        else
            printf("answer: the tile-relative bias did not show here (max abs %.1e with BR=%ld BC=%ld, %.1e with one "
                   "tile): with N = %ld it takes more than one tile (N > BR or N > BC)\n", e.max_abs, u->BR, u->BC,
                   one.max_abs, u->N);
        return shown ? EXIT_OK : EXIT_FAIL;
    }
    /* The far key: rows N/2.. point at key 0 alone, so the largest score of the row is also the most biased. */
    Err far0, far = alibi_run(u, INPUTS_FAR_KEY, brk, fp16, u->BR, u->BC, &far0, NULL, NULL);
    printf("  rows N/2.. aligned with key 0 alone (score 300 there): bias in the right place %s; --break %s %zu of %zu "
           "outputs inf/NaN, %s\n", fmt_err(&far0, ib, sizeof ib), break_names[brk], far.n_nonfinite, far.n,
           fmt_err(&far, eb, sizeof eb));
    Setup w = *u;                  /* the same with 8 heads: head 0's slope is 1/2, -127.5 at distance 255 */
    w.H = 8;
    Err wide0, wide = alibi_run(&w, INPUTS_FAR_KEY, brk, fp16, u->BR, u->BC, &wide0, NULL, NULL);
    printf("  the same with H = 8 (head 0's slope 1/2): bias in the right place %s; --break %s %zu of %zu outputs "
           "inf/NaN\n", fmt_err(&wide0, ib, sizeof ib), break_names[brk], wide.n_nonfinite, wide.n);
    const int shown = e.n_bad == 0 && in0.n_bad == 0 && far0.n_bad == 0 && wide0.n_bad == 0 &&
                      (far.n_nonfinite || wide.n_nonfinite);
    if (shown)
        printf("answer: ALiBi's bias added after m_tile is right on random inputs (max abs %.1e): the bias is never "
               "positive, so the unbiased max still bounds every exponent from above and nothing overflows. It fails by "
               "underflow, when the row's largest score sits at a far key (bias -slope |i - j|): every "
               "e^(s + bias - m_tile) falls below e^-103 in fp32 (e^-17 in fp16), l = 0 and o / l = NaN: %zu outputs with "
               "H = %ld (head 0's slope %g, -%.0f at distance %ld), %zu with H = 8 (-%.0f). A modifier that can be "
               "positive would overflow instead. Before m_tile, m is the max of what is exponentiated\n", e.max_abs,
               far.n_nonfinite, u->H, alibi_slope(0, u->H), alibi_slope(0, u->H) * (double)(u->N - 1), u->N - 1,
               wide.n_nonfinite, alibi_slope(0, 8) * (double)(u->N - 1));
    else if (in0.n_bad || far0.n_bad || wide0.n_bad)
        printf("answer: none: the bias in the right place is itself wrong here (max abs %.1e, %.1e, %.1e), so nothing "
               "can be said of the break\n", in0.max_abs, far0.max_abs, wide0.max_abs);
    else if (e.n_bad)
        printf("answer: ALiBi's bias added after m_tile is wrong on random inputs already (max abs %.1e): that is not "
               "this break's signature, which is right there and fails only by underflow at a far key\n", e.max_abs);
    else
        printf("answer: ALiBi's bias added after m_tile did not fail here (max abs %.1e on random inputs, no inf/NaN at "
               "the far key): at N = %ld the largest bias is -%.0f with H = 8, not enough to underflow every term of a "
               "row (e^-103 in fp32); a longer --seq shows it\n", e.max_abs, u->N, alibi_slope(0, 8) * (double)(u->N - 1));
    return shown ? EXIT_OK : EXIT_FAIL;
}

/* Each wrong place of the modifier, through the diagnosis, which must name it. */
static void diagnose_alibi_breaks(const Setup *u)
{
    static const struct { int brk; const char *cause; } cases[] = {
        {BREAK_ALIBI_RELATIVE, "ALiBi's bias from tile-relative indices"},
        {BREAK_ALIBI_AFTER_MAX, "ALiBi's bias added after the running max"},
    };
    for (int c = 0; c < 2; c++) {
        Err intact;
        const char *got = NULL;
        long tile = 0;
        alibi_run(u, INPUTS_FAR_KEY, cases[c].brk, 0, u->BR, u->BC, &intact, &got, &tile);
        char name[64];
        snprintf(name, sizeof name, "diagnose/%s", break_names[cases[c].brk]);
        const long want_tile = cases[c].brk == BREAK_ALIBI_RELATIVE ? u->BC : 0; /* after-max: no tile size to tell */
        report(got && !strcmp(got, cases[c].cause) && tile == want_tile, NULL, name,
               "expected \"%s\" (tile %ld), diagnosis says \"%s\" (tile %ld)", cases[c].cause, want_tile,
               got ? got : "(none)", tile);
    }
}

static int run_diagnose(const Setup *u)
{
    static const struct { int brk; const char *cause; } cases[] = {
        {BREAK_NO_MAX, "running-max subtraction missing (exp overflow)"},
        {BREAK_NO_RESCALE, "running statistics not rescaled (alpha/beta)"},
        {BREAK_MAX_ZERO, "running max initialised to 0 instead of -inf"},
    };
    char name[64];
    for (int c = 0; c < 3; c++) {
        const char *got = diagnose_break(u, cases[c].brk);
        snprintf(name, sizeof name, "diagnose/%s", break_names[cases[c].brk]);
        report(got && !strcmp(got, cases[c].cause), NULL, name, "expected \"%s\", diagnosis says \"%s\"", cases[c].cause,
               got ? got : "(none)");
    }
    const char *got = diagnose_relative();
    report(got && !strcmp(got, "mask built from tile-relative indices"), NULL, "diagnose/relative-mask",
           "expected \"mask built from tile-relative indices\", diagnosis says \"%s\"", got ? got : "(none)");
    got = diagnose_break(u, BREAK_NONE);
    report(got == NULL, NULL, "diagnose/intact", "the intact forward has no diagnosis (got \"%s\")", got ? got : "(none)");
    diagnose_alibi_breaks(u);
    return report_finish();
}

// --- checks -------------------------------------------------------------------------------

/* ./step06 --train trains a GPT with Break 1 and Break 2 through the whole-matrix forms of
 * 06_causal/naive_backward.c (which give it the exact gradient too): they are this step's breaks when each
 * equals break_forward_cpu's, causal and in the same tiles, on the same inputs. */
static void check_training_forms(void)
{
    static const long cases[3][5] = {{17, 16, 16, 16, 201}, {100, 16, 32, 16, 202}, {100, 8, 16, 32, 203}}; /* N D BR BC seed */
    static const int brk[2][2] = {{BREAK_NO_RESCALE, SOFTMAX_NO_RESCALE}, {BREAK_NO_MAX, SOFTMAX_NO_MAX}};
    char name[128], eb[128];
    for (int c = 0; c < 3; c++) {
        const long bh = 2, N = cases[c][0], D = cases[c][1], BR = cases[c][2], BC = cases[c][3];
        const size_t n = (size_t)bh * N * D;
        float *f = xmalloc(n * 4 * 3, "inputs"), *o1 = xmalloc(n * 4, "O"), *o2 = xmalloc(n * 4, "O");
        float *P = xmalloc(naive_p_bytes(bh, N), "P");
        double *ref = xmalloc(n * 8, "ref");
        Rng r;
        rng_seed(&r, (uint64_t)cases[c][4]);
        for (size_t i = 0; i < 3 * n; i++) f[i] = (float)(1.5 * rng_normal(&r));
        const float *q = f, *k = f + n, *v = f + 2 * n;
        for (int b = 0; b < 2; b++) {
            AttnKind a = {MASK_ABSOLUTE, brk[b][1], BR, BC};
            naive_forward_p(q, k, v, o1, P, bh, N, D, &a);
            break_forward_cpu(q, k, v, o2, bh, N, D, BR, BC, brk[b][0], 1, 0, 0, NULL, NULL, NULL);
            for (size_t i = 0; i < n; i++) ref[i] = o2[i];
            Err e = compare(o1, ref, n, 1e-5, 1e-5);
            snprintf(name, sizeof name, "forms/naive-%s N=%ld D=%ld BC=%ld", b ? "break1" : "break2", N, D, BC);
            report(e.n_bad == 0, &e, name, "step 06's naive form (what --train trains with) vs the tiled "
                   "break_forward_cpu (causal): %s", fmt_err(&e, eb, sizeof eb));
        }
        tfree(f); tfree(o1); tfree(o2); tfree(P); tfree(ref);
    }
}

static int run_checks(const Setup *u, int gpu)
{
    char name[96], eb[128];
    for (int g = 0; g <= gpu; g++) {
        const char *dev = g ? "gpu" : "cpu";
        Setup s = *u;
        s.scale = 1;
        Inputs in = make_inputs(&s);
        for (int fp16 = 0; fp16 < 2; fp16++) {
            Result r = run(&s, &in, BREAK_NONE, fp16, g, s.BC, 0, NULL);
            double tol = fp16 ? 1e-2 : 1e-5;
            snprintf(name, sizeof name, "%s/intact-%s", dev, fp16 ? "fp16" : "fp32");
            report(r.gpu_ok && r.e.n_nonfinite == 0 && r.e.max_abs < tol, &r.e, name, "%s (expected < %.0e)",
                   fmt_err(&r.e, eb, sizeof eb), tol);
        }
        Result r1 = run(&s, &in, BREAK_NO_MAX, 0, g, s.BC, 0, NULL);
        snprintf(name, sizeof name, "%s/break1-fp32-scale1-finite", dev);
        report(r1.e.n_nonfinite == 0, NULL, name, "max score %.2f < 88.72: fp32 does not overflow at unit scale (as said)", in.max_s);
        Result b2 = run(&s, &in, BREAK_NO_RESCALE, 0, g, s.BC, 0, NULL);
        snprintf(name, sizeof name, "%s/break2-multi-tile", dev);
        report(b2.e.n_nonfinite == 0 && b2.e.max_abs >= 0.05 && b2.e.max_abs <= 1.0, NULL, name,
               "%ld K/V tiles: finite, max abs %.3f in [0.05, 1]", (s.N + s.BC - 1) / s.BC, b2.e.max_abs);
        Result b2s = run(&s, &in, BREAK_NO_RESCALE, 0, g, s.N, 0, NULL);
        snprintf(name, sizeof name, "%s/break2-one-tile", dev);
        report(b2s.e.n_nonfinite == 0 && b2s.e.max_abs < 1e-5, NULL, name, "BC = N, one tile: max abs %.1e < 1e-5",
               b2s.e.max_abs);
        free_inputs(&in);
        Overflow o16, o32;
        int i16 = first_overflow(u, 1, g, &o16, 0), i32 = first_overflow(u, 0, g, &o32, 0);
        snprintf(name, sizeof name, "%s/break1-fp16-overflows", dev);
        report(i16 >= 0, NULL, name, "fp16: non-finite from score scale %.1f (max score %.2f > 11.09)",
               i16 >= 0 ? o16.scale : 0.0, i16 >= 0 ? o16.max_s : 0.0f);
        snprintf(name, sizeof name, "%s/break1-fp32-overflows-later", dev);
        report(i32 > i16 && i16 >= 0, NULL, name, "fp32: non-finite only from score scale %.1f (max score %.2f > 88.72)",
               i32 >= 0 ? o32.scale : 0.0, i32 >= 0 ? o32.max_s : 0.0f);
        if (!g && i16 >= 0) { /* the trace of the answer line's row: clean before the first inf's tile, inf from it */
            Setup t = *u;
            t.scale = o16.scale;
            Inputs ti = make_inputs(&t);
            const long nt = (t.N + t.BC - 1) / t.BC;
            TraceTile *tr = xmalloc((size_t)nt * sizeof *tr, "trace");
            run(&t, &ti, BREAK_NO_MAX, 1, 0, t.BC, o16.first.row, tr);
            int ok = o16.first.head == 0 && tr[o16.first.tile].nonfinite;
            for (long k = 0; k < o16.first.tile; k++) ok &= !tr[k].nonfinite;
            report(ok, NULL, "cpu/trace-names-the-answers-row", "fp16 scale %.1f: the trace of query row %ld (head %ld) is "
                   "finite before K/V tile %ld and inf/NaN from it, as the answer line says", o16.scale, o16.first.row,
                   o16.first.head, o16.first.tile);
            tfree(tr);
            free_inputs(&ti);
        }
        Setup n = *u;
        n.inputs = INPUTS_NEG_ROWS; n.scale = 1;
        Inputs ni = make_inputs(&n);
        Result z = run(&n, &ni, BREAK_MAX_ZERO, 0, g, n.BC, 0, NULL);
        Result zi = run(&n, &ni, BREAK_NONE, 0, g, n.BC, 0, NULL);
        snprintf(name, sizeof name, "%s/break3-max-zero", dev);
        report(z.e.n_bad > 0 && zi.e.n_bad == 0, NULL, name,
               "rows with scores < -100: max-zero breaks them (%zu bad elements), intact does not (%zu)", z.e.n_bad, zi.e.n_bad);
        free_inputs(&ni);
    }
    check_training_forms();
    grade_checks();
    if (!gpu) report_skip("gpu", gpu_available() ? "--device cpu" : "no CUDA device");
    return report_finish();
}

// --- main ---------------------------------------------------------------------------------

static void usage(const Opts *o)
{
    printf("usage: ./step07 [options]\n"
           "BREAK IT: the streaming softmax without its running max, and without its rescaling.\n");
    print_common_usage(o);
    printf("  --break none|no-max|no-rescale|max-zero   run one break (default: show them all)\n"
           "  --score-scale X        multiply Q by X, so the scores grow by X (default 1)\n"
           "  --trace                per K/V tile of one query row: max s, max p, l, max |o|, inf/NaN yet\n"
           "  --trace-row R          the query row traced (default: the row of the first inf, else of the largest score)\n"
           "  --diagnose             run each known break through the diagnosis and check it names the cause\n"
           "  --fp8                  break it in FP8: P (after the running max) and S (before it) stored in e4m3, the error\n"
           "                         of each as the scores grow (the FP8 kernels of step 05 store P: the max makes it fit)\n"
           "  --assignment DIR       write input sets for a student's own tiled attention (and DIR/README.txt)\n"
           "  --grade DIR            grade the student's DIR/out_SET.npy: PASS, FAIL or MISSING per set, the break it\n"
           "                         shows; a file that is not a float32 .npy of the set's shape fails its set (one line\n"
           "                         on stderr too); exit 0 all right, 1 anything wrong, unreadable or missing, 2 no DIR\n"
           "  --json FILE            with --grade: also write FILE, the results file an autograder reads (Gradescope's\n"
           "                         results.json: the score, one test per set with its status and the grader's line),\n"
           "                         whole or not at all (a new file renamed over FILE)\n"
           "  --q/--k/--v FILE.npy --out FILE.npy [--causal] [--alibi]   run --break (default none) on these inputs, save O\n");
}

static void print_trace(const Setup *u, const Inputs *in, int brk, int fp16, long row, FILE *csv)
{
    long nt = (u->N + u->BC - 1) / u->BC;
    TraceTile *t = xmalloc((size_t)nt * sizeof *t, "trace");
    Result r = run(u, in, brk, fp16, 0, u->BC, row, t);
    printf("trace of query row %ld, %s, --break %s (per K/V tile of %ld keys):\n", row, fp16 ? "fp16" : "fp32",
           break_names[brk], u->BC);
    printf("  tile     max s        max p            l       max |o|   inf/NaN yet\n");
    for (long i = 0; i < nt; i++)
        printf("  %4ld  %8.3f  %11.4g  %11.4g   %11.4g   %s\n", i, t[i].max_s, t[i].max_p, t[i].l, t[i].max_o,
               t[i].nonfinite ? "yes" : "no");
    for (long i = 0; csv && i < nt; i++)
        fprintf(csv, "%s,%s,%g,%ld,%ld,%.6g,%.6g,%.6g,%.6g,%d\n", break_names[brk], fp16 ? "fp16" : "fp32", u->scale, row, i,
                t[i].max_s, t[i].max_p, t[i].l, t[i].max_o, t[i].nonfinite);
    printf("  output vs reference: %zu non-finite of %zu, max abs %.3g\n", r.e.n_nonfinite, r.e.n, r.e.max_abs);
    tfree(t);
}

int main(int argc, char **argv)
{
    Opts o;
    int brk = -1, trace = 0, diag = 0;
    long trace_row = -1;
    double scale = 1;
    const char *assignment = NULL, *grade = NULL, *json = NULL;
    int alibi = 0, fp8 = 0;
    opts_expand(&argc, &argv);
    opts_init(&o, "step07", OPT_SHAPE | OPT_BLOCK | OPT_DTYPE | OPT_SEED | OPT_CSV | OPT_CHECK | OPT_DEVICE | OPT_NPY | OPT_GPU_AS |
              OPT_CAUSAL, (1u << DT_FP32) | (1u << DT_FP16));
    o.B = 2; o.H = 4; o.N = 256; o.D = 64; o.BR = 64; o.BC = 64;
    for (int i = 1; i < argc; i++) {
        if (opts_parse_common(&o, argc, argv, &i)) continue;
        if (!strcmp(argv[i], "--break")) { const char *opt = argv[i]; brk = parse_choice(opt, opt_value(argc, argv, &i), break_names, 6); continue; }
        if (!strcmp(argv[i], "--score-scale")) { const char *opt = argv[i]; scale = parse_double(opt, opt_value(argc, argv, &i), 1e-3, 1e3); continue; }
        if (!strcmp(argv[i], "--trace")) { trace = 1; continue; }
        if (!strcmp(argv[i], "--trace-row")) { const char *opt = argv[i]; trace_row = parse_long(opt, opt_value(argc, argv, &i), 0, 1048575); continue; }
        if (!strcmp(argv[i], "--diagnose")) { diag = 1; continue; }
        if (!strcmp(argv[i], "--fp8")) { fp8 = 1; continue; }
        if (!strcmp(argv[i], "--alibi")) { alibi = 1; continue; }
        if (!strcmp(argv[i], "--json")) {
            const char *opt = argv[i];
            json = opt_value(argc, argv, &i);
            if (!*json) usage_error("option %s: empty file name", opt);
            continue;
        }
        if (!strcmp(argv[i], "--assignment") || !strcmp(argv[i], "--grade")) {
            const char **dst = argv[i][2] == 'a' ? &assignment : &grade, *opt = argv[i];
            *dst = opt_value(argc, argv, &i);
            if (!**dst) usage_error("option %s: empty directory name", opt);
            continue;
        }
        usage_error("unknown option '%s' (see --help)", argv[i]);
    }
    if (o.help) { usage(&o); return 0; }
    if (fp8) { break_fp8_table(); return 0; } /* CPU only, no options of its own: the table of break_fp8.c */
    if (assignment) return grade_assignment(assignment, o.seed, 1);
    if (json && !grade) usage_error("option --json goes with --grade DIR (the results file of that grade)");
    if (grade) {
        /* a results file that cannot be written is bad input: said before anything is graded (by a file made and
         * removed beside it: an existing results file is not touched until the new one is whole) */
        if (json && grade_json_probe(json) != 0) usage_error("option --json: cannot write %s: %s", json, strerror(errno));
        GradeReport r;
        const int rc = grade_dir(grade, 1, &r); /* 2: no such directory, and r says so: the results file still answers */
        if (json && grade_json(json, &r) != 0) return EXIT_FAIL;
        if (json) printf("wrote %s: score %d of %d, one test per set (an autograder's results file)\n", json, r.passed, r.sets);
        return rc;
    }
    if (o.outfile && !o.qfile) usage_error("option --out needs --q, --k and --v: the inputs whose output it saves");
    if (o.causal && !o.qfile) usage_error("option --causal goes with --q/--k/--v/--out (the other runs are non-causal)");
    if (alibi && !o.qfile) usage_error("option --alibi goes with --q/--k/--v/--out (--break alibi-... runs its own)");
    opts_validate(&o, sizeof(float));
    if (o.qfile) { /* a break on given inputs, saved: what a student's broken kernel would write */
        float *q, *k, *v;
        inputs_load_or_make(&o, &q, &k, &v);
        const size_t n = (size_t)o.B * o.H * o.N * o.D;
        float *out = xmalloc(n * 4, "O");
        double *ref = xmalloc(n * sizeof(double), "reference");
        const int b = brk < 0 ? BREAK_NONE : brk;
        float *slope = NULL; /* --alibi, or an ALiBi break: ALiBi's slopes for H heads */
        if (alibi || b == BREAK_ALIBI_RELATIVE || b == BREAK_ALIBI_AFTER_MAX) {
            slope = xmalloc((size_t)o.B * o.H * 4, "ALiBi slopes");
            alibi_slopes(slope, o.B, o.H);
        }
        if (break_forward_cpu(q, k, v, out, o.B * o.H, o.N, o.D, o.BR, o.BC, b, o.causal, o.dtype == DT_FP16, 0, NULL,
                              NULL, slope) != 0) { mem_oom_line(mem_refused(), "the tiles"); return EXIT_FAIL; }
        ref_attention_bias(q, k, v, o.B * o.H, o.N, o.D, o.causal, slope, ref);
        char eb[128];
        Err e = compare(out, ref, n, 1e-5, 1e-5);
        printf("--break %s, %s, BR=%ld BC=%ld%s%s: %s%s\n", break_names[b], dtype_name(o.dtype), o.BR, o.BC,
               o.causal ? ", causal" : "", slope ? ", ALiBi" : "", fmt_err(&e, eb, sizeof eb), e.n_nonfinite ? " (inf/NaN in the output)" : "");
        const long shape[4] = {o.B, o.H, o.N, o.D};
        if (o.outfile) {
            if (npy_save(o.outfile, out, shape, 4, DT_FP32) != 0) usage_error("option --out: cannot write %s", o.outfile);
            printf("wrote %s\n", o.outfile);
        }
        tfree(q); tfree(k); tfree(v); tfree(out); tfree(ref); tfree(slope);
        return EXIT_OK;
    }
    if (o.D != 32 && o.D != 64 && o.D != 128 && o.device == DEV_GPU)
        usage_error("option --dim: the GPU break kernel takes D = 32, 64 or 128, not %ld", o.D);
    if (trace_row >= o.N) usage_error("option --trace-row: %ld is past the last row (N = %ld)", trace_row, o.N);
    Setup u = {o.B, o.H, o.N, o.D, o.BR, o.BC, scale, o.seed, 0};
    int gpu = o.device != DEV_CPU && gpu_available() && (o.D == 32 || o.D == 64 || o.D == 128);
    if (o.device == DEV_GPU) gpu_require();
    if (gpu) opts_gpu_grid(&o, 1);
    if (diag) return run_diagnose(&u);
    if (brk == BREAK_ALIBI_RELATIVE || brk == BREAK_ALIBI_AFTER_MAX) {
        if (gpu && o.device == DEV_GPU) usage_error("option --break %s runs on the CPU only", break_names[brk]);
        if (o.qfile) usage_error("option --break %s makes its own inputs (random, and rows pointing at a far key)",
                                 break_names[brk]);
        return run_alibi(&u, brk, o.dtype == DT_FP16);
    }
    if (o.check) return run_checks(&u, gpu);

    int fp16 = o.dtype == DT_FP16;
    Inputs in = make_inputs(&u);
    char eb[128];
    printf("step07: BREAK IT, B=%ld H=%ld N=%ld D=%ld, BR=%ld BC=%ld (%ld K/V tiles per row), score scale %g: max score %.2f\n",
           o.B, o.H, o.N, o.D, o.BR, o.BC, (o.N + o.BC - 1) / o.BC, scale, in.max_s);
    if (trace) {
        long row = trace_row;
        const char *why = "as asked (--trace-row)";
        if (row < 0) { /* the row where the first inf appears (the one the answer line names), if in head 0 */
            Result r = run(&u, &in, brk < 0 ? BREAK_NO_MAX : brk, fp16, 0, o.BC, 0, NULL);
            if (r.first.tile >= 0 && r.first.head == 0) { row = r.first.row; why = "the row of the first inf"; }
        }
        if (row < 0) { /* else the row holding the largest score of head 0 */
            float best = -INFINITY;
            for (long i = 0; i < o.N; i++)
                for (long j = 0; j < o.N; j++) {
                    float s = dot_f32(in.q + i * o.D, in.k + j * o.D, o.D) / sqrtf((float)o.D);
                    if (s > best) { best = s; row = i; }
                }
            why = "the row holding the largest score; nothing overflows";
        }
        printf("traced: query row %ld of head 0 (%s)\n", row, why);
        FILE *tcsv = o.csv ? csv_open(o.csv, "break,dtype,score_scale,row,tile,max_s,max_p,l,max_o,nonfinite") : NULL;
        print_trace(&u, &in, brk < 0 ? BREAK_NO_MAX : brk, fp16, row, tcsv);
        if (tcsv) fclose(tcsv);
        free_inputs(&in);
        return EXIT_OK;
    }
    FILE *csv = o.csv ? csv_open(o.csv, "device,break,dtype,score_scale,BC,max_score,nonfinite,max_abs") : NULL;
    for (int g = 0; g <= gpu; g++) {
        printf("\n-- %s\n", g ? "GPU (break_gpu.cu)" : "CPU (breaks.c)");
        for (int b = 0; b < 3; b++) {
            if (brk >= 0 && b != brk) continue;
            for (int h = 0; h < 2; h++) {
                if (brk >= 0 && h != fp16) continue;
                Result r = run(&u, &in, b, h, g, o.BC, 0, NULL);
                printf("  --break %-10s %s: %s%s\n", break_names[b], h ? "fp16" : "fp32",
                       r.e.n_nonfinite ? "" : "finite, ", r.e.n_nonfinite ? "" : fmt_err(&r.e, eb, sizeof eb));
                if (r.e.n_nonfinite)
                    printf("      %zu of %zu outputs inf/NaN%s\n", r.e.n_nonfinite, r.e.n, g ? "" : "");
                if (csv)
                    fprintf(csv, "%s,%s,%s,%g,%ld,%.3f,%zu,%.4g\n", g ? "gpu" : "cpu", break_names[b], h ? "fp16" : "fp32", scale,
                            o.BC, in.max_s, r.e.n_nonfinite, r.e.max_abs);
            }
        }
        if (brk < 0 || brk == BREAK_NO_MAX) {
            if (in.max_s < 11.09f)
                printf("\n  Break 1 at score scale %g: the largest score is %.2f, below fp16's 11.09 (e^11.09 = 65504) and fp32's\n"
                       "  88.72: unit-variance random inputs at D = %ld keep scores single-digit, so nothing overflows here.\n"
                       "  Larger scores (aligned queries and keys, as in trained models) do; the sweep shows where:\n",
                       scale, in.max_s, o.D);
            Overflow o16, o32;
            int i16 = first_overflow(&u, 1, g, &o16, 1), i32 = first_overflow(&u, 0, g, &o32, 1);
            if (i16 >= 0 && i32 >= 0)
                printf("answer: Break 1 overflows in fp16 from score scale %.1f (max score %.1f%s) and in fp32 only from "
                       "%.1f (max score %.1f): fp16 fails at scores %.0fx smaller, as e^s passes 65504 at s = 11.09 and "
                       "3.4e38 at s = 88.72\n", o16.scale, o16.max_s,
                       g ? "" : "", o32.scale, o32.max_s, o32.max_s / o16.max_s);
            if (i16 >= 0 && !g)
                printf("answer: in fp16 the first inf appeared in K/V tile %ld (%s of query row %ld; largest score there %.2f)\n",
                       o16.first.tile, *o16.first.what == 'p' ? "p" : *o16.first.what == 'l' ? "l" : "o", o16.first.row, o16.first.s);
            if (i32 >= 0 && !g)
                printf("answer: in fp32 the first inf appeared in K/V tile %ld (%s of query row %ld; largest score there %.2f)\n",
                       o32.first.tile, *o32.first.what == 'p' ? "p" : *o32.first.what == 'l' ? "l" : "o", o32.first.row, o32.first.s);
        }
        if (brk == BREAK_MAX_ZERO) { /* only rows whose every score is below about -88 break: show such rows */
            Setup n = u;
            n.inputs = INPUTS_NEG_ROWS; n.scale = 1;
            Inputs ni = make_inputs(&n);
            Result z = run(&n, &ni, BREAK_MAX_ZERO, fp16, g, o.BC, 0, NULL);
            printf("  --break max-zero   %s (inputs below): %s\n", fp16 ? "fp16" : "fp32", fmt_err(&z.e, eb, sizeof eb));
            printf("answer: with m starting at 0 instead of -inf, p = e^(s - 0) underflows to 0 for rows whose every score\n"
                   "  is below about -104 (fp32; about -17 when p is stored in fp16), so l = 0 and o / l = NaN; the random inputs above have no such row. On\n"
                   "  inputs whose first N/2 rows score below -100 against every key: %zu of %zu outputs bad (%zu inf/NaN)\n",
                   z.e.n_bad, z.e.n, z.e.n_nonfinite);
            free_inputs(&ni);
        }
        if ((brk < 0 || brk == BREAK_NO_RESCALE) && o.BC >= o.N) {
            Result s = run(&u, &in, BREAK_NO_RESCALE, 0, g, o.N, 0, NULL);
            printf("answer: Break 2 with one K/V tile (BC = %ld >= N = %ld) is right (max abs %.1e): with nothing to rescale,\n"
                   "  dropping alpha/beta costs nothing. Use BC < N (e.g. --bc 64) to see it fail.\n", o.BC, o.N, s.e.max_abs);
        } else if (brk < 0 || brk == BREAK_NO_RESCALE) {
            Result m = run(&u, &in, BREAK_NO_RESCALE, 0, g, o.BC, 0, NULL);
            Result s = run(&u, &in, BREAK_NO_RESCALE, 0, g, o.N, 0, NULL);
            printf("answer: Break 2 (max kept, no rescaling) is finite and wrong with %ld K/V tiles (max abs %.3f; the chapter "
                   "says 0.1 to 0.5%s) and right with one tile, BC = N (max abs %.1e): tiles added on different scales\n",
                   (o.N + o.BC - 1) / o.BC, m.e.max_abs,
                   m.e.max_abs >= 0.1 && m.e.max_abs <= 0.5 ? "" : ": outside that range here", s.e.max_abs);
        }
    }
    if (!gpu) printf("\nGPU part: skipped (%s)\n", o.device == DEV_CPU ? "--device cpu" : "no CUDA device");
    if (csv) fclose(csv);
    free_inputs(&in);
    return EXIT_OK;
}
