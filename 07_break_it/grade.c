/*
 * grade.c: the instructor's grader. `./step07 --assignment DIR` writes input
 * sets (.npy, float32, [1, H, N, 64], H = 2, or 8 for alibi) that tell the known breaks apart, with
 * a README.txt; the student runs their own tiled attention on each, in any
 * language, and writes out_SET.npy back; `./step07 --grade DIR` compares
 * every output with the float64 reference and names the bug.
 *
 * Each set is there for one break:
 *   multi      4 K/V tiles of 64, unit scores    not rescaled: finite and wrong here ...
 *   one_tile   N = 64, one tile                  ... and right here
 *   negative   half the rows score below -100    running max started at 0: those rows 0/0
 *   causal     causal, 4 row tiles               mask from tile-relative indices
 *   large      scores up to about 110            no running max: e^s overflows (fp32 too)
 * and one more that the chapter's own causal snippet has: it visits every
 * K/V tile, so in a tile above the diagonal a row's scores are all masked,
 * m_tile = -inf and p = e^(-inf - (-inf)) = NaN (the causal set shows it)
 * and the diagnosis also tries the known breaks themselves on the same inputs
 * (Break 2 and both tile-relative masks at tiles of 16 to 128): a student's
 * output that equals one of them is named with its tile size. The set
 *   alibi      H = 8, rows 128.. point at key 0   ALiBi's bias after the running max, or tile-relative
 * grades the score modifier of the chapter's question 5.
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include "breaks.h"
#include "grade.h"
#include "../01_naive/naive.h"
#include "../06_causal/causal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { GB = 1, GH = 2, GD = 64, GTILE = 64, NSETS = 6, ALIBI_SET = 5 };

typedef struct {
    const char *name;
    long N;
    double scale;
    int causal, inputs;
    const char *what;
    long H;    /* heads */
    int alibi; /* 1: the student adds ALiBi's -slope_h |i - j| */
} Set;

static const Set SETS[NSETS] = {
    {"multi", 256, 1, 0, INPUTS_RANDOM, "N = 256, several K/V tiles, unit-variance scores", GH, 0},
    {"one_tile", 64, 1, 0, INPUTS_RANDOM, "N = 64: one K/V tile of BC = 64", GH, 0},
    {"negative", 256, 1, 0, INPUTS_NEG_ROWS, "rows 0..127 of each head score below -100 against every key", GH, 0},
    {"causal", 256, 1, 1, INPUTS_RANDOM, "causal mask, several row tiles", GH, 0},
    {"large", 256, 24, 0, INPUTS_RANDOM, "large scores, up to about 110", GH, 0},
    {"alibi", 256, 1, 0, INPUTS_FAR_KEY, "ALiBi, H = 8: rows 128.. point at key 0 (score 300)", 8, 1},
};

static void path_of(char *buf, size_t n, const char *dir, const char *what, const char *set)
{
    snprintf(buf, n, "%s/%s_%s.npy", dir, what, set);
}

// --- the assignment -------------------------------------------------------------------

