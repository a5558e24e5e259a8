/*
 * step06: the causal mask inside the tiled forward, block skipping, and the
 * chapter's Step 6 bug on purpose.
 *
 * What it adds over step 04: a query may only look at keys at or before it
 * (key j <= query i). In the tiled forward the mask goes on s_tile, after
 * the scores and before m_tile, and it must use ABSOLUTE indices: row i0 + r
 * against column j0 + c. Tiles wholly above the diagonal (j0 > last row of
 * the Q tile) are never visited: about half of them, so causal attention
 * costs about half. --mask relative builds the mask from the tile-relative
 * r and c instead (the chapter's "arange from 0" bug): the first row tile is
 * right, every later one is wrong.
 *
 * Convention for fully masked scores: a tile in which a row has no visible
 * column (m_tile = -inf) contributes nothing to that row (p = 0, its state
 * untouched; e^(-inf - (-inf)) is never computed); a row with no visible
 * column at all ends with l = 0 and is defined as o = 0, never 0/0 = NaN.
 * With the causal mask every row sees at least its own key, so that second
 * case only arises with other masks (tested through --check's hook).
 *
 * Run:   make step06 && ./step06                (CPU B=2 H=4 N=1024 D=64; GPU B=2 H=8 N=4096 D=64)
 *        ./step06 --mask relative               (the bug, row tile by row tile)
 *        ./step06 --check
 * Expect (last lines):
 *        causal visited 1088 of 2048 tiles (53%), and took 1.70x less time
 *        formula: B*H * Tr*(Tr+1)/2 = 8 * 16*17/2 = 1088 of B*H * Tr^2 = 2048
 *        answer: ... relative indices ...
 * Limits: the CPU forward is single-threaded fp32; the GPU part runs step
 *        05's kernels with their causal flag.
 */
#include "common.h"
#include "gpu.h"
#include "../05_cuda_fused/kernels.h"
#include "../01_naive/naive.h"
#include "causal.h"
#include "train.h"
#include "generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// --- a CPU run against the reference -------------------------------------------------

typedef struct { float *q, *k, *v, *o; double *ref; size_t n; long bh, N, D; } Cpu;

static void cpu_make(Cpu *c, long bh, long N, long D, int causal, uint64_t seed)
{
    c->bh = bh; c->N = N; c->D = D; c->n = (size_t)bh * N * D;
    c->q = xmalloc(c->n * 4, "Q"); c->k = xmalloc(c->n * 4, "K"); c->v = xmalloc(c->n * 4, "V");
    c->o = xmalloc(c->n * 4, "O");
    c->ref = xmalloc(c->n * sizeof(double), "reference");
    make_qkv(c->q, c->k, c->v, c->n, seed);
    ref_attention(c->q, c->k, c->v, bh, N, D, causal, c->ref);
}

static void cpu_free(Cpu *c) { tfree(c->q); tfree(c->k); tfree(c->v); tfree(c->o); tfree(c->ref); }

static long cpu_run(Cpu *c, long BR, long BC, int mode)
{
    for (size_t i = 0; i < c->n; i++) c->o[i] = NAN; // poisoned
    long t = causal_forward_cpu(c->q, c->k, c->v, c->o, NULL, c->bh, c->N, c->D, BR, BC, mode, NULL);
    if (t < 0) { mem_oom_line(mem_refused(), "the tiles"); exit(EXIT_FAIL); }
    return t;
}

/* The causal forward with ALiBi (-slope_h (i - j), absolute indices, before the mask and m_tile) against the
 * float64 reference with the same bias; H heads per batch give the slopes. */
static Err cpu_alibi(Cpu *c, long H, long BR, long BC)
{
    float *slope = xmalloc((size_t)c->bh * 4, "ALiBi slopes");
    double *ref = xmalloc(c->n * sizeof(double), "reference with ALiBi");
    alibi_slopes(slope, c->bh / H, H);
    ref_attention_bias(c->q, c->k, c->v, c->bh, c->N, c->D, 1, slope, ref);
    for (size_t i = 0; i < c->n; i++) c->o[i] = NAN; // poisoned
    if (causal_forward_cpu(c->q, c->k, c->v, c->o, NULL, c->bh, c->N, c->D, BR, BC, MASK_ABSOLUTE, slope) < 0) {
        mem_oom_line(mem_refused(), "the tiles");
        exit(EXIT_FAIL);
    }
    const Err e = compare(c->o, ref, c->n, 1e-5, 1e-5);
    tfree(slope); tfree(ref);
    return e;
}

