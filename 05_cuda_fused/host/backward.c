/*
 * backward.c: step 05's backward, the host side (backward.h). Its own science: the float64 reference of dQ, dK,
 * dV, the gradients' tolerance, the forward's L that the kernels start from. Its runs: ./step05 --check's backward
 * cases; ./step05 --backward (check, then time, every backward kernel against the naive cuBLAS backward of step
 * 01, with their memory); ./step05 --bench --backward (FlashAttention's shapes, TFLOP/s = 2.5 * 4 B H N^2 D /
 * time, half of it causal); and the shapes compute-sanitizer runs. The kernels are backward/bwdNN_*.cu,
 * registered in kernels.h's backward registry; the forward that gives them O and L is the highest-numbered
 * forward kernel with launch_l that runs the case. The problem, the grid's walk, the tables and the CSV are the
 * runner's (runner.c).
 */
#define _POSIX_C_SOURCE 200809L

#include "common.h"
#include "backward.h"
#include "gpu.h"
#include "../kernels.h"
#include "runner.h"
#include "../../01_naive/naive.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// --- the float64 reference ---------------------------------------------------------

static double dotd(const float *a, const float *b, long D)
{
    double acc = 0;
    for (long d = 0; d < D; d++) acc += (double)a[d] * b[d];
    return acc;
}

typedef struct {
    const float *q, *k, *v, *dO;  /* [bh, N, D] */
    long bh, N, D, stride, rows;
    int causal;
    double *L, *o, *dq, *dk, *dv;
    long h_next, nthreads;        /* heads t, t + nthreads, ... for thread t */
    double *scratch;              /* 3 N doubles per thread */
} RefJob;

/* One head: every row's L and Delta (dQ of the sampled rows on the way),
 * then dK and dV of the sampled keys, column by column of P. */
static void ref_head(const RefJob *j, long h, double *s, double *dp, double *delta)
{
    const long N = j->N, D = j->D, rows = j->rows;
    const double scale = 1.0 / sqrt((double)D);
    const size_t off = (size_t)h * N * D;
    const float *q = j->q + off, *k = j->k + off, *v = j->v + off, *dO = j->dO + off;
    double *L = j->L + (size_t)h * N;
    double *o = j->o + (size_t)h * rows * D, *dq = j->dq + (size_t)h * rows * D;
    double *dk = j->dk + (size_t)h * rows * D, *dv = j->dv + (size_t)h * rows * D;
    for (long i = 0; i < N; i++) {
        const long jend = j->causal ? i + 1 : N;
        double m = -INFINITY, l = 0, dl = 0;
        for (long c = 0; c < jend; c++) {
            s[c] = dotd(q + i * D, k + c * D, D) * scale;     // s = q_i . k_c / sqrt(D)
            if (s[c] > m) m = s[c];
        }
        for (long c = 0; c < jend; c++) l += exp(s[c] - m);
        L[i] = m + log(l);                                     // L = m + log l
        for (long c = 0; c < jend; c++) {
            s[c] = exp(s[c] - L[i]);                           // p_ic
            dp[c] = dotd(dO + i * D, v + c * D, D);            // dp_ic = dO_i . v_c
            dl += s[c] * dp[c];
        }
        delta[i] = dl;                                         // Delta_i = sum_c p dp (= dO_i . O_i)
        if (i % j->stride) continue;
        double *orow = o + (i / j->stride) * D, *dqrow = dq + (i / j->stride) * D;
        for (long d = 0; d < D; d++) orow[d] = dqrow[d] = 0;
        for (long c = 0; c < jend; c++) {
            const double w = s[c] * (dp[c] - dl) * scale;     // ds_ic / sqrt(D)
            for (long d = 0; d < D; d++) {
                orow[d] += s[c] * v[c * D + d];                // O_i = sum_c p v_c
                dqrow[d] += w * k[c * D + d];                  // dQ_i = sum_c ds k_c / sqrt(D)
            }
        }
    }
    for (long c = 0; c < N; c += j->stride) {                  // key c: column c of P
        double *dkrow = dk + (c / j->stride) * D, *dvrow = dv + (c / j->stride) * D;
        for (long d = 0; d < D; d++) dkrow[d] = dvrow[d] = 0;
        for (long i = j->causal ? c : 0; i < N; i++) {
            const double p = exp(dotd(q + i * D, k + c * D, D) * scale - L[i]);
            const double ds = p * (dotd(dO + i * D, v + c * D, D) - delta[i]) * scale;
            for (long d = 0; d < D; d++) {
                dvrow[d] += p * dO[i * D + d];                 // dV_c = sum_i p dO_i
                dkrow[d] += ds * q[i * D + d];                 // dK_c = sum_i ds q_i / sqrt(D)
            }
        }
    }
}

static void *ref_thread(void *arg)
{
    const RefJob *j = arg;
    double *s = j->scratch, *dp = s + j->N, *delta = dp + j->N;
    for (long h = j->h_next; h < j->bh; h += j->nthreads) ref_head(j, h, s, dp, delta);
    return NULL;
}

void bwd_reference(const float *q, const float *k, const float *v, const float *dO, long bh, long N, long D, int causal,
                   long stride, double *L, double *o, double *dq, double *dk, double *dv)
{
    enum { MAXT = 64 };
    long cores = sysconf(_SC_NPROCESSORS_ONLN), nt = bh < cores ? bh : cores;
    if (nt < 1) nt = 1;
    if (nt > MAXT) nt = MAXT;
    RefJob jobs[MAXT];
    pthread_t th[MAXT];
    /* Scratch allocated here, in one thread: the tracked allocator keeps
     * unlocked counters. */
    double *scratch = xmalloc((size_t)nt * 3 * N * sizeof(double), "reference scratch");
    for (long t = 0; t < nt; t++) {
        RefJob j = {q, k, v, dO, bh, N, D, stride, (N + stride - 1) / stride, causal, L, o, dq, dk, dv, t, nt,
                    scratch + (size_t)t * 3 * N};
        jobs[t] = j;
    }
    long started = 0;
    for (long t = 1; t < nt; t++, started++)
        if (pthread_create(&th[t], NULL, ref_thread, &jobs[t]) != 0) break;
    ref_thread(&jobs[0]);
    for (long t = 1; t <= started; t++) pthread_join(th[t], NULL);
    for (long t = started + 1; t < nt; t++) ref_thread(&jobs[t]);   /* threads that could not start: here */
    tfree(scratch);
}

int bwd_dim_ok(int dtype, long D)
{
    return dtype == DT_FP32 ? D >= 16 && D <= 128 && D % 16 == 0 : D == 64 || D == 128;
}

#ifdef HAVE_CUDA

// --- one problem: inputs, the forward's O and L, the gradients ------------------------

/* Q, K, V and dO from the seed, O and the gradients' room on the device (runner.c). */
static void bp_make(Problem *p, long B, long H, long N, long D, int dtype, int causal, uint64_t seed)
{
    problem_make(p, B, H, N, D, dtype, causal, seed, NULL);
    problem_add_backward(p, seed, NULL);
}

/* The forward the backward kernels pair with: the highest-numbered one that
 * writes L and runs dtype at D on this GPU, its shared memory included (fp32:
 * kernel 2; fp16/bf16: kernel 23 on Hopper, kernel 9 on an A100, a smaller
 * one where a block has less shared memory). NULL if none. */
static const FusedKernel *fwd_with_l(int dtype, long D)
{
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    const FusedKernel *best = NULL;
    for (int i = 0; i < nk; i++)
        if (ks[i]->launch_l && fused_runs(ks[i], dtype, D) && fused_fits(ks[i], dtype, D)) best = ks[i];
    return best;
}

