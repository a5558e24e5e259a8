/*
 * step02: where naive attention dies. The chapter's memory probe (book Steps
 * 1 and 5): peak memory of naive attention vs the tiled forward over N.
 *
 * What it adds over step 01: nothing new is computed. It runs step 01's naive
 * attention and step 04's one-pass tiled forward (the same code, linked from
 * their folders) at N = 1024, 2048, ... and reads the peak of the tracked
 * allocator after each. Naive holds S and P, 2*B*H*N*N floats, so its peak
 * quadruples per doubling of N; the tiled forward holds Q, K, V, O and one
 * [BR, BC] tile, so its peak doubles. --mem-limit emulates a smaller card:
 * a run whose allocations would pass the limit is refused (OOM) and the
 * sweep goes on, the way the chapter's 8 GB card fails.
 *
 * It also runs the chapter's Step 7 on the CPU (--time): naive and the tiled
 * forward timed at N = 1024, 2048, 4096 in interleaved rounds, the medians and
 * the crossover, if there is one.
 *
 * Run:   make step02 && ./step02 --mem-limit 8G     (CPU: N = 1024 .. 8192)
 *        ./step02 --device gpu --mem-limit 8G       (GPU: N = 1024 .. 65536, fp16)
 *        ./step02 --time [--repeat R]               (CPU wall-clock, R rounds per N, default 5)
 *        ./step02 --check
 * Expect (last lines):
 *        answer: naive attention first fails at N = 8192 (needs 8.72 GB, limit 8.00 GB)
 *        answer: the tiled forward uses less than 1/10 of naive's memory from N = 2048 (33.6 MB vs 570.4 MB)
 *        (--time) answer: naive is faster up to N = ..., the tiled forward from N = ... (or: not faster at any N)
 * Limits: the CPU code is single-threaded; naive holds 8.6 GB at N = 8192 and
 *        runs ~70 GFLOP there, so the sweep takes minutes (--seq-list gives a
 *        shorter one); the probe's time column is one run each (--time is the
 *        benchmark).
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include "common.h"
#include "gpu.h"
#include "memprobe.h"
#include "../01_naive/naive.h"
#include "../04_online_softmax/flash.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// --- the probe ------------------------------------------------------------------

/* One run of one method at one N: allocate inputs and output (tracked), run,
 * read the peak. The inputs are real random data and the two methods'
 * outputs are compared, so the probe never measures code that computes
 * garbage. */
static ProbeRow probe_cpu_one(const Opts *o, long N, int naive, const float *check_against, float **out_keep)
{
    ProbeRow r;
    size_t n = (size_t)o->B * o->H * N * o->D;
    memset(&r, 0, sizeof r);
    r.N = N;
    r.method = naive ? "naive" : "tiled";
    /* What the run needs: Q, K, V, O, plus S and P for naive or one tile for tiled. */
    r.need_bytes = 4 * n * sizeof(float) +
                   (naive ? 2 * (size_t)o->B * o->H * N * N * sizeof(float)
                          : ((size_t)o->BR * o->BC + (size_t)o->BR * o->D + 2 * (size_t)o->BR) * sizeof(float));
    mem_reset_peak();
    rss_reset_peak();
    size_t base = mem_current();
    float *q = tmalloc(n * 4), *k = q ? tmalloc(n * 4) : NULL, *v = k ? tmalloc(n * 4) : NULL;
    float *out = v ? tmalloc(n * 4) : NULL;
    if (!out) {
        tfree(q); tfree(k); tfree(v);
        r.oom = 1;
        return r;
    }
    make_qkv(q, k, v, n, o->seed);
    double t0 = now_sec();
    int rc = naive ? naive_attention_cpu(q, k, v, out, o->B * o->H, N, o->D, 0)
                   : flash_forward_cpu(q, k, v, out, o->B * o->H, N, o->D, o->BR, o->BC, 0, NULL);
    r.ms = (now_sec() - t0) * 1e3;
    r.peak_bytes = mem_peak() - base;
    r.rss_bytes = rss_peak_bytes();
    r.oom = rc != 0;
    if (!r.oom && check_against) {
        double mx = 0;
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)out[i] - check_against[i]);
            if (!(d <= mx)) mx = d;  /* NaN propagates */
        }
        r.max_diff = mx;
    }
    tfree(q); tfree(k); tfree(v);
    if (out_keep && !r.oom) *out_keep = out;
    else tfree(out);
    return r;
}