/* Max abs error of rows [r0, r1) of every head. */
static double rows_err(const Cpu *c, long r0, long r1)
{
    double mx = 0;
    for (long h = 0; h < c->bh; h++)
        for (long i = r0; i < r1 && i < c->N; i++)
            for (long d = 0; d < c->D; d++) {
                size_t x = (size_t)h * c->N * c->D + i * c->D + d;
                double e = fabs((double)c->o[x] - c->ref[x]);
                if (!(e <= mx)) mx = e;
            }
    return mx;
}

// --- the GPU part: step 05's kernels, causal vs not ------------------------------------

#ifdef HAVE_CUDA
typedef struct { const FusedKernel *kn; const void *q, *k, *v; void *o; long B, H, N, D; int dtype, causal; } GCtx;
static void gpu_fn(void *p)
{
    GCtx *g = p;
    g->kn->launch(g->q, g->k, g->v, g->o, g->B, g->H, g->N, g->D, g->dtype, g->causal, NULL);
}

/* Every kernel that runs dtype at D: causal vs the float64 causal reference
 * (check=1), or non-causal vs causal time (check=0). */
static void gpu_part(long B, long H, long N, long D, int dtype, int check, long repeat, FILE *csv, uint64_t seed)
{
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    size_t n = (size_t)B * H * N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V"), *out = xmalloc(n * 4, "O");
    make_qkv(q, k, v, n, seed);
    round_to_dtype(q, n, dtype); round_to_dtype(k, n, dtype); round_to_dtype(v, n, dtype);
    void *dq = dupload(q, n, dtype, "Q"), *dk = dupload(k, n, dtype, "K"), *dv = dupload(v, n, dtype, "V");
    void *dout = dmalloc(n * dtype_size(dtype), "O");
    double *ref = NULL, naive_err = NAN; /* NaN until naive runs: the tolerances' floor (tol_fp32) or cap */
    char name[128], eb[128];
    if (check) {
        ref = xmalloc(n * sizeof(double), "reference");
        ref_attention(q, k, v, B * H, N, D, 1, ref);
        { /* the yardstick: naive causal in the same dtype */
            dpoison(dout, n, dtype);
            if (naive_attention_gpu(dq, dk, dv, dout, B, H, N, D, dtype, 1, NULL) == 0) {
                gpu_sync_check();
                ddownload(out, dout, n, dtype);
                naive_err = compare(out, ref, n, 1, 0).max_abs;
            }
        }
    } else {
        printf("\nGPU: %s, B=%ld H=%ld N=%ld D=%ld, %s; TFLOP/s with FlashAttention's convention "
               "(4*B*H*N*N*D, half of it for causal)\n", gpu_describe(), B, H, N, D, dtype_name(dtype));
        printf("  kernel               non-causal           causal      speed-up\n");
    }
    for (int i = 0; i < nk; i++) {
        const FusedKernel *kn = ks[i];
        if (!(kn->dtypes & (1u << dtype)) || !kn->supports_dim(D)) continue;
        if (FUSED_UNAVAILABLE(kn)) { /* kernels 10-52 off Hopper */
            printf("  %-2d %-16s skipped: %s\n", kn->id, kn->name, FUSED_UNAVAILABLE(kn));
            continue;
        }
        if (!fused_fits(kn, dtype, D)) { /* refused by this GPU's shared memory: a SKIP, never timed */
            if (check) {
                snprintf(name, sizeof name, "gpu-causal kernel%d %s N=%ld D=%ld", kn->id, dtype_name(dtype), N, D);
                report_skip(name, "%s", gpu_last_refusal());
            } else {
                printf("  %-2d %-16s SKIP: %s\n", kn->id, kn->name, gpu_last_refusal());
            }
            continue;
        }
        if (check) {
            double tol = dtype == DT_FP32 ? tol_fp32(naive_err) : tol_16bit(naive_err);
            dpoison(dout, n, dtype);
            snprintf(name, sizeof name, "gpu-causal kernel%d %s N=%ld D=%ld", kn->id, dtype_name(dtype), N, D);
            if (kn->launch(dq, dk, dv, dout, B, H, N, D, dtype, 1, NULL) != 0) { /* fused_fits said it fits: a failure */
                report(0, NULL, name, "launch refused (the line above says why)");
                continue;
            }
            gpu_sync_check();
            ddownload(out, dout, n, dtype);
            Err e = compare(out, ref, n, tol, dtype == DT_FP32 ? 1e-5 : 0);
            report(e.n_bad == 0, &e, name, "%s (tol %.1e%s)", fmt_err(&e, eb, sizeof eb), tol,
                   dtype == DT_FP32 ? ", 2x naive, at least 1e-5" : ", 2x naive");
        } else {
            /* non-causal and causal interleaved run by run (gpu_time_interleaved_ms): the ratio is the point */
            GCtx g[2] = {{kn, dq, dk, dv, dout, B, H, N, D, dtype, 0}, {kn, dq, dk, dv, dout, B, H, N, D, dtype, 1}};
            void (*const fns[2])(void *) = {gpu_fn, gpu_fn};
            void *const ctx[2] = {&g[0], &g[1]};
            double t[2];
            gpu_time_interleaved_ms(fns, ctx, 2, 2, (int)repeat, t);
            const double t_full = t[0], t_causal = t[1];
            double f = 4.0 * B * H * N * N * D;
            printf("  %-2d %-16s %8.3f ms %6.1f TF   %8.3f ms %6.1f TF   %5.2fx\n", kn->id, kn->name, t_full,
                   f / t_full / 1e9, t_causal, f / 2 / t_causal / 1e9, t_full / t_causal);
            if (csv)
                fprintf(csv, "gpu,%s,kernel%d,%ld,%ld,%ld,%ld,%.6f,%.6f,%.3f,%.3f\n", dtype_name(dtype), kn->id, B, H, N, D,
                        t_full, t_causal, f / t_full / 1e9, f / 2 / t_causal / 1e9);
        }
    }
    dfree(dq); dfree(dk); dfree(dv); dfree(dout);
    tfree(q); tfree(k); tfree(v); tfree(out); tfree(ref);
}
#endif