/* The reference rows of a problem (all rows, or every stride-th). */
typedef struct {
    long stride, rows;
    double *L, *o, *g[3];           /* L [bh, N]; o, dQ, dK, dV [bh, rows, D] */
    double gmax;                    /* the largest |gradient| over the three */
} BwdRef;

static BwdRef ref_make(const Problem *p, long stride)
{
    BwdRef r;
    const long bh = p->B * p->H;
    r.stride = stride;
    r.rows = (p->N + stride - 1) / stride;
    const size_t nr = (size_t)bh * r.rows * p->D;
    r.L = xmalloc((size_t)bh * p->N * sizeof(double), "reference L");
    r.o = xmalloc(nr * sizeof(double), "reference O");
    for (int g = 0; g < 3; g++) r.g[g] = xmalloc(nr * sizeof(double), "reference gradient");
    bwd_reference(p->q, p->k, p->v, p->dout, bh, p->N, p->D, p->causal, stride, r.L, r.o, r.g[0], r.g[1], r.g[2]);
    r.gmax = 0;
    for (int g = 0; g < 3; g++)
        for (size_t i = 0; i < nr; i++)
            if (fabs(r.g[g][i]) > r.gmax) r.gmax = fabs(r.g[g][i]);
    return r;
}

static void ref_free(BwdRef *r)
{
    tfree(r->L), tfree(r->o);
    for (int g = 0; g < 3; g++) tfree(r->g[g]);
}

static const char *const GNAME[3] = {"dQ", "dK", "dV"};

/* The three gradients now on the device against the reference. atol[g]: the
 * absolute tolerance of gradient g; fp32 adds 1e-5 relative. fulls[g] keep the
 * whole downloaded tensors (for the rerun comparison). */
static void grads_compare(const Problem *p, const BwdRef *r, const double atol[3], Err e[3], float *fulls[3],
                          float *rows)
{
    void *dev[3] = {p->dQ, p->dK, p->dV};
    const size_t nr = (size_t)p->B * p->H * r->rows;
    for (int g = 0; g < 3; g++) e[g] = compare_rows(p, r->stride, dev[g], r->g[g], nr, atol[g], fulls[g], rows);
}

static void poison_grads(const Problem *p)
{
    dpoison(p->dQ, p->n, p->dtype), dpoison(p->dK, p->n, p->dtype), dpoison(p->dV, p->n, p->dtype);
}

/* The naive cuBLAS backward with its own forward's P (S's buffer holds dP,
 * then dS). Returns -1 when S and P do not fit. */
static int naive_fwd_bwd(Problem *p, void **S, void **P)
{
    if (naive_buffers(p, S, P) != 0) return -1;
    naive_attention_gpu_ws(p->Q, p->K, p->V, p->O, p->B, p->H, p->N, p->D, p->dtype, p->causal, *S, *P, NULL);
    naive_attention_backward_gpu_ws(p->Q, p->K, p->V, p->dO, *P, *S, p->dQ, p->dK, p->dV, p->B, p->H, p->N, p->D, p->dtype, NULL);
    return 0;
}

/* FlashAttention's accuracy rule for the 16-bit gradients: at most 2x the
 * naive backward's error in the same dtype, gradient by gradient. A floor of
 * half a unit in the last place of the largest gradient (2^-11 fp16, 2^-8 bf16,
 * times |gradient| max): the rounding of the output itself, which naive can
 * escape where its result is exact (N = 1: dS = 0 exactly in 16 bits) and a
 * kernel summing in another order cannot. fp32: 1e-5 of the largest gradient
 * (at least 1e-5) absolute, plus 1e-5 relative. */
static double grad_tol(int dtype, double naive_err, double gmax)
{
    if (dtype == DT_FP32) return 1e-5 * (gmax > 1 ? gmax : 1);
    const double floor = ldexp(gmax, dtype == DT_FP16 ? -11 : -8);
    const double t = 2 * naive_err > floor ? 2 * naive_err : floor;
    const double cap = 2e-2 * (gmax > 1 ? gmax : 1);   /* the forward's "never above 2e-2", at the gradient's scale */
    return t < cap ? t : cap;
}

// --- the checks ---------------------------------------------------------------------

/* The end of a check's line: "", or how the kernel splits this case's last round on this GPU (split_note). */
static const char *split_note(const BackwardKernel *kb, long B, long H, long N, long D, int causal, char *buf, size_t n)
{
    buf[0] = '\0';
    if (kb->split_note) kb->split_note(B, H, N, D, causal, buf, n);
    return buf;
}

/* The forwards' L: every kernel with launch_l, against the float64 L, and its
 * O bit for bit against the same kernel's run without L (the store changes
 * nothing else). Leaves the last one's O and L in p. tag: " causal" and the
 * batch where it is not the grid's, as the case's other lines say it. */
static void check_forward_l(Problem *p, const BwdRef *r, float *o1, float *o2, const char *tag)
{
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    const size_t nL = (size_t)p->B * p->H * p->N;
    float *Lh = xmalloc(nL * 4, "L");
    char name[160];
    problem_need_L(p);
    for (int i = 0; i < nk; i++) {
        const FusedKernel *kn = ks[i];
        if (!kn->launch_l || !fused_runs(kn, p->dtype, p->D)) continue;
        snprintf(name, sizeof name, "L kernel%d %s N=%ld D=%ld%s", kn->id, dtype_name(p->dtype), p->N, p->D, tag);
        dpoison(p->O, p->n, p->dtype);
        gpu_refusal_clear();
        if (kn->launch(p->Q, p->K, p->V, p->O, p->B, p->H, p->N, p->D, p->dtype, p->causal, NULL) != 0) {
            report_not_run(name, "");
            continue;
        }
        gpu_sync_check();
        ddownload(o1, p->O, p->n, p->dtype);
        dpoison(p->O, p->n, p->dtype);
        dpoison(p->L, nL, DT_FP32);
        gpu_refusal_clear();
        if (kn->launch_l(p->Q, p->K, p->V, p->O, p->L, p->B, p->H, p->N, p->D, p->dtype, p->causal, NULL) != 0) {
            report_not_run(name, "launch_l: ");
            continue;
        }
        gpu_sync_check();
        ddownload(o2, p->O, p->n, p->dtype);
        ddownload(Lh, p->L, nL, DT_FP32);
        const double atol = p->dtype == DT_FP32 ? 1e-5 : 1e-4;   /* L ~ 1..10: fp32 sums and exponentials */
        Err e = compare(Lh, r->L, nL, atol, 1e-5);
        const int same = memcmp(o1, o2, p->n * 4) == 0;
        char eb[128];
        report(e.n_bad == 0 && same, &e, name, "L = m + log l %s (tol %.0e abs + 1e-5 rel); O %s the run without L",
               fmt_err(&e, eb, sizeof eb), atol, same ? "bit-identical to" : "DIFFERS from");
    }
    tfree(Lh);
}

