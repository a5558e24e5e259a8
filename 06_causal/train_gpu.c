/*
 * train_gpu.c: ./step06 --train --device gpu, the chapter's Step 6 on the GPU.
 *
 * The same GPT (gpt_gpu.cu: gpt.c's layers as kernels, its linear layers through cuBLAS), the same corpus,
 * seed, initial weights, batches and AdamW as ./step06 --train, trained three ways side by side:
 *
 *   gpu-naive   cuBLAS attention with S and P in memory, P kept per layer for the backward
 *   gpu-fused   step 05's kernel 2 writing L, backward kernel 1 rebuilding P from L (both fp32)
 *   cpu-naive   the CPU model of ./step06 --train (gpt.c), on a thread beside the GPU: the yardstick
 *
 * The tile-relative mask and the breaks train on the CPU only: kernel 2 and backward kernel 1 take one
 * flag, causal with absolute indices, and nothing else.
 *
 * --big: the book's larger GPT (6 layers, C = 384 as 6 heads of 64, batch 4) timed at T = 1024 .. 16384,
 * naive against fused, with the attention in fp32 and in bf16 (step 05's tensor-core pair): time per
 * step, tokens per second, memory, and where naive training stops fitting (the device's memory, or
 * --mem-limit) while the fused one trains on.
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include "gpu.h"
#include "causal.h"
#include "train.h"

#include <math.h>
#include <string.h>

/* The options of a GPU training, checked (bad input: exit 2) before anything needs a GPU; --big's defaults
 * (6 layers, 6 heads of 64, batch 4, T up to 16384) where the option was not given. */
static FILE *gpu_setup(const Opts *o, const TrainOpts *t, TrainSetup *s, Corpus *c)
{
    Opts ob = *o;
    TrainOpts tb = *t;
    if (t->big) {
        if (!(o->given & 1)) ob.B = 4;
        if (!(o->given & 2)) ob.H = 6;
        if (!(o->given & OPT_GIVEN_DIM)) ob.D = 64;
        if (!(o->given & 4)) ob.N = 16384;
        if (!t->layers_given) tb.layers = 6;
    }
    if (ob.D % 16 || ob.D > 128) usage_error("option --dim: the fused attention takes D in 16..128, multiples of 16");
    train_setup(&ob, &tb, s, c);
    /* the CSV opened now: a path that cannot be written is bad input (exit 2), found before any GPU work */
    if (!o->csv) return NULL;
    return csv_open(o->csv, t->big ? "T,attention,fits,bytes,peak_bytes,ms_per_step,tokens_per_s,attn_ms,first_loss,last_loss"
                                   : "run,step,split,loss");
}

#ifndef HAVE_CUDA

int train_gpu_main(const Opts *o, const TrainOpts *t)
{
    TrainSetup s;
    Corpus c;
    FILE *csv = gpu_setup(o, t, &s, &c);
    if (csv) fclose(csv);
    gpu_require();
    return EXIT_SKIP;
}

void train_gpu_checks(void) { report_skip("train-gpu", "built without CUDA"); }

#else

#include "gpt_gpu.h"

#include <pthread.h>

/* Mean loss over the validation batches, train_val_loss's loop for the GPU model. */
static double gpu_val_loss(const TrainSetup *s, const Corpus *c, GPTGpu *m, int *x, int *y)
{
    double sum = 0;
    for (int k = 0; k < s->val_batches; k++) {
        corpus_val_batch(c, k, s->val_batches, s->B, s->cfg.T, x, y);
        const double l = gpt_gpu_forward(m, x, y, s->B, s->cfg.T);
        if (l < 0) return NAN;                    // refused (its line said why): no mean of -1s
        sum += l;
    }
    return sum / s->val_batches;
}

enum { G_NAIVE, G_FUSED, C_NAIVE, N_GRUNS };
static const char *const GRUN_NAME[N_GRUNS] = {"gpu-naive", "gpu-fused", "cpu-naive"};

/* The three runs' curves (train.h's Curves; ms: the GPU runs' time per step, forward, backward and AdamW). */
static void curves_alloc_all(Curves *cv, long steps) { for (int r = 0; r < N_GRUNS; r++) curves_alloc(&cv[r], steps); }
static void curves_free_all(Curves *cv) { for (int r = 0; r < N_GRUNS; r++) curves_free(&cv[r]); }

/* One CPU step (the CPU run's thread). */
typedef struct {
    const TrainSetup *s;
    const Corpus *c;
    GPT *m;
    Curves *cv;
    const int *x, *y;
    int *vx, *vy;
    long step;
    int oom;
    size_t oom_bytes;      /* what was refused (mem_refused, on this thread) */
} CpuJob;

