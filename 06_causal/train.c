/*
 * train.c: ./step06 --train, the chapter's Step 6. The same GPT (gpt.c), the
 * same data, seed and hyperparameters, trained with each attention:
 *
 *   naive     P materialised, the textbook backward through it (naive_backward.c)
 *   tiled     the tiled forward saving L, FlashAttention-2's backward (causal.c, flash_backward.c)
 *   relative  tiled, with the chapter's Step 6 bug: the mask from tile-relative indices,
 *             every tile visited (it hides past keys and shows future ones)
 *   break2    Break 2: the tile max kept, no rescaling
 *   break1    Break 1: no max subtracted at all
 *
 * The broken ones train with the exact gradient of what their forward computes
 * (naive_backward.c says how), as autograd would give it to the reader in
 * PyTorch. The runs go step by step side by side, so the progress lines
 * compare them as they go; each run is deterministic (one thread per run, no
 * shared sums), so the same seed gives the same curves bit for bit.
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include "causal.h"
#include "data.h"
#include "gpt.h"
#include "train.h"
#include "generate.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// --- the runs ------------------------------------------------------------------------------

enum { R_NAIVE, R_TILED, R_RELATIVE, R_BREAK2, R_BREAK1, N_RUNS };

typedef TrainSetup Setup;

typedef struct {
    Attention attn;
    GPT model;
    Curves cv;               /* val: under the right (absolute) mask; val_own: under its own attention */
    long nan_step;           /* first step whose loss is not finite, 0 if none */
    float max_score;         /* largest attention score over the training (broken runs) */
    int oom;                 /* its attention was refused memory: oom_bytes asked (mem_refused) */
    size_t oom_bytes;
} Run;

static const char *const RUN_TITLE[N_RUNS] = {"naive", "tiled", "relative", "break2", "break1"};

static void make_attentions(Attention *a, long BR, long BC)
{
    const Attention list[N_RUNS] = {
        ATTENTION_NAIVE("naive", MASK_ABSOLUTE, SOFTMAX_INTACT, BR, BC),
        ATTENTION_TILED("tiled", MASK_ABSOLUTE, BR, BC),
        ATTENTION_TILED("relative", MASK_RELATIVE_ALL, BR, BC),
        ATTENTION_NAIVE("break2", MASK_ABSOLUTE, SOFTMAX_NO_RESCALE, BR, BC),
        ATTENTION_NAIVE("break1", MASK_ABSOLUTE, SOFTMAX_NO_MAX, BR, BC),
    };
    memcpy(a, list, sizeof list);
}

/* Two curves this close are one curve with other roundings (train.h). */
const double SAME_CURVE = 1e-3;

/* The CPU's verdict "the same curve" has a yardstick in the same run: Break 1 computes the very same
 * softmax with other roundings (while it does not overflow), so its drift from naive is what amplified
 * rounding grows to over this run, on this corpus: 2.1e-7 over 200 steps of text, 2.4e-4 over 1000, 2.3e-4
 * over 200 of lag-copy (the gallery's CSVs). A gap within 4x that one (or under 1e-4) is rounding; the
 * tile-relative mask and Break 2 end 1e-2 and more away. With Break 1 overflowed, the first min(S, 20)
 * steps within 1e-4, the rule of the train/ checks. */
static int same_curve(double gap, double gap20, double yardstick)
{
    return isfinite(yardstick) ? gap <= fmax(4.0 * yardstick, 1e-4) : gap20 <= 1e-4;
}

int train_eval_due(const TrainSetup *s, long step) { return step % s->eval_every == 0 || step == s->steps; }

/* Learning rate: a linear warm-up over the first 10 steps, then constant. */
float train_lr_at(const TrainSetup *s, long step) { return step < 10 ? s->lr * step / 10.0f : s->lr; }

