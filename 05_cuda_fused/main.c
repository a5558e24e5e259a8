/*
 * step05: the fused CUDA kernels (book Step 7's "production CUDA version",
 * built up), each checked against the float64 reference and timed against
 * naive attention on the same GPU.
 *
 * What it adds over step 04: the tiled forward runs on the GPU as ONE kernel
 * (scores, softmax and P V fused; S and P never exist in device memory).
 * The kernels are numbered, one file each (kernelNN_*.cu), each adding one
 * idea over the previous one, and register themselves in kernels.h's
 * registry: kernel 1 transcribes step 04's loop (one thread per row), kernel
 * 2 shares K/V tiles through shared memory, kernels 3+ use the tensor cores.
 *
 * Run:   make step05 && ./step05              (every kernel at B=2 H=8 N=4096 D=64, fp32)
 *        ./step05 --dtype fp16                (the tensor-core kernels, fp16)
 *        ./step05 --check                     (the self-test grid; exit 77 without a GPU)
 *        ./step05 --bench --dtype fp16        (FlashAttention's benchmark shapes)
 *        ./step05 --backward --dtype fp16     (the backward kernels vs the naive cuBLAS backward)
 *        ./step05 --bench --backward --dtype fp16
 * Expect (last lines):
 *        kernel 2 (smem tiles) ... TFLOP/s ... x naive
 *        answer: the fused kernel ... naive ...
 * Limits: needs an NVIDIA GPU (sm_75 or newer; what each family runs: the root README, "Which GPU runs what") and nvcc at build time;
 *        fp32 kernels take D in 8..128 (multiples of 8; kernel 2: of 16),
 *        the fp16/bf16 kernels D = 64 or 128. The backward (backward.c,
 *        bwdN_*.cu): fp32 D in 16..128 (multiples of 16), fp16/bf16 D = 64, 128.
 * Files: this one, the forward's checks, run and benchmark; backward.c the
 *        backward's; alibi.c the kernels with a score modifier (--alibi);
 *        driver.c the plumbing the three share (the problem on the device,
 *        the reference's rows, --kernel, the tables and the CSV).
 */
#include "common.h"
#include "gpu.h"
#include "kernels.h"
#include "host/backward.h"
#include "host/driver.h"
#include "host/alibi.h"
#include "host/decode.h"
#include "fp8/fp8.h"
#include "../01_naive/naive.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA

// --- timing ----------------------------------------------------------------------------

typedef struct { const FusedKernel *kn; Problem *p; void *S, *P; } TimeCtx;
static void time_fn(void *ctx)
{
    TimeCtx *t = ctx;
    Problem *p = t->p;
    if (t->kn)
        t->kn->launch(p->Q, p->K, p->V, p->O, p->B, p->H, p->N, p->D, p->dtype, p->causal, NULL);
    else
        naive_attention_gpu_ws(p->Q, p->K, p->V, p->O, p->B, p->H, p->N, p->D, p->dtype, p->causal, t->S, t->P, NULL);
}

static double flops(const Problem *p) { return attn_flops(p->B, p->H, p->N, p->D, p->causal); }

/* Median ms of the kernel (naive: with S and P allocated outside the timed
 * region, as a caching allocator gives them). Returns -1 if naive's S and P
 * do not fit; *peak gets the tracked device peak while it ran. */
static double time_one(const FusedKernel *kn, Problem *p, int repeat, size_t *peak)
{
    TimeCtx t = {kn, p, NULL, NULL};
    dmem_reset_peak();
    if (!kn && naive_buffers(p, &t.S, &t.P) != 0) return -1;
    double ms = gpu_time_median_ms(time_fn, &t, 2, repeat);
    if (peak) *peak = dmem_peak();
    dfree(t.S); dfree(t.P);
    return ms;
}

/* The bench's timer: methods kns[0..n-1] (NULL = naive) on one problem, timed against each other
 * (gpu_time_interleaved_ms: two warm-ups each, then `repeat` rounds in which each method runs once), the
 * median per method into ms[] (-1: naive's S and P do not fit). Timed one method after the other, the same
 * code came out 10% apart at N = 8192 on the H100 (kernel 8 is kernel 7 at D = 128); interleaved, the two
 * agree within 0.3%. */
static void time_interleaved(const FusedKernel *const *kns, int n, Problem *p, int repeat, double *ms)
{
    void *S, *P;
    naive_buffers(p, &S, &P);
    TimeCtx *c = xmalloc((size_t)n * sizeof *c, "bench contexts");
    void (**fns)(void *) = xmalloc((size_t)n * sizeof *fns, "bench methods");
    void **ctx = xmalloc((size_t)n * sizeof *ctx, "bench contexts");
    double *t = xmalloc((size_t)n * sizeof *t, "bench times");
    int m = 0;
    for (int r = 0; r < n; r++)
        if (kns[r] || P) { c[m] = (TimeCtx){kns[r], p, S, P}; fns[m] = time_fn; ctx[m] = &c[m]; m++; }
    gpu_time_interleaved_ms(fns, ctx, m, 2, repeat, t);
    for (int r = 0, k = 0; r < n; r++) ms[r] = kns[r] || P ? t[k++] : -1;
    tfree(c); tfree(fns); tfree(ctx); tfree(t);
    dfree(S);
    dfree(P);
}

// --- the checks ---------------------------------------------------------------------

/* Kernel 18 runs kernel 14's arithmetic on every row tile, only scheduled otherwise: one block per SM, each taking
 * several row tiles from a counter. At a shape with more row tiles than the GPU has SMs (B = 4, H = 16, N = 1000:
 * 512 row tiles of 128 rows) its blocks take several each, one after the other, so its O and L must equal kernel
 * 14's bit for bit; the grid above (at most 54 row tiles) never gives a block a second one. Kernel 19 (kernel 18
 * storing O otherwise), kernel 20 (19 starting the next row tile early), 21 (20 skipping zeros), 22 and 23 (21 with
 * fewer instructions) the same. */
enum { PERSIST_FIRST = 18, PERSIST_LAST = 23 }; /* the persistent kernels, overlap.cuh with PERSIST: 18-23 */

