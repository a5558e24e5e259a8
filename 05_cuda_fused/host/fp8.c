/*
 * fp8.c: ./step05 --dtype fp8, the FP8 family's driver (fp8.h): the checks of the CPU numerics (../fp8/fp8.c: e4m3,
 * the rotation, 2^x, the quantizers, the loop) and, on a GPU, of the FP8 kernels and the GPU quantizer; the default
 * run (every FP8 kernel checked on sampled rows, then timed beside kernel FP8_PEER in fp16); --bench; --errors (FP8's
 * error table on the CPU); --q --k --v (that table's columns for the reader's tensors); the shapes compute-sanitizer
 * runs. Its own science: the quantized inputs, twice naive FP8's error as the tolerance. The kernel lists and the
 * names of the kernels are the runner's (runner.c); the tables and the CSV are FP8's own (its columns: no causal,
 * no peak, no error columns; a table with the kernels as columns beside the 16-bit kernel).
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, for the files check */
#include "common.h"
#include "gpu.h"
#include "fp8.h"
#include "runner.h"
#include "../fp8/fp8.h"
#include "../kernels.h"
#include "../../01_naive/naive.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* FP8's CSV (--csv with --dtype fp8): a row per kernel run, the GEMM ceilings and the quantizer's time; and the
 * error table's (--errors --csv). */
#define FP8_CSV_HEADER "mode,dtype,kernel,name,B,H,N,D,ms,tflops"
#define FP8_ERRORS_CSV_HEADER "inputs,N,D,causal,fp16_rms,fp16_max,tensor_rms,tensor_max,block_rms,block_max,hadamard_rms," \
                              "hadamard_max,max_score"

#ifdef HAVE_CUDA
/* One row of FP8's CSV; tflops NULL: not a rate (the quantizer's rows, written 0). */
static void csv_row8(FILE *f, const char *mode, const char *dtype, int id, const char *name, long B, long H, long N, long D,
                     double ms, const double *tflops)
{
    if (!f) return;
    fprintf(f, "%s,%s,%d,%s,%ld,%ld,%ld,%ld,%.6f,", mode, dtype, id, name, B, H, N, D, ms);
    if (tflops) fprintf(f, "%.4f\n", *tflops);
    else fprintf(f, "0\n");
}
#endif

/* The FP8 kernel ids --kernel K[-M] selects: [lo, hi], every one when lo is 0 (no --kernel). */
static int fp8_selected(long lo, long hi, int id) { return !lo || (id >= lo && id <= hi); }

/* --kernel with --dtype fp8 names one FP8 kernel, or a range holding at least one (--kernel 24-28: 24, 27 and 28). */
void fp8_kernel_option_check(const Opts *o)
{
    KernelInfo ks[MAX_KERNELS];
    const int n = kernel_list(FAM_FP8, ks);
    int found = 0, exact = 0;
    for (int i = 0; i < n; i++) found += fp8_selected(o->kernel, o->kernel_last, ks[i].id), exact |= ks[i].id == o->kernel;
    /* a build without CUDA has no FP8 kernel to name: as the other families, the GPU's part is then a SKIP (exit 77) */
    if (!o->kernel || !n || (o->kernel == o->kernel_last ? exact : found > 0)) return;
    char ids[256];
    kernel_ids_text(FAM_FP8, 0, " and ", ids, sizeof ids);
    if (o->kernel == o->kernel_last)
        usage_error("option --kernel: the FP8 kernels are %s (one of them, or a range), not %ld", ids, o->kernel);
    usage_error("option --kernel: the FP8 kernels are %s, none of them in %ld-%ld", ids, o->kernel, o->kernel_last);
}

/* The FP8 kernels as a sentence names them: "kernels 15-17, 24, 27, 28, 30 and 45-48", or the first of them ("kernel
 * 15") with first; in a build without CUDA, which has none, "the FP8 kernels". */
static const char *fp8_who(int first, char *buf, size_t n)
{
    KernelInfo ks[MAX_KERNELS];
    if (first && kernel_list(FAM_FP8, ks)) snprintf(buf, n, "kernel %d", ks[0].id);
    else kernel_ids_phrase(FAM_FP8, 1, " and ", buf, n);
    return buf;
}

/* ------------------------------------------------------------- inputs */

/* Q, K, V from the seed; outliers: 0.1% of the entries multiplied by 10 to 100 (FlashAttention-3's test). */
static void make_inputs(float *q, float *k, float *v, size_t n, uint64_t seed, int outliers)
{
    make_qkv(q, k, v, n, seed);
    if (!outliers) return;
    Rng r;
    rng_seed(&r, seed ^ 0x5EEDull);
    float *x[3] = {q, k, v};
    for (int a = 0; a < 3; a++)
        for (size_t i = 0; i < n; i++)
            if (rng_uniform(&r) < 1e-3) x[a][i] *= (float)(10.0 + 90.0 * rng_uniform(&r));
}

/* Q's 64-row blocks (FP8_QBLOCK) and K's 128-row blocks (FP8_KBLOCK), q and k [bh][N][D], at four amplitudes in turn,
 * 1, 1/4, 1/2 and 1/8 (K's a step behind Q's), so that a block's scale is 2 to 8 times its neighbours': a kernel
 * that reads another block's scale is then far off, where on make_qkv's even inputs it can stay within the
 * tolerance. None above 1: sharper scores would make FP8's own error, and so the tolerance, grow with them. */
static void vary_blocks(float *q, float *k, long bh, long N, long D)
{
    static const float amp[4] = {1.0f, 0.25f, 0.5f, 0.125f};
    for (long h = 0; h < bh; h++)
        for (long r = 0; r < N; r++)
            for (long c = 0; c < D; c++) {
                q[(h * N + r) * D + c] *= amp[r / FP8_QBLOCK % 4];
                k[(h * N + r) * D + c] *= amp[(r / FP8_KBLOCK + 1) % 4];
            }
}

/* max abs and RMS error of out against ref */
static void err_of(const float *out, const double *ref, size_t n, double *max_abs, double *rms)
{
    double mx = 0, ss = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)out[i] - ref[i]);
        mx = d > mx || d != d ? d : mx;                                 /* NaN propagates */
        ss += d * d;
    }
    *max_abs = mx;
    *rms = sqrt(ss / (double)n);
}

/* ------------------------------------------------------------ the error table */

typedef struct { double fp16_max, fp16_rms, max[3], rms[3], max_score; } ErrRow;

/* One row of the table for the tensors q, k, v [B, H, N, D]: fp16 storage (exact arithmetic) and the FP8 loop
 * in each mode, against float64. keep: the scaling whose O goes to o_keep (NULL: none kept). */
static ErrRow errors_of(const float *q, const float *k, const float *v, long B, long H, long N, long D, int causal,
                        int keep, float *o_keep)
{
    ErrRow r;
    const long bh = B * H;
    const size_t n = (size_t)bh * N * D;
    float *out = xmalloc(n * 4, "O"), *x16[3];
    double *ref = xmalloc(n * 8, "reference"), *r16 = xmalloc(n * 8, "fp16 reference");
    ref_attention(q, k, v, bh, N, D, causal, ref);
    const float *x[3] = {q, k, v};
    for (int a = 0; a < 3; a++) {                                  /* fp16 storage, arithmetic exact */
        x16[a] = xmalloc(n * 4, "fp16 copy");
        memcpy(x16[a], x[a], n * 4);
        round_to_dtype(x16[a], n, DT_FP16);
    }
    ref_attention(x16[0], x16[1], x16[2], bh, N, D, causal, r16);
    for (size_t i = 0; i < n; i++) out[i] = f16_to_f32(f32_to_f16((float)r16[i]));
    err_of(out, ref, n, &r.fp16_max, &r.fp16_rms);
    for (int m = 0; m < 3; m++) {
        Fp8Tensors t;
        if (fp8_quantize(q, k, v, B, H, N, D, (Fp8Mode)m, &t) != 0) exit(EXIT_FAIL);
        fp8_flash_cpu(&t, causal, out);
        err_of(out, ref, n, &r.max[m], &r.rms[m]);
        if (o_keep && m == keep) memcpy(o_keep, out, n * 4);
        fp8_free(&t);
    }
    r.max_score = 0;                                               /* the largest |q.k| / sqrt(D) a row sees */
    for (long h = 0; h < bh; h++)
        for (long i = 0; i < N; i++)
            for (long j = 0; j <= (causal ? i : N - 1); j++)
                r.max_score = fmax(r.max_score, fabs(dot_f32(q + ((size_t)h * N + i) * D, k + ((size_t)h * N + j) * D, D)) /
                                                    sqrt((double)D));
    for (int a = 0; a < 3; a++) tfree(x16[a]);
    tfree(out); tfree(ref); tfree(r16);
    return r;
}