// --- checks ------------------------------------------------------------------------

static int run_checks(void)
{
    static const long Ns[] = {1, 17, 64, 65, 257, 1000};
    static const long blocks[][2] = {{16, 16}, {32, 32}, {64, 64}, {64, 16}, {16, 64}};
    char name[128], eb[128];
    for (size_t a = 0; a < 6; a++) {
        Cpu c;
        cpu_make(&c, 2, Ns[a], 32, 1, 60 + a);
        for (size_t b = 0; b < 5; b++) {
            long BR = blocks[b][0], BC = blocks[b][1];
            long t = cpu_run(&c, BR, BC, MASK_ABSOLUTE);
            Err e = compare(c.o, c.ref, c.n, 1e-5, 1e-5);
            snprintf(name, sizeof name, "causal-cpu N=%ld BR=%ld BC=%ld", Ns[a], BR, BC);
            report(e.n_bad == 0, &e, name, "%s (tol 1e-5)", fmt_err(&e, eb, sizeof eb));
            long want = causal_tiles_expected(2, Ns[a], BR, BC);
            snprintf(name, sizeof name, "tiles N=%ld BR=%ld BC=%ld", Ns[a], BR, BC);
            report(t == want, NULL, name, "visited %ld tiles, expected %ld by formula", t, want);
        }
        { /* a score modifier with the mask: ALiBi, two tile shapes */
            Err e = cpu_alibi(&c, 2, 16, 64);
            snprintf(name, sizeof name, "causal-alibi-cpu N=%ld BR=16 BC=64", Ns[a]);
            report(e.n_bad == 0, &e, name, "vs the float64 causal reference with the same bias: %s (tol 1e-5)",
                   fmt_err(&e, eb, sizeof eb));
        }
        /* The bug: relative indices. Right in the first row tile, wrong after it (when there is an after). */
        const long B_ = 32;
        cpu_run(&c, B_, B_, MASK_RELATIVE);
        double first = rows_err(&c, 0, B_), later = rows_err(&c, B_, Ns[a]);
        snprintf(name, sizeof name, "relative-mask N=%ld BR=BC=%ld", Ns[a], B_);
        if (Ns[a] > B_)
            report(first < 1e-5 && later > 1e-2, NULL, name, "first row tile right (%.1e < 1e-5), later ones wrong (%.2e > 1e-2)",
                   first, later);
        else
            report(first < 1e-5, NULL, name, "one row tile only: right (%.1e)", first);
        /* Exactly which rows are right: row r = BR - 1 of every FULL later tile never has c > r, so it sees
         * every key it should (BR = BC); the other rows of later tiles lose keys. */
        if (Ns[a] >= 2 * B_) {
            double last = 0;
            for (long i0 = B_; i0 + B_ <= Ns[a]; i0 += B_) { double e = rows_err(&c, i0 + B_ - 1, i0 + B_); if (!(e <= last)) last = e; }
            snprintf(name, sizeof name, "relative-mask-last-rows N=%ld BR=BC=%ld", Ns[a], B_);
            report(last < 1e-5, NULL, name, "row BR-1 of every full later tile right (%.1e < 1e-5)", last);
        }
        cpu_free(&c);
    }
    { /* fully masked: a row that sees nothing gives o = 0, and no NaN anywhere */
        Cpu c;
        cpu_make(&c, 1, 65, 16, 1, 77);
        cpu_run(&c, 16, 16, MASK_HIDE_ROW0);
        int zero = 1, finite = 1;
        for (long d = 0; d < 16; d++) zero &= c.o[d] == 0.0f;
        for (size_t i = 0; i < c.n; i++) finite &= f32_is_finite(c.o[i]);
        double rest = rows_err(&c, 1, 65);
        report(zero && finite && rest < 1e-5, NULL, "fully-masked-row",
               "row 0 with every key masked gives o = 0 (%s), no NaN anywhere (%s), other rows right (%.1e)",
               zero ? "yes" : "NO", finite ? "yes" : "NO", rest);
        /* BR > BC: rows of the first Q tile see whole K/V tiles fully masked. */
        cpu_free(&c);
        cpu_make(&c, 1, 100, 16, 1, 78);
        cpu_run(&c, 64, 8, MASK_ABSOLUTE);
        Err e = compare(c.o, c.ref, c.n, 1e-5, 1e-5);
        report(e.n_bad == 0, &e, "fully-masked-tiles BR=64 BC=8", "rows whose whole K/V tile is masked: %s, no NaN",
               fmt_err(&e, eb, sizeof eb));
        cpu_free(&c);
    }
    train_checks();
    generate_checks();
    train_gpu_checks();
#ifdef HAVE_CUDA
    if (gpu_available()) {
        static const long gN[] = {1, 17, 64, 65, 257, 1000};
        for (int dt = 0; dt < 3; dt++) {
            if (gpu_dtype_unavailable(dt)) { report_skip("gpu-causal", "%s", gpu_dtype_unavailable(dt)); continue; }
            for (int a = 0; a < 6; a++) gpu_part(2, 3, gN[a], 64, dt, 1, 1, NULL, 90 + a);
        }
    } else {
        report_skip("gpu-causal", "no CUDA device");
    }
#else
    report_skip("gpu-causal", "built without CUDA");
#endif
    return report_finish();
}