static void persistent_check(int id)
{
    const FusedKernel *k14 = fused_kernel(14), *kp = fused_kernel(id);
    char name[160];
    if (!k14 || !kp || FUSED_UNAVAILABLE(kp)) return; /* off Hopper: the grid's line said so */
    for (int dt = DT_FP16; dt <= DT_BF16; dt++)
        for (long D = 64; D <= 128; D += 64)
            for (int causal = 0; causal < 2; causal++) {
                Problem p;
                problem_make(&p, 4, 16, 1000, D, dt, causal, 1800 + D + causal, NULL);
                const size_t nl = (size_t)p.B * p.H * p.N;
                float *L = dmalloc(nl * sizeof(float), "L");
                float *o[2], *l[2];
                const FusedKernel *kn[2] = {k14, kp};
                int ran = 1;
                for (int x = 0; x < 2; x++) {
                    o[x] = xmalloc(p.n * 4, "O");
                    l[x] = xmalloc(nl * 4, "L");
                    dpoison(p.O, p.n, dt);
                    dpoison(L, nl, DT_FP32);
                    ran &= kn[x]->launch_l(p.Q, p.K, p.V, p.O, L, p.B, p.H, p.N, D, dt, causal, NULL) == 0;
                    gpu_sync_check();
                    ddownload(o[x], p.O, p.n, dt);
                    ddownload(l[x], L, nl, DT_FP32);
                }
                size_t bad = 0; /* not memcmp: it calls two NaNs (an unwritten, poisoned value) equal; == does not */
                for (size_t i = 0; i < p.n; i++) bad += !(o[0][i] == o[1][i]);
                for (size_t i = 0; i < nl; i++) bad += !(l[0][i] == l[1][i]);
                snprintf(name, sizeof name, "kernel%d %s B=4 H=16 N=1000 D=%ld%s vs kernel 14", id, dtype_name(dt), D,
                         causal ? " causal" : "");
                report(ran && bad == 0, NULL, name, "512 row tiles on one block per SM: O and L bit-identical to kernel 14's "
                       "(%zu of %zu values differ)", bad, p.n + nl);
                for (int x = 0; x < 2; x++) { tfree(o[x]); tfree(l[x]); }
                dfree(L);
                problem_free(&p);
            }
}

static void persistent_checks(long only) /* only: --kernel's id, 0 for all */
{
    for (int id = PERSIST_FIRST; id <= PERSIST_LAST; id++)
        if (!only || only == 14 || only == id) persistent_check(id);
}

/* The forward's grid (fwd), then the backward's (bwd, backward.c); `only`
 * is a forward kernel id, or a backward one when only the backward runs. */
static int run_checks(long only, int fwd, int bwd)
{
    static const long Ns[] = CHECK_NS;
    static const long Ds[] = {16, 32, 64, 128};
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    char name[160], eb[128];
    printf("device: %s\n", gpu_describe());
    gpu_refusals_quiet(1); /* a launch this GPU refuses is a SKIP line below, with the refusal's words */
    if (fwd) report_unavailable(0, only); /* a kernel this GPU cannot run (10-23 off Hopper): one line, then silence */
    for (int dt = 0; dt < 3 && fwd; dt++) {
        if (gpu_dtype_unavailable(dt)) { report_skip(dtype_name(dt), "%s", gpu_dtype_unavailable(dt)); continue; }
        for (size_t b = 0; b < 4; b++)
            for (size_t a = 0; a < N_CHECK_NS; a++) {
                long N = Ns[a], D = Ds[b];
                int any = 0;
                for (int i = 0; i < nk; i++) any |= (!only || ks[i]->id == only) && fused_runs(ks[i], dt, D);
                if (!any) continue;
                for (int causal = 0; causal < 2; causal++) {
                    if (causal && !(N == 1 || N == 65 || N == 1000)) continue;
                    Problem p;
                    long B = 2, H = 3; /* B*H > 1 with B != H */
                    problem_make(&p, B, H, N, D, dt, causal, 1000 + a * 17 + b * 3 + causal, NULL);
                    RefRows r = ref_rows(&p, NULL);
                    float *full = xmalloc(p.n * 4, "O"), *full2 = xmalloc(p.n * 4, "O again");
                    double naive_err = 0;
                    { /* the yardstick: naive in the same dtype, same inputs */
                        Err en;
                        naive_err = run_compare(NULL, &p, &r, 1.0, &en, full, NULL) == 0 ? en.max_abs : NAN; /* NaN: tol_fp32's floor, tol_16bit's cap */
                    }
                    float *first_fp32 = NULL;
                    for (int i = 0; i < nk; i++) {
                        const FusedKernel *kn = ks[i];
                        if ((only && kn->id != only) || !(kn->dtypes & (1u << dt)) || FUSED_UNAVAILABLE(kn)) continue;
                        snprintf(name, sizeof name, "kernel%d %s B=%ld H=%ld N=%ld D=%ld%s", kn->id, dtype_name(dt), B, H, N, D,
                                 causal ? " causal" : "");
                        if (!kn->supports_dim(D)) { report_skip(name, "kernel %d is not built for D=%ld", kn->id, D); continue; }
                        Err e;
                        double atol = dt == DT_FP32 ? tol_fp32(naive_err) : tol_16bit(naive_err);
                        if (run_compare(kn, &p, &r, atol, &e, full, NULL) != 0) { report_not_run(name, ""); continue; }
                        if (dt == DT_FP32)
                            report(e.n_bad == 0, &e, name, "%s (tol %.1e abs + 1e-5 rel: 2x naive fp32's %.1e, at least 1e-5)",
                                   fmt_err(&e, eb, sizeof eb), atol, naive_err);
                        else
                            report(e.n_bad == 0 && e.max_abs <= atol, &e, name, "%s; naive %s %.2e, tol 2x = %.2e",
                                   fmt_err(&e, eb, sizeof eb), dtype_name(dt), naive_err, atol);
                        /* Two runs, bit-identical: a race or an unwritten element shows here. */
                        Err e2;
                        if (run_compare(kn, &p, &r, atol, &e2, full2, NULL) != 0) memset(full2, 0xFF, p.n * 4); /* NaN: fails */
                        snprintf(name, sizeof name, "kernel%d %s N=%ld D=%ld%s rerun", kn->id, dtype_name(dt), N, D, causal ? " causal" : "");
                        report(memcmp(full, full2, p.n * 4) == 0, NULL, name, "two runs bit-identical");
                        if (dt == DT_FP32) { /* block-size independence: every fp32 kernel tiles differently */
                            if (!first_fp32) {
                                first_fp32 = xmalloc(p.n * 4, "first kernel's O");
                                memcpy(first_fp32, full, p.n * 4);
                            } else {
                                double mx = 0;
                                for (size_t t = 0; t < p.n; t++) {
                                    double d = fabs((double)full[t] - first_fp32[t]);
                                    if (!(d <= mx)) mx = d;
                                }
                                snprintf(name, sizeof name, "kernel%d vs first fp32 kernel N=%ld D=%ld%s", kn->id, N, D, causal ? " causal" : "");
                                report(mx <= 1e-5, NULL, name, "different tile sizes, same output: max diff %.1e (tol 1e-5)", mx);
                            }
                        }
                    }
                    tfree(first_fp32);
                    tfree(full); tfree(full2); tfree(r.ref);
                    problem_free(&p);
                }
            }
    }
    if (fwd && (!only || only == 14 || (only >= PERSIST_FIRST && only <= PERSIST_LAST))) persistent_checks(only);
    if (fwd) alibi_checks(only); /* a score modifier, ALiBi, in the kernels that take one (question 5) */
    if (fwd && (!only || only <= 2)) { /* fp32 on large scores: the tolerance scales with naive's error */
        Problem p;
        problem_make(&p, 1, 2, 1031, 128, DT_FP32, 0, 4242, NULL);
        for (size_t i = 0; i < p.n; i++) { p.q[i] *= 3.0f; p.k[i] *= 3.0f; } /* scores 9x larger */
        dupload_into(p.Q, p.q, p.n, DT_FP32);
        dupload_into(p.K, p.k, p.n, DT_FP32);
        RefRows r = ref_rows(&p, NULL);
        float *full = xmalloc(p.n * 4, "O");
        Err en;
        if (run_compare(NULL, &p, &r, 1.0, &en, full, NULL) != 0) en.max_abs = NAN; /* naive did not fit: tol_fp32's floor */
        for (int i = 0; i < nk; i++) {
            const FusedKernel *kn = ks[i];
            if ((only && kn->id != only) || !(kn->dtypes & (1u << DT_FP32)) || !kn->supports_dim(128)) continue;
            Err e;
            const double atol = tol_fp32(en.max_abs);
            snprintf(name, sizeof name, "kernel%d fp32 B=1 H=2 N=1031 D=128, Q and K x3", kn->id);
            if (run_compare(kn, &p, &r, atol, &e, full, NULL) != 0) { report_not_run(name, ""); continue; }
            report(e.n_bad == 0, &e, name, "%s (tol %.1e: 2x naive fp32's %.1e on these inputs; a fixed 1e-5 called "
                   "a right kernel wrong here)", fmt_err(&e, eb, sizeof eb), atol, en.max_abs);
        }
        tfree(full); tfree(r.ref);
        problem_free(&p);
    }
    if (bwd) bwd_run_checks(fwd ? 0 : only);
    if (fwd && bwd && !only) decode_run_checks(0); /* the whole grid: the decode kernels' too (decode.c) */
    if (fwd && bwd && !only) fp8_checks(0);        /* and FP8's: the CPU half and kernels 15-17 and 24 (fp8.c) */
    return report_finish();
}