static void *cpu_step(void *p)
{
    CpuJob *j = p;
    const double loss = gpt_forward(j->m, j->x, j->y, j->s->B, j->s->cfg.T, NULL);
    if (loss < 0 || gpt_backward(j->m, j->x, j->y, j->s->B, j->s->cfg.T) != 0) { j->oom = 1, j->oom_bytes = mem_refused(); return NULL; }
    j->cv->train[j->step] = loss;
    gpt_adamw(j->m, train_lr_at(j->s, j->step), 0.0f);
    if (train_eval_due(j->s, j->step))
        j->cv->val[j->step] = train_val_loss(j->s, j->c, j->m, NULL, j->vx, j->vy);
    return NULL;
}

/* One GPU step: forward, backward, AdamW, and the wall-clock time of the three (the forward waits for the
 * loss; the step ends with a synchronisation, so the time is the GPU's work plus the launches). */
static int gpu_step(const TrainSetup *s, GPTGpu *m, const int *x, const int *y, long step, double *loss, double *ms)
{
    const double t0 = now_sec();
    *loss = gpt_gpu_forward(m, x, y, s->B, s->cfg.T);
    if (*loss < 0 || gpt_gpu_backward(m, s->B, s->cfg.T) != 0) return -1;
    gpt_gpu_adamw(m, train_lr_at(s, step), 0.0f);
    gpu_sync_check();
    *ms = (now_sec() - t0) * 1e3;
    return 0;
}

/* The three runs in lockstep for s->steps steps on the batches of ./step06 --train (seed s->seed).
 * cv: N_GRUNS curves (cpu NULL: the GPU runs only). verbose: the progress table. 0, or -1 (the line said why). */
static int train_three(const TrainSetup *s, const Corpus *c, GPTGpu *g, GPT *cpu, Curves *cv, int verbose)
{
    const size_t bt = (size_t)s->B * s->cfg.T;
    int *x = xmalloc(bt * sizeof(int), "batch"), *y = xmalloc(bt * sizeof(int), "batch");
    int *vx = xmalloc(2 * bt * sizeof(int), "val batch"), *vy = xmalloc(2 * bt * sizeof(int), "val batch");
    Rng rng;
    rng_seed(&rng, s->seed);
    const double t0 = now_sec();
    int rc = 0;
    for (long step = 1; step <= s->steps && rc == 0; step++) {
        corpus_batch(c, &rng, s->B, s->cfg.T, x, y);   // the same batch for every run, and as ./step06 --train
        CpuJob job = {s, c, cpu, &cv[C_NAIVE], x, y, vx + bt, vy + bt, step, 0, 0};
        pthread_t th;
        const int threaded = cpu && pthread_create(&th, NULL, cpu_step, &job) == 0;
        for (int r = G_NAIVE; r <= G_FUSED && rc == 0; r++) {
            if (gpu_step(s, &g[r], x, y, step, &cv[r].train[step], &cv[r].ms[step]) != 0) {
                fprintf(stderr, "%s: the %s run's attention refused to run (the line above says why)\n", g_prog, GRUN_NAME[r]);
                rc = -1;
            } else if (train_eval_due(s, step)) {
                cv[r].val[step] = gpu_val_loss(s, c, &g[r], vx, vy);
            }
        }
        if (threaded) pthread_join(th, NULL);
        else if (cpu) cpu_step(&job);
        if (job.oom) { mem_oom_line(job.oom_bytes, "the CPU run"); rc = -1; }
        if (!verbose || rc || !train_progress_due(s, step)) continue;
        const Curves *cvs[N_GRUNS] = {&cv[0], &cv[1], &cv[2]};
        train_progress_row(step, N_GRUNS, cvs, 9, train_eval_due(s, step));
        printf(" | %7.2f %7.2f | %6.1f s\n", cv[G_NAIVE].ms[step], cv[G_FUSED].ms[step], now_sec() - t0);
        fflush(stdout);
    }
    tfree(x); tfree(y); tfree(vx); tfree(vy);
    return rc;
}

/* Median of the GPU's time per step over steps 2.. (step 1 pays for cuBLAS's and the kernels' first calls). */
static double median_ms(const Curves *cv, long steps)
{
    const long n = steps > 1 ? steps - 1 : 1;
    double *t = xmalloc((size_t)n * sizeof(double), "times");
    for (long i = 0; i < n; i++) t[i] = cv->ms[steps > 1 ? i + 2 : 1];
    const double m = median(t, (int)n);
    tfree(t);
    return m;
}

/* Build the two GPU models and the CPU one from the same initial weights. 0, or -1 (the line said why). */
static int build_three(const TrainSetup *s, GPTGpu *g, GPT *cpu)
{
    const Attention naive = ATTENTION_NAIVE("naive", MASK_ABSOLUTE, SOFTMAX_INTACT, s->BR, s->BC);
    static Attention cpu_attn;
    cpu_attn = naive;
    if (cpu && gpt_build(cpu, &s->cfg, s->B, &cpu_attn, s->score_scale, s->seed) != 0) {
        mem_oom_line(gpt_bytes(&s->cfg, s->B, &cpu_attn, NULL), "the CPU model");
        return -1;
    }
    float *init = gpt_init_alloc(&s->cfg, s->seed);   // the numbers gpt_build gave the CPU model
    int rc = 0;
    if (gpt_gpu_build(&g[G_NAIVE], &s->cfg, s->B, &GPU_ATTN_NAIVE, s->score_scale, init, 1) != 0) rc = -1;
    else if (gpt_gpu_build(&g[G_FUSED], &s->cfg, s->B, &GPU_ATTN_FUSED, s->score_scale, init, 1) != 0) {
        gpt_gpu_free(&g[G_NAIVE]);
        rc = -1;
    }
    if (rc && cpu) gpt_free(cpu);
    tfree(init);
    return rc;
}