static void check_case(long only, int dt, long B, long H, long N, long D, int causal, uint64_t seed)
{
    int nb;
    const BackwardKernel *const *bs = bwd_kernels(&nb);
    char name[200];
    Problem p;
    bp_make(&p, B, H, N, D, dt, causal, seed);
    BwdRef r = ref_make(&p, 1);
    float *full[3], *full2[3], *rows = xmalloc(p.n * 4, "gradient rows");
    for (int g = 0; g < 3; g++) full[g] = xmalloc(p.n * 4, "gradient"), full2[g] = xmalloc(p.n * 4, "gradient again");
    char tag[48]; /* " causal", and the batch where it is not the grid's B = 2, H = 3 */
    if (B != 2 || H != 3) snprintf(tag, sizeof tag, "%s (B=%ld H=%ld)", causal ? " causal" : "", B, H);
    else snprintf(tag, sizeof tag, "%s", causal ? " causal" : "");

    /* The yardstick: naive's backward in the same dtype, on the same inputs. */
    double naive_err[3] = {0, 0, 0};
    {
        void *S, *P;
        const double loose[3] = {1e30, 1e30, 1e30};
        Err en[3];
        poison_grads(&p);
        snprintf(name, sizeof name, "bwd naive %s N=%ld D=%ld%s", dtype_name(dt), N, D, tag);
        if (naive_fwd_bwd(&p, &S, &P) == 0) {
            gpu_sync_check();
            grads_compare(&p, &r, loose, en, full, rows);
            for (int g = 0; g < 3; g++) naive_err[g] = en[g].n_nonfinite ? INFINITY : en[g].max_abs;
            dfree(S), dfree(P);
            /* The yardstick is judged too, at the most any kernel is allowed (grad_tol's cap): a broken naive
             * backward would otherwise only widen every 16-bit kernel's tolerance, silently. */
            const double cap = grad_tol(dt, 1e30, r.gmax);
            int ok = 1;
            for (int g = 0; g < 3; g++) ok &= naive_err[g] <= cap;
            report(ok, NULL, name, "the yardstick, cuBLAS with P: max abs dQ %.2e dK %.2e dV %.2e (at most %.2e)",
                   naive_err[0], naive_err[1], naive_err[2], cap);
        } else {
            report_skip(name, "S and P do not fit: the kernels' tolerance is grad_tol's cap");
            for (int g = 0; g < 3; g++) naive_err[g] = 1e30;
        }
    }
    /* O and L from the forwards (checked), the last one's kept. */
    check_forward_l(&p, &r, full2[0], full2[1], tag);
    if (!fwd_with_l(dt, D)) {
        snprintf(name, sizeof name, "bwd %s N=%ld D=%ld%s", dtype_name(dt), N, D, tag);
        report_skip(name, "no forward kernel writes L for %s at D=%ld on this GPU", dtype_name(dt), D);
    }
    for (int i = 0; i < nb && fwd_with_l(dt, D); i++) {
        const BackwardKernel *kb = bs[i];
        if ((only && kb->id != only) || !bwd_runs(kb, dt, D)) continue;
        double tol[3];
        for (int g = 0; g < 3; g++) tol[g] = grad_tol(dt, naive_err[g], r.gmax);
        size_t wsb = kb->workspace(B, H, N, D, dt);
        void *ws = dmalloc(wsb ? wsb : 1, "backward workspace");
        snprintf(name, sizeof name, "bwd%d %s B=%ld H=%ld N=%ld D=%ld%s", kb->id, dtype_name(dt), B, H, N, D,
                 causal ? " causal" : ""); /* the batch is in the name already: not the tag's */
        Err e[3];
        poison_grads(&p);
        dpoison(ws, wsb / 4, DT_FP32);
        gpu_refusal_clear();
        if (kb->launch(p.Q, p.K, p.V, p.O, p.dO, p.L, p.dQ, p.dK, p.dV, ws, B, H, N, D, dt, causal, NULL) != 0) {
            report_not_run(name, "");
            dfree(ws);
            continue;
        }
        gpu_sync_check();
        grads_compare(&p, &r, tol, e, full, rows);
        int ok = 1, worst = -1;
        for (int g = 0; g < 3; g++)
            if (e[g].n_bad) { ok = 0; if (worst < 0) worst = g; }
        char split[80];
        report(ok, worst >= 0 ? &e[worst] : NULL, name,
               "max abs dQ %.2e dK %.2e dV %.2e (rel L2 %.1e %.1e %.1e); naive %s %.2e %.2e %.2e; tol %.2e %.2e %.2e%s%s%s",
               e[0].max_abs, e[1].max_abs, e[2].max_abs, e[0].rel_l2, e[1].rel_l2, e[2].rel_l2, dtype_name(dt),
               naive_err[0], naive_err[1], naive_err[2], tol[0], tol[1], tol[2], worst >= 0 ? "; first bad: " : "",
               worst >= 0 ? GNAME[worst] : "", split_note(kb, B, H, N, D, causal, split, sizeof split));
        /* Rerun on freshly poisoned gradients: dK and dV must be the same bit
         * for bit (a race, an unwritten element shows here); dQ too where the
         * kernel is deterministic, else within the tolerance. */
        poison_grads(&p);
        gpu_refusal_clear();
        if (kb->launch(p.Q, p.K, p.V, p.O, p.dO, p.L, p.dQ, p.dK, p.dV, ws, B, H, N, D, dt, causal, NULL) != 0) {
            report_not_run(name, "rerun: ");
            dfree(ws);
            continue;
        }
        gpu_sync_check();
        ddownload(full2[0], p.dQ, p.n, dt), ddownload(full2[1], p.dK, p.n, dt), ddownload(full2[2], p.dV, p.n, dt);
        const int kv_same = !memcmp(full[1], full2[1], p.n * 4) && !memcmp(full[2], full2[2], p.n * 4);
        double dqd = 0;
        size_t ndiff = 0, nonfinite = 0;
        for (size_t x = 0; x < p.n; x++) {
            const double d = fabs((double)full[0][x] - full2[0][x]);
            if (d > dqd) dqd = d;
            ndiff += full[0][x] != full2[0][x];
            nonfinite += !f32_is_finite(full2[0][x]);   /* a poisoned element left unwritten: counted, never a pass */
        }
        if (nonfinite) dqd = INFINITY;
        snprintf(name, sizeof name, "bwd%d %s N=%ld D=%ld%s rerun", kb->id, dtype_name(dt), N, D, tag);
        if (kb->dq_deterministic)
            report(kv_same && ndiff == 0 && !nonfinite, NULL, name, "dQ, dK, dV bit-identical%s", kv_same && !ndiff ? "" : ": NOT");
        else
            report(kv_same && dqd <= tol[0], NULL, name,
                   "dK, dV %s; dQ by fp32 atomics (added in arrival order, not bit-identical by design): "
                   "%zu of %zu elements differ, %zu not finite, max diff %.1e (tol %.2e)",
                   kv_same ? "bit-identical" : "DIFFER", ndiff, p.n, nonfinite, dqd, tol[0]);
        dfree(ws);
        /* A kernel that does another's arithmetic in another order of issue
         * (dkdv_as): its dK and dV are that kernel's, bit for bit, except in
         * the cases where it adds the row tiles in an order of its own
         * (own_order). */
        const BackwardKernel *kx = kb->dkdv_as && !(kb->own_order && kb->own_order(D, causal)) ? bwd_kernel(kb->dkdv_as) : NULL;
        if (kx && bwd_runs(kx, dt, D)) {
            const size_t wsx = kx->workspace(B, H, N, D, dt);
            void *wx = dmalloc(wsx ? wsx : 1, "backward workspace");
            snprintf(name, sizeof name, "bwd%d %s N=%ld D=%ld%s vs bwd%d", kb->id, dtype_name(dt), N, D, tag, kx->id);
            poison_grads(&p);
            dpoison(wx, wsx / 4, DT_FP32);
            gpu_refusal_clear();
            if (kx->launch(p.Q, p.K, p.V, p.O, p.dO, p.L, p.dQ, p.dK, p.dV, wx, B, H, N, D, dt, causal, NULL) != 0) {
                report_not_run(name, "the other kernel: ");
            } else {
                gpu_sync_check();
                ddownload(full2[1], p.dK, p.n, dt), ddownload(full2[2], p.dV, p.n, dt);
                size_t diff = 0; /* == and not memcmp: two NaNs (unwritten, poisoned) must differ */
                for (size_t x = 0; x < p.n; x++) diff += !(full[1][x] == full2[1][x]) + !(full[2][x] == full2[2][x]);
                report(diff == 0, NULL, name, "dK, dV bit-identical to backward kernel %d's, whose arithmetic it does "
                       "(%zu of %zu values differ)", kx->id, diff, 2 * p.n);
            }
            dfree(wx);
        }
    }
    for (int g = 0; g < 3; g++) tfree(full[g]), tfree(full2[g]);
    tfree(rows);
    ref_free(&r);
    problem_free(&p);
}

