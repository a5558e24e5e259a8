/*
 * alibi.c: step 05 with a score modifier, ALiBi (Press, Smith, Lewis 2022; the chapter's question 5):
 * -slope_h |i - j| added to head h's score (i, j) with absolute indices, before the row max, in the forward
 * kernels that take one (launch_alibi in their registry entry). ./step05 --alibi checks them against the float64
 * reference with the same bias and times them with and without it; ./step05 --check runs the grid below.
 */
#include "common.h"
#include "gpu.h"
#include "alibi.h"
#include "runner.h"
#include "../kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA
void alibi_kernel_ids(char *buf, size_t n)
{
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < nk && used < n; i++)
        if (ks[i]->launch_alibi) used += (size_t)snprintf(buf + used, n - used, "%s%d", used ? ", " : " (", ks[i]->id);
    if (used && used < n) snprintf(buf + used, n - used, ")");
}

/* "kernel 2: fp32 D 16..128; kernel 3: fp16/bf16 D 64, 128": what each kernel with a score modifier takes, from
 * its registry entry (its dtypes, and the head dims in 8..128 it is built for: up to three listed, more as a range). */
static void alibi_kernels_take(char *buf, size_t n)
{
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < nk && used < n; i++) {
        const FusedKernel *k = ks[i];
        if (!k->launch_alibi) continue;
        used += (size_t)snprintf(buf + used, n - used, "%skernel %d:", used ? "; " : "", k->id);
        for (int dt = 0, first = 1; dt < 3 && used < n; dt++)
            if (k->dtypes & (1u << dt)) {
                used += (size_t)snprintf(buf + used, n - used, "%s%s", first ? " " : "/", dtype_name(dt));
                first = 0;
            }
        long dims[16], nd = 0;
        for (long D = 8; D <= 128 && nd < 16; D += 8)
            if (k->supports_dim(D)) dims[nd++] = D;
        if (used < n && nd > 3) used += (size_t)snprintf(buf + used, n - used, " D %ld..%ld", dims[0], dims[nd - 1]);
        for (long d = 0; d < nd && nd <= 3 && used < n; d++)
            used += (size_t)snprintf(buf + used, n - used, "%s%ld", d ? ", " : " D ", dims[d]);
    }
}

/* The yardstick of a kernel with ALiBi: what naive attention with the same bias, in the same dtype, gets
 * wrong on the rows r holds (computed here as naive_gpu.cu computes: scores in fp32 from the dtype's inputs,
 * the softmax in fp32, P stored in the dtype, P V summed in fp32, O stored in the dtype). A sharper softmax,
 * which ALiBi makes, leaves larger errors than plain attention's on the same inputs, so plain naive is not
 * the yardstick here. */
static double naive_bias_error(const Problem *p, const float *slope, const RefRows *r)
{
    const float scale = 1.0f / sqrtf((float)p->D);
    float *s = xmalloc((size_t)p->N * sizeof(float), "row scores"), *o = xmalloc((size_t)p->D * sizeof(float), "row");
    double worst = 0;
    size_t w = 0;
    for (long h = 0; h < p->B * p->H; h++)
        for (long i = 0; i < p->N; i += r->stride, w++) {
            const size_t hd = (size_t)h * p->N * p->D;
            const long jend = p->causal ? i + 1 : p->N;
            float m = -INFINITY, l = 0.0f;
            for (long j = 0; j < jend; j++) {
                s[j] = dot_f32(p->q + hd + i * p->D, p->k + hd + j * p->D, p->D) * scale - slope[h] * (float)(i > j ? i - j : j - i);
                m = fmaxf(m, s[j]);
            }
            for (long j = 0; j < jend; j++) { s[j] = expf(s[j] - m); l += s[j]; }
            for (long j = 0; j < jend; j++) s[j] /= l;
            round_to_dtype(s, (size_t)jend, p->dtype);                  /* P stored in the dtype */
            for (long d = 0; d < p->D; d++) o[d] = 0.0f;
            for (long j = 0; j < jend; j++)
                for (long d = 0; d < p->D; d++) o[d] += s[j] * p->v[hd + j * p->D + d];
            round_to_dtype(o, (size_t)p->D, p->dtype);                  /* O stored in the dtype */
            for (long d = 0; d < p->D; d++) {
                const double e = fabs((double)o[d] - r->ref[w * p->D + d]);
                if (e > worst) worst = e;
            }
        }
    tfree(s); tfree(o);
    return worst;
}

/* The grid of ./step05 --check: N = 1, 65, 257, 1000, D = 64, 128, each dtype, causal or not; every
 * kernel with launch_alibi (only: its id, 0 for all). */