// --- the HBM traffic model (lesson 002) -----------------------------------------

/* Bytes one head moves through HBM in the lesson's model, fp16 (2 bytes):
 *   standard: read Q, K (2ND); write S (N^2); read S, write P (2 N^2);
 *             read P and V (N^2 + ND); write O (ND)   = 4ND + 4N^2 elements
 *   flash:    read Q, K, V once, write O once        = 4ND elements (the minimum;
 *             the real kernel re-reads K and V once per Q tile, still linear in N)
 * The lesson's own figure counts S and P once each: 2 N^2 * 2 B = 67 MB at N = 4096. */
static double hbm_standard(double N, double D) { return 2.0 * (4 * N * D + 4 * N * N); }
static double hbm_flash(double N, double D) { return 2.0 * (4 * N * D); }

static void print_traffic_model(void)
{
    char b1[32], b2[32];
    printf("\nHBM traffic per head, fp16 (lesson 002's model):\n"
           "  standard = 2 bytes * (4*N*D + 4*N^2)  [read Q,K; write S; read S, write P; read P,V; write O]\n"
           "  flash    = 2 bytes * (4*N*D)          [read Q,K,V once, write O once]\n"
           "     N    D     standard        flash    ratio\n");
    static const double Ns[] = {512, 1024, 2048, 4096};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 4; i++) {
            double D = d ? 128 : 64, s = hbm_standard(Ns[i], D), f = hbm_flash(Ns[i], D);
            printf("  %5.0f  %3.0f  %11s  %11s  %6.1fx\n", Ns[i], D, fmt_bytes(s, b1, sizeof b1),
                   fmt_bytes(f, b2, sizeof b2), s / f);
        }
    printf("  (the lesson's 'S and P together ~67 MB per head' at N = 4096 is 2 * 4096^2 * 2 bytes = %s)\n",
           fmt_bytes(2.0 * 4096 * 4096 * 2, b1, sizeof b1));
}

// --- the table and the two answers ------------------------------------------------

void probe_print_header(const char *unit_note)
{
    printf("\n%7s  %-7s %6s %12s %12s %12s %10s  %s\n", "N", "method", "status", "peak", "needs", "other view",
           "time", unit_note);
}

void probe_print_row(const ProbeRow *r, FILE *csv, const char *device, const char *dtype, const Opts *o, size_t limit)
{
    char b1[32], b2[32], b3[32];
    printf("%7ld  %-7s %6s %12s %12s %12s %8.1f ms", r->N, r->method, r->oom ? "OOM" : "ok",
           r->oom ? "-" : fmt_bytes((double)r->peak_bytes, b1, sizeof b1), fmt_bytes((double)r->need_bytes, b2, sizeof b2),
           r->oom ? "-" : fmt_bytes((double)r->rss_bytes, b3, sizeof b3), r->oom ? 0.0 : r->ms);
    if (!r->oom && r->max_diff > 0) printf("  %s %.1e", strcmp(device, "gpu") ? "max |naive - tiled|" : "max |O - ref| (4 rows)", r->max_diff);
    printf("\n");
    if (csv)
        fprintf(csv, "%s,%s,%ld,%ld,%ld,%ld,%s,%s,%zu,%zu,%zu,%.3f,%zu\n", device, dtype, o->B, o->H, r->N, o->D, r->method,
                r->oom ? "oom" : "ok", r->oom ? (size_t)0 : r->peak_bytes, r->need_bytes, r->oom ? (size_t)0 : r->rss_bytes,
                r->oom ? 0.0 : r->ms, limit);
}

void probe_answers(const ProbeRow *naive, const ProbeRow *tiled, int n, size_t limit, const char *tiled_name)
{
    char b1[32], b2[32];
    int fail = -1, tenth = -1;
    for (int i = 0; i < n; i++) {
        if (fail < 0 && naive[i].oom) fail = i;
        if (tenth < 0 && !tiled[i].oom &&
            (naive[i].oom ? tiled[i].peak_bytes * 10 < naive[i].need_bytes : tiled[i].peak_bytes * 10 < naive[i].peak_bytes))
            tenth = i;
    }
    if (fail >= 0)
        printf("answer: naive attention first fails at N = %ld (needs %s, limit %s)\n", naive[fail].N,
               fmt_bytes((double)naive[fail].need_bytes, b1, sizeof b1), fmt_bytes((double)limit, b2, sizeof b2));
    else
        printf("answer: naive attention did not fail up to N = %ld under the limit of %s (try a larger N or --mem-limit)\n",
               naive[n - 1].N, fmt_bytes((double)limit, b1, sizeof b1));
    if (tenth >= 0)
        printf("answer: the %s uses less than 1/10 of naive's memory from N = %ld (%s vs %s%s)\n", tiled_name, tiled[tenth].N,
               fmt_bytes((double)tiled[tenth].peak_bytes, b1, sizeof b1),
               fmt_bytes((double)(naive[tenth].oom ? naive[tenth].need_bytes : naive[tenth].peak_bytes), b2, sizeof b2),
               naive[tenth].oom ? " needed" : "");
    else
        printf("answer: the %s never used less than 1/10 of naive's memory in this sweep (up to N = %ld)\n", tiled_name,
               tiled[n - 1].N);
}