// --- --big: time and memory over T ------------------------------------------------------------

typedef struct {
    int fits;              /* built and trained */
    int refused;           /* built, but the attention refused to run (a line on stderr said why): not a memory wall */
    size_t bytes;          /* asked for (all of it, fitting or not) */
    size_t peak;           /* tracked device peak while training */
    double ms, attn_ms;    /* median time per step, and the attention's share (forward + backward, all layers) */
    double first, last;    /* the loss of the first and of the last timed step */
} BigRun;

static void big_one(const TrainSetup *s0, const Corpus *c, const GpuAttention *a, int T, long steps, BigRun *r)
{
    TrainSetup s = *s0;
    s.cfg.T = T;
    memset(r, 0, sizeof *r);
    r->bytes = gpt_gpu_bytes(&s.cfg, s.B, a, NULL);
    const size_t bt = (size_t)s.B * T;
    float *init = gpt_init_alloc(&s.cfg, s.seed);
    GPTGpu m;
    dmem_reset_peak();
    const int built = gpt_gpu_build(&m, &s.cfg, s.B, a, s.score_scale, init, 0) == 0;
    tfree(init);
    if (!built) return;
    int *x = xmalloc(bt * sizeof(int), "batch"), *y = xmalloc(bt * sizeof(int), "batch");
    double *ms = xmalloc((size_t)steps * sizeof(double), "times"), loss = 0, t = 0;
    Rng rng;
    rng_seed(&rng, s.seed);
    r->fits = 1;
    for (long k = -2; k < steps; k++) {             // two warm-up steps, then the timed ones
        corpus_batch(c, &rng, s.B, T, x, y);
        if (gpu_step(&s, &m, x, y, k + 3, &loss, &t) != 0) { r->fits = 0; r->refused = 1; break; }
        if (!isfinite(loss)) {                    // a run that diverges is not timed as if it trained
            fprintf(stderr, "%s: --big: %s at T = %d: loss %g at step %ld\n", g_prog, a->name, T, loss, k + 3);
            r->fits = 0, r->refused = 1;
            break;
        }
        if (k == 0) r->first = loss;
        if (k >= 0) ms[k] = t;
    }
    if (r->fits) {
        r->last = loss;
        r->ms = median(ms, (int)steps);
        /* the attention alone, one more step with each call bracketed by events (this step is not in ms) */
        m.attn_ms = 0;
        m.time_attn = 1;
        corpus_batch(c, &rng, s.B, T, x, y);
        r->attn_ms = gpu_step(&s, &m, x, y, steps + 3, &loss, &t) == 0 ? m.attn_ms : NAN;
    }
    r->peak = dmem_peak();
    tfree(x); tfree(y); tfree(ms);
    gpt_gpu_free(&m);
}

enum { N_BIG = 4 };

