/*
 * generate.c: ./step06 --train --save FILE, then ./step06 --generate --load FILE: the GPT that step 06
 * trains writes text, one symbol at a time, with a KV cache.
 *
 * Decode is causal attention's last row. To sample the next token the model needs the logits of the
 * newest position only: one query row, attending to every key before it and its own. Recomputing the
 * whole prefix through every layer for each new token costs T rows of everything; instead each layer
 * keeps the k and v rows it has made (the KV cache: 2 L C floats per token) and a new token computes its
 * one row of q, k, v, appends k and v, and attends with that one row against the cache
 * (flash_decode_cpu, step 04's tile loop over the cached keys; split into chunks and merged on a GPU).
 * Everything else in a layer works row by row already. The book's chapter calls the inference-time
 * variant "a small specialisation of the same kernel": here it is, with the check that proves it, the
 * logits of every position with the cache against a full forward over the whole prefix.
 *
 * The context window: the model has a position embedding for T positions only. When the cache is full,
 * the last T/2 tokens are kept, their cache rebuilt at positions 0 .. T/2 - 1 (in chunks of up to 16 new
 * rows, causal among themselves: the prefill), and generation goes on.
 *
 * The model file (little-endian, written by --save, read by --load):
 *
 *   bytes  field
 *   8      magic "FLASHGPT"
 *   4      u32 version, 1
 *   4 x 5  u32 V (symbols), T (context), L (layers), H (heads), C (channels; D = C / H)
 *   8      u64 P, the parameter count (must be what V, T, L, C give)
 *   4 V    u32 the symbols' Unicode code points, in id order
 *   4 P    f32 the parameters in gpt.h's table order: wte [V, C], wpe [T, C], ln1w [L, C], ln1b [L, C],
 *          qkvw [L, 3C, C], qkvb [L, 3C], attprojw [L, C, C], attprojb [L, C], ln2w, ln2b [L, C],
 *          fcw [L, 4C, C], fcb [L, 4C], fcprojw [L, C, 4C], fcprojb [L, C], lnfw [C], lnfb [C]
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include "causal.h"
#include "data.h"
#include "generate.h"
#include "gpt.h"
#include "gpt_gpu.h"
#include "gpu.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// --- the model file --------------------------------------------------------------------------

enum { HEADER_BYTES = 8 + 4 + 4 * 5 + 8, FILE_VERSION = 1 };
static const char MAGIC[8] = {'F', 'L', 'A', 'S', 'H', 'G', 'P', 'T'};

static void put_u32(unsigned char *b, uint32_t x) { for (int i = 0; i < 4; i++) b[i] = (unsigned char)(x >> 8 * i); }
static uint32_t get_u32(const unsigned char *b) { uint32_t x = 0; for (int i = 3; i >= 0; i--) x = x << 8 | b[i]; return x; }

static size_t param_count(const GPTConfig *c)
{
    size_t sz[NUM_PARAMS];
    gpt_param_sizes(c, sz);
    return gpt_sum_sizes(sz, NUM_PARAMS);
}

FILE *model_create(const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f) usage_error("option --save: cannot write '%s': %s", path, strerror(errno));
    return f;
}

int model_write(FILE *f, const char *path, const GPTConfig *c, const uint32_t *symbol, const float *params)
{
    unsigned char h[HEADER_BYTES], b[4];
    const uint64_t P = param_count(c);
    memcpy(h, MAGIC, 8);
    put_u32(h + 8, FILE_VERSION);
    const uint32_t shape[5] = {(uint32_t)c->V, (uint32_t)c->T, (uint32_t)c->L, (uint32_t)c->H, (uint32_t)c->C};
    for (int i = 0; i < 5; i++) put_u32(h + 12 + 4 * i, shape[i]);
    put_u32(h + 32, (uint32_t)P);
    put_u32(h + 36, (uint32_t)(P >> 32));
    int ok = fwrite(h, 1, sizeof h, f) == sizeof h;
    for (int i = 0; i < c->V && ok; i++) { put_u32(b, symbol[i]); ok = fwrite(b, 1, 4, f) == 4; }
    for (uint64_t i = 0; i < P && ok; i++) {      /* byte by byte: little-endian on any machine */
        uint32_t x;
        memcpy(&x, &params[i], 4);
        put_u32(b, x);
        ok = fwrite(b, 1, 4, f) == 4;
    }
    ok &= fclose(f) == 0;
    if (!ok) fprintf(stderr, "%s: cannot write the model to '%s'\n", g_prog, path);
    return ok ? 0 : -1;
}

