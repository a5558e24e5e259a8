/*
 * forward.c: step 05's forward, the host side (forward.h): ./step05 --check's forward cases (every kernel
 * against the float64 reference on the grid, twice bit for bit, the fp32 kernels against each other, the
 * persistent kernels against the kernel they reschedule, fp32 on large scores), ./step05 itself (the first
 * screen: the chapter's loop in fp32, the fastest tensor-core kernel in fp16), ./step05 --dtype D (every
 * kernel checked, then timed against naive attention), --bench (FlashAttention's shapes) and the shapes
 * compute-sanitizer runs. The kernels are forward/kernelNN_*.cu, registered in kernels.h's forward registry;
 * the problem, the reference rows, the tables and the CSV are the runner's (runner.c).
 */
#include "common.h"
#include "gpu.h"
#include "forward.h"
#include "alibi.h"
#include "runner.h"
#include "../kernels.h"
#include "../../01_naive/naive.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The step's rule for head dims, decidable without a GPU: the fp32 kernels take D in 8..128 (multiples of 8),
 * the tensor-core kernels D = 64 or 128. */
int fwd_dim_ok(int dtype, long D)
{
    return dtype == DT_FP32 ? D >= 8 && D <= 128 && D % 8 == 0 : D == 64 || D == 128;
}

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

/* A persistent kernel (.persistent: one block per SM, taking row tiles from a counter) runs the arithmetic of the
 * first rung below it that is not persistent (kernel 18 reschedules kernel 14, and the persistent rungs above 18
 * keep 14's sums), only scheduled otherwise: that rung is its yardstick, bit for bit. NULL if the ladder has none. */
static const FusedKernel *persistent_base(const FusedKernel *k)
{
    for (int steps = 0; k && k->persistent && steps < MAX_KERNELS; steps++) k = fused_kernel(k->extends);
    return k && !k->persistent ? k : NULL;
}

/* At a shape with more row tiles than the GPU has SMs (B = 4, H = 16, N = 1000: 512 row tiles of 128 rows; H = 32
 * at D = 64) a persistent kernel's blocks take several each, one after the other, so its O and L must equal its
 * base's bit for bit; the grid (at most 54 row tiles) never gives a block a second one. Causal, the heads are more
 * than one group of tickets holds on an H100 or H200 (kernel 18's G, at most 122 heads at D = 64 and 61 at D = 128
 * there; kernel 26's, 66 and 33 on the H200), so the order across groups is checked at both D. */
static void persistent_check(const FusedKernel *kp)
{
    const FusedKernel *kb = persistent_base(kp);
    char name[160];
    if (!kb || FUSED_UNAVAILABLE(kp)) return; /* off Hopper: the grid's line said so */
    for (int dt = DT_FP16; dt <= DT_BF16; dt++)
        for (long D = 64; D <= 128; D += 64)
            for (int causal = 0; causal < 2; causal++) {
                Problem p;
                const long H = D == 64 ? 32 : 16;
                problem_make(&p, 4, H, 1000, D, dt, causal, 1800 + D + causal, NULL);
                const size_t nl = (size_t)p.B * p.H * p.N;
                float *L = dmalloc(nl * sizeof(float), "L");
                float *o[2], *l[2];
                const FusedKernel *kn[2] = {kb, kp};
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
                snprintf(name, sizeof name, "kernel%d %s B=4 H=%ld N=1000 D=%ld%s vs kernel %d", kp->id, dtype_name(dt), H,
                         D, causal ? " causal" : "", kb->id);
                report(ran && bad == 0, NULL, name, "%ld row tiles on one block per SM: O and L bit-identical to kernel "
                       "%d's (%zu of %zu values differ)", p.B * H * ((p.N + 127) / 128), kb->id, bad, p.n + nl);
                for (int x = 0; x < 2; x++) { tfree(o[x]); tfree(l[x]); }
                dfree(L);
                problem_free(&p);
            }
}