/* Mean loss over the validation batches, with attention a (the model's own if NULL). */
double train_val_loss(const TrainSetup *s, const Corpus *c, GPT *m, const Attention *a, int *x, int *y)
{
    double sum = 0;
    for (int k = 0; k < s->val_batches; k++) {
        corpus_val_batch(c, k, s->val_batches, s->B, s->cfg.T, x, y);
        const double l = gpt_forward(m, x, y, s->B, s->cfg.T, a);
        if (l < 0) return NAN;                    // refused (its line said why): no mean of -1s
        sum += l;
    }
    return sum / s->val_batches;
}

typedef struct {
    const Setup *s;
    const Corpus *c;
    const Attention *right;   /* tiled, absolute mask: the validation of every run */
    Run *run;
    const int *x, *y;         /* this step's batch */
    int *vx, *vy;             /* the run's own validation buffers */
    long step;
} StepJob;

/* One training step of one run, and its validation if due. */
static void *step_one(void *p)
{
    StepJob *j = p;
    const Setup *s = j->s;
    Run *r = j->run;
    if (r->nan_step || r->oom) { r->cv.train[j->step] = NAN; return NULL; }
    const double loss = gpt_forward(&r->model, j->x, j->y, s->B, s->cfg.T, NULL);
    if (loss < 0) { r->oom = 1, r->oom_bytes = mem_refused(); return NULL; }
    if (r->model.max_score > r->max_score) r->max_score = r->model.max_score;
    r->cv.train[j->step] = loss;
    if (!isfinite(loss)) { r->nan_step = j->step; return NULL; } // NaN: the run stops here
    if (gpt_backward(&r->model, j->x, j->y, s->B, s->cfg.T) != 0) { r->oom = 1, r->oom_bytes = mem_refused(); return NULL; }
    gpt_adamw(&r->model, train_lr_at(s, j->step), 0.0f);
    if (train_eval_due(s, j->step)) {
        /* Every model is validated with its own attention, the mask made right: the relative run with the
         * absolute mask (and with its own as well, to show what its training loss saw). */
        const int rel = r->attn.kind.mask == MASK_RELATIVE_ALL;
        r->cv.val[j->step] = train_val_loss(s, j->c, &r->model, rel ? j->right : NULL, j->vx, j->vy);
        if (rel) r->cv.val_own[j->step] = train_val_loss(s, j->c, &r->model, NULL, j->vx, j->vy);
    }
    return NULL;
}

/* Train the runs in step (each its own thread, two at a time at most: the CPU
 * has two cores; which thread runs a run changes nothing in its numbers).
 * verbose: the progress table. */
static void train_runs(const Setup *s, const Corpus *c, Run *runs, int n, int verbose)
{
    const size_t bt = (size_t)s->B * s->cfg.T;
    int *x = xmalloc(bt * sizeof(int), "batch"), *y = xmalloc(bt * sizeof(int), "batch");
    int *vx = xmalloc(bt * n * sizeof(int), "val batch"), *vy = xmalloc(bt * n * sizeof(int), "val batch");
    Attention right[1];
    const Attention r0 = ATTENTION_TILED("tiled", MASK_ABSOLUTE, s->BR, s->BC);
    right[0] = r0;
    const Curves *cvs[N_RUNS];
    for (int i = 0; i < n; i++) cvs[i] = &runs[i].cv;
    Rng rng;
    rng_seed(&rng, s->seed);
    const double t0 = now_sec();
    for (long step = 1; step <= s->steps; step++) {
        corpus_batch(c, &rng, s->B, s->cfg.T, x, y);   // the same batch for every run
        StepJob jobs[N_RUNS];
        pthread_t th[N_RUNS];
        for (int i = 0; i < n; i++) {
            StepJob jb = {s, c, right, &runs[i], x, y, vx + i * bt, vy + i * bt, step};
            jobs[i] = jb;
        }
        for (int i = 0; i < n; i += 2) {              // two runs at a time, one per core
            int spawned = i + 1 < n && pthread_create(&th[i + 1], NULL, step_one, &jobs[i + 1]) == 0;
            step_one(&jobs[i]);
            if (spawned) pthread_join(th[i + 1], NULL);
            else if (i + 1 < n) step_one(&jobs[i + 1]);
        }
        if (!verbose || !train_progress_due(s, step)) continue;
        train_progress_row(step, n, cvs, 8, train_eval_due(s, step));
        printf(" | %6.1f s\n", now_sec() - t0);
        fflush(stdout);
    }
    tfree(x); tfree(y); tfree(vx); tfree(vy);
}