void model_read(const char *path, ModelFile *mf)
{
    struct stat st;
    memset(mf, 0, sizeof *mf);
    if (stat(path, &st) != 0) usage_error("option --load: cannot open '%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) usage_error("option --load: '%s' is not a regular file", path);
    const size_t size = (size_t)st.st_size;
    if (size < HEADER_BYTES)
        usage_error("option --load: '%s' is truncated: %zu bytes, a model file's header alone is %d", path, size, HEADER_BYTES);
    FILE *f = fopen(path, "rb");
    if (!f) usage_error("option --load: cannot open '%s': %s", path, strerror(errno));
    unsigned char h[HEADER_BYTES];
    if (fread(h, 1, sizeof h, f) != sizeof h) { fclose(f); usage_error("option --load: cannot read '%s'", path); }
    if (memcmp(h, MAGIC, 8) != 0) {
        fclose(f);
        usage_error("option --load: '%s' is not a step06 model file (it does not start with FLASHGPT)", path);
    }
    if (get_u32(h + 8) != FILE_VERSION) {
        fclose(f);
        usage_error("option --load: '%s' is a model file of version %u; this program reads version %d", path,
                    get_u32(h + 8), FILE_VERSION);
    }
    uint32_t sh[5];
    for (int i = 0; i < 5; i++) sh[i] = get_u32(h + 12 + 4 * i);
    const uint64_t P = (uint64_t)get_u32(h + 32) | (uint64_t)get_u32(h + 36) << 32;
    if (sh[0] < 1 || sh[0] > MAX_SYMBOLS || sh[1] < 1 || sh[1] > 65536 || sh[2] < 1 || sh[2] > 64 || sh[3] < 1 ||
        sh[4] < sh[3] || sh[4] > 4096 || sh[4] % sh[3]) {
        fclose(f);
        usage_error("option --load: '%s' names a model this program cannot build (V=%u T=%u L=%u H=%u C=%u)", path, sh[0],
                    sh[1], sh[2], sh[3], sh[4]);
    }
    const GPTConfig c = {(int)sh[0], (int)sh[1], (int)sh[2], (int)sh[3], (int)sh[4]};
    const uint64_t want = param_count(&c), bytes = HEADER_BYTES + 4ull * c.V + 4ull * want;
    if (P != want) {
        fclose(f);
        usage_error("option --load: '%s' does not agree with itself: its header counts %llu parameters, its shape "
                    "(V=%d T=%d L=%d C=%d) has %llu", path, (unsigned long long)P, c.V, c.T, c.L, c.C,
                    (unsigned long long)want);
    }
    if (size != bytes) {
        fclose(f);
        usage_error("option --load: '%s' is %s: %zu bytes, its header's shape needs %llu", path,
                    size < bytes ? "truncated" : "longer than its header says", size, (unsigned long long)bytes);
    }
    unsigned char *raw = xmalloc(size - HEADER_BYTES, "model file");
    const int got = fread(raw, 1, size - HEADER_BYTES, f) == size - HEADER_BYTES;
    fclose(f);
    if (!got) { tfree(raw); usage_error("option --load: cannot read '%s'", path); }
    mf->cfg = c;
    for (int i = 0; i < c.V; i++) {
        const uint32_t cp = get_u32(raw + 4 * i);
        int dup = 0;
        for (int j = 0; j < i; j++) dup |= mf->symbol[j] == cp;
        if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || dup) {
            tfree(raw);
            usage_error("option --load: '%s': symbol %d is %s (U+%04X)", path, i, dup ? "a repeat" : "not a character", cp);
        }
        mf->symbol[i] = cp;
    }
    mf->params = xmalloc(want * sizeof(float), "model parameters");
    for (uint64_t i = 0; i < want; i++) {
        const uint32_t x = get_u32(raw + 4ull * c.V + 4 * i);
        memcpy(&mf->params[i], &x, 4);
        if (!f32_is_finite(mf->params[i])) {
            tfree(raw); tfree(mf->params);
            usage_error("option --load: '%s' holds a non-finite weight (parameter %llu): a diverged run?", path,
                        (unsigned long long)i);
        }
    }
    tfree(raw);
}