/* A persistent kernel launched as a reader's training loop would launch it: captured once in a CUDA graph and replayed
 * on fresh inputs (the same buffers, new values, three times), and on two streams at once (two problems, three rounds,
 * no wait between). Each output must equal its base's plain launch bit for bit. What could break is the counter the
 * row tiles are taken from: one that a launch does not find at zero (a graph replays its launch's arguments as they
 * were at capture), or that two launches share, hands a row tile to the other launch or to nobody. */
typedef struct { const FusedKernel *k; Problem *p; float *L; } PersistLaunch;
static void persist_launch_on(void *c, void *stream)
{
    const PersistLaunch *x = c;
    const Problem *p = x->p;
    if (x->k->launch_l(p->Q, p->K, p->V, p->O, x->L, p->B, p->H, p->N, p->D, p->dtype, p->causal, stream) != 0)
        fprintf(stderr, "%s: kernel %d refused a launch its check had run\n", g_prog, x->k->id);
}

/* p's O and L (downloaded into o, l) against kb's plain launch on p's inputs: the values that differ (NaN differs). */
static size_t persist_diff(const FusedKernel *kb, Problem *p, float *L, const float *o, const float *l, float *ob, float *lb)
{
    const size_t nl = (size_t)p->B * p->H * p->N;
    dpoison(p->O, p->n, p->dtype);
    dpoison(L, nl, DT_FP32);
    if (kb->launch_l(p->Q, p->K, p->V, p->O, L, p->B, p->H, p->N, p->D, p->dtype, p->causal, NULL) != 0) return p->n + nl;
    gpu_sync_check();
    ddownload(ob, p->O, p->n, p->dtype);
    ddownload(lb, L, nl, DT_FP32);
    size_t bad = 0;
    for (size_t i = 0; i < p->n; i++) bad += !(o[i] == ob[i]);
    for (size_t i = 0; i < nl; i++) bad += !(l[i] == lb[i]);
    return bad;
}

