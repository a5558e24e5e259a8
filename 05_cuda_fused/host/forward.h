/* forward.h: step 05's forward, the host side (forward.c): its checks, ./step05 (the first screen, or the table of
 * --dtype), --bench and the shapes compute-sanitizer runs. */
#ifndef FORWARD_H
#define FORWARD_H

#include <stdio.h>

#include "common.h"

/* The step's head-dim rule for the forward, decidable without a GPU: fp32 D in 8..128 (multiples of 8),
 * fp16/bf16 D = 64 or 128. */
int fwd_dim_ok(int dtype, long D);

/* The GPU parts (HAVE_CUDA builds). `only` is a forward kernel id or 0. */
void fwd_run_checks(long only);                     /* PASS/FAIL/SKIP lines; the caller calls report_finish() */
int fwd_run_first_screen(const Opts *o);            /* ./step05 as a reader first types it */
int fwd_run_default(const Opts *o, FILE *csv);      /* ./step05 --dtype D: every kernel checked, then timed */
int fwd_run_bench(const Opts *o, FILE *csv);        /* ./step05 --bench */
int fwd_run_sanitize(const Opts *o);                /* the forward kernels (--kernel: those) under compute-sanitizer */

#endif