int grade_assignment(const char *dir, unsigned long long seed)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        usage_error("option --assignment: cannot make directory %s: %s", dir, strerror(errno));
    char path[4096];
    for (int s = 0; s < NSETS; s++) {
        const Set *t = &SETS[s];
        const size_t n = (size_t)GB * t->H * t->N * GD;
        const long shape[4] = {GB, t->H, t->N, GD};
        float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
        break_inputs(q, k, v, GB * t->H, t->N, GD, t->scale, t->inputs, seed + 100 + s);
        const float *x[3] = {q, k, v};
        static const char *const qkv[3] = {"q", "k", "v"};
        for (int i = 0; i < 3; i++) {
            path_of(path, sizeof path, dir, qkv[i], t->name);
            if (npy_save(path, x[i], shape, 4, DT_FP32) != 0)
                usage_error("option --assignment: cannot write %s: %s", path, strerror(errno));
        }
        tfree(q); tfree(k); tfree(v);
    }
    snprintf(path, sizeof path, "%s/README.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) usage_error("option --assignment: cannot write %s: %s", path, strerror(errno));
    fprintf(f, "Flash attention: the graded run\n\n"
               "For each SET below, load q_SET.npy, k_SET.npy and v_SET.npy (float32, shape [B, H, N, D] =\n"
               "[1, H, N, 64], H = 2, or 8 for the set 'alibi'), run YOUR tiled attention on them in float32 with\n"
               "BR = BC = 64, scale 1/sqrt(64), causal only for the set 'causal', ALiBi only for the set 'alibi'\n"
               "(add -slope_h * |i - j| to score (i, j) of head h, slope_h = 2^-(h+1) for h = 0..7: 1/2, 1/4, ..,\n"
               "1/256), and save the output O (same shape, float32) as out_SET.npy in this directory.\n"
               "Then the instructor runs: ./step07 --grade THIS_DIRECTORY\n\n");
    for (int s = 0; s < NSETS; s++)
        fprintf(f, "  %-9s %s%s\n", SETS[s].name, SETS[s].what, SETS[s].causal ? " (run it causal)" : "");
    fprintf(f, "\n(ALiBi, the paper's bias for a causal model, is -slope * (i - j); here, without a mask, -slope * |i - j|.)\n");
    fprintf(f, "\nIn Python (numpy; PyTorch: torch.from_numpy(np.load(...)) and np.save(path, o.numpy())):\n"
               "  import numpy as np\n"
               "  q, k, v = (np.load(f'%s/{x}_multi.npy') for x in 'qkv')\n"
               "  o = my_tiled_attention(q, k, v, BR=64, BC=64, causal=False)\n"
               "  np.save('%s/out_multi.npy', o.astype(np.float32))\n", dir, dir);
    fclose(f);
    return 0;
}

// --- grading ------------------------------------------------------------------------

typedef struct {
    float *q, *k, *v, *out, *slope; /* slope: [H] ALiBi slopes of the alibi set, else NULL */
    long H;
    double *ref;
    size_t n;
    double tol;
    Err e;
    int row_pattern_max_zero;   /* only the very negative rows are wrong, all zero or non-finite */
    long first_bad_row;         /* -1: none */
    double later_bad_frac;      /* of the rows from first_bad_row on, the fraction wrong */
    double bad_row_frac;        /* of all rows, the fraction wrong */
} Graded;

static int row_bad(const Graded *g, long h, long i, long N)
{
    for (long d = 0; d < GD; d++) {
        const size_t x = ((size_t)h * N + i) * GD + d;
        if (!f32_is_finite(g->out[x]) || !(fabs((double)g->out[x] - g->ref[x]) <= g->tol)) return 1;
    }
    return 0;
}