// --- a decoder: the model with its cache, CPU or GPU, behind three calls -----------------------

/* The generation below asks a decoder for three things: append n tokens to its cache and give their
 * logits, empty the cache, and (for the check) run the full forward over a whole prefix. gpt.c's model
 * and gpt_gpu.cu's both have all three. */
typedef struct {
    const char *name;
    void *ctx;
    int (*decode)(void *ctx, const int *tokens, int n, float *logits);     /* logits [n, V] */
    void (*reset)(void *ctx);
    int (*full)(void *ctx, const int *tokens, int T, float *logits);       /* logits [T, V] */
} Decoder;

typedef struct { GPT m; KVCache kv; } CpuModel;

static int cpu_decode(void *c, const int *tokens, int n, float *logits)
{
    CpuModel *cm = c;
    return gpt_decode(&cm->m, &cm->kv, tokens, n, logits);
}
static void cpu_reset(void *c) { ((CpuModel *)c)->kv.len = 0; }
static int cpu_full(void *c, const int *tokens, int T, float *logits)
{
    CpuModel *cm = c;
    if (gpt_forward(&cm->m, tokens, NULL, 1, T, NULL) < 0) return -1;
    memcpy(logits, cm->m.acts.logits, (size_t)T * cm->m.cfg.V * sizeof(float));
    return 0;
}

/* The CPU model of config c with params, the tiled attention of step 06's training (BR = BC = 16), a
 * cache whose keys are split in `split` chunks; 0, or -1 after one line (out of memory). */
static int cpu_model_open(CpuModel *cm, const GPTConfig *c, const float *params, long split)
{
    static const Attention tiled = ATTENTION_TILED("tiled", MASK_ABSOLUTE, 16, 16);
    if (gpt_build(&cm->m, c, 1, &tiled, 1.0f, 0) != 0) {
        mem_oom_line(gpt_bytes(c, 1, &tiled, NULL), "the model");
        return -1;
    }
    memcpy(cm->m.params_mem, params, cm->m.num_params * sizeof(float));
    if (kv_cache_init(&cm->kv, c, 16, split, 16) != 0) {
        mem_oom_line(2 * (size_t)c->L * c->T * c->C * sizeof(float), "the KV cache");
        gpt_free(&cm->m);
        return -1;
    }
    return 0;
}
static void cpu_model_close(CpuModel *cm) { kv_cache_free(&cm->kv); gpt_free(&cm->m); }

// --- the generation ---------------------------------------------------------------------------

/* The next token from logits [V]: at temperature 0 the most likely (the first of equals); else sampled
 * from softmax(logits / temperature) with one uniform draw of rng. */
static int sample(const float *logits, int V, double temperature, Rng *rng)
{
    int best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    if (temperature == 0) return best;
    double sum = 0, u = rng_uniform(rng);
    for (int i = 0; i < V; i++) sum += exp((logits[i] - logits[best]) / temperature);
    u *= sum;
    int last = best;                          /* the last symbol of weight > 0, should rounding leave u at the top */
    for (int i = 0; i < V; i++) {
        const double w = exp((logits[i] - logits[best]) / temperature);
        if (w > 0) last = i;
        u -= w;
        if (u < 0) return i;
    }
    return last;
}

