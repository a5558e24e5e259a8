/*
 * decode.c: ./step05 --decode, the host side of the decode kernels (decode/decodeNN_*.cu, registered in
 * kernels.h's decode registry).
 *
 * A decode problem: B sequences, each with its own cache length len_b (its n new rows included), Hq
 * query heads over Hkv KV heads, n = 1 .. 16 new query rows per sequence at its newest positions, causal
 * among themselves; the cache both contiguous ([B, Hkv, max_len, D]) and paged (a pool of pages of P keys,
 * [pages, Hkv, P, D], and a block table [B, max_pages], pages shuffled and the first pages of sequences
 * 0 and 1 shared, as a common prompt is). The two hold the same keys: the contiguous one is gathered from
 * the pages.
 *
 * --check: every kernel on every shape of the grid below against the float64 reference of its rows, with
 * the tolerance of naive attention in the same dtype (2x its error, as for the forward); each run twice,
 * bit-identical; the paged kernels against the contiguous one they extend, bit-identical; the rungs that change
 * only when the work runs against the rung below, bit-identical; a block table pointing outside the pool
 * refused. The default run: one shape, checked, then timed. --bench: GB/s of cache read (the bytes of K and V
 * of every KV head of every sequence, each read once, over the time) against the device's read bandwidth
 * measured in the same run, at the shapes FlashAttention-2 and cuDNN were timed at (plots/sdpa_decode.py), over
 * the cache length for the picture, over the page size, and over n. The kernel lists, --kernel and the SKIP
 * lines are the runner's (runner.c); the times, the table and the CSV are decode's own (us and GB/s of cache read
 * against the device's bandwidth, not TFLOP/s against naive attention).
 */
#include "common.h"
#include "decode.h"
#include "gpu.h"
#include "runner.h"
#include "../kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// --- options (no GPU needed) -----------------------------------------------------------------------

void decode_opts_init(DecodeOpts *d)
{
    memset(d, 0, sizeof *d);
    d->n = 1;
    d->page = 64;
}

int decode_parse(DecodeOpts *d, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--decode")) { d->on = 1; return 1; }
    if (!strcmp(a, "--kv-heads")) { d->Hkv = parse_long(a, opt_value(argc, argv, i), 1, 1L << 20); d->given_hkv = 1; return 1; }
    if (!strcmp(a, "--new")) { d->n = parse_long(a, opt_value(argc, argv, i), 1, 16); d->given_n = 1; return 1; }
    if (!strcmp(a, "--page")) { d->page = parse_long(a, opt_value(argc, argv, i), 16, 256); return 1; }
    if (!strcmp(a, "--lens")) { d->lens = opt_value(argc, argv, i); return 1; }
    if (!strcmp(a, "--spread")) { d->spread = 1; return 1; }
    return 0;
}

void decode_usage(void)
{
    printf("decode (--decode: n new query rows per sequence against a KV cache; --heads is Hq, --seq the cache length L):\n"
           "  --decode               the decode kernels, checked against float64 and timed in GB/s of cache read\n"
           "                         (defaults: B=8 Hq=32 Hkv=8 L=4096 D=128, fp16); with --check: their check grid;\n"
           "                         with --bench: the benchmark against the device's read bandwidth\n"
           "  --kv-heads H           KV heads, Hq a multiple of it (default Hq: multi-head; 1: multi-query)\n"
           "  --new N                new query rows per sequence, causal among themselves, 1..16 (default 1)\n"
           "  --page P               the paged cache's page, a power of two in 16..256 keys (default 64)\n"
           "  --lens a,b,...         each sequence's cache length (their count is the batch)\n"
           "  --spread               cache lengths drawn from --new .. --seq (from --seed)\n"
           "  --q Q.npy --k K.npy --v V.npy [--out O.npy]\n"
           "                         your tensors: Q [B, Hq, n, D] the new rows, K and V [B, Hkv, L, D] the cache\n"
           "                         (float32 or float16; the new rows the last n keys of each sequence's cache, --lens\n"
           "                         or L long); every decode kernel checked on them against float64 (the paged one on\n"
           "                         the cache paged here, --page), then timed; --out: O of the last kernel, [B, Hq, n, D]\n");
}

/* The lengths of --lens, or NULL; *count gets their number. Exits 2 on a bad list. */
static int *parse_lens(const char *s, long n, long *count)
{
    long cnt = 1;
    for (const char *c = s; *c; c++) cnt += *c == ',';
    int *len = xmalloc((size_t)cnt * sizeof(int), "--lens");
    char buf[32];
    for (long k = 0; k < cnt; k++) {
        const char *e = strchr(s, ',');
        const size_t w = e ? (size_t)(e - s) : strlen(s);
        if (w == 0 || w >= sizeof buf) { tfree(len); usage_error("option --lens: expected lengths separated by commas, as 100,4000,17"); }
        memcpy(buf, s, w);
        buf[w] = '\0';
        const long v = parse_long("--lens", buf, 0, 1L << 24);
        if (v == 0) { tfree(len); usage_error("option --lens: a cache length of 0 (each holds at least its new rows)"); }
        if (v < n) { tfree(len); usage_error("option --lens: a cache of %ld keys cannot hold its %ld new rows (--new)", v, n); }
        len[k] = (int)v;
        s = e ? e + 1 : s + w;
    }
    *count = cnt;
    return len;
}

void decode_files_validate(Opts *o, DecodeOpts *d)
{
    if (!(o->qfile && o->kfile && o->vfile)) usage_error("options --q, --k, --v go together: give all three .npy files");
    long q[4], k[4], v[4];
    if (npy_shape("--q", o->qfile, q) != 4) usage_error("option --q: %s must be 4-D, [B, Hq, n, D] (the new rows)", o->qfile);
    if (npy_shape("--k", o->kfile, k) != 4) usage_error("option --k: %s must be 4-D, [B, Hkv, L, D] (the cache)", o->kfile);
    if (npy_shape("--v", o->vfile, v) != 4) usage_error("option --v: %s must be 4-D, [B, Hkv, L, D] (the cache)", o->vfile);
    if (k[0] != v[0] || k[1] != v[1] || k[2] != v[2] || k[3] != v[3])
        usage_error("option --v: %s has shape [%ld, %ld, %ld, %ld] but K's is [%ld, %ld, %ld, %ld]: K and V are one cache",
                    o->vfile, v[0], v[1], v[2], v[3], k[0], k[1], k[2], k[3]);
    if (q[0] != k[0]) usage_error("option --k: %s holds B = %ld sequences but Q %ld", o->kfile, k[0], q[0]);
    if (q[3] != k[3]) usage_error("option --k: %s has D = %ld but Q %ld", o->kfile, k[3], q[3]);
    if (k[1] < 1 || q[1] % k[1])
        usage_error("option --q: Q's %ld query heads are not a multiple of the cache's %ld KV heads", q[1], k[1]);
    if (q[2] < 1 || q[2] > 16) usage_error("option --q: %ld new rows per sequence; the decode kernels take 1..16", q[2]);
    if (q[2] > k[2])
        usage_error("option --q: %ld new rows, but the cache holds %ld keys (the new rows are its last ones)", q[2], k[2]);
    if (q[0] > 65535 || q[1] > 65535 || k[2] > (1L << 24))
        usage_error("option --q: an unsupported shape (B and Hq up to 65535, L up to 2^24)");
    if (d->given_n && d->n != q[2]) usage_error("option --new: %ld, but Q holds %ld new rows per sequence", d->n, q[2]);
    if (d->given_hkv && d->Hkv != k[1]) usage_error("option --kv-heads: %ld, but the cache holds %ld", d->Hkv, k[1]);
    if (d->spread) usage_error("option --spread: with your tensors the lengths are --lens, or the cache's L for every sequence");
    const long got[4] = {q[0], q[1], k[2], q[3]};  /* --seq is the cache's L */
    opts_given_agree(o, got, "the files");
    if (d->lens) {
        long cnt;
        int *len = parse_lens(d->lens, q[2], &cnt);
        for (long b = 0; b < cnt; b++)
            if (len[b] > k[2]) {
                const int l = len[b];
                tfree(len);
                usage_error("option --lens: a length of %d, but the cache holds L = %ld keys", l, k[2]);
            }
        tfree(len);
        if (cnt != q[0]) usage_error("option --lens: %ld lengths for the files' %ld sequences", cnt, q[0]);
    }
    o->B = q[0]; o->H = q[1]; o->N = k[2]; o->D = q[3];
    d->n = q[2]; d->Hkv = k[1]; d->given_hkv = 1;
    d->qf = o->qfile; d->kf = o->kfile; d->vf = o->vfile;
    o->qfile = o->kfile = o->vfile = NULL;
    const long cs[4] = {k[0], k[1], k[2], k[3]};
    d->qx = npy_load("--q", d->qf, q, 4);
    d->kx = npy_load("--k", d->kf, cs, 4);
    d->vx = npy_load("--v", d->vf, cs, 4);
    finite_or_die("--q", d->qf, d->qx, q);
    finite_or_die("--k", d->kf, d->kx, cs);
    finite_or_die("--v", d->vf, d->vx, cs);
}