static void grade_set(const char *dir, const Set *t, Graded *g)
{
    char path[4096];
    const long shape[4] = {GB, t->H, t->N, GD};
    static const char *const qkv[3] = {"q", "k", "v"};
    float **x[3] = {&g->q, &g->k, &g->v};
    for (int i = 0; i < 3; i++) {
        path_of(path, sizeof path, dir, qkv[i], t->name);
        *x[i] = npy_load("--grade", path, shape, 4);
    }
    path_of(path, sizeof path, dir, "out", t->name);
    g->out = npy_load("--grade", path, shape, 4);
    g->H = t->H;
    g->n = (size_t)GB * t->H * t->N * GD;
    g->slope = NULL;
    if (t->alibi) {
        g->slope = xmalloc((size_t)GB * t->H * 4, "ALiBi slopes");
        alibi_slopes(g->slope, GB, t->H);
    }
    g->ref = xmalloc(g->n * sizeof(double), "reference");
    ref_attention_bias(g->q, g->k, g->v, GB * t->H, t->N, GD, t->causal, g->slope, g->ref);
    /* The tolerance scales with the problem: 10x the error of textbook fp32 attention on the same inputs
     * (step 01's naive forward, with the bias for the ALiBi set: code that shares nothing with the breaks
     * being graded), never under 1e-4 and never over 1e-3. */
    float *naive = xmalloc(g->n * 4, "naive output");
    double naive_err = 0;
    if (naive_attention_bias_cpu(g->q, g->k, g->v, naive, GB * t->H, t->N, GD, t->causal, g->slope) == 0)
        naive_err = compare(naive, g->ref, g->n, 1, 0).max_abs;
    tfree(naive);
    g->tol = 10 * naive_err > 1e-3 ? 1e-3 : 10 * naive_err > 1e-4 ? 10 * naive_err : 1e-4;
    g->e = compare(g->out, g->ref, g->n, g->tol, 0);
    /* the rows: which are wrong, and (Break 3) whether only the very negative half is, all zero or NaN */
    long bad_rows = 0, later = 0, later_bad = 0;
    int neg_only = t->inputs == INPUTS_NEG_ROWS;
    g->first_bad_row = -1;
    for (long h = 0; h < GB * t->H; h++)
        for (long i = 0; i < t->N; i++) {
            const int b = row_bad(g, h, i, t->N);
            bad_rows += b;
            if (b && (g->first_bad_row < 0 || i < g->first_bad_row)) g->first_bad_row = i;
            if (t->inputs == INPUTS_NEG_ROWS) {
                int zero_or_nan = 1;
                for (long d = 0; d < GD; d++) {
                    const float o = g->out[((size_t)h * t->N + i) * GD + d];
                    if (f32_is_finite(o) && o != 0.0f) zero_or_nan = 0;
                }
                if (i < t->N / 2 ? !zero_or_nan : b) neg_only = 0;
            }
        }
    for (long h = 0; g->first_bad_row >= 0 && h < GB * t->H; h++)
        for (long i = g->first_bad_row; i < t->N; i++) { later++; later_bad += row_bad(g, h, i, t->N); }
    g->later_bad_frac = later ? (double)later_bad / later : 0;
    g->bad_row_frac = (double)bad_rows / (GB * t->H * t->N);
    g->row_pattern_max_zero = neg_only && bad_rows > 0;
}

static void graded_free(Graded *g) { tfree(g->q); tfree(g->k); tfree(g->v); tfree(g->out); tfree(g->ref); tfree(g->slope); }

/* Does the student's output equal what a known break computes on the same inputs? (NaN where the break
 * gives NaN counts as equal: compare() only faults non-finite values where the reference is finite.) */
static int same(const float *out, const float *cand, size_t n, double tol)
{
    double *c = xmalloc(n * sizeof(double), "candidate");
    for (size_t i = 0; i < n; i++) c[i] = cand[i];
    const Err e = compare(out, c, n, tol, 0);
    tfree(c);
    return e.n_bad == 0;
}

static int matches(const Graded *g, const float *cand) { return same(g->out, cand, g->n, g->tol); }

static const long TILES[] = {16, 32, 64, 128};

const char *alibi_diagnosis(const float *q, const float *k, const float *v, const float *out, const float *slope,
                            long bh, long N, long D, double tol, long *tile)
{
    static const int brks[2] = {BREAK_ALIBI_AFTER_MAX, BREAK_ALIBI_RELATIVE};
    static const char *const names[2] = {"ALiBi's bias added after the running max", "ALiBi's bias from tile-relative indices"};
    const size_t n = (size_t)bh * N * D;
    float *o = xmalloc(n * 4, "candidate");
    const char *c = NULL;
    for (int b = 0; b < 2 && !c; b++)
        for (size_t t = 0; t < sizeof TILES / sizeof *TILES && !c; t++) {
            break_forward_cpu(q, k, v, o, bh, N, D, TILES[t], TILES[t], brks[b], 0, 0, 0, NULL, NULL, slope);
            if (same(out, o, n, tol)) { c = names[b]; *tile = b == 0 ? 0 : TILES[t]; } /* after-max: any tile size */
        }
    tfree(o);
    return c;
}

