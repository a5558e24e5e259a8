/* alibi.h: step 05's kernels with a score modifier, ALiBi (alibi.c). */
#ifndef ALIBI_H
#define ALIBI_H

#include <stddef.h>

#include "common.h"

/* " (2, 3)": the ids of the forward kernels with a score modifier, for --help ("" in a build without CUDA). */
void alibi_kernel_ids(char *buf, size_t n);

/* The GPU parts (HAVE_CUDA builds). */
void alibi_checks(long only);       /* PASS/FAIL lines of --check; only: a forward kernel id, or 0 */
int alibi_run(const Opts *o);       /* ./step05 --alibi */

#endif
