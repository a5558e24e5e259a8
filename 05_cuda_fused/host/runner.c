/*
 * runner.c: the one runner of step 05's families (runner.h). The kernel lists, the option checks and the tables
 * work without a GPU too (a build without CUDA has empty lists); the problem lives on the device.
 */
#include "common.h"
#include "runner.h"
#include "gpu.h"
#include "../../01_naive/naive.h"

#include <stdarg.h>
#include <string.h>

// --- the kernel lists: one view of the four registries ------------------------------------------

#ifdef HAVE_CUDA
int kernel_list(Family f, KernelInfo *out)
{
    int n, m = 0;
    if (f == FAM_FORWARD) {
        const FusedKernel *const *ks = fused_kernels(&n);
        for (int i = 0; i < n && m < MAX_KERNELS; i++, m++)
            out[m] = (KernelInfo){f, ks[i]->id, ks[i]->extends, ks[i]->name, ks[i]->idea, ks[i]->dtypes, ks[i]->supports_dim,
                                  ks[i]->unavailable, ks[i]->persistent, ks[i]};
    } else if (f == FAM_BACKWARD) {
        const BackwardKernel *const *bs = bwd_kernels(&n);
        for (int i = 0; i < n && m < MAX_KERNELS; i++, m++)
            out[m] = (KernelInfo){f, bs[i]->id, bs[i]->extends, bs[i]->name, bs[i]->idea, bs[i]->dtypes, bs[i]->supports_dim,
                                  bs[i]->unavailable, bs[i]->persistent, bs[i]};
    } else if (f == FAM_DECODE) {
        const DecodeKernel *const *ds = decode_kernels(&n);
        for (int i = 0; i < n && m < MAX_KERNELS; i++, m++)
            out[m] = (KernelInfo){f, ds[i]->id, ds[i]->extends, ds[i]->name, ds[i]->idea, ds[i]->dtypes, ds[i]->supports_dim,
                                  ds[i]->unavailable, 0, ds[i]};
    } else {
        const Fp8Kernel *const *es = fp8_kernels(&n);
        for (int i = 0; i < n && m < MAX_KERNELS; i++, m++)
            out[m] = (KernelInfo){f, es[i]->id, es[i]->extends, es[i]->name, es[i]->idea, 1u << DT_FP8, NULL,
                                  es[i]->unavailable, 0, es[i]};
    }
    return m;
}
#else
int kernel_list(Family f, KernelInfo *out) { (void)f, (void)out; return 0; }
#endif

const char *family_what(Family f)
{
    return f == FAM_FORWARD ? "kernel" : f == FAM_BACKWARD ? "backward kernel" : f == FAM_DECODE ? "decode kernel"
                                                                                                 : "FP8 kernel";
}

const char *kernel_label(Family f, int id, char *buf, size_t n)
{
    snprintf(buf, n, "%s %d", f == FAM_BACKWARD ? "bwd" : f == FAM_DECODE ? "decode kernel" : "kernel", id);
    return buf;
}

const char *check_label(Family f, int id, char *buf, size_t n)
{
    snprintf(buf, n, "%s%d", f == FAM_BACKWARD ? "bwd" : f == FAM_DECODE ? "decode" : "kernel", id);
    return buf;
}

int kernel_ids_text(Family f, int ranges, const char *last_sep, char *buf, size_t n)
{
    KernelInfo ks[MAX_KERNELS];
    const int nk = kernel_list(f, ks);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < nk;) {
        int j = i;                                       /* ks[i .. j]: ids in a row */
        while (ranges && j + 1 < nk && ks[j + 1].id == ks[j].id + 1) j++;
        if (j - i < 2) j = i;                            /* two in a row stay two */
        const char *sep = i == 0 ? "" : j + 1 == nk ? last_sep : ", ";
        if (j > i) used += (size_t)snprintf(buf + used, used < n ? n - used : 0, "%s%d-%d", sep, ks[i].id, ks[j].id);
        else used += (size_t)snprintf(buf + used, used < n ? n - used : 0, "%s%d", sep, ks[i].id);
        if (used >= n) break;
        i = j + 1;
    }
    return nk;
}

const char *kernel_ids_phrase(Family f, int ranges, const char *last_sep, char *buf, size_t n)
{
    char ids[256];
    const int nk = kernel_ids_text(f, ranges, last_sep, ids, sizeof ids);
    if (!nk) snprintf(buf, n, "the %ss", family_what(f));
    else snprintf(buf, n, "%s %s", nk == 1 ? "kernel" : "kernels", ids);
    return buf;
}