int grade_dir(const char *dir, int print, const char **cause)
{
    static char why[512];
    Graded g[NSETS];
    int all = 1;
    char eb[128];
    for (int s = 0; s < NSETS; s++) { /* every file read and checked before a line is printed */
        memset(&g[s], 0, sizeof g[s]);
        grade_set(dir, &SETS[s], &g[s]);
    }
    if (print)
        printf("step07 --grade %s: %d input sets, [B, H, N, D] = [1, H, N, 64], tolerance 10x the error of textbook "
               "fp32 attention on the same inputs (01's naive, with the bias for ALiBi), 1e-4 to 1e-3\n", dir, NSETS);
    for (int s = 0; s < NSETS; s++) {
        const Err *e = &g[s].e;
        all &= e->n_bad == 0;
        if (!print) continue;
        if (e->n_bad == 0)
            printf("  PASS %-9s %s: %s (tol %.1e)\n", SETS[s].name, SETS[s].what, fmt_err(e, eb, sizeof eb), g[s].tol);
        else {
            const size_t x = e->bad_idx[0];
            printf("  FAIL %-9s %s: %zu of %zu outputs wrong (%zu inf/NaN), %s (tol %.1e); first bad: index %zu "
                   "(head %zu, row %zu, d %zu): expected %.6g, got %g\n", SETS[s].name, SETS[s].what, e->n_bad, e->n,
                   e->n_nonfinite, fmt_err(e, eb, sizeof eb), g[s].tol, x, x / GD / (size_t)SETS[s].N,
                   x / GD % (size_t)SETS[s].N, x % GD, e->bad_ref[0], (double)e->bad_got[0]);
        }
    }
    const Graded *multi = &g[0], *one = &g[1], *neg = &g[2], *cau = &g[3], *large = &g[4];
    const char *c = NULL;
    why[0] = '\0';
    if (all) c = NULL;
    else if (large->e.n_nonfinite > 0)
        c = "running-max subtraction missing (exp overflow)"; // e^s past 88.72: inf, then inf/inf = NaN
    else if (cau->e.n_nonfinite > 0 && multi->e.n_bad == 0 && large->e.n_bad == 0) {
        /* The chapter's causal snippet does this: it visits every K/V tile, and in a tile above the diagonal a
         * row has every score masked, m_tile = -inf and p = e^(-inf - (-inf)) = NaN. */
        c = "a fully masked K/V tile gives NaN";
        snprintf(why, sizeof why, " (m_tile = -inf, p = e^(-inf - (-inf))): skip the tiles above the diagonal, or let a "
                 "row whose tile is all masked contribute nothing (first NaN row %ld)", cau->first_bad_row);
    } else if (neg->row_pattern_max_zero && large->e.n_bad == 0)
        c = "running max initialised to 0 instead of -inf";   // e^(s - 0) underflows for s < -104: 0/0
    else if (multi->e.n_bad > 0 && multi->e.n_nonfinite == 0) {
        float *o = xmalloc(multi->n * 4, "candidate");
        for (size_t b = 0; b < sizeof TILES / sizeof *TILES && !c; b++) {
            break_forward_cpu(multi->q, multi->k, multi->v, o, GB * GH, SETS[0].N, GD, GTILE, TILES[b], BREAK_NO_RESCALE,
                              0, 0, 0, NULL, NULL, NULL);
            if (matches(multi, o)) {
                c = "running statistics not rescaled (alpha/beta)";
                snprintf(why, sizeof why, ": out_multi.npy equals Break 2 at BC = %ld", TILES[b]);
            }
        }
        tfree(o);
        if (!c && one->e.n_bad == 0 && multi->bad_row_frac > 0.5) // right with one tile, most rows wrong with several
            c = "running statistics not rescaled (alpha/beta)";
    } else if (multi->e.n_bad == 0 && cau->e.n_bad > 0) {
        float *o = xmalloc(cau->n * 4, "candidate");
        static const int modes[2] = {MASK_RELATIVE_ALL, MASK_RELATIVE};
        for (int m = 0; m < 2 && !c; m++)
            for (size_t b = 0; b < sizeof TILES / sizeof *TILES && !c; b++) {
                causal_forward_cpu(cau->q, cau->k, cau->v, o, NULL, GB * GH, SETS[3].N, GD, TILES[b], TILES[b], modes[m], NULL);
                if (matches(cau, o)) {
                    c = "mask built from tile-relative indices";
                    snprintf(why, sizeof why, ": out_causal.npy equals the tile-relative mask at BR = BC = %ld%s", TILES[b],
                             m ? " with the tiles above the diagonal skipped" : ", every tile visited (the chapter's snippet)");
                }
            }
        tfree(o);
        if (!c && cau->first_bad_row >= 8 && cau->later_bad_frac > 0.5) { // right in the first row tile only
            c = "mask built from tile-relative indices";
            snprintf(why, sizeof why, ": rows 0..%ld right, most rows after wrong", cau->first_bad_row - 1);
        }
    }
    const Graded *al = &g[ALIBI_SET];
    int base_ok = 1;
    for (int s = 0; s < NSETS; s++) base_ok &= s == ALIBI_SET || g[s].e.n_bad == 0;
    if (!c && base_ok && al->e.n_bad > 0) { /* the attention is right: where did the score modifier go? */
        long tile = 0;
        c = alibi_diagnosis(al->q, al->k, al->v, al->out, al->slope, GB * al->H, SETS[ALIBI_SET].N, GD, al->tol, &tile);
        if (c)
            snprintf(why, sizeof why, ": out_alibi.npy equals it%s%.0ld%s", tile ? " at BR = BC = " : "", tile,
                     al->e.n_nonfinite ? " (NaN where every e^(s + bias - m) underflowed: l = 0; the max of the scores "
                                         "without the bias no longer bounds those with it)" : "");
    }
    if (!all && !c) {
        for (int s = 0; s < NSETS && !c; s++)
            if (g[s].e.n_bad) {
                c = "wrong in a way no known break explains";
                snprintf(why, sizeof why, ": first bad in out_%s.npy at index %zu, expected %.6g, got %g", SETS[s].name,
                         g[s].e.bad_idx[0], g[s].e.bad_ref[0], (double)g[s].e.bad_got[0]);
            }
    }
    if (print) {
        if (all) printf("grade: every set right: the tiled attention is correct\n");
        else printf("grade: wrong. diagnosis: %s%s\n", c, why);
    }
    if (cause) *cause = c;
    for (int s = 0; s < NSETS; s++) graded_free(&g[s]);
    return all ? 0 : 1;
}

