/*
 * step03: the computation cut into tiles (book Step 2), and why tiling alone
 * is not enough.
 *
 * What it adds over step 01: Q is walked BR rows at a time and K/V BC rows at
 * a time, so the score tile s_tile is [BR, BC] whatever N is, and no [N, N]
 * buffer exists. Two versions:
 *   B (wrong, the tempting one of 001's notebook): softmax each score tile on
 *     its own and add up the tiles' P V. Each tile is normalised by its own
 *     sum, so a row's weights add up to (number of tiles), not 1, and a tile
 *     of small scores weighs as much as a tile holding the row's maximum.
 *   two-pass (exact): a first pass over K finds each row's max m and sum l,
 *     a second pass over K and V accumulates e^(s - m) / l V. Exact, but K is
 *     read twice and every score computed twice. Step 04 removes that pass.
 *
 * Run:   make step03 && ./step03          (B=2 H=4 N=256 D=32, BR=BC=32)
 *        ./step03 --bc 256                (one tile covers N: version B is right)
 *        ./step03 --check
 * Expect (last lines):
 *        why: version B normalises each tile by its own sum ...
 *        cost: the two-pass version reads K twice ...
 * Limits: fp32, single-threaded, for reading.
 */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// --- the algorithm: version B (softmax per tile, wrong) ---------------------------

/* The score tile s_tile = Q_i K_j^T / sqrt(D) for rows i..i+br-1 and columns
 * j..j+bc-1 of one head, into s[BR, BC]. */
static void score_tile(const float *q, const float *k, float *s, long D, long i, long br, long j, long bc, long BC)
{
    const float scale = 1.0f / sqrtf((float)D);
    for (long r = 0; r < br; r++)
        for (long c = 0; c < bc; c++) {
            float acc = 0.0f;
            for (long d = 0; d < D; d++) acc += q[(i + r) * D + d] * k[(j + c) * D + d];
            s[r * BC + c] = acc * scale;                          // s_tile[r, c] = q_(i+r) . k_(j+c) / sqrt(D)
        }
}

static int tiled_softmax_per_tile(const float *q, const float *k, const float *v, float *o, // [bh, N, D] each
                           long bh, long N, long D, long BR, long BC)
{
    float *s = tmalloc((size_t)BR * BC * sizeof(float));            // [BR, BC]: the only score storage
    if (!s) return -1;
    for (long h = 0; h < bh; h++) {
        const float *qh = q + (size_t)h * N * D, *kh = k + (size_t)h * N * D, *vh = v + (size_t)h * N * D;
        float *oh = o + (size_t)h * N * D;
        for (long i = 0; i < N; i += BR) {
            long br = i + BR <= N ? BR : N - i;
            for (long r = 0; r < br; r++)
                for (long d = 0; d < D; d++) oh[(i + r) * D + d] = 0.0f;
            for (long j = 0; j < N; j += BC) {
                long bc = j + BC <= N ? BC : N - j;
                score_tile(qh, kh, s, D, i, br, j, bc, BC);
                for (long r = 0; r < br; r++) {
                    float *sr = s + r * BC, m = -INFINITY, l = 0.0f;
                    for (long c = 0; c < bc; c++) m = fmaxf(m, sr[c]);      // this tile's max only
                    for (long c = 0; c < bc; c++) { sr[c] = expf(sr[c] - m); l += sr[c]; }
                    for (long c = 0; c < bc; c++) sr[c] /= l;               // softmax over this tile alone: WRONG
                    for (long c = 0; c < bc; c++)
                        for (long d = 0; d < D; d++) oh[(i + r) * D + d] += sr[c] * vh[(j + c) * D + d];
                }
            }
        }
    }
    tfree(s);
    return 0;
}

// --- the algorithm: the exact two-pass tiled version -----------------------------