static void runs_free(Run *runs, int n);

/* Build every run's model and curves; on out of memory, one line with the bytes asked for, everything built
 * so far freed again, and -1. */
static int runs_build(const Setup *s, Run *runs, int n)
{
    for (int i = 0; i < n; i++) {
        Run *r = &runs[i];
        curves_alloc(&r->cv, s->steps);
        r->nan_step = 0;
        r->max_score = -INFINITY;
        r->oom = 0;
        if (gpt_build(&r->model, &s->cfg, s->B, &r->attn, s->score_scale, s->seed) != 0) {
            char what[64];
            snprintf(what, sizeof what, "the %s run's model", r->attn.name);
            mem_oom_line(gpt_bytes(&s->cfg, s->B, &r->attn, NULL), what);
            curves_free(&r->cv);
            runs_free(runs, i);
            return -1;
        }
    }
    return 0;
}

static void runs_free(Run *runs, int n)
{
    for (int i = 0; i < n; i++) { gpt_free(&runs[i].model); curves_free(&runs[i].cv); }
}

// --- the memory wall of training ------------------------------------------------------------

/* Bytes of one training run at context T: the model (params, grads, AdamW, activations and
 * what attention keeps per layer) plus the backward's scratch (naive: one [T, T] dS). */
static size_t train_bytes(const Setup *s, int T, const Attention *a, size_t *saved)
{
    GPTConfig c = s->cfg;
    c.T = T;
    const size_t model = gpt_bytes(&c, s->B, a, saved);
    const long D = c.C / c.H;
    const size_t scratch = a->forward == attn_naive_forward ? (size_t)T * T * 4
                                                            : ((size_t)T + 2 * s->BR * s->BC + 2 * s->BC * D) * 4;
    return model + scratch;
}

static void memory_wall(const Setup *s, const Attention *naive, const Attention *tiled, size_t limit, int limit_given)
{
    char b[6][32];
    size_t sv_n, sv_t;
    const size_t n0 = train_bytes(s, s->cfg.T, naive, &sv_n), t0 = train_bytes(s, s->cfg.T, tiled, &sv_t);
    printf("\nmemory of one training run at T = %d (B = %d, H = %d, L = %d): naive keeps P [B, H, T, T] per layer, "
           "%s, the tiled one L [B, H, T], %s; the whole run: naive %s, tiled %s\n",
           s->cfg.T, s->B, s->cfg.H, s->cfg.L, fmt_bytes((double)sv_n, b[0], 32), fmt_bytes((double)sv_t, b[1], 32),
           fmt_bytes((double)n0, b[2], 32), fmt_bytes((double)t0, b[3], 32));
    printf("the wall, %s: model, AdamW state, activations, attention's saved tensors and backward scratch, by size:\n",
           limit_given ? "under --mem-limit" : "under the chapter's 8 GB card (--mem-limit to change)");
    printf("      T    naive (of which P)          tiled (of which L)\n");
    long naive_fails = 0, tiled_fits = 0;
    for (long T = s->cfg.T; T <= 1L << 20; T *= 2) {
        const size_t n = train_bytes(s, (int)T, naive, &sv_n), t = train_bytes(s, (int)T, tiled, &sv_t);
        printf("  %6ld  %10s (%10s)%s  %10s (%10s)%s\n", T, fmt_bytes((double)n, b[0], 32),
               fmt_bytes((double)sv_n * s->cfg.L, b[1], 32), n > limit ? " OOM" : "    ", fmt_bytes((double)t, b[2], 32),
               fmt_bytes((double)sv_t * s->cfg.L, b[3], 32), t > limit ? " OOM" : "");
        if (n > limit && !naive_fails) naive_fails = T;
        if (t <= limit) tiled_fits = T;
        if (t > limit) break;
    }
    if (naive_fails)
        printf("answer: under %s naive training first fails at T = %ld; tiled training fits up to T = %ld (of the "
               "powers of two tried)\n", fmt_bytes((double)limit, b[4], 32), naive_fails, tiled_fits);
    else
        printf("answer: under %s naive training fits at every T tried\n", fmt_bytes((double)limit, b[4], 32));
}

