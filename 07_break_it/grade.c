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
 *   causal     causal, N = 200: 4 row tiles      mask from tile-relative indices; the last
 *              the last one of 8 rows            partial K/V tile dropped (rows 192.. lose keys)
 *   large      scores up to about 110            no running max: e^s overflows float32 (88.72)
 *   huge       N = 300, scores 900 to 1100       no running max in float64 too (e^s overflows past
 *                                                709.78); the last partial K/V tile (44 keys)
 * The huge set's Q and K are small integers, so every score is an exact multiple of 1/8 in float32
 * and the intact algorithm computes them exactly, in any order: the set is hard only for a missing max.
 * Three more reach bugs that pass the seven above (each set's scores are of a size none of them has):
 *   late_max   every row's max arrives in the    p = e^(s - m) against a stale max (the first tile's,
 *              last K/V tile, 120 or 1000 above  or m before m_new): e^(s - m) overflows, inf / inf
 *              the first three tiles' (exact)    (no earlier set rises past exp's range after tile 0)
 *   very_neg   scores about -1000 and -20000     m started at 0 in float64 (e^s underflows past -745) or
 *              (exact)                           at a finite stand-in like -10000: l = 0, 0/0
 *   ragged     N = 129, no causal mask           keys padded to a multiple of BC and not masked (the
 *                                                causal mask hides them; huge's e^(0 - 1000) is 0)
 * And one more that the chapter's own causal snippet has: it visits every
 * K/V tile, so in a tile above the diagonal a row's scores are all masked,
 * m_tile = -inf and p = e^(-inf - (-inf)) = NaN (the causal set shows it).
 * The diagnosis also tries the known breaks themselves on the same inputs
 * (Break 2 and both tile-relative masks at tiles of 16 to 128, attention at
 * scale 1 instead of 1/sqrt(D), o not divided by l, keys past the last whole
 * tile dropped, the tiled forward in fp16): a student's output that equals one
 * of them is named. The set
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
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

enum { GB = 1, GH = 2, GD = 64, GTILE = 64 };
enum { S_MULTI, S_ONE, S_NEG, S_CAUSAL, S_LARGE, S_HUGE, S_ALIBI, S_LATE, S_VNEG, S_RAGGED, NSETS };
enum { NSETS_FIRST = S_LATE }; /* the seven sets before late_max: the check shows what they let through */
/* the grader's own kinds, beside breaks.h's INPUTS_*: small-integer Q, K (exact scores) */
enum { INPUTS_HUGE = 100, INPUTS_LATE_MAX = 101, INPUTS_VERY_NEG = 102 };

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
    {"causal", 200, 1, 1, INPUTS_RANDOM, "causal mask, N = 200: 4 row tiles, the last of 8 rows", GH, 0},
    {"large", 256, 24, 0, INPUTS_RANDOM, "large scores, up to about 110", GH, 0},
    {"huge", 300, 1, 0, INPUTS_HUGE, "N = 300 (last K/V tile 44 keys), scores about 900 to 1100, exact", GH, 0},
    {"alibi", 256, 1, 0, INPUTS_FAR_KEY, "ALiBi, H = 8: rows 128.. point at key 0 (score 300)", 8, 1},
    {"late_max", 256, 1, 0, INPUTS_LATE_MAX, "every row's max in the last K/V tile, 120 (rows 0..127) or 1000 above "
     "the first three's, exact", GH, 0},
    {"very_neg", 256, 1, 0, INPUTS_VERY_NEG, "scores about -1000 (rows 0..127) and -20000 (rows 128..), exact", GH, 0},
    {"ragged", 129, 1, 0, INPUTS_RANDOM, "N = 129, no causal mask: last K/V tile 1 key, last row tile 1 row", GH, 0},
};
_Static_assert((int)NSETS <= (int)GRADE_MAX_SETS, "GradeReport holds GRADE_MAX_SETS sets");

static void path_of(char *buf, size_t n, const char *dir, const char *what, const char *set)
{
    snprintf(buf, n, "%s/%s_%s.npy", dir, what, set);
}

static const long TILES[] = {16, 32, 64, 128};
#define NTILES (sizeof TILES / sizeof *TILES)

// --- the assignment -------------------------------------------------------------------

/* The huge set: q = 4 + {-1, 0, 1}, k = 31 + {-1, 0, 1} per element, so q . k is an integer near
 * 64 * 4 * 31 = 7936 (every partial sum below 2^24: exact in float32 in any order) and s = q . k / 8 is
 * exact too (908.4 to 1091.4 at the default --seed 0): each e^s overflows float64 (past 709.78), each s - m is exact.
 * A row's softmax is spread over about 4 keys (the median of 1 / sum p^2 there). V as the other sets. */
static void huge_inputs(float *q, float *k, float *v, long bh, long N, long D, uint64_t seed)
{
    const size_t n = (size_t)bh * N * D;
    break_inputs(q, k, v, bh, N, D, 1, INPUTS_RANDOM, seed); /* V from the seed, fp16-rounded like every set */
    Rng r;
    rng_seed(&r, seed ^ 0x9e3779b97f4a7c15ull);
    for (size_t i = 0; i < n; i++) q[i] = 4.0f + (float)(long)(rng_next(&r) % 3) - 1.0f;
    for (size_t i = 0; i < n; i++) k[i] = 31.0f + (float)(long)(rng_next(&r) % 3) - 1.0f;
}

/* late_max and very_neg: small-integer Q and K again (every score exact in float32, in any order), and one channel,
 * d = D - 1, that moves blocks of scores as a whole: k = 64 on the keys it moves, q = shift / 8 per row, so score
 * (i, j) gains q_i k_j / 8 and the softmax within a tile keeps its shape. Elsewhere q, k in -2..2: within a row the
 * scores spread with a standard deviation of about 2 (a softmax over a handful of keys).
 *   late_max: the last K/V tile's keys move up by 120 (rows 0..N/2-1: past float32's e^88.72) or by 1000 (the other
 *             rows: past float64's e^709.78); every row's max arrives there, far above the first tiles' (about 5),
 *             where every earlier set's later tiles stay within a few tens of the first tile's max.
 *   very_neg: every key moves down by 1000 (rows 0..N/2-1: e^s underflows float64 past -745, where the negative set's
 *             -290 does not) or by 20000 (the other rows: below -10000 - 104, the stand-in for -inf students write). */
static void shifted_inputs(float *q, float *k, float *v, long bh, long N, long D, uint64_t seed, int late)
{
    break_inputs(q, k, v, bh, N, D, 1, INPUTS_RANDOM, seed); /* V from the seed, fp16-rounded like every set */
    Rng r;
    rng_seed(&r, seed ^ 0x5851f42d4c957f2dull);
    const long last = (N - 1) / GTILE * GTILE; /* the last K/V tile's first key */
    for (long h = 0; h < bh; h++)
        for (long i = 0; i < N; i++) {
            float *qi = q + ((size_t)h * N + i) * D, *ki = k + ((size_t)h * N + i) * D;
            for (long d = 0; d + 1 < D; d++) {
                qi[d] = (float)(long)(rng_next(&r) % 5) - 2.0f;
                ki[d] = (float)(long)(rng_next(&r) % 5) - 2.0f;
            }
            const int deep = i >= N / 2;                         /* row i's shift; key i's channel */
            qi[D - 1] = late ? (deep ? 125.0f : 15.0f) : (deep ? -2500.0f : -125.0f); /* x 64 / 8: 1000, 120; -20000, -1000 */
            ki[D - 1] = late ? (i >= last ? 64.0f : 0.0f) : 64.0f;
        }
}

static void set_inputs(const Set *t, float *q, float *k, float *v, uint64_t seed)
{
    if (t->inputs == INPUTS_HUGE) huge_inputs(q, k, v, GB * t->H, t->N, GD, seed);
    else if (t->inputs == INPUTS_LATE_MAX || t->inputs == INPUTS_VERY_NEG)
        shifted_inputs(q, k, v, GB * t->H, t->N, GD, seed, t->inputs == INPUTS_LATE_MAX);
    else break_inputs(q, k, v, GB * t->H, t->N, GD, t->scale, t->inputs, seed);
}

/* mkdir -p: dir and every missing parent. Exits 2 with one line if one cannot be made. */
static void make_dirs(const char *dir)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) usage_error("option --assignment: directory name too long");
    for (char *c = p + 1;; c++) {
        const int end = *c == '\0';
        if (!end && *c != '/') continue;
        *c = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            usage_error("option --assignment: cannot make directory %s: %s", p, strerror(errno));
        if (end) break;
        *c = '/';
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) usage_error("option --assignment: %s is not a directory", dir);
}

int grade_assignment(const char *dir, unsigned long long seed, int print)
{
    make_dirs(dir);
    char path[4096];
    for (int s = 0; s < NSETS; s++) {
        const Set *t = &SETS[s];
        const size_t n = (size_t)GB * t->H * t->N * GD;
        const long shape[4] = {GB, t->H, t->N, GD};
        float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
        set_inputs(t, q, k, v, seed + 100 + s);
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
               "N is not always a multiple of 64: the last K/V tile (and row tile) of such a set is partial.\n"
               "Then the instructor runs: ./step07 --grade THIS_DIRECTORY\n\n");
    for (int s = 0; s < NSETS; s++)
        fprintf(f, "  %-9s %s%s\n", SETS[s].name, SETS[s].what, SETS[s].causal ? " (run it causal)" : "");
    fprintf(f, "\n(ALiBi, the paper's bias for a causal model, is -slope * (i - j); here, without a mask, -slope * |i - j|.)\n");
    fprintf(f, "\nPrecision: float32 throughout (s, m, l, o and the output), as a GPU kernel keeps its softmax\n"
               "state. NumPy leaves float32 silently as soon as a float64 value enters: 1/np.sqrt(D) is a float64\n"
               "scalar, and in NumPy 2 a float32 array times a float64 scalar is float64; np.full(..., -np.inf) and\n"
               "np.zeros(...) without a dtype are float64 arrays. Then s (from the scale on), e^s, l and o are\n"
               "float64, and e^s overflows only past s = 709.78 instead of 88.72. To stay in float32:\n"
               "  scale = np.float32(1 / np.sqrt(D))                      # or D ** -0.5: a Python float does not promote\n"
               "  m = np.full((B, H, BR, 1), -np.inf, dtype=np.float32)    # every array you make: dtype=np.float32\n"
               "  l = np.zeros((B, H, BR, 1), dtype=np.float32)\n"
               "  o = np.zeros_like(q[:, :, :BR])                          # (zeros_like keeps q's float32)\n"
               "  assert out.dtype == np.float32                          # before np.save\n"
               "The grader takes float64 files (it rounds them to float32 and says so), and it notes a run whose\n"
               "errors are those of float64, not float32; the set 'huge' fails a missing running max in either.\n");
    fprintf(f, "\nIn Python (numpy; PyTorch: torch.from_numpy(np.load(...)) and np.save(path, o.numpy())):\n"
               "  import numpy as np\n"
               "  q, k, v = (np.load(f'%s/{x}_multi.npy') for x in 'qkv')\n"
               "  o = my_tiled_attention(q, k, v, BR=64, BC=64, causal=False)\n"
               "  np.save('%s/out_multi.npy', o.astype(np.float32))\n", dir, dir);
    fclose(f);
    if (print) printf("step07 --assignment: wrote q, k and v of %d sets and README.txt to %s\n", NSETS, dir);
    return 0;
}

// --- grading ------------------------------------------------------------------------

