/* train.h: step 06's --train (train.c): the GPT trained with each attention, and its checks. */
#ifndef TRAIN_H
#define TRAIN_H

#include <stddef.h>

#include "common.h"
#include "data.h"
#include "gpt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int on;               /* --train */
    long steps;           /* --steps (200) */
    long layers;          /* --layers (2) */
    double lr;            /* --lr (AdamW's learning rate) */
    double score_scale;   /* --score-scale: the attention scores multiplied by this (1) */
    const char *data;     /* --data FILE, or NULL: the generated corpus */
    int lag_copy;         /* --corpus lag-copy: the corpus of symbols copied from 12 back */
    size_t mem_limit;     /* --mem-limit, 0 if not given */
    int big;              /* --big: the larger GPU model, timed and walled over T (--device gpu) */
    const char *save;     /* --save FILE: the tiled run's trained weights, for --generate (generate.c) */
    int steps_given, layers_given;
} TrainOpts;

/* One training configuration: the model, the batch, the tiles of the tiled attention, the schedule. */
typedef struct {
    GPTConfig cfg;
    int B;
    long BR, BC, steps;
    float lr, score_scale;
    uint64_t seed;
    int eval_every, val_batches;
} TrainSetup;

void train_opts_init(TrainOpts *t);
/* Try argv[*i] as a training option; 1 if consumed. Exits 2 on a bad value. */
int train_parse(TrainOpts *t, int argc, char **argv, int *i);
/* The option lines for --help. */
void train_usage(void);
/* ./step06 --train on the CPU (train.c). Returns the exit code. The GPU's training is train_gpu_main
 * (train_gpu.c); main.c chooses between them, so that neither file calls the other: train_gpu.c builds on
 * train.c's setup and curves, train.c knows nothing of the GPU. */
int train_main(const Opts *o, const TrainOpts *t);
/* The setup and the corpus of a training run from the options (bad input exits 2); shared by the CPU and
 * the GPU training. */
void train_setup(const Opts *o, const TrainOpts *t, TrainSetup *s, Corpus *c);
float train_lr_at(const TrainSetup *s, long step);                        /* warm-up over 10 steps */
int train_eval_due(const TrainSetup *s, long step);                       /* a validation step? */
/* The largest gap between two loss curves that the GPU training's answer lines call the same curve (1e-3):
 * training amplifies fp32 rounding, to 2.6e-4 over 1000 steps and 5.4e-4 over 200 of lag-copy on the CPU;
 * a different attention ends 1e-2 and more away. Lenient: the GPU runs have no Break 1 to measure the
 * rounding's drift with (the CPU's verdict uses it, train.c's same_curve), and a bug 4e-5 apart after 20
 * steps would pass it; the train-gpu/ checks (5e-6 over 20 steps) are what catches one. */
extern const double SAME_CURVE;
/* Mean loss over the validation batches with attention a (NULL: the model's own); x, y: a batch's room. */
double train_val_loss(const TrainSetup *s, const Corpus *c, GPT *m, const Attention *a, int *x, int *y);

/* --- the loss curves (curves.c), the CPU's runs' and the GPU's alike --- */

/* The curves of one run over steps 0..steps (index = step; NaN where a step was not run or not
 * evaluated), in one allocation: the training loss, the validation loss (under the right mask), and one
 * more: the CPU's runs keep the validation under the run's own mask, the GPU's runs the time of each
 * step in ms. */
typedef struct {
    double *train, *val;
    union { double *val_own; double *ms; };
} Curves;
void curves_alloc(Curves *c, long steps);
void curves_free(Curves *c);
/* A row of the progress table is due at step 1, every 10th step and the last. */
int train_progress_due(const TrainSetup *s, long step);
/* Its start: "  step |" the n runs' training losses " |" their validation losses (blank columns where not
 * evaluated), columns of width w; the caller ends the row. */
void train_progress_row(long step, int n, const Curves *const *cv, int w, int eval);
double train_max_gap(const double *a, const double *b, long steps, long *at); /* max |a - b| over steps 1.. */
double train_tail_mean(const double *loss, long steps, long k);           /* mean of the last k */
/* The CSV of a training run, written to f and closed ("wrote path" on stdout): the bigram floor's line,
 * then per run and step its train loss and, where evaluated, its validation loss (and with own, its
 * validation under its own mask). */
void train_csv_write(FILE *f, const char *path, double floor, int n, const char *const *names, const Curves *const *cv,
                     int own, long steps);
/* ./step06 --train --device gpu (train_gpu.c): the same model on the GPU. Returns the exit code. */
int train_gpu_main(const Opts *o, const TrainOpts *t);
/* The GPU part of ./step06 --check's training checks (SKIP without a GPU). */
void train_gpu_checks(void);
/* The backward and training checks of ./step06 --check (PASS/FAIL lines). */
void train_checks(void);
/* The backward passes' and the model gradient's part of them (grad_check.c). */
void backward_checks(void);

#ifdef __cplusplus
}
#endif

#endif