// --- the default run, ALiBi and the benchmark --------------------------------------------------

/* One table: naive and the fused kernels that o asks for (o->dtype, --kernel), each checked against the float64
 * reference first, then each timed against naive in this one run. brief (the first screen): no reference line,
 * a check line only for a kernel that is wrong or refused, and of the times only naive's and the fastest's.
 * The fastest kernel and naive's time into *tb. Returns 1 if every kernel that ran was right. */
typedef struct {
    double t_naive, best;
    const FusedKernel *best_k;
    Err best_err;
    int n_ok, n_wrong, n_skip;
    char skipped[96], why[256];  /* brief: the kernels skipped ("10, 11, ..."), and the first one's reason */
} Table;
static void table_skip(Table *tb, int brief, const char *label, const FusedKernel *kn, const char *how, const char *why)
{
    tb->n_skip++;
    if (!brief) { printf("  %-9s %-16s %s: %s\n", label, kn->name, how, why); return; }
    const size_t used = strlen(tb->skipped);
    snprintf(tb->skipped + used, sizeof tb->skipped - used, "%s%d", used ? ", " : "", kn->id);
    if (!tb->why[0]) snprintf(tb->why, sizeof tb->why, "%s", why);
}
static int run_table(const Opts *o, FILE *csv, int brief, Table *tb)
{
    int nk, ok = 1;
    const FusedKernel *const *ks = fused_kernels(&nk);
    char desc[512], eb[128], b1[32], label[32], lim[160];
    Problem p;
    memset(tb, 0, sizeof *tb);
    problem_make(&p, o->B, o->H, o->N, o->D, o->dtype, o->causal, o->seed, o);
    RefRows r = ref_rows(&p, NULL);
    float *full = xmalloc(p.n * 4, "O");
    if (!brief)
        printf("reference: float64 on the CPU, %s (%zu rows)\n",
               r.stride == 1 ? "all rows" : "every 61st row of every head", r.nrows);
    /* 1. Check everything before timing anything. */
    Err en, ek[32];
    int refused[32] = {0}; /* a launch this GPU refused: a SKIP line here, never timed, never in the answer */
    int nrc = run_compare(NULL, &p, &r, o->dtype == DT_FP32 ? 1e-5 : 2e-2, &en, full, NULL);
    if (!brief) printf("\nchecks (output poisoned with NaN before each run):\n");
    if (nrc == 0 && !brief) printf("  %-9s %-16s %s\n", "naive", "cuBLAS+softmax", fmt_err(&en, eb, sizeof eb));
    else if (nrc != 0) printf("  %-9s OOM: S and P need %s of device memory, %s\n", "naive",
                fmt_bytes(2.0 * p.B * p.H * p.N * p.N * dtype_size(p.dtype), b1, sizeof b1), dmem_limit_desc(lim, sizeof lim));
    for (int i = 0; i < nk; i++) {
        const FusedKernel *kn = ks[i];
        kernel_label(0, kn->id, label, sizeof label);
        if (opts_kernel(o, kn->id) && FUSED_UNAVAILABLE(kn) && (kn->dtypes & (1u << o->dtype)))
            table_skip(tb, brief, label, kn, "skipped", FUSED_UNAVAILABLE(kn));
        if (!opts_kernel(o, kn->id) || !fused_runs(kn, o->dtype, o->D)) continue;
        double atol = o->dtype == DT_FP32 ? (nrc == 0 ? tol_fp32(en.max_abs) : 1e-5) : (nrc == 0 ? tol_16bit(en.max_abs) : 2e-2);
        if (run_compare(kn, &p, &r, atol, &ek[i], full, NULL) != 0) {
            refused[i] = 1;
            if (gpu_refused()) { table_skip(tb, brief, label, kn, "SKIP", gpu_refused()); continue; }
            printf("  %-9s %-16s FAILED: the launch failed, and this GPU refused nothing\n", label, kn->name);
            tb->n_wrong++;
            ok = 0;
            continue;
        }
        int good = ek[i].n_bad == 0;
        if (!brief || !good) printf("  %-9s %-16s %s  %s\n", label, kn->name, fmt_err(&ek[i], eb, sizeof eb), good ? "ok" : "WRONG");
        if (good) tb->n_ok++; else tb->n_wrong++;
        ok &= good;
    }
    /* 2. Time: naive, then each kernel, in this one run. */
    if (!brief)
        printf("\ntimes (CUDA events, 2 warm-ups, median of %ld; TFLOP/s = %s*B*H*N*N*D / time):\n", o->repeat, o->causal ? "2" : "4");
    size_t peak = 0;
    double t_naive = nrc == 0 ? time_one(NULL, &p, (int)o->repeat, &peak) : -1;
    if (t_naive < 0)
        printf("  %-9s %-16s %10s\n", "naive", "cuBLAS+softmax", "OOM");
    else if (brief) { /* naive is the yardstick, and is held to the reference too: fp32 1e-5, 16 bits 2e-2 */
        printf("  %-9s %-16s %9.3f ms  %s  %s\n", "naive", "cuBLAS+softmax", t_naive, fmt_err(&en, eb, sizeof eb),
               en.n_bad == 0 ? "ok" : "WRONG");
        ok &= en.n_bad == 0;
    }
    else
        printf("  %-9s %-16s %9.3f ms %8.2f TFLOP/s  peak %10s  max abs %.2e  rel L2 %.2e\n", "naive", "cuBLAS+softmax",
               t_naive, flops(&p) / t_naive / 1e9, fmt_bytes((double)peak, b1, sizeof b1), en.max_abs, en.rel_l2);
    if (csv) { /* naive not run (OOM): its errors written as 0 */
        const double err[2] = {nrc == 0 ? en.max_abs : 0.0, nrc == 0 ? en.rel_l2 : 0.0};
        csv_row(csv, "default", &p, 0, "cuBLAS+softmax", t_naive, t_naive > 0 ? flops(&p) / t_naive / 1e9 : 0,
                nrc == 0 ? peak : 0, err);
    }
    double best = -1;
    const FusedKernel *best_k = NULL;
    for (int i = 0; i < nk; i++) {
        const FusedKernel *kn = ks[i];
        if (!opts_kernel(o, kn->id) || !fused_runs(kn, o->dtype, o->D) || refused[i] || ek[i].n_bad) continue;
        double ms = time_one(kn, &p, (int)o->repeat, &peak);
        kn->describe(o->D, o->dtype, desc, sizeof desc);
        if (!brief) print_time_row(kernel_label(0, kn->id, label, sizeof label), kn->name, ms, flops(&p) / ms / 1e9, peak, t_naive, desc);
        if (csv)
            csv_row(csv, "default", &p, kn->id, kn->name, ms, flops(&p) / ms / 1e9, peak, (double[2]){ek[i].max_abs, ek[i].rel_l2});
        if (best < 0 || ms < best) { best = ms; best_k = kn; tb->best_err = ek[i]; }
    }
    if (brief && best_k) {
        printf("  %-9s %-16s %9.3f ms  %s  ok", kernel_label(0, best_k->id, label, sizeof label), best_k->name, best,
               fmt_err(&tb->best_err, eb, sizeof eb));
        if (t_naive > 0) printf("  %.2fx naive", t_naive / best);
        printf("\n");
    }
    tb->t_naive = t_naive; tb->best = best; tb->best_k = best_k;
    if (o->outfile) {
        long shp[4] = {o->B, o->H, o->N, o->D};
        ddownload(full, p.O, p.n, p.dtype);
        if (npy_save(o->outfile, full, shp, 4, o->dtype == DT_FP16 ? DT_FP16 : DT_FP32) != 0) {
            fprintf(stderr, "step05: cannot write %s\n", o->outfile);
            ok = 0;
        } else {
            printf("wrote O of the last kernel timed to %s\n", o->outfile);
        }
    }
    tfree(full); tfree(r.ref);
    problem_free(&p);
    return ok;
}