static void persistent_launch_checks(const FusedKernel *kp)
{
    const FusedKernel *kb = persistent_base(kp);
    char name[160];
    if (!kb || FUSED_UNAVAILABLE(kp)) return;
    for (long D = 64; D <= 128; D += 64)
        for (int causal = 0; causal < 2; causal++) {
            Problem p[2];
            float *L[2];
            const int dt = DT_FP16;
            if (!fused_runs(kp, dt, D) || !fused_fits(kp, dt, D) || !fused_fits(kb, dt, D)) {
                snprintf(name, sizeof name, "kernel%d graph and streams fp16 D=%ld%s", kp->id, D, causal ? " causal" : "");
                report_skip(name, "the kernel or its base does not run here");
                continue;
            }
            for (int x = 0; x < 2; x++) {
                problem_make(&p[x], 4, 16, 1000, D, dt, causal, 2300 + 10 * x + D + causal, NULL);
                L[x] = dmalloc((size_t)p[x].B * p[x].H * p[x].N * sizeof(float), "L");
            }
            const size_t n = p[0].n, nl = (size_t)p[0].B * p[0].H * p[0].N;
            float *o = xmalloc(n * 4, "O"), *l = xmalloc(nl * 4, "L"), *ob = xmalloc(n * 4, "O"), *lb = xmalloc(nl * 4, "L");
            /* the graph: the launcher's first call (its opt-in, tensor maps) before the capture, as a training loop's
             * warm-up step does; then three replays, each on new values in the same buffers */
            PersistLaunch c = {kp, &p[0], L[0]};
            persist_launch_on(&c, NULL);
            gpu_sync_check();
            GpuGraph *g = gpu_graph_capture(persist_launch_on, &c);
            size_t bad = 0;
            for (int r = 0; r < 3; r++) {
                problem_new_inputs(&p[0], 2400 + 10 * r + D + causal);
                dpoison(p[0].O, n, dt);
                dpoison(L[0], nl, DT_FP32);
                gpu_graph_replay(g);
                gpu_sync_check();
                ddownload(o, p[0].O, n, dt);
                ddownload(l, L[0], nl, DT_FP32);
                bad += persist_diff(kb, &p[0], L[0], o, l, ob, lb);
            }
            gpu_graph_free(g);
            snprintf(name, sizeof name, "kernel%d graph fp16 B=4 H=16 N=1000 D=%ld%s", kp->id, D, causal ? " causal" : "");
            report(bad == 0, NULL, name, "captured once in a CUDA graph, replayed 3 times on new inputs: O and L "
                   "bit-identical to kernel %d's plain launch on each (%zu of %zu values differ)", kb->id, bad, 3 * (n + nl));
            /* two streams: two problems launched one on each with no wait between them, three rounds, the outputs
             * poisoned before each round and compared after it (so a tile one round left out cannot be covered by the
             * same tile of another round) */
            void *s[2] = {gpu_stream_create(), gpu_stream_create()};
            bad = 0;
            for (int r = 0; r < 3; r++) {
                for (int x = 0; x < 2; x++) dpoison(p[x].O, n, dt), dpoison(L[x], nl, DT_FP32);
                for (int x = 0; x < 2; x++) {
                    PersistLaunch cx = {kp, &p[x], L[x]};
                    persist_launch_on(&cx, s[x]);
                }
                gpu_sync_check();
                for (int x = 0; x < 2; x++) {
                    ddownload(o, p[x].O, n, dt);
                    ddownload(l, L[x], nl, DT_FP32);
                    bad += persist_diff(kb, &p[x], L[x], o, l, ob, lb);
                }
            }
            for (int x = 0; x < 2; x++) gpu_stream_destroy(s[x]);
            snprintf(name, sizeof name, "kernel%d streams fp16 B=4 H=16 N=1000 D=%ld%s", kp->id, D, causal ? " causal" : "");
            report(bad == 0, NULL, name, "two problems on two streams at once, three rounds: O and L bit-identical to "
                   "kernel %d's plain launch on each (%zu of %zu values differ)", kb->id, bad, 6 * (n + nl));
            tfree(o); tfree(l); tfree(ob); tfree(lb);
            for (int x = 0; x < 2; x++) { dfree(L[x]); problem_free(&p[x]); }
        }
}

/* Every persistent kernel, or with --kernel that one, or all of those its base (--kernel 14) is the yardstick of. */
static void persistent_checks(long only)
{
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    for (int i = 0; i < nk; i++) {
        const FusedKernel *kb = ks[i]->persistent ? persistent_base(ks[i]) : NULL;
        if (ks[i]->persistent && (!only || only == ks[i]->id || (kb && only == kb->id))) persistent_check(ks[i]);
    }
}

/* The same kernels launched from a CUDA graph and on two streams (last: a kernel whose tickets broke would leave the
 * counter wrong for the checks after it). */
static void persistent_launch_checks_all(long only)
{
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    for (int i = 0; i < nk; i++) {
        const FusedKernel *kb = ks[i]->persistent ? persistent_base(ks[i]) : NULL;
        if (ks[i]->persistent && (!only || only == ks[i]->id || (kb && only == kb->id))) persistent_launch_checks(ks[i]);
    }
}

/* One case of the grid (B = 2, H = 3: B*H > 1 with B != H): naive in the same dtype as the yardstick, then every
 * kernel of `only` that takes the dtype, against the float64 rows, twice bit for bit, and the fp32 kernels against
 * the first one (block-size independence: every fp32 kernel tiles differently). */