// --- the grader's own checks ------------------------------------------------------------

enum { AS_INTACT, AS_NO_MAX, AS_NO_RESCALE, AS_MAX_ZERO, AS_RELATIVE, AS_RELATIVE_ALL, AS_MASKED_NAN, AS_ALIBI_RELATIVE,
       AS_ALIBI_AFTER_MAX, AS_OFF_BY_ONE, N_AS };

/* Write out_SET.npy as a student with break `as` would (BR = BC = 64, fp32). */
static void write_outputs(const char *dir, int as)
{
    char path[4096];
    for (int s = 0; s < NSETS; s++) {
        const Set *t = &SETS[s];
        const long shape[4] = {GB, t->H, t->N, GD};
        const size_t n = (size_t)GB * t->H * t->N * GD;
        float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V"), *o = xmalloc(n * 4, "O");
        float *slope = xmalloc((size_t)GB * t->H * 4, "slopes");
        alibi_slopes(slope, GB, t->H);
        static const char *const qkv[3] = {"q", "k", "v"};
        float *x[3] = {q, k, v};
        for (int i = 0; i < 3; i++) {
            path_of(path, sizeof path, dir, qkv[i], t->name);
            float *in = npy_load("--grade", path, shape, 4);
            memcpy(x[i], in, n * 4);
            tfree(in);
        }
        static const int brk[N_AS] = {BREAK_NONE, BREAK_NO_MAX, BREAK_NO_RESCALE, BREAK_MAX_ZERO, BREAK_NONE, BREAK_NONE,
                                      BREAK_NONE, BREAK_NONE, BREAK_NONE, BREAK_NONE};
        if (t->alibi) /* the right ALiBi, or one of its two wrong places */
            break_forward_cpu(q, k, v, o, GB * t->H, t->N, GD, GTILE, GTILE,
                              as == AS_ALIBI_RELATIVE ? BREAK_ALIBI_RELATIVE
                              : as == AS_ALIBI_AFTER_MAX ? BREAK_ALIBI_AFTER_MAX : BREAK_NONE, 0, 0, 0, NULL, NULL, slope);
        else if (t->causal && (as == AS_RELATIVE || as == AS_RELATIVE_ALL))
            causal_forward_cpu(q, k, v, o, NULL, GB * t->H, t->N, GD, GTILE, GTILE,
                               as == AS_RELATIVE ? MASK_RELATIVE : MASK_RELATIVE_ALL, NULL);
        else
            break_forward_cpu(q, k, v, o, GB * t->H, t->N, GD, GTILE, GTILE, brk[as], t->causal, 0, 0, NULL, NULL, NULL);
        if (as == AS_OFF_BY_ONE && s == 0) o[1000] += 0.5f; // one wrong number that no break makes
        if (as == AS_MASKED_NAN && t->causal)              // the chapter's snippet: every row tile with a later K/V
            for (long h = 0; h < GB * t->H; h++)           // tile (all masked for it) ends in NaN
                for (long i = 0; i < (t->N - 1) / GTILE * GTILE; i++)
                    for (long d = 0; d < GD; d++) o[((size_t)h * t->N + i) * GD + d] = NAN;
        path_of(path, sizeof path, dir, "out", t->name);
        if (npy_save(path, o, shape, 4, DT_FP32) != 0) { fprintf(stderr, "%s: cannot write %s\n", g_prog, path); exit(EXIT_FAIL); }
        tfree(q); tfree(k); tfree(v); tfree(o); tfree(slope);
    }
}