typedef struct {
    int present;                /* every file of the set there and readable; else missing names the first absent
                                   one, or bad says why one is unreadable */
    char missing[32];
    char bad[400];
    int f64_file;               /* out_SET.npy was float64 (rounded to float32 on reading) */
    float *q, *k, *v, *out, *slope; /* slope: [H] ALiBi slopes of the alibi set, else NULL */
    long H;
    double *ref;
    size_t n;
    double tol;
    Err e;
    double nearest, naive_nearest; /* fraction of outputs that are the float nearest the float64 result: the
                                      student's and textbook float32 attention's on the same inputs */
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

/* Is got the float nearest to ref, what a float64 computation rounded to float32 gives? (Within half the
 * gap between the two floats around ref, and a millionth of it for a float64 result a hair from a tie.) */
static int nearest_float(float got, double ref)
{
    if (!f32_is_finite(got) || !isfinite(ref)) return 0;
    const float f = (float)ref;
    const float other = (double)f < ref ? nextafterf(f, INFINITY) : (double)f > ref ? nextafterf(f, -INFINITY) : f;
    return fabs((double)got - ref) <= 0.5 * fabs((double)other - (double)f) * (1 + 1e-6);
}

static double nearest_frac(const float *out, const double *ref, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += nearest_float(out[i], ref[i]);
    return n ? (double)k / (double)n : 0;
}

static int file_missing(const char *path)
{
    struct stat st;
    return stat(path, &st) != 0 && errno == ENOENT;
}

// --- reading a student's .npy ------------------------------------------------------------

/* NumPy's name of a .npy dtype string: '<i4' int32, '<f2' float16, '>f4' big-endian float32, '|b1' bool. */
static void npy_dtype_name(const char *descr, char *buf, size_t n)
{
    const char order = descr[0], kind = descr[0] ? descr[1] : 0;
    char *end;
    const long bytes = kind ? strtol(descr + 2, &end, 10) : 0;
    const char *base = kind == 'f' ? "float" : kind == 'i' ? "int" : kind == 'u' ? "uint" : kind == 'c' ? "complex" : NULL;
    if (kind == 'b' && bytes == 1) snprintf(buf, n, "bool");
    else if (base && bytes > 0 && bytes <= 32 && !*end)
        snprintf(buf, n, "%s%s%ld", order == '>' && bytes > 1 ? "big-endian " : "", base, bytes * 8);
    else if (kind == 'U' || kind == 'S') snprintf(buf, n, "a string array");
    else if (kind == 'O') snprintf(buf, n, "an object array");
    else snprintf(buf, n, "of dtype");
}

/* "(1, 2, 256, 64)", as NumPy prints a shape. */
static void shape_text(const long *shape, int nd, char *buf, size_t n)
{
    int w = snprintf(buf, n, "(");
    for (int d = 0; d < nd && w < (int)n; d++)
        w += snprintf(buf + w, n - (size_t)w, "%s%ld", d ? ", " : "", shape[d]);
    if (w < (int)n) snprintf(buf + w, n - (size_t)w, nd == 1 ? ",)" : ")");
}

/* Read the .npy at path (called name in messages) as a [want] float32 array (float64 too if allow_f64: each value
 * rounded to the nearest float, *was_f64 set). A file that is not that gives NULL and, in why, one sentence
 * beginning with name: what the file is (not a .npy, truncated, its dtype, its shape) and what was asked.
 * common's npy_load does the same for the steps' --q/--k/--v but ends the program (exit 2): a grader must go
 * on, fail that set with the reason, and grade the rest, or an autograder is left with no results file. */
static float *read_npy(const char *path, const char *name, const long *want, int ndim, int allow_f64, int *was_f64,
                       char *why, size_t nw)
{
    enum { MAXD = 8 };
    struct stat st;
    unsigned char pre[12];
    char hdr[4096], descr[32] = "", have[128], need[128];
    long shape[MAXD];
    int nd = 0;
    if (was_f64) *was_f64 = 0;
    shape_text(want, ndim, need, sizeof need);
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(why, nw, "%s cannot be opened: %s", name, strerror(errno)); return NULL; }
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, nw, "%s is not a file", name);
        fclose(f);
        return NULL;
    }
    const size_t got = fread(pre, 1, 10, f);
    size_t hlen = 0;
    long off = 10;
    if (got < 6 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        snprintf(why, nw, "%s is not a .npy file (np.save's files begin with the bytes 93 'NUMPY'); a float32 array "
                 "of shape %s is asked for", name, need);
        fclose(f);
        return NULL;
    }
    if (got == 10 && (pre[6] < 1 || pre[6] > 3)) {
        snprintf(why, nw, "%s is a .npy file of format version %d (1 to 3 are read)", name, pre[6]);
        fclose(f);
        return NULL;
    }
    if (got == 10 && pre[6] == 1) hlen = pre[8] | (size_t)pre[9] << 8;
    else if (got == 10 && fread(pre + 10, 1, 2, f) == 2) { /* versions 2 and 3: a 4-byte header length */
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
        off = 12;
    }
    if (hlen == 0 || hlen >= sizeof hdr || fread(hdr, 1, hlen, f) != hlen) {
        snprintf(why, nw, "%s is truncated in its .npy header (%lld bytes in all)", name, (long long)st.st_size);
        fclose(f);
        return NULL;
    }
    hdr[hlen] = '\0';
    off += (long)hlen;
    const char *p = strstr(hdr, "'descr':");
    if (p) { /* 'descr': '<f4' (a structured dtype is a list instead) */
        p += 8;
        while (*p == ' ') p++;
        const char q = *p;
        size_t i = 0;
        if (q == '\'' || q == '"')
            for (p++; *p && *p != q && i + 1 < sizeof descr; p++) descr[i++] = *p;
        descr[i] = '\0';
    }
    const char *sp = strstr(hdr, "'shape':");
    if (sp && (sp = strchr(sp, '('))) {
        for (sp++;;) {
            while (*sp == ' ' || *sp == ',') sp++;
            char *end;
            const long x = strtol(sp, &end, 10);
            if (end == sp || x < 0 || nd == MAXD) break;
            shape[nd++] = x;
            sp = end;
        }
    }
    int dt = -1; /* 4: float32, 8: float64 */
    if (!strcmp(descr, "<f4")) dt = 4;
    else if (allow_f64 && !strcmp(descr, "<f8")) dt = 8;
    if (!descr[0] || !sp || *sp != ')') {
        snprintf(why, nw, "%s has a .npy header without %s", name, !descr[0] ? "a plain dtype" : "a shape of at most 8 axes");
        fclose(f);
        return NULL;
    }
    if (dt < 0) { /* float16 among them: its outputs would be graded as if the arithmetic were fp16 */
        char dn[48];
        npy_dtype_name(descr, dn, sizeof dn);
        snprintf(why, nw, "%s is %s ('%s'), not float32 ('<f4'): save it with .astype(np.float32)", name, dn, descr);
        fclose(f);
        return NULL;
    }
    int same = nd == ndim;
    for (int d = 0; d < nd && same; d++) same = shape[d] == want[d];
    shape_text(shape, nd, have, sizeof have);
    if (!same) {
        snprintf(why, nw, "%s has shape %s (%d-D), not %s", name, have, nd, need);
        fclose(f);
        return NULL;
    }
    if (strstr(hdr, "'fortran_order': True")) {
        snprintf(why, nw, "%s is stored in Fortran order (a transposed view saved as is): save np.ascontiguousarray of it",
                 name);
        fclose(f);
        return NULL;
    }
    size_t n = 1;
    for (int d = 0; d < nd; d++) n *= (size_t)shape[d];
    if (st.st_size < off || (size_t)(st.st_size - off) / (size_t)dt < n) {
        snprintf(why, nw, "%s is truncated: %lld bytes of data where its header's %s %s needs %zu bytes", name,
                 (long long)(st.st_size > off ? st.st_size - off : 0), have, dt == 4 ? "float32" : "float64", n * (size_t)dt);
        fclose(f);
        return NULL;
    }
    float *x = xmalloc(n * sizeof(float), path);
    int ok = fseek(f, off, SEEK_SET) == 0;
    if (ok && dt == 4) ok = fread(x, 4, n, f) == n;
    else if (ok) { /* one block of doubles at a time, each rounded to the nearest float (past float's range: inf, as a
                      cast there is undefined in C) */
        double row[512];
        for (size_t i = 0; i < n && ok; i += 512) {
            const size_t c = n - i < 512 ? n - i : 512;
            ok = fread(row, 8, c, f) == c;
            for (size_t j = 0; j < c && ok; j++)
                x[i + j] = row[j] > FLT_MAX ? INFINITY : row[j] < -FLT_MAX ? -INFINITY : (float)row[j];
        }
        if (was_f64) *was_f64 = 1;
    }
    fclose(f);
    if (!ok) {
        snprintf(why, nw, "%s cannot be read: %s", name, strerror(errno));
        tfree(x);
        return NULL;
    }
    return x;
}

static void grade_set(const char *dir, const Set *t, Graded *g)
{
    char path[4096], name[64];
    const long shape[4] = {GB, t->H, t->N, GD};
    static const char *const files[4] = {"q", "k", "v", "out"};
    for (int i = 0; i < 4 && !g->missing[0]; i++) { /* inputs made by an older --assignment, or no output yet */
        path_of(path, sizeof path, dir, files[i], t->name);
        if (file_missing(path)) snprintf(g->missing, sizeof g->missing, "%s_%s.npy", files[i], t->name);
    }
    if (g->missing[0]) return;
    float **x[4] = {&g->q, &g->k, &g->v, &g->out};
    for (int i = 0; i < 4; i++) { /* the inputs too: a student may have overwritten one */
        path_of(path, sizeof path, dir, files[i], t->name);
        snprintf(name, sizeof name, "%s_%s.npy", files[i], t->name);
        *x[i] = read_npy(path, name, shape, 4, i == 3, i == 3 ? &g->f64_file : NULL, g->bad, sizeof g->bad);
        if (!*x[i]) {
            for (int j = 0; j < i; j++) { tfree(*x[j]); *x[j] = NULL; }
            return;
        }
    }
    g->present = 1;
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
    g->naive_nearest = 0;
    if (naive_attention_bias_cpu(g->q, g->k, g->v, naive, GB * t->H, t->N, GD, t->causal, g->slope) == 0) {
        naive_err = compare(naive, g->ref, g->n, 1, 0).max_abs;
        g->naive_nearest = nearest_frac(naive, g->ref, g->n);
    }
    tfree(naive);
    g->tol = 10 * naive_err > 1e-3 ? 1e-3 : 10 * naive_err > 1e-4 ? 10 * naive_err : 1e-4;
    g->e = compare(g->out, g->ref, g->n, g->tol, 0);
    g->nearest = nearest_frac(g->out, g->ref, g->n);
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

static int right(const Graded *g) { return g->present && g->e.n_bad == 0; }
static int wrong(const Graded *g) { return g->present && g->e.n_bad > 0; }
static int nonfinite(const Graded *g) { return g->present && g->e.n_nonfinite > 0; }

/* Does the student's output equal what a known break computes on the same inputs? That is the proof a
 * diagnosis needs: every value within the tolerance of the break's, and inf or NaN exactly where the break
 * has inf or NaN (a break that is NaN everywhere must not explain any output at all). */
static int same64(const float *out, const double *cand, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++) {
        const int fo = f32_is_finite(out[i]), fc = isfinite(cand[i]);
        if (fo != fc || (fc && !(fabs((double)out[i] - cand[i]) <= tol))) return 0;
    }
    return 1;
}
static int same(const float *out, const float *cand, size_t n, double tol)
{
    double *c = xmalloc(n * sizeof(double), "candidate");
    for (size_t i = 0; i < n; i++) c[i] = cand[i];
    const int m = same64(out, c, n, tol);
    tfree(c);
    return m;
}

static int matches(const Graded *g, const float *cand) { return same(g->out, cand, g->n, g->tol); }
static int matches64(const Graded *g, const double *cand) { return same64(g->out, cand, g->n, g->tol); }

const char *alibi_diagnosis(const float *q, const float *k, const float *v, const float *out, const float *slope,
                            long bh, long N, long D, double tol, long *tile)
{
    static const int brks[2] = {BREAK_ALIBI_AFTER_MAX, BREAK_ALIBI_RELATIVE};
    static const char *const names[2] = {"ALiBi's bias added after the running max", "ALiBi's bias from tile-relative indices"};
    const size_t n = (size_t)bh * N * D;
    float *o = xmalloc(n * 4, "candidate");
    const char *c = NULL;
    for (int b = 0; b < 2 && !c; b++)
        for (size_t t = 0; t < NTILES && !c; t++) {
            break_forward_cpu(q, k, v, o, bh, N, D, TILES[t], TILES[t], brks[b], 0, 0, 0, NULL, NULL, slope);
            if (same(out, o, n, tol)) { c = names[b]; *tile = b == 0 ? 0 : TILES[t]; } /* after-max: any tile size */
        }
    tfree(o);
    return c;
}