static int tiled_two_pass(const float *q, const float *k, const float *v, float *o, // [bh, N, D] each
                   long bh, long N, long D, long BR, long BC)
{
    float *s = tmalloc((size_t)BR * BC * sizeof(float));            // [BR, BC]
    float *m = tmalloc((size_t)BR * sizeof(float)), *l = tmalloc((size_t)BR * sizeof(float));
    if (!s || !m || !l) { tfree(s); tfree(m); tfree(l); return -1; }
    for (long h = 0; h < bh; h++) {
        const float *qh = q + (size_t)h * N * D, *kh = k + (size_t)h * N * D, *vh = v + (size_t)h * N * D;
        float *oh = o + (size_t)h * N * D;
        for (long i = 0; i < N; i += BR) {
            long br = i + BR <= N ? BR : N - i;
            /* Pass 1 over K: each row's global max, then its sum of e^(s - m).
             * (Two sweeps inside the pass would read K three times; instead the
             * sum is rescaled when the max grows -- the same trick step 04 then
             * applies to o as well. Here it only serves to keep pass 1 single.) */
            for (long r = 0; r < br; r++) { m[r] = -INFINITY; l[r] = 0.0f; }
            for (long j = 0; j < N; j += BC) {
                long bc = j + BC <= N ? BC : N - j;
                score_tile(qh, kh, s, D, i, br, j, bc, BC);
                for (long r = 0; r < br; r++) {
                    float mt = m[r];
                    for (long c = 0; c < bc; c++) mt = fmaxf(mt, s[r * BC + c]);
                    l[r] *= m[r] == mt ? 1.0f : expf(m[r] - mt);             // the sum so far, at the new max
                    for (long c = 0; c < bc; c++) l[r] += expf(s[r * BC + c] - mt);
                    m[r] = mt;
                }
            }
            /* Pass 2 over K and V: now that m and l are final, P is exact tile by tile. */
            for (long r = 0; r < br; r++)
                for (long d = 0; d < D; d++) oh[(i + r) * D + d] = 0.0f;
            for (long j = 0; j < N; j += BC) {
                long bc = j + BC <= N ? BC : N - j;
                score_tile(qh, kh, s, D, i, br, j, bc, BC);                  // the scores again: K read a second time
                for (long r = 0; r < br; r++)
                    for (long c = 0; c < bc; c++) {
                        float p = expf(s[r * BC + c] - m[r]) / l[r];        // p_rc = e^(s_rc - m_r) / l_r, final
                        for (long d = 0; d < D; d++) oh[(i + r) * D + d] += p * vh[(j + c) * D + d];
                    }
            }
        }
    }
    tfree(s); tfree(m); tfree(l);
    return 0;
}

// --- one run against the reference ---------------------------------------------------

enum { V_B = 0, V_TWO = 1 };
static const char *const vname[] = {"version B (softmax per tile)", "two-pass (exact)"};

static Err run_version(int which, const float *q, const float *k, const float *v, const double *ref, long bh, long N,
                       long D, long BR, long BC, double *ms)
{
    size_t n = (size_t)bh * N * D;
    float *o = xmalloc(n * sizeof(float), "O");
    for (size_t i = 0; i < n; i++) o[i] = NAN;                     // poisoned: an unwritten element fails
    double t0 = now_sec();
    int rc = which == V_B ? tiled_softmax_per_tile(q, k, v, o, bh, N, D, BR, BC) : tiled_two_pass(q, k, v, o, bh, N, D, BR, BC);
    if (ms) *ms = (now_sec() - t0) * 1e3;
    if (rc != 0) { mem_oom_line(mem_refused(), "the tiles"); exit(EXIT_FAIL); }
    Err e = compare(o, ref, n, 1e-5, 1e-5);
    tfree(o);
    return e;
}

static int run_checks(uint64_t seed)
{
    static const long Ns[] = {1, 17, 64, 65, 257};
    static const long blocks[][2] = {{16, 16}, {32, 32}, {64, 16}, {7, 5}};
    char name[96], eb[128];
    for (size_t a = 0; a < sizeof Ns / sizeof *Ns; a++) {
        long N = Ns[a], D = 32, bh = 2;
        size_t n = (size_t)bh * N * D;
        float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
        double *ref = xmalloc(n * sizeof(double), "reference");
        make_qkv(q, k, v, n, seed + a);
        ref_attention(q, k, v, bh, N, D, 0, ref);
        for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
            long BR = blocks[b][0], BC = blocks[b][1];
            Err e2 = run_version(V_TWO, q, k, v, ref, bh, N, D, BR, BC, NULL);
            snprintf(name, sizeof name, "two-pass N=%ld BR=%ld BC=%ld", N, BR, BC);
            report(e2.n_bad == 0, &e2, name, "%s (tol 1e-5)", fmt_err(&e2, eb, sizeof eb));
            Err eb_ = run_version(V_B, q, k, v, ref, bh, N, D, BR, BC, NULL);
            snprintf(name, sizeof name, "version-B N=%ld BR=%ld BC=%ld", N, BR, BC);
            if (N > BC) /* two or more K/V tiles: must be visibly wrong, and finite */
                report(eb_.max_abs > 1e-2 && eb_.n_nonfinite == 0, NULL, name,
                       "%ld K/V tiles: expected wrong (max abs > 1e-2), got max abs %.2e", (N + BC - 1) / BC, eb_.max_abs);
            else        /* one tile covers all of N: per-tile softmax IS the softmax */
                report(eb_.n_bad == 0, &eb_, name, "one K/V tile: expected right (tol 1e-5), got max abs %.2e", eb_.max_abs);
        }
        tfree(q); tfree(k); tfree(v); tfree(ref);
    }
    return report_finish();
}