// --- ./step06 --train -----------------------------------------------------------------------

void train_opts_init(TrainOpts *t)
{
    memset(t, 0, sizeof *t);
    t->steps = 200;
    t->layers = 2;
    t->lr = 3e-3;
    t->score_scale = 1.0;
}

int train_parse(TrainOpts *t, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--train")) { t->on = 1; return 1; }
    if (!strcmp(a, "--steps")) { t->steps = parse_long(a, opt_value(argc, argv, i), 1, 1000000); t->steps_given = 1; return 1; }
    if (!strcmp(a, "--layers")) { t->layers = parse_long(a, opt_value(argc, argv, i), 1, 64); t->layers_given = 1; return 1; }
    if (!strcmp(a, "--big")) { t->big = 1; return 1; }
    if (!strcmp(a, "--lr")) { t->lr = parse_double(a, opt_value(argc, argv, i), 1e-7, 1.0); return 1; }
    if (!strcmp(a, "--score-scale")) { t->score_scale = parse_double(a, opt_value(argc, argv, i), 1e-3, 1e3); return 1; }
    if (!strcmp(a, "--mem-limit")) { t->mem_limit = parse_size(a, opt_value(argc, argv, i)); return 1; }
    if (!strcmp(a, "--corpus")) {
        static const char *const names[] = {"text", "lag-copy"};
        t->lag_copy = parse_choice(a, opt_value(argc, argv, i), names, 2);
        return 1;
    }
    if (!strcmp(a, "--save")) {
        t->save = opt_value(argc, argv, i);
        if (!*t->save) usage_error("option --save: empty file name");
        return 1;
    }
    if (!strcmp(a, "--data")) {
        t->data = opt_value(argc, argv, i);
        if (!*t->data) usage_error("option --data: empty file name");
        return 1;
    }
    return 0;
}

void train_usage(void)
{
    printf("training (--train; with it --batch, --seq, --heads, --dim, --br, --bc default to 8, 128, 4, 16, 16, 16):\n"
           "  --train              train the GPT with each attention (naive, tiled, tile-relative mask, Break 2, Break 1)\n"
           "  --steps N            training steps (default 200)\n"
           "  --layers N           transformer blocks (default 2); channels C = heads * dim\n"
           "  --lr X               AdamW learning rate (default 0.003, warm-up over 10 steps)\n"
           "  --score-scale X      multiply the attention scores by X (default 1; Break 1 overflows past 88.72)\n"
           "  --data FILE          train on a UTF-8 text file, character level (default: a corpus generated from --seed)\n"
           "  --corpus text|lag-copy  the generated corpus: text-like (default), or 16 symbols each copied from 12 back\n"
           "                       (90%% of the time): what a model needs there is one far key, which Break 2 cannot give\n"
           "  --mem-limit SIZE     the memory wall of training under SIZE (default 8G); also the limit of this run\n"
           "                       (with --device gpu: the limit of the device memory)\n"
           "  --device gpu         the same model on the GPU: naive (cuBLAS, P kept) and fused (kernel 2 + backward\n"
           "                       kernel 1) attention, beside the CPU run (needs a CUDA device; exit 77 without one)\n"
           "  --big                with --device gpu: 6 layers, C = 384 (6 heads of 64), batch 4, timed at T = 1024..16384\n"
           "                       (or --seq), naive against fused: time, tokens/s, memory, and where naive stops\n"
           "                       fitting (the device, or --mem-limit); --steps timed steps (default 10)\n");
}