static int run_cpu(const Opts *o, const long *Ns, int nN, size_t limit, FILE *csv, ProbeRow *nr, ProbeRow *tr)
{
    char b1[32];
    mem_set_limit(limit);
    printf("step02: memory probe on the CPU, fp32, B=%ld H=%ld D=%ld, tiled BR=%ld BC=%ld, limit %s\n", o->B, o->H, o->D,
           o->BR, o->BC, fmt_bytes((double)limit, b1, sizeof b1));
    probe_print_header("(peak = tracked allocations; other view = process peak RSS)");
    for (int i = 0; i < nN; i++) {
        float *naive_out = NULL;
        nr[i] = probe_cpu_one(o, Ns[i], 1, NULL, &naive_out);
        probe_print_row(&nr[i], csv, "cpu", "fp32", o, limit);
        tr[i] = probe_cpu_one(o, Ns[i], 0, naive_out, NULL);
        probe_print_row(&tr[i], csv, "cpu", "fp32", o, limit);
        tfree(naive_out);
        if (!nr[i].oom && !tr[i].oom && !(tr[i].max_diff < 1e-4)) {
            fprintf(stderr, "step02: naive and tiled disagree at N = %ld (max diff %.2e)\n", Ns[i], tr[i].max_diff);
            return EXIT_FAIL;
        }
        if (i > 0 && !nr[i].oom && !nr[i - 1].oom)
            printf("%7s  naive peak grew %.2fx, tiled %.2fx for a %.0fx longer sequence\n", "", (double)nr[i].peak_bytes / nr[i - 1].peak_bytes,
                   (double)tr[i].peak_bytes / tr[i - 1].peak_bytes, (double)Ns[i] / Ns[i - 1]);
    }
    mem_set_limit(0);
    return EXIT_OK;
}

// --- Step 7 on the CPU: the wall-clock benchmark, interleaved ------------------------

/* The chapter's Step 7 times naive and tiled attention at 1K, 2K and 4K. One run
 * each on a shared machine says little (a busy spell lands on one method and not
 * the other), so here each N gets R rounds, and each round runs both methods back
 * to back on the same inputs: naive first in even rounds, tiled first in odd ones,
 * so that neither always runs second. Per method the median of its R times; per N
 * the median of the R per-round ratios naive/tiled (two runs of one round share
 * the machine's state, so the ratio is steadier than either time). One round at
 * the first N is a warm-up, not timed. The outputs are compared every round:
 * never a time for code that computes garbage. */
typedef struct {
    long N;
    int oom;                               /* naive's S and P did not fit under the limit */
    double naive_ms, tiled_ms;             /* medians */
    double naive_lo, naive_hi, tiled_lo, tiled_hi;
    double speedup;                        /* median of naive/tiled per round: > 1 means tiled faster */
    double max_diff;                       /* largest |naive - tiled| over every round */
} TimeRow;

/* Which is faster at one N: +1 tiled, -1 naive, 0 even. A method is faster when the
 * median per-round ratio says so by more than TIME_EVEN (5%) and the two medians
 * agree; a smaller difference, or a disagreement, is within a shared machine's
 * run-to-run noise, and it is called even. */
#define TIME_EVEN 0.05
static int time_verdict(const TimeRow *t)
{
    if (t->oom) return 1;
    if (t->speedup > 1.0 + TIME_EVEN && t->tiled_ms < t->naive_ms) return 1;
    if (t->speedup < 1.0 / (1.0 + TIME_EVEN) && t->naive_ms < t->tiled_ms) return -1;
    return 0;
}

