/* train.h: step 06's --train (train.c): the GPT trained with each attention, and its checks. */
#ifndef TRAIN_H
#define TRAIN_H

#include <stddef.h>

#include "common.h"

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
} TrainOpts;

void train_opts_init(TrainOpts *t);
/* Try argv[*i] as a training option; 1 if consumed. Exits 2 on a bad value. */
int train_parse(TrainOpts *t, int argc, char **argv, int *i);
/* The option lines for --help. */
void train_usage(void);
/* ./step06 --train. Returns the exit code. */
int train_main(const Opts *o, const TrainOpts *t);
/* The backward and training checks of ./step06 --check (PASS/FAIL lines). */
void train_checks(void);
/* The backward passes' and the model gradient's part of them (grad_check.c). */
void backward_checks(void);

#ifdef __cplusplus
}
#endif

#endif
