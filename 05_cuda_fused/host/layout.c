/*
 * layout.c: ./step05 --layout-csv FILE (layout.h), the data of the tensor cores' picture: which lane, and which of
 * its registers, holds each element of mma.sync.m16n8k16's A, B and C. On the CPU, any machine; plots/mma_layout.py
 * draws it.
 */
#include "common.h"
#include "layout.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Which lane (and which of its registers) holds element (r, c) of mma.sync.m16n8k16's operands: the layout
 * tc.cuh writes down and kernels 3-9 use (lane = 4 g + t; each 32-bit register holds two 16-bit values, the
 * lower half first). matrix 0: A, 16 x 16 (rows of Q or P); 1: B, 16 x 8 (k x n: columns of K^T or V); 2: C,
 * 16 x 8 fp32 (the scores, or O). On Turing the k = 16 product is two m16n8k8: registers a0, a1 and b0 go to
 * the first (k < 8), a2, a3 and b1 to the second. */
static void fragment_owner(int matrix, int r, int c, int *lane, int *reg, int *half)
{
    int g, t;
    if (matrix == 0) { g = r % 8, t = (c % 8) / 2, *reg = (r >= 8) + 2 * (c >= 8), *half = c % 2; }      /* a0..a3 */
    else if (matrix == 1) { g = c, t = (r % 8) / 2, *reg = r >= 8, *half = r % 2; }                       /* b0, b1 */
    else { g = r % 8, t = c / 2, *reg = 2 * (r >= 8) + c % 2, *half = 0; }                                 /* c0..c3 */
    *lane = 4 * g + t;
}

/* --layout-csv FILE: every element of A, B and C with its owner, for plots/mma_layout.py (no GPU needed). */
int layout_write(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) usage_error("option --layout-csv: cannot open %s for writing: %s", path, strerror(errno));
    fprintf(f, "matrix,row,col,lane,group,thread,register,half\n");
    static const char *const name[3] = {"A", "B", "C"};
    static const int rows[3] = {16, 16, 16}, cols[3] = {16, 8, 8};
    for (int m = 0; m < 3; m++)
        for (int r = 0; r < rows[m]; r++)
            for (int c = 0; c < cols[m]; c++) {
                int lane, reg, half;
                fragment_owner(m, r, c, &lane, &reg, &half);
                fprintf(f, "%s,%d,%d,%d,%d,%d,%c%d,%d\n", name[m], r, c, lane, lane / 4, lane % 4, "abc"[m], reg, half);
            }
    fclose(f);
    printf("wrote the m16n8k16 fragment layout (A 16x16, B 16x8, C 16x8: which lane and register holds each element) "
           "to %s\n", path);
    return EXIT_OK;
}