/* One row of the table: B=1, H heads, N, D, inputs from the seed (Gaussian, or with outliers). */
static ErrRow error_row(long H, long N, long D, int causal, int outliers, uint64_t seed)
{
    const size_t n = (size_t)H * N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
    make_inputs(q, k, v, n, seed, outliers);
    const ErrRow r = errors_of(q, k, v, 1, H, N, D, causal, -1, NULL);
    tfree(q); tfree(k); tfree(v);
    return r;
}

/* The table: Gaussian and outliers x D 64, 128 x causal or not; returns 1 if every entry is finite, FP8's
 * error is above fp16's in every row, and on Gaussian inputs the three scalings' RMS errors are within 10% of
 * each other (the lesson's claim: e4m3's exponent covers a Gaussian's range, so the scale's block does not
 * matter; a quantizer that ignored its block's amax, or saturated, would break it). */
static int error_table(long H, long N, int print, FILE *csv)
{
    int ok = 1;
    char who[64];
    fp8_who(1, who, sizeof who);
    if (print)
        printf("FP8 (e4m3) attention against float64, B=1 H=%ld N=%ld, the loop %s %s (fp8_flash_cpu); RMS "
               "error (max abs); max|s|: the largest score a row sees\n%-9s %-4s %-7s %-8s %-19s %-19s %-19s %-19s\n", H, N,
               who, strncmp(who, "the ", 4) ? "runs" : "run",
               "inputs", "D", "mask", "max|s|", "fp16 storage", "fp8 per-tensor", "fp8 per-block", "fp8 block+Hadamard");
    for (int out = 0; out < 2; out++)
        for (int di = 0; di < 2; di++)
            for (int causal = 0; causal < 2; causal++) {
                const long D = di ? 128 : 64;
                const ErrRow r = error_row(H, N, D, causal, out, 777 + (uint64_t)(out * 4 + di * 2 + causal));
                for (int m = 0; m < 3; m++) ok &= isfinite(r.rms[m]) && isfinite(r.max[m]) && r.rms[m] > r.fp16_rms;
                if (!out) {                                        /* Gaussian: the three scalings within 10% */
                    const double lo = fmin(r.rms[0], fmin(r.rms[1], r.rms[2])), hi = fmax(r.rms[0], fmax(r.rms[1], r.rms[2]));
                    ok &= hi <= 1.1 * lo;
                }
                if (print) {
                    char c[4][32];
                    snprintf(c[0], 32, "%.2e (%.1e)", r.fp16_rms, r.fp16_max);
                    for (int m = 0; m < 3; m++) snprintf(c[m + 1], 32, "%.2e (%.1e)", r.rms[m], r.max[m]);
                    printf("%-9s %-4ld %-7s %-8.1f %-19s %-19s %-19s %-19s\n", out ? "outliers" : "gaussian", D,
                           causal ? "causal" : "full", r.max_score, c[0], c[1], c[2], c[3]);
                }
                if (csv)
                    fprintf(csv, "%s,%ld,%ld,%d,%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%.4f\n", out ? "outliers" : "gaussian", N, D,
                            causal, r.fp16_rms, r.fp16_max, r.rms[0], r.max[0], r.rms[1], r.max[1], r.rms[2], r.max[2], r.max_score);
            }
    return ok;
}


/* ------------------------------------------------------------ the CPU checks */

static void check_e4m3(void)
{
    int bad = 0, n = 0;
    for (int c = 0; c < 256; c++) {                                    /* every finite code is its own rounding */
        if ((c & 0x7F) == 0x7F) continue;
        const float x = fp8_to_float((uint8_t)c);
        bad += fp8_from_float(x) != (uint8_t)c;
        n++;
    }
    int ties = 0;
    for (int c = 0; c < 0x7E; c++) {                                   /* the midpoint of two neighbours: to the even code */
        const float a = fp8_to_float((uint8_t)c), b = fp8_to_float((uint8_t)(c + 1)), mid = (a + b) / 2;
        const uint8_t want = (c % 2 == 0) ? (uint8_t)c : (uint8_t)(c + 1);
        bad += fp8_from_float(mid) != want;
        bad += fp8_from_float(nextafterf(mid, 0)) != (uint8_t)c || fp8_from_float(nextafterf(mid, 1e9f)) != (uint8_t)(c + 1);
        ties++;
    }
    bad += fp8_to_float(0x7E) != 448.0f || fp8_from_float(449.0f) != 0x7E || fp8_from_float(1e30f) != 0x7E ||
           fp8_from_float(INFINITY) != 0x7E || fp8_from_float(-INFINITY) != 0xFE || !isnan(fp8_to_float(fp8_from_float(NAN))) ||
           fp8_from_float(ldexpf(1.0f, -10)) != 0 || fp8_from_float(ldexpf(1.5f, -10)) != 1 || fp8_to_float(1) != ldexpf(1.0f, -9);
    report(bad == 0, NULL, "fp8/e4m3", "%d finite codes round to themselves, %d midpoints go to the even code and one "
           "float either side to the neighbours, 448 saturates (449, 1e30, inf), NaN stays NaN, 2^-10 ties to 0 (%d wrong)",
           n, ties, bad);
}

static void check_exp2_poly(void)
{
    double worst = 0;                                                  /* relative error against exp2 in double */
    long n = 0, at = 0;
    for (long i = 0; i <= 134 * 4096; i++, n++) {                      /* x from -126 to 8 (kernel 17's range) by 2^-12 */
        const float x = -126.0f + (float)i / 4096.0f;
        const double want = exp2((double)x), e = fabs(fp8_exp2_poly(x) - want) / want;
        if (!(e <= worst)) worst = e, at = i;                          /* NaN is the worst */
    }
    const int edges = fp8_exp2_poly(-127.0f) == 0.0f && fp8_exp2_poly(-1000.0f) == 0.0f && fp8_exp2_poly(-INFINITY) == 0.0f &&
                      isnan(fp8_exp2_poly(NAN)) && fp8_exp2_poly(0.0f) == FP8_EXP2_C0;
    report(worst < 1e-4 && edges, NULL, "fp8/exp2-poly", "2^x by the cubic (kernel 17's exponentials on the FMA pipes) at %ld "
           "points of [-126, 8]: largest relative error %.2e (at x = %.4f; e4m3 rounds p by up to 6.25e-2), must be < 1e-4; "
           "-127, -1000 and -inf give 0, NaN stays NaN%s", n, worst, -126.0 + at / 4096.0, edges ? "" : " (NOT SO)");
}

static void check_hadamard(void)
{
    Rng r;
    rng_seed(&r, 31);
    for (long D = 64; D <= 128; D *= 2) {
        float x[128] = {0}, y[128] = {0}, a[128] = {0}, b[128] = {0};
        double worst = 0, back = 0, qk = 0;
        for (long i = 0; i < D; i++) x[i] = (float)rng_normal(&r);
        memcpy(y, x, (size_t)D * sizeof x[0]);
        fwht(y, D);
        for (long i = 0; i < D; i++) {                                 /* against H_ij = (-1)^popcount(i & j) / sqrt(D) */
            double h = 0;
            for (long j = 0; j < D; j++) h += (__builtin_popcountl((unsigned long)(i & j)) % 2 ? -1.0 : 1.0) * x[j];
            worst = fmax(worst, fabs(h / sqrt((double)D) - y[i]));
        }
        fwht(y, D);                                                    /* H H = I */
        for (long i = 0; i < D; i++) back = fmax(back, fabs((double)y[i] - x[i]));
        for (long i = 0; i < D; i++) { a[i] = (float)rng_normal(&r); b[i] = (float)rng_normal(&r); }
        double d0 = 0, d1 = 0;
        for (long i = 0; i < D; i++) d0 += (double)a[i] * b[i];
        fwht(a, D); fwht(b, D);
        for (long i = 0; i < D; i++) d1 += (double)a[i] * b[i];
        qk = fabs(d1 - d0);
        char name[48];
        snprintf(name, sizeof name, "fp8/hadamard D=%ld", D);
        report(worst < 1e-5 && back < 1e-5 && qk < 1e-4, NULL, name, "fwht against the explicit matrix %.1e, H H x - x %.1e, "
               "(q H).(k H) - q.k %.1e (tol 1e-5, 1e-5, 1e-4)", worst, back, qk);
    }
}