void decode_validate(const Opts *o, const DecodeOpts *d)
{
    const long Hkv = d->given_hkv ? d->Hkv : o->H;
    if (o->H % Hkv) usage_error("option --kv-heads: %ld query heads (--heads) are not a multiple of %ld KV heads", o->H, Hkv);
    if (d->page & (d->page - 1)) usage_error("option --page: %ld is not a power of two (16, 32, 64, 128 or 256)", d->page);
    if (o->N < d->n) usage_error("option --seq: a cache of %ld keys cannot hold its %ld new rows (--new)", o->N, d->n);
    if (d->lens && d->spread) usage_error("options --lens and --spread: one way to give the lengths at a time");
    if (d->lens) {
        long cnt;
        int *len = parse_lens(d->lens, d->n, &cnt);
        tfree(len);
        if ((o->given & 1) && cnt != o->B)
            usage_error("option --lens: %ld lengths for --batch %ld", cnt, o->B);
    }
    const int dim_ok = o->dtype == DT_FP32 ? (o->D == 16 || o->D == 32 || o->D == 64 || o->D == 128) : (o->D == 64 || o->D == 128);
    if (!dim_ok)
        usage_error("option --dim: the decode kernels take %s, not %ld", o->dtype == DT_FP32 ? "D = 16, 32, 64 or 128 in fp32 "
                    "(kernel 1)" : "D = 64 or 128 in fp16/bf16", o->D);
}

#ifdef HAVE_CUDA

// --- a decode problem ------------------------------------------------------------------------------

typedef struct {
    long B, Hq, Hkv, D, n, max_len, page, pages, max_pages;
    int dtype;
    int *len, *table;          /* host [B], [B, max_pages] */
    float *q, *kc, *vc;        /* host (host-made problems only), rounded to dtype: Q [B, Hq, n, D], the
                                * contiguous cache [B, Hkv, max_len, D] gathered from the pages */
    size_t nq, nc, np;         /* elements of Q (and O), of the contiguous cache, of a pool */
    void *dq, *dout, *dk, *dv, *dkp, *dvp;
    int *dlen, *dtable;
    DecodeArgs a;
} DProb;

static long pages_of(long len, long page) { return (len + page - 1) / page; }

/* Sequence b's pages: a shuffled deal of the pool, and with share, sequence 1 naming sequence 0's first pages
 * as its own first ones (half of the fewer of their pages: a shared prompt; not for a reader's cache, whose
 * sequences hold their own keys). Returns the pool's size. */