#ifdef HAVE_CUDA
int runs_case(unsigned dtypes, int (*supports_dim)(long D), const char *(*unavailable)(void), int dtype, long D)
{
    return (dtypes & (1u << dtype)) && (!supports_dim || supports_dim(D)) && !(unavailable && unavailable()) &&
           !gpu_dtype_unavailable(dtype);
}

int kernel_runs(const KernelInfo *k, int dtype, long D)
{
    return runs_case(k->dtypes, k->supports_dim, k->unavailable, dtype, D);
}

int fused_runs(const FusedKernel *kn, int dtype, long D)
{
    return runs_case(kn->dtypes, kn->supports_dim, kn->unavailable, dtype, D);
}

int bwd_runs(const BackwardKernel *kb, int dtype, long D)
{
    return runs_case(kb->dtypes, kb->supports_dim, kb->unavailable, dtype, D);
}

int any_kernel_runs(Family f, long only, int dtype, long D)
{
    KernelInfo ks[MAX_KERNELS];
    const int n = kernel_list(f, ks);
    int any = 0;
    for (int i = 0; i < n; i++) any |= (!only || ks[i].id == only) && kernel_runs(&ks[i], dtype, D);
    return any;
}

#endif

static const KernelInfo *find(const KernelInfo *ks, int n, int id)
{
    for (int i = 0; i < n; i++)
        if (ks[i].id == id) return &ks[i];
    return NULL;
}

void kernel_option_exists(const Opts *o, Family f)
{
    KernelInfo ks[MAX_KERNELS];
    const int n = kernel_list(f, ks);
    const char *what = family_what(f);
    if (o->kernel && (!find(ks, n, (int)o->kernel) || !find(ks, n, (int)o->kernel_last)))
        usage_error("option --kernel: there is no %s %ld (%ss 1..%d)", what,
                    find(ks, n, (int)o->kernel) ? o->kernel_last : o->kernel, what, n ? ks[n - 1].id : 0);
}

void kernel_option_check(const Opts *o, Family f, int any_case, int any_dim)
{
    KernelInfo ks[MAX_KERNELS];
    const int n = kernel_list(f, ks);
    int any = 0;
    kernel_option_exists(o, f);
    for (int i = 0; i < n; i++)
        any |= opts_kernel(o, ks[i].id) &&
               (any_case || ((ks[i].dtypes & (1u << o->dtype)) && (any_dim || !ks[i].supports_dim || ks[i].supports_dim(o->D))));
    if (!any && !o->check)
        usage_error("option --dtype/--dim/--kernel: no %s runs %s at D=%ld%s", family_what(f), dtype_name(o->dtype), o->D,
                    o->kernel ? " with that --kernel" : "");
}

#ifdef HAVE_CUDA
void report_unavailable(Family f, long only)
{
    KernelInfo ks[MAX_KERNELS];
    const int n = kernel_list(f, ks);
    char name[32];
    for (int i = 0; i < n; i++)
        if ((!only || ks[i].id == only) && ks[i].unavailable && ks[i].unavailable())
            report_skip(check_label(f, ks[i].id, name, sizeof name), "%s", ks[i].unavailable());
}

int report_dtype_unavailable(int dtype, const char *tag)
{
    const char *why = gpu_dtype_unavailable(dtype);
    if (why) report_skip(dtype_name(dtype), "%s%s", tag, why);
    return why != NULL;
}

// --- the self-test grid ---------------------------------------------------------------------------

void check_grid(const CheckGrid *g)
{
    static const long Ns[] = CHECK_NS;
    for (int dt = 0; dt < 3; dt++) {
        if (report_dtype_unavailable(dt, g->skip_tag)) continue;
        for (int b = 0; b < g->ndims[dt]; b++) {
            const long D = g->dims[dt][b];
            if (!any_kernel_runs(g->family, g->only, dt, D)) continue;
            for (int a = 0; a < N_CHECK_NS; a++)
                for (int causal = 0; causal < 2; causal++)
                    if (!causal || !g->causal_ns_only || Ns[a] == 1 || Ns[a] == 65 || Ns[a] == 1000)
                        g->run_case(g->ctx, dt, b, D, a, Ns[a], causal);
            if (g->after_dim) g->after_dim(g->ctx, dt, b, D);
        }
    }
}
#endif

// --- the tables and the CSV -------------------------------------------------------------------

double attn_flops(long B, long H, long N, long D, int causal)
{
    const double f = 4.0 * B * H * N * N * D;
    return causal ? f / 2 : f;
}