static void check_layout_and_scales(void)
{
    int seen[32] = {0}, bij = 1;
    for (int L = 0; L < 32; L++) seen[fp8_key_perm(L)]++;
    for (int p = 0; p < 32; p++) bij &= seen[p] == 1;
    /* Quantize a head with a known amax per block: every block's largest entry becomes 448 exactly; every
     * entry in e4m3's normal range comes back within half a step (2^-4 relative); V reads back through the
     * transposed, permuted layout. */
    const long N = 200, D = 64;
    const size_t n = (size_t)N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
    make_qkv(q, k, v, n, 99);
    Fp8Tensors t;
    if (fp8_quantize(q, k, v, 1, 1, N, D, FP8_BLOCK, &t) != 0) exit(EXIT_FAIL);
    double worst = 0;
    int top = 0, vbad = 0;
    for (long i = 0; i < N; i++)
        for (long d = 0; d < D; d++) {
            const float sq = t.sq[i / FP8_QBLOCK], x = q[i * D + d], y = fp8_to_float(t.q[i * D + d]) * sq;
            if (fabsf(x) / sq >= 0.015625f) worst = fmax(worst, fabs((double)y - x) / fabs((double)x));
            top += t.q[i * D + d] == 0x7E || t.q[i * D + d] == 0xFE;
            const float vv = fp8_v_at(&t, 0, i, d) * t.sv[0];
            vbad += fabsf(vv - v[i * D + d]) > 0.0625f * fabsf(v[i * D + d]) + 1e-3f * t.sv[0];
        }
    const int blocks = (int)t.nqb;
    fp8_free(&t);
    tfree(q); tfree(k); tfree(v);
    report(bij && worst <= 0.0625 && top >= blocks && vbad == 0, NULL, "fp8/quantize",
           "the key permutation a bijection (%s), Q per %d rows: worst relative error %.4f (<= 2^-4), %d entries at +-448 "
           "(>= one per block, %d blocks), V through its transposed layout: %d wrong", bij ? "yes" : "no", FP8_QBLOCK,
           worst, top, blocks, vbad);
}

/* One case of check_loop: the CPU loop against float64, O stored in out_dt (fp16 or bf16); blocks: Q's and K's
 * blocks at their own amplitudes (vary_blocks). */
static void loop_case(Fp8Mode mode, long N, long D, int causal, int out_dt, int blocks)
{
    const long H = 2;
    const size_t n = (size_t)H * N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
    float *out = xmalloc(n * 4, "O"), *nv = xmalloc(n * 4, "naive O");
    double *ref = xmalloc(n * 8, "reference");
    make_inputs(q, k, v, n, 500 + (uint64_t)(N * 4 + (D == 128) * 2 + causal), 0);
    if (blocks) vary_blocks(q, k, H, N, D);
    ref_attention(q, k, v, H, N, D, causal, ref);
    Fp8Tensors t;
    if (fp8_quantize(q, k, v, 1, H, N, D, mode, &t) != 0) exit(EXIT_FAIL);
    t.out = out_dt;
    fp8_naive_cpu(&t, causal, nv);
    fp8_flash_cpu(&t, causal, out);
    double nmax, nrms;
    err_of(nv, ref, n, &nmax, &nrms);
    const double tol = tol_fp8(nmax);
    const Err e = compare(out, ref, n, tol, 0);
    char name[96], eb[128];
    snprintf(name, sizeof name, "fp8/cpu-loop %s%s N=%ld D=%ld%s%s", fp8_mode_name(mode), blocks ? " varied-blocks" : "",
             N, D, causal ? " causal" : "", out_dt == DT_BF16 ? " bf16-out" : "");
    report(e.n_bad == 0 && e.max_abs <= tol, &e, name, "%s; naive fp8 %.2e, tol %.2e", fmt_err(&e, eb, sizeof eb), nmax, tol);
    fp8_free(&t);
    tfree(q); tfree(k); tfree(v); tfree(out); tfree(nv); tfree(ref);
}

/* The loop the FP8 kernels run, on the CPU, against float64 within twice naive FP8's error, at odd N (and with O in
 * bf16, and with Q's and K's blocks at their own amplitudes, at one N). */
static void check_loop(void)
{
    static const long Ns[] = {1, 17, 64, 65, 129, 257};
    for (int mi = 0; mi < 3; mi++)
        for (long D = 64; D <= 128; D *= 2)
            for (size_t a = 0; a < sizeof Ns / sizeof Ns[0]; a++)
                for (int causal = 0; causal < 2; causal++)
                    if (mi == FP8_BLOCK || (Ns[a] == 257 && D == 64))        /* the other modes at one shape */
                        loop_case((Fp8Mode)mi, Ns[a], D, causal, DT_FP16, 0);
    for (long D = 64; D <= 128; D *= 2)                                       /* O stored in bf16 */
        for (int causal = 0; causal < 2; causal++) loop_case(FP8_BLOCK, 257, D, causal, DT_BF16, 0);
    for (long D = 64; D <= 128; D *= 2)                                       /* blocks at their own amplitudes */
        for (int causal = 0; causal < 2; causal++) loop_case(FP8_BLOCK, 257, D, causal, DT_FP16, 1);
}

static int fp8_files(const Opts *o, int scaling, int print);

/* --dtype fp8 --q --k --v --out on the CPU: the O the files path writes, read back from its .npy, is
 * fp8_flash_cpu's on the same tensors bit for bit (the tensors and their shape taken from the files; N = 100,
 * not a multiple of any block; causal; the Hadamard scaling, the one with the most steps). */
static void check_files(void)
{
    char dir[] = "/tmp/step05-fp8-XXXXXX", path[4][4200];
    if (!mkdtemp(dir)) { report(0, NULL, "fp8/files", "cannot make a temporary directory"); return; }
    enum { B = 1, H = 2, N = 100, D = 64 };
    const size_t n = (size_t)B * H * N * D;
    const long shp[4] = {B, H, N, D};
    float *x[3], *want = xmalloc(n * 4, "O");
    for (int a = 0; a < 3; a++) x[a] = xmalloc(n * 4, "input");
    make_inputs(x[0], x[1], x[2], n, 31, 1);
    static const char *const name[4] = {"q", "k", "v", "o"};
    int wrote = 1;
    for (int a = 0; a < 4; a++) snprintf(path[a], sizeof path[a], "%s/%s.npy", dir, name[a]);
    for (int a = 0; a < 3; a++) wrote &= npy_save(path[a], x[a], shp, 4, DT_FP32) == 0;
    Opts o;
    opts_init(&o, g_prog, OPT_SHAPE | OPT_NPY | OPT_CAUSAL, 1u << DT_FP8);
    o.B = B, o.H = H, o.N = N, o.D = D, o.causal = 1;
    o.qfile = path[0], o.kfile = path[1], o.vfile = path[2], o.outfile = path[3];
    size_t bad = n;
    if (wrote && fp8_files(&o, FP8_HADAMARD, 0) == EXIT_OK) {
        float *got = npy_load("--out", path[3], shp, 4);
        Fp8Tensors t;
        if (fp8_quantize(x[0], x[1], x[2], B, H, N, D, FP8_HADAMARD, &t) == 0) {
            fp8_flash_cpu(&t, 1, want);
            fp8_free(&t);
            bad = 0;
            for (size_t i = 0; i < n; i++) bad += !(got[i] == want[i]); /* ==: a NaN never equals */
        }
        tfree(got);
    }
    report(bad == 0, NULL, "fp8/files", "--q --k --v --out on the CPU (B=1 H=2 N=100 D=64, causal, Hadamard): O read back "
           "from its .npy equals fp8_flash_cpu's on the same tensors bit for bit (%zu of %zu differ)", bad, n);
    for (int a = 0; a < 4; a++) unlink(path[a]);
    rmdir(dir);
    for (int a = 0; a < 3; a++) tfree(x[a]);
    tfree(want);
}

void fp8_cpu_checks(void)
{
    check_e4m3();
    check_hadamard();
    check_exp2_poly();
    check_layout_and_scales();
    check_loop();
    check_files();
    const int ok = error_table(2, 256, 0, NULL);
    report(ok, NULL, "fp8/error-table", "the table at N=256 (Gaussian and outliers, D 64 and 128, causal or not, three "
           "scalings): every error finite, FP8's above fp16 storage's in every cell, on Gaussian inputs the three "
           "scalings within 10%% of each other");
}

