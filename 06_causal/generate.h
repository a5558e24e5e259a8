/* generate.h: step 06's --save, --load and --generate (generate.c): the trained GPT writes text, one token
 * at a time, with a KV cache (decode is causal attention's last row). */
#ifndef GENERATE_H
#define GENERATE_H

#include <stdint.h>
#include <stdio.h>

#include "common.h"
#include "data.h"
#include "gpt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int on;               /* --generate */
    const char *load;     /* --load FILE: the model (written by --train --save) */
    const char *prompt;   /* --prompt TEXT, or NULL: the model's first symbol */
    long tokens;          /* --tokens N (200) */
    double temperature;   /* --temperature T (1; 0: the most likely symbol every time) */
} GenOpts;

void gen_opts_init(GenOpts *g);
/* Try argv[*i] as a generation option; 1 if consumed. Exits 2 on a bad value. */
int gen_parse(GenOpts *g, int argc, char **argv, int *i);
void gen_usage(void);
/* ./step06 --generate (CPU; --device gpu: gpt_gpu.cu's model and step 05's decode kernel). Exit code. */
int generate_main(const Opts *o, const GenOpts *g);
/* ./step06 --check's part: the model file round trip, the cache against the full forward, same seed same
 * text (PASS/FAIL lines). */
void generate_checks(void);

/* The model file (its layout: generate.c). model_create opens path for writing or exits 2 (before a
 * training, so that a path that cannot be written is refused first); model_write writes and closes it
 * (0, or -1 after one line). model_read reads and validates one, or exits 2 with one line naming what is
 * wrong (missing, truncated, foreign, another version, a shape or parameter count that does not agree,
 * non-finite weights). */
typedef struct {
    GPTConfig cfg;
    uint32_t symbol[MAX_SYMBOLS]; /* id -> Unicode code point */
    float *params;                /* gpt_param_sizes' table order, tracked (tfree it) */
} ModelFile;
FILE *model_create(const char *path);
int model_write(FILE *f, const char *path, const GPTConfig *c, const uint32_t *symbol, const float *params);
void model_read(const char *path, ModelFile *mf);

#ifdef __cplusplus
}
#endif

#endif