static void grid_case(void *ctx, int dt, int b, long D, int a, long N, int causal)
{
    const long only = *(const long *)ctx, B = 2, H = 3;
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    char name[160], eb[128];
    Problem p;
    problem_make(&p, B, H, N, D, dt, causal, 1000 + (uint64_t)a * 17 + (uint64_t)b * 3 + (uint64_t)causal, NULL);
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

/* fp32 on large scores: the tolerance scales with naive's error (every fp32 kernel built for D = 128). */
static void large_scores_check(long only)
{
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    char name[160], eb[128];
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

void fwd_run_checks(long only)
{
    static const long Ds[] = {16, 32, 64, 128};
    report_unavailable(FAM_FORWARD, only); /* a kernel this GPU cannot run (the wgmma kernels off Hopper): one line */
    const CheckGrid g = {FAM_FORWARD, only, "", {Ds, Ds, Ds}, {4, 4, 4}, 1, grid_case, NULL, &only};
    check_grid(&g);
    persistent_checks(only);
    alibi_checks(only); /* a score modifier, ALiBi, in the kernels that take one (question 5) */
    const FusedKernel *ko = only ? fused_kernel((int)only) : NULL;
    if (!only || (ko && (ko->dtypes & (1u << DT_FP32)))) large_scores_check(only);
    persistent_launch_checks_all(only);
}

// --- ./step05: the table, the first screen, --bench ----------------------------------------------

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
    Err en, ek[MAX_KERNELS];
    int refused[MAX_KERNELS] = {0}; /* a launch this GPU refused: a SKIP line here, never timed, never in the answer */
    int nrc = run_compare(NULL, &p, &r, o->dtype == DT_FP32 ? 1e-5 : 2e-2, &en, full, NULL);
    if (!brief) printf("\nchecks (output poisoned with NaN before each run):\n");
    if (nrc == 0 && !brief) printf("  %-9s %-16s %s\n", "naive", "cuBLAS+softmax", fmt_err(&en, eb, sizeof eb));
    else if (nrc != 0) printf("  %-9s OOM: S and P need %s of device memory, %s\n", "naive",
                fmt_bytes(2.0 * p.B * p.H * p.N * p.N * dtype_size(p.dtype), b1, sizeof b1), dmem_limit_desc(lim, sizeof lim));
    for (int i = 0; i < nk; i++) {
        const FusedKernel *kn = ks[i];
        kernel_label(FAM_FORWARD, kn->id, label, sizeof label);
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
        if (!brief) print_time_row(kernel_label(FAM_FORWARD, kn->id, label, sizeof label), kn->name, ms, flops(&p) / ms / 1e9, peak, t_naive, desc);
        if (csv)
            csv_row(csv, "default", &p, kn->id, kn->name, ms, flops(&p) / ms / 1e9, peak, (double[2]){ek[i].max_abs, ek[i].rel_l2});
        if (best < 0 || ms < best) { best = ms; best_k = kn; tb->best_err = ek[i]; }
    }
    if (brief && best_k) {
        printf("  %-9s %-16s %9.3f ms  %s  ok", kernel_label(FAM_FORWARD, best_k->id, label, sizeof label), best_k->name, best,
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

int fwd_run_default(const Opts *o, FILE *csv)
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

/* ./step05 with no --dtype: the whole story on one screen. First kernel 1 (the ladder's first rung, .extends 0),
 * the chapter's loop transcribed (the kernel to read), against naive attention in fp32; then the fastest
 * tensor-core kernel this GPU runs (the first to take fp16, and every one above it) against naive in fp16 (the
 * kernel that wins). Every kernel is checked before anything is timed, as in the tables of --dtype fp32 and
 * --dtype fp16, which list every kernel. */
int fwd_run_first_screen(const Opts *o)
{
    char b[32];
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    int k1 = 0, k2 = 0, k16 = 0, last = 0;    /* the first rung, the rung that extends it, the first fp16 rung, the last id */
    for (int i = 0; i < nk; i++) {
        if (!k1 && ks[i]->extends == 0) k1 = ks[i]->id;
        if (k1 && !k2 && ks[i]->extends == k1) k2 = ks[i]->id;
        if (!k16 && (ks[i]->dtypes & (1u << DT_FP16))) k16 = ks[i]->id;
        last = ks[i]->id;
    }
    printf("step05: the chapter's fused attention on this GPU, B=%ld H=%ld N=%ld D=%ld%s\n", o->B, o->H, o->N, o->D,
           o->causal ? ", causal" : "");
    printf("device: %s\n", gpu_describe());
    printf("each kernel checked against float64 on the CPU (%s; output poisoned with NaN before each run), then timed "
           "(CUDA events, median of %ld)\n", ref_stride(o->N) == 1 ? "every row" : "every 61st row of every head", o->repeat);
    gpu_refusals_quiet(1);
    Opts q = *o;
    q.dtype = DT_FP32; q.kernel = q.kernel_last = k1;
    Table t1, t2;
    printf("\n1. fp32: kernel %d, the chapter's loop on the GPU, one thread per query row (kernel01_transcription.cu,\n"
           "   line for line 04_online_softmax/flash.c)\n", k1);
    int ok = run_table(&q, NULL, 1, &t1);
    if (t1.n_skip) printf("   skipped: kernel %d (%s)\n", k1, t1.why);
    q.dtype = DT_FP16; q.kernel = k16; q.kernel_last = last;
    const int fp16 = fwd_dim_ok(DT_FP16, o->D); /* every GPU from Turing on has fp16 tensor cores */
    if (fp16) {
        printf("\n2. fp16: the tensor cores, kernels %d and up (each checked, then timed; the fastest shown)\n", k16);
        ok &= run_table(&q, NULL, 1, &t2);
        printf("   %d kernels ran and are right, %d wrong, %d skipped on this GPU (./step05 --dtype fp16 lists each)\n",
               t2.n_ok, t2.n_wrong, t2.n_skip);
        if (t2.n_skip) printf("   skipped: kernel%s %s (%s)\n", strchr(t2.skipped, ',') ? "s" : "", t2.skipped, t2.why);
    } else {
        printf("\n2. fp16: skipped (D = %ld: the tensor-core kernels take D = 64 or 128)\n", o->D);
    }
    const double sp = 2.0 * o->B * o->H * o->N * o->N;
    printf("\nmore: ./step05 --dtype fp32 and --dtype fp16 (every kernel), make idea K=%d (one rung's idea), "
           "./step05 --check, 05_cuda_fused/README.md\n", k16);
    if (t1.best_k && t1.t_naive > 0) {
        const double x = t1.t_naive / t1.best;
        char tiling[128];
        snprintf(tiling, sizeof tiling, "here the tiling is worth more than the traffic saved; kernel %d adds the tiling "
                 "(./step05 --dtype fp32)", k2);
        printf("answer (fp32): kernel %d, the chapter's loop, takes %.3f ms vs naive's %.3f ms: %.2fx. Naive writes S and "
               "P (%s) and reads them back, but runs its two products on cuBLAS's fp32 GEMM (tiles in shared memory, "
               "every thread busy); kernel %d never writes them, but each thread reads every K and V row itself, a "
               "scalar loop: %s.\n", k1, t1.best, t1.t_naive, x, fmt_bytes(sp * 4, b, sizeof b), k1,
               x >= 1 ? "saving S and P's traffic is worth more here than cuBLAS's tiling" : tiling);
    }
    if (fp16 && t2.best_k && t2.t_naive > 0)
        printf("answer (fp16): the fastest tensor-core kernel here (kernel %d, %s) takes %.3f ms vs naive fp16's %.3f ms: "
               "%.2fx. Both products on the tensor cores, and S and P (%s in fp16) never leave the chip: the fusion "
               "and the tensor cores together.\n", t2.best_k->id, t2.best_k->name, t2.best, t2.t_naive,
               t2.t_naive / t2.best, fmt_bytes(sp * 2, b, sizeof b));
    return ok ? EXIT_OK : EXIT_FAIL;
}

/* FlashAttention's benchmark: batch = 16384/N, heads = 2048/D, N = 512..16384. */
int fwd_run_bench(const Opts *o, FILE *csv)
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
        if (csv) csv_row_shape(csv, "ceiling", o->dtype, 1, 1, gn, gn, 0, -1, "cuBLAS GEMM", gms, ceil_tf, 0, NULL);
    } else {
        printf("matrix-product ceiling: the %ld^3 GEMM does not fit on this GPU\n", gn);
    }
    int ids[MAX_KERNELS + 1];                          /* row 0 naive, row i + 1 the registry's kernel i */
    for (int i = 0; i < nk; i++) ids[i + 1] = ks[i]->id;
    for (int b = 0; b < 2; b++) {
        long D = Ds[b];
        if ((o->given & OPT_GIVEN_DIM) && D != o->D) continue; /* --dim: that table only */
        /* one row per method; measure column by column so inputs are made once per N */
        double t[MAX_KERNELS + 1][BENCH_COLS];
        int have[MAX_KERNELS + 1];
        static char skipped[MAX_KERNELS][320];
        memset(have, 0, sizeof have);
        memset(skipped, 0, sizeof skipped);
        gpu_refusals_quiet(1);
        int col = 0;
        for (long N = BENCH_N0; N <= bench_n_last(o); N *= 2, col++) {
            Problem p;
            problem_make(&p, 16384 / N, 2048 / D, N, D, o->dtype, o->causal, o->seed + N, NULL);
            const FusedKernel *run[MAX_KERNELS + 1];
            int slot[MAX_KERNELS + 1], n = 0;
            run[n] = NULL, slot[n++] = 0;                 /* naive first */
            for (int i = 0; i < nk; i++) {
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
            double ms[MAX_KERNELS + 1];
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
        print_bench_table(FAM_FORWARD, D, 4.0 * 16384 * 2048 / (o->causal ? 2 : 1), ids, nk + 1,
                          (const double (*)[BENCH_COLS])t, have, bench_n_last(o)); /* 4*B*H*N*N*D with B*N = 16384, H*D = 2048 */
        for (int i = 0; i < nk; i++)
            if (skipped[i][0]) printf("  kernel %d SKIP at D=%ld: %s (not timed)\n", ks[i]->id, D, skipped[i]);
        gpu_refusals_quiet(0);
    }
    return EXIT_OK;
}

// --- compute-sanitizer's shapes ----------------------------------------------------------------------

/* Every forward kernel (--kernel K[-M]: those) once at N = 65 and 257, D = 64, each dtype, with and without L and
 * ALiBi where it has them; the persistent kernels at shapes of their own. A --kernel that runs nothing is an
 * error, not a pass. */
int fwd_run_sanitize(const Opts *o)
{
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
                for (int i = 0; i < nk; i++) /* and the ALiBi builds (launch_alibi) */
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
    /* The persistent kernels (.persistent) once more where their blocks take several row tiles each (B = 8, H = 16,
     * N = 257: 384 row tiles, more than any GPU's SMs): the ring of tickets and the second item's Q are only
     * exercised there; and causal where the heads go in groups of unequal size (tile_order.cuh: a group's K and V
     * fill half of L2): B = 4, H = 16, N = 1000, D = 128, 51 heads and then 13 on a 50 MiB L2. */
    for (int i = 0; i < nk; i++) {
        const FusedKernel *kp = ks[i];
        const int id = kp->id;
        if (!kp->persistent) continue;
        for (int causal = 0; causal < 2 && opts_kernel(o, id) && fused_runs(kp, DT_FP16, 64); causal++) {
            Problem p;
            problem_make(&p, 8, 16, 257, 64, DT_FP16, causal, 7, NULL);
            dpoison(p.O, p.n, DT_FP16);
            if (kp->launch(p.Q, p.K, p.V, p.O, p.B, p.H, p.N, p.D, DT_FP16, causal, NULL) != 0) return EXIT_FAIL;
            gpu_sync_check();
            printf("ran kernel %d fp16 B=8 H=16 N=257 D=64%s (several row tiles per block)\n", id, causal ? " causal" : "");
            ran++;
            problem_free(&p);
        }
        if (opts_kernel(o, id) && fused_runs(kp, DT_FP16, 128)) {
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
    return sanitize_end(ran, "--sanitize-shapes: no kernel of --kernel %ld-%ld runs on this GPU", o->kernel, o->kernel_last);
}

#endif /* HAVE_CUDA */