/* ------------------------------------------------------------ the GPU half */

#ifdef HAVE_CUDA

typedef struct {
    Fp8Args a;
    size_t n;      /* elements of O */
} Fp8Dev;

/* The FP8 kernels, from the registry (kernels.h) in id order: fp8_at(x) for x < fp8_count(). */
static int fp8_count(void) { int n; fp8_kernels(&n); return n; }
static const Fp8Kernel *fp8_at(int x) { int n; return fp8_kernels(&n)[x]; }

static void dev_upload(const Fp8Tensors *t, int causal, Fp8Dev *d)
{
    const long bh = t->B * t->H;
    d->n = (size_t)bh * t->N * t->D;
    Fp8Args *a = &d->a;
    a->B = t->B, a->H = t->H, a->N = t->N, a->D = t->D, a->Npad = t->Npad, a->nqb = t->nqb, a->nkb = t->nkb;
    a->causal = causal, a->out_dtype = t->out;
    a->q = dupload_bytes(t->q, d->n, "Q (e4m3)");
    a->k = dupload_bytes(t->k, d->n, "K (e4m3)");
    a->vt = dupload_bytes(t->vt, (size_t)bh * t->D * t->Npad, "V^T (e4m3)");
    a->sq = dupload(t->sq, (size_t)bh * t->nqb, DT_FP32, "Q's scales");
    a->sk = dupload(t->sk, (size_t)bh * t->nkb, DT_FP32, "K's scales");
    a->sv = dupload(t->sv, (size_t)bh, DT_FP32, "V's scales");
    a->o = dmalloc(d->n * 2, t->out == DT_BF16 ? "O (bf16)" : "O (fp16)");
}

static void dev_free(Fp8Dev *d)
{
    dfree((void *)d->a.q); dfree((void *)d->a.k); dfree((void *)d->a.vt);
    dfree((void *)d->a.sq); dfree((void *)d->a.sk); dfree((void *)d->a.sv); dfree(d->a.o);
}

/* One run on an output filled with NaN (an element the kernel forgets fails the check); 0 or -1. */
static int dev_run(const Fp8Kernel *k, Fp8Dev *d, float *out)
{
    dpoison(d->a.o, d->n, d->a.out_dtype);
    if (k->launch(&d->a, NULL) != 0) return -1;
    gpu_sync_check();
    ddownload(out, d->a.o, d->n, d->a.out_dtype);
    return 0;
}

/* The FP8 kernels on one problem: against float64 within twice naive FP8's error, twice bit-identical, and
 * their distance to the CPU loop they transcribe (printed, not checked: the two differ in the order of fp32
 * sums and in ex2, and a p that lands on the other side of an e4m3 rounding boundary moves its weight by
 * 2^-4, which on a causal row of few keys shows in the output). */
static void check_gpu_problem(long only, long B, long H, long N, long D, int causal, Fp8Mode mode, int outliers, int out_dt,
                              uint64_t seed, int blocks)
{
    const size_t n = (size_t)B * H * N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V"), *out = xmalloc(n * 4, "O"),
          *again = xmalloc(n * 4, "O again"), *nv = xmalloc(n * 4, "naive O"), *cpu = xmalloc(n * 4, "CPU loop's O");
    double *ref = xmalloc(n * 8, "reference");
    make_inputs(q, k, v, n, seed, outliers);
    if (blocks) vary_blocks(q, k, B * H, N, D);
    ref_attention(q, k, v, B * H, N, D, causal, ref);
    Fp8Tensors t;
    if (fp8_quantize(q, k, v, B, H, N, D, mode, &t) != 0) exit(EXIT_FAIL);
    t.out = out_dt;
    fp8_naive_cpu(&t, causal, nv);
    fp8_flash_cpu(&t, causal, cpu);
    double nmax, nrms;
    err_of(nv, ref, n, &nmax, &nrms);
    const double tol = tol_fp8(nmax);
    Fp8Dev d;
    dev_upload(&t, causal, &d);
    for (int x = 0; x < fp8_count(); x++) {
        const Fp8Kernel *kn = fp8_at(x);
        if (only && kn->id != only) continue;
        char name[192], eb[128];
        snprintf(name, sizeof name, "kernel%d fp8 %s%s%s B=%ld H=%ld N=%ld D=%ld%s%s", kn->id, fp8_mode_name(mode),
                 outliers ? " outliers" : "", blocks ? " varied-blocks" : "", B, H, N, D, causal ? " causal" : "",
                 out_dt == DT_BF16 ? " bf16-out" : "");
        if (dev_run(kn, &d, out) != 0) {
            report(0, NULL, name, "the launch failed");
            continue;
        }
        const Err e = compare(out, ref, n, tol, 0);
        double cmax = 0;
        for (size_t i = 0; i < n; i++) cmax = fmax(cmax, fabs((double)out[i] - cpu[i]));
        report(e.n_bad == 0 && e.max_abs <= tol, &e, name, "%s; naive fp8 %.2e, tol %.2e; the CPU loop %.1e away",
               fmt_err(&e, eb, sizeof eb), nmax, tol, cmax);
        const int again_ran = dev_run(kn, &d, again) == 0;
        snprintf(name + strlen(name), sizeof name - strlen(name), " rerun");
        report(again_ran && !memcmp(out, again, n * 4), NULL, name, "two runs bit-identical");
    }
    dev_free(&d);
    fp8_free(&t);
    tfree(q); tfree(k); tfree(v); tfree(out); tfree(again); tfree(nv); tfree(cpu); tfree(ref);
}

/* The GPU quantizer (fp8_quantize.cu) against fp8_quantize, byte for byte and scale for scale, on 16-bit inputs
 * with outliers, at odd N, per block and with the rotation fused in. */
static void check_quantize_gpu(void)
{
    static const long Ns[] = {1, 65, 257, 1000};
    for (long D = 64; D <= 128; D *= 2)
        for (int had = 0; had < 2; had++) {
            long codes = 0, bad_codes = 0, scales = 0, bad_scales = 0;
            int rc = 0;
            for (size_t a = 0; a < sizeof Ns / sizeof Ns[0]; a++) {
                const long N = Ns[a], bh = 2;
                const size_t n = (size_t)bh * N * D;
                float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
                make_inputs(q, k, v, n, 7000 + (uint64_t)(N + D + had), 1);
                round_to_dtype(q, n, DT_FP16); round_to_dtype(k, n, DT_FP16);   /* the GPU reads 16-bit Q and K */
                Fp8Tensors t;
                if (fp8_quantize(q, k, v, 1, bh, N, D, had ? FP8_HADAMARD : FP8_BLOCK, &t) != 0) exit(EXIT_FAIL);
                for (int which = 0; which < 2; which++) {                        /* Q, then K */
                    const long rows = which ? FP8_KBLOCK : FP8_QBLOCK, nb = which ? t.nkb : t.nqb;
                    void *dx = dupload(which ? k : q, n, DT_FP16, which ? "K" : "Q");
                    uint8_t *d8 = dmalloc(n, "e4m3 codes"), *h8 = xmalloc(n, "e4m3 codes");
                    float *ds = dmalloc((size_t)bh * nb * 4, "scales"), *hs = xmalloc((size_t)bh * nb * 4, "scales");
                    rc |= fp8_quantize_gpu(dx, bh, N, D, rows, had, d8, ds, NULL);
                    gpu_sync_check();
                    ddownload_bytes(h8, d8, n);
                    ddownload(hs, ds, (size_t)bh * nb, DT_FP32);
                    const uint8_t *want8 = which ? t.k : t.q;
                    const float *want_s = which ? t.sk : t.sq;
                    for (size_t i = 0; i < n; i++) bad_codes += h8[i] != want8[i];
                    for (long i = 0; i < bh * nb; i++) bad_scales += memcmp(&hs[i], &want_s[i], 4) != 0;
                    codes += (long)n, scales += bh * nb;
                    dfree(dx); dfree(d8); dfree(ds); tfree(h8); tfree(hs);
                }
                fp8_free(&t);
                tfree(q); tfree(k); tfree(v);
            }
            char name[64];
            snprintf(name, sizeof name, "fp8/quantize-gpu D=%ld%s", D, had ? " Hadamard" : "");
            report(rc == 0 && bad_codes == 0 && bad_scales == 0, NULL, name, "Q and K quantized on the GPU%s (N = 1, 65, 257, "
                   "1000; outliers) against fp8_quantize: %ld of %ld codes and %ld of %ld scales differ", had ?
                   " with the rotation fused in" : "", bad_codes, codes, bad_scales, scales);
        }
}