void grade_checks(void)
{
    char dir[] = "/tmp/step07-grade-XXXXXX", path[4096];
    if (!mkdtemp(dir)) { report(0, NULL, "grade", "cannot make a temporary directory: %s", strerror(errno)); return; }
    grade_assignment(dir, 0);
    static const struct { int as; const char *name, *want; } cases[N_AS] = {
        {AS_INTACT, "intact", NULL},
        {AS_NO_MAX, "no-max", "running-max subtraction missing (exp overflow)"},
        {AS_NO_RESCALE, "no-rescale", "running statistics not rescaled (alpha/beta)"},
        {AS_MAX_ZERO, "max-zero", "running max initialised to 0 instead of -inf"},
        {AS_RELATIVE, "relative-mask", "mask built from tile-relative indices"},
        {AS_RELATIVE_ALL, "relative-mask-every-tile", "mask built from tile-relative indices"},
        {AS_MASKED_NAN, "fully-masked-tile-nan", "a fully masked K/V tile gives NaN"},
        {AS_ALIBI_RELATIVE, "alibi-relative", "ALiBi's bias from tile-relative indices"},
        {AS_ALIBI_AFTER_MAX, "alibi-after-max", "ALiBi's bias added after the running max"},
        {AS_OFF_BY_ONE, "one-wrong-number", "wrong in a way no known break explains"},
    };
    for (int c = 0; c < N_AS; c++) {
        write_outputs(dir, cases[c].as);
        const char *got = NULL;
        const int rc = grade_dir(dir, 0, &got);
        char name[64];
        snprintf(name, sizeof name, "grade/%s", cases[c].name);
        const int ok = cases[c].want ? rc == 1 && got && !strcmp(got, cases[c].want) : rc == 0 && !got;
        report(ok, NULL, name, "outputs written as a student with this break would: graded %s, diagnosis \"%s\" "
               "(expected \"%s\")", rc ? "wrong" : "right", got ? got : "(none)", cases[c].want ? cases[c].want : "(none)");
    }
    for (int s = 0; s < NSETS; s++) {
        static const char *const what[4] = {"q", "k", "v", "out"};
        for (int i = 0; i < 4; i++) { path_of(path, sizeof path, dir, what[i], SETS[s].name); unlink(path); }
    }
    snprintf(path, sizeof path, "%s/README.txt", dir);
    unlink(path);
    rmdir(dir);
}