/* The grid's case (check_grid): B = 2, H = 3 at every N of CHECK_NS, causal or not. */
/* Where backward kernel 20 splits its last round on 132 SMs: the check's case and a sanitizer's shape (below). */
enum { SPLIT_B = 3, SPLIT_H = 10, SPLIT_N = 600 };
static void grid_case(void *ctx, int dt, int b, long D, int a, long N, int causal)
{
    check_case(*(const long *)ctx, dt, 2, 3, N, D, causal,
               7000 + 101 * (uint64_t)dt + 17 * (uint64_t)a + 3 * (uint64_t)b + (uint64_t)causal);
}

/* The backward's own cases after a head dim's grid, 16-bit only. */
static void grid_extras(void *ctx, int dt, int b, long D)
{
    const long only = *(const long *)ctx;
    if (dt == DT_FP32) return;
    /* More K/V tiles than an SM count (96 heads x 3 tiles of 128 keys = 288, 2.2 per SM on 132): at B = 2,
     * H = 3 every block of a persistent backward kernel, one per SM, takes one tile, and a tile after the first
     * (its dK, dV restarted, the next K_j loaded under the last one's end) would go unchecked. */
    for (int causal = 0; causal < 2; causal++)
        check_case(only, dt, 4, 24, 257, D, causal, 7900 + 101 * (uint64_t)dt + 3 * (uint64_t)b + (uint64_t)causal);
    /* A last round split into parts (backward kernel 20, not causal): SPLIT_B x SPLIT_H heads x 5 tiles = 150 K/V
     * tiles of 5 row tiles (D = 64) or 10 (D = 128) on 132 SMs (an H100 SXM or an H200) leave 18 for the last round,
     * which it cuts in five parts each (on an H100 PCIe's 114 SMs, 36 in three parts; kernel 20's lines say how
     * it splits on this GPU); the parts' sums meet in the last part. */
    check_case(only, dt, SPLIT_B, SPLIT_H, SPLIT_N, D, 0, 7920 + 101 * (uint64_t)dt + 3 * (uint64_t)b);
    /* More heads than a grid has rows (65535): the side passes (bwd_prep.cu) give each head a grid row and
     * stride past that many, so a head after the 65535th is the one a missing stride would leave unwritten
     * (poisoned: a FAIL), and a pass that refused so many heads would be a launch not run (a FAIL too, not a
     * refusal of this GPU's). N = 2 keeps it small: 65537 x 2 rows, about 1.3 GB of host memory at D = 128. */
    check_case(only, dt, 65537, 1, 2, D, 0, 7950 + 101 * (uint64_t)dt + 3 * (uint64_t)b);
}

/* --- a persistent backward kernel in a CUDA graph and on two streams (as the forward's: host/forward.c) ----------
 *
 * Captured once and replayed on new inputs three times, and two problems on two streams at once for three rounds: dK
 * and dV must equal the base's (the first rung below that is not persistent) plain launch bit for bit, and dQ, which
 * both add up in the order the K/V tiles arrive, within 1e-3 of its largest value (a row tile handed to nobody leaves
 * it NaN, the poison). Where the kernel adds dK's and dV's row tiles in an order of its own (own_order), they too are
 * held to 1e-3 of their largest value. */
static const BackwardKernel *bwd_persistent_base(const BackwardKernel *k)
{
    for (int steps = 0; k && k->persistent && steps < MAX_KERNELS; steps++) k = bwd_kernel(k->extends);
    return k && !k->persistent ? k : NULL;
}

typedef struct { const BackwardKernel *k; Problem *p; void *ws; } BwdLaunch;
static void bwd_launch_on(void *c, void *stream)
{
    const BwdLaunch *x = c;
    const Problem *p = x->p;
    if (x->k->launch(p->Q, p->K, p->V, p->O, p->dO, p->L, p->dQ, p->dK, p->dV, x->ws, p->B, p->H, p->N, p->D, p->dtype,
                     p->causal, stream) != 0)
        fprintf(stderr, "%s: backward kernel %d refused a launch its check had run\n", g_prog, x->k->id);
}

/* The gradients now on p's device buffers (downloaded into got[3]) against kb's plain launch: the dK and dV values that
 * differ (loose: off by more than 1e-3 of their largest), plus the dQ values off by more than 1e-3 of dQ's largest (NaN
 * is off). */
static size_t bwd_persist_diff(const BackwardKernel *kb, Problem *p, void *ws, float *const got[3], float *const base[3],
                               int loose)
{
    poison_grads(p);
    BwdLaunch c = {kb, p, ws};
    bwd_launch_on(&c, NULL);
    gpu_sync_check();
    void *dev[3] = {p->dQ, p->dK, p->dV};
    for (int g = 0; g < 3; g++) ddownload(base[g], dev[g], p->n, p->dtype);
    size_t bad = 0;
    for (int g = 0; g < 3; g++) {
        double vmax = 0;
        for (size_t i = 0; i < p->n; i++) vmax = fabs(base[g][i]) > vmax ? fabs(base[g][i]) : vmax;
        for (size_t i = 0; i < p->n; i++)
            bad += g == 0 || loose ? !(fabs(got[g][i] - base[g][i]) <= 1e-3 * vmax) : !(got[g][i] == base[g][i]);
    }
    return bad;
}