static int run_default(const Opts *o, FILE *csv)
{
    printf("step05: fused attention kernels vs naive, %s, B=%ld H=%ld N=%ld D=%ld%s\n", dtype_name(o->dtype), o->B, o->H,
           o->N, o->D, o->causal ? ", causal" : "");
    printf("device: %s\n", gpu_describe());
    gpu_refusals_quiet(1); /* a refused launch is a SKIP line of the table below, with the refusal's words */
    if (gpu_dtype_unavailable(o->dtype)) usage_error("option --dtype: %s", gpu_dtype_unavailable(o->dtype));
    Table tb;
    int ok = run_table(o, csv, 0, &tb);
    if (tb.best_k && tb.t_naive > 0)
        print_answer_fastest("fused kernel", tb.best_k->id, tb.best_k->name, tb.best, tb.t_naive, "S and P",
                             2.0 * o->B * o->H * o->N * o->N * dtype_size(o->dtype));
    return ok ? EXIT_OK : EXIT_FAIL;
}

static int dim_ok(int dtype, long D);
/* ./step05 with no --dtype: the whole story on one screen. First kernel 1, the chapter's loop transcribed (the
 * kernel to read), against naive attention in fp32; then the fastest tensor-core kernel this GPU runs against
 * naive in fp16 (the kernel that wins). Every kernel is checked before anything is timed, as in the tables of
 * --dtype fp32 and --dtype fp16, which list every kernel. */
static int run_first_screen(const Opts *o)
{
    char b[32];
    printf("step05: the chapter's fused attention on this GPU, B=%ld H=%ld N=%ld D=%ld%s\n", o->B, o->H, o->N, o->D,
           o->causal ? ", causal" : "");
    printf("device: %s\n", gpu_describe());
    printf("each kernel checked against float64 on the CPU (%s; output poisoned with NaN before each run), then timed "
           "(CUDA events, median of %ld)\n", ref_stride(o->N) == 1 ? "every row" : "every 61st row of every head", o->repeat);
    gpu_refusals_quiet(1);
    Opts q = *o;
    q.dtype = DT_FP32; q.kernel = q.kernel_last = 1;
    Table t1, t2;
    printf("\n1. fp32: kernel 1, the chapter's loop on the GPU, one thread per query row (kernel01_transcription.cu,\n"
           "   line for line 04_online_softmax/flash.c)\n");
    int ok = run_table(&q, NULL, 1, &t1);
    if (t1.n_skip) printf("   skipped: kernel 1 (%s)\n", t1.why);
    q.dtype = DT_FP16; q.kernel = 3; q.kernel_last = 99;
    const int fp16 = dim_ok(DT_FP16, o->D); /* every GPU from Turing on has fp16 tensor cores */
    if (fp16) {
        printf("\n2. fp16: the tensor cores, kernels 3 and up (each checked, then timed; the fastest shown)\n");
        ok &= run_table(&q, NULL, 1, &t2);
        printf("   %d kernels ran and are right, %d wrong, %d skipped on this GPU (./step05 --dtype fp16 lists each)\n",
               t2.n_ok, t2.n_wrong, t2.n_skip);
        if (t2.n_skip) printf("   skipped: kernel%s %s (%s)\n", strchr(t2.skipped, ',') ? "s" : "", t2.skipped, t2.why);
    } else {
        printf("\n2. fp16: skipped (D = %ld: the tensor-core kernels take D = 64 or 128)\n", o->D);
    }
    const double sp = 2.0 * o->B * o->H * o->N * o->N;
    printf("\nmore: ./step05 --dtype fp32 and --dtype fp16 (every kernel), make idea K=3 (one rung's idea), "
           "./step05 --check, 05_cuda_fused/README.md\n");
    if (t1.best_k && t1.t_naive > 0) {
        const double x = t1.t_naive / t1.best;
        printf("answer (fp32): kernel 1, the chapter's loop, takes %.3f ms vs naive's %.3f ms: %.2fx. Naive writes S and "
               "P (%s) and reads them back, but runs its two products on cuBLAS's fp32 GEMM (tiles in shared memory, "
               "every thread busy); kernel 1 never writes them, but each thread reads every K and V row itself, a "
               "scalar loop: %s.\n", t1.best, t1.t_naive, x, fmt_bytes(sp * 4, b, sizeof b),
               x >= 1 ? "saving S and P's traffic is worth more here than cuBLAS's tiling"
                      : "here the tiling is worth more than the traffic saved; kernel 2 adds the tiling (./step05 --dtype fp32)");
    }
    if (fp16 && t2.best_k && t2.t_naive > 0)
        printf("answer (fp16): the fastest tensor-core kernel here (kernel %d, %s) takes %.3f ms vs naive fp16's %.3f ms: "
               "%.2fx. Both products on the tensor cores, and S and P (%s in fp16) never leave the chip: the fusion "
               "and the tensor cores together.\n", t2.best_k->id, t2.best_k->name, t2.best, t2.t_naive,
               t2.t_naive / t2.best, fmt_bytes(sp * 2, b, sizeof b));
    return ok ? EXIT_OK : EXIT_FAIL;
}

