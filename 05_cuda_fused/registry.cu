/*
 * registry.cu: the list of step 05's kernels, filled by FUSED_REGISTER in
 * each kernelN_*.cu before main runs.
 */
#include "kernels.h"

#include <cstdio>
#include <cstdlib>

enum { MAX_KERNELS = 32 };
static const FusedKernel *g_kernels[MAX_KERNELS];
static int g_n;

int fused_register(const FusedKernel *k)
{
    if (g_n == MAX_KERNELS) {
        fprintf(stderr, "fused_register: more than %d kernels\n", MAX_KERNELS);
        exit(1);
    }
    int i = g_n++;
    while (i > 0 && g_kernels[i - 1]->id > k->id) { /* keep id order */
        g_kernels[i] = g_kernels[i - 1];
        i--;
    }
    g_kernels[i] = k;
    return i;
}

const FusedKernel *const *fused_kernels(int *n_out)
{
    *n_out = g_n;
    return g_kernels;
}

const FusedKernel *fused_kernel(int id)
{
    for (int i = 0; i < g_n; i++)
        if (g_kernels[i]->id == id) return g_kernels[i];
    return NULL;
}