void train_setup(const Opts *o, const TrainOpts *t, TrainSetup *s, Corpus *c)
{
    memset(s, 0, sizeof *s);
    if (o->D < 1 || o->H * o->D > 4096) usage_error("options --heads, --dim: the model's C = heads * dim must be at most 4096");
    s->cfg.T = (int)o->N; s->cfg.L = (int)t->layers; s->cfg.H = (int)o->H; s->cfg.C = (int)(o->H * o->D);
    s->B = (int)o->B; s->BR = o->BR; s->BC = o->BC; s->steps = t->steps; s->lr = (float)t->lr;
    s->score_scale = (float)t->score_scale; s->seed = o->seed; s->eval_every = 20; s->val_batches = 4;
    size_or_die("B*H*T*T*L floats (naive attention's P, every layer)", (size_t)o->B, (size_t)o->H, (size_t)o->N,
                (size_t)o->N, 4 * (size_t)t->layers);
    if (t->data && t->lag_copy) usage_error("options --data and --corpus lag-copy: one corpus at a time");
    if (t->data) corpus_load(c, t->data, s->cfg.T);
    else if (t->lag_copy) corpus_lag_copy(c, 440000, 16, 12, o->seed);
    else corpus_generate(c, 440000, o->seed);
    s->cfg.V = c->V;
    if ((size_t)s->cfg.T + 1 > c->n_val) // a window is T + 1 symbols, in each split (corpus_load checks its file so)
        usage_error("option --seq: a context of %d needs %d symbols in each split; the corpus holds %zu held out",
                    s->cfg.T, s->cfg.T + 1, c->n_val);
}