/* FlashAttention's benchmark: batch = 16384/N, heads = 2048/D, N = 512..16384. */
static int run_bench(const Opts *o, FILE *csv)
{
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    static const long Ds[] = {64, 128};
    printf("step05 --bench: %s%s, batch = 16384/N, heads = 2048/D, TFLOP/s = %s*B*H*N*N*D / time\n"
           "(median of %ld runs each, the methods of a column interleaved run by run so that clock drift hits all alike)\n",
           dtype_name(o->dtype), o->causal ? ", causal" : "", o->causal ? "2" : "4", o->repeat);
    printf("device: %s\n", gpu_describe());
    /* The line every kernel is under: the chip's own matrix product in this dtype. */
    const long gn = 8192;
    double gms = -1;
    const double ceil_tf = gemm_ceiling_tflops(o->dtype, gn, (int)o->repeat, &gms);
    if (ceil_tf > 0) {
        printf("matrix-product ceiling: cuBLAS GEMM %ld x %ld x %ld, %s in, fp32 accumulate: %.1f TFLOP/s\n", gn, gn, gn,
               dtype_name(o->dtype), ceil_tf);
        if (csv)
            fprintf(csv, "ceiling,%s,-1,cuBLAS GEMM,1,1,%ld,%ld,0,%.6f,%.4f,0,0,0\n", dtype_name(o->dtype), gn, gn, gms, ceil_tf);
    } else {
        printf("matrix-product ceiling: the %ld^3 GEMM does not fit on this GPU\n", gn);
    }
    int ids[33];
    for (int i = 0; i < nk && i < 32; i++) ids[i + 1] = ks[i]->id;
    for (int b = 0; b < 2; b++) {
        long D = Ds[b];
        if ((o->given & OPT_GIVEN_DIM) && D != o->D) continue; /* --dim: that table only */
        /* one row per method; measure column by column so inputs are made once per N */
        double t[33][BENCH_COLS];
        int have[33];
        static char skipped[32][320];
        memset(have, 0, sizeof have);
        memset(skipped, 0, sizeof skipped);
        gpu_refusals_quiet(1);
        int col = 0;
        for (long N = BENCH_N0; N <= BENCH_N1; N *= 2, col++) {
            Problem p;
            problem_make(&p, 16384 / N, 2048 / D, N, D, o->dtype, o->causal, o->seed + N, NULL);
            const FusedKernel *run[33];
            int slot[33], n = 0;
            run[n] = NULL, slot[n++] = 0;                 /* naive first */
            for (int i = 0; i < nk && i < 32; i++) {
                const FusedKernel *kn = ks[i];
                if (!opts_kernel(o, kn->id) || !fused_runs(kn, o->dtype, D)) continue;
                /* one launch first: a launch this GPU refuses is never timed (its SKIP line follows the table) */
                gpu_refusal_clear();
                if (kn->launch(p.Q, p.K, p.V, p.O, p.B, p.H, p.N, p.D, p.dtype, p.causal, NULL) != 0) {
                    if (!gpu_refused()) {                 /* not a refusal: a failure, never a SKIP */
                        fprintf(stderr, "%s: kernel %d failed to launch at N=%ld D=%ld (this GPU refused nothing)\n",
                                g_prog, kn->id, N, D);
                        return EXIT_FAIL;
                    }
                    if (!col) snprintf(skipped[i], sizeof skipped[i], "%s", gpu_refused());
                    continue;
                }
                run[n] = kn, slot[n++] = i + 1;
            }
            double ms[33];
            time_interleaved(run, n, &p, (int)o->repeat, ms);
            for (int r = 0; r < n; r++) {
                t[slot[r]][col] = ms[r];
                have[slot[r]] = 1;
                if (csv && ms[r] > 0) /* errors not measured here: written as 0.000e+00, as the default run's OOM row */
                    csv_row(csv, "bench", &p, run[r] ? run[r]->id : 0, run[r] ? run[r]->name : "cuBLAS+softmax", ms[r],
                            flops(&p) / ms[r] / 1e9, 0, (double[2]){0, 0});
            }
            problem_free(&p);
        }
        print_bench_table(0, D, 4.0 * 16384 * 2048 / (o->causal ? 2 : 1), ids, nk + 1 < 33 ? nk + 1 : 33,
                          (const double (*)[BENCH_COLS])t, have); /* 4*B*H*N*N*D with B*N = 16384, H*D = 2048 */
        for (int i = 0; i < nk && i < 32; i++)
            if (skipped[i][0]) printf("  kernel %d SKIP at D=%ld: %s (not timed)\n", ks[i]->id, D, skipped[i]);
        gpu_refusals_quiet(0);
    }
    return EXIT_OK;
}

/* compute-sanitizer's run: every kernel once at N = 65 and 257, D = 64, each dtype, then the backward
 * kernels (backward.c); with --kernel K[-M] only those forward kernels, and no backward; with --backward
 * only the backward kernels (--kernel: those). A --kernel that runs nothing is an error, not a pass. */