static void bwd_persistent_launch_checks(long only)
{
    /* Blocks that take several K/V tiles each (B = 4, H = 16, N = 1000: 512 K/V tiles), causal and not; and, not
     * causal, the check's case where backward kernel 20 splits the last round (SPLIT_B, SPLIT_H, SPLIT_N): its
     * parts' count, put back to zero by each walk's last part, is met again by the graph's next replay. */
    static const struct { long B, H, N; int causal; uint64_t seed; } shapes[] = {
        {4, 16, 1000, 0, 0}, {4, 16, 1000, 1, 0}, {SPLIT_B, SPLIT_H, SPLIT_N, 0, 200}};
    int nk;
    const BackwardKernel *const *ks = bwd_kernels(&nk);
    char name[160];
    for (int i = 0; i < nk; i++) {
        const BackwardKernel *kp = ks[i], *kb = bwd_persistent_base(kp);
        if (!kp->persistent || !kb || (only && only != kp->id) || BWD_UNAVAILABLE(kp)) continue;
        for (long D = 64; D <= 128; D += 64)
            for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
                const long B = shapes[sh].B, H = shapes[sh].H, N = shapes[sh].N;
                const int causal = shapes[sh].causal, dt = DT_FP16;
                const uint64_t seed = shapes[sh].seed + (uint64_t)D + (uint64_t)causal;
                const int loose = kp->own_order && kp->own_order(D, causal);   /* its own order: dK, dV to 1e-3 too */
                const char *kv_how = loose ? "within 1e-3 of their largest from" : "bit-identical to";
                const FusedKernel *kf = fwd_with_l(dt, D);
                if (!kf || !bwd_runs(kp, dt, D) || !bwd_fits(kp, dt, D) || !bwd_fits(kb, dt, D)) {
                    snprintf(name, sizeof name, "backward: bwd%d graph and streams fp16 B=%ld H=%ld N=%ld D=%ld%s", kp->id,
                             B, H, N, D, causal ? " causal" : "");
                    report_skip(name, "%s", !kf ? "no forward kernel here writes L" : "the kernel or its base does not run here");
                    continue;
                }
                Problem p[2];
                void *ws[2];
                for (int x = 0; x < 2; x++) {
                    bp_make(&p[x], B, H, N, D, dt, causal, 2500 + 10 * (uint64_t)x + seed);
                    problem_need_L(&p[x]);
                    kf->launch_l(p[x].Q, p[x].K, p[x].V, p[x].O, p[x].L, p[x].B, p[x].H, p[x].N, D, dt, causal, NULL);
                    const size_t w = kp->workspace(B, H, N, D, dt), wb = kb->workspace(B, H, N, D, dt);
                    ws[x] = dmalloc(w > wb ? w : wb, "backward workspace");
                }
                gpu_sync_check();
                const size_t n = p[0].n;
                float *got[3], *base[3];
                for (int g = 0; g < 3; g++) got[g] = xmalloc(n * 4, "gradient"), base[g] = xmalloc(n * 4, "gradient");
                void *dev0[3] = {p[0].dQ, p[0].dK, p[0].dV};
                BwdLaunch c = {kp, &p[0], ws[0]};
                bwd_launch_on(&c, NULL);                  /* the launcher's first call, before the capture */
                gpu_sync_check();
                GpuGraph *gr = gpu_graph_capture(bwd_launch_on, &c);
                size_t bad = 0;
                for (int r = 0; r < 3; r++) {
                    problem_new_inputs(&p[0], 2600 + 10 * (uint64_t)r + seed);
                    kf->launch_l(p[0].Q, p[0].K, p[0].V, p[0].O, p[0].L, p[0].B, p[0].H, p[0].N, D, dt, causal, NULL);
                    poison_grads(&p[0]);
                    gpu_graph_replay(gr);
                    gpu_sync_check();
                    for (int g = 0; g < 3; g++) ddownload(got[g], dev0[g], n, dt);
                    bad += bwd_persist_diff(kb, &p[0], ws[0], got, base, loose);
                }
                gpu_graph_free(gr);
                snprintf(name, sizeof name, "backward: bwd%d graph fp16 B=%ld H=%ld N=%ld D=%ld%s", kp->id, B, H, N, D,
                         causal ? " causal" : "");
                char split[80];
                report(bad == 0, NULL, name, "captured once in a CUDA graph, replayed 3 times on new inputs: dK, dV %s "
                       "backward kernel %d's plain launch, dQ within 1e-3 of its largest (%zu of %zu values off)%s", kv_how,
                       kb->id, bad, 9 * n, split_note(kp, B, H, N, D, causal, split, sizeof split));
                /* two streams, three rounds, the gradients poisoned before each round and compared after it, as the
                 * forward's case (host/forward.c) */
                void *s[2] = {gpu_stream_create(), gpu_stream_create()};
                bad = 0;
                for (int r = 0; r < 3; r++) {
                    for (int x = 0; x < 2; x++) poison_grads(&p[x]);
                    for (int x = 0; x < 2; x++) {
                        BwdLaunch cx = {kp, &p[x], ws[x]};
                        bwd_launch_on(&cx, s[x]);
                    }
                    gpu_sync_check();
                    for (int x = 0; x < 2; x++) {
                        void *dev[3] = {p[x].dQ, p[x].dK, p[x].dV};
                        for (int g = 0; g < 3; g++) ddownload(got[g], dev[g], n, dt);
                        bad += bwd_persist_diff(kb, &p[x], ws[x], got, base, loose);
                    }
                }
                for (int x = 0; x < 2; x++) gpu_stream_destroy(s[x]);
                snprintf(name, sizeof name, "backward: bwd%d streams fp16 B=%ld H=%ld N=%ld D=%ld%s", kp->id, B, H, N, D,
                         causal ? " causal" : "");
                report(bad == 0, NULL, name, "two problems on two streams at once, three rounds: dK, dV %s backward "
                       "kernel %d's plain launch, dQ within 1e-3 of its largest (%zu of %zu values off)%s", kv_how, kb->id,
                       bad, 18 * n, split_note(kp, B, H, N, D, causal, split, sizeof split));
                for (int g = 0; g < 3; g++) tfree(got[g]), tfree(base[g]);
                for (int x = 0; x < 2; x++) { dfree(ws[x]); problem_free(&p[x]); }
            }
    }
}

void bwd_run_checks(long only)
{
    static const long D32[] = {16, 32, 64, 128}, D16[] = {64, 128};
    gpu_refusals_quiet(1); /* a refused launch is a SKIP line with the refusal's words */
    report_unavailable(FAM_BACKWARD, only);
    const CheckGrid g = {FAM_BACKWARD, only, "backward: ", {D32, D16, D16}, {4, 2, 2}, 0, grid_case, grid_extras, &only};
    check_grid(&g);
    bwd_persistent_launch_checks(only); /* last: a kernel whose tickets broke would leave its counter wrong for the rest */
}

// --- timing --------------------------------------------------------------------------

/* One method of the backward: naive (kb == NULL, with the forward's P and dS)
 * or a backward kernel with its workspace. */
typedef struct { const BackwardKernel *kb; Problem *p; void *S, *P, *ws; } BwdCtx;

static void bwd_time_fn(void *ctx)
{
    BwdCtx *c = ctx;
    Problem *p = c->p;
    if (c->kb)
        c->kb->launch(p->Q, p->K, p->V, p->O, p->dO, p->L, p->dQ, p->dK, p->dV, c->ws, p->B, p->H, p->N, p->D, p->dtype,
                      p->causal, NULL);
    else
        naive_attention_backward_gpu_ws(p->Q, p->K, p->V, p->dO, c->P, c->S, p->dQ, p->dK, p->dV, p->B, p->H, p->N, p->D,
                                        p->dtype, NULL);
}

/* A forward kernel with or without L, for what L costs. */
typedef struct { const FusedKernel *kn; Problem *p; int with_l; } FwdCtx;
static void fwd_time_fn(void *ctx)
{
    FwdCtx *c = ctx;
    Problem *p = c->p;
    if (c->with_l) c->kn->launch_l(p->Q, p->K, p->V, p->O, p->L, p->B, p->H, p->N, p->D, p->dtype, p->causal, NULL);
    else c->kn->launch(p->Q, p->K, p->V, p->O, p->B, p->H, p->N, p->D, p->dtype, p->causal, NULL);
}

static double bwd_flops(long B, long H, long N, long D, int causal)
{
    return 2.5 * attn_flops(B, H, N, D, causal);   /* FlashAttention's convention: 2.5x the forward */
}

// --- ./step05 --backward ---------------------------------------------------------------

/* The CSV's errors of a backward: the largest max abs and rel L2 over dQ, dK, dV (into w). */
static const double *worst_of(const Err e[3], double w[2])
{
    w[0] = fmax(e[0].max_abs, fmax(e[1].max_abs, e[2].max_abs));
    w[1] = fmax(e[0].rel_l2, fmax(e[1].rel_l2, e[2].rel_l2));
    return w;
}

/* Write the device gradient g ([B, H, N, D] of p's dtype) to path as float32 .npy; 0, or -1 after one line. */
static int save_grad(const Problem *p, const void *g, const char *path, const char *name)
{
    if (!path) return 0;
    float *h = xmalloc(p->n * 4, "gradient");
    ddownload(h, g, p->n, p->dtype);
    const long shp[4] = {p->B, p->H, p->N, p->D};
    const int rc = npy_save(path, h, shp, 4, DT_FP32);
    tfree(h);
    if (rc != 0) fprintf(stderr, "step05: cannot write %s\n", path);
    else printf("wrote %s to %s (float32 [%ld, %ld, %ld, %ld])\n", name, path, p->B, p->H, p->N, p->D);
    return rc;
}