typedef struct {
    double max_diff;       /* the largest |logit(cache) - logit(full forward)| over every checked position */
    long positions;        /* positions checked */
    long slides;           /* times the context window was full */
    double ms_cache, ms_full; /* time of the generated tokens' decode calls, and of their full forwards */
    long timed;            /* tokens timed */
} GenStats;

/* Generate `tokens` tokens after prompt[0 .. np) with decoder d into ids (room for np + tokens), sampling
 * with temperature and seed. T: the model's context, V its vocabulary. check: after every decode call, the
 * full forward over the window, compared row for row (and timed against the cached call). emit: called
 * with each generated id, for printing. 0, or -1 after one line. */
static int gen_run(const Decoder *d, int T, int V, const int *prompt, int np, long tokens, double temperature,
                   uint64_t seed, int check, int *ids, GenStats *st, void (*emit)(int id, void *ctx), void *ectx)
{
    memset(st, 0, sizeof *st);
    float *logits = xmalloc((size_t)16 * V * sizeof(float), "logits");
    float *full = check ? xmalloc((size_t)T * V * sizeof(float), "full-forward logits") : NULL;
    Rng rng;
    rng_seed(&rng, seed);
    memcpy(ids, prompt, (size_t)np * sizeof(int));
    long total = np, win0 = 0, len = 0;      /* the cache holds ids[win0 .. win0 + len) at positions 0 .. len - 1 */
    if (total > T) win0 = total - T;         /* a prompt longer than the context: its last T symbols */
    d->reset(d->ctx);
    int rc = 0;
    for (long gen = 0;; gen++) {
        /* Bring the cache up to ids[.. total): the prompt (the prefill) or the one token just sampled. */
        int slid = 0, last_n = 0;
        if (total - win0 > T) {              /* full: keep the last T/2 (one at T = 1), rebuild their cache from 0 */
            win0 = total - (T / 2 > 0 ? T / 2 : 1);
            len = 0;
            d->reset(d->ctx);
            st->slides++;
            slid = 1;
        }
        while (win0 + len < total) {
            const int n = (int)(total - win0 - len < 16 ? total - win0 - len : 16);
            const int timed = n == 1 && gen > 0 && !slid;   /* one generated token: the cache's own case */
            double t0 = now_sec();
            if (d->decode(d->ctx, ids + win0 + len, n, logits) != 0) { rc = -1; goto done; }
            const double t_cache = now_sec() - t0;
            len += n;
            last_n = n;
            if (timed) { st->ms_cache += 1e3 * t_cache; st->timed++; }
            if (!check) continue;
            t0 = now_sec();                  /* the same positions by recomputing the whole window */
            if (d->full(d->ctx, ids + win0, (int)len, full) != 0) { rc = -1; goto done; }
            if (timed) st->ms_full += 1e3 * (now_sec() - t0);
            for (int r = 0; r < n; r++)
                for (int i = 0; i < V; i++) {
                    const double e = fabs((double)logits[(size_t)r * V + i] - full[(size_t)(len - n + r) * V + i]);
                    if (!(e <= st->max_diff)) st->max_diff = isnan(e) ? INFINITY : e; /* NaN fails as infinite */
                }
            st->positions += n;
        }
        if (gen == tokens) break;
        const int id = sample(logits + (size_t)(last_n - 1) * V, V, temperature, &rng); /* the newest position's */
        ids[total++] = id;
        if (emit) emit(id, ectx);
    }
done:
    tfree(logits);
    tfree(full);
    return rc;
}

// --- ./step06 --generate ------------------------------------------------------------------------

void gen_opts_init(GenOpts *g)
{
    memset(g, 0, sizeof *g);
    g->tokens = 200;
    g->temperature = 1.0;
}