static int train_gpu_big(const Opts *o, const TrainOpts *t, TrainSetup s, Corpus c, FILE *csv)
{
    const long steps = t->steps_given ? t->steps : 10;
    static const int Ts[] = {1024, 2048, 4096, 8192, 16384};
    const int nT = (o->given & 4) ? 1 : 5;
    const long D = s.cfg.C / s.cfg.H;
    /* naive and fused, in the model's fp32 and with the attention in bf16: pairs (0, 1) and (2, 3) */
    const GpuAttention *const att[N_BIG] = {&GPU_ATTN_NAIVE, &GPU_ATTN_FUSED, &GPU_ATTN_NAIVE_BF16, &GPU_ATTN_FUSED_BF16};
    int avail[N_BIG], on[N_BIG];   /* runs at this D on this GPU; still tried (it fitted at every shorter T) */
    char b[6][32];
    printf("step06 --train --device gpu --big: %s\n", gpu_describe());
    printf("a GPT of %d layers, %d heads, C = %d (D = %ld), batch %d, V = %d; at each T: 2 warm-up steps, then %ld timed "
           "(median), AdamW lr %g; memory: every device buffer of the run, tracked (the model, AdamW's moments, the "
           "activations and their gradients, what attention keeps and its scratch)%s%s\n",
           s.cfg.L, s.cfg.H, s.cfg.C, D, s.B, s.cfg.V, steps, s.lr,
           t->mem_limit ? ", under --mem-limit " : ", under the device's memory",
           t->mem_limit ? fmt_bytes((double)t->mem_limit, b[0], 32) : "");
    printf("the model, its activations and AdamW are fp32 in every run; the attention:\n");
    for (int k = 0; k < N_BIG; k++) {
        const char *why = att[k]->unavailable ? att[k]->unavailable(D) : NULL;
        avail[k] = on[k] = !why;
        printf("  %s%s%s\n", att[k]->what, why ? ": skipped, " : "", why ? why : "");
    }
    if (on[3]) printf("  (fused-bf16 runs %s)\n", gpu_attn_bf16_kernels(D));
    printf("\n      T  attention    ms/step   tokens/s     memory  attention's share | fused / naive, same precision\n");
    long fails[N_BIG] = {0}, fits_max[N_BIG] = {0};
    int refused = 0;
    size_t fail_bytes[N_BIG] = {0};
    BigRun first[N_BIG], best[N_BIG];
    int first_T = 0, best_T = 0;
    for (int i = 0; i < nT; i++) {
        const int T = (o->given & 4) ? (int)o->N : Ts[i];
        BigRun r[N_BIG];
        int any = 0;
        for (int k = 0; k < N_BIG; k++) {
            memset(&r[k], 0, sizeof r[k]);
            if (!on[k]) continue;
            big_one(&s, &c, att[k], T, steps, &r[k]);
            printf("  %5d  %-10s", T, att[k]->name);
            if (r[k].fits)
                printf(" %9.2f %10.0f %10s %9.0f%%", r[k].ms, s.B * T / r[k].ms * 1e3,
                       fmt_bytes((double)r[k].peak, b[0], 32), 100 * r[k].attn_ms / r[k].ms);
            else if (r[k].refused)
                printf(" %9s   (the line above says why)", "refused");
            else
                printf(" %9s   asked %-10s            ", "OOM", fmt_bytes((double)r[k].bytes, b[0], 32));
            if (k % 2 && r[k].fits && r[k - 1].fits) printf("          | %.2fx\n", r[k - 1].ms / r[k].ms);
            else printf("\n");
            fflush(stdout);
            if (csv)
                fprintf(csv, "%d,%s,%d,%zu,%zu,%.4f,%.1f,%.4f,%.6f,%.6f\n", T, att[k]->name,
                        r[k].fits ? 1 : r[k].refused ? -1 : 0, r[k].bytes,   // fits: 1, 0 out of memory, -1 refused
                        r[k].fits ? r[k].peak : 0, r[k].ms, r[k].fits ? s.B * T / r[k].ms * 1e3 : 0, r[k].attn_ms,
                        r[k].first, r[k].last);
            if (r[k].fits) { fits_max[k] = T; any = 1; }
            else if (r[k].refused) refused = 1;
            else if (!fails[k]) { fails[k] = T; fail_bytes[k] = r[k].bytes; }
        }
        int all = 1;   // every run available here fitted at this T: the answers compare such a T only
        for (int k = 0; k < N_BIG; k++) all &= !avail[k] || r[k].fits;
        if (all && !first_T) { first_T = T; memcpy(first, r, sizeof r); }
        if (all) { best_T = T; memcpy(best, r, sizeof r); }
        if (!any) break;
        for (int k = 0; k < N_BIG; k++) on[k] &= r[k].fits;   // a run that did not fit is not tried longer
    }
    if (csv) { fclose(csv); printf("wrote %s\n", o->csv); }
    if (refused) printf("(refused: the attention could not run this case; not a memory wall, and left out of the answers)\n");
    printf("(memory = the tracked device peak of the run; attention's share = the part of a step spent in the "
           "attention's forward and backward, timed with events in one more step)\n");
    for (int pass = 0; pass < 2 && first_T; pass++) {
        const int T = pass ? best_T : first_T;
        const BigRun *r = pass ? best : first;
        if (pass && best_T == first_T) break;
        printf("answer: at T = %d: fp32 attention: naive %.0f tokens/s in %s, fused %.0f in %s (%.2fx naive's speed)",
               T, s.B * T / r[0].ms * 1e3, fmt_bytes((double)r[0].peak, b[0], 32), s.B * T / r[1].ms * 1e3,
               fmt_bytes((double)r[1].peak, b[1], 32), r[0].ms / r[1].ms);
        if (avail[3])
            printf("; bf16 attention: naive %.0f in %s, fused %.0f in %s (%.2fx)", s.B * T / r[2].ms * 1e3,
                   fmt_bytes((double)r[2].peak, b[2], 32), s.B * T / r[3].ms * 1e3, fmt_bytes((double)r[3].peak, b[3], 32),
                   r[2].ms / r[3].ms);
        printf("\n");
    }
    if (first_T && first[1].ms > first[0].ms)
        printf("answer: in fp32 fused is the slower here: backward kernel 1 is the transcription of the CPU loop, no "
               "tensor cores (the attention is %.0f%% of fused's step at T = %d, %.0f%% of naive's)%s\n",
               100 * first[1].attn_ms / first[1].ms, first_T, 100 * first[0].attn_ms / first[0].ms,
               avail[3] ? "; the tensor-core pair in bf16 is the fused attention as it is used" : "");
    const char *lim = t->mem_limit ? fmt_bytes((double)t->mem_limit, b[4], 32) : fmt_bytes((double)dmem_device_total(), b[4], 32);
    for (int k = 0; k < N_BIG; k += 2) {
        if (!avail[k] || !avail[k + 1]) continue;   // a pair with one side not run (no kernel for this D)
        char end[64] = " (the largest tried)";
        if (fails[k + 1]) snprintf(end, sizeof end, "; it stops at T = %ld", fails[k + 1]);
        if (fails[k] && fits_max[k + 1] >= fails[k])
            printf("answer: %s attention, under %s%s: naive training stops fitting at T = %ld (it asks for %s: P is "
                   "B*H*T*T per layer) while fused trains on, up to T = %ld%s\n", k ? "bf16" : "fp32", lim,
                   t->mem_limit ? " (--mem-limit)" : " (the device)", fails[k], fmt_bytes((double)fail_bytes[k], b[5], 32),
                   fits_max[k + 1], end);
        else if (fails[k] && fails[k + 1])
            printf("answer: %s attention, under %s: naive training stops fitting at T = %ld (it asks for %s), fused at "
                   "T = %ld\n", k ? "bf16" : "fp32", lim, fails[k], fmt_bytes((double)fail_bytes[k], b[5], 32),
                   fails[k + 1]);
        else if (fails[k])
            printf("answer: %s attention, under %s: naive training stops fitting at T = %ld (it asks for %s); fused "
                   "did not run there (refused)\n", k ? "bf16" : "fp32", lim, fails[k],
                   fmt_bytes((double)fail_bytes[k], b[5], 32));
        else
            printf("answer: %s attention, under %s: naive training fits at every T tried (up to %ld); --mem-limit "
                   "lowers the wall\n", k ? "bf16" : "fp32", lim, fits_max[k]);
    }
    corpus_free(&c);
    return EXIT_OK;
}