void alibi_checks(long only)
{
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    char name[160], eb[128];
    for (int dt = 0; dt < 3; dt++)
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 2; b++)
                for (int causal = 0; causal < 2; causal++) {
                    static const long aN[] = {1, 65, 257, 1000}, aD[] = {64, 128};
                    int any = 0;
                    for (int i = 0; i < nk; i++)
                        any |= (!only || ks[i]->id == only) && ks[i]->launch_alibi && fused_runs(ks[i], dt, aD[b]);
                    if (!any) continue;
                    Problem p;
                    problem_make(&p, 2, 3, aN[a], aD[b], dt, causal, 5000 + a * 7 + b * 3 + causal, NULL);
                    float *slope = xmalloc(6 * sizeof(float), "slopes");
                    alibi_slopes(slope, 2, 3);
                    void *slope_d = dupload(slope, 6, DT_FP32, "ALiBi slopes");
                    RefRows r = ref_rows(&p, slope);
                    float *full = xmalloc(p.n * 4, "O");
                    const double naive_err = naive_bias_error(&p, slope, &r); /* naive with the bias, same dtype */
                    const double atol = dt == DT_FP32 ? tol_fp32(naive_err) : tol_16bit(naive_err);
                    for (int i = 0; i < nk; i++) {
                        const FusedKernel *kn = ks[i];
                        if ((only && kn->id != only) || !kn->launch_alibi || !fused_runs(kn, dt, aD[b])) continue;
                        Err e;
                        snprintf(name, sizeof name, "kernel%d alibi %s B=2 H=3 N=%ld D=%ld%s", kn->id, dtype_name(dt), aN[a],
                                 aD[b], causal ? " causal" : "");
                        if (run_compare(kn, &p, &r, atol, &e, full, (const float *)slope_d) != 0) {
                            report_not_run(name, "");
                            continue;
                        }
                        report(e.n_bad == 0 && e.max_abs <= atol, &e, name, "vs the float64 reference with the same "
                               "bias: %s; naive with the bias in %s %.2e, tol 2x = %.1e%s", fmt_err(&e, eb, sizeof eb),
                               dtype_name(dt), naive_err, atol, dt == DT_FP32 ? " (at least 1e-5)" : "");
                    }
                    dfree(slope_d);
                    tfree(slope); tfree(full); tfree(r.ref);
                    problem_free(&p);
                }
}

typedef struct { const FusedKernel *kn; Problem *p; const void *slope_d; } AlibiCtx;
static void alibi_fn(void *c)
{
    AlibiCtx *a = c;
    Problem *p = a->p;
    if (a->slope_d)
        a->kn->launch_alibi(p->Q, p->K, p->V, p->O, (const float *)a->slope_d, p->B, p->H, p->N, p->D, p->dtype,
                            p->causal, NULL);
    else
        a->kn->launch(p->Q, p->K, p->V, p->O, p->B, p->H, p->N, p->D, p->dtype, p->causal, NULL);
}

/* --alibi: the kernels with a score modifier, checked against the float64 reference with ALiBi, and timed
 * with and without it in the same run. */
int alibi_run(const Opts *o)
{
    int nk, ok = 1, any = 0;
    const FusedKernel *const *ks = fused_kernels(&nk);
    char eb[128];
    Problem p;
    printf("step05 --alibi: ALiBi's -slope_h |i - j| on the scores, before the row max, %s, B=%ld H=%ld N=%ld D=%ld%s\n",
           dtype_name(o->dtype), o->B, o->H, o->N, o->D, o->causal ? ", causal" : "");
    printf("device: %s\n", gpu_describe());
    problem_make(&p, o->B, o->H, o->N, o->D, o->dtype, o->causal, o->seed, o);
    float *slope = xmalloc((size_t)o->B * o->H * sizeof(float), "slopes");
    alibi_slopes(slope, o->B, o->H);
    void *slope_d = dupload(slope, (size_t)o->B * o->H, DT_FP32, "ALiBi slopes");
    RefRows r = ref_rows(&p, slope);
    float *full = xmalloc(p.n * 4, "O");
    const double naive_err = naive_bias_error(&p, slope, &r);
    const double atol = o->dtype == DT_FP32 ? tol_fp32(naive_err) : tol_16bit(naive_err);
    printf("reference: float64 with the bias, %s; naive attention with the bias in %s (emulated on the CPU as "
           "naive_gpu.cu computes it) is off by %.2e there: the tolerance is 2x that\n",
           r.stride == 1 ? "all rows" : "every 61st row of every head", dtype_name(o->dtype), naive_err);
    for (int i = 0; i < nk; i++) {
        const FusedKernel *kn = ks[i];
        if (!opts_kernel(o, kn->id) || !kn->launch_alibi || !fused_runs(kn, o->dtype, o->D)) continue;
        any = 1;
        Err e;
        if (run_compare(kn, &p, &r, atol, &e, full, (const float *)slope_d) != 0) { /* refused: SKIP, not timed */
            printf("  kernel %-2d %-16s SKIP: %s\n", kn->id, kn->name, gpu_last_refusal());
            continue;
        }
        AlibiCtx a = {kn, &p, slope_d}, plain = {kn, &p, NULL};
        void (*const fns[2])(void *) = {alibi_fn, alibi_fn};
        void *const ctx[2] = {&a, &plain};
        double ms[2];
        gpu_time_interleaved_ms(fns, ctx, 2, 2, (int)o->repeat, ms); /* with and without, against each other */
        const double ms_a = ms[0], ms_p = ms[1];
        printf("  kernel %-2d %-16s with ALiBi vs float64 with the bias: %s (tol %.1e)  %s\n"
               "            %.3f ms with ALiBi, %.3f ms without (%+.1f%%; interleaved, median of %ld)\n", kn->id, kn->name, fmt_err(&e, eb, sizeof eb),
               atol, e.n_bad == 0 ? "ok" : "WRONG", ms_a, ms_p, 100.0 * (ms_a / ms_p - 1), o->repeat);
        ok &= e.n_bad == 0;
    }
    if (!any) {
        char take[256];
        alibi_kernels_take(take, sizeof take);
        printf("  no kernel with a score modifier takes %s at D=%ld (%s)\n", dtype_name(o->dtype), o->D, take);
    }
    dfree(slope_d);
    tfree(slope); tfree(full); tfree(r.ref);
    problem_free(&p);
    return ok ? EXIT_OK : EXIT_FAIL;
}

#else
void alibi_kernel_ids(char *buf, size_t n) { if (n) buf[0] = '\0'; } /* a build without CUDA has no kernels to name */
#endif /* HAVE_CUDA */