// --- the candidates: what each known mistake computes on a set's inputs ------------------

/* The last partial K/V tile dropped: the loop over j0 stops at Nk = (N / BC) * BC, so every row sees keys
 * 0..Nk-1 only (and j <= i when causal). A row from Nk on that the student left all zero had its row tile
 * dropped too (the same floor for BR); *zero_rows counts those. Returns 1 if out equals that. */
static int dropped_tile_match(const Graded *g, const Set *t, long Nk, long *zero_rows)
{
    double *cand = xmalloc(g->n * sizeof(double), "candidate"), *scratch = xmalloc((size_t)Nk * sizeof(double), "scores");
    *zero_rows = 0;
    for (long h = 0; h < GB * t->H; h++) {
        const size_t off = (size_t)h * t->N * GD;
        for (long i = 0; i < t->N; i++) {
            double *row = cand + off + (size_t)i * GD;
            int zero = i >= Nk;
            for (long d = 0; d < GD && zero; d++) zero = g->out[off + (size_t)i * GD + d] == 0.0f;
            if (zero) { for (long d = 0; d < GD; d++) row[d] = 0; (*zero_rows)++; }
            else /* rows from Nk see all Nk keys (each j < Nk <= i), causal or not */
                ref_attention_row(g->q + off, g->k + off, g->v + off, Nk, GD, t->causal && i < Nk, i, scratch, row);
        }
    }
    const int m = matches64(g, cand);
    tfree(cand); tfree(scratch);
    return m;
}

/* The scale 1/sqrt(D) forgotten: attention of the same inputs at scale 1, which is the reference on
 * Q * sqrt(D) (8 for D = 64: exact in float32). */
static int no_scale_match(const Graded *g, const Set *t)
{
    float *q8 = xmalloc(g->n * 4, "Q * sqrt(D)");
    double *cand = xmalloc(g->n * sizeof(double), "candidate");
    for (size_t i = 0; i < g->n; i++) q8[i] = g->q[i] * sqrtf((float)GD);
    ref_attention_bias(q8, g->k, g->v, GB * t->H, t->N, GD, t->causal, g->slope, cand);
    const int m = matches64(g, cand);
    tfree(q8); tfree(cand);
    return m;
}

/* The final division by l forgotten: the row's o = sum_j e^(s_j - m) v_j, the reference times its
 * l = sum_j e^(s_j - m) (m the row's max, which the running max ends at). *lmax gets the largest l. */
static int no_division_match(const Graded *g, const Set *t, double *lmax)
{
    double *cand = xmalloc(g->n * sizeof(double), "candidate"), *scratch = xmalloc((size_t)t->N * sizeof(double), "scores");
    *lmax = 0;
    for (long h = 0; h < GB * t->H; h++) {
        const size_t off = (size_t)h * t->N * GD;
        for (long i = 0; i < t->N; i++) {
            double *row = cand + off + (size_t)i * GD, l = 0;
            ref_attention_row_bias(g->q + off, g->k + off, g->v + off, t->N, GD, t->causal, i,
                                   g->slope ? g->slope[h] : 0.0, scratch, row);
            for (long j = 0; j < (t->causal ? i + 1 : t->N); j++) l += scratch[j]; /* scratch: e^(s_j - m) */
            for (long d = 0; d < GD; d++) row[d] *= l;
            if (l > *lmax) *lmax = l;
        }
    }
    const int m = matches64(g, cand);
    tfree(cand); tfree(scratch);
    return m;
}

/* One of breaks.c's breaks, rerun on the set's inputs at tiles of 16..128: does it give the student's output?
 * (Break 1 in float32, BREAK_NO_MAX: e^s overflows past s = 88.72; Break 3, BREAK_MAX_ZERO: the running max
 * started at 0.) */
static int break_match(const Graded *g, const Set *t, int brk)
{
    float *o = xmalloc(g->n * 4, "candidate");
    int m = 0;
    for (size_t b = 0; b < NTILES && !m; b++) {
        break_forward_cpu(g->q, g->k, g->v, o, GB * t->H, t->N, GD, TILES[b], TILES[b], brk, t->causal, 0, 0, NULL, NULL,
                          NULL);
        m = matches(g, o);
    }
    tfree(o);
    return m;
}

/* Break 1 in float64 (a NumPy run promoted to float64): o = sum_j e^s_j v_j and l = sum_j e^s_j with no max,
 * each e^s in double (inf past s = 709.78), O = o / l: inf / inf = NaN where a score overflows, and the
 * right answer where none does (the tile order does not matter to a sum that does not overflow, within the
 * tolerance). */
static int no_max_f64_match(const Graded *g, const Set *t)
{
    double *cand = xmalloc(g->n * sizeof(double), "candidate");
    const double scale = 1.0 / sqrt((double)GD);
    for (long h = 0; h < GB * t->H; h++) {
        const size_t off = (size_t)h * t->N * GD;
        for (long i = 0; i < t->N; i++) {
            double *row = cand + off + (size_t)i * GD, l = 0;
            for (long d = 0; d < GD; d++) row[d] = 0;
            for (long j = 0; j < (t->causal ? i + 1 : t->N); j++) {
                double s = 0;
                for (long d = 0; d < GD; d++) s += (double)g->q[off + (size_t)i * GD + d] * g->k[off + (size_t)j * GD + d];
                const double p = exp(s * scale);
                l += p;
                for (long d = 0; d < GD; d++) row[d] += p * g->v[off + (size_t)j * GD + d];
            }
            for (long d = 0; d < GD; d++) row[d] /= l;
        }
    }
    const int m = matches64(g, cand);
    tfree(cand);
    return m;
}

/* The chapter's causal snippet: every K/V tile visited, and a tile above the diagonal (all masked for a row)
 * gives m_tile = -inf and p = e^(-inf - (-inf)) = NaN; so every row of a row tile that a later, wholly masked
 * K/V tile follows ends in NaN (rows i < the last tile's start, (N - 1) // T * T, at BR = BC = T) and the
 * other rows are right. *tile gets the T that reproduces it. */
static int masked_nan_match(const Graded *g, const Set *t, long *tile)
{
    static const long order[] = {GTILE, 16, 32, 128}; /* the assignment's tile first: several give the same rows */
    double *cand = xmalloc(g->n * sizeof(double), "candidate");
    int m = 0;
    for (size_t b = 0; b < sizeof order / sizeof *order && !m; b++) {
        const long last = (t->N - 1) / order[b] * order[b];
        for (size_t x = 0; x < g->n; x++) cand[x] = (long)(x / GD % (size_t)t->N) < last ? NAN : g->ref[x];
        m = last > 0 && matches64(g, cand);
        if (m) *tile = order[b];
    }
    tfree(cand);
    return m;
}

/* The last partial row tile dropped: rows from (N // BR) * BR never written (left 0, as np.zeros made them),
 * every other row right. */
static int dropped_rows_match(const Graded *g, const Set *t, long *first_row)
{
    static const long order[] = {GTILE, 16, 32, 128};
    double *cand = xmalloc(g->n * sizeof(double), "candidate");
    int m = 0;
    for (size_t b = 0; b < sizeof order / sizeof *order && !m; b++) {
        const long stop = t->N / order[b] * order[b];
        if (stop == t->N || stop == 0) continue;
        for (size_t x = 0; x < g->n; x++) cand[x] = (long)(x / GD % (size_t)t->N) >= stop ? 0.0 : g->ref[x];
        m = matches64(g, cand);
        if (m) *first_row = stop;
    }
    tfree(cand);
    return m;
}

/* Low-precision arithmetic: errors of the size that the same tiled forward makes with s, p, l and o
 * stored in fp16 (breaks.c's fp16 path) on these inputs: max abs and rel L2 each within 8x of it (fp16's
 * unit roundoff is 2^-11, float32's 2^-24: 8192x apart, so 8x either way cannot be float32's). *e16 gets
 * the fp16 run's errors; *all_fp16 says whether every output is an fp16 value (stored in fp16 at the end). */
static int fp16_like(const Graded *g, const Set *t, Err *e16, int *all_fp16)
{
    float *o = xmalloc(g->n * 4, "fp16 candidate");
    break_forward_cpu(g->q, g->k, g->v, o, GB * t->H, t->N, GD, GTILE, GTILE, BREAK_NONE, t->causal, 1, 0, NULL, NULL,
                      g->slope);
    *e16 = compare(o, g->ref, g->n, g->tol, 0);
    tfree(o);
    *all_fp16 = 1;
    for (size_t i = 0; i < g->n && *all_fp16; i++) *all_fp16 = f16_to_f32(f32_to_f16(g->out[i])) == g->out[i];
    const Err *e = &g->e;
    return e->n_nonfinite == 0 && e16->n_nonfinite == 0 && e->max_abs <= 8 * e16->max_abs &&
           e->rel_l2 <= 8 * e16->rel_l2 && e->max_abs >= e16->max_abs / 8 && e->rel_l2 >= e16->rel_l2 / 8;
}

/* Row i's scores s_j = q_i . k_j / sqrt(D) of a set without a mask or a bias, in double, into s [N]. */
static void row_scores(const Graded *g, const Set *t, long h, long i, double *s)
{
    const size_t off = (size_t)h * t->N * GD;
    for (long j = 0; j < t->N; j++) {
        double acc = 0;
        for (long d = 0; d < GD; d++) acc += (double)g->q[off + (size_t)i * GD + d] * g->k[off + (size_t)j * GD + d];
        s[j] = acc / sqrt((double)GD);
    }
}

/* p against a stale max: a K/V tile after the first exponentiated against the max of the tiles before it (the student
 * who takes p before m_new, or who keeps the first tile's m). Where a later tile's max exceeds that by more than exp's
 * range (limit: 88.72 in float32, 709.78 in float64) e^(s - m) is inf and the row ends in NaN (inf / inf, inf * 0);
 * elsewhere it is exact. At BC = 16..128; *bc gets the one that reproduces out. */
static int stale_max_match(const Graded *g, const Set *t, double limit, long *bc)
{
    static const long order[] = {GTILE, 16, 32, 128}; /* the assignment's tile first: on late_max all four agree */
    double *cand = xmalloc(g->n * sizeof(double), "candidate"), *s = xmalloc((size_t)t->N * sizeof(double), "scores");
    int m = 0;
    for (size_t b = 0; b < sizeof order / sizeof *order && !m; b++) {
        for (long h = 0; h < GB * t->H; h++)
            for (long i = 0; i < t->N; i++) {
                row_scores(g, t, h, i, s);
                double before = -INFINITY;
                int over = 0;
                for (long j0 = 0; j0 < t->N; j0 += order[b]) {
                    double mt = -INFINITY;
                    for (long j = j0; j < t->N && j < j0 + order[b]; j++) mt = fmax(mt, s[j]);
                    over |= j0 > 0 && mt - before > limit;
                    before = fmax(before, mt);
                }
                const size_t x = ((size_t)h * t->N + i) * GD;
                for (long d = 0; d < GD; d++) cand[x + d] = over ? NAN : g->ref[x + d];
            }
        m = matches64(g, cand);
        if (m) *bc = order[b];
    }
    tfree(cand); tfree(s);
    return m;
}

/* The running max started at a finite m0 instead of -inf: a row whose every score lies more than exp's range below m0
 * has every p = e^(s - m0) underflow (float32 below 1.4e-45 if f32, float64 below 4.9e-324), l = 0 and 0/0 = NaN;
 * the other rows are right (m rises to their max: m = max(m0, rowmax) by the end). */
static int max_start_match(const Graded *g, const Set *t, double m0, int f32)
{
    double *cand = xmalloc(g->n * sizeof(double), "candidate"), *s = xmalloc((size_t)t->N * sizeof(double), "scores");
    for (long h = 0; h < GB * t->H; h++)
        for (long i = 0; i < t->N; i++) {
            row_scores(g, t, h, i, s);
            double mx = m0, l = 0;
            for (long j = 0; j < t->N; j++) mx = fmax(mx, s[j]);
            const size_t x = ((size_t)h * t->N + i) * GD;
            for (long d = 0; d < GD; d++) cand[x + d] = 0;
            for (long j = 0; j < t->N; j++) {
                double p = exp(s[j] - mx);
                if (f32) p = (double)(float)p; /* p <= 1: the cast is defined; float32's underflow */
                l += p;
                for (long d = 0; d < GD; d++) cand[x + d] += p * g->v[(size_t)h * t->N * GD + (size_t)j * GD + d];
            }
            for (long d = 0; d < GD; d++) cand[x + d] /= l;
        }
    const int m = matches64(g, cand);
    tfree(cand); tfree(s);
    return m;
}