static int run_sanitize_shapes(const Opts *o, int backward)
{
    if (backward) return bwd_run_sanitize(o);
    int ran = 0;
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    static const long Ns[] = {65, 257};
    for (int dt = 0; dt < 3; dt++)
        for (int a = 0; a < 2; a++)
            for (int causal = 0; causal < 2; causal++) {
                Problem p;
                problem_make(&p, 2, 3, Ns[a], 64, dt, causal, 7, NULL);
                float *L = dmalloc((size_t)p.B * p.H * p.N * sizeof(float), "L");
                float slope[6];
                alibi_slopes(slope, 2, 3);
                void *slope_d = dupload(slope, 6, DT_FP32, "ALiBi slopes");
                for (int i = 0; i < nk; i++) /* those this GPU launches: a refused one has nothing to sanitize */
                    if (opts_kernel(o, ks[i]->id) && fused_runs(ks[i], dt, 64) && fused_fits(ks[i], dt, 64)) {
                        dpoison(p.O, p.n, dt);
                        if (ks[i]->launch(p.Q, p.K, p.V, p.O, p.B, p.H, p.N, p.D, dt, causal, NULL) != 0) return EXIT_FAIL;
                        gpu_sync_check();
                        printf("ran kernel %d %s N=%ld D=64%s\n", ks[i]->id, dtype_name(dt), Ns[a], causal ? " causal" : "");
                        ran++;
                        if (!ks[i]->launch_l) continue;   /* and the path that writes L, for the backward */
                        if (ks[i]->launch_l(p.Q, p.K, p.V, p.O, L, p.B, p.H, p.N, p.D, dt, causal, NULL) != 0) return EXIT_FAIL;
                        gpu_sync_check();
                        printf("ran kernel %d with L %s N=%ld D=64%s\n", ks[i]->id, dtype_name(dt), Ns[a], causal ? " causal" : "");
                    }
                for (int i = 0; i < nk; i++) /* and the ALiBi builds (kernels 2, 3) */
                    if (opts_kernel(o, ks[i]->id) && fused_runs(ks[i], dt, 64) && fused_fits(ks[i], dt, 64) &&
                        ks[i]->launch_alibi) {
                        dpoison(p.O, p.n, dt);
                        if (ks[i]->launch_alibi(p.Q, p.K, p.V, p.O, (const float *)slope_d, p.B, p.H, p.N, p.D, dt,
                                                causal, NULL) != 0)
                            return EXIT_FAIL;
                        gpu_sync_check();
                        printf("ran kernel %d with ALiBi %s N=%ld D=64%s\n", ks[i]->id, dtype_name(dt), Ns[a],
                               causal ? " causal" : "");
                    }
                dfree(slope_d);
                dfree(L);
                problem_free(&p);
            }
    /* The persistent kernels 18-23 once more where their blocks take several row tiles each (B = 8, H = 16,
     * N = 257: 384 row tiles, more than any GPU's SMs): the ring of tickets and the second item's Q are only
     * exercised there; and causal where the heads go in groups of unequal size (tile_order.cuh: a group's K and V
     * fill half of L2): B = 4, H = 16, N = 1000, D = 128, 51 heads and then 13 on a 50 MiB L2. */
    for (int id = PERSIST_FIRST; id <= PERSIST_LAST; id++) {
        const FusedKernel *kp = fused_kernel(id);
        for (int causal = 0; causal < 2 && kp && opts_kernel(o, id) && fused_runs(kp, DT_FP16, 64); causal++) {
            Problem p;
            problem_make(&p, 8, 16, 257, 64, DT_FP16, causal, 7, NULL);
            dpoison(p.O, p.n, DT_FP16);
            if (kp->launch(p.Q, p.K, p.V, p.O, p.B, p.H, p.N, p.D, DT_FP16, causal, NULL) != 0) return EXIT_FAIL;
            gpu_sync_check();
            printf("ran kernel %d fp16 B=8 H=16 N=257 D=64%s (several row tiles per block)\n", id, causal ? " causal" : "");
            ran++;
            problem_free(&p);
        }
        if (kp && opts_kernel(o, id) && fused_runs(kp, DT_FP16, 128)) {
            Problem p;
            problem_make(&p, 4, 16, 1000, 128, DT_FP16, 1, 7, NULL);
            dpoison(p.O, p.n, DT_FP16);
            if (kp->launch(p.Q, p.K, p.V, p.O, p.B, p.H, p.N, p.D, DT_FP16, 1, NULL) != 0) return EXIT_FAIL;
            gpu_sync_check();
            printf("ran kernel %d fp16 B=4 H=16 N=1000 D=128 causal (head groups of unequal size)\n", id);
            ran++;
            problem_free(&p);
        }
    }
    if (!ran) {
        fprintf(stderr, "%s: --sanitize-shapes: no kernel of --kernel %ld-%ld runs on this GPU\n", g_prog, o->kernel,
                o->kernel_last);
        return EXIT_USAGE;
    }
    return o->kernel ? EXIT_OK : bwd_run_sanitize(o); /* the backward kernels at the same N (backward.c) */
}

#endif /* HAVE_CUDA */

// --- the tensor cores' fragment layout, for the picture -------------------------------

/* Which lane (and which of its registers) holds element (r, c) of mma.sync.m16n8k16's operands: the layout
 * tc.cuh writes down and kernels 3-9 use (lane = 4 g + t; each 32-bit register holds two 16-bit values, the
 * lower half first). matrix 0: A, 16 x 16 (rows of Q or P); 1: B, 16 x 8 (k x n: columns of K^T or V); 2: C,
 * 16 x 8 fp32 (the scores, or O). On Turing the k = 16 product is two m16n8k8: registers a0, a1 and b0 go to
 * the first (k < 8), a2, a3 and b1 to the second. */
static void fragment_owner(int matrix, int r, int c, int *lane, int *reg, int *half)
{
    int g, t;
    if (matrix == 0) { g = r % 8, t = (c % 8) / 2, *reg = (r >= 8) + 2 * (c >= 8), *half = c % 2; }      /* a0..a3 */
    else if (matrix == 1) { g = c, t = (r % 8) / 2, *reg = r >= 8, *half = r % 2; }                       /* b0, b1 */
    else { g = r % 8, t = c / 2, *reg = 2 * (r >= 8) + c % 2, *half = 0; }                                 /* c0..c3 */
    *lane = 4 * g + t;
}