/* The crossover: the first N of the sweep from which the tiled forward is faster at
 * that N and every larger one (or naive did not fit). Returns its index, or -1 when
 * the tiled forward is not faster at the largest N. */
static int time_crossover(const TimeRow *t, int n)
{
    int from = -1;
    for (int i = n - 1; i >= 0 && time_verdict(&t[i]) > 0; i--) from = i;
    return from;
}

/* The answer line of the chapter's Step 7 (and question 3's crossover): what the
 * sweep shows, whichever way it goes. */
static void time_answer(const TimeRow *t, int n, const Opts *o, long R, char *buf, size_t len)
{
    const int x = time_crossover(t, n);
    char how[128], list[256] = "";
    int w = snprintf(buf, len, "answer: ");
    snprintf(how, sizeof how, "median of %ld interleaved rounds, 1 thread, BR=%ld BC=%ld", R, o->BR, o->BC);
    if (x == 0 && t[0].oom) {
        snprintf(buf + w, len - w, "naive does not fit at any N of the sweep: the tiled forward wins by infinity (%s)", how);
    } else if (x == 0) {
        snprintf(buf + w, len - w, "the tiled forward is faster than naive at every N of the sweep, from N = %ld: %.0f ms "
                 "vs %.0f ms (naive/tiled %.3fx; %s)", t[0].N, t[0].tiled_ms, t[0].naive_ms, t[0].speedup, how);
    } else if (x > 0) {
        const TimeRow *b = &t[x - 1], *a = &t[x];
        int v = snprintf(buf + w, len - w, "naive is %s up to N = %ld (%.0f ms vs tiled %.0f ms), the tiled forward faster "
                         "from N = %ld", time_verdict(b) < 0 ? "faster" : "even (within the noise) or faster", b->N, b->naive_ms,
                         b->tiled_ms, a->N);
        if (a->oom) snprintf(buf + w + v, len - w - v, ", where naive does not fit (it wins by infinity): the crossover on "
                             "this CPU (%s)", how);
        else snprintf(buf + w + v, len - w - v, " (%.0f ms vs naive %.0f ms, naive/tiled %.3fx): the crossover on this CPU "
                      "(%s)", a->tiled_ms, a->naive_ms, a->speedup, how);
    } else {
        const TimeRow *l = &t[n - 1];
        size_t k = 0;
        for (int i = 0; i < n; i++)
            if (time_verdict(&t[i]) > 0 && k < sizeof list)
                k += (size_t)snprintf(list + k, sizeof list - k, "%s%ld", k ? ", " : "", t[i].N);
        if (!k)
            snprintf(buf + w, len - w, "the tiled forward is not faster than naive at any N up to %ld here: at N = %ld "
                     "naive %.0f ms, tiled %.0f ms (naive/tiled %.3fx, %s; %s)", l->N, l->N, l->naive_ms, l->tiled_ms,
                     l->speedup, time_verdict(l) < 0 ? "naive faster" : "even, within the noise", how);
        else
            snprintf(buf + w, len - w, "no crossover in this sweep: the tiled forward is faster at N = %s but not at N = "
                     "%ld (naive %.0f ms, tiled %.0f ms, naive/tiled %.3fx, %s; %s)", list, l->N, l->naive_ms,
                     l->tiled_ms, l->speedup, time_verdict(l) < 0 ? "naive faster" : "even, within the noise", how);
    }
}

/* The rounds at one N. order[] (may be NULL) receives the method of each timed run
 * in turn, 'n' or 't', for --check. When naive does not fit, the tiled forward is
 * still timed alone. Returns 0, or -1 if the two outputs disagree. */