/* K and V padded with zeros to a whole number of tiles of BC and the padded keys left unmasked: each adds a score of 0
 * (q . 0) to the softmax and a value of 0 to o, so every row's l grows by pad * e^(0 - m) and its output shrinks. A
 * causal mask hides those keys (j >= N > i); scores of about 1000 make their e^(0 - m) 0. *bc gets the BC. */
static int padded_keys_match(const Graded *g, const Set *t, long *bc)
{
    double *cand = xmalloc(g->n * sizeof(double), "candidate"), *s = xmalloc((size_t)t->N * sizeof(double), "scores");
    int m = 0;
    for (size_t b = 0; b < NTILES && !m; b++) {
        const long pad = (t->N + TILES[b] - 1) / TILES[b] * TILES[b] - t->N;
        if (pad == 0) continue;
        for (long h = 0; h < GB * t->H; h++)
            for (long i = 0; i < t->N; i++) {
                row_scores(g, t, h, i, s);
                double mx = 0, l = 0; /* the padded keys' score 0 counts in the max too */
                for (long j = 0; j < t->N; j++) mx = fmax(mx, s[j]);
                const size_t x = ((size_t)h * t->N + i) * GD;
                for (long d = 0; d < GD; d++) cand[x + d] = 0;
                for (long j = 0; j < t->N; j++) {
                    const double p = exp(s[j] - mx);
                    l += p;
                    for (long d = 0; d < GD; d++) cand[x + d] += p * g->v[(size_t)h * t->N * GD + (size_t)j * GD + d];
                }
                l += (double)pad * exp(-mx);
                for (long d = 0; d < GD; d++) cand[x + d] /= l;
            }
        m = matches64(g, cand);
        if (m) *bc = TILES[b];
    }
    tfree(cand); tfree(s);
    return m;
}

// --- the diagnosis --------------------------------------------------------------------

static const char *diagnosis(Graded *g, char *why, size_t nw)
{
    const Graded *multi = &g[S_MULTI], *neg = &g[S_NEG], *cau = &g[S_CAUSAL], *large = &g[S_LARGE],
                 *huge = &g[S_HUGE], *al = &g[S_ALIBI];
    const char *c = NULL;
    long tile = 0;
    why[0] = '\0';
    /* Every cause below is named only when the break, rerun on the student's own inputs, gives the student's
     * output (within the tolerance, inf and NaN in the same places); a pattern that merely looks like one is
     * not enough: a student fixes what they are told. */
    if (nonfinite(large) && break_match(large, &SETS[S_LARGE], BREAK_NO_MAX)) { // e^s past 88.72: inf, inf/inf = NaN
        snprintf(why, nw, ": out_large.npy (scores up to about 110) equals Break 1 in float32: e^s overflows float32 past s = 88.72");
        return "running-max subtraction missing (exp overflow)";
    }
    if (nonfinite(huge) && right(large) && no_max_f64_match(huge, &SETS[S_HUGE])) {
        snprintf(why, nw, ": out_huge.npy (scores about 900 to 1100) equals Break 1 in float64, and out_large.npy "
                 "(scores up to about 110) is right: e^s overflows float64 only past s = 709.78 (float32 past 88.72), so "
                 "this run computed in float64; the running max m keeps every exponent s - m <= 0 in either");
        return "running-max subtraction missing (exp overflow)";
    }
    if (nonfinite(cau) && right(multi) && right(large) && masked_nan_match(cau, &SETS[S_CAUSAL], &tile)) {
        /* The chapter's causal snippet does this: it visits every K/V tile, and in a tile above the diagonal a
         * row has every score masked, m_tile = -inf and p = e^(-inf - (-inf)) = NaN. */
        snprintf(why, nw, " (m_tile = -inf, p = e^(-inf - (-inf))): out_causal.npy is NaN in exactly the rows that a "
                 "wholly masked K/V tile follows at BR = BC = %ld (rows 0..%ld) and right in the others: skip the tiles "
                 "above the diagonal, or let a row whose tile is all masked contribute nothing", tile,
                 (SETS[S_CAUSAL].N - 1) / tile * tile - 1);
        return "a fully masked K/V tile gives NaN";
    }
    if (wrong(neg) && right(large) && break_match(neg, &SETS[S_NEG], BREAK_MAX_ZERO)) {
        snprintf(why, nw, ": out_negative.npy equals Break 3 (m starts at 0: e^(s - 0) underflows for s below -104, "
                 "l = 0, 0/0)");
        return "running max initialised to 0 instead of -inf";
    }
    /* The three sets that reach what the seven before them let through, each named only with every earlier set right
     * that could have shown the same mistake otherwise. */
    const Graded *late = &g[S_LATE], *vneg = &g[S_VNEG], *rag = &g[S_RAGGED];
    const double LIM32 = 88.72, LIM64 = 709.78; /* log of float's and double's largest value */
    if (nonfinite(late) && right(multi) && right(large) && right(huge)) {
        const int f32 = stale_max_match(late, &SETS[S_LATE], LIM32, &tile);
        if (f32 || stale_max_match(late, &SETS[S_LATE], LIM64, &tile)) {
            snprintf(why, nw, ": out_late_max.npy equals the tiled forward at BC = %ld with each later tile's p = e^(s - m) "
                     "taken against the max of the tiles before it (p taken before m_new, or the first tile's m kept): the "
                     "last K/V tile's scores lie 120 (rows 0..127) or 1000 (rows 128..) above the first three's, and e^(s - "
                     "m) overflows %s past %.2f: inf, then inf / inf = NaN in %s. No earlier set's later tiles rise more than "
                     "about 65 above the first tile's max (large's). Take m_new = max(m, m_tile) first, then p = e^(s - m_new) and alpha = e^(m - m_new)",
                     tile, f32 ? "float32" : "float64", f32 ? LIM32 : LIM64,
                     f32 ? "every row" : "rows 128.. (float64 holds e^120: rows 0..127 are right, so this run computed in "
                           "float64)");
            return "p taken against a stale running max (a later tile's max overflows exp)";
        }
    }
    if (wrong(vneg) && right(neg) && right(multi) && right(large)) {
        if (max_start_match(vneg, &SETS[S_VNEG], 0.0, 0)) {
            snprintf(why, nw, ": out_very_neg.npy equals Break 3 in float64 (m starts at 0: every score here lies below -980, "
                     "e^(s - 0) underflows float64 past -745, l = 0, 0/0 = NaN); out_negative.npy is right only because "
                     "float64 holds e^-290 where float32 underflows past -104: this run computed in float64");
            return "running max initialised to 0 instead of -inf";
        }
        if (max_start_match(vneg, &SETS[S_VNEG], -1e4, 1)) {
            snprintf(why, nw, ": out_very_neg.npy equals the tiled forward with m started at -10000 (or any finite start "
                     "that far below 0): rows 128.. score about -20000, every e^(s - m) underflows, l = 0, 0/0 = NaN; rows "
                     "0..127 (about -1000) are right, and so is every earlier set, where no row's max lies below about -260. "
                     "Start m at -inf: the first tile's max then sets it");
            return "running max initialised to a finite value instead of -inf";
        }
    }
    if (wrong(rag) && right(multi) && right(cau) && right(huge) && padded_keys_match(rag, &SETS[S_RAGGED], &tile)) {
        snprintf(why, nw, ": out_ragged.npy (N = 129, no causal mask) equals attention over K and V padded with zeros to "
                 "a multiple of BC = %ld, the %ld padded keys scoring 0 and counted by the softmax: l too large, every row "
                 "shrunk. The causal set hides them (a padded key j >= N > i is masked) and huge's scores (about 1000) make "
                 "their e^(0 - m) = 0. Give the keys j >= N the score -inf, or loop to N with bc = N - j0 keys", tile,
                 (SETS[S_RAGGED].N + tile - 1) / tile * tile - SETS[S_RAGGED].N);
        return "padded keys not masked (N not a multiple of BC)";
    }
    /* Only sets whose N is not a multiple of the tile wrong, each equal to attention without its last
     * partial K/V tile. */
    int ragged_bad = 0, others_ok = 1, all_match = 1;
    for (int s = 0; s < NSETS; s++) {
        const int ragged = SETS[s].N % GTILE != 0;
        if (wrong(&g[s]) && !ragged) others_ok = 0;
        if (wrong(&g[s]) && ragged) ragged_bad++;
    }
    if (ragged_bad && others_ok) {
        int w = snprintf(why, nw, ": the wrong outputs equal attention over the whole tiles only (");
        long zero_rows = 0;
        for (int s = 0, np = 0; s < NSETS && all_match; s++) {
            if (!wrong(&g[s])) continue;
            long Nk = -1, zero = 0;
            for (size_t b = 0; b < NTILES && Nk < 0; b++) { /* BC = 16 .. 128: the keys such a loop keeps */
                const long cand = SETS[s].N / TILES[b] * TILES[b];
                if (cand != SETS[s].N && cand > 0 && dropped_tile_match(&g[s], &SETS[s], cand, &zero)) Nk = cand;
            }
            all_match = Nk > 0;
            if (all_match && w < (int)nw)
                w += snprintf(why + w, nw - (size_t)w, "%sout_%s.npy keys 0..%ld of %ld%s%.0ld%s", np++ ? "; " : "",
                              SETS[s].name, Nk - 1, SETS[s].N, zero ? ", rows from " : "", zero ? Nk : 0L,
                              zero ? " left 0" : "");
            zero_rows += zero;
        }
        if (all_match) {
            if (w < (int)nw)
                snprintf(why + w, nw - (size_t)w, "): the K/V loop stops at (N // BC) * BC; run it to N and give the last "
                         "tile N - j0 keys%s", zero_rows ? " (the rows left 0: the row loop stops at (N // BR) * BR too)" : "");
            return "the last partial K/V tile dropped (N not a multiple of BC)";
        }
        why[0] = '\0';
    }
    if (wrong(multi) && multi->e.n_nonfinite == 0) {
        float *o = xmalloc(multi->n * 4, "candidate");
        for (size_t b = 0; b < NTILES && !c; b++) {
            break_forward_cpu(multi->q, multi->k, multi->v, o, GB * GH, SETS[S_MULTI].N, GD, GTILE, TILES[b],
                              BREAK_NO_RESCALE, 0, 0, 0, NULL, NULL, NULL);
            if (matches(multi, o)) {
                c = "running statistics not rescaled (alpha/beta)";
                snprintf(why, nw, ": out_multi.npy equals Break 2 at BC = %ld", TILES[b]);
            }
        }
        tfree(o);
        double lmax = 0;
        Err e16;
        int all16 = 0;
        if (!c && no_scale_match(multi, &SETS[S_MULTI])) {
            c = "scale 1/sqrt(D) missing";
            snprintf(why, nw, ": out_multi.npy equals attention with s = q . k instead of q . k / sqrt(64) (scores 8x "
                     "too large, the softmax too sharp)");
        } else if (!c && no_division_match(multi, &SETS[S_MULTI], &lmax)) {
            c = "final division by l missing";
            snprintf(why, nw, ": out_multi.npy equals o = sum_j e^(s_j - m) v_j, each row the right output times its "
                     "l (up to %.1f here): O = o / l after the last K/V tile", lmax);
        } else if (!c && fp16_like(multi, &SETS[S_MULTI], &e16, &all16)) {
            c = "low-precision (fp16) arithmetic";
            snprintf(why, nw, ": out_multi.npy is off by max abs %.1e, rel L2 %.1e, the size of the same tiled forward "
                     "with s, p, l and o in fp16 (%.1e, %.1e), %.0fx float32's tolerance here%s: keep s, m, l, o in "
                     "float32", multi->e.max_abs, multi->e.rel_l2, e16.max_abs, e16.rel_l2, multi->e.max_abs / multi->tol,
                     all16 ? "; every output is an fp16 value" : "");
        }
    } else if (right(multi) && wrong(cau)) {
        float *o = xmalloc(cau->n * 4, "candidate");
        static const int modes[2] = {MASK_RELATIVE_ALL, MASK_RELATIVE};
        for (int m = 0; m < 2 && !c; m++)
            for (size_t b = 0; b < NTILES && !c; b++) {
                causal_forward_cpu(cau->q, cau->k, cau->v, o, NULL, GB * GH, SETS[S_CAUSAL].N, GD, TILES[b], TILES[b],
                                   modes[m], NULL);
                if (matches(cau, o)) {
                    c = "mask built from tile-relative indices";
                    snprintf(why, nw, ": out_causal.npy equals the tile-relative mask at BR = BC = %ld%s", TILES[b],
                             m ? " with the tiles above the diagonal skipped" : ", every tile visited (the chapter's snippet)");
                }
            }
        tfree(o);
    }
    if (!c) { /* rows past the last whole row tile never written, on every set where N is not a multiple of it */
        int ragged_wrong = 0, proven = 1;
        char rows[160] = "";
        for (int s2 = 0, k = 0; s2 < NSETS && proven; s2++) {
            long first = 0;
            if (!wrong(&g[s2])) continue;
            ragged_wrong++;
            proven = SETS[s2].N % GTILE != 0 && dropped_rows_match(&g[s2], &SETS[s2], &first);
            if (proven && k < (int)sizeof rows)
                k += snprintf(rows + k, sizeof rows - (size_t)k, "%sout_%s.npy from row %ld of %ld", k ? ", " : "",
                              SETS[s2].name, first, SETS[s2].N);
        }
        if (ragged_wrong && proven) {
            snprintf(why, nw, ": the wrong outputs are right in every row but those past the last whole row tile, which "
                     "are 0 (never written: %s): the row loop stops at (N // BR) * BR; run it to N and give the last row "
                     "tile N - i0 rows", rows);
            c = "the last partial row tile dropped (N not a multiple of BR)";
        }
    }
    int base_ok = 1;
    for (int s = 0; s < NSETS; s++) base_ok &= s == S_ALIBI || !wrong(&g[s]);
    if (!c && base_ok && wrong(al)) { /* the attention is right: where did the score modifier go? */
        long tile = 0;
        c = alibi_diagnosis(al->q, al->k, al->v, al->out, al->slope, GB * al->H, SETS[S_ALIBI].N, GD, al->tol, &tile);
        if (c)
            snprintf(why, nw, ": out_alibi.npy equals it%s%.0ld%s", tile ? " at BR = BC = " : "", tile,
                     al->e.n_nonfinite ? " (NaN where every e^(s + bias - m) underflowed: l = 0; the max of the scores "
                                         "without the bias no longer bounds those with it)" : "");
    }
    for (int s = 0; s < NSETS && !c; s++)
        if (wrong(&g[s])) {
            /* no break reproduces it: say where it goes wrong, not why */
            const Graded *w = &g[s];
            const long N = SETS[s].N, r = w->first_bad_row;
            c = "wrong in a way no known break explains";
            char right_rows[64] = "";
            if (r > 0) snprintf(right_rows, sizeof right_rows, "right in rows 0..%ld of every head, ", r - 1);
            int k = snprintf(why, nw, " (none of the known breaks, rerun on these inputs, gives this output): out_%s.npy is "
                             "%swrong from row %ld (row tile %ld of BR = 64, rows %ld..%ld, which sees K/V tiles 0..%ld); %zu "
                             "of %zu outputs wrong, first", SETS[s].name, right_rows, r,
                             r / GTILE, r / GTILE * GTILE, (r / GTILE + 1) * GTILE < N ? (r / GTILE + 1) * GTILE - 1 : N - 1,
                             ((SETS[s].causal ? r : N - 1)) / GTILE, w->e.n_bad, w->e.n);
            for (size_t b = 0; b < w->e.n_bad && b < 3 && k < (int)nw; b++) {
                const size_t x = w->e.bad_idx[b];
                k += snprintf(why + k, nw - (size_t)k, "%s index %zu (head %zu, row %zu, d %zu): expected %.6g, got %g",
                              b ? ";" : "", x, x / GD / (size_t)N, x / GD % (size_t)N, x % GD, w->e.bad_ref[b],
                              (double)w->e.bad_got[b]);
            }
        }
    return c;
}