/* --layout-csv FILE: every element of A, B and C with its owner, for plots/mma_layout.py (no GPU needed). */
static int write_layout(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) usage_error("option --layout-csv: cannot open %s for writing: %s", path, strerror(errno));
    fprintf(f, "matrix,row,col,lane,group,thread,register,half\n");
    static const char *const name[3] = {"A", "B", "C"};
    static const int rows[3] = {16, 16, 16}, cols[3] = {16, 8, 8};
    for (int m = 0; m < 3; m++)
        for (int r = 0; r < rows[m]; r++)
            for (int c = 0; c < cols[m]; c++) {
                int lane, reg, half;
                fragment_owner(m, r, c, &lane, &reg, &half);
                fprintf(f, "%s,%d,%d,%d,%d,%d,%c%d,%d\n", name[m], r, c, lane, lane / 4, lane % 4, "abc"[m], reg, half);
            }
    fclose(f);
    printf("wrote the m16n8k16 fragment layout (A 16x16, B 16x8, C 16x8: which lane and register holds each element) "
           "to %s\n", path);
    return EXIT_OK;
}

// --- main ---------------------------------------------------------------------------

static void usage(const Opts *o)
{
    printf("usage: ./step05 [options]\n"
           "The fused CUDA kernels, checked and timed against naive cuBLAS attention (book Step 7).\n");
    print_common_usage(o);
    printf("  --bench                FlashAttention's benchmark shapes (batch = 16384/N, heads = 2048/D), TFLOP/s table\n"
           "                         at D = 64 and 128 (--dim 64 or 128: that one only; --decode --bench: its own shapes)\n"
           "  --backward             the backward kernels (dQ, dK, dV) vs the naive cuBLAS backward; with --bench: at\n"
           "                         the benchmark shapes; with --check: only the backward's checks; --kernel N: backward kernel N\n"
           "  --do FILE.npy          with --backward and --q --k --v: dO = dLoss/dO ([B,H,N,D]); --out-dq/--out-dk/--out-dv\n"
           "                         FILE.npy write the gradients of the last backward kernel run (float32)\n"
           "  --alibi                the kernels with a score modifier (2, 3) with ALiBi, vs float64 with the bias, timed\n"
           "  --dtype fp8            kernels 15-17, 24: Q, K, V in e4m3 with per-block scales, vs float64 and kernel 14 in fp16;\n"
           "                         with --bench: at the benchmark shapes; --errors: FP8's error table (CPU, no GPU needed);\n"
           "                         --q/--k/--v FILE.npy [--scaling tensor|block|hadamard] [--out O.npy]: that table's\n"
           "                         columns for the reader's tensors, on the CPU (O of --scaling, default block)\n"
           "  --layout-csv FILE      write which lane holds each element of mma.sync's A, B, C (plots/mma_layout.py)\n"
           "  --sanitize-shapes      run each kernel once at N = 65, 257 (for make sanitize; --kernel K[-M]: only those;\n"
           "                         with --backward: only the backward kernels; with --decode: only the decode kernels)\n");
    decode_usage();
}

/* The step's rule for head dims, decidable without a GPU: the fp32 kernels
 * take D in 8..128 (multiples of 8), the tensor-core kernels D = 64 or 128. */
static int dim_ok(int dtype, long D)
{
    return dtype == DT_FP32 ? D >= 8 && D <= 128 && D % 8 == 0 : D == 64 || D == 128;
}