static long make_tables(int *table, const int *len, long B, long page, long max_pages, uint64_t seed, int share)
{
    long total = 0, shared = 0;
    for (long b = 0; b < B; b++) total += pages_of(len[b], page);
    if (B >= 2 && share) {
        const long a = pages_of(len[0], page), c = pages_of(len[1], page);
        shared = (a < c ? a : c) / 2;
    }
    const long pool = total - shared;
    int *perm = xmalloc((size_t)pool * sizeof(int), "page order");
    Rng r;
    rng_seed(&r, seed ^ 0x9a9e5);
    for (long i = 0; i < pool; i++) perm[i] = (int)i;
    for (long i = pool - 1; i > 0; i--) { const long j = (long)(rng_next(&r) % (uint64_t)(i + 1)); const int t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    long next = 0;
    for (long b = 0; b < B; b++)
        for (long i = 0; i < max_pages; i++)
            table[b * max_pages + i] = i >= pages_of(len[b], page) ? -1               /* past the sequence: unused */
                                       : b == 1 && i < shared ? table[i]             /* sequence 0's page, shared */
                                       : perm[next++];
    tfree(perm);
    return pool;
}

/* NULL if every page sequence b names (up to its length) is in the pool; else why not. */
static const char *table_problem(const int *table, const int *len, long B, long page, long max_pages, long pool)
{
    static char why[160];
    for (long b = 0; b < B; b++)
        for (long i = 0; i < pages_of(len[b], page); i++) {
            const int e = table[b * max_pages + i];
            if (e < 0 || e >= pool) {
                snprintf(why, sizeof why, "the block table sends sequence %ld's page %ld to page %d, outside the pool of %ld",
                         b, i, e, pool);
                return why;
            }
        }
    return NULL;
}

/* host = 1: the inputs made on the host (seeded, rounded to dtype) and kept there for the reference; 0:
 * made on the device (the benchmark's sizes), nothing kept on the host but the tables. files (host only): the
 * reader's Q and cache instead (d's --q, --k, --v, of L = max_len keys), rounded to dtype, the pages made from
 * the cache. */
static void dprob_make(DProb *p, long B, long Hq, long Hkv, long D, long n, const int *len, int dtype, long page,
                       uint64_t seed, int host, const DecodeOpts *files, long max_len)
{
    memset(p, 0, sizeof *p);
    p->B = B; p->Hq = Hq; p->Hkv = Hkv; p->D = D; p->n = n; p->dtype = dtype; p->page = page;
    p->len = xmalloc((size_t)B * sizeof(int), "lengths");
    memcpy(p->len, len, (size_t)B * sizeof(int));
    for (long b = 0; b < B; b++) if (len[b] > p->max_len) p->max_len = len[b];
    if (files) p->max_len = max_len;           /* the reader's cache as it is, [B, Hkv, L, D] */
    p->max_pages = pages_of(p->max_len, page);
    p->table = xmalloc((size_t)B * p->max_pages * sizeof(int), "block table");
    p->pages = make_tables(p->table, len, B, page, p->max_pages, seed, !files);
    p->nq = (size_t)B * Hq * n * D;
    p->nc = size_or_die("the contiguous cache, B*Hkv*L*D", (size_t)B, (size_t)Hkv, (size_t)p->max_len, (size_t)D, 1);
    p->np = size_or_die("the page pool, pages*Hkv*P*D", (size_t)p->pages, (size_t)Hkv, (size_t)page, (size_t)D, 1);
    const size_t es = dtype_size(dtype), page_elems = (size_t)Hkv * page * D;
    if (files) {
        p->q = files->qx; p->kc = files->kx; p->vc = files->vx;   /* the problem owns (and frees) them from here */
        round_to_dtype(p->q, p->nq, dtype); round_to_dtype(p->kc, p->nc, dtype); round_to_dtype(p->vc, p->nc, dtype);
        float *kp = xmalloc(p->np * 4, "K pages"), *vp = xmalloc(p->np * 4, "V pages");
        for (size_t x = 0; x < p->np; x++) kp[x] = vp[x] = 0.0f;
        for (long b = 0; b < B; b++)               /* the pages: each key's row of the reader's cache to its page */
            for (long h = 0; h < Hkv; h++)
                for (long j = 0; j < len[b]; j++) {
                    const size_t dst = (size_t)p->table[b * p->max_pages + j / page] * page_elems + ((size_t)h * page + j % page) * D;
                    const size_t src = (((size_t)b * Hkv + h) * p->max_len + j) * D;
                    memcpy(kp + dst, p->kc + src, (size_t)D * 4);
                    memcpy(vp + dst, p->vc + src, (size_t)D * 4);
                }
        p->dq = dupload(p->q, p->nq, dtype, "Q");
        p->dk = dupload(p->kc, p->nc, dtype, "K cache");
        p->dv = dupload(p->vc, p->nc, dtype, "V cache");
        p->dkp = dupload(kp, p->np, dtype, "K pages");
        p->dvp = dupload(vp, p->np, dtype, "V pages");
        tfree(kp); tfree(vp);
    } else if (host) {
        Rng r;
        rng_seed(&r, seed);
        p->q = xmalloc(p->nq * 4, "Q");
        float *kp = xmalloc(p->np * 4, "K pages"), *vp = xmalloc(p->np * 4, "V pages");
        fill_normal(p->q, p->nq, &r);
        fill_normal(kp, p->np, &r);
        fill_normal(vp, p->np, &r);
        round_to_dtype(p->q, p->nq, dtype); round_to_dtype(kp, p->np, dtype); round_to_dtype(vp, p->np, dtype);
        /* Every row of the pool no sequence reads (past a length, in a page no table names) and every row of the
         * contiguous cache past its length: NaN, as a real cache's unwritten slots may hold. A kernel that lets one
         * into its math (p = 0 times a NaN of V is NaN) fails the checks. */
        unsigned char *used = xmalloc((size_t)p->pages * page, "rows read");
        memset(used, 0, (size_t)p->pages * page);
        for (long b = 0; b < B; b++)
            for (long j = 0; j < len[b]; j++) used[(size_t)p->table[b * p->max_pages + j / page] * page + j % page] = 1;
        for (size_t x = 0; x < p->np; x++)
            if (!used[x / page_elems * page + x % page_elems / D % page]) kp[x] = vp[x] = NAN;
        tfree(used);
        p->kc = xmalloc(p->nc * 4, "K"); p->vc = xmalloc(p->nc * 4, "V");
        for (size_t x = 0; x < p->nc; x++) p->kc[x] = p->vc[x] = NAN;
        for (long b = 0; b < B; b++)               /* the contiguous cache: each key's row from its page */
            for (long h = 0; h < Hkv; h++)
                for (long j = 0; j < len[b]; j++) {
                    const size_t src = (size_t)p->table[b * p->max_pages + j / page] * page_elems + ((size_t)h * page + j % page) * D;
                    const size_t dst = (((size_t)b * Hkv + h) * p->max_len + j) * D;
                    memcpy(p->kc + dst, kp + src, (size_t)D * 4);
                    memcpy(p->vc + dst, vp + src, (size_t)D * 4);
                }
        p->dq = dupload(p->q, p->nq, dtype, "Q");
        p->dk = dupload(p->kc, p->nc, dtype, "K cache");
        p->dv = dupload(p->vc, p->nc, dtype, "V cache");
        p->dkp = dupload(kp, p->np, dtype, "K pages");
        p->dvp = dupload(vp, p->np, dtype, "V pages");
        tfree(kp); tfree(vp);
    } else {
        p->dq = dmalloc(p->nq * es, "Q");
        p->dk = dmalloc(p->nc * es, "K cache"); p->dv = dmalloc(p->nc * es, "V cache");
        p->dkp = dmalloc(p->np * es, "K pages"); p->dvp = dmalloc(p->np * es, "V pages");
        dec_fill_random(p->dq, p->nq, dtype, seed);
        dec_fill_random(p->dk, p->nc, dtype, seed + 1); dec_fill_random(p->dv, p->nc, dtype, seed + 2);
        dec_fill_random(p->dkp, p->np, dtype, seed + 3); dec_fill_random(p->dvp, p->np, dtype, seed + 4);
    }
    const char *bad = table_problem(p->table, len, B, page, p->max_pages, p->pages);
    if (bad) usage_error("--decode: %s", bad); /* the launcher trusts the table, as vLLM's kernel does: checked here */
    p->dout = dmalloc(p->nq * es, "O");
    p->dlen = dupload_int(p->len, (size_t)B, "lengths");
    p->dtable = dupload_int(p->table, (size_t)B * p->max_pages, "block table");
    DecodeArgs a = {B, Hq, Hkv, D, n, p->max_len, p->dlen, dtype, p->dq, p->dout, p->dk, p->dv, p->dkp, p->dvp,
                    p->dtable, page, p->max_pages, 0, p->pages};
    p->a = a;
}

static void dprob_free(DProb *p)
{
    dfree(p->dq); dfree(p->dout); dfree(p->dk); dfree(p->dv); dfree(p->dkp); dfree(p->dvp);
    dfree(p->dlen); dfree(p->dtable);
    tfree(p->len); tfree(p->table); tfree(p->q); tfree(p->kc); tfree(p->vc);
}

/* Bytes a decode must read: K and V of every KV head of every sequence, once. */
static double cache_bytes(const DProb *p)
{
    double keys = 0;
    for (long b = 0; b < p->B; b++) keys += p->len[b];
    return 2.0 * keys * p->Hkv * p->D * dtype_size(p->dtype);
}

// --- the reference and the yardstick -----------------------------------------------------------------

/* The float64 output of every new row, [B, Hq, n, D]; and the error of naive attention in the problem's
 * dtype on them (as naive_gpu.cu computes: scores and softmax in fp32 from the dtype's inputs, P stored in
 * the dtype, P V summed in fp32, O stored in the dtype): the yardstick of the tolerance. */
static double *reference(const DProb *p, double *naive_err)
{
    double *ref = xmalloc(p->nq * sizeof(double), "reference");
    double *scr = xmalloc((size_t)p->max_len * sizeof(double), "reference scores");
    float *s = xmalloc((size_t)p->max_len * sizeof(float), "naive row"), *o = xmalloc((size_t)p->D * sizeof(float), "naive O");
    const float scale = 1.0f / sqrtf((float)p->D);
    double worst = 0;
    for (long b = 0; b < p->B; b++)
        for (long hq = 0; hq < p->Hq; hq++) {
            const long hkv = hq / (p->Hq / p->Hkv);
            const float *k = p->kc + ((size_t)b * p->Hkv + hkv) * p->max_len * p->D;
            const float *v = p->vc + ((size_t)b * p->Hkv + hkv) * p->max_len * p->D;
            for (long i = 0; i < p->n; i++) {
                const size_t row = ((size_t)b * p->Hq + hq) * p->n + i;
                const float *q = p->q + row * p->D;
                const long keys = p->len[b] - p->n + i + 1;          /* row i sees keys 0 .. len - n + i */
                ref_attention_keys(q, k, v, keys, p->D, scr, ref + row * p->D);
                float m = -INFINITY, l = 0.0f;
                for (long j = 0; j < keys; j++) { s[j] = dot_f32(q, k + j * p->D, p->D) * scale; m = fmaxf(m, s[j]); }
                for (long j = 0; j < keys; j++) { s[j] = expf(s[j] - m); l += s[j]; }
                for (long j = 0; j < keys; j++) s[j] /= l;
                round_to_dtype(s, (size_t)keys, p->dtype);            /* P stored in the dtype */
                for (long d = 0; d < p->D; d++) o[d] = 0.0f;
                for (long j = 0; j < keys; j++)
                    for (long d = 0; d < p->D; d++) o[d] += s[j] * v[j * p->D + d];
                round_to_dtype(o, (size_t)p->D, p->dtype);            /* O stored in the dtype */
                for (long d = 0; d < p->D; d++) {
                    const double e = fabs((double)o[d] - ref[row * p->D + d]);
                    if (!(e <= worst)) worst = e;
                }
            }
        }
    tfree(scr); tfree(s); tfree(o);
    *naive_err = worst;
    return ref;
}

static int kernel_takes(const DecodeKernel *k, int dtype, long D)
{
    return runs_case(k->dtypes, k->supports_dim, k->unavailable, dtype, D);
}

/* The contiguous-cache kernel a paged kernel's pages are checked against: the rung its paged chain extends
 * (decode kernel 5, the first paged one, extends 4). NULL if there is none. */
static const DecodeKernel *contiguous_base(const DecodeKernel *k)
{
    for (int steps = 0; k && k->paged && steps < MAX_KERNELS; steps++) k = decode_kernel(k->extends);
    return k && !k->paged ? k : NULL;
}


/* One launch of kernel k on p with workspace ws (allocated by the caller), its output poisoned first and
 * downloaded into out [nq]. 0, or -1 if the launch refused. */
static int dec_run(const DecodeKernel *k, DProb *p, void *ws, float *out)
{
    dpoison(p->dout, p->nq, p->dtype);
    gpu_refusal_clear();
    if (k->launch(&p->a, ws, NULL) != 0) return -1;
    gpu_sync_check();
    ddownload(out, p->dout, p->nq, p->dtype);
    return 0;
}

/* A kernel's workspace (the split's partial states), zeroed once: the kernels write every state they read. */
static void *ws_alloc(const DecodeKernel *k, const DProb *p)
{
    const size_t bytes = k->workspace ? k->workspace(&p->a) : 0;
    void *ws = bytes ? dmalloc(bytes, "decode workspace") : NULL;
    if (ws) dzero(ws, bytes);
    return ws;
}

// --- --check -------------------------------------------------------------------------------------

enum { DEC_CHECK_BATCH = 128 };
static void check_problem(long only, int dt, long D, long Hq, long Hkv, long n, int lcase, uint64_t seed)
{
    static const long pages[5] = {16, 64, 256, 64, 256};
    int len[DEC_CHECK_BATCH];
    long B;
    if (lcase == 0) { B = 1; len[0] = (int)n; }                      /* the cache holds the new rows only */
    else if (lcase == 1) { B = 2; len[0] = 65; len[1] = (int)(n > 17 ? n : 17); }
    else if (lcase == 2) {                                            /* three lengths, one of them 1000 */
        Rng r;
        rng_seed(&r, seed);
        B = 3; len[0] = 1000;
        for (int b = 1; b < 3; b++) len[b] = (int)(n + (long)(rng_uniform(&r) * (1000 - n)));
    } else if (lcase == 4) {                  /* one long cache: 79 tiles, more splits than a merge's round (32) */
        B = 1; len[0] = 5000;
    } else {                                  /* a serving batch: B x heads blocks fill the GPU without a split */
        Rng r;
        rng_seed(&r, seed);
        B = DEC_CHECK_BATCH;
        for (long b = 0; b < B; b++) len[b] = (int)(n + (long)(rng_uniform(&r) * (300 - n)));
    }
    DProb p;
    dprob_make(&p, B, Hq, Hkv, D, n, len, dt, pages[lcase], seed, 1, NULL, 0);
    double naive_err;
    double *ref = reference(&p, &naive_err);
    const double tol = dt == DT_FP32 ? tol_fp32(naive_err) : tol_16bit(naive_err);
    float *out = xmalloc(p.nq * 4, "O"), *again = xmalloc(p.nq * 4, "O again"), *contig = NULL, *merged = NULL;
    int nk;
    const DecodeKernel *const *ks = decode_kernels(&nk);
    char name[192], eb[128], lens[48];
    if (B == 1) snprintf(lens, sizeof lens, "L=%d", len[0]);
    else if (B == 2) snprintf(lens, sizeof lens, "L=%d,%d", len[0], len[1]);
    else if (B == 3) snprintf(lens, sizeof lens, "L=%d,%d,%d", len[0], len[1], len[2]);
    else snprintf(lens, sizeof lens, "B=%ld L=%d,%d,...", B, len[0], len[1]);
    for (int x = 0; x < nk; x++) {
        const DecodeKernel *k = ks[x];
        if ((only && k->id != only) || !kernel_takes(k, dt, D)) continue;
        void *ws = ws_alloc(k, &p);
        snprintf(name, sizeof name, "decode%d %s D=%ld Hq=%ld Hkv=%ld n=%ld %s%s", k->id, dtype_name(dt), D, Hq, Hkv, n,
                 lens, k->paged ? (pages[lcase] == 16 ? " page=16" : pages[lcase] == 64 ? " page=64" : " page=256") : "");
        if (dec_run(k, &p, ws, out) != 0) { report_not_run(name, ""); dfree(ws); continue; }
        Err e = compare(out, ref, p.nq, tol, dt == DT_FP32 ? 1e-5 : 0);
        report(e.n_bad == 0 && e.max_abs <= tol, &e, name, "%s; naive %s %.2e, tol %.2e", fmt_err(&e, eb, sizeof eb),
               dtype_name(dt), naive_err, tol);
        dec_run(k, &p, ws, again);                   /* a race shows as a difference (an unwritten element: compare's NaN) */
        snprintf(name, sizeof name, "decode%d %s D=%ld Hq=%ld Hkv=%ld n=%ld %s rerun", k->id, dtype_name(dt), D, Hq, Hkv,
                 n, lens);
        report(!memcmp(out, again, p.nq * 4), NULL, name, "two runs bit-identical");
        /* a rung that changes only when or how the work runs: its O bit for bit the rung's below */
        const DecodeKernel *kb = decode_kernel(k->extends);
        const char *same = k->same_sums;
        if (same && kb && kernel_takes(kb, dt, D)) {
            if (!merged) merged = xmalloc(p.nq * 4, "the kernel before's O");
            void *wsb = ws_alloc(kb, &p);
            const int ran = dec_run(kb, &p, wsb, merged) == 0;
            dfree(wsb);
            snprintf(name, sizeof name, "decode%d vs decode%d %s D=%ld Hq=%ld Hkv=%ld n=%ld %s", k->id, kb->id, dtype_name(dt),
                     D, Hq, Hkv, n, lens);
            /* the first run's O (`out`: its workspace zeroed, so a merge that did not wait would read zeros) */
            report(ran && !memcmp(out, merged, p.nq * 4), NULL, name, "%s, the same splits: bit-identical", same);
        }
        const DecodeKernel *k4 = k->paged ? contiguous_base(k) : NULL;
        if (k4 && kernel_takes(k4, dt, D)) { /* the same keys through the table, the same splits: the same output */
            if (!contig) contig = xmalloc(p.nq * 4, "the contiguous kernel's O");
            p.a.splits = 3;                          /* the two choose their splits apart (their stages differ) */
            void *ws4 = ws_alloc(k4, &p), *ws5 = ws_alloc(k, &p);
            const int ran = dec_run(k4, &p, ws4, contig) == 0 && dec_run(k, &p, ws5, out) == 0;
            p.a.splits = 0;
            dfree(ws4); dfree(ws5);
            snprintf(name, sizeof name, "decode%d paged vs decode%d contiguous %s D=%ld Hq=%ld Hkv=%ld n=%ld %s page=%ld", k->id,
                     k4->id, dtype_name(dt), D, Hq, Hkv, n, lens, pages[lcase]);
            report(ran && !memcmp(out, contig, p.nq * 4), NULL, name, "pages shuffled%s, both on 3 splits: bit-identical to "
                   "the contiguous cache", B >= 2 ? ", sequences 0 and 1 sharing their first pages" : "");
        }
        dfree(ws);
    }
    tfree(out); tfree(again); tfree(contig); tfree(merged); tfree(ref);
    dprob_free(&p);
}

void decode_run_checks(long only)
{
    static const long heads[3][2] = {{4, 4}, {8, 2}, {8, 1}}, ns[3] = {1, 3, 16};
    /* and grouped shapes with g n = 8 x 5 = 40 query rows per KV head (three warps' row blocks, the fourth idle)
     * and 16 x 5 = 80 (a second row chunk, part full) */
    static const long extra[2][3] = {{8, 1, 5}, {16, 1, 5}};
    int nk, any = 0;
    const DecodeKernel *const *ks = decode_kernels(&nk);
    for (int x = 0; x < nk; x++) any |= !only || ks[x]->id == only;
    if (!any) { report_skip("decode", "no decode kernel %ld", only); return; }
    report_unavailable(FAM_DECODE, only); /* a kernel this GPU (or this build) cannot run: one SKIP line with the reason */
    gpu_refusals_quiet(1); /* a refused launch is a SKIP line with the refusal's words */
    /* Not the runner's check_grid: decode's grid is over cache lengths, heads and new rows, not N. */
    for (int dt = 0; dt < 3; dt++) {
        if (report_dtype_unavailable(dt, "decode: ")) continue;
        static const long D32[] = {16, 32, 64, 128}, D16[] = {64, 128};
        const long *Ds = dt == DT_FP32 ? D32 : D16;
        const int nd = dt == DT_FP32 ? 4 : 2;
        for (int e = 0; e < 2 && dt != DT_FP32; e++)
            for (int lc = 1; lc < 3; lc++)
                check_problem(only, dt, 128, extra[e][0], extra[e][1], extra[e][2], lc, 9000 + (uint64_t)(dt * 2 + e) * 3 + lc);
        /* one long cache at B = 1 (L = 5000): 79 splits at 8/1 heads, 40 at 4/4 on the H200, more than decode kernel
         * 11's merge reads in one round (32), and at D = 64 more than its threads (64) */
        for (int di = 0; di < 2 && dt != DT_FP32; di++)
            for (int e = 0; e < 2; e++)
                check_problem(only, dt, di ? 64 : 128, e ? 4 : 8, e ? 4 : 1, e ? 3 : 1, 4, 9200 + (uint64_t)((dt * 2 + di) * 2 + e));
        /* a serving batch, B = 128 x 4 KV heads = 512 blocks before any split, at least 3 an SM on 170 SMs or fewer:
         * at D = 128 where decode kernel 6 takes its two stages (the shapes above leave the GPU to the split) */
        for (int di = 0; di < nd && dt != DT_FP32; di++)
            check_problem(only, dt, Ds[di], 8, 4, 1, 3, 9100 + (uint64_t)(dt * 2 + di));
        for (int di = 0; di < nd; di++)
            for (int h = 0; h < 3; h++)
                for (int ni = 0; ni < 3; ni++)
                    for (int lc = 0; lc < 3; lc++)
                        check_problem(only, dt, Ds[di], heads[h][0], heads[h][1], ns[ni], lc,
                                      7000 + (uint64_t)(((dt * 3 + di) * 3 + h) * 3 + ni) * 3 + lc);
    }
    /* the launcher's guard: a block table naming a page outside the pool is refused, not read */
    int len[2] = {300, 200};
    int table[2 * 5];
    const long pool = make_tables(table, len, 2, 64, 5, 1, 1);
    const char *fine = table_problem(table, len, 2, 64, 5, pool);
    table[7] = (int)pool;                                            /* sequence 1's page 2: one past the pool */
    const char *why = table_problem(table, len, 2, 64, 5, pool);
    report(!fine && why, NULL, "decode/block-table-guard", "a table of the pool's own pages accepted (%s); one page past "
           "the pool refused: %s", fine ? fine : "yes", why ? why : "NOT REFUSED");
}

// --- timing ------------------------------------------------------------------------------------------

/* A timed call: kernel k launched `reps` times back to back, on problems p[0], p[1], ... in turn (copies of
 * one shape, so that a cache smaller than L2 is not read from L2 the next time: 50 MB of L2 on the H100). */
typedef struct { const DecodeKernel *k; DProb *p; int copies, reps; void *ws; } TCtx;
static void tfn_on(void *c, void *stream)
{
    TCtx *t = c;
    for (int r = 0; r < t->reps; r++) t->k->launch(&t->p[r % t->copies].a, t->ws, stream);
}
static void tfn(void *c) { tfn_on(c, NULL); }

/* Kernels ks[0..n) on the copies p[0..copies), timed against each other (interleaved, median of repeat), each
 * sample `reps` launches: us[] per launch. graph: each sample one replay of the reps launches captured in a CUDA
 * graph (PyTorch's measure in plots/sdpa_decode.py: 20 calls a graph): neither the host's work per launch nor the
 * stream's gap between two kernels, which the graph shortens, is timed; else the launches as they are, gaps and all
 * (1.6-3.1 us a decode step more on the H200, the record). */
static void time_kernels(const DecodeKernel *const *ks, int n, DProb *p, int copies, int reps, int repeat, int graph,
                         double *us)
{
    TCtx c[MAX_KERNELS];
    GpuGraph *g[MAX_KERNELS] = {0};
    void (*fns[MAX_KERNELS])(void *) = {0};
    void *ctx[MAX_KERNELS] = {0};
    for (int x = 0; x < n; x++) {
        c[x] = (TCtx){ks[x], p, copies, reps, ws_alloc(ks[x], p)};
        if (graph) { g[x] = gpu_graph_capture(tfn_on, &c[x]); fns[x] = gpu_graph_replay; ctx[x] = g[x]; }
        else { fns[x] = tfn; ctx[x] = &c[x]; }
    }
    double ms[MAX_KERNELS];
    gpu_time_interleaved_ms(fns, ctx, n, 2, repeat, ms);
    for (int x = 0; x < n; x++) { us[x] = ms[x] * 1e3 / reps; gpu_graph_free(g[x]); dfree(c[x].ws); }
}

/* Decode's CSV: its shapes are a cache's (Hq over Hkv heads, L keys, n new rows, pages), its measure us and GB/s of
 * cache read, so its columns are its own. A row per kernel timed (dec_csv_row), and the device's read bandwidth
 * (csv_bandwidth: the bytes read, 2 GB, under cache_bytes; dtype "-" in the default run, whose row is no dtype's). */
#define DECODE_CSV_HEADER "mode,kernel,name,dtype,B,Hq,Hkv,L,D,n,page,us,gbs,cache_bytes"
static void csv_bandwidth(FILE *csv, const char *dtype, double gbs)
{
    if (csv) fprintf(csv, "bandwidth,0,read bandwidth,%s,0,0,0,0,0,0,0,0,%.1f,2147483648\n", dtype, gbs);
}

static void dec_csv_row(FILE *csv, const char *mode, const DecodeKernel *k, const DProb *p, double us)
{
    if (!csv) return;
    fprintf(csv, "%s,%d,%s,%s,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%.3f,%.1f,%.0f\n", mode, k->id, k->name, dtype_name(p->dtype), p->B,
            p->Hq, p->Hkv, p->max_len, p->D, p->n, p->page, us, cache_bytes(p) / us / 1e3, cache_bytes(p));
}

/* The lengths of the default run and the benchmark's rows: all L, or --lens, or --spread. */
static int *lengths(const Opts *o, const DecodeOpts *d, long *B)
{
    if (d->lens) return parse_lens(d->lens, d->n, B);
    *B = o->B;
    int *len = xmalloc((size_t)o->B * sizeof(int), "lengths");
    Rng r;
    rng_seed(&r, o->seed ^ 0x1e45);
    for (long b = 0; b < o->B; b++) len[b] = d->spread ? (int)(d->n + (long)(rng_uniform(&r) * (double)(o->N - d->n + 1))) : (int)o->N;
    return len;
}

// --- the default run -----------------------------------------------------------------------------------

static int run_default(const Opts *o, const DecodeOpts *d, FILE *csv)
{
    long B;
    int *len = lengths(o, d, &B);
    const long Hkv = d->given_hkv ? d->Hkv : o->H;
    DProb p;
    dprob_make(&p, B, o->H, Hkv, o->D, d->n, len, o->dtype, d->page, o->seed, 1, d->qf ? d : NULL, o->N);
    char b1[32], eb[128], desc[256];
    printf("step05 --decode: %ld new row%s per sequence against a KV cache, %s, B=%ld Hq=%ld Hkv=%ld D=%ld, cache lengths ",
           d->n, d->n == 1 ? "" : "s", dtype_name(o->dtype), B, o->H, Hkv, o->D);
    if (d->lens || d->spread) for (long b = 0; b < B && b < 8; b++) printf("%s%d", b ? "," : "", len[b]);
    else printf("%ld", o->N);
    printf("%s\ndevice: %s\n", B > 8 && (d->lens || d->spread) ? ",..." : "", gpu_describe());
    if (d->qf)
        printf("inputs: your tensors, rounded to %s: the new rows Q from %s [%ld, %ld, %ld, %ld], the cache K from %s and V "
               "from %s [%ld, %ld, %ld, %ld]; the new rows are the last %ld keys of each sequence's cache\n", dtype_name(o->dtype),
               d->qf, B, o->H, d->n, o->D, d->kf, d->vf, B, Hkv, o->N, o->D, d->n);
    printf("the cache: %s of K and V (what one decode step must read), paged: %ld pages of %ld keys%s\n",
           fmt_bytes(cache_bytes(&p), b1, sizeof b1), p.pages, d->page, d->qf ? " (your cache, paged here: pages "
           "shuffled, a block table)" : "");
    double naive_err;
    double *ref = reference(&p, &naive_err);
    const double tol = o->dtype == DT_FP32 ? tol_fp32(naive_err) : tol_16bit(naive_err);
    printf("reference: float64, every new row; naive attention in %s is off by %.2e: the tolerance is %.2e\n\nchecks:\n",
           dtype_name(o->dtype), naive_err, tol);
    int nk, ok = 1;
    const DecodeKernel *const *ks = decode_kernels(&nk);
    const DecodeKernel *run[MAX_KERNELS] = {0};
    int nr = 0;
    float *out = xmalloc(p.nq * 4, "O"), *last = o->outfile ? xmalloc(p.nq * 4, "O to write") : NULL;
    for (int x = 0; x < nk; x++) {
        const DecodeKernel *k = ks[x];
        if (opts_kernel(o, k->id) && DECODE_UNAVAILABLE(k)) {
            printf("  decode kernel %d %-15s SKIP: %s\n", k->id, k->name, DECODE_UNAVAILABLE(k));
            continue;
        }
        if (!opts_kernel(o, k->id) || !kernel_takes(k, o->dtype, o->D)) continue;
        void *ws = ws_alloc(k, &p);
        if (dec_run(k, &p, ws, out) != 0) { /* refused by this GPU: not a failure, never timed; failed: a failure */
            if (gpu_refused()) printf("  decode kernel %d %-15s SKIP: %s\n", k->id, k->name, gpu_refused());
            else printf("  decode kernel %d %-15s FAILED: the launch failed, and this GPU refused nothing\n", k->id, k->name);
            ok &= gpu_refused() != NULL;
            dfree(ws);
            continue;
        }
        dfree(ws);
        Err e = compare(out, ref, p.nq, tol, o->dtype == DT_FP32 ? 1e-5 : 0);
        const int good = e.n_bad == 0 && e.max_abs <= tol;
        printf("  decode kernel %d %-15s %s  %s\n", k->id, k->name, fmt_err(&e, eb, sizeof eb), good ? "ok" : "WRONG");
        ok &= good;
        run[nr++] = k;
        if (last) memcpy(last, out, p.nq * 4);
    }
    if (last && !nr) { /* every kernel refused: nothing to write, and --out was asked for */
        fprintf(stderr, "%s: --out %s not written: no decode kernel ran on this GPU at this shape\n", g_prog, o->outfile);
        ok = 0;
    }
    if (last && nr) { /* O of the last kernel that ran, in the dtype's file type (bf16 as float32, as NumPy has no bf16) */
        const long shp[4] = {B, o->H, d->n, o->D};
        if (npy_save(o->outfile, last, shp, 4, o->dtype == DT_FP16 ? DT_FP16 : DT_FP32) != 0) {
            fprintf(stderr, "%s: cannot write %s\n", g_prog, o->outfile);
            ok = 0;
        } else {
            printf("wrote O of decode kernel %d to %s, [%ld, %ld, %ld, %ld]\n", run[nr - 1]->id, o->outfile, B, o->H, d->n, o->D);
        }
    }
    const double bw = dec_read_bandwidth_gbs((size_t)2 << 30, (int)o->repeat);
    printf("\nthe device's read bandwidth, measured: %.0f GB/s (2 GB read once, 16-byte loads, median of %ld)\n", bw, o->repeat);
    csv_bandwidth(csv, "-", bw);
    double us[MAX_KERNELS];
    time_kernels(run, nr, &p, 1, 1, (int)o->repeat, 0, us);
    printf("times of one decode step (CUDA events around one launch, its launch latency included; interleaved, median of "
           "%ld); GB/s = the cache's bytes / time:\n", o->repeat);
    int best = -1;
    for (int x = 0; x < nr; x++) {
        run[x]->describe(&p.a, desc, sizeof desc);
        printf("  decode kernel %d %-15s %9.1f us %8.0f GB/s  %5.1f%% of the read bandwidth\n            %s\n", run[x]->id,
               run[x]->name, us[x], cache_bytes(&p) / us[x] / 1e3, 100.0 * cache_bytes(&p) / us[x] / 1e3 / bw, desc);
        dec_csv_row(csv, "default", run[x], &p, us[x]);
        if (best < 0 || us[x] < us[best]) best = x;
    }
    int k2 = -1;                                 /* the forward's kernel as it is: the rung above the transcription */
    for (int x = 0; x < nr; x++)
        if (decode_kernel(run[x]->extends) && decode_kernel(run[x]->extends)->extends == 0) k2 = x;
    if (best >= 0 && k2 >= 0 && ok)
        printf("\nanswer: the fastest here, decode kernel %d (%s), reads the cache at %.0f GB/s, %.0f%% of what the device "
               "reads; the forward kernel as is (kernel %d, %ld blocks) takes %.2fx its time\n", run[best]->id, run[best]->name,
               cache_bytes(&p) / us[best] / 1e3, 100.0 * cache_bytes(&p) / us[best] / 1e3 / bw, run[k2]->id, B * o->H,
               us[k2] / us[best]);
    tfree(out); tfree(last); tfree(ref); tfree(len);
    dprob_free(&p);
    return ok ? EXIT_OK : EXIT_FAIL;
}

// --- --bench ---------------------------------------------------------------------------------------

/* One row of a table: the kernels of ks that take the shape, timed on it (the transcription, .extends 0, only while
 * the cache is at most 64 MB: it reads the cache once per query row, one thread each), printed as us and GB/s. */
static void bench_row(const Opts *o, FILE *csv, const char *mode, const char *label, long B, long Hq, long Hkv, long L,
                      long n, long page, const int *only_ids, int n_only, double bw)
{
    int nk;
    const DecodeKernel *const *ks = decode_kernels(&nk);
    int *len = xmalloc((size_t)B * sizeof(int), "lengths");
    for (long b = 0; b < B; b++) len[b] = (int)L;
    const double bytes = 2.0 * B * Hkv * L * 128 * dtype_size(o->dtype);
    const int copies = bytes >= 256e6 ? 1 : (int)ceil(256e6 / bytes); /* at least 256 MB between two reads of one copy */
    DProb *ps = xmalloc((size_t)copies * sizeof(DProb), "problem copies"), p;
    for (int c = 0; c < copies; c++)
        dprob_make(&ps[c], B, Hq, Hkv, 128, n, len, o->dtype, page, o->seed + (uint64_t)L + 101 * (uint64_t)c, 0, NULL, 0);
    p = ps[0];
    const DecodeKernel *run[MAX_KERNELS] = {0};
    int nr = 0;
    for (int x = 0; x < nk; x++) {
        const DecodeKernel *k = ks[x];
        int want = !n_only;
        for (int y = 0; y < n_only; y++) want |= only_ids[y] == k->id;
        if (want && opts_kernel(o, k->id) && DECODE_UNAVAILABLE(k)) {
            static int said_why[MAX_KERNELS];          /* by the kernel's place in the registry: said once a run */
            if (!said_why[x]++) printf("  (decode kernel %d SKIP: %s; not timed)\n", k->id, DECODE_UNAVAILABLE(k));
            continue;
        }
        if (!want || !opts_kernel(o, k->id) || !kernel_takes(k, o->dtype, 128)) continue;
        if (k->extends == 0 && cache_bytes(&p) > 64e6) continue;
        void *ws = ws_alloc(k, &p); /* one launch first: a launch this GPU refuses is never timed ("-" in the table) */
        const int was_quiet = gpu_refusals_quiet(1);
        gpu_refusal_clear();
        const int refused = k->launch(&p.a, ws, NULL) != 0;
        gpu_refusals_quiet(was_quiet);
        gpu_sync_check();
        dfree(ws);
        if (refused && !gpu_refused()) { /* not a refusal: a failure, never a SKIP */
            fprintf(stderr, "%s: decode kernel %d failed to launch (this GPU refused nothing)\n", g_prog, k->id);
            exit(EXIT_FAIL);
        }
        if (refused) {
            static int said[MAX_KERNELS];
            if (!said[x]++) printf("  (decode kernel %d SKIP: %s; not timed)\n", k->id, gpu_last_refusal());
            continue;
        }
        run[nr++] = k;
    }
    double us[MAX_KERNELS];
    time_kernels(run, nr, ps, copies, 20, (int)o->repeat, 1, us);
    char b1[32];
    printf("  %-26s %9s", label, fmt_bytes(cache_bytes(&p), b1, sizeof b1));
    for (int x = 0; x < nk; x++) {
        int at = -1;
        for (int y = 0; y < nr; y++) if (run[y] == ks[x]) at = y;
        int want = !n_only;
        for (int y = 0; y < n_only; y++) want |= only_ids[y] == ks[x]->id;
        if (!want || !opts_kernel(o, ks[x]->id)) continue;
        if (at < 0) printf(" %17s", "-");
        else printf(" %8.1f %5.0f %2.0f%%", us[at], cache_bytes(&p) / us[at] / 1e3, 100.0 * cache_bytes(&p) / us[at] / 1e3 / bw);
        if (at >= 0) dec_csv_row(csv, mode, ks[x], &p, us[at]);
    }
    printf("\n");
    fflush(stdout);
    tfree(len);
    for (int c = 0; c < copies; c++) dprob_free(&ps[c]);
    tfree(ps);
}

static void bench_header(const Opts *o, const char *title, const int *only_ids, int n_only)
{
    int nk;
    const DecodeKernel *const *ks = decode_kernels(&nk);
    printf("\n%s\n  %-26s %9s", title, "shape", "cache");
    for (int x = 0; x < nk; x++) {
        int want = !n_only;
        for (int y = 0; y < n_only; y++) want |= only_ids[y] == ks[x]->id;
        if (want && opts_kernel(o, ks[x]->id)) printf("  kernel %d: us GB/s", ks[x]->id);
    }
    printf("\n");
}

static int run_bench(const Opts *o, FILE *csv)
{
    printf("step05 --decode --bench: %s, D = 128, one new row per sequence unless said; us per decode step, GB/s of K and "
           "V read (the cache's bytes / time), %% of the read bandwidth\n(CUDA events around one replay of a CUDA graph of 20 "
           "launches, as plots/sdpa_decode.py times PyTorch, on copies of the problem when its cache is under 256 MB so "
           "that no launch reads the last one's from L2; the kernels of a row interleaved sample by sample, median of "
           "%ld)\ndevice: %s\n", dtype_name(o->dtype), o->repeat, gpu_describe());
    const double bw = dec_read_bandwidth_gbs((size_t)2 << 30, (int)o->repeat);
    printf("the device's read bandwidth, measured: %.0f GB/s (2 GB read once, 16-byte loads)\n", bw);
    csv_bandwidth(csv, dtype_name(o->dtype), bw);
    bench_header(o, "the shapes FlashAttention-2 and cuDNN were timed at (plots/sdpa_decode.py):", NULL, 0);
    static const struct { long B, Hq, Hkv, L; const char *label; } shapes[] = {
        {1, 32, 32, 4096, "B=1 32 heads L=4096"}, {1, 32, 32, 32768, "B=1 32 heads L=32768"},
        {1, 32, 32, 131072, "B=1 32 heads L=131072"}, {1, 32, 8, 32768, "B=1 32/8 heads L=32768"},
        {8, 32, 8, 8192, "B=8 32/8 heads L=8192"}, {64, 32, 32, 2048, "B=64 32 heads L=2048"}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        bench_row(o, csv, "anchor", shapes[s].label, shapes[s].B, shapes[s].Hq, shapes[s].Hkv, shapes[s].L, 1, 64, NULL, 0, bw);
    bench_header(o, "over the cache length (B=1, 32 query heads, 32 and 8 KV heads; the picture):", NULL, 0);
    for (int g = 0; g < 2; g++)
        for (long L = 1024; L <= 131072; L *= 2) {
            char label[64];
            snprintf(label, sizeof label, "B=1 32/%d heads L=%ld", g ? 8 : 32, L);
            bench_row(o, csv, g ? "sweep-gqa" : "sweep-mha", label, 1, 32, g ? 8 : 32, L, 1, 64, NULL, 0, bw);
        }
    /* the page size: the first paged kernel against the contiguous one it extends; n: the contiguous cache's kernels
     * above the transcription */
    int nk, k45[2] = {0, 0}, k234[MAX_KERNELS], n234 = 0;
    const DecodeKernel *const *ks = decode_kernels(&nk);
    for (int x = 0; x < nk; x++) {
        if (ks[x]->paged && !k45[1] && contiguous_base(ks[x])) k45[0] = contiguous_base(ks[x])->id, k45[1] = ks[x]->id;
        if (!ks[x]->paged && ks[x]->extends != 0) k234[n234++] = ks[x]->id;
    }
    char title[160];
    snprintf(title, sizeof title, "the page size (kernel %d) against the contiguous cache (kernel %d), B=8 32/8 heads L=8192:",
             k45[1], k45[0]);
    bench_header(o, title, k45, 2);
    for (long P = 16; P <= 256; P *= 2) {
        char label[64];
        snprintf(label, sizeof label, "page = %ld keys", P);
        bench_row(o, csv, "page", label, 8, 32, 8, 8192, 1, P, k45, 2, bw);
    }
    bench_header(o, "new rows per sequence (speculative decoding's verify step), B=8 32/8 heads L=8192:", k234, n234);
    for (long n = 1; n <= 16; n *= 2) {
        char label[64];
        snprintf(label, sizeof label, "n = %ld", n);
        bench_row(o, csv, "verify", label, 8, 32, 8, 8192, n, 64, k234, n234, bw);
    }
    return EXIT_OK;
}

// --- compute-sanitizer's shapes ---------------------------------------------------------------------

static int run_sanitize(const Opts *o)
{
    int nk, ran = 0;
    const DecodeKernel *const *ks = decode_kernels(&nk);
    static const int len3[3] = {257, 17, 65};
    for (int dt = 0; dt < 3; dt++)
        for (int ni = 0; ni < 2; ni++) {
            const long n = ni ? 5 : 1, D = dt == DT_FP32 ? 16 : 64;
            DProb p;
            dprob_make(&p, 3, 4, 2, D, n, len3, dt, ni ? 16 : 64, 11, 1, NULL, 0);
            float *out = xmalloc(p.nq * 4, "O");
            for (int x = 0; x < nk; x++)
                if (opts_kernel(o, ks[x]->id) && kernel_takes(ks[x], dt, D)) {
                    void *ws = ws_alloc(ks[x], &p);
                    if (dec_run(ks[x], &p, ws, out) != 0) return EXIT_FAIL;
                    dfree(ws);
                    printf("ran decode kernel %d %s D=%ld Hq=4 Hkv=2 n=%ld L=257,17,65%s\n", ks[x]->id, dtype_name(dt), D, n,
                           ks[x]->paged ? (ni ? " page=16" : " page=64") : "");
                    ran++;
                }
            tfree(out);
            dprob_free(&p);
        }
    /* a serving batch at D = 128 (fp16): 128 sequences x 4 KV heads, where decode kernel 6 takes two stages; every
     * kernel but the transcription */
    int lenb[DEC_CHECK_BATCH];
    for (int b = 0; b < DEC_CHECK_BATCH; b++) lenb[b] = 1 + (37 * b) % 130;
    DProb p;
    dprob_make(&p, DEC_CHECK_BATCH, 8, 4, 128, 1, lenb, DT_FP16, 64, 12, 1, NULL, 0);
    float *out = xmalloc(p.nq * 4, "O");
    for (int x = 0; x < nk; x++)
        if (ks[x]->extends != 0 && opts_kernel(o, ks[x]->id) && kernel_takes(ks[x], DT_FP16, 128)) {
            void *ws = ws_alloc(ks[x], &p);
            const int rc = dec_run(ks[x], &p, ws, out);
            dfree(ws);
            if (rc != 0 && !gpu_refused()) return EXIT_FAIL;
            if (rc != 0) continue;                   /* D = 128 refused by a smaller GPU's shared memory (--gpu-as t4) */
            printf("ran decode kernel %d fp16 D=128 Hq=8 Hkv=4 n=1 B=%d L=1..130\n", ks[x]->id, DEC_CHECK_BATCH);
            ran++;
        }
    tfree(out);
    dprob_free(&p);
    /* one long cache at D = 64 (fp16), the split kernels (those with a workspace: the splits' partial states): 79 splits
     * of one tile on the H200, so decode kernel 11's merge reads in three rounds, and its m_s and l_s with more splits
     * than threads */
    const int len1[1] = {5000};
    dprob_make(&p, 1, 8, 1, 64, 1, len1, DT_FP16, 256, 13, 1, NULL, 0);
    out = xmalloc(p.nq * 4, "O");
    for (int x = 0; x < nk; x++)
        if (ks[x]->workspace && opts_kernel(o, ks[x]->id) && kernel_takes(ks[x], DT_FP16, 64)) {
            void *ws = ws_alloc(ks[x], &p);
            if (dec_run(ks[x], &p, ws, out) != 0) return EXIT_FAIL;
            dfree(ws);
            printf("ran decode kernel %d fp16 D=64 Hq=8 Hkv=1 n=1 L=5000%s\n", ks[x]->id, ks[x]->paged ? " page=256" : "");
            ran++;
        }
    tfree(out);
    dprob_free(&p);
    return sanitize_end(ran, "--sanitize-shapes --decode: no decode kernel of --kernel %ld-%ld runs", o->kernel,
                        o->kernel_last);
}

int decode_main(const Opts *o, const DecodeOpts *d, int bench, int sanitize)
{
    int nk;
    const DecodeKernel *const *ks = decode_kernels(&nk);
    kernel_option_exists(o, FAM_DECODE);
    if (o->check) { decode_run_checks(o->kernel); return report_finish(); }
    if (sanitize) return run_sanitize(o);
    if (gpu_dtype_unavailable(o->dtype)) usage_error("option --dtype: %s", gpu_dtype_unavailable(o->dtype));
    int any = 0;      /* the default run at --dim, the benchmark at D = 128; a kernel this GPU runs (it is here, after
                       * gpu_require: not the runner's kernel_option_check, which runs before and without a GPU) */
    for (int x = 0; x < nk; x++) any |= opts_kernel(o, ks[x]->id) && kernel_takes(ks[x], o->dtype, bench ? 128 : o->D);
    if (!any)
        usage_error("option --dtype/--dim/--kernel: no decode kernel runs %s at D=%ld%s", dtype_name(o->dtype),
                    bench ? 128 : o->D, o->kernel ? " with that --kernel" : "");
    FILE *csv = o->csv ? csv_open(o->csv, DECODE_CSV_HEADER) : NULL;
    const int rc = bench ? run_bench(o, csv) : run_default(o, d, csv);
    if (csv) fclose(csv);
    return rc;
}

#else

int decode_main(const Opts *o, const DecodeOpts *d, int bench, int sanitize)
{
    (void)o, (void)d, (void)bench, (void)sanitize;
    return EXIT_SKIP;
}

#endif /* HAVE_CUDA */