int grade_dir(const char *dir, int print, GradeReport *rep)
{
    static char why[1024];
    static GradeReport own;
    GradeReport *R = rep ? rep : &own;
    memset(R, 0, sizeof *R);
    R->sets = NSETS;
    R->why = why;
    why[0] = '\0';
    struct stat st;
    const int no_dir = stat(dir, &st) != 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR : 0;
    if (no_dir) { /* a usage error (exit 2), yet the results file still says why: every set failed, none graded */
        snprintf(R->summary, sizeof R->summary, "grade: not graded: cannot open directory %s: %s", dir, strerror(no_dir));
        for (int s = 0; s < NSETS; s++) {
            R->set_name[s] = SETS[s].name;
            R->set_status[s] = "failed";
            snprintf(R->set_text[s], sizeof R->set_text[s], "FAIL %-9s not graded: cannot open directory %s: %s",
                     SETS[s].name, dir, strerror(no_dir));
        }
        if (print) fprintf(stderr, "%s: option --grade: cannot open directory %s: %s\n", g_prog, dir, strerror(no_dir));
        return EXIT_USAGE;
    }
    Graded g[NSETS];
    int all = 1, missing = 0, unreadable = 0, f64_files = 0, f64_set = -1;
    char eb[128];
    for (int s = 0; s < NSETS; s++) { /* every file read and checked before a line is printed */
        memset(&g[s], 0, sizeof g[s]);
        grade_set(dir, &SETS[s], &g[s]);
        if (print && g[s].bad[0]) fprintf(stderr, "%s: option --grade: %s/%s\n", g_prog, dir, g[s].bad);
    }
    if (print)
        printf("step07 --grade %s: %d input sets, [B, H, N, D] = [1, H, N, 64], tolerance 10x the error of textbook "
               "fp32 attention on the same inputs (01's naive, with the bias for ALiBi), 1e-4 to 1e-3\n", dir, NSETS);
    for (int s = 0; s < NSETS; s++) {
        const Err *e = &g[s].e;
        char *line = R->set_text[s];
        const size_t nl = sizeof R->set_text[s];
        R->set_name[s] = SETS[s].name;
        if (g[s].bad[0]) { /* there but unreadable: failed, with the reason as its line */
            unreadable++;
            all = 0;
            R->set_status[s] = "failed";
            snprintf(line, nl, "FAIL %-9s %s: not graded: %s", SETS[s].name, SETS[s].what, g[s].bad);
            if (print) printf("  %s\n", line);
            continue;
        }
        if (!g[s].present) {
            missing++;
            R->set_status[s] = "missing";
            snprintf(line, nl, "MISSING %-9s %s: %s not found", SETS[s].name, SETS[s].what, g[s].missing);
            if (print) printf("  %s\n", line);
            continue;
        }
        R->set_status[s] = e->n_bad == 0 ? "passed" : "failed";
        R->passed += e->n_bad == 0;
        all &= e->n_bad == 0;
        f64_files += g[s].f64_file;
        /* A float64 run: a set graded right whose every output is the float nearest the float64 result. Float32
         * arithmetic leaves most outputs an ulp or more away (textbook float32 attention: 7% to 54% nearest on
         * these sets); NumPy's float64 promotion still takes q k^T from float32 arrays, so only a set whose
         * scores are exact in float32 (huge) shows it whole. */
        if (e->n_bad == 0 && g[s].nearest >= 0.9999 && f64_set < 0) f64_set = s;
        if (e->n_bad == 0)
            snprintf(line, nl, "PASS %-9s %s: %s (tol %.1e)", SETS[s].name, SETS[s].what, fmt_err(e, eb, sizeof eb), g[s].tol);
        else {
            const size_t x = e->bad_idx[0];
            snprintf(line, nl, "FAIL %-9s %s: %zu of %zu outputs wrong (%zu inf/NaN), %s (tol %.1e); first bad: index %zu "
                     "(head %zu, row %zu, d %zu): expected %.6g, got %g", SETS[s].name, SETS[s].what, e->n_bad, e->n,
                     e->n_nonfinite, fmt_err(e, eb, sizeof eb), g[s].tol, x, x / GD / (size_t)SETS[s].N,
                     x / GD % (size_t)SETS[s].N, x % GD, e->bad_ref[0], (double)e->bad_got[0]);
        }
        if (print) printf("  %s\n", line);
    }
    int any_wrong = 0;
    for (int s = 0; s < NSETS; s++) any_wrong |= g[s].present && g[s].e.n_bad > 0;
    const char *c = any_wrong ? diagnosis(g, why, sizeof why) : NULL;
    if (!c) why[0] = '\0';
    const int f64_run = f64_set >= 0;
    if (print) {
        if (f64_files) {
            printf("note: %d output file%s float64 (", f64_files, f64_files > 1 ? "s are" : " is");
            for (int s = 0, k = 0; s < NSETS; s++)
                if (g[s].f64_file) printf("%sout_%s.npy", k++ ? ", " : "", SETS[s].name);
            printf("): graded after rounding each value to float32; the assignment asks for float32 files\n");
        }
        if (f64_run)
            printf("note: out_%s.npy is the float64 result rounded to float32 (%.2f%% of its outputs the nearest float; "
                   "textbook float32 attention on the same inputs: %.0f%%): errors far below what float32 arithmetic "
                   "makes, so this run computed in float64, not float32 (NumPy: 1/np.sqrt(D) is a float64 scalar and "
                   "promotes float32 arrays; README.txt says how to stay in float32)\n", SETS[f64_set].name,
                   100 * g[f64_set].nearest, 100 * g[f64_set].naive_nearest);
        if (missing) {
            printf("missing: ");
            for (int s = 0, k = 0; s < NSETS; s++)
                if (g[s].missing[0]) printf("%s%s", k++ ? ", " : "", g[s].missing);
            printf(": %d of %d sets not graded\n", missing, NSETS);
        }
    }
    char *sum = R->summary;
    const size_t ns = sizeof R->summary;
    int w;
    if (c) w = snprintf(sum, ns, "grade: wrong. diagnosis: %s%s", c, why);
    else if (missing || unreadable)
        w = snprintf(sum, ns, "grade: incomplete: the %d graded sets are right%s%.0d%s%s%.0d%s", NSETS - missing - unreadable,
                     unreadable ? ", " : "", unreadable, unreadable ? " unreadable" : "", missing ? ", " : "", missing,
                     missing ? " MISSING" : "");
    else w = snprintf(sum, ns, "grade: every set right: the tiled attention is correct");
    for (int s = 0, k = 0; s < NSETS; s++) /* each unreadable file's reason, as its test's output says it */
        if (g[s].bad[0] && w >= 0 && w < (int)ns)
            w += snprintf(sum + w, ns - (size_t)w, "%s%s", k++ ? "; " : "; not graded: ", g[s].bad);
    if (print) printf("%s\n", R->summary);
    R->cause = c; R->missing = missing; R->unreadable = unreadable; R->f64_files = f64_files; R->f64_run = f64_run;
    for (int s = 0; s < NSETS; s++) graded_free(&g[s]);
    return all && !missing ? 0 : 1;
}

// --- the autograder's results file ------------------------------------------------------

static void json_string(FILE *f, const char *t)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)t; *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
        else if (*c == '\n') fputs("\\n", f);
        else if (*c < 0x20) fprintf(f, "\\u%04x", *c);
        else fputc(*c, f);
    }
    fputc('"', f);
}

/* A new file beside path (path.XXXXXX, so that rename stays within one file system), with the mode a plain fopen
 * would give it; its name in tmp. NULL with errno set if it cannot be made. */
static FILE *json_temp(const char *path, char *tmp, size_t n)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) { errno = EISDIR; return NULL; }
    if (snprintf(tmp, n, "%s.XXXXXX", path) >= (int)n) { errno = ENAMETOOLONG; return NULL; }
    const int fd = mkstemp(tmp);
    if (fd < 0) return NULL;
    const mode_t mask = umask(0);
    umask(mask);
    FILE *f = fchmod(fd, 0666 & ~mask) == 0 ? fdopen(fd, "w") : NULL;
    if (!f) { const int e = errno; close(fd); unlink(tmp); errno = e; }
    return f;
}