int bwd_run_default(const Opts *o, FILE *csv, const BwdFiles *f)
{
    int nb, ok = 1;
    const BackwardKernel *const *bs = bwd_kernels(&nb);
    char b1[32], b2[32], b3[32], b4[32], desc[512], label[32], lim[160];
    double worst[2];
    Problem p;
    printf("step05 --backward: fused attention backward vs naive, %s, B=%ld H=%ld N=%ld D=%ld%s\n", dtype_name(o->dtype),
           o->B, o->H, o->N, o->D, o->causal ? ", causal" : "");
    printf("device: %s\n", gpu_describe());
    gpu_refusals_quiet(1); /* a refused launch is a SKIP line below, with the refusal's words */
    const FusedKernel *fk = fwd_with_l(o->dtype, o->D);
    if (!fk) { /* a limit of this GPU, not a failure: the kernels that write L are refused or unavailable here */
        printf("SKIP: no forward kernel that writes L launches %s at D=%ld on this GPU (the backward starts from the "
               "forward's L): nothing to run\n", dtype_name(o->dtype), o->D);
        return EXIT_OK;
    }
    if (f && f->dout) {                                   /* the reader's Q, K, V and dO */
        const long shp[4] = {o->B, o->H, o->N, o->D};
        problem_make(&p, o->B, o->H, o->N, o->D, o->dtype, o->causal, o->seed, o);
        problem_add_backward(&p, o->seed, npy_load("--do", f->dout, shp, 4));
        printf("inputs: --q %s --k %s --v %s --do %s, rounded to %s\n", o->qfile, o->kfile, o->vfile, f->dout,
               dtype_name(o->dtype));
    } else {
        bp_make(&p, o->B, o->H, o->N, o->D, o->dtype, o->causal, o->seed);
    }
    const long stride = ref_stride(o->N);
    printf("reference: float64 on the CPU, %s of every head: dQ rows and dK, dV rows (keys)\n",
           stride == 1 ? "all rows" : "every 61st row");
    BwdRef r = ref_make(&p, stride);
    float *full[3], *rows = xmalloc(p.n * 4, "gradient rows");
    for (int g = 0; g < 3; g++) full[g] = xmalloc(p.n * 4, "gradient");
    const size_t nn = (size_t)p.B * p.H * p.N * p.N * dtype_size(p.dtype);
    const double loose[3] = {1e30, 1e30, 1e30};

    /* 1. naive: its forward's S and P live only while it runs. */
    printf("\nchecks (gradients poisoned with NaN before each run; max abs error of dQ, dK, dV):\n");
    Err en[3];
    double naive_err[3] = {0, 0, 0}, t_naive = -1;
    size_t peak_naive = 0;
    {
        void *S, *P;
        dmem_reset_peak();
        poison_grads(&p);
        if (naive_fwd_bwd(&p, &S, &P) == 0) {
            gpu_sync_check();
            grads_compare(&p, &r, loose, en, full, rows);
            for (int g = 0; g < 3; g++) naive_err[g] = en[g].max_abs;
            printf("  %-9s %-16s dQ %.2e  dK %.2e  dV %.2e  (rel L2 %.1e %.1e %.1e)\n", "naive", "cuBLAS+softmax",
                   en[0].max_abs, en[1].max_abs, en[2].max_abs, en[0].rel_l2, en[1].rel_l2, en[2].rel_l2);
            BwdCtx c = {NULL, &p, S, P, NULL};
            t_naive = gpu_time_median_ms(bwd_time_fn, &c, 2, (int)o->repeat);
            peak_naive = dmem_peak();
            dfree(S), dfree(P);
        } else {
            printf("  %-9s OOM: P and dS need %s of device memory, %s\n", "naive", fmt_bytes(2.0 * nn, b1, sizeof b1),
                   dmem_limit_desc(lim, sizeof lim));
        }
    }
    /* 2. the forward's O and L, then each kernel with its workspace. */
    problem_need_L(&p);
    if (fk->launch_l(p.Q, p.K, p.V, p.O, p.L, p.B, p.H, p.N, p.D, p.dtype, p.causal, NULL) != 0) return EXIT_FAIL;
    gpu_sync_check();
    double t_k[MAX_KERNELS], tol[3];
    size_t peak_k[MAX_KERNELS];
    Err ek[MAX_KERNELS][3];
    for (int g = 0; g < 3; g++) tol[g] = grad_tol(p.dtype, t_naive >= 0 ? naive_err[g] : 1e30, r.gmax);
    for (int i = 0; i < nb; i++) {
        const BackwardKernel *kb = bs[i];
        t_k[i] = -1;
        if (!opts_kernel(o, kb->id)) continue;
        if ((kb->dtypes & (1u << o->dtype)) && BWD_UNAVAILABLE(kb))
            printf("  %-9s %-16s skipped: %s\n", kernel_label(FAM_BACKWARD, kb->id, label, sizeof label), kb->name, BWD_UNAVAILABLE(kb));
        if (!bwd_runs(kb, o->dtype, o->D)) continue;
        const size_t wsb = kb->workspace(p.B, p.H, p.N, p.D, p.dtype);
        dmem_reset_peak();
        void *ws = dmalloc(wsb ? wsb : 1, "backward workspace");
        poison_grads(&p);
        gpu_refusal_clear();
        if (kb->launch(p.Q, p.K, p.V, p.O, p.dO, p.L, p.dQ, p.dK, p.dV, ws, p.B, p.H, p.N, p.D, p.dtype, p.causal, NULL) != 0) {
            if (!gpu_refused()) { /* not a refusal: a failure, never a SKIP */
                fprintf(stderr, "%s: backward kernel %d failed to launch (this GPU refused nothing)\n", g_prog, kb->id);
                return EXIT_FAIL;
            }
            printf("  %-9s %-16s SKIP: %s\n", kernel_label(FAM_BACKWARD, kb->id, label, sizeof label), kb->name, gpu_refused());
            dfree(ws);  /* refused: not a failure, never timed (t_k stays -1) */
            continue;
        }
        gpu_sync_check();
        grads_compare(&p, &r, tol, ek[i], full, rows);
        const int good = !ek[i][0].n_bad && !ek[i][1].n_bad && !ek[i][2].n_bad;
        printf("  %-9s %-16s dQ %.2e  dK %.2e  dV %.2e  (rel L2 %.1e %.1e %.1e)  %s\n",
               kernel_label(FAM_BACKWARD, kb->id, label, sizeof label), kb->name,
               ek[i][0].max_abs, ek[i][1].max_abs, ek[i][2].max_abs, ek[i][0].rel_l2, ek[i][1].rel_l2, ek[i][2].rel_l2,
               good ? "ok" : "WRONG");
        ok &= good;
        BwdCtx c = {kb, &p, NULL, NULL, ws};
        t_k[i] = gpu_time_median_ms(bwd_time_fn, &c, 2, (int)o->repeat);
        peak_k[i] = dmem_peak();
        dfree(ws);
    }
    if (p.dtype != DT_FP32)
        printf("  (tolerance: 2x naive's error in %s, gradient by gradient: %.2e %.2e %.2e)\n", dtype_name(p.dtype), tol[0],
               tol[1], tol[2]);
    if (f && (f->dq || f->dk || f->dv)) {                 /* the last kernel's gradients (its last timed run) */
        const BackwardKernel *last = NULL;
        for (int i = 0; i < nb; i++)
            if (t_k[i] >= 0) last = bs[i];
        if (!last) {
            printf("no backward kernel ran: nothing written\n");
            ok = 0;
        } else {
            printf("the gradients of %s (%s):\n", kernel_label(FAM_BACKWARD, last->id, label, sizeof label), last->name);
            if (save_grad(&p, p.dQ, f->dq, "dQ") || save_grad(&p, p.dK, f->dk, "dK") || save_grad(&p, p.dV, f->dv, "dV")) ok = 0;
        }
    }

    /* 3. times, in the order measured: naive, then each kernel. */
    const double F = bwd_flops(p.B, p.H, p.N, p.D, p.causal);
    printf("\ntimes (CUDA events, 2 warm-ups, median of %ld; TFLOP/s = 2.5*%s*B*H*N*N*D / time, the whole backward:\n"
           "Delta and dQ's conversion included; O and L from forward kernel %d (%s), not timed):\n",
           o->repeat, o->causal ? "2" : "4", fk->id, fk->name);
    double best = -1;
    const BackwardKernel *best_k = NULL;
    if (t_naive > 0) {
        print_time_row("naive", "cuBLAS+softmax", t_naive, F / t_naive / 1e9, peak_naive, -1, NULL);
        if (csv) csv_row(csv, "backward", &p, 0, "cuBLAS+softmax", t_naive, F / t_naive / 1e9, peak_naive, worst_of(en, worst));
    }
    for (int i = 0; i < nb; i++) {
        if (t_k[i] < 0) continue;
        const BackwardKernel *kb = bs[i];
        kb->describe(p.D, p.dtype, desc, sizeof desc);
        print_time_row(kernel_label(FAM_BACKWARD, kb->id, label, sizeof label), kb->name, t_k[i], F / t_k[i] / 1e9, peak_k[i], t_naive,
                       desc);
        if (csv) csv_row(csv, "backward", &p, kb->id, kb->name, t_k[i], F / t_k[i] / 1e9, peak_k[i], worst_of(ek[i], worst));
        if (best < 0 || t_k[i] < best) best = t_k[i], best_k = kb;
    }

    /* 4. memory, and what L costs the forward. */
    const size_t esz = dtype_size(p.dtype), in_bytes = 4 * p.n * esz, g_bytes = 3 * p.n * esz;
    printf("\nmemory (tracked device bytes while each ran): Q, K, V, O, dO %s and dQ, dK, dV %s in both;\n"
           "  naive adds its forward's S and P, S reused for dP and dS (2 x %s: [B,H,N,N] each);\n"
           "  the fused backward adds L and Delta (B*H*N floats each: %s)",
           fmt_bytes((double)(in_bytes + p.n * esz), b1, sizeof b1), fmt_bytes((double)g_bytes, b2, sizeof b2),
           fmt_bytes((double)nn, b3, sizeof b3), fmt_bytes((double)p.B * p.H * p.N * 4, b4, sizeof b4));
    if (p.dtype != DT_FP32) printf(" and the fp32 dQ accumulator (B*H*N*D floats: %s)", fmt_bytes((double)p.n * 4, b1, sizeof b1));
    printf("\n");
    {
        const FusedKernel *fl[MAX_KERNELS];
        int nf = 0, nk;
        const FusedKernel *const *ks = fused_kernels(&nk);
        for (int i = 0; i < nk; i++)
            if (ks[i]->launch_l && fused_runs(ks[i], p.dtype, p.D) && fused_fits(ks[i], p.dtype, p.D)) fl[nf++] = ks[i];
        FwdCtx fc[2 * MAX_KERNELS];                     /* each kernel without L, then with it */
        void (*fns[2 * MAX_KERNELS])(void *) = {0};
        void *ctx[2 * MAX_KERNELS] = {0};
        double ms[2 * MAX_KERNELS];
        for (int i = 0; i < nf; i++)
            for (int w = 0; w < 2; w++) {
                fc[2 * i + w] = (FwdCtx){fl[i], &p, w};
                fns[2 * i + w] = fwd_time_fn, ctx[2 * i + w] = &fc[2 * i + w];
            }
        if (nf) gpu_time_interleaved_ms(fns, ctx, 2 * nf, 2, (int)o->repeat, ms);
        for (int i = 0; i < nf; i++)
            printf("L's cost: forward kernel %d takes %.3f ms without L, %.3f ms writing it (%+.1f%%; interleaved, median of %ld)\n",
                   fl[i]->id, ms[2 * i], ms[2 * i + 1], 100.0 * (ms[2 * i + 1] / ms[2 * i] - 1), o->repeat);
    }
    if (best_k && t_naive > 0)
        print_answer_fastest("fused backward", best_k->id, best_k->name, best, t_naive, "P and dS", 2.0 * nn);
    for (int g = 0; g < 3; g++) tfree(full[g]);
    tfree(rows);
    ref_free(&r);
    problem_free(&p);
    return ok ? EXIT_OK : EXIT_FAIL;
}

