/*
 * registry.cu: the lists of step 05's kernels, filled by FUSED_REGISTER in
 * each kernelN_*.cu (the forward), BWD_REGISTER in each bwdN_*.cu (the
 * backward) and DECODE_REGISTER in each decodeN_*.cu before main runs.
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

// --- the backward kernels: the same list, kept apart ------------------------------------

static const BackwardKernel *g_bwd[MAX_KERNELS];
static int g_nbwd;

int bwd_register(const BackwardKernel *k)
{
    if (g_nbwd == MAX_KERNELS) {
        fprintf(stderr, "bwd_register: more than %d backward kernels\n", MAX_KERNELS);
        exit(1);
    }
    int i = g_nbwd++;
    while (i > 0 && g_bwd[i - 1]->id > k->id) { /* keep id order */
        g_bwd[i] = g_bwd[i - 1];
        i--;
    }
    g_bwd[i] = k;
    return i;
}

const BackwardKernel *const *bwd_kernels(int *n_out)
{
    *n_out = g_nbwd;
    return g_bwd;
}

const BackwardKernel *bwd_kernel(int id)
{
    for (int i = 0; i < g_nbwd; i++)
        if (g_bwd[i]->id == id) return g_bwd[i];
    return NULL;
}

// --- the decode kernels: the same list again ----------------------------------------------

static const DecodeKernel *g_dec[MAX_KERNELS];
static int g_ndec;

int decode_register(const DecodeKernel *k)
{
    if (g_ndec == MAX_KERNELS) {
        fprintf(stderr, "decode_register: more than %d decode kernels\n", MAX_KERNELS);
        exit(1);
    }
    int i = g_ndec++;
    while (i > 0 && g_dec[i - 1]->id > k->id) { /* keep id order */
        g_dec[i] = g_dec[i - 1];
        i--;
    }
    g_dec[i] = k;
    return i;
}

const DecodeKernel *const *decode_kernels(int *n_out)
{
    *n_out = g_ndec;
    return g_dec;
}

const DecodeKernel *decode_kernel(int id)
{
    for (int i = 0; i < g_ndec; i++)
        if (g_dec[i]->id == id) return g_dec[i];
    return NULL;
}
