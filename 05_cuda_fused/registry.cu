/*
 * registry.cu: the lists of step 05's kernels, filled by FUSED_REGISTER in
 * each kernelN_*.cu (the forward), BWD_REGISTER in each bwdN_*.cu (the
 * backward) and DECODE_REGISTER in each decodeN_*.cu before main runs.
 */
#include "kernels.h"

#include <cstdio>
#include <cstdlib>

enum { MAX_KERNELS = 32 };

/* One list of one kind of kernel, kept in id order: the three lists below are this, for their three types. */
template <typename K> struct Registry {
    const K *k[MAX_KERNELS];
    int n;
    int add(const K *x, const char *what)
    {
        if (n == MAX_KERNELS) {
            fprintf(stderr, "%s: more than %d kernels\n", what, MAX_KERNELS);
            exit(1);
        }
        int i = n++;
        while (i > 0 && k[i - 1]->id > x->id) { /* keep id order */
            k[i] = k[i - 1];
            i--;
        }
        k[i] = x;
        return i;
    }
    const K *find(int id) const
    {
        for (int i = 0; i < n; i++)
            if (k[i]->id == id) return k[i];
        return nullptr;
    }
};

/* Function-local statics: filled by the kernel files' static initialisers, in whatever order those run. */
static Registry<FusedKernel> &fused() { static Registry<FusedKernel> r; return r; }
static Registry<BackwardKernel> &bwd() { static Registry<BackwardKernel> r; return r; }
static Registry<DecodeKernel> &dec() { static Registry<DecodeKernel> r; return r; }

int fused_register(const FusedKernel *k) { return fused().add(k, "fused_register"); }
const FusedKernel *const *fused_kernels(int *n_out) { *n_out = fused().n; return fused().k; }
const FusedKernel *fused_kernel(int id) { return fused().find(id); }

int bwd_register(const BackwardKernel *k) { return bwd().add(k, "bwd_register"); }
const BackwardKernel *const *bwd_kernels(int *n_out) { *n_out = bwd().n; return bwd().k; }
const BackwardKernel *bwd_kernel(int id) { return bwd().find(id); }

int decode_register(const DecodeKernel *k) { return dec().add(k, "decode_register"); }
const DecodeKernel *const *decode_kernels(int *n_out) { *n_out = dec().n; return dec().k; }
const DecodeKernel *decode_kernel(int id) { return dec().find(id); }