// --- ./step05 --bench --backward ------------------------------------------------------

int bwd_run_bench(const Opts *o, FILE *csv)
{
    int nb;
    const BackwardKernel *const *bs = bwd_kernels(&nb);
    static const long Ds[] = {64, 128};
    printf("step05 --bench --backward: %s%s, batch = 16384/N, heads = 2048/D, TFLOP/s = 2.5*%s*B*H*N*N*D / time\n"
           "(median of %ld runs each, the methods of a column interleaved run by run; the whole backward: Delta and\n"
           "dQ's conversion included, O and L from the forward not timed; naive: with its forward's P kept)\n",
           dtype_name(o->dtype), o->causal ? ", causal" : "", o->causal ? "2" : "4", o->repeat);
    printf("device: %s\n", gpu_describe());
    int ids[MAX_KERNELS + 1];                            /* row 0 naive, row i + 1 the registry's kernel i */
    for (int i = 0; i < nb; i++) ids[i + 1] = bs[i]->id;
    for (int b = 0; b < 2; b++) {
        const long D = Ds[b];
        if ((o->given & OPT_GIVEN_DIM) && D != o->D) continue; /* --dim: that table only */
        const FusedKernel *fk = fwd_with_l(o->dtype, D);
        if (!fk) continue;
        double t[MAX_KERNELS + 1][BENCH_COLS], tf[2][BENCH_COLS];
        int have[MAX_KERNELS + 1];
        memset(have, 0, sizeof have);
        int col = 0;
        for (long N = BENCH_N0; N <= bench_n_last(o); N *= 2, col++) {
            Problem p;
            bp_make(&p, 16384 / N, 2048 / D, N, D, o->dtype, o->causal, o->seed + N);
            problem_need_L(&p);
            if (fk->launch_l(p.Q, p.K, p.V, p.O, p.L, p.B, p.H, p.N, p.D, p.dtype, p.causal, NULL) != 0) {
                problem_free(&p);
                return EXIT_FAIL;
            }
            size_t wsb = 1;
            for (int i = 0; i < nb; i++)
                if (bwd_runs(bs[i], o->dtype, D)) {
                    size_t w = bs[i]->workspace(p.B, p.H, p.N, D, o->dtype);
                    if (w > wsb) wsb = w;
                }
            void *ws = dmalloc(wsb, "backward workspace");
            void *S, *P;
            naive_buffers(&p, &S, &P);
            if (P) naive_attention_gpu_ws(p.Q, p.K, p.V, p.O, p.B, p.H, N, D, o->dtype, o->causal, S, P, NULL);
            /* naive needs its forward's O nowhere: put the fused forward's O back */
            if (fk->launch_l(p.Q, p.K, p.V, p.O, p.L, p.B, p.H, p.N, p.D, p.dtype, p.causal, NULL) != 0) return EXIT_FAIL;
            BwdCtx c[MAX_KERNELS + 1];                   /* naive, then the kernels */
            FwdCtx fc[2] = {{fk, &p, 0}, {fk, &p, 1}};
            void (*fns[MAX_KERNELS + 3])(void *) = {0};  /* and the forward without and with L */
            void *ctx[MAX_KERNELS + 3] = {0};
            int slot[MAX_KERNELS + 3], n = 0;
            if (P) c[n] = (BwdCtx){NULL, &p, S, P, NULL}, fns[n] = bwd_time_fn, ctx[n] = &c[n], slot[n++] = 0;
            for (int i = 0; i < nb; i++) {
                if (!opts_kernel(o, bs[i]->id) || !bwd_runs(bs[i], o->dtype, D)) continue;
                if (!bwd_fits(bs[i], o->dtype, D)) continue; /* refused here: a SKIP line after the table, never timed */
                c[n] = (BwdCtx){bs[i], &p, NULL, NULL, ws}, fns[n] = bwd_time_fn, ctx[n] = &c[n], slot[n++] = i + 1;
            }
            fns[n] = fwd_time_fn, ctx[n] = &fc[0], slot[n++] = -1;   /* the forward without and with L */
            fns[n] = fwd_time_fn, ctx[n] = &fc[1], slot[n++] = -2;
            double ms[MAX_KERNELS + 3];
            gpu_time_interleaved_ms(fns, ctx, n, 2, (int)o->repeat, ms);
            const double F = bwd_flops(p.B, p.H, N, D, o->causal);
            if (!P) t[0][col] = -1, have[0] = 1;
            for (int r = 0; r < n; r++) {
                if (slot[r] < 0) {
                    tf[-slot[r] - 1][col] = ms[r];
                    continue;
                }
                t[slot[r]][col] = ms[r], have[slot[r]] = 1;
                if (csv)
                    csv_row(csv, "bench_backward", &p, slot[r] ? bs[slot[r] - 1]->id : 0,
                            slot[r] ? bs[slot[r] - 1]->name : "cuBLAS+softmax", ms[r], F / ms[r] / 1e9, 0, NULL);
            }
            if (csv)
                for (int w = 0; w < 2; w++)
                    csv_row(csv, "bench_forward_l", &p, fk->id, w ? "with L" : "without L", tf[w][col],
                            F / 2.5 / tf[w][col] / 1e9, 0, NULL);
            dfree(S), dfree(P), dfree(ws);
            problem_free(&p);
        }
        print_bench_table(FAM_BACKWARD, D, 2.5 * 4.0 * 16384 * 2048 / (o->causal ? 2 : 1), ids, nb + 1,
                          (const double (*)[BENCH_COLS])t, have, bench_n_last(o)); /* 2.5 * 4*B*H*N*N*D with B*N = 16384, H*D = 2048 */
        for (int i = 0; i < nb; i++)
            if (opts_kernel(o, bs[i]->id) && bwd_runs(bs[i], o->dtype, D) && !bwd_fits(bs[i], o->dtype, D))
                printf("  bwd %d SKIP at D=%ld: refused on this GPU (its shared memory; not timed)\n", bs[i]->id, D);
        printf(" L's cost, forward kernel %d (%% more time writing L):", fk->id);
        for (int c2 = 0; c2 < col; c2++) printf(" %+5.1f%%", 100.0 * (tf[1][c2] / tf[0][c2] - 1));
        printf("\n");
    }
    return EXIT_OK;
}