// --- ./step06 --train --device gpu ----------------------------------------------------------

int train_gpu_main(const Opts *o, const TrainOpts *t)
{
    TrainSetup s;
    Corpus c;
    FILE *csv = gpu_setup(o, t, &s, &c);
    gpu_require();
    if (t->mem_limit) dmem_set_limit(t->mem_limit);   // the device's: the host holds only the CPU run and the corpus
    if (t->big) return train_gpu_big(o, t, s, c, csv);
    const double floor = corpus_bigram_floor(&c);

    GPTGpu g[2];
    GPT cpu;
    dmem_reset_peak();
    if (build_three(&s, g, &cpu) != 0) { if (csv) fclose(csv); corpus_free(&c); return EXIT_FAIL; }
    Curves cv[N_GRUNS];
    curves_alloc_all(cv, s.steps);
    char b[6][32];
    size_t sv_n, sv_f;
    gpt_gpu_bytes(&s.cfg, s.B, &GPU_ATTN_NAIVE, &sv_n);
    gpt_gpu_bytes(&s.cfg, s.B, &GPU_ATTN_FUSED, &sv_f);
    printf("step06 --train --device gpu: %s\n", gpu_describe());
    printf("a GPT of %d layers, %d heads, C = %d (D = %d), context T = %d, batch %d, %zu parameters; AdamW lr %g "
           "(warm-up 10 steps), %ld steps, seed %llu; everything fp32 (linear layers: cuBLAS SGEMM, no TF32)\n",
           s.cfg.L, s.cfg.H, s.cfg.C, s.cfg.C / s.cfg.H, s.cfg.T, s.B, g[0].num_params, s.lr, s.steps,
           (unsigned long long)s.seed);
    printf("data: %s: %zu symbols to train on, %zu held out, %d distinct; the bigram floor %.3f nats\n", c.source,
           c.n_train, c.n_val, c.V, floor);
    printf("runs: gpu-%s\n      gpu-%s\n      cpu-naive: gpt.c, the CPU run of ./step06 --train, on a thread beside "
           "the GPU (same seed, weights, batches)\n", GPU_ATTN_NAIVE.what, GPU_ATTN_FUSED.what);
    printf("(the tile-relative mask and the breaks train on the CPU only: ./step06 --train. Kernel 2 and backward "
           "kernel 1 take one flag, causal with absolute indices)\n\n");
    printf(" step |  train loss                       |  validation loss                  |  GPU ms/step    |\n");
    printf("      | gpu-naive gpu-fused cpu-naive | gpu-naive gpu-fused cpu-naive |   naive   fused |  time\n");
    const double t0 = now_sec();
    const int rc = train_three(&s, &c, g, &cpu, cv, 1);
    const double secs = now_sec() - t0;
    if (rc != 0) { if (csv) fclose(csv); curves_free_all(cv); gpt_gpu_free(&g[0]); gpt_gpu_free(&g[1]); gpt_free(&cpu); corpus_free(&c); return EXIT_FAIL; }

    const long S = s.steps;
    long at_f, at_n, at_c;
    const double gf = train_max_gap(cv[G_FUSED].train, cv[G_NAIVE].train, S, &at_f);
    const double gn = train_max_gap(cv[G_NAIVE].train, cv[C_NAIVE].train, S, &at_n);
    const double gc = train_max_gap(cv[G_FUSED].train, cv[C_NAIVE].train, S, &at_c);
    const double ms_n = median_ms(&cv[G_NAIVE], S), ms_f = median_ms(&cv[G_FUSED], S);
    printf("\n%ld steps in %.1f s (the CPU run on its thread alongside); tracked device peak %s for both GPU models\n", S,
           secs, fmt_bytes((double)dmem_peak(), b[0], 32));
    /* SAME_CURVE (train.h): amplified rounding stays below it, a different attention does not */
    printf("answer: on the GPU the fused attention %s: the largest |loss(gpu-fused) - loss(gpu-naive)| over the %ld "
           "steps is %.2e (step %ld); at step 1, before any update, %.2e\n",
           gf <= SAME_CURVE ? "trains like naive attention" : "does NOT train like naive attention (more than 1e-3 apart)", S,
           gf, at_f, fabs(cv[G_FUSED].train[1] - cv[G_NAIVE].train[1]));
    printf("answer: the GPU %s: largest |loss(gpu-naive) - loss(cpu-naive)| %.2e (step %ld), "
           "|loss(gpu-fused) - loss(cpu-naive)| %.2e (step %ld); validation at step %ld: %.4f, %.4f, %.4f "
           "(gpu-naive, gpu-fused, cpu-naive)\n",
           gn <= SAME_CURVE && gc <= SAME_CURVE ? "trains like the CPU" : "does NOT train like the CPU (more than 1e-3 apart)", gn,
           at_n, gc, at_c, S, cv[G_NAIVE].val[S], cv[G_FUSED].val[S], cv[C_NAIVE].val[S]);
    printf("answer: time per step (median of steps 2..%ld, forward + backward + AdamW): naive %.2f ms, fused %.2f ms "
           "(%.0f and %.0f tokens/s); --big times a larger model at long contexts\n",
           S, ms_n, ms_f, s.B * s.cfg.T / ms_n * 1e3, s.B * s.cfg.T / ms_f * 1e3);
    printf("answer: memory: naive keeps P, %s per layer, %s on the device for the whole run; fused keeps L, %s per "
           "layer, %s in all\n", fmt_bytes((double)sv_n, b[1], 32), fmt_bytes((double)g[G_NAIVE].bytes, b[2], 32),
           fmt_bytes((double)sv_f, b[3], 32), fmt_bytes((double)g[G_FUSED].bytes, b[4], 32));
    if (csv) {
        const Curves *cvs[N_GRUNS] = {&cv[0], &cv[1], &cv[2]};
        train_csv_write(csv, o->csv, floor, N_GRUNS, GRUN_NAME, cvs, 0, S);
    }
    curves_free_all(cv);
    gpt_gpu_free(&g[0]);
    gpt_gpu_free(&g[1]);
    gpt_free(&cpu);
    corpus_free(&c);
    return EXIT_OK;
}