// --- main ---------------------------------------------------------------------------

static void usage(const Opts *o)
{
    printf("usage: ./step06 [options]\n"
           "The causal mask with absolute indices, block skipping, and the tile-relative bug (book Steps 3, 6).\n");
    print_common_usage(o);
    printf("  --mask absolute|relative   how the mask is built (default absolute; relative is the chapter's bug)\n"
           "  --alibi                    also the causal forward with ALiBi, a score modifier beside the mask\n");
    train_usage();
    gen_usage();
}

int main(int argc, char **argv)
{
    Opts o;
    TrainOpts t;
    GenOpts g;
    int mode = MASK_ABSOLUTE, training = 0, alibi = 0, wrong = 0; /* wrong: a result that should be right is not */
    opts_expand(&argc, &argv);
    opts_init(&o, "step06", OPT_SHAPE | OPT_BLOCK | OPT_DTYPE | OPT_SEED | OPT_REPEAT | OPT_CSV | OPT_CHECK | OPT_DEVICE | OPT_GPU_AS,
              (1u << DT_FP32) | (1u << DT_FP16) | (1u << DT_BF16));
    train_opts_init(&t);
    gen_opts_init(&g);
    for (int i = 1; i < argc; i++) training |= !strcmp(argv[i], "--train");
    if (training) { o.B = 8; o.H = 4; o.N = 128; o.D = 16; o.BR = 16; o.BC = 16; } /* the GPT of --train */
    else { o.B = 2; o.H = 4; o.N = 1024; o.D = 64; o.BR = 64; o.BC = 64; }
    o.repeat = 5;
    for (int i = 1; i < argc; i++) {
        if (opts_parse_common(&o, argc, argv, &i)) continue;
        if (!strcmp(argv[i], "--alibi")) { alibi = 1; continue; }
        const int at = i;
        if (train_parse(&t, argc, argv, &i)) {
            if (!training) usage_error("option %s goes with --train (see --help)", argv[at]);
            continue;
        }
        if (gen_parse(&g, argc, argv, &i)) {
            if (strcmp(argv[at], "--generate") && !g.on) usage_error("option %s goes with --generate (see --help)", argv[at]);
            continue;
        }
        if (!strcmp(argv[i], "--mask")) {
            static const char *const modes[] = {"absolute", "relative"};
            const char *opt = argv[i]; // before opt_value moves i on to the value
            mode = 1 + parse_choice(opt, opt_value(argc, argv, &i), modes, 2);
            continue;
        }
        usage_error("unknown option '%s' (see --help)", argv[i]);
    }
    if (o.help) { usage(&o); return 0; }
    opts_validate(&o, sizeof(float));
    if (o.check) return run_checks();
    if (g.on) {
        if (training || alibi || mode != MASK_ABSOLUTE || o.dtype != DT_FP32 || (o.given & 15) || o.csv)
            usage_error("--generate takes --load, --prompt, --tokens, --temperature, --seed and --device (see --help)");
        return generate_main(&o, &g);
    }
    if (training) {
        if (alibi) usage_error("option --alibi goes with the causal run, not --train (the GPT has no position bias)");
        if (mode != MASK_ABSOLUTE || o.dtype != DT_FP32)
            usage_error("--train runs in fp32 with every mask itself: --mask and --dtype do not apply");
        return o.device == DEV_GPU ? train_gpu_main(&o, &t) : train_main(&o, &t); /* train_gpu.c or train.c */
    }

    char eb[128];
    FILE *csv = o.csv ? csv_open(o.csv, "device,dtype,kernel,B,H,N,D,ms_full,ms_causal,tflops_full,tflops_causal") : NULL;
    if (o.device != DEV_GPU) {
        Cpu c, full;
        long bh = o.B * o.H;
        printf("step06: causal attention on the CPU, fp32, B=%ld H=%ld N=%ld D=%ld, BR=%ld BC=%ld, mask from %s indices\n",
               o.B, o.H, o.N, o.D, o.BR, o.BC, mode == MASK_ABSOLUTE ? "absolute" : "tile-relative");
        cpu_make(&c, bh, o.N, o.D, 1, o.seed);
        cpu_make(&full, bh, o.N, o.D, 0, o.seed);
        double t0 = now_sec();
        long tf = cpu_run(&full, o.BR, o.BC, MASK_NONE);
        double ms_full = (now_sec() - t0) * 1e3;
        t0 = now_sec();
        long tc = cpu_run(&c, o.BR, o.BC, mode);
        double ms_causal = (now_sec() - t0) * 1e3;
        Err ef = compare(full.o, full.ref, full.n, 1e-5, 1e-5), ec = compare(c.o, c.ref, c.n, 1e-5, 1e-5);
        printf("non-causal: visited %ld tiles, %.1f ms, vs reference: %s\n", tf, ms_full, fmt_err(&ef, eb, sizeof eb));
        printf("causal:     visited %ld tiles, %.1f ms, vs causal reference: %s%s\n", tc, ms_causal,
               fmt_err(&ec, eb, sizeof eb), ec.n_bad ? "  <-- WRONG" : "");
        /* --mask relative is the chapter's bug on purpose: its causal result is meant to be wrong */
        wrong = ef.n_bad > 0 || (mode == MASK_ABSOLUTE && ec.n_bad > 0);
        printf("causal visited %ld of %ld tiles (%.0f%%), and took %.2fx less time\n", tc, tf, 100.0 * tc / tf,
               ms_full / ms_causal);
        const long Tr = (o.N + o.BR - 1) / o.BR;
        if (o.BR == o.BC && o.N % o.BR == 0)
            printf("formula: B*H * Tr*(Tr+1)/2 = %ld * %ld*%ld/2 = %ld of B*H * Tr^2 = %ld\n", bh, Tr, Tr + 1,
                   causal_tiles_expected(bh, o.N, o.BR, o.BC), bh * Tr * Tr);
        else
            printf("formula: B*H * sum over row tiles i0 of ceil(min(i0 + BR, N) / BC) = %ld\n",
                   causal_tiles_expected(bh, o.N, o.BR, o.BC));
        if (csv) fprintf(csv, "cpu,fp32,tiled,%ld,%ld,%ld,%ld,%.6f,%.6f,0,0\n", o.B, o.H, o.N, o.D, ms_full, ms_causal);
        if (alibi) {
            const Err ea = cpu_alibi(&c, o.H, o.BR, o.BC);
            wrong |= ea.n_bad > 0;
            printf("causal with ALiBi (-slope_h (i - j) on s_tile, absolute indices, before the mask and m_tile): vs the "
                   "causal reference with the same bias: %s%s\n", fmt_err(&ea, eb, sizeof eb), ea.n_bad ? "  <-- WRONG" : "");
        }
        {   /* The bug, row tile by row tile, on the same inputs. */
            cpu_run(&c, o.BR, o.BC, MASK_RELATIVE);
            printf("\nmask from tile-relative indices (c > r instead of j0 + c > i0 + r), error per row tile:\n");
            long shown = 0, first_wrong = -1, tiles = 0, later_wrong = 0, later_all_but_last = 0;
            int first_right = 1;
            for (long i0 = 0; i0 < o.N; i0 += o.BR, tiles++) {
                const long rows = i0 + o.BR < o.N ? o.BR : o.N - i0;
                double e = rows_err(&c, i0, i0 + rows);
                long nwrong = 0, last_right = rows_err(&c, i0 + rows - 1, i0 + rows) <= 1e-5;
                for (long r = i0; r < i0 + rows; r++)
                    if (rows_err(&c, r, r + 1) > 1e-5) { nwrong++; if (first_wrong < 0) first_wrong = r; }
                if (i0 == 0) first_right = nwrong == 0;
                else {
                    later_wrong += nwrong > 0;
                    later_all_but_last += nwrong == rows - 1 && last_right;
                }
                if (shown++ < 4 || i0 + o.BR >= o.N)
                    printf("  rows %5ld..%-5ld max abs %.2e  %ld of %ld rows wrong\n", i0, i0 + rows - 1, e, nwrong, rows);
                else if (shown == 5)
                    printf("  ...\n");
            }
            /* The chapter's claim, printed only as far as these counts bear it out. */
            if (tiles == 1)
                printf("answer: N <= BR: one row tile, and inside it tile-relative indices are the absolute ones; "
                       "run with N > BR to see the bug\n");
            else if (first_right && later_wrong == tiles - 1)
                printf("answer: with tile-relative indices the first row tile (rows 0..%ld) is right and every later one is "
                       "wrong (%ld of %ld): inside the diagonal tile r and c happen to be the absolute offsets, below "
                       "it the mask hides keys that are in the past%s\n", o.BR - 1, later_wrong, tiles - 1,
                       later_all_but_last == tiles - 1 ? " (all but each tile's last row lose some)" : "");
            else
                printf("answer: not the chapter's pattern here: first row tile %s, %ld of %ld later tiles wrong\n",
                       first_right ? "right" : "wrong", later_wrong, tiles - 1);
            if (first_wrong >= 0) printf("first wrong row: %ld (BR = %ld, BC = %ld)\n", first_wrong, o.BR, o.BC);
            else printf("first wrong row: none (BR = %ld, BC = %ld)\n", o.BR, o.BC);
        }
        cpu_free(&c);
        cpu_free(&full);
    }
#ifdef HAVE_CUDA
    if (o.device != DEV_CPU && gpu_available()) {
        long N = (o.given & 4) ? o.N : 4096, B = (o.given & 1) ? o.B : 2, H = (o.given & 2) ? o.H : 8;
        if (gpu_dtype_unavailable(o.dtype)) usage_error("option --dtype: %s", gpu_dtype_unavailable(o.dtype));
        gpu_part(B, H, N, o.D, o.dtype, 0, o.repeat, csv, o.seed);
        printf("(speed-up = non-causal time / causal time. Block skipping removes about half the tiles, so the ideal is\n"
               " about 2x; what each kernel gets is measured above. The Q tiles are uneven (the last visit N / BC K/V tiles,\n"
               " the first one), so every kernel starts the longest first across all heads (05_cuda_fused/tile_order.cuh);\n"
               " the diagonal tiles still cost full price, which keeps small N below 2x)\n");
    } else if (o.device == DEV_GPU) {
        gpu_require();
    } else {
        printf("\nGPU part: skipped (no CUDA device)\n");
    }
#else
    if (o.device == DEV_GPU) gpu_require();
    printf("\nGPU part: skipped (built without CUDA)\n");
#endif
    if (csv) fclose(csv);
    return wrong ? EXIT_FAIL : EXIT_OK;
}