int main(int argc, char **argv)
{
    Opts o;
    DecodeOpts dec;
    int bench = 0, sanitize = 0, backward = 0, alibi = 0, errors = 0, scaling = -1;
    const char *layout_csv = NULL;
    BwdFiles bf = {NULL, NULL, NULL, NULL};
    opts_expand(&argc, &argv);
    opts_init(&o, "step05", OPT_SHAPE | OPT_DTYPE | OPT_CAUSAL | OPT_KERNEL | OPT_GPU_AS | OPT_SEED | OPT_REPEAT | OPT_CSV | OPT_CHECK |
                  OPT_NPY, (1u << DT_FP32) | (1u << DT_FP16) | (1u << DT_BF16) | (1u << DT_FP8));
    decode_opts_init(&dec);
    for (int i = 1; i < argc; i++) dec.on |= !strcmp(argv[i], "--decode");
    if (dec.on) { o.B = 8; o.H = 32; o.N = 4096; o.D = 128; o.dtype = DT_FP16; } /* --decode's shape: --heads Hq, --seq L */
    else { o.B = 2; o.H = 8; o.N = 4096; o.D = 64; }
    o.repeat = 10;
    for (int i = 1; i < argc; i++) {
        if (opts_parse_common(&o, argc, argv, &i)) continue;
        const int at = i;
        if (decode_parse(&dec, argc, argv, &i)) {
            if (!dec.on) usage_error("option %s goes with --decode (see --help)", argv[at]);
            continue;
        }
        if (!strcmp(argv[i], "--bench")) { bench = 1; continue; }
        if (!strcmp(argv[i], "--sanitize-shapes")) { sanitize = 1; continue; }
        if (!strcmp(argv[i], "--backward")) { backward = 1; continue; }
        if (!strcmp(argv[i], "--alibi")) { alibi = 1; continue; }
        if (!strcmp(argv[i], "--errors")) { errors = 1; continue; }
        if (!strcmp(argv[i], "--layout-csv")) {
            const char *opt = argv[i];
            layout_csv = opt_value(argc, argv, &i);
            if (!*layout_csv) usage_error("option %s: empty file name", opt);
            continue;
        }
        if (!strcmp(argv[i], "--scaling")) { /* Fp8Mode's order */
            static const char *const modes[] = {"tensor", "block", "hadamard"};
            const char *opt = argv[i];
            scaling = parse_choice(opt, opt_value(argc, argv, &i), modes, 3);
            continue;
        }
        const char **file = !strcmp(argv[i], "--do") ? &bf.dout : !strcmp(argv[i], "--out-dq") ? &bf.dq
                          : !strcmp(argv[i], "--out-dk") ? &bf.dk : !strcmp(argv[i], "--out-dv") ? &bf.dv : NULL;
        if (file) {
            if (i + 1 >= argc) usage_error("option %s needs a FILE.npy", argv[i]);
            *file = argv[++i];
            continue;
        }
        usage_error("unknown option '%s' (see --help)", argv[i]);
    }
    if (o.help) { usage(&o); return 0; }
    if (layout_csv) return write_layout(layout_csv); /* the picture's data: the CPU, any machine */
    if (dec.on && (o.qfile || o.kfile || o.vfile)) {     /* decode on the reader's tensors: their own shapes */
        if (bench || o.check || sanitize)
            usage_error("option --q: with --decode the reader's tensors go with the default run (not --bench, --check or "
                        "--sanitize-shapes)");
        decode_files_validate(&o, &dec);
    }
    opts_validate(&o, dtype_size(o.dtype));
    if (bf.dout || bf.dq || bf.dk || bf.dv) {            /* the backward on the reader's tensors */
        if (!backward) usage_error("options --do, --out-dq, --out-dk, --out-dv go with --backward");
        if (bench || sanitize || o.check || alibi || dec.on)
            usage_error("option --do: the reader's tensors go with the default --backward run (not --bench, --check, "
                        "--sanitize-shapes, --alibi or --decode)");
        if (!bf.dout || !o.qfile) usage_error("option --do: the backward on files takes --q, --k, --v and --do, all four");
        long shp[4];
        if (npy_shape("--do", bf.dout, shp) != 4 || shp[0] != o.B || shp[1] != o.H || shp[2] != o.N || shp[3] != o.D)
            usage_error("option --do: %s must have Q's shape [%ld, %ld, %ld, %ld]", bf.dout, o.B, o.H, o.N, o.D);
    } else if (backward && o.qfile) {
        usage_error("option --q: with --backward, give dO too (--do FILE.npy)");
    }
    if (backward && o.outfile) usage_error("option --out saves the forward's O; the backward writes --out-dq, --out-dk, --out-dv");
    if (dec.on) {
        if (backward || alibi || o.causal)
            usage_error("option --decode runs on its own (causal among the new rows by definition; not with --backward, "
                        "--alibi or --causal)");
        if (o.outfile && !dec.qf) usage_error("option --out: with --decode, give the tensors too (--q, --k, --v)");
        decode_validate(&o, &dec);
        if (!o.check && !sanitize && !gpu_available())
            printf("step05 --decode runs the decode kernels, and needs an NVIDIA GPU: this machine has none usable (or this "
                   "build has no CUDA).\n05_cuda_fused/README.md has the real output of an H100.\n");
        gpu_require();
        return decode_main(&o, &dec, bench, sanitize);
    }
    if (errors && o.dtype != DT_FP8) usage_error("option --errors goes with --dtype fp8 (the FP8 error table)");
    if (scaling >= 0 && (o.dtype != DT_FP8 || !o.qfile))
        usage_error("option --scaling goes with --dtype fp8 and --q/--k/--v (the scaling whose O --out writes)");
    if (o.dtype == DT_FP8) {
        if (backward || alibi)
            usage_error("option --dtype fp8 runs the FP8 kernels on their own (not with --backward or --alibi)");
        if (o.outfile && !o.qfile) usage_error("option --out: with --dtype fp8, give the tensors too (--q, --k, --v)");
        if (o.qfile && (bench || errors || o.check || sanitize || o.kernel))
            usage_error("option --q: with --dtype fp8 the reader's tensors go with the default run (not --bench, --errors, "
                        "--check, --sanitize-shapes or --kernel)");
        if (o.qfile && o.D != 64 && o.D != 128)
            usage_error("option --q: D = %ld; FP8's loop takes the kernels' head dims, 64 or 128", o.D);
        if (o.qfile) return fp8_main(&o, 0, 0, 0, scaling < 0 ? 1 : scaling); /* the CPU loop, any machine */
        if (o.kernel && (o.kernel != o.kernel_last || o.kernel < 15 || (o.kernel > 17 && o.kernel != 24)))
            usage_error("option --kernel: the FP8 kernels are 15, 16, 17 and 24 (one of them), not %ld%s", o.kernel,
                        o.kernel != o.kernel_last ? "-..." : "");
        if (((!bench && !errors && !o.check) || (bench && (o.given & OPT_GIVEN_DIM))) && o.D != 64 && o.D != 128)
            usage_error("option --dim: %ld is not supported in fp8 (kernels 15-17, 24: 64 or 128)", o.D);
        if (!bench) opts_gpu_grid(&o, 16);
        return fp8_main(&o, bench, errors, sanitize, 1);
    }
    if (o.check && !backward && !o.kernel && !gpu_available()) { /* the CPU half of the checks runs anywhere */
        fp8_cpu_checks();
        report_skip("step05", "no CUDA device (or no CUDA in this build): the kernels' checks need one; FP8's CPU half ran");
        return report_finish();
    }
    if (o.check && o.kernel != o.kernel_last) usage_error("option --kernel: --check takes one kernel, not the range %ld-%ld", o.kernel, o.kernel_last);
    if (bench && (o.given & OPT_GIVEN_DIM) && o.D != 64 && o.D != 128)
        usage_error("option --dim: --bench times D = 64 and 128 (FlashAttention's shapes); --dim picks one of them, not %ld", o.D);
    if (!bench) opts_gpu_grid(&o, 16); /* the smallest row tile of any kernel; --bench chooses its own shapes */
    if (!bench && !backward && !dim_ok(o.dtype, o.D))
        usage_error("option --dim: %ld is not supported in %s (fp32 kernels: 8..128 in steps of 8; fp16/bf16 "
                    "tensor-core kernels: 64 or 128)", o.D, dtype_name(o.dtype));
    if (!bench && backward && !o.check && !bwd_dim_ok(o.dtype, o.D))
        usage_error("option --dim: %ld is not supported by the backward in %s (fp32: 16..128 in steps of 16; fp16/bf16: "
                    "64 or 128)", o.D, dtype_name(o.dtype));
#ifdef HAVE_CUDA
    kernel_option_check(&o, backward, sanitize, bench || o.check); /* --sanitize-shapes: every dtype and D */
#endif
    if (!o.check && !sanitize && !gpu_available()) /* a reader's first contact, on a laptop: say what is missed, and where */
        printf("step05 runs the fused CUDA kernels, and needs an NVIDIA GPU: this machine has none usable (or this "
               "build has no CUDA).\n"
               "What it shows on one: every kernel checked against a float64 reference, then timed against naive "
               "attention;\n05_cuda_fused/README.md has the real output of an H200 (kernel 21 is 5.76x naive attention "
               "in fp16 at B=2 H=8 N=4096 D=64).\n"
               "On this machine: ./step01 to ./step04, ./step06 (and ./step06 --train), ./step07 run on the CPU; "
               "make check runs their checks.\n");
    gpu_require(); /* exits 77 with one line when there is no GPU (or no CUDA in this build) */
#ifdef HAVE_CUDA
    if (o.check) return run_checks(o.kernel, !backward, backward || !o.kernel);
    if (sanitize) return run_sanitize_shapes(&o, backward);
    if (alibi) {
        if (bench || backward) usage_error("option --alibi runs on its own (not with --bench or --backward)");
        return alibi_run(&o);
    }
    /* ./step05 as the card types it (no --dtype, no --kernel, no files, no CSV): the first screen */
    const int first_screen = !(o.given & OPT_GIVEN_DTYPE) && !o.kernel && !o.qfile && !o.outfile && !o.csv;
    FILE *csv = o.csv ? csv_open(o.csv, CSV_HEADER) : NULL;
    int rc = backward ? (bench ? bwd_run_bench(&o, csv) : bwd_run_default(&o, csv, &bf))
                      : bench ? run_bench(&o, csv)
                      : first_screen ? run_first_screen(&o) : run_default(&o, csv);
    if (csv) fclose(csv);
    return rc;
#else
    (void)sanitize, (void)backward, (void)alibi;
    return EXIT_SKIP;
#endif
}