void csv_row_shape(FILE *f, const char *mode, int dtype, long B, long H, long N, long D, int causal, int id,
                   const char *name, double ms, double tflops, size_t peak, const double *err)
{
    fprintf(f, "%s,%s,%d,%s,%ld,%ld,%ld,%ld,%d,%.6f,%.4f,%zu,", mode, dtype_name(dtype), id, name, B, H, N, D, causal, ms,
            tflops, peak);
    if (err) fprintf(f, "%.3e,%.3e\n", err[0], err[1]);
    else fprintf(f, "0,0\n");
}

void csv_row(FILE *f, const char *mode, const Problem *p, int id, const char *name, double ms, double tflops,
             size_t peak, const double *err)
{
    csv_row_shape(f, mode, p->dtype, p->B, p->H, p->N, p->D, p->causal, id, name, ms, tflops, peak, err);
}

void print_time_row(const char *label, const char *name, double ms, double tflops, size_t peak, double t_naive,
                    const char *desc)
{
    char b[32];
    printf("  %-9s %-16s %9.3f ms %8.2f TFLOP/s  peak %10s", label, name, ms, tflops, fmt_bytes((double)peak, b, sizeof b));
    if (t_naive > 0) printf("  %.2fx naive", t_naive / ms);
    printf("\n");
    if (desc) printf("            %s\n", desc);
}

void print_answer_fastest(const char *what, int id, const char *name, double ms, double t_naive, const char *buffers,
                          double bytes)
{
    char b[32];
    printf("\nanswer: the fastest %s here (kernel %d, %s) takes %.3f ms vs naive's %.3f ms: %.2fx, and needs no "
           "[B,H,N,N] buffer (naive's %s: %s)\n", what, id, name, ms, t_naive, t_naive / ms, buffers,
           fmt_bytes(bytes, b, sizeof b));
}

void print_bench_table(Family f, long D, double flops_per_n, const int *ids, int rows, const double (*t)[BENCH_COLS],
                       const int *have, long n_last)
{
    printf("\n D=%ld       N:", D);
    for (long N = BENCH_N0; N <= n_last; N *= 2) printf(" %7ld", N);
    printf("\n");
    for (int r = 0; r < rows; r++) {
        if (!have[r]) continue;
        char label[48];
        if (r == 0) snprintf(label, sizeof label, "naive");
        else kernel_label(f, ids[r], label, sizeof label);
        printf(" %-14s", label);
        int c = 0;
        for (long N = BENCH_N0; N <= n_last; N *= 2, c++) {
            if (t[r][c] < 0) printf(" %7s", "OOM");
            else printf(" %7.1f", flops_per_n * N / t[r][c] / 1e9);
        }
        printf("\n");
    }
}

// --- compute-sanitizer's shapes ----------------------------------------------------------------------

int sanitize_end(int ran, const char *fmt, ...)
{
    if (ran) return EXIT_OK;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", g_prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return EXIT_USAGE;
}

// --- one problem ------------------------------------------------------------------------------

long ref_stride(long N) { return N <= 2048 ? 1 : 61; }

#ifdef HAVE_CUDA
/* p's host Q, K, V rounded to its dtype and copied into its device buffers. */
static void upload_inputs(Problem *p)
{
    round_to_dtype(p->q, p->n, p->dtype), round_to_dtype(p->k, p->n, p->dtype), round_to_dtype(p->v, p->n, p->dtype);
    dupload_into(p->Q, p->q, p->n, p->dtype), dupload_into(p->K, p->k, p->n, p->dtype), dupload_into(p->V, p->v, p->n, p->dtype);
}

void problem_make(Problem *p, long B, long H, long N, long D, int dtype, int causal, uint64_t seed, const Opts *o)
{
    memset(p, 0, sizeof *p);
    p->B = B, p->H = H, p->N = N, p->D = D, p->dtype = dtype, p->causal = causal;
    p->n = (size_t)B * H * N * D;
    if (o && o->qfile) {
        Opts oo = *o;
        inputs_load_or_make(&oo, &p->q, &p->k, &p->v);
    } else {
        p->q = xmalloc(p->n * 4, "Q"), p->k = xmalloc(p->n * 4, "K"), p->v = xmalloc(p->n * 4, "V");
        make_qkv(p->q, p->k, p->v, p->n, seed);
    }
    const size_t bytes = p->n * dtype_size(dtype);
    p->Q = dmalloc(bytes, "Q"), p->K = dmalloc(bytes, "K"), p->V = dmalloc(bytes, "V");
    upload_inputs(p);
    p->O = dmalloc(bytes, "O");
}