static int time_one_n(const Opts *o, long N, long R, int warmup, TimeRow *row, char *order)
{
    size_t n = (size_t)o->B * o->H * N * o->D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
    float *on = xmalloc(n * 4, "naive O"), *ot = xmalloc(n * 4, "tiled O");
    double *tn = xmalloc((size_t)R * sizeof(double), "times"), *tt = xmalloc((size_t)R * sizeof(double), "times");
    double *sp = xmalloc((size_t)R * sizeof(double), "ratios");
    int rc = 0, runs = 0;
    make_qkv(q, k, v, n, o->seed);
    memset(row, 0, sizeof *row);
    row->N = N;
    for (long r = -warmup; r < R && rc == 0; r++) {
        double t[2] = {0, 0};                             /* t[0] naive, t[1] tiled */
        for (int s = 0; s < 2 && rc == 0; s++) {
            const int naive = (r & 1) ? s == 1 : s == 0;  /* even rounds naive first, odd rounds tiled first */
            if (naive && row->oom) continue;
            if (order && r >= 0) order[runs++] = naive ? 'n' : 't';
            const double t0 = now_sec();
            const int fail = naive ? naive_attention_cpu(q, k, v, on, o->B * o->H, N, o->D, 0)
                                   : flash_forward_cpu(q, k, v, ot, o->B * o->H, N, o->D, o->BR, o->BC, 0, NULL);
            t[!naive] = (now_sec() - t0) * 1e3;
            if (fail && naive) row->oom = 1;              /* S and P over the limit: tiled goes on alone */
            else if (fail) rc = -1;
        }
        if (rc) break;
        if (!row->oom) {
            for (size_t i = 0; i < n; i++) {
                const double d = fabs((double)on[i] - ot[i]);
                if (!(d <= row->max_diff)) row->max_diff = d;  /* NaN propagates */
            }
            if (!(row->max_diff < 1e-4)) { rc = -1; break; }
        }
        if (r < 0) continue;                              /* the warm-up round */
        tn[r] = t[0]; tt[r] = t[1]; sp[r] = t[0] / t[1];
    }
    if (rc == 0) {
        row->tiled_ms = median(tt, (int)R);               /* median() sorts: min and max after it */
        row->tiled_lo = tt[0]; row->tiled_hi = tt[R - 1];
        if (!row->oom) {
            row->naive_ms = median(tn, (int)R);
            row->naive_lo = tn[0]; row->naive_hi = tn[R - 1];
            row->speedup = median(sp, (int)R);
        }
    }
    if (order) order[runs] = 0;
    tfree(q); tfree(k); tfree(v); tfree(on); tfree(ot); tfree(tn); tfree(tt); tfree(sp);
    return rc;
}

static int run_time(const Opts *o, const long *Ns, int nN, long R, size_t limit, FILE *csv)
{
    char b1[32], ans[512];
    TimeRow t[32];
    mem_set_limit(limit);
    printf("step02 --time: the chapter's Step 7 on the CPU, wall-clock of naive vs the tiled forward, fp32, B=%ld H=%ld "
           "D=%ld, tiled BR=%ld BC=%ld, 1 thread, limit %s\n", o->B, o->H, o->D, o->BR, o->BC,
           fmt_bytes((double)limit, b1, sizeof b1));
    printf("each N: %ld rounds of naive and tiled back to back (naive first in even rounds, tiled first in odd), after one\n"
           "warm-up round at the first N; the median of each method, and the median of the per-round ratio\n\n", R);
    printf("%7s  %10s %21s  %10s %21s  %11s  %s\n", "N", "naive ms", "(min .. max)", "tiled ms", "(min .. max)",
           "naive/tiled", "faster");
    for (int i = 0; i < nN; i++) {
        char rn[48], rt[48];
        if (time_one_n(o, Ns[i], R, i == 0, &t[i], NULL) != 0) {
            fprintf(stderr, "step02: naive and tiled disagree at N = %ld (max diff %.2e)\n", Ns[i], t[i].max_diff);
            mem_set_limit(0);
            return EXIT_FAIL;
        }
        snprintf(rn, sizeof rn, "(%.1f .. %.1f)", t[i].naive_lo, t[i].naive_hi);
        snprintf(rt, sizeof rt, "(%.1f .. %.1f)", t[i].tiled_lo, t[i].tiled_hi);
        if (t[i].oom)
            printf("%7ld  %10s %21s  %10.1f %21s  %11s  tiled (naive does not fit)\n", Ns[i], "OOM", "", t[i].tiled_ms,
                   rt, "");
        else
            printf("%7ld  %10.1f %21s  %10.1f %21s  %10.3fx  %s\n", Ns[i], t[i].naive_ms, rn, t[i].tiled_ms, rt,
                   t[i].speedup, time_verdict(&t[i]) > 0 ? "tiled" : time_verdict(&t[i]) < 0 ? "naive" : "even");
        fflush(stdout);
        if (csv)
            for (int m = 0; m < 2; m++)
                fprintf(csv, "cpu,fp32,%ld,%ld,%ld,%ld,%ld,%ld,%s,%s,%.3f,%.3f,%.3f,%ld,%.4f\n", o->B, o->H, Ns[i], o->D,
                        o->BR, o->BC, m ? "tiled" : "naive", m == 0 && t[i].oom ? "oom" : "ok",
                        m ? t[i].tiled_ms : t[i].naive_ms, m ? t[i].tiled_lo : t[i].naive_lo,
                        m ? t[i].tiled_hi : t[i].naive_hi, R, t[i].speedup);
    }
    mem_set_limit(0);
    printf("(naive/tiled: the median of the per-round ratios, > 1 when tiled is faster; even: within 5%%, or the ratio and\n"
           " the medians disagree, which is this machine's run-to-run noise)\n");
    time_answer(t, nN, o, R, ans, sizeof ans);
    printf("\n%s\n", ans);
    return EXIT_OK;
}