int gen_parse(GenOpts *g, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--generate")) { g->on = 1; return 1; }
    if (!strcmp(a, "--load")) {
        g->load = opt_value(argc, argv, i);
        if (!*g->load) usage_error("option --load: empty file name");
        return 1;
    }
    if (!strcmp(a, "--prompt")) { g->prompt = opt_value(argc, argv, i); return 1; }
    if (!strcmp(a, "--tokens")) { g->tokens = parse_long(a, opt_value(argc, argv, i), 1, 1000000); return 1; }
    if (!strcmp(a, "--temperature")) { g->temperature = parse_double(a, opt_value(argc, argv, i), 0.0, 100.0); return 1; }
    return 0;
}

void gen_usage(void)
{
    printf("generation (--generate, with a model that --train --save FILE wrote):\n"
           "  --save FILE          with --train: write the tiled run's trained weights to FILE (format: 06_causal/generate.c)\n"
           "  --generate           sample text from a saved model, one token at a time, with a KV cache; checks every\n"
           "                       position's logits against a full forward over the prefix and times both\n"
           "  --load FILE          the model file\n"
           "  --prompt TEXT        the text to continue (default: the model's first symbol)\n"
           "  --tokens N           tokens to generate (default 200)\n"
           "  --temperature T      sampling temperature (default 1; 0: the most likely symbol every time)\n"
           "  --seed S             the sampling's seed: the same seed gives the same text, bit for bit\n"
           "  --device gpu         also generate on the GPU (the model of --train --device gpu with step 05's decode\n"
           "                       kernel) and compare the two texts and their speed\n");
}

typedef struct { const uint32_t *symbol; } Printer;
static void print_symbol(int id, void *ctx)
{
    char b[4];
    const int n = utf8_put(((const Printer *)ctx)->symbol[id], b);
    fwrite(b, 1, (size_t)n, stdout);
    fflush(stdout);
}

/* The prompt as ids of the model's symbols (n_out of them); a symbol the model never saw is bad input. */
static int *encode_prompt(const char *text, const ModelFile *mf, int *n_out)
{
    const size_t n = strlen(text);
    int *ids = xmalloc((n + 1) * sizeof(int), "prompt");
    int np = 0;
    for (size_t i = 0; i < n;) {
        const long cp = utf8_next((const unsigned char *)text, n, &i);
        int id = -1;
        for (int s = 0; s < mf->cfg.V && cp >= 0; s++) if (mf->symbol[s] == (uint32_t)cp) id = s;
        if (id < 0) {
            char b[8] = {0};
            if (cp > 0) utf8_put((uint32_t)cp, b);
            tfree(ids);
            if (cp < 0) usage_error("option --prompt: not UTF-8 text (byte %zu)", i);
            usage_error("option --prompt: '%s' (U+%04lX) is not one of the model's %d symbols", b, cp, mf->cfg.V);
        }
        ids[np++] = id;
    }
    if (!np) { tfree(ids); usage_error("option --prompt: empty (leave it out to start from the model's first symbol)"); }
    *n_out = np;
    return ids;
}

/* Generated tokens per second with the cache, 0 if none was timed (all of them prefill or refill). */
static double tokens_per_s(const GenStats *st) { return st->timed ? 1e3 * st->timed / st->ms_cache : 0.0; }

/* The answer lines of a generation run (one decoder): its speed and its check. 1 if the check held. */
static const double CACHE_TOL = 1e-4; /* fp32: the cache changes the order of no sum at S = 1, a few roundings at S > 1 */

static int report_run(const char *who, const GenStats *st)
{
    const double tol = CACHE_TOL;
    if (st->timed)
        printf("%s: %.3f ms per token with the cache, %.3f ms recomputing the whole window through every layer (%.1fx), "
               "over the %ld generated tokens: %.0f tokens/s with the cache\n", who, st->ms_cache / st->timed,
               st->ms_full / st->timed, st->ms_full / st->ms_cache, st->timed, tokens_per_s(st));
    else
        printf("%s: no token timed (each was part of a prefill or of a refill of the window: --tokens more)\n", who);
    const int ok = st->max_diff <= tol;
    printf("check (%s): the logits of all %ld positions (the prompt and every refill included) with the cache against a "
           "full forward over the window: max |diff| %.1e (tol %.0e)%s\n", who, st->positions, st->max_diff, tol,
           ok ? "" : "  <-- WRONG");
    return ok;
}