// --- main ---------------------------------------------------------------------

static void usage(const Opts *o)
{
    printf("usage: ./step03 [options]\n"
           "Attention in [BR,BC] tiles: the wrong per-tile softmax, then the exact two-pass version (book Step 2).\n");
    print_common_usage(o);
}

int main(int argc, char **argv)
{
    Opts o;
    opts_expand(&argc, &argv);
    opts_init(&o, "step03", OPT_SHAPE | OPT_BLOCK | OPT_SEED | OPT_CSV | OPT_CHECK | OPT_NPY, 1u << DT_FP32);
    o.B = 2; o.H = 4; o.N = 256; o.D = 32; o.BR = 32; o.BC = 32;
    for (int i = 1; i < argc; i++)
        if (!opts_parse_common(&o, argc, argv, &i))
            usage_error("unknown option '%s' (see --help)", argv[i]);
    if (o.help) { usage(&o); return 0; }
    opts_validate(&o, sizeof(float));
    if (o.check) return run_checks(o.seed);

    size_t n = (size_t)o.B * o.H * o.N * o.D;
    long bh = o.B * o.H, tiles_r = (o.N + o.BR - 1) / o.BR, tiles_c = (o.N + o.BC - 1) / o.BC;
    float *q, *k, *v;
    char eb[128], b1[32], b2[32];
    inputs_load_or_make(&o, &q, &k, &v);
    double *ref = xmalloc(n * sizeof(double), "reference");
    ref_attention(q, k, v, bh, o.N, o.D, 0, ref);
    printf("step03: attention in tiles, B=%ld H=%ld N=%ld D=%ld, BR=%ld BC=%ld (%ld x %ld tiles per head)\n", o.B, o.H,
           o.N, o.D, o.BR, o.BC, tiles_r, tiles_c);
    printf("score tile: [%ld, %ld] = %s, whatever N is (naive's S would be [%ld, %ld] per head = %s)\n\n", o.BR, o.BC,
           fmt_bytes((double)o.BR * o.BC * 4, b1, sizeof b1), o.N, o.N, fmt_bytes((double)o.N * o.N * 4, b2, sizeof b2));
    FILE *csv = o.csv ? csv_open(o.csv, "version,N,D,BR,BC,max_abs,rel_l2,ms,k_bytes_read") : NULL;
    Err e[2];
    for (int w = 0; w < 2; w++) {
        double ms;
        /* K is read once per row tile by version B, twice by the two-pass version. */
        double kbytes = (double)(w + 1) * tiles_r * bh * o.N * o.D * 4;
        e[w] = run_version(w, q, k, v, ref, bh, o.N, o.D, o.BR, o.BC, &ms);
        printf("%-30s %s  (%.1f ms; K read: %s)%s\n", vname[w], fmt_err(&e[w], eb, sizeof eb), ms,
               fmt_bytes(kbytes, b1, sizeof b1), e[w].n_bad ? "  <-- WRONG" : "");
        if (csv) fprintf(csv, "%s,%ld,%ld,%ld,%ld,%.3e,%.3e,%.3f,%.0f\n", w ? "two-pass" : "B", o.N, o.D, o.BR, o.BC,
                         e[w].max_abs, e[w].rel_l2, ms, kbytes);
    }
    if (csv) fclose(csv);
    printf("\nwhy: version B normalises each tile by its own max and sum, so every row gets weight 1 from each of its\n"
           "     %ld K/V tiles instead of 1 in all; it is right only when one tile covers N (try --bc %ld).\n",
           tiles_c, o.N);
    printf("cost: the two-pass version is exact but reads K twice and computes every score twice: a first pass\n"
           "     for each row's max and sum, a second for P V. Step 04's online softmax does it in one pass.\n");
    tfree(q); tfree(k); tfree(v); tfree(ref);
    return e[V_TWO].n_bad ? EXIT_FAIL : EXIT_OK;
}