// --- checks -------------------------------------------------------------------------

static int run_checks(Opts *o)
{
    /* Small sizes, a limit that refuses naive at the largest N but not tiled. */
    static const long Ns[] = {128, 256, 512};
    ProbeRow nr[3], tr[3];
    o->B = 1; o->H = 2; o->D = 32;
    size_t sp512 = 2 * (size_t)o->B * o->H * 512 * 512 * 4; /* S and P at N = 512: 4.2 MB */
    size_t limit = sp512 / 2;
    mem_set_limit(limit);
    for (int i = 0; i < 3; i++) {
        float *nout = NULL;
        nr[i] = probe_cpu_one(o, Ns[i], 1, NULL, &nout);
        tr[i] = probe_cpu_one(o, Ns[i], 0, nout, NULL);
        tfree(nout);
    }
    mem_set_limit(0);
    report(!nr[0].oom && !nr[1].oom, NULL, "probe/naive-runs-under-limit", "naive ran at N=128, 256 (needs %zu, %zu bytes; limit %zu)",
           nr[0].need_bytes, nr[1].need_bytes, limit);
    report(nr[2].oom, NULL, "probe/naive-oom", "naive at N=512 needs %zu bytes > limit %zu: refused as OOM (%s)", nr[2].need_bytes,
           limit, nr[2].oom ? "it was" : "it was NOT");
    report(!tr[2].oom, NULL, "probe/tiled-runs", "the tiled forward still ran at N=512 under the same limit");
    int exact = 1;
    for (int i = 0; i < 2; i++) exact &= nr[i].peak_bytes == nr[i].need_bytes && tr[i].peak_bytes == tr[i].need_bytes;
    report(exact, NULL, "probe/peak-is-exact", "tracked peaks equal Q,K,V,O + S,P (naive) and Q,K,V,O + tile (tiled) to the byte");
    double gn = (double)nr[1].peak_bytes / nr[0].peak_bytes, gt = (double)tr[2].peak_bytes / tr[1].peak_bytes;
    double sp_growth = (double)(nr[1].peak_bytes - 4 * (size_t)o->B * o->H * 256 * o->D * 4) /
                       (double)(nr[0].peak_bytes - 4 * (size_t)o->B * o->H * 128 * o->D * 4);
    report(fabs(sp_growth - 4.0) < 1e-9 && gn > 3.0, NULL, "probe/naive-quadratic",
           "naive's S+P grew exactly %.2fx (total %.2fx) when N doubled", sp_growth, gn);
    report(gt > 1.9 && gt < 2.1, NULL, "probe/tiled-linear", "the tiled forward's peak grew %.2fx when N doubled", gt);
    report(tr[0].max_diff < 1e-5 && tr[1].max_diff < 1e-5, NULL, "probe/outputs-agree",
           "naive and tiled outputs agree (max diff %.1e, %.1e)", tr[0].max_diff, tr[1].max_diff);
    /* The traffic model at one point by hand: N = 4096, D = 128: standard
     * 2*(4*4096*128 + 4*4096^2) = 138412032 bytes, flash 2*4*4096*128 = 4194304. */
    report(hbm_standard(4096, 128) == 138412032.0 && hbm_flash(4096, 128) == 4194304.0, NULL, "probe/traffic-model",
           "N=4096 D=128: standard %.0f bytes, flash %.0f bytes (by hand: 138412032 and 4194304)", hbm_standard(4096, 128),
           hbm_flash(4096, 128));
    /* --time: the rounds interleave, the outputs agree, the crossover rule reads the medians as the answer says. */
    {
        TimeRow row;
        char order[64], ans[512];
        const int rc = time_one_n(o, 48, 4, 1, &row, order);
        report(!strcmp(order, "nttnnttn"), NULL, "time/interleaved", "4 rounds ran in the order %s (expected nttnnttn: "
               "naive first in even rounds, tiled first in odd)", order);
        report(rc == 0 && !row.oom && row.max_diff < 1e-5 && row.naive_lo <= row.naive_ms && row.naive_ms <= row.naive_hi &&
               row.tiled_lo <= row.tiled_ms && row.tiled_ms <= row.tiled_hi && row.speedup > 0, NULL, "time/rounds",
               "N=48: outputs agree every round (max diff %.1e), min <= median <= max for both (naive %.3f <= %.3f <= %.3f ms)",
               row.max_diff, row.naive_lo, row.naive_ms, row.naive_hi);
        mem_set_limit(limit);                                       /* naive refused at N = 512, tiled not */
        const int rc2 = time_one_n(o, 512, 2, 0, &row, order);
        mem_set_limit(0);
        report(rc2 == 0 && row.oom && !strcmp(order, "ntt") && row.tiled_ms > 0, NULL, "time/naive-oom",
               "N=512 over the limit: naive tried once and refused, the tiled forward timed alone in both rounds (order %s, "
               "expected ntt; %.3f ms)", order, row.tiled_ms);
        /* speed-ups naive/tiled at three N: the crossover is the first N from which tiled wins to the end */
        static const double sp[][3] = {{0.8, 0.9, 1.1}, {0.8, 1.1, 0.9}, {1.2, 1.3, 1.4}, {0.8, 0.9, 0.95}, {0.8, 0.9, -1},
                                       {0.8, 1.1, 1.1}, {1.3, 1.1, 0.99}, {0.8, 1.2, 1.03}};
        static const int want[] = {2, -1, 0, -1, 2, -1, -1, -1};
        static const char *const say[] = {"from N = 4096", "faster at N = 2048 but not", "from N = 1024", "not faster",
                                          "N = 4096, where naive does not fit",
                                          "faster at N = 2048 but not at N = 4096",
                                          "faster at N = 1024, 2048 but not", "faster at N = 2048 but not at N = 4096"};
        int all = 1;
        for (int c = 0; c < 8; c++) {
            TimeRow t[3];
            memset(t, 0, sizeof t);
            for (int j = 0; j < 3; j++) {
                t[j].N = 1024L << j; t[j].speedup = sp[c][j]; t[j].oom = sp[c][j] < 0;
                t[j].tiled_ms = 100; t[j].naive_ms = 100 * sp[c][j];  /* medians that agree with the ratio ... */
            }
            if (c == 5) t[2].naive_ms = 90;                         /* ... except here: at the last N they disagree */
            const int got = time_crossover(t, 3);
            time_answer(t, 3, o, 5, ans, sizeof ans);
            const int said = strstr(ans, say[c]) != NULL;
            if (got != want[c] || !said) {
                report(0, NULL, "time/crossover-rule", "speed-ups %.2f %.2f %.2f: crossover index %d, expected %d; answer '%s'",
                       sp[c][0], sp[c][1], sp[c][2], got, want[c], ans);
                all = 0;
            }
        }
        if (all)
            report(1, NULL, "time/crossover-rule", "8 cases: tiled wins from the 3rd N; loses at the last; wins at every N; "
                   "never; naive OOM at the last; ratio and medians disagree at the last; wins at the first two only; "
                   "within 5%% at the last (even): the crossover's N, and the answer line says what the sweep shows");
    }
#ifdef HAVE_CUDA
    if (gpu_available()) memprobe_gpu_checks();
    else report_skip("probe/gpu", "no CUDA device");
#else
    report_skip("probe/gpu", "built without CUDA");
#endif
    return report_finish();
}