/* Kernel kp's O against kernel kb's, bit for bit, at one shape (O in out_dt): one line, named by what. */
static void same_o(const Fp8Kernel *kp, const Fp8Kernel *kb, long B, long H, long N, long D, int causal, int out_dt,
                   uint64_t seed, const char *what, const char *why)
{
    const size_t n = (size_t)B * H * N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
    float *o[2] = {xmalloc(n * 4, "O"), xmalloc(n * 4, "O")};
    make_inputs(q, k, v, n, seed, 0);
    Fp8Tensors t;
    if (fp8_quantize(q, k, v, B, H, N, D, FP8_BLOCK, &t) != 0) exit(EXIT_FAIL);
    t.out = out_dt;
    Fp8Dev d;
    dev_upload(&t, causal, &d);
    const int ran = dev_run(kb, &d, o[0]) == 0 && dev_run(kp, &d, o[1]) == 0;
    size_t bad = 0;                               /* ==, not memcmp: a NaN (an output never written) equals nothing */
    for (size_t i = 0; ran && i < n; i++) bad += !(o[0][i] == o[1][i]);
    char name[160];
    snprintf(name, sizeof name, "kernel%d fp8 %s B=%ld H=%ld N=%ld D=%ld%s%s vs kernel %d", kp->id, what, B, H, N, D,
             causal ? " causal" : "", out_dt == DT_BF16 ? " bf16-out" : "", kb->id);
    report(ran && bad == 0, NULL, name, "%s: O bit-identical to kernel %d's (%zu of %zu values differ)", why, kb->id, bad, n);
    dev_free(&d);
    fp8_free(&t);
    tfree(q); tfree(k); tfree(v); tfree(o[0]); tfree(o[1]);
}

/* A persistent FP8 kernel (.persistent) computes what the kernel it extends computes (or .persistent_of, where its
 * tiles are another rung's), only with one block per SM walking the work items: at a shape of more items than an
 * H100's or H200's SMs (B = 4, H = 16, N = 1000 at D = 128: 512 row tiles; H = 32 at D = 64: 768), where each block
 * takes several items one after the other, its O must equal that kernel's bit for bit (the check grid's shapes have
 * fewer items than an SM count and never give a block a second one). One persistent only where rows are short
 * and with code of its own past that (.long_rows_of: kernel 48's store on kernel 30's grid) must equal there the
 * kernel whose grid and tiles it takes: at N = 4097, past every such limit (the check grid's N stop at 1025), O in bf16
 * when causal (both of O's stores on that path). Kernels 45-47 launch kernel 30's own code past their limits, checked
 * as kernel 30. */
static void persistent_checks(long only)
{
    for (int x = 0; x < fp8_count(); x++) {
        const Fp8Kernel *kp = fp8_at(x), *kb = fp8_kernel(kp->persistent_of ? kp->persistent_of : kp->extends);
        const Fp8Kernel *kl = kp->long_rows_of ? fp8_kernel(kp->long_rows_of) : NULL;
        if (!kp->persistent || !kb || (only && only != kp->id)) continue;
        for (long D = 64; D <= 128; D *= 2)
            for (int causal = 0; causal < 2; causal++) {
                same_o(kp, kb, 4, D == 64 ? 32 : 16, 1000, D, causal, DT_FP16, 6400 + (uint64_t)(D + causal), "persistent",
                       "one block per SM, several work items each");
                if (kl)
                    same_o(kp, kl, 1, 4, 4097, D, causal, causal ? DT_BF16 : DT_FP16, 6500 + (uint64_t)(D + causal),
                           "long rows", "past the rows where it is persistent");
            }
    }
}

static void fp8_gpu_checks(long only)
{
    const char *why = fp8_unavailable();
    if (why) { report_skip("fp8-kernels", "%s", why); return; }
    check_quantize_gpu();
    /* The forward's N (CHECK_NS) at FP8's two head dims. Not the runner's check_grid: one dtype, FP8's own, whose
     * availability the line above said once for every kernel. */
    static const long Ns[] = CHECK_NS;
    for (int di = 0; di < 2; di++)
        for (size_t a = 0; a < sizeof Ns / sizeof Ns[0]; a++)
            for (int causal = 0; causal < 2; causal++)
                check_gpu_problem(only, 1, 3, Ns[a], di ? 128 : 64, causal, FP8_BLOCK, 0, DT_FP16,
                                  6000 + (uint64_t)(Ns[a] * 4 + di * 2 + causal), 0);
    for (int di = 0; di < 2; di++)                        /* the other scalings, and outliers, at one shape */
        for (int mi = 0; mi < 3; mi++)
            check_gpu_problem(only, 2, 2, 257, di ? 128 : 64, mi == 1, (Fp8Mode)mi, 1, DT_FP16, 6100 + (uint64_t)(di * 3 + mi), 0);
    static const long Nb[] = {65, 1000};                  /* O in bf16 */
    for (int di = 0; di < 2; di++)
        for (size_t a = 0; a < sizeof Nb / sizeof Nb[0]; a++)
            for (int causal = 0; causal < 2; causal++)
                check_gpu_problem(only, 1, 3, Nb[a], di ? 128 : 64, causal, FP8_BLOCK, 0, DT_BF16,
                                  6200 + (uint64_t)(Nb[a] + di * 2 + causal), 0);
    for (int di = 0; di < 2; di++)                        /* each block of Q and K at its own amplitude (vary_blocks) */
        for (int causal = 0; causal < 2; causal++)
            check_gpu_problem(only, 1, 2, 1000, di ? 128 : 64, causal, FP8_BLOCK, 0, DT_FP16, 6300 + (uint64_t)(di * 2 + causal), 1);
    persistent_checks(only);
}

/* --- the benchmark: FlashAttention's shapes, the FP8 kernels against the best 16-bit kernel ------------ */

typedef struct { const Fp8Kernel *k; const Fp8Dev *d; } Fp8Ctx;
static void run_fp8(void *ctx) { const Fp8Ctx *c = ctx; (void)c->k->launch(&c->d->a, NULL); }
typedef struct { const FusedKernel *k; void *q, *kk, *v, *o; long B, H, N, D; int causal; } F16Ctx;
static void run_f16(void *ctx)
{
    const F16Ctx *c = ctx;
    (void)c->k->launch(c->q, c->kk, c->v, c->o, c->B, c->H, c->N, c->D, DT_FP16, c->causal, NULL);
}

/* The selected FP8 kernels (on d, already uploaded) and kernel FP8_PEER in fp16 (on q, k, v, the same inputs before
 * quantizing) on one shape, interleaved; tf[0 .. nk) the FP8 kernels' TFLOP/s, tf[nk] the fp16 kernel's (0 where one
 * did not run), ms the same in milliseconds. */
static int time_shape(const Opts *o, const float *q, const float *k, const float *v, const Fp8Dev *d, const Fp8Kernel **ks,
                      int nk, double *tf, double *ms)
{
    const long B = d->a.B, H = d->a.H, N = d->a.N, D = d->a.D;
    const FusedKernel *k16 = fused_kernel(FP8_PEER);
    F16Ctx f = {k16, dupload(q, d->n, DT_FP16, "Q"), dupload(k, d->n, DT_FP16, "K"), dupload(v, d->n, DT_FP16, "V"),
                dmalloc(d->n * 2, "O"), B, H, N, D, o->causal};
    Fp8Ctx c[MAX_KERNELS];
    void (*fns[MAX_KERNELS + 1])(void *);
    void *ctxs[MAX_KERNELS + 1];
    int m = 0, ok = 1;
    for (int x = 0; x < nk; x++) {
        c[x].k = ks[x], c[x].d = d;
        fns[m] = run_fp8, ctxs[m++] = &c[x];
        ok &= ks[x]->launch(&d->a, NULL) == 0;
    }
    const int have16 = k16 && !FUSED_UNAVAILABLE(k16) && k16->launch(f.q, f.kk, f.v, f.o, B, H, N, D, DT_FP16, o->causal, NULL) == 0;
    if (have16) fns[m] = run_f16, ctxs[m++] = &f;
    gpu_sync_check();
    double t_ms[MAX_KERNELS + 1] = {0};
    if (ok) gpu_time_interleaved_ms((void (*const *)(void *))fns, (void *const *)ctxs, m, 3, (int)o->repeat, t_ms);
    const double fl = 4.0 * B * H * (double)N * N * D / (o->causal ? 2 : 1);
    for (int x = 0; x <= nk; x++) { tf[x] = 0; ms[x] = 0; }
    for (int x = 0; x < nk && ok; x++) ms[x] = t_ms[x], tf[x] = fl / t_ms[x] / 1e9;
    if (have16 && ok) ms[nk] = t_ms[m - 1], tf[nk] = fl / t_ms[m - 1] / 1e9;
    dfree(f.q); dfree(f.kk); dfree(f.v); dfree(f.o);
    return ok ? 0 : -1;
}

