/* fp8.h: step 05's --dtype fp8, the FP8 family's driver (fp8.c); the numerics it drives are ../fp8/fp8.h's. */
#ifndef HOST_FP8_H
#define HOST_FP8_H

#include "common.h"

/* The 16-bit kernel the FP8 kernels are timed beside, on the same inputs: kernel 14, whose schedule kernel 16 runs
 * in FP8 (the default run's and --bench's fp16 column). */
enum { FP8_PEER = 14 };

/* --kernel with --dtype fp8: one FP8 kernel of the registry, or a range holding one, else one line, exit 2. */
void fp8_kernel_option_check(const Opts *o);

/* ./step05 --dtype fp8 [--check | --bench | --errors | --sanitize-shapes | --q --k --v FILE.npy [--out]]. The checks:
 * fp8_cpu_checks (the CPU half, anywhere) and, with a GPU, the FP8 kernels' grid (fp8_checks does both, or says SKIP
 * for the GPU's). */
void fp8_cpu_checks(void);
void fp8_checks(long only); /* only: an FP8 kernel's id, or 0 for all */
/* scaling: an Fp8Mode, the one whose O --out writes when --q/--k/--v give the reader's tensors (fp8_files: the
 * error of each scaling on them, on the CPU). */
int fp8_main(const Opts *o, int bench, int errors, int sanitize, int scaling);

#endif
