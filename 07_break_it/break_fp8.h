/* break_fp8.h: break it in FP8, the table of what the running max protects when P or S is stored in e4m3
 * (break_fp8.c; the e4m3 rounding is 05_cuda_fused/fp8/fp8.c's, linked into step 07). */
#ifndef BREAK_FP8_H
#define BREAK_FP8_H

/* Prints the table on stdout: for Q scaled by c = 1, 4, 16, 64, 256 (one head, N = 256, D = 64, seed 4040), the
 * largest |score| and the RMS error against float64 of the output with (a) P = e^(s - m) stored in e4m3, as the
 * FP8 kernels store it, and (b) S stored in e4m3 before the max; then one line on why. On the CPU. */
void break_fp8_table(void);

#endif