typedef struct { const void *q, *k; uint8_t *x8; float *s; long bh, N, D; int had; } QuantCtx;
static void run_quant(void *ctx)                          /* Q and K, as a model's layer would before attention */
{
    const QuantCtx *c = ctx;
    (void)fp8_quantize_gpu(c->q, c->bh, c->N, c->D, FP8_QBLOCK, c->had, c->x8, c->s, NULL);
    (void)fp8_quantize_gpu(c->k, c->bh, c->N, c->D, FP8_KBLOCK, c->had, c->x8 + (size_t)c->bh * c->N * c->D, c->s, NULL);
}

static int select_kernels(const Opts *o, const Fp8Kernel **ks)
{
    int nk = 0;
    for (int x = 0; x < fp8_count(); x++)
        if (fp8_selected(o->kernel, o->kernel_last, fp8_at(x)->id)) ks[nk++] = fp8_at(x);
    return nk;
}

static int fp8_bench(const Opts *o, FILE *csv)
{
    const char *why = fp8_unavailable();
    if (why) { printf("step05 --dtype fp8 --bench: %s\n", why); return EXIT_SKIP; }
    const Fp8Kernel *ks[MAX_KERNELS];
    const int nk = select_kernels(o, ks);
    printf("step05 --dtype fp8 --bench%s: batch = 16384/N, heads = 2048/D, TFLOP/s = %s*B*H*N*N*D / time (median of %ld "
           "runs, the kernels of a shape interleaved run by run)\ndevice: %s\n", o->causal ? " --causal" : "",
           o->causal ? "2" : "4", o->repeat, gpu_describe());
    double gms = -1, gms8 = -1;
    const double c16 = gemm_ceiling_tflops(DT_FP16, 8192, (int)o->repeat, &gms);
    const double c8 = gemm_ceiling_fp8_tflops(8192, (int)o->repeat, &gms8);
    printf("matrix-product ceilings: cuBLAS GEMM 8192^3, fp16 in, fp32 accumulate: %.1f TFLOP/s; cublasLt, e4m3 in, fp32 "
           "accumulate (fast), fp16 out: %.1f TFLOP/s\n", c16, c8);
    csv_row8(csv, "ceiling", "fp16", -1, "cuBLAS GEMM", 1, 1, 8192, 8192, gms, &c16);
    csv_row8(csv, "ceiling", "fp8", -1, "cublasLt GEMM", 1, 1, 8192, 8192, gms8, &c8);
    printf("quantize: Q and K from fp16 to e4m3 with per-block scales on the GPU (fp8_quantize_gpu), as a layer would "
           "before attention, without and with the Walsh-Hadamard rotation fused in;\n\"+ quantize\": the best FP8 kernel's "
           "TFLOP/s counting that time too, per block / per block + Hadamard\n");
    printf("%-5s %-6s", "D", "N");
    for (int x = 0; x < nk; x++) printf(" kernel %-2d fp8   ", ks[x]->id);
    printf(" kernel %-2d fp16   best fp8/fp16  + quantize (block / Hadamard)\n", FP8_PEER);
    for (long D = 64; D <= 128; D *= 2) {
        if ((o->given & OPT_GIVEN_DIM) && D != o->D) continue; /* --dim: that D only */
        const long qbh = 2048 / D * 16384 / 8192, qN = 8192;     /* B*H*N*D of every bench shape: the same bytes */
        const size_t nq = (size_t)qbh * qN * D;
        float *hq = xmalloc(nq * 4, "Q for the quantizer's timing"), *hk = xmalloc(nq * 4, "K"), *hv = xmalloc(nq * 4, "V");
        make_qkv(hq, hk, hv, nq, o->seed + 1);
        QuantCtx qc = {dupload(hq, nq, DT_FP16, "Q"), dupload(hk, nq, DT_FP16, "K"), dmalloc(2 * nq, "e4m3 Q and K"),
                       dmalloc((size_t)qbh * (qN / FP8_QBLOCK) * 4, "scales"), qbh, qN, D, 0};
        tfree(hq); tfree(hk); tfree(hv);
        const double qb_ms = gpu_time_median_ms(run_quant, &qc, 2, (int)o->repeat);
        qc.had = 1;
        const double qh_ms = gpu_time_median_ms(run_quant, &qc, 2, (int)o->repeat);
        dfree((void *)qc.q); dfree((void *)qc.k); dfree(qc.x8); dfree(qc.s);
        for (long N = BENCH_N0; N <= bench_n_last(o); N *= 2) {
            const long B = 16384 / N, H = 2048 / D;
            const size_t n = (size_t)B * H * N * D;
            float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
            make_qkv(q, k, v, n, o->seed + (uint64_t)N);
            Fp8Tensors t;
            if (fp8_quantize(q, k, v, B, H, N, D, FP8_BLOCK, &t) != 0) return EXIT_FAIL;
            Fp8Dev d;
            dev_upload(&t, o->causal, &d);
            fp8_free(&t);
            double tf[MAX_KERNELS + 1], ms[MAX_KERNELS + 1];
            const int trc = time_shape(o, q, k, v, &d, ks, nk, tf, ms);
            dev_free(&d);
            tfree(q); tfree(k); tfree(v);
            if (trc != 0) return EXIT_FAIL;
            double best = 0, best_ms = 0;
            printf("%-5ld %-6ld", D, N);
            for (int x = 0; x < nk; x++) {
                printf(" %-16.1f", tf[x]);
                if (tf[x] > best) best = tf[x], best_ms = ms[x];
            }
            printf(" %-16.1f %-14.2f %.1f / %.1f (%.3f / %.3f ms)\n", tf[nk], tf[nk] > 0 ? best / tf[nk] : 0,
                   best_ms > 0 ? best * best_ms / (best_ms + qb_ms) : 0, best_ms > 0 ? best * best_ms / (best_ms + qh_ms) : 0,
                   qb_ms, qh_ms);
            char name[96];
            for (int x = 0; x < nk; x++) {
                snprintf(name, sizeof name, "kernel %d %s", ks[x]->id, ks[x]->name);
                csv_row8(csv, "bench", "fp8", ks[x]->id, name, B, H, N, D, ms[x], &tf[x]);
            }
            snprintf(name, sizeof name, "kernel %d fp16", FP8_PEER);
            csv_row8(csv, "bench", "fp16", FP8_PEER, name, B, H, N, D, ms[nk], &tf[nk]);
            csv_row8(csv, "quantize", "fp8", -2, "quantize Q and K per block", B, H, N, D, qb_ms, NULL);
            csv_row8(csv, "quantize", "fp8", -3, "quantize Q and K per block + Hadamard", B, H, N, D, qh_ms, NULL);
        }
    }
    return EXIT_OK;
}

/* make sanitize at one shape: each selected FP8 kernel that `which` admits (0: every one; 1: the persistent ones; 2: those
 * with code of their own past their persistent rows, .long_rows_of) runs once, a "ran kernel" line each. */
static int sanitize_at(long lo, long hi, int which, long B, long H, long N, long D, int causal, int out_dt, uint64_t seed,
                       const char *what)
{
#define ADMITS(k) ((which == 0 || (which == 1 && (k)->persistent) || (which == 2 && (k)->long_rows_of)) && \
                   fp8_selected(lo, hi, (k)->id))
    int any = 0;
    for (int x = 0; x < fp8_count(); x++) any |= ADMITS(fp8_at(x));
    if (!any) return EXIT_OK;
    const size_t n = (size_t)B * H * N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V"), *out = xmalloc(n * 4, "O");
    make_qkv(q, k, v, n, seed);
    Fp8Tensors t;
    if (fp8_quantize(q, k, v, B, H, N, D, FP8_BLOCK, &t) != 0) return EXIT_FAIL;
    t.out = out_dt;
    Fp8Dev d;
    dev_upload(&t, causal, &d);
    for (int x = 0; x < fp8_count(); x++) {
        const Fp8Kernel *kx = fp8_at(x);
        if (!ADMITS(kx)) continue;
        if (dev_run(kx, &d, out) != 0) return EXIT_FAIL;
        printf("ran kernel %d fp8 B=%ld H=%ld N=%ld D=%ld%s%s%s\n", kx->id, B, H, N, D, causal ? " causal" : "",
               out_dt == DT_BF16 ? ", O in bf16" : "", what);
    }
    dev_free(&d);
    fp8_free(&t);
    tfree(q); tfree(k); tfree(v); tfree(out);
    return EXIT_OK;