int generate_main(const Opts *o, const GenOpts *g)
{
    if (!g->load) usage_error("option --generate needs --load FILE (a model written by ./step06 --train --save FILE)");
    ModelFile mf;
    model_read(g->load, &mf);
    const GPTConfig *c = &mf.cfg;
    int np = 1, *prompt;
    if (g->prompt) prompt = encode_prompt(g->prompt, &mf, &np);
    else { prompt = xmalloc(sizeof(int), "prompt"); prompt[0] = 0; }
    int *ids = xmalloc(((size_t)np + g->tokens) * sizeof(int), "text");
    const Printer pr = {mf.symbol};
    char b[3][32];
    const size_t per_layer = 2 * (size_t)c->C * sizeof(float);
    printf("step06 --generate: '%s', a GPT of %d layers, %d heads, C = %d (D = %d), context T = %d, %d symbols, %zu "
           "parameters\n", g->load, c->L, c->H, c->C, c->C / c->H, c->T, c->V, param_count(c));
    printf("sampling: temperature %g, seed %llu; %ld tokens after a prompt of %d symbol%s\n", g->temperature,
           (unsigned long long)o->seed, g->tokens, np, np == 1 ? "" : "s");
    printf("the KV cache: k and v of every layer at every position, 2 x %d channels x 4 bytes = %s per token and layer, "
           "%s per token (%d layers), %s at the context length T = %d\n", c->C, fmt_bytes((double)per_layer, b[0], 32),
           fmt_bytes((double)per_layer * c->L, b[1], 32), c->L, fmt_bytes((double)per_layer * c->L * c->T, b[2], 32), c->T);
    CpuModel cm;
    if (cpu_model_open(&cm, c, mf.params, 1) != 0) return EXIT_FAIL;
    const Decoder cpu = {"cpu", &cm, cpu_decode, cpu_reset, cpu_full};
    GenStats st;
    printf("---\n");
    for (int i = 0; i < np; i++) print_symbol(prompt[i], (void *)&pr);
    int rc = gen_run(&cpu, c->T, c->V, prompt, np, g->tokens, g->temperature, o->seed, 1, ids, &st, print_symbol, (void *)&pr);
    printf("\n---\n");
    if (rc != 0) return EXIT_FAIL;
    int ok = report_run("cpu", &st);
    const int keep = c->T / 2 > 0 ? c->T / 2 : 1;
    if (st.slides)
        printf("the context (T = %d) was full %ld time%s: each time the last %d tokens were kept and their cache rebuilt "
               "at positions 0 .. %d, 16 rows a call\n", c->T, st.slides, st.slides == 1 ? "" : "s", keep, keep - 1);
    cpu_model_close(&cm);
#ifdef HAVE_CUDA
    if (o->device == DEV_GPU) {
        gpu_require();
        GpuDecoder *gd = gpt_gpu_decoder_open(c, mf.params);
        if (!gd) return EXIT_FAIL;
        const Decoder gpu = {"gpu", gd, gpt_gpu_decoder_decode, gpt_gpu_decoder_reset, gpt_gpu_decoder_full};
        int *gids = xmalloc(((size_t)np + g->tokens) * sizeof(int), "GPU text");
        GenStats gs;
        printf("\nthe same on the GPU (%s), %s:\n---\n", gpu_describe(), gpt_gpu_decoder_what(gd));
        for (int i = 0; i < np; i++) print_symbol(prompt[i], (void *)&pr);
        rc = gen_run(&gpu, c->T, c->V, prompt, np, g->tokens, g->temperature, o->seed, 1, gids, &gs, print_symbol, (void *)&pr);
        printf("\n---\n");
        if (rc != 0) return EXIT_FAIL;
        ok &= report_run("gpu", &gs);
        long first = -1;
        for (long i = 0; i < np + g->tokens && first < 0; i++) if (gids[i] != ids[i]) first = i - np;
        if (first < 0)
            printf("answer: the GPU wrote the same %ld tokens as the CPU (same weights, seed and temperature); %.0f tokens/s "
                   "against the CPU's %.0f\n", g->tokens, tokens_per_s(&gs), tokens_per_s(&st));
        else
            printf("answer: the GPU's text departs from the CPU's at generated token %ld%s; %.0f tokens/s against the "
                   "CPU's %.0f\n", first, g->temperature == 0 ? "  <-- WRONG: greedy decoding must agree" :
                   " (sampling: two logits within fp32 rounding of a draw's boundary pick different symbols)",
                   tokens_per_s(&gs), tokens_per_s(&st));
        if (first >= 0 && g->temperature == 0) ok = 0;
        tfree(gids);
        gpt_gpu_decoder_close(gd);
    }
#else
    if (o->device == DEV_GPU) gpu_require();
#endif
    tfree(ids); tfree(prompt); tfree(mf.params);
    return ok ? EXIT_OK : EXIT_FAIL;
}