int train_main(const Opts *o, const TrainOpts *t)
{
    if (t->big) usage_error("option --big goes with --train --device gpu");
    Setup s;
    Corpus c;
    train_setup(o, t, &s, &c);
    /* the CSV opened now: a path that cannot be written is bad input before the training, not after it */
    FILE *csv = o->csv ? csv_open(o->csv, "run,step,split,loss") : NULL;
    FILE *save = t->save ? model_create(t->save) : NULL;   /* the same for --save's file */
    if (t->mem_limit) mem_set_limit(t->mem_limit);
    const double floor = corpus_bigram_floor(&c);

    Run runs[N_RUNS];
    memset(runs, 0, sizeof runs);
    Attention att[N_RUNS];
    make_attentions(att, s.BR, s.BC);
    for (int i = 0; i < N_RUNS; i++) runs[i].attn = att[i];
    mem_reset_peak();
    if (runs_build(&s, runs, N_RUNS) != 0) { corpus_free(&c); return EXIT_FAIL; }

    char b[4][32];
    printf("step06 --train: a GPT of %d layers, %d heads, C = %d (D = %d), context T = %d, batch %d, %zu parameters; "
           "AdamW lr %g (warm-up 10 steps), %ld steps, seed %llu\n",
           s.cfg.L, s.cfg.H, s.cfg.C, s.cfg.C / s.cfg.H, s.cfg.T, s.B, runs[0].model.num_params, s.lr, s.steps,
           (unsigned long long)s.seed);
    printf("data: %s: %zu symbols to train on, %zu held out, %d distinct; a model without attention can do no better "
           "than %.3f nats (the bigram floor), a uniform guess costs %.3f\n",
           c.source, c.n_train, c.n_val, c.V, floor, log((double)c.V));
    printf("runs: naive (P kept) | tiled BR=%ld BC=%ld (L kept, FlashAttention-2's backward) | relative: tiled with the "
           "tile-relative mask | break2: max kept, no rescaling | break1: no max\n", s.BR, s.BC);
    if (s.score_scale != 1.0f) printf("scores multiplied by %g in every run (--score-scale)\n", s.score_scale);
    printf("validation loss: %d x %d held-out windows, every %d steps, each model run with the right (absolute) mask\n\n",
           s.val_batches, s.B, s.eval_every);
    printf(" step |  train loss                                         |  validation loss                                    |\n");
    printf("      |");
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < N_RUNS; i++) printf(" %8s", RUN_TITLE[i]);
        printf(" |");
    }
    printf("  time\n");
    const double t0 = now_sec();
    train_runs(&s, &c, runs, N_RUNS, 1);
    const double secs = now_sec() - t0;
    for (int i = 0; i < N_RUNS; i++)
        if (runs[i].oom) {
            char what[64];
            snprintf(what, sizeof what, "the %s run's attention", runs[i].attn.name);
            mem_oom_line(runs[i].oom_bytes, what);
            return EXIT_FAIL;
        }
    printf("\n%ld steps of %d runs in %.1f s (%.0f ms per run and step, two runs at a time on two threads); peak tracked "
           "memory %s\n", s.steps, N_RUNS, secs, 1e3 * secs / s.steps / N_RUNS * 2, fmt_bytes((double)mem_peak(), b[0], 32));

    const Run *nv = &runs[R_NAIVE], *tl = &runs[R_TILED], *rl = &runs[R_RELATIVE], *b2 = &runs[R_BREAK2],
              *b1 = &runs[R_BREAK1];
    const long S = s.steps, K = S < 20 ? S : 20;
    long at;
    const double gap = train_max_gap(tl->cv.train, nv->cv.train, S, &at), nv_end = train_tail_mean(nv->cv.train, S, K);
    long at1;
    const double noise = b1->nan_step ? NAN : train_max_gap(b1->cv.train, nv->cv.train, S, &at1);
    long at20;
    const double gap20 = train_max_gap(tl->cv.train, nv->cv.train, K, &at20);
    const int tiled_same = same_curve(gap, gap20, noise);
    printf("answer: the largest |loss(tiled) - loss(naive)| over the %ld steps is %.2e (step %ld); at step 1, before "
           "any update, %.2e%s", S, gap, at, fabs(tl->cv.train[1] - nv->cv.train[1]),
           tiled_same ? " (the same sums in another order, step 04's rounding). Training amplifies any difference"
           : isfinite(noise) ? ": MORE than amplified rounding (over 4x Break 1's drift, the same softmax rounded "
                               "otherwise): the two do not compute the same attention"
                             : ": MORE than amplified rounding (over 1e-4 in the first steps): the two do not compute "
                               "the same attention");
    if (!b1->nan_step && tiled_same)
        printf(": Break 1, which here computes the very same softmax with other roundings (no max subtracted, no "
               "overflow), drifts %.2e from naive. Noise, not a different curve", noise);
    else if (!b1->nan_step)
        printf("; Break 1 drifts %.2e from naive", noise);
    printf("; the tile-relative and Break 2 runs end %.3f and %.3f away\n", fabs(train_tail_mean(rl->cv.train, S, K) - nv_end),
           fabs(train_tail_mean(b2->cv.train, S, K) - nv_end));
    const double rl_end = train_tail_mean(rl->cv.train, S, K), rl_gap = train_max_gap(rl->cv.train, nv->cv.train, S, &at);
    printf("answer: the tile-relative mask: training loss %.3f (mean of the last %ld steps) against %.3f intact, %s; "
           "validation under the right mask %.3f against %.3f intact, and %.3f under its own mask%s; its curve departs "
           "from the intact one by up to %.3f (step %ld)\n",
           rl_end, K, nv_end,
           /* judged on held-out text under its own mask against the intact model (0.02: more than the spread
            * of the validation between runs that differ by rounding only) */
           rl->cv.val_own[S] < nv->cv.val[S] - 0.02 ? "too good to be true: under its own mask it beats the intact "
                                                     "model on held-out text, it sees future tokens"
           : rl->cv.val_own[S] > nv->cv.val[S] + 0.02 ? "not too good: in every later tile it sees future keys, but in "
                                                       "every earlier one only the first r + 1, so it loses more of the "
                                                       "past than it gains of the future"
                                                     : "no clear difference yet on held-out text (within 0.02)",
           rl->cv.val[S], nv->cv.val[S], rl->cv.val_own[S],
           rl->cv.val[S] > rl->cv.val_own[S] + 0.02 ? ": the model leans on its wrong mask" : "", rl_gap, at);
    const double d2 = b2->cv.val[S] - nv->cv.val[S];
    printf("answer: Break 2 ends at %.3f train, %.3f validation, against %.3f and %.3f intact: %s\n",
           train_tail_mean(b2->cv.train, S, K), b2->cv.val[S], nv_end, nv->cv.val[S],
           d2 > 0.05 ? "clearly worse, as the chapter says"
           : d2 > 0.01 ? "worse, though not by much"
                       : "not worse here. Break 2 gives each K/V tile a row visits at least e^0 = 1 of the sum, so no "
                         "key gets more than about 1/(tiles) of a row: it costs once the model attends sharply to one "
                         "key, which this model does not do yet (--steps 600, or --corpus lag-copy, shows it)");
    if (b1->nan_step)
        printf("answer: Break 1: the scores reached %.1f, past the 88.72 where e^s overflows fp32: NaN loss from step "
               "%ld, and the run stops there\n", b1->max_score, b1->nan_step);
    else
        printf("answer: Break 1: the largest score this model reached is %.2f, below the 88.72 where e^s overflows "
               "fp32: Break 1 never overflowed%s. It takes scores past 88.72 (--score-scale multiplies every score; "
               "06_causal/README.md has the runs that overflow)\n", b1->max_score,
               tiled_same ? " and trained like naive (its drift is the yardstick above)"
                          : ", and its drift is the yardstick the tiled run failed");
    printf("answer: naive attention keeps P, %s per layer; the tiled one keeps L, %s per layer\n",
           fmt_bytes((double)attn_naive_saved((long)s.B * s.cfg.H, s.cfg.T) * 4, b[0], 32),
           fmt_bytes((double)attn_tiled_saved((long)s.B * s.cfg.H, s.cfg.T) * 4, b[1], 32));
    memory_wall(&s, &att[R_NAIVE], &att[R_TILED], t->mem_limit ? t->mem_limit : (size_t)8e9, t->mem_limit != 0);

    if (csv) {
        const Curves *cvs[N_RUNS];
        const char *names[N_RUNS];
        for (int i = 0; i < N_RUNS; i++) cvs[i] = &runs[i].cv, names[i] = runs[i].attn.name;
        train_csv_write(csv, o->csv, floor, N_RUNS, names, cvs, 1, S);
    }
    int rc = EXIT_OK;
    if (save) { /* the tiled run: the chapter's attention, trained; --generate writes text with it */
        if (tl->nan_step) {
            fprintf(stderr, "%s: --save: the tiled run's loss went NaN at step %ld: no weights to save\n", g_prog, tl->nan_step);
            fclose(save);
            rc = EXIT_FAIL;
        } else if (model_write(save, t->save, &s.cfg, c.symbol, tl->model.params_mem) != 0) {
            rc = EXIT_FAIL;
        } else {
            printf("wrote the tiled run's weights to %s (%zu parameters, %d symbols): ./step06 --generate --load %s\n",
                   t->save, tl->model.num_params, c.V, t->save);
        }
    }
    runs_free(runs, N_RUNS);
    corpus_free(&c);
    return rc;
}