#undef ADMITS
}

/* make sanitize: each FP8 kernel once at N = 65 and 257, D = 64 and 128, causal (O in bf16) and not (fp16); each
 * persistent one where its blocks walk several items (B = 2, H = 16, N = 1000: 192 or 256 of them); each with code of
 * its own past its persistent rows there (N = 4097, O in bf16 when causal); the quantizer. */
static int fp8_sanitize(long lo, long hi)
{
    const char *why = fp8_unavailable();
    if (why) { printf("%s\n", why); return EXIT_OK; }
    for (long D = 64; D <= 128; D *= 2)
        for (int causal = 0; causal < 2; causal++) {
            const int out_dt = causal ? DT_BF16 : DT_FP16;          /* both of O's stores */
            for (long N = 65; N <= 257; N += 192)
                if (sanitize_at(lo, hi, 0, 1, 2, N, D, causal, out_dt, 11, "") != EXIT_OK) return EXIT_FAIL;
            if (sanitize_at(lo, hi, 1, 2, 16, 1000, D, causal, DT_FP16, 13, " (persistent, several items a block)") != EXIT_OK ||
                sanitize_at(lo, hi, 2, 1, 2, 4097, D, causal, out_dt, 13, " (past its persistent rows)") != EXIT_OK)
                return EXIT_FAIL;
        }
    for (long D = 64; D <= 128; D *= 2)                    /* the quantizer: a partial block at N = 65, both modes */
        for (int had = 0; had < 2; had++) {
            const long N = 65;
            const size_t n = (size_t)2 * N * D;
            float *x = xmalloc(n * 4, "Q");
            Rng r;
            rng_seed(&r, 12);
            fill_normal(x, n, &r);
            void *dx = dupload(x, n, DT_FP16, "Q");
            uint8_t *d8 = dmalloc(n, "e4m3 codes");
            float *ds = dmalloc(2 * 2 * 4, "scales");
            for (long rows = FP8_QBLOCK; rows <= FP8_KBLOCK; rows *= 2) {
                if (fp8_quantize_gpu(dx, 2, N, D, rows, had, d8, ds, NULL) != 0) return EXIT_FAIL;
                gpu_sync_check();
                printf("ran fp8_quantize_gpu N=%ld D=%ld rows=%ld%s\n", N, D, rows, had ? " Hadamard" : "");
            }
            dfree(dx); dfree(d8); dfree(ds);
            tfree(x);
        }
    return EXIT_OK;
}
#endif

/* ------------------------------------------------------------ ./step05 --dtype fp8 */

void fp8_checks(long only)
{
    fp8_cpu_checks();
#ifdef HAVE_CUDA
    if (gpu_available()) { fp8_gpu_checks(only); return; }
#else
    (void)only;
#endif
    report_skip("fp8-kernels", "no CUDA device (or no CUDA in this build): the FP8 kernels' checks need one; the CPU half ran");
}

#ifdef HAVE_CUDA
/* The default run: one shape (--batch --heads --seq --dim), each FP8 kernel checked on sampled rows of every
 * head against float64 (tolerance: twice naive FP8's error on the same rows), then all timed, interleaved, beside
 * kernel FP8_PEER in fp16. */
static int fp8_default(const Opts *o, FILE *csv)
{
    const long B = o->B, H = o->H, N = o->N, D = o->D, bh = B * H;
    const size_t n = (size_t)bh * N * D;
    printf("step05 --dtype fp8: the FP8 kernels (Q, K, V in e4m3, per-block scales) vs float64 and vs kernel %d in fp16, "
           "B=%ld H=%ld N=%ld D=%ld%s\ndevice: %s\n", FP8_PEER, B, H, N, D, o->causal ? ", causal" : "", gpu_describe());
    const char *why = fp8_unavailable();
    if (why) { printf("%s\n", why); return EXIT_SKIP; }
    const Fp8Kernel *ks[MAX_KERNELS];
    const int nk = select_kernels(o, ks);
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V"), *out = xmalloc(n * 4, "O");
    make_qkv(q, k, v, n, o->seed);
    Fp8Tensors t;
    if (fp8_quantize(q, k, v, B, H, N, D, FP8_BLOCK, &t) != 0) return EXIT_FAIL;
    enum { NR = 24 };                                         /* rows 0, 1, N/2, N-1 and 20 drawn from the seed */
    long rows[NR];
    Rng r;
    rng_seed(&r, o->seed + 99);
    for (int i = 0; i < NR; i++) rows[i] = i == 0 ? 0 : i == 1 ? (N > 1) : i == 2 ? N / 2 : i == 3 ? N - 1 : (long)(rng_uniform(&r) * N);
    float *nv = xmalloc((size_t)bh * NR * D * 4, "naive rows"), *got = xmalloc((size_t)bh * NR * D * 4, "kernel rows");
    double *ref = xmalloc((size_t)bh * NR * D * 8, "reference rows"), *scr = xmalloc((size_t)N * 8, "scratch");
    fp8_naive_rows(&t, o->causal, rows, NR, nv);
    for (long h = 0; h < bh; h++)
        for (int i = 0; i < NR; i++) {
            const size_t off = (size_t)h * N * D;
            ref_attention_row(q + off, k + off, v + off, N, D, o->causal, rows[i], scr, ref + ((size_t)h * NR + i) * D);
        }
    double nmax, nrms;
    err_of(nv, ref, (size_t)bh * NR * D, &nmax, &nrms);
    const double tol = tol_fp8(nmax);
    Fp8Dev d;
    dev_upload(&t, o->causal, &d);
    int ok = 1;
    for (int x = 0; x < nk; x++) {
        char desc[200], eb[128];
        ks[x]->describe(D, desc, sizeof desc);
        if (dev_run(ks[x], &d, out) != 0) return EXIT_FAIL;
        for (long h = 0; h < bh; h++)
            for (int i = 0; i < NR; i++)
                memcpy(got + ((size_t)h * NR + i) * D, out + (size_t)h * N * D + (size_t)rows[i] * D, (size_t)D * 4);
        const Err e = compare(got, ref, (size_t)bh * NR * D, tol, 0);
        const int good = e.n_bad == 0 && e.max_abs <= tol;
        ok &= good;
        printf("kernel %d (%s): %s\n  check (%d rows of each head against float64): %s; naive fp8 %.2e on the same rows, "
               "tol %.2e: %s\n", ks[x]->id, ks[x]->name, desc, NR, fmt_err(&e, eb, sizeof eb), nmax, tol, good ? "ok" : "WRONG");
    }
    double tf[MAX_KERNELS + 1], ms[MAX_KERNELS + 1];
    const int trc = time_shape(o, q, k, v, &d, ks, nk, tf, ms);   /* the inputs just checked */
    dev_free(&d);
    fp8_free(&t);
    tfree(q); tfree(k); tfree(v); tfree(out); tfree(nv); tfree(got); tfree(ref); tfree(scr);
    if (trc != 0) return EXIT_FAIL;
    char name[96];
    for (int x = 0; x < nk; x++) {
        printf("kernel %d fp8: %.3f ms, %.1f TFLOP/s", ks[x]->id, ms[x], tf[x]);
        if (tf[nk] > 0) printf(" (%.2fx kernel %d in fp16)", tf[x] / tf[nk], FP8_PEER);
        printf("\n");
        snprintf(name, sizeof name, "kernel %d %s", ks[x]->id, ks[x]->name);
        csv_row8(csv, "default", "fp8", ks[x]->id, name, B, H, N, D, ms[x], &tf[x]);
    }
    if (tf[nk] > 0) {
        printf("kernel %d fp16: %.3f ms, %.1f TFLOP/s (median of %ld, interleaved, on the same inputs)\n", FP8_PEER, ms[nk],
               tf[nk], o->repeat);
        snprintf(name, sizeof name, "kernel %d fp16", FP8_PEER);
        csv_row8(csv, "default", "fp16", FP8_PEER, name, B, H, N, D, ms[nk], &tf[nk]);
    }
    return ok ? EXIT_OK : EXIT_FAIL;
}
#endif