// --- main ---------------------------------------------------------------------

static void usage(const Opts *o)
{
    printf("usage: ./step02 [options]\n"
           "Peak memory of naive attention vs the tiled (CPU) or fused (GPU) forward over N (book Steps 1, 5).\n");
    print_common_usage(o);
    printf("  --seq-list N1,N2,...   sequence lengths (default 1024..8192 on the CPU, 1024..65536 on the GPU;\n"
           "                         with --time 1024,2048,4096)\n"
           "  --mem-limit SIZE       refuse runs that would allocate more (8G, 512M, ...; default: CPU half the\n"
           "                         physical memory, GPU the device's own)\n"
           "  --time                 the chapter's Step 7 on the CPU instead of the probe: naive vs tiled wall-clock,\n"
           "                         --repeat R interleaved rounds per N (default 5), medians, the crossover\n");
}

int main(int argc, char **argv)
{
    Opts o;
    long Ns[32];
    int nN = 0;
    size_t limit = 0;
    int timing = 0, repeat_given = 0;
    opts_expand(&argc, &argv);
    opts_init(&o, "step02", OPT_SHAPE | OPT_BLOCK | OPT_DTYPE | OPT_SEED | OPT_REPEAT | OPT_CSV | OPT_CHECK | OPT_DEVICE |
              OPT_GPU_AS, (1u << DT_FP32) | (1u << DT_FP16));
    o.B = 2; o.H = 8; o.D = 64; o.BR = 64; o.BC = 64;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat")) repeat_given = 1;
        if (opts_parse_common(&o, argc, argv, &i)) continue;
        if (!strcmp(argv[i], "--time")) { timing = 1; continue; }
        if (!strcmp(argv[i], "--mem-limit")) { limit = parse_size("--mem-limit", opt_value(argc, argv, &i)); continue; }
        if (!strcmp(argv[i], "--seq-list")) {
            const char *a = argv[i], *s = opt_value(argc, argv, &i);
            char buf[512], *tok, *save = NULL;
            if (!*s) usage_error("option %s: empty list, expected N1,N2,... (integers in [1, 1048576])", a);
            if (strlen(s) >= sizeof buf) usage_error("option %s: list too long", a);
            strcpy(buf, s);
            nN = 0;
            for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (nN == 32) usage_error("option %s: at most 32 values", a);
                Ns[nN++] = parse_long(a, tok, 1, 1048576);
            }
            if (nN == 0) usage_error("option %s: empty list, expected N1,N2,...", a);
            continue;
        }
        usage_error("unknown option '%s' (see --help)", argv[i]);
    }
    if (o.help) { usage(&o); return 0; }
    int gpu = o.device == DEV_GPU || (o.device == DEV_AUTO && gpu_available());
    if (!gpu && o.dtype != DT_FP32) usage_error("option --dtype: %s is for --device gpu; the CPU probe is fp32", dtype_name(o.dtype));
    if (gpu && !(o.given & OPT_GIVEN_DTYPE)) o.dtype = DT_FP16; /* the chapter's probe is fp16 on the GPU */
    if (timing && gpu)
        usage_error("option --time: the wall-clock benchmark here is the CPU's (--device cpu); on a GPU, ./step05 times naive against the fused kernels");
    if (repeat_given && !timing) usage_error("option --repeat: it counts the timed rounds of --time; the memory probe runs each N once");
    if (nN == 0) {
        long last = timing ? 4096 : gpu ? 65536 : 8192;
        for (long N = 1024; N <= last; N *= 2) Ns[nN++] = N;
    }
    for (int i = 0; i < nN; i++) { /* every size must fit size_t, also naive's 2*B*H*N*N */
        o.N = Ns[i];
        opts_validate(&o, dtype_size(o.dtype));
        (void)size_or_die("S and P: 2*B*H*N*N*sizeof", 2, (size_t)o.B * o.H, (size_t)Ns[i], (size_t)Ns[i], dtype_size(o.dtype));
    }
    if (o.check) return run_checks(&o);
    if (timing) {
        FILE *csv = o.csv ? csv_open(o.csv, "device,dtype,B,H,N,D,BR,BC,method,status,ms,ms_min,ms_max,rounds,speedup") : NULL;
        if (!limit) limit = phys_mem_bytes() / 2;
        int rc = run_time(&o, Ns, nN, o.repeat, limit, csv);
        if (csv) fclose(csv);
        return rc;
    }
    FILE *csv = o.csv ? csv_open(o.csv, "device,dtype,B,H,N,D,method,status,peak_bytes,need_bytes,other_bytes,ms,limit_bytes") : NULL;
    int rc;
    if (gpu) {
#ifdef HAVE_CUDA
        gpu_require();
        rc = memprobe_gpu(&o, Ns, nN, limit, csv);
#else
        gpu_require();
        rc = EXIT_SKIP;
#endif
    } else {
        ProbeRow nr[32], tr[32];
        if (!limit) limit = phys_mem_bytes() / 2;
        rc = run_cpu(&o, Ns, nN, limit, csv, nr, tr);
        if (rc == EXIT_OK) {
            printf("\n");
            probe_answers(nr, tr, nN, limit, "tiled forward");
            print_traffic_model();
        }
    }
    if (csv) fclose(csv);
    return rc;
}