int grade_json_probe(const char *path)
{
    char tmp[4200];
    FILE *f = json_temp(path, tmp, sizeof tmp);
    if (!f) return -1;
    fclose(f);
    unlink(tmp);
    return 0;
}

/* Written into a new file and renamed over path: an autograder (or a grade that stops half-way) never finds path
 * empty or cut short, and an old results file stays as it was until the new one is whole. */
int grade_json(const char *path, const GradeReport *r)
{
    char tmp[4200];
    FILE *f = json_temp(path, tmp, sizeof tmp);
    if (!f) { fprintf(stderr, "%s: option --json: cannot write %s: %s\n", g_prog, path, strerror(errno)); return -1; }
    fprintf(f, "{\n  \"score\": %d,\n  \"max_score\": %d,\n  \"output\": ", r->passed, r->sets);
    json_string(f, r->summary);
    fprintf(f, ",\n  \"tests\": [\n");
    for (int s = 0; s < r->sets; s++) {
        const int ok = !strcmp(r->set_status[s], "passed");
        fprintf(f, "    {\"name\": ");
        json_string(f, r->set_name[s]);
        fprintf(f, ", \"score\": %d, \"max_score\": 1, \"status\": \"%s\", \"output\": ", ok, ok ? "passed" : "failed");
        json_string(f, r->set_text[s]);
        fprintf(f, "}%s\n", s + 1 < r->sets ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    const int bad = ferror(f) | (fflush(f) != 0) | (fsync(fileno(f)) != 0);
    if ((fclose(f) != 0) | bad || rename(tmp, path) != 0) {
        fprintf(stderr, "%s: option --json: cannot write %s: %s\n", g_prog, path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* A JSON syntax check, recursive descent over RFC 8259's grammar (no semantic checks): p is advanced past
 * one value, or set to NULL at the first error. */
static const char *json_ws(const char *p) { while (p && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++; return p; }
static const char *json_value(const char *p, int depth);
static const char *json_str(const char *p)
{
    if (*p++ != '"') return NULL;
    for (; *p != '"'; p++) {
        if ((unsigned char)*p < 0x20) return NULL;       /* raw control characters (a NUL too) must be escaped */
        if (*p == '\\') {
            p++;
            if (*p == 'u') { for (int i = 1; i <= 4; i++) if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i]) return NULL; p += 4; }
            else if (!*p || !strchr("\"\\/bfnrt", *p)) return NULL;
        }
    }
    return p + 1;
}
static const char *json_value(const char *p, int depth)
{
    p = json_ws(p);
    if (!p || depth > 64) return NULL;
    if (*p == '"') return json_str(p);
    if (*p == '{' || *p == '[') {
        const char close = *p == '{' ? '}' : ']';
        p = json_ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                p = json_ws(p);
                if (!p || !(p = json_str(p)) || *(p = json_ws(p)) != ':') return NULL;
                p++;
            }
            if (!(p = json_ws(json_value(p, depth + 1)))) return NULL;
            if (*p == close) return p + 1;
            if (*p++ != ',') return NULL;
        }
    }
    if (!strncmp(p, "true", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    if (!strncmp(p, "null", 4)) return p + 4;
    char *end;
    if (*p != '-' && (*p < '0' || *p > '9')) return NULL;
    (void)strtod(p, &end);
    return end > p ? end : NULL;
}
int json_valid(const char *text)
{
    const char *p = json_ws(json_value(text, 0));
    return p && *p == '\0';
}

/* Read a whole small file into a NUL-terminated string (NULL if it cannot be read). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = xmalloc(1 << 16, "json");
    const size_t n = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

// --- the grader's own checks ------------------------------------------------------------

/* A student's tiled attention, written the way the NumPy student of EXERCISES.md writes it (BR = BC = 64,
 * p = e^(s - m_new) in one step, so no beta), with one mistake or none, in `bits` of precision: 64 is
 * NumPy's float64 promotion (every value after q k^T a double), 32 rounds every stored value to float
 * (float32 arithmetic: one double operation rounded to float is the float operation), 16 to fp16 (sums
 * in float, each rounded to fp16 once, as NumPy's float16 matmul and sum do). It shares no
 * code with breaks.c, step 06's mask or the reference on purpose: the grader must recognise the mistake
 * in code that is not its own candidates'. */
enum { ST_RIGHT, ST_NO_MAX, ST_DROP_LAST, ST_DROP_LAST_ROWS, ST_NO_SCALE, ST_NO_DIV,
       ST_DROP_ROWS_ONLY, /* the row loop stops at (N // BR) * BR, the K/V loop runs to N */
       ST_DIAG_OFF,       /* the causal mask hides the diagonal too (j >= i): row 0 sees nothing */
       ST_V_SHIFT,        /* p V with V's rows shifted by one in the last K/V tile: a bug no break makes */
       /* bugs that every set before late_max lets through (late_max, very_neg and ragged catch them): */
       ST_FIRST_MAX,      /* m set by the first K/V tile and never raised: p = e^(s - m_0) for every later tile */
       ST_STALE_P,        /* p = e^(s - m) with m before this tile's max is taken, then scaled by e^(m - m_new) */
       ST_MAX_ZERO,       /* m starts at 0 (Break 3), here in float64: e^s underflows only past -745 */
       ST_MAX_SENTINEL,   /* m starts at -10000, the finite stand-in for -inf of many codebases */
       ST_PAD_UNMASKED }; /* K and V padded with zeros to whole tiles of BC, the padded keys not masked: s = 0 */

static inline double in_bits(double x, int bits)
{
    if (bits == 64) return x;
    if (fabs(x) > FLT_MAX) return x > 0 ? INFINITY : -INFINITY; /* overflow: a float cast there is undefined in C */
    return bits == 32 ? (double)(float)x : (double)f16_to_f32(f32_to_f16((float)x));
}

static void student_forward(const float *q, const float *k, const float *v, const float *slope, double *out,
                            long bh, long N, long D, int causal, int bug, int bits)
{
    enum { T = GTILE };
    const double scale = bug == ST_NO_SCALE ? 1.0 : in_bits(1.0 / sqrt((double)D), bits);
    const long kv_stop = bug == ST_DROP_LAST || bug == ST_DROP_LAST_ROWS ? N / T * T : N; // the bug: range(0, (N // BC) * BC, BC)
    const long q_stop = bug == ST_DROP_LAST_ROWS || bug == ST_DROP_ROWS_ONLY ? N / T * T : N; // ... the rows (they stay 0)
    const int sb = bits == 16 ? 32 : bits; /* sums (rowsum(p), p V) as NumPy's float16 matmul and sum do them: in
                                              float, rounded to fp16 once; every other operation in fp16. q . k is
                                              a float32 sum at every precision: NumPy multiplies the float32 arrays
                                              q and k in float32 before the float64 scale promotes the result */
    double *o = xmalloc((size_t)T * D * sizeof(double), "student o"), m[T], l[T], p[T];
    for (long h = 0; h < bh; h++) {
        const float *qh = q + (size_t)h * N * D, *kh = k + (size_t)h * N * D, *vh = v + (size_t)h * N * D;
        for (long i0 = 0; i0 < q_stop; i0 += T) {
            const long br = N - i0 < T ? N - i0 : T;
            const long jend = causal && i0 + br < kv_stop ? i0 + br : kv_stop; // causal: no tile above the diagonal
            for (long r = 0; r < br; r++) {
                m[r] = bug == ST_NO_MAX || bug == ST_MAX_ZERO ? 0.0 : bug == ST_MAX_SENTINEL ? -1e4 : -INFINITY; // no max:
                l[r] = 0;                                                 // m stays 0, so p = e^s
                for (long d = 0; d < D; d++) o[r * D + d] = 0;
            }
            for (long j0 = 0; j0 < jend; j0 += T) {
                const long bc = jend - j0 < T ? jend - j0 : T;
                const long bcs = bug == ST_PAD_UNMASKED ? T : bc; // padded: a whole tile of scores, keys from N zero
                for (long r = 0; r < br; r++) {
                    const long i = i0 + r;
                    double m_tile = -INFINITY, l_tile = 0;
                    for (long c = 0; c < bcs; c++) {
                        const long j = j0 + c;
                        double acc = 0;
                        for (long d = 0; d < D && j < N; d++) acc = in_bits(acc + in_bits((double)qh[i * D + d] * kh[j * D + d], 32), 32);
                        p[c] = in_bits(in_bits(acc, bits) * scale, bits); // s = q . k / sqrt(D)
                        if (slope) p[c] = in_bits(p[c] - in_bits(slope[h] * (double)(i > j ? i - j : j - i), bits), bits);
                        if (causal && (j > i || (bug == ST_DIAG_OFF && j == i))) p[c] = -INFINITY; // hides j >= N too
                        if (p[c] > m_tile) m_tile = p[c];
                    }
                    const double m_new = bug == ST_NO_MAX ? 0.0 : bug == ST_FIRST_MAX && j0 > 0 ? m[r] : fmax(m[r], m_tile);
                    if (m_new == -INFINITY) continue;                          // nothing visible yet
                    const double alpha = in_bits(exp(m[r] - m_new), bits);      // alpha = e^(m - m_new)
                    /* stale p: the tile exponentiated against m before m_new is taken (the first tile against its own
                     * max), then brought to m_new by beta = e^(m - m_new): right unless e^(s - m) overflows first */
                    const double m_p = bug == ST_STALE_P && m[r] > -INFINITY ? m[r] : m_new;
                    const double beta = in_bits(exp(m_p - m_new), bits);        // 1 but for the stale p
                    for (long c = 0; c < bcs; c++) {
                        p[c] = in_bits(exp(p[c] - m_p), bits);                  // p = e^(s - m_new)
                        l_tile = in_bits(l_tile + p[c], sb);
                    }
                    l_tile = in_bits(in_bits(l_tile, bits) * beta, bits);
                    l[r] = in_bits(in_bits(alpha * l[r], bits) + l_tile, bits); // l = alpha l + rowsum(p)
                    for (long d = 0; d < D; d++) {
                        double pv = 0;
                        for (long c = 0; c < bc; c++) { /* a padded key's v is 0: it adds to l, not to o */
                            const long vj = bug == ST_V_SHIFT && j0 + T >= kv_stop && c + 1 < bc ? j0 + c + 1 : j0 + c;
                            pv = in_bits(pv + in_bits(p[c] * vh[vj * D + d], sb), sb);
                        }
                        pv = in_bits(in_bits(pv, bits) * beta, bits);
                        o[r * D + d] = in_bits(in_bits(alpha * o[r * D + d], bits) + pv, bits); // o = alpha o + p V
                    }
                    m[r] = m_new;
                }
            }
            for (long r = 0; r < br; r++)
                for (long d = 0; d < D; d++)
                    out[((size_t)h * N + i0 + r) * D + d] = bug == ST_NO_DIV ? o[r * D + d] : in_bits(o[r * D + d] / l[r], bits);
        }
    }
    tfree(o);
}

enum { AS_INTACT, AS_NO_MAX, AS_NO_RESCALE, AS_MAX_ZERO, AS_RELATIVE, AS_RELATIVE_ALL, AS_MASKED_NAN, AS_ALIBI_RELATIVE,
       AS_ALIBI_AFTER_MAX, AS_OFF_BY_ONE, AS_STUDENT, N_AS };

typedef struct {
    int as;            /* AS_*: one of the repository's breaks (breaks.c, step 06's mask), or AS_STUDENT */
    int bug, bits;     /* AS_STUDENT: student_forward's mistake and precision */
    int f64_file;      /* AS_STUDENT: save the outputs as float64 .npy, as np.save of a float64 array does */
} Writer;

static float *load_set(const char *dir, const char *what, const Set *t)
{
    char path[4096];
    const long shape[4] = {GB, t->H, t->N, GD};
    path_of(path, sizeof path, dir, what, t->name);
    return npy_load("--grade", path, shape, 4);
}

/* Write out_SET.npy as the writer w would (BR = BC = 64). */
static void write_outputs(const char *dir, const Writer *w)
{
    char path[4096];
    for (int s = 0; s < NSETS; s++) {
        const Set *t = &SETS[s];
        const long shape[4] = {GB, t->H, t->N, GD};
        const size_t n = (size_t)GB * t->H * t->N * GD;
        float *q = load_set(dir, "q", t), *k = load_set(dir, "k", t), *v = load_set(dir, "v", t), *o = xmalloc(n * 4, "O");
        float *slope = xmalloc((size_t)GB * t->H * 4, "slopes");
        alibi_slopes(slope, GB, t->H);
        int rc = 0;
        path_of(path, sizeof path, dir, "out", t->name);
        if (w->as == AS_STUDENT) {
            double *o64 = xmalloc(n * sizeof(double), "student O");
            for (size_t i = 0; i < n; i++) o64[i] = 0; /* out = np.zeros(...): rows never written stay 0 */
            student_forward(q, k, v, t->alibi ? slope : NULL, o64, GB * t->H, t->N, GD, t->causal, w->bug, w->bits);
            for (size_t i = 0; i < n; i++) o[i] = (float)o64[i]; /* o.astype(np.float32) */
            rc = w->f64_file ? npy_save_f64(path, o64, shape, 4) : npy_save(path, o, shape, 4, DT_FP32);
            tfree(o64);
        } else {
            static const int brk[N_AS] = {BREAK_NONE, BREAK_NO_MAX, BREAK_NO_RESCALE, BREAK_MAX_ZERO, BREAK_NONE,
                                          BREAK_NONE, BREAK_NONE, BREAK_NONE, BREAK_NONE, BREAK_NONE, BREAK_NONE};
            const int as = w->as;
            if (t->alibi) /* the right ALiBi, or one of its two wrong places */
                break_forward_cpu(q, k, v, o, GB * t->H, t->N, GD, GTILE, GTILE,
                                  as == AS_ALIBI_RELATIVE ? BREAK_ALIBI_RELATIVE
                                  : as == AS_ALIBI_AFTER_MAX ? BREAK_ALIBI_AFTER_MAX : BREAK_NONE, 0, 0, 0, NULL, NULL, slope);
            else if (t->causal && (as == AS_RELATIVE || as == AS_RELATIVE_ALL))
                causal_forward_cpu(q, k, v, o, NULL, GB * t->H, t->N, GD, GTILE, GTILE,
                                   as == AS_RELATIVE ? MASK_RELATIVE : MASK_RELATIVE_ALL, NULL);
            else
                break_forward_cpu(q, k, v, o, GB * t->H, t->N, GD, GTILE, GTILE, brk[as], t->causal, 0, 0, NULL, NULL, NULL);
            if (as == AS_OFF_BY_ONE && s == S_MULTI) o[1000] += 0.5f; // one wrong number that no break makes
            if (as == AS_MASKED_NAN && t->causal)                   // the chapter's snippet: every row tile with a
                for (long h = 0; h < GB * t->H; h++)                // later K/V tile (all masked for it) ends in NaN
                    for (long i = 0; i < (t->N - 1) / GTILE * GTILE; i++)
                        for (long d = 0; d < GD; d++) o[((size_t)h * t->N + i) * GD + d] = NAN;
            rc = npy_save(path, o, shape, 4, DT_FP32);
        }
        if (rc != 0) { fprintf(stderr, "%s: cannot write %s\n", g_prog, path); exit(EXIT_FAIL); }
        tfree(q); tfree(k); tfree(v); tfree(o); tfree(slope);
    }
}

static void remove_dir(const char *dir)
{
    char path[4096];
    for (int s = 0; s < NSETS; s++) {
        static const char *const what[4] = {"q", "k", "v", "out"};
        for (int i = 0; i < 4; i++) { path_of(path, sizeof path, dir, what[i], SETS[s].name); unlink(path); }
    }
    snprintf(path, sizeof path, "%s/README.txt", dir);
    unlink(path);
    rmdir(dir);
}

/* A .npy of dtype descr and shape whose data is nbytes zero bytes (as bad_input.sh's mknpy): a file np.save would
 * write for an int32 array, or one cut short. 0, or -1. */
static int npy_write_zeros(const char *path, const char *descr, const long *shape, int nd, size_t nbytes)
{
    char h[256], sh[128];
    shape_text(shape, nd, sh, sizeof sh);
    int len = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, sh);
    while ((10 + len + 1) % 64) h[len++] = ' '; /* the header padded to 64 bytes, then a newline */
    h[len++] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(len & 0xff, f);
    fputc(len >> 8, f);
    fwrite(h, 1, (size_t)len, f);
    for (size_t i = 0; i < nbytes; i++) fputc(0, f);
    return fclose(f);
}

/* Copy the first max bytes of src to dst (all of it if max is (size_t)-1). 0, or -1. */
static int copy_bytes(const char *src, const char *dst, size_t max)
{
    FILE *a = fopen(src, "rb"), *b = a ? fopen(dst, "wb") : NULL;
    int c, bad = !a || !b;
    for (size_t i = 0; !bad && i < max && (c = fgetc(a)) != EOF; i++) bad = fputc(c, b) == EOF;
    if (a) fclose(a);
    if (b && fclose(b) != 0) bad = 1;
    return bad ? -1 : 0;
}

/* The test of set name in a results file: its line (one per test, as grade_json writes them), into buf. */
static const char *json_test_line(const char *text, const char *name, char *buf, size_t n)
{
    char key[64];
    snprintf(key, sizeof key, "{\"name\": \"%s\"", name);
    const char *t = text ? strstr(text, key) : NULL, *e = t ? strchr(t, '\n') : NULL;
    snprintf(buf, n, "%.*s", t ? (int)(e ? e - t : (long)strlen(t)) : 0, t ? t : "");
    return buf;
}

/* The autograder's path with a bad student: every kind of malformed or missing out_multi.npy leaves a whole, valid
 * results file, the set's test failed with the reason as its output, the other sets graded and scored; an existing
 * results file is replaced whole, never cut to 0 bytes; no such directory still gives one. */
static void malformed_checks(const char *dir, const Writer *right)
{
    char out[4096], good[4096], json[4096], line[1024], want[64];
    write_outputs(dir, right);
    path_of(out, sizeof out, dir, "out", "multi");
    snprintf(good, sizeof good, "%s/good_multi.npy", dir);
    snprintf(json, sizeof json, "%s/results.json", dir);
    const long N = SETS[S_MULTI].N, shape[4] = {GB, GH, N, GD}, squeezed[3] = {GH, N, GD};
    const size_t n = (size_t)GB * GH * N * GD;
    int f64;
    char why[400];
    float *o = read_npy(out, "out_multi.npy", shape, 4, 0, &f64, why, sizeof why); /* the right outputs */
    if (!o || copy_bytes(out, good, (size_t)-1) != 0) { report(0, NULL, "grade/json-malformed", "setup: %s", why); tfree(o); return; }
    static const struct { const char *kind, *reason; } bad[] = {
        {"int32", "out_multi.npy is int32 ('<i4'), not float32 ('<f4')"},
        {"float16", "out_multi.npy is float16 ('<f2'), not float32 ('<f4')"},
        {"squeezed-3d", "out_multi.npy has shape (2, 256, 64) (3-D), not (1, 2, 256, 64)"},
        {"not-npy", "out_multi.npy is not a .npy file"},
        {"truncated", "out_multi.npy is truncated: "},
        {"missing", "out_multi.npy not found"},
    };
    snprintf(want, sizeof want, "\"score\": %d,\n  \"max_score\": %d", NSETS - 1, NSETS);
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        int made = 0;
        switch (b) {
        case 0: made = npy_write_zeros(out, "<i4", shape, 4, n * 4) == 0; break;
        case 1: made = npy_save(out, o, shape, 4, DT_FP16) == 0; break;
        case 2: made = npy_save(out, o, squeezed, 3, DT_FP32) == 0; break;
        case 3: { FILE *f = fopen(out, "w"); made = f && fputs("0.110518 -0.0523 0.2071\n", f) >= 0; made &= f && fclose(f) == 0; break; }
        case 4: made = copy_bytes(good, out, 1000) == 0; break;
        default: made = unlink(out) == 0; break;
        }
        GradeReport r;
        const int rc = grade_dir(dir, 0, &r), wrote = grade_json(json, &r) == 0;
        char *text = wrote ? slurp(json) : NULL;
        json_test_line(text, "multi", line, sizeof line);
        const int valid = text && json_valid(text), failed = strstr(line, "\"status\": \"failed\"") != NULL,
                  said = strstr(line, bad[b].reason) != NULL, scored = text && strstr(text, want);
        char name[64];
        snprintf(name, sizeof name, "grade/json-malformed/%s", bad[b].kind);
        report(made && rc == 1 && valid && failed && said && scored && r.unreadable + r.missing == 1, NULL, name,
               "--grade --json with out_multi.npy %s (the other sets right): exit %d (expected 1), results file %s, multi %s, "
               "its output %s \"%s\", score %s (expected %d of %d)", bad[b].kind, rc, !text ? "NOT WRITTEN" : valid ? "valid JSON"
               : "INVALID JSON", failed ? "failed" : "NOT failed", said ? "says" : "LACKS", bad[b].reason,
               scored ? "as expected" : "WRONG", NSETS - 1, NSETS);
        tfree(text);
        copy_bytes(good, out, (size_t)-1);
    }
    tfree(o);
    /* the results file there from the last case: probing it leaves it as it is; writing it replaces it whole (a new
     * inode, renamed over it) and leaves no temporary file beside it */
    struct stat before, probed, after;
    GradeReport r;
    const int rc = grade_dir(dir, 0, &r);
    const int had = stat(json, &before) == 0 && before.st_size > 0;
    const int probe = grade_json_probe(json) == 0 && stat(json, &probed) == 0;
    const int wrote = grade_json(json, &r) == 0 && stat(json, &after) == 0;
    char *text = wrote ? slurp(json) : NULL;
    int temps = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) temps += !strncmp(e->d_name, "results.json.", 13);
    if (d) closedir(d);
    const int kept = probe && probed.st_size == before.st_size && probed.st_ino == before.st_ino;
    const int replaced = wrote && after.st_ino != before.st_ino && text && json_valid(text);
    report(rc == 0 && had && kept && replaced && temps == 0, NULL, "grade/json-replaced-whole", "an existing results file "
           "(%lld bytes): the writability probe %s, the new file %s, %d temporary files left beside it", (long long)before.st_size,
           kept ? "left it as it was" : "CHANGED IT (or failed)", replaced ? "renamed over it whole (a new inode, valid JSON)"
           : "NOT a new whole file", temps);
    tfree(text);
    /* no such directory: exit 2 as a usage error, yet the results file says so: every set failed, score 0 */
    char none[4200];
    snprintf(none, sizeof none, "%s/no-such-dir", dir);
    const int rc2 = grade_dir(none, 0, &r), wrote2 = grade_json(json, &r) == 0;
    text = wrote2 ? slurp(json) : NULL;
    int failed = 0;
    for (const char *t = text; t && (t = strstr(t, "\"status\": \"failed\"")); t++) failed++;
    const int ok2 = rc2 == 2 && text && json_valid(text) && strstr(text, "\"score\": 0,") && failed == NSETS &&
                    strstr(text, "cannot open directory");
    report(ok2, NULL, "grade/json-no-such-dir", "--grade of a directory that is not there: exit %d (expected 2), results file "
           "%s, %d of %d tests failed, the reason %s", rc2, !text ? "NOT WRITTEN" : json_valid(text) ? "valid JSON" : "INVALID JSON",
           failed, NSETS, text && strstr(text, "cannot open directory") ? "in it" : "NOT in it");
    tfree(text);
    unlink(json);
    unlink(good);
}

void grade_checks(void)
{
    char dir[] = "/tmp/step07-grade-XXXXXX", path[4096];
    if (!mkdtemp(dir)) { report(0, NULL, "grade", "cannot make a temporary directory: %s", strerror(errno)); return; }
    grade_assignment(dir, 0, 0);
    static const char *const NO_MAX = "running-max subtraction missing (exp overflow)";
    static const char *const STALE = "p taken against a stale running max (a later tile's max overflows exp)";
    static const struct {
        Writer w;
        const char *name, *want;
        const char *why_has; /* the diagnosis' explanation must contain this (NULL: not checked) */
        int f64_run;         /* the note "this run computed in float64" must (1) or must not (0) appear */
        int caught_by;       /* S_LATE.. : a student every set before late_max passes, caught by this set (checked
                                both ways: the earlier sets pass it, this one fails it); 0: not such a student */
    } cases[] = {
        {{AS_INTACT, 0, 0, 0}, "intact", NULL, NULL, 0, 0},
        {{AS_NO_MAX, 0, 0, 0}, "no-max", NO_MAX, "float32 past", 0, 0},
        {{AS_NO_RESCALE, 0, 0, 0}, "no-rescale", "running statistics not rescaled (alpha/beta)", NULL, 0, 0},
        {{AS_MAX_ZERO, 0, 0, 0}, "max-zero", "running max initialised to 0 instead of -inf", NULL, 0, 0},
        {{AS_RELATIVE, 0, 0, 0}, "relative-mask", "mask built from tile-relative indices", NULL, 0, 0},
        {{AS_RELATIVE_ALL, 0, 0, 0}, "relative-mask-every-tile", "mask built from tile-relative indices", NULL, 0, 0},
        {{AS_MASKED_NAN, 0, 0, 0}, "fully-masked-tile-nan", "a fully masked K/V tile gives NaN", NULL, 0, 0},
        {{AS_ALIBI_RELATIVE, 0, 0, 0}, "alibi-relative", "ALiBi's bias from tile-relative indices", NULL, 0, 0},
        {{AS_ALIBI_AFTER_MAX, 0, 0, 0}, "alibi-after-max", "ALiBi's bias added after the running max", NULL, 0, 0},
        {{AS_OFF_BY_ONE, 0, 0, 0}, "one-wrong-number", "wrong in a way no known break explains", NULL, 0, 0},
        /* students whose code is not the grader's (student_forward), in float32 and in float64 */
        {{AS_STUDENT, ST_RIGHT, 32, 0}, "student-float32", NULL, NULL, 0, 0},
        {{AS_STUDENT, ST_RIGHT, 64, 1}, "student-float64-saved-float64", NULL, NULL, 1, 0},
        {{AS_STUDENT, ST_NO_MAX, 32, 0}, "student-float32-no-max", NO_MAX, "float32 past", 0, 0},
        {{AS_STUDENT, ST_NO_MAX, 64, 0}, "student-float64-no-max", NO_MAX, "computed in float64", 0, 0},
        {{AS_STUDENT, ST_DROP_LAST, 32, 0}, "student-float32-drop-last-tile",
         "the last partial K/V tile dropped (N not a multiple of BC)", "keys 0..191 of 200", 0, 0},
        {{AS_STUDENT, ST_DROP_LAST_ROWS, 64, 0}, "student-float64-drop-last-tiles-rows-too", /* the float64 note: */
         "the last partial K/V tile dropped (N not a multiple of BC)", "keys 0..255 of 300, rows from 256 left 0", 1, 0}, /* late_max */
        {{AS_STUDENT, ST_NO_SCALE, 32, 0}, "student-no-scale", "scale 1/sqrt(D) missing", NULL, 0, 0},
        {{AS_STUDENT, ST_NO_DIV, 32, 0}, "student-no-division", "final division by l missing", NULL, 0, 0},
        {{AS_STUDENT, ST_RIGHT, 16, 0}, "student-fp16", "low-precision (fp16) arithmetic", NULL, 0, 0},
        {{AS_STUDENT, ST_DROP_ROWS_ONLY, 32, 0}, "student-drop-last-row-tile",
         "the last partial row tile dropped (N not a multiple of BR)", "from row 192", 0, 0},
        /* bugs the grader has no name for: it must say so, not name a cause that only looks alike (the causal rows
         * wrong after the first row tile once read as a tile-relative mask; a NaN row once as a masked tile) */
        {{AS_STUDENT, ST_DIAG_OFF, 32, 0}, "student-diagonal-masked", "wrong in a way no known break explains",
         "out_causal.npy is wrong from row 0 (row tile 0", 0, 0},
        {{AS_STUDENT, ST_V_SHIFT, 32, 0}, "student-v-shifted", "wrong in a way no known break explains", "first index", 0, 0},
        /* Break 3 in float32 is caught by the negative set (e^-290 underflows float32) ... */
        {{AS_STUDENT, ST_MAX_ZERO, 32, 0}, "student-float32-max-zero", "running max initialised to 0 instead of -inf",
         "out_negative.npy equals Break 3", 0, 0},
        /* ... and these pass all seven sets before late_max: each is caught by the set named last */
        {{AS_STUDENT, ST_MAX_ZERO, 64, 0}, "student-float64-max-zero", "running max initialised to 0 instead of -inf",
         "Break 3 in float64", 1, S_VNEG},
        {{AS_STUDENT, ST_MAX_SENTINEL, 32, 0}, "student-max-minus-10000",
         "running max initialised to a finite value instead of -inf", "m started at -10000", 0, S_VNEG},
        {{AS_STUDENT, ST_FIRST_MAX, 32, 0}, "student-first-tile-max", STALE, "overflows float32 past 88.72", 0, S_LATE},
        {{AS_STUDENT, ST_STALE_P, 64, 0}, "student-float64-p-before-max", STALE, "overflows float64 past 709.78", 1, S_LATE},
        {{AS_STUDENT, ST_PAD_UNMASKED, 32, 0}, "student-padded-keys-unmasked", "padded keys not masked (N not a multiple of BC)",
         "the 63 padded keys", 0, S_RAGGED},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        write_outputs(dir, &cases[c].w);
        GradeReport r;
        const int rc = grade_dir(dir, 0, &r);
        char name[64];
        snprintf(name, sizeof name, "grade/%s", cases[c].name);
        const char *want = cases[c].want;
        const int ok = (want ? rc == 1 && r.cause && !strcmp(r.cause, want) : rc == 0 && !r.cause) &&
                       (!cases[c].why_has || strstr(r.why, cases[c].why_has)) && r.f64_run == cases[c].f64_run &&
                       r.f64_files == (cases[c].w.f64_file ? NSETS : 0);
        char extra[256] = "";
        const char *has = cases[c].why_has;
        int w = has ? snprintf(extra, sizeof extra, ", explanation %s \"%s\"", strstr(r.why, has) ? "says" : "lacks", has) : 0;
        if ((cases[c].w.as == AS_STUDENT || r.f64_run || r.f64_files) && w < (int)sizeof extra) /* the notes */
            snprintf(extra + w, sizeof extra - (size_t)w, "; float64-run note %s (expected %s), %d float64 files",
                     r.f64_run ? "given" : "not given", cases[c].f64_run ? "given" : "not given", r.f64_files);
        const int by = cases[c].caught_by;
        const int caught = by && !strcmp(r.set_status[by], "failed");
        char tail[96] = "";
        if (by) snprintf(tail, sizeof tail, "; %s %s", SETS[by].name, caught ? "failed (it catches it)" : "NOT failed");
        report(ok && (!by || caught), NULL, name, "outputs written as a student with this %s would: graded %s, diagnosis "
               "\"%s\" (expected \"%s\")%s%s", cases[c].w.as == AS_STUDENT ? "code" : "break", rc ? "wrong" : "right",
               r.cause ? r.cause : "(none)", want ? want : "(none)", extra, tail);
        if (by) { /* each set is graded on its own, so these lines are what the seven sets alone would have said */
            int first_passed = 0, k = 0, nl = 0;
            char later[64] = "";
            for (int s = 0; s < NSETS; s++)
                if (s < NSETS_FIRST) first_passed += !strcmp(r.set_status[s], "passed");
                else if (strcmp(r.set_status[s], "passed") && k < (int)sizeof later && ++nl)
                    k += snprintf(later + k, sizeof later - (size_t)k, "%s%s", k ? ", " : "", SETS[s].name);
            snprintf(name, sizeof name, "grade/earlier-sets-miss/%s", cases[c].name);
            report(first_passed == NSETS_FIRST, NULL, name, "the %d sets before late_max grade this student right: %d of %d "
                   "passed; of the sets after them, %s %s it", NSETS_FIRST, first_passed, NSETS_FIRST, k ? later : "none",
                   nl > 1 ? "fail" : "fails");
        }
    }
    /* --json: the autograder's file for a student with Break 2 (right where one K/V tile holds the row, wrong elsewhere),
     * read back: valid JSON (the validator itself must refuse a broken file), the score the grade says, a test
     * per set with its status */
    {
        static const Writer norescale = {AS_NO_RESCALE, 0, 0, 0};
        write_outputs(dir, &norescale);
        GradeReport r;
        grade_dir(dir, 0, &r);
        snprintf(path, sizeof path, "%s/results.json", dir);
        char *text = grade_json(path, &r) == 0 ? slurp(path) : NULL;
        int tests = 0, passed = 0;
        for (const char *t = text; t && (t = strstr(t, "\"status\": \"")); t++) {
            tests++;
            passed += !strncmp(t + 11, "passed", 6);
        }
        char want[64];
        snprintf(want, sizeof want, "\"score\": %d,\n  \"max_score\": %d", r.passed, NSETS);
        const int ok = text && json_valid(text) && strstr(text, want) && tests == NSETS && passed == r.passed &&
                       r.passed > 0 && r.passed < NSETS && strstr(text, "running statistics not rescaled");
        report(ok, NULL, "grade/json", "--json of a student with Break 2: %s JSON, %d tests (expected %d), %d passed "
               "(the grade: %d of %d), the diagnosis in its output: %s", text && json_valid(text) ? "valid" : "INVALID", tests,
               NSETS, passed, r.passed, NSETS, text && strstr(text, "running statistics not rescaled") ? "yes" : "NO");
        tfree(text);
        unlink(path);
        static const char *const broken[] = {"{\"a\": \"x\"y\"}", "{\"a\": 1,}", "{\"a\" 1}", "[1, 2", "{\"a\": \"tab\there\"}",
                                             "{\"a\": 1} x", "{\"a\": nul}"};
        int refused = 0;
        for (size_t b = 0; b < sizeof broken / sizeof *broken; b++) refused += !json_valid(broken[b]);
        report(refused == (int)(sizeof broken / sizeof *broken) && json_valid("{\"a\": [1, -2.5e3, \"\\u00e9\\n\", true, null]}"),
               NULL, "grade/json-validator", "the check's JSON validator refuses %d of %zu broken texts (an unescaped quote, "
               "a trailing comma, a missing colon, an open array, a raw tab, text after the value, a misspelt null) and "
               "takes a good one", refused, sizeof broken / sizeof *broken);
    }
    /* one output missing: the other sets are graded, exit 1, MISSING said */
    static const Writer right32 = {AS_STUDENT, ST_RIGHT, 32, 0};
    write_outputs(dir, &right32);
    path_of(path, sizeof path, dir, "out", "huge");
    unlink(path);
    GradeReport r;
    int rc = grade_dir(dir, 0, &r);
    report(rc == 1 && r.missing == 1 && !r.cause, NULL, "grade/one-output-missing", "out_huge.npy removed from a right "
           "student's outputs: exit %d (expected 1), %d MISSING (expected 1), the other %d sets graded: diagnosis \"%s\" "
           "(expected none)", rc, r.missing, NSETS - r.missing, r.cause ? r.cause : "(none)");
    malformed_checks(dir, &right32);
    remove_dir(dir);
    /* --assignment makes the parents of its directory */
    char top[] = "/tmp/step07-assign-XXXXXX", deep[512], mid[512];
    if (!mkdtemp(top)) { report(0, NULL, "grade/assignment-makes-parents", "cannot make a temporary directory"); return; }
    snprintf(mid, sizeof mid, "%s/a", top);
    snprintf(deep, sizeof deep, "%s/a/b", top);
    grade_assignment(deep, 0, 0);
    snprintf(path, sizeof path, "%s/README.txt", deep);
    report(!file_missing(path), NULL, "grade/assignment-makes-parents", "--assignment %s (neither a nor b there): %s", deep,
           file_missing(path) ? "README.txt missing" : "made, README.txt written");
    remove_dir(deep);
    rmdir(mid);
    rmdir(top);
}