// --- checks (./step06 --check, GPU part) -----------------------------------------------------------

/* max |a - b| over n, relative to max |b| (NaN: infinite) */
static double max_diff(const float *a, const float *b, size_t n, double *scale)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)a[i] - b[i]);
        if (!(e <= d)) d = isnan(e) ? INFINITY : e;
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    *scale = m;
    return d;
}

/* The attention in bf16 inside the fp32 model (the --big runs' mixed precision), at D = 64 where step 05's
 * tensor-core kernels run: one batch's loss and gradient against the CPU's fp32 ones. The rule of step 05:
 * the fused kernels within 2x the error of naive attention in the same dtype (here naive-bf16, cuBLAS). */
static void check_bf16(const Corpus *c)
{
    const GPTConfig cfg = {c->V, 100, 1, 2, 128};
    const int B = 2;
    if (GPU_ATTN_FUSED_BF16.unavailable(64)) { report_skip("train-gpu/bf16", "%s", GPU_ATTN_FUSED_BF16.unavailable(64)); return; }
    GPT cpu;
    const Attention naive = ATTENTION_NAIVE("naive", MASK_ABSOLUTE, SOFTMAX_INTACT, 16, 16);
    if (gpt_build(&cpu, &cfg, B, &naive, 1.0f, 5) != 0) {
        char lim[96];
        report(0, NULL, "train-gpu/bf16", "out of host memory: the CPU model asked for %zu bytes, %s",
               gpt_bytes(&cfg, B, &naive, NULL), mem_limit_desc(lim, sizeof lim));
        return;
    }
    const size_t bt = (size_t)B * cfg.T, np = cpu.num_params;
    int *x = xmalloc(bt * sizeof(int), "batch"), *y = xmalloc(bt * sizeof(int), "batch");
    float *grad = xmalloc(np * sizeof(float), "gradient");
    Rng rng;
    rng_seed(&rng, 12);
    corpus_batch(c, &rng, B, cfg.T, x, y);
    const double lc = gpt_forward(&cpu, x, y, B, cfg.T, NULL);
    gpt_backward(&cpu, x, y, B, cfg.T);
    double err[2] = {INFINITY, INFINITY}, lerr[2] = {INFINITY, INFINITY}, scale = 0;
    const GpuAttention *const att[2] = {&GPU_ATTN_NAIVE_BF16, &GPU_ATTN_FUSED_BF16};
    for (int k = 0; k < 2; k++) {
        GPTGpu g;
        if (gpt_gpu_build(&g, &cfg, B, att[k], 1.0f, cpu.params_mem, 1) != 0) continue;
        const double lg = gpt_gpu_forward(&g, x, y, B, cfg.T);
        if (lg >= 0 && gpt_gpu_backward(&g, B, cfg.T) == 0) {
            for (size_t i = 0; i < np; i++) grad[i] = NAN;
            gpt_gpu_download(&g, NULL, grad);
            err[k] = max_diff(grad, cpu.grads_mem, np, &scale);
            lerr[k] = fabs(lg - lc);
        }
        gpt_gpu_free(&g);
    }
    report(err[1] <= 2 * err[0] && lerr[1] <= 2 * lerr[0] + 1e-6 && err[0] < 1e-2 * scale, NULL,
           "train-gpu/fused-bf16-vs-cpu", "D = 64, T = 100, one batch against the CPU's fp32: |loss diff| %.1e "
           "(naive-bf16 %.1e), gradient max |diff| %.2e (naive-bf16 %.2e, max |g| %.2e); expected within 2x naive-bf16's",
           lerr[1], lerr[0], err[1], err[0], scale);
    tfree(x); tfree(y); tfree(grad);
    gpt_free(&cpu);
}