void problem_new_inputs(Problem *p, uint64_t seed)
{
    make_qkv(p->q, p->k, p->v, p->n, seed);
    upload_inputs(p);
}

void problem_add_backward(Problem *p, uint64_t seed, float *dout)
{
    if (dout) {
        p->dout = dout;
    } else {
        Rng r;
        rng_seed(&r, seed + 3);
        p->dout = xmalloc(p->n * 4, "dO");
        fill_normal(p->dout, p->n, &r);
    }
    round_to_dtype(p->dout, p->n, p->dtype);
    p->dO = dupload(p->dout, p->n, p->dtype, "dO");
    const size_t bytes = p->n * dtype_size(p->dtype);
    p->dQ = dmalloc(bytes, "dQ"), p->dK = dmalloc(bytes, "dK"), p->dV = dmalloc(bytes, "dV");
}

int naive_buffers(const Problem *p, void **S, void **P)
{
    const size_t nn = (size_t)p->B * p->H * p->N * p->N * dtype_size(p->dtype);
    *S = dmalloc_try(nn);
    *P = *S ? dmalloc_try(nn) : NULL;
    if (*P) return 0;
    dfree(*S);
    *S = NULL;
    return -1;
}

void problem_need_L(Problem *p)
{
    if (!p->L) p->L = dmalloc((size_t)p->B * p->H * p->N * sizeof(float), "L");
}

void problem_free(Problem *p)
{
    dfree(p->Q), dfree(p->K), dfree(p->V), dfree(p->O), dfree(p->L);
    dfree(p->dO), dfree(p->dQ), dfree(p->dK), dfree(p->dV);
    tfree(p->q), tfree(p->k), tfree(p->v), tfree(p->dout);
}

void gather_rows(const Problem *p, long stride, const void *dev, float *full, float *rows)
{
    ddownload(full, dev, p->n, p->dtype);
    size_t w = 0;
    for (long h = 0; h < p->B * p->H; h++)
        for (long i = 0; i < p->N; i += stride, w++)
            memcpy(rows + w * p->D, full + ((size_t)h * p->N + i) * p->D, (size_t)p->D * 4);
}

Err compare_rows(const Problem *p, long stride, const void *dev, const double *ref, size_t nrows, double atol, float *full,
                 float *rows)
{
    gather_rows(p, stride, dev, full, rows);
    return compare(rows, ref, nrows * p->D, atol, p->dtype == DT_FP32 ? 1e-5 : 0);
}

RefRows ref_rows(const Problem *p, const float *slope)
{
    RefRows r;
    r.stride = ref_stride(p->N);
    long per_head = (p->N + r.stride - 1) / r.stride;
    r.nrows = (size_t)p->B * p->H * per_head;
    r.ref = xmalloc(r.nrows * p->D * sizeof(double), "reference rows");
    double *scratch = xmalloc((size_t)p->N * sizeof(double), "reference scores");
    size_t w = 0;
    for (long h = 0; h < p->B * p->H; h++)
        for (long i = 0; i < p->N; i += r.stride, w++) {
            size_t hd = (size_t)h * p->N * p->D;
            ref_attention_row_bias(p->q + hd, p->k + hd, p->v + hd, p->N, p->D, p->causal, i, slope ? slope[h] : 0.0,
                                   scratch, r.ref + w * p->D);
        }
    tfree(scratch);
    return r;
}

int run_compare(const FusedKernel *kn, Problem *p, const RefRows *r, double atol, Err *e, float *full,
                const float *slope_d)
{
    dpoison(p->O, p->n, p->dtype);
    gpu_refusal_clear(); /* a failure below is a refusal only if this launch was refused (report_not_run) */
    int rc = slope_d ? kn->launch_alibi(p->Q, p->K, p->V, p->O, slope_d, p->B, p->H, p->N, p->D, p->dtype, p->causal, NULL)
           : kn ? kn->launch(p->Q, p->K, p->V, p->O, p->B, p->H, p->N, p->D, p->dtype, p->causal, NULL)
                : naive_attention_gpu(p->Q, p->K, p->V, p->O, p->B, p->H, p->N, p->D, p->dtype, p->causal, NULL);
    if (rc != 0) return rc;
    gpu_sync_check();
    float *got = xmalloc(r->nrows * p->D * 4, "sampled rows");
    *e = compare_rows(p, r->stride, p->O, r->ref, r->nrows, atol, full, got);
    tfree(got);
    return 0;
}
#endif