#ifdef HAVE_CUDA
/* The GPU half of --dtype fp8 on the reader's tensors: the FP8 kernels on them, quantised in `scaling` as the CPU
 * loop was, each against float64 over every element (tolerance: twice naive FP8's error on the same e4m3
 * tensors, the checks' rule) and beside the loop they transcribe. keep (may be NULL): O of the last kernel that
 * ran. Returns 1 if every kernel that ran was within the tolerance; *ran gets how many ran. */
static int fp8_files_gpu(const Opts *o, const float *q, const float *k, const float *v, int scaling, float *keep, int *ran)
{
    const long B = o->B, H = o->H, N = o->N, D = o->D;
    const size_t n = (size_t)B * H * N * D;
    *ran = 0;
    const char *why = fp8_unavailable();
    char who[256];
    if (why) { printf("%s SKIP on this GPU: %s\n", fp8_who(0, who, sizeof who), why); return 1; }
    gpu_refusals_quiet(1); /* a refused launch: a SKIP line below */
    double *ref = xmalloc(n * 8, "reference");
    float *nv = xmalloc(n * 4, "naive fp8 O"), *cpu = xmalloc(n * 4, "the loop's O"), *out = xmalloc(n * 4, "O");
    ref_attention(q, k, v, B * H, N, D, o->causal, ref);
    Fp8Tensors t;
    if (fp8_quantize(q, k, v, B, H, N, D, (Fp8Mode)scaling, &t) != 0) exit(EXIT_FAIL);
    fp8_naive_cpu(&t, o->causal, nv);
    fp8_flash_cpu(&t, o->causal, cpu);
    double nmax, nrms, cmax, crms;
    err_of(nv, ref, n, &nmax, &nrms);
    err_of(cpu, ref, n, &cmax, &crms);
    const double tol = tol_fp8(nmax);
    printf("on the GPU, %s scaling, every element against float64 (tolerance: twice naive FP8's %.2e, %.2e):\n"
           "  the CPU loop               RMS %.2e  max abs %.2e\n", fp8_mode_name((Fp8Mode)scaling), nmax, tol, crms, cmax);
    Fp8Dev d;
    dev_upload(&t, o->causal, &d);
    int ok = 1;
    for (int x = 0; x < fp8_count(); x++) {
        const Fp8Kernel *kn = fp8_at(x);
        if (dev_run(kn, &d, out) != 0) { printf("  kernel %d %-17s SKIP: %s\n", kn->id, kn->name, gpu_last_refusal()); continue; }
        const Err e = compare(out, ref, n, tol, 0);
        double kmax, krms;
        err_of(out, ref, n, &kmax, &krms);
        const int good = e.n_bad == 0 && e.max_abs <= tol;
        ok &= good;
        printf("  kernel %d %-17s RMS %.2e  max abs %.2e  %s\n", kn->id, kn->name, krms, kmax, good ? "ok" : "WRONG");
        if (keep) memcpy(keep, out, n * 4);
        (*ran)++;
    }
    dev_free(&d);
    fp8_free(&t);
    tfree(ref); tfree(nv); tfree(cpu); tfree(out);
    return ok;
}
#endif

/* --dtype fp8 --q --k --v FILE.npy: FP8's error on the reader's own tensors, the error table's columns for them
 * (fp16 storage; the loop that the FP8 kernels transcribe, fp8_flash_cpu, in each scaling) against float64, on the
 * CPU, so that a laptop reader sees where their activations' outliers put FP8; where a GPU runs them, the FP8
 * kernels on the same tensors (fp8_files_gpu). --out writes O (float32 [B, H, N, D]) of the last kernel that ran,
 * or of the CPU loop in --scaling's run. O(N^2 D) per head five times over: a few seconds at N = 1024. */
static int fp8_files(const Opts *o, int scaling, int print)
{
    float *q, *k, *v;
    Opts in = *o;
    inputs_load_or_make(&in, &q, &k, &v);                      /* exits 2 on a NaN or inf, naming the file */
    const size_t n = (size_t)o->B * o->H * o->N * o->D;
    float *out = o->outfile ? xmalloc(n * 4, "O") : NULL;
    char who[256];
    fp8_who(0, who, sizeof who);
    if (print)
        printf("step05 --dtype fp8 on --q %s --k %s --v %s: [B, H, N, D] = [%ld, %ld, %ld, %ld]%s; the CPU loop that "
               "%s transcribe (fp8_flash_cpu), in each scaling, against float64\n", o->qfile, o->kfile, o->vfile,
               o->B, o->H, o->N, o->D, o->causal ? ", causal" : "", who);
    const ErrRow r = errors_of(q, k, v, o->B, o->H, o->N, o->D, o->causal, scaling, out);
    char c[4][32];
    snprintf(c[0], 32, "%.2e (%.1e)", r.fp16_rms, r.fp16_max);
    for (int m = 0; m < 3; m++) snprintf(c[m + 1], 32, "%.2e (%.1e)", r.rms[m], r.max[m]);
    int best = 0;
    for (int m = 1; m < 3; m++) best = r.rms[m] < r.rms[best] ? m : best;
    if (print) {
        printf("%-8s %-19s %-19s %-19s %-19s\n", "max|s|", "fp16 storage", "fp8 per-tensor", "fp8 per-block",
               "fp8 block+Hadamard");
        printf("%-8.1f %-19s %-19s %-19s %-19s\n(RMS error, max abs in parentheses; max|s|: the largest score a row sees)\n",
               r.max_score, c[0], c[1], c[2], c[3]);
        printf("answer: on these tensors FP8 (%s scaling) has %.1fx fp16 storage's RMS error; the smallest of the three "
               "scalings here is %s (%.2e)\n", fp8_mode_name((Fp8Mode)scaling), r.rms[scaling] / r.fp16_rms,
               fp8_mode_name((Fp8Mode)best), r.rms[best]);
    }
    int rc = EXIT_OK, ran = 0;
#ifdef HAVE_CUDA
    if (print && gpu_available() && !fp8_files_gpu(o, q, k, v, scaling, out, &ran)) rc = EXIT_FAIL;
#endif
    if (out) {
        const long shp[4] = {o->B, o->H, o->N, o->D};
        if (npy_save(o->outfile, out, shp, 4, DT_FP32) != 0) {
            fprintf(stderr, "step05: cannot write %s\n", o->outfile);
            rc = EXIT_FAIL;
        } else if (print) {
            printf("wrote O of %s (%s scaling) to %s (float32 [%ld, %ld, %ld, %ld])\n", ran ? "the last FP8 kernel that ran"
                   : "the CPU loop", fp8_mode_name((Fp8Mode)scaling), o->outfile, o->B, o->H, o->N, o->D);
        }
    }
    if (print && !ran) printf("(%s run on these tensors where a Hopper GPU is: sm_90a)\n", who);
    tfree(q); tfree(k); tfree(v); tfree(out);
    return rc;
}

int fp8_main(const Opts *o, int bench, int errors, int sanitize, int scaling)
{
    if (o->qfile) return fp8_files(o, scaling, 1);
    if (o->check) {
        fp8_checks(o->kernel);
        return report_finish();
    }
    if (errors) {                                             /* the CPU's table: no GPU needed */
        FILE *csv = o->csv ? csv_open(o->csv, FP8_ERRORS_CSV_HEADER) : NULL;
        error_table(2, 1024, 1, csv);
        if (csv) fclose(csv);
        return EXIT_OK;
    }
    if (!sanitize && !gpu_available()) {
        char who[256];
        printf("step05 --dtype fp8 runs %s on an H100 (sm_90a); this machine has no usable GPU. What runs here: "
               "./step05 --dtype fp8 --errors (the error table) and --check (the CPU half).\n",
               kernel_ids_phrase(FAM_FP8, 0, " and ", who, sizeof who));
    }
    gpu_require();
#ifdef HAVE_CUDA
    if (sanitize) return fp8_sanitize(o->kernel, o->kernel_last);
    FILE *csv = o->csv ? csv_open(o->csv, FP8_CSV_HEADER) : NULL;
    const int rc = bench ? fp8_bench(o, csv) : fp8_default(o, csv);
    if (csv) fclose(csv);
    return rc;
#else
    (void)bench;
    return EXIT_SKIP;
#endif
}