// --- checks -----------------------------------------------------------------------------------

static void setup_default(Setup *s, int V, long steps)
{
    memset(s, 0, sizeof *s);
    const GPTConfig cfg = {V, 128, 2, 4, 64};
    s->cfg = cfg;
    s->B = 8; s->BR = 16; s->BC = 16; s->steps = steps; s->lr = 3e-3f; s->score_scale = 1.0f; s->seed = 0;
    s->eval_every = 20; s->val_batches = 4;
}

/* Break 2 caps what one key can get: each K/V tile a row visits adds at least e^0 = 1 (its own max) to
 * the denominator, so with n tiles no key gets more than about 1/n of the row. A text that is told by
 * exactly one far key shows it within a few dozen steps: the lag-copy corpus. */
static void check_break2_one_key(void)
{
    Setup s;
    memset(&s, 0, sizeof s);
    Corpus c;
    corpus_lag_copy(&c, 200000, 16, 12, 5);
    const GPTConfig cfg = {16, 32, 1, 2, 32};
    s.cfg = cfg;
    s.B = 16; s.BR = 8; s.BC = 8; s.steps = 80; s.lr = 1e-2f; s.score_scale = 1.0f; s.seed = 3;
    s.eval_every = 1000; s.val_batches = 2;
    Attention att[N_RUNS];
    make_attentions(att, s.BR, s.BC);
    Run runs[2];
    memset(runs, 0, sizeof runs);
    runs[0].attn = att[R_NAIVE];
    runs[1].attn = att[R_BREAK2];
    if (runs_build(&s, runs, 2) != 0) { report(0, NULL, "train/break2-one-key", "out of host memory (the line above)"); return; }
    train_runs(&s, &c, runs, 2, 0);
    const double a = train_tail_mean(runs[0].cv.train, s.steps, 10), b = train_tail_mean(runs[1].cv.train, s.steps, 10);
    report(b > a + 0.1, NULL, "train/break2-one-key",
           "lag-copy text (the next symbol is the one 12 back, 90%% of the time), T = 32 in tiles of 8, %ld steps: "
           "Break 2 ends at %.3f, intact at %.3f (expected Break 2 higher by > 0.1)", s.steps, b, a);
    runs_free(runs, 2);
    corpus_free(&c);
}

