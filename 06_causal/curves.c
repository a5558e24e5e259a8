/*
 * curves.c: the loss curves of ./step06 --train, what the CPU training (train.c) and the GPU training
 * (train_gpu.c) share about them: their room, a row of the progress table, the gaps and tails the answer
 * lines read, and the CSV that plots/ draws.
 */
#include "common.h"
#include "train.h"

#include <math.h>

void curves_alloc(Curves *c, long steps)
{
    const size_t sl = (size_t)steps + 1, len = 3 * sl;
    c->train = xmalloc(len * sizeof(double), "loss curves");
    for (size_t k = 0; k < len; k++) c->train[k] = NAN;
    c->val = c->train + sl;
    c->val_own = c->val + sl;
}

void curves_free(Curves *c)
{
    tfree(c->train);
    c->train = c->val = c->val_own = NULL;
}

int train_progress_due(const TrainSetup *s, long step) { return step == 1 || step % 10 == 0 || step == s->steps; }

void train_progress_row(long step, int n, const Curves *const *cv, int w, int eval)
{
    printf("%5ld |", step);
    for (int i = 0; i < n; i++) printf(" %*.4f", w, cv[i]->train[step]);
    printf(" |");
    for (int i = 0; i < n; i++)
        if (eval) printf(" %*.4f", w, cv[i]->val[step]);
        else printf(" %*s", w, "");
}

/* max over steps 1..steps of |a - b| (NaN counts as infinite) */
double train_max_gap(const double *a, const double *b, long steps, long *at)
{
    double g = 0;
    *at = 1;
    for (long t = 1; t <= steps; t++) {
        const double d = fabs(a[t] - b[t]);
        if (!(d <= g)) { g = isnan(d) ? INFINITY : d; *at = t; }
    }
    return g;
}

/* mean of the last k train losses: the end of a curve, less the noise of one batch */
double train_tail_mean(const double *l, long steps, long k)
{
    double s = 0;
    for (long t = steps - k + 1; t <= steps; t++) s += l[t];
    return s / k;
}

void train_csv_write(FILE *f, const char *path, double floor, int n, const char *const *names, const Curves *const *cv,
                     int own, long steps)
{
    fprintf(f, "bigram-floor,0,floor,%.6f\n", floor); // the best without attention
    for (int i = 0; i < n; i++)
        for (long st = 1; st <= steps; st++) {
            fprintf(f, "%s,%ld,train,%.6f\n", names[i], st, cv[i]->train[st]);
            if (!isnan(cv[i]->val[st])) fprintf(f, "%s,%ld,val,%.6f\n", names[i], st, cv[i]->val[st]);
            if (own && !isnan(cv[i]->val_own[st])) fprintf(f, "%s,%ld,val_own_mask,%.6f\n", names[i], st, cv[i]->val_own[st]);
        }
    fclose(f);
    printf("wrote %s\n", path);
}