// --- compute-sanitizer's shapes -----------------------------------------------------------

/* One backward kernel once on p (its O and L from a forward), its gradients poisoned first; what it ran, on stdout. */
static int san_run(const BackwardKernel *bk, Problem *p, const char *what)
{
    const size_t wsb = bk->workspace(p->B, p->H, p->N, p->D, p->dtype);
    void *ws = dmalloc(wsb ? wsb : 1, "backward workspace");
    poison_grads(p);
    const int rc = bk->launch(p->Q, p->K, p->V, p->O, p->dO, p->L, p->dQ, p->dK, p->dV, ws, p->B, p->H, p->N, p->D, p->dtype,
                              p->causal, NULL);
    if (rc == 0) gpu_sync_check();
    dfree(ws);
    if (rc == 0)
        printf("ran backward kernel %d %s N=%ld D=%ld%s%s\n", bk->id, dtype_name(p->dtype), p->N, p->D, p->causal ? " causal" : "", what);
    return rc;
}

int bwd_run_sanitize(const Opts *o)
{
    int ran = 0;
    int nb;
    const BackwardKernel *const *bs = bwd_kernels(&nb);
    static const long Ns[] = {65, 257}, D32[] = {64}, D16[] = {64, 128};
    for (int dt = 0; dt < 3; dt++)
        for (int b = 0; b < (dt == DT_FP32 ? 1 : 2); b++) {
            const long D = dt == DT_FP32 ? D32[b] : D16[b];
            const FusedKernel *fk = fwd_with_l(dt, D);
            if (!fk) continue;
            for (int a = 0; a < 2; a++)
                for (int causal = 0; causal < 2; causal++) {
                    Problem p;
                    bp_make(&p, 2, 3, Ns[a], D, dt, causal, 11);
                    problem_need_L(&p);
                    if (fk->launch_l(p.Q, p.K, p.V, p.O, p.L, p.B, p.H, p.N, D, dt, causal, NULL) != 0) return EXIT_FAIL;
                    gpu_sync_check();
                    printf("ran kernel %d with L %s N=%ld D=%ld%s\n", fk->id, dtype_name(dt), Ns[a], D, causal ? " causal" : "");
                    for (int i = 0; i < nb; i++) {
                        if (!opts_kernel(o, bs[i]->id) || !bwd_runs(bs[i], dt, D) || !bwd_fits(bs[i], dt, D)) continue;
                        if (san_run(bs[i], &p, "") != 0) return EXIT_FAIL;
                        ran++;
                    }
                    problem_free(&p);
                }
        }
    /* The persistent backward kernels (.persistent) once more where their blocks take several K/V tiles each (B = 4,
     * H = 24, N = 257: 288 tiles, more than any GPU's SMs): the ticket ring, kv_empty and a second item's K_j, V_j
     * are only exercised there; and, not causal, where backward kernel 20 splits the last round on 132 SMs (SPLIT_B,
     * SPLIT_H, SPLIT_N: the check's case; its parts' sums meet in global memory). */
    static const struct { long B, H, N; int causal; const char *why; } many[] = {
        {4, 24, 257, 0, " B=4 H=24 (several K/V tiles per block)"}, {4, 24, 257, 1, " B=4 H=24 (several K/V tiles per block)"},
        {SPLIT_B, SPLIT_H, SPLIT_N, 0, " B=3 H=10 (the last round split)"}};
    for (int i = 0; i < nb; i++) {
        if (!bs[i]->persistent || !opts_kernel(o, bs[i]->id)) continue;
        for (long D = 64; D <= 128; D += 64) {
            const FusedKernel *fk = fwd_with_l(DT_FP16, D);
            if (!fk || !bwd_runs(bs[i], DT_FP16, D) || !bwd_fits(bs[i], DT_FP16, D)) continue;
            for (size_t c = 0; c < sizeof many / sizeof many[0]; c++) {
                Problem p;
                const int causal = many[c].causal;
                bp_make(&p, many[c].B, many[c].H, many[c].N, D, DT_FP16, causal, 11);
                problem_need_L(&p);
                if (fk->launch_l(p.Q, p.K, p.V, p.O, p.L, p.B, p.H, p.N, D, DT_FP16, causal, NULL) != 0) return EXIT_FAIL;
                gpu_sync_check();
                printf("ran kernel %d with L fp16 B=%ld H=%ld N=%ld D=%ld%s\n", fk->id, p.B, p.H, p.N, D, causal ? " causal" : "");
                if (san_run(bs[i], &p, many[c].why) != 0) return EXIT_FAIL;
                ran++;
                problem_free(&p);
            }
        }
    }
    return sanitize_end(ran, "--sanitize-shapes --backward: no backward kernel%s runs on this GPU",
                        o->kernel ? " of that --kernel" : "");
}

#endif /* HAVE_CUDA */