void train_checks(void)
{
    backward_checks();
    check_break2_one_key();

    /* 20 steps of every run on the default model and corpus, as ./step06 --train --steps 20 does */
    Setup s;
    Corpus c;
    corpus_generate(&c, 440000, 0);
    setup_default(&s, c.V, 20);
    Attention att[N_RUNS];
    make_attentions(att, s.BR, s.BC);
    Run runs[N_RUNS], again[N_RUNS];
    memset(runs, 0, sizeof runs);
    memset(again, 0, sizeof again);
    for (int i = 0; i < N_RUNS; i++) runs[i].attn = again[i].attn = att[i];
    if (runs_build(&s, runs, N_RUNS) != 0) { report(0, NULL, "train", "out of host memory (the line above)"); corpus_free(&c); return; }
    train_runs(&s, &c, runs, N_RUNS, 0);
    long at;
    const double *nv = runs[R_NAIVE].cv.train;
    double g = train_max_gap(runs[R_TILED].cv.train, nv, s.steps, &at);
    report(g <= 1e-4, NULL, "train/tiled-vs-naive", "20 steps: largest |loss(tiled) - loss(naive)| %.2e at step %ld "
           "(expected <= 1e-4: fp32 rounding only), losses %.4f -> %.4f", g, at, nv[1], nv[s.steps]);
    g = train_max_gap(runs[R_RELATIVE].cv.train, nv, s.steps, &at);
    report(g > 1e-2, NULL, "train/relative-departs", "20 steps: the tile-relative mask's curve departs from the intact "
           "one by up to %.3f (step %ld; expected > 0.01)", g, at);
    g = train_max_gap(runs[R_BREAK1].cv.train, nv, s.steps, &at);
    report(g <= 1e-4 && runs[R_BREAK1].max_score < 88.72f, NULL, "train/break1-no-overflow",
           "scores reach %.2f < 88.72: Break 1 computes softmax exactly and follows naive (gap %.2e, expected <= 1e-4)",
           runs[R_BREAK1].max_score, g);
    /* the same seed again: the same curves, bit for bit (every run, train and validation) */
    if (runs_build(&s, again, N_RUNS) == 0) {
        train_runs(&s, &c, again, N_RUNS, 0);
        int same = 1;
        for (int i = 0; i < N_RUNS; i++)
            same &= !memcmp(runs[i].cv.train, again[i].cv.train, 3 * ((size_t)s.steps + 1) * sizeof(double));
        report(same, NULL, "train/rerun-bit-identical", "the same seed trained again: every run's train and validation "
               "losses %s", same ? "identical to the bit" : "DIFFER");
        runs_free(again, N_RUNS);
    } else report(0, NULL, "train/rerun-bit-identical", "out of host memory (the line above)");
    runs_free(runs, N_RUNS);
    corpus_free(&c);
}