// --- ./step06 --check's part ------------------------------------------------------------------------

/* A model of config c from seed whose weights are 10x GPT-2's initial ones (std 0.2, LayerNorm as is): at
 * std 0.02 every attention row is nearly uniform, and a cache that handed the wrong key to a position would
 * change the logits by less than the tolerance; at 0.2 the scores are of order 1 and it cannot hide. */
static float *sharp_model(const GPTConfig *c, uint64_t seed)
{
    float *p = gpt_init_alloc(c, seed);
    size_t sz[NUM_PARAMS];
    gpt_param_sizes(c, sz);
    float *x = p;
    for (int t = 0; t < NUM_PARAMS; x += sz[t], t++) {
        const char *nm = PARAM_NAMES[t];
        if (!strcmp(nm, "ln1w") || !strcmp(nm, "ln2w") || !strcmp(nm, "lnfw")) continue;
        for (size_t i = 0; i < sz[t]; i++) x[i] *= 10.0f;
    }
    return p;
}

void generate_checks(void)
{
    const GPTConfig c = {20, 48, 2, 2, 32};                       /* V T L H C: small, and every code path */
    float *params = sharp_model(&c, 11);
    uint32_t sym[MAX_SYMBOLS];
    for (int i = 0; i < c.V; i++) sym[i] = i ? (uint32_t)('a' + i) : 0x00e9; /* one symbol of two UTF-8 bytes */
    {   /* the model file: written and read back, bit for bit */
        char path[] = "/tmp/step06-model-XXXXXX";
        const int fd = mkstemp(path);
        FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
        int same = 0;
        if (f && model_write(f, path, &c, sym, params) == 0) {
            ModelFile mf;
            model_read(path, &mf);
            same = !memcmp(&mf.cfg, &c, sizeof c) && !memcmp(mf.symbol, sym, (size_t)c.V * 4) &&
                   !memcmp(mf.params, params, param_count(&c) * sizeof(float));
            tfree(mf.params);
        }
        if (fd >= 0) remove(path);
        report(same, NULL, "generate/model-file", "V=%d T=%d L=%d H=%d C=%d written and read back: shape, symbols and "
               "%zu weights %s", c.V, c.T, c.L, c.H, c.C, param_count(&c), same ? "identical to the bit" : "DIFFER");
    }
    int prompt[20];
    for (int i = 0; i < 20; i++) prompt[i] = (i * 7 + 3) % c.V;
    int *ids = xmalloc((20 + 100) * sizeof(int), "text"), *again = xmalloc((20 + 100) * sizeof(int), "text");
    for (long split = 1; split <= 3; split += 2) {
        /* 100 tokens after a prompt of 20 (a prefill of 16 + 4 rows), T = 48: the window slides; S = 3 splits
         * every row's keys into 3 chunks and merges them (step 04's flash_decode_cpu). */
        CpuModel cm;
        if (cpu_model_open(&cm, &c, params, split) != 0) { report(0, NULL, "generate/cache", "out of host memory (the line above)"); break; }
        const Decoder d = {"cpu", &cm, cpu_decode, cpu_reset, cpu_full};
        GenStats st;
        char name[96];
        const int rc = gen_run(&d, c.T, c.V, prompt, 20, 100, 1.0, 5, 1, ids, &st, NULL, NULL);
        snprintf(name, sizeof name, "generate/cache-vs-full-forward S=%ld", split);
        report(rc == 0 && st.max_diff <= CACHE_TOL && st.slides > 0, NULL, name, "the logits of %ld positions (prefill of "
               "16 + 4 rows, %ld slides of the T = %d window) with the KV cache against a full forward over the window: "
               "max |diff| %.1e (tol %.0e)", st.positions, st.slides, c.T, st.max_diff, CACHE_TOL);
        if (split == 1) { /* the same seed again: the same text */
            GenStats s2;
            gen_run(&d, c.T, c.V, prompt, 20, 100, 1.0, 5, 0, again, &s2, NULL, NULL);
            const int same = !memcmp(ids, again, 120 * sizeof(int));
            gen_run(&d, c.T, c.V, prompt, 20, 100, 1.0, 6, 0, again, &s2, NULL, NULL);
            const int other = memcmp(ids, again, 120 * sizeof(int)) != 0;
            report(same && other, NULL, "generate/same-seed-same-text", "seed 5 twice: %s; seed 6: %s", same ?
                   "the same 100 tokens" : "DIFFERENT tokens", other ? "other tokens (the seed is used)" : "the SAME tokens");
        }
        cpu_model_close(&cm);
    }
#ifdef HAVE_CUDA
    if (gpu_available()) { /* the GPU model with step 05's decode kernel 1: its cache, and its text against the CPU's */
        GpuDecoder *gd = gpt_gpu_decoder_open(&c, params);
        CpuModel cm;
        if (!gd || cpu_model_open(&cm, &c, params, 1) != 0) { report(0, NULL, "generate/gpu", "could not build the models"); }
        else {
            const Decoder gpu = {"gpu", gd, gpt_gpu_decoder_decode, gpt_gpu_decoder_reset, gpt_gpu_decoder_full};
            const Decoder cpu = {"cpu", &cm, cpu_decode, cpu_reset, cpu_full};
            GenStats st, s2;
            const int rc = gen_run(&gpu, c.T, c.V, prompt, 20, 100, 0.0, 5, 1, ids, &st, NULL, NULL);
            report(rc == 0 && st.max_diff <= CACHE_TOL && st.slides > 0, NULL, "generate/gpu-cache-vs-full-forward",
                   "on the GPU (decode kernel 1, fp32): the logits of %ld positions with the cache against the GPU's full "
                   "forward: max |diff| %.1e (tol %.0e)", st.positions, st.max_diff, CACHE_TOL);
            gen_run(&cpu, c.T, c.V, prompt, 20, 100, 0.0, 5, 0, again, &s2, NULL, NULL);
            long first = -1;
            for (long i = 0; i < 120 && first < 0; i++) if (ids[i] != again[i]) first = i - 20;
            report(first < 0, NULL, "generate/gpu-greedy-same-text", "temperature 0, 100 tokens: the GPU's text %s the CPU's%s",
                   first < 0 ? "is" : "DEPARTS from", first < 0 ? "" : " (at the token the line names)");
            if (first >= 0) printf("  (first difference at generated token %ld)\n", first);
            cpu_model_close(&cm);
        }
        gpt_gpu_decoder_close(gd);
    } else {
        report_skip("generate/gpu", "no CUDA device");
    }
#else
    report_skip("generate/gpu", "built without CUDA");
#endif
    tfree(ids); tfree(again); tfree(params);
}