void train_gpu_checks(void)
{
    if (!gpu_available()) { report_skip("train-gpu", "no CUDA device"); return; }
    /* The default model, at T = 100 (no tile of kernel 2 (64), of backward kernel 1 (32) or of the CPU's (16)
     * divides it), batch 4: the tails of every tile are in the check. */
    TrainSetup s;
    Corpus c;
    corpus_generate(&c, 440000, 0);
    memset(&s, 0, sizeof s);
    const GPTConfig cfg = {c.V, 100, 2, 4, 64};
    s.cfg = cfg;
    s.B = 4; s.BR = 16; s.BC = 16; s.steps = 20; s.lr = 3e-3f; s.score_scale = 1.0f; s.seed = 0;
    s.eval_every = 10; s.val_batches = 2;
    GPTGpu g[2];
    GPT cpu;
    if (build_three(&s, g, &cpu) != 0) { report(0, NULL, "train-gpu", "out of memory (the line above says the host's or the device's)"); corpus_free(&c); return; }
    char name[96];

    { /* one batch: the loss and the whole model's gradient, GPU against CPU */
        const size_t bt = (size_t)s.B * s.cfg.T, np = cpu.num_params;
        int *x = xmalloc(bt * sizeof(int), "batch"), *y = xmalloc(bt * sizeof(int), "batch");
        float *grad = xmalloc(np * sizeof(float), "gradient");
        Rng rng;
        rng_seed(&rng, 11);
        corpus_batch(&c, &rng, s.B, s.cfg.T, x, y);
        const double lc = gpt_forward(&cpu, x, y, s.B, s.cfg.T, NULL);
        gpt_backward(&cpu, x, y, s.B, s.cfg.T);
        for (int r = G_NAIVE; r <= G_FUSED; r++) {
            const double lg = gpt_gpu_forward(&g[r], x, y, s.B, s.cfg.T);
            const int ok = lg >= 0 && gpt_gpu_backward(&g[r], s.B, s.cfg.T) == 0;
            for (size_t i = 0; i < np; i++) grad[i] = NAN;
            gpt_gpu_download(&g[r], NULL, grad);
            double scale, d = max_diff(grad, cpu.grads_mem, np, &scale);
            /* fp32 sums in other orders (cuBLAS's blocking, the warps' shuffles, backward kernel 1's atomics):
             * 3e-6 of the largest gradient element, with 1e-7 below it. Measured on the H100: 6e-7 of it;
             * GELU's backward with 2.9 for its 3 (planted once) is 7e-6 of it */
            const double tol = 1e-7 + 3e-6 * scale;
            snprintf(name, sizeof name, "train-gpu/%s-loss-and-gradient-vs-cpu", GRUN_NAME[r]);
            report(ok && fabs(lg - lc) <= 1e-6 && d <= tol, NULL, name,
                   "one batch, T = 100: loss %.7f vs the CPU's %.7f (|diff| %.1e, tol 1e-6); all %zu gradient elements: "
                   "max |diff| %.2e, tol %.2e (3e-6 of max |g| = %.2e, + 1e-7)", lg, lc, fabs(lg - lc), np, d, tol, scale);
        }
        tfree(x); tfree(y); tfree(grad);
    }
    gpt_gpu_free(&g[0]); gpt_gpu_free(&g[1]); gpt_free(&cpu);

    { /* 20 steps, the three runs from the same start: the curves agree */
        Curves cv[N_GRUNS];
        if (build_three(&s, g, &cpu) != 0) { report(0, NULL, "train-gpu", "out of memory (the line above says the host's or the device's)"); corpus_free(&c); return; }
        curves_alloc_all(cv, s.steps);
        const int rc = train_three(&s, &c, g, &cpu, cv, 0);
        long at;
        double gap = rc ? INFINITY : train_max_gap(cv[G_NAIVE].train, cv[C_NAIVE].train, s.steps, &at);
        report(gap <= 5e-6, NULL, "train-gpu/naive-vs-cpu-20-steps", "largest |loss(gpu-naive) - loss(cpu-naive)| %.2e "
               "(step %ld; expected <= 5e-6), losses %.4f -> %.4f", gap, at, cv[C_NAIVE].train[1], cv[C_NAIVE].train[s.steps]);
        gap = rc ? INFINITY : train_max_gap(cv[G_FUSED].train, cv[C_NAIVE].train, s.steps, &at);
        report(gap <= 5e-6, NULL, "train-gpu/fused-vs-cpu-20-steps", "largest |loss(gpu-fused) - loss(cpu-naive)| %.2e "
               "(step %ld; expected <= 5e-6)", gap, at);
        gap = rc ? INFINITY : train_max_gap(cv[G_FUSED].train, cv[G_NAIVE].train, s.steps, &at);
        report(gap <= 5e-6, NULL, "train-gpu/fused-vs-naive-20-steps", "largest |loss(gpu-fused) - loss(gpu-naive)| %.2e "
               "(step %ld; expected <= 5e-6)", gap, at);
        const double vgap = fabs(cv[G_FUSED].val[s.steps] - cv[C_NAIVE].val[s.steps]);
        report(vgap <= 5e-6, NULL, "train-gpu/validation-vs-cpu", "validation at step %ld: gpu-fused %.5f, cpu-naive %.5f "
               "(|diff| %.1e, expected <= 5e-6)", s.steps, cv[G_FUSED].val[s.steps], cv[C_NAIVE].val[s.steps], vgap);
        /* the naive GPU run again: no atomics anywhere in it, so the same curve to the bit; the fused one adds
         * dQ by atomics (backward kernel 1), so its rerun may differ in the last bits */
        Curves again[N_GRUNS];
        curves_alloc_all(again, s.steps);
        gpt_gpu_free(&g[0]); gpt_gpu_free(&g[1]); gpt_free(&cpu);
        if (build_three(&s, g, NULL) == 0) {
            const int rc2 = train_three(&s, &c, g, NULL, again, 0);
            const int same = !rc2 && !memcmp(cv[G_NAIVE].train, again[G_NAIVE].train, ((size_t)s.steps + 1) * sizeof(double));
            const double fgap = rc2 ? INFINITY : train_max_gap(again[G_FUSED].train, cv[G_FUSED].train, s.steps, &at);
            report(same, NULL, "train-gpu/naive-rerun-bit-identical", "gpu-naive trained again: losses %s",
                   same ? "identical to the bit" : "DIFFER");
            report(fgap <= 1e-5, NULL, "train-gpu/fused-rerun", "gpu-fused trained again: largest |diff| %.2e (dQ by "
                   "fp32 atomics: %s; expected <= 1e-5)", fgap, fgap == 0 ? "the same this time" : "not bit-identical");
            gpt_gpu_free(&g[0]); gpt_gpu_free(&g[1]);
        } else report(0, NULL, "train-gpu/rerun", "out of device memory (the line above)");
        curves_free_all(again);
        curves_free_all(cv);
    }
    check_bf16(&c);
    { /* out of GPU memory: one line with the bytes, nothing left allocated, no crash */
        const size_t before = dmem_current();
        float *init = gpt_init_alloc(&s.cfg, 0);
        dmem_set_limit(before + gpt_gpu_bytes(&s.cfg, s.B, &GPU_ATTN_NAIVE, NULL) / 2);
        GPTGpu m;
        const int r = gpt_gpu_build(&m, &s.cfg, s.B, &GPU_ATTN_NAIVE, 1.0f, init, 0);
        dmem_set_limit(0);
        report(r == -1 && dmem_current() == before, NULL, "train-gpu/out-of-memory",
               "a limit at half the model's bytes: build refused (%s), tracked device memory back to %zu bytes (%s)",
               r == -1 ? "yes" : "NO", dmem_current(), dmem_current() == before ? "yes" : "NO");
        if (r == 0) gpt_gpu_free(&m);
        tfree(init);
    }
    corpus_free(&c);
}

#endif
