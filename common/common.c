/*
 * common.c: the harness (see common.h for what each piece is for).
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *g_prog = "step";

/* ---------------------------------------------------------------- options */

void usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", g_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(EXIT_USAGE);
}

/* The command line's copy is plain malloc (it lives as long as the program, untracked): only the
 * system's own limit can refuse it. */
static _Noreturn void cmdline_oom(size_t bytes)
{
    fprintf(stderr, "%s: out of host memory: asked for %zu bytes for the command line, refused by malloc (the "
            "system's limit; the tracked one is not involved)\n", g_prog, bytes);
    exit(EXIT_FAIL);
}

void opts_expand(int *argc, char ***argv)
{
    int extra = 0;
    for (int i = 1; i < *argc; i++) extra += !strncmp((*argv)[i], "--", 2) && strchr((*argv)[i], '=') != NULL;
    if (!extra) return;
    char **out = malloc(((size_t)*argc + (size_t)extra + 1) * sizeof *out);
    if (!out) cmdline_oom(((size_t)*argc + (size_t)extra + 1) * sizeof *out);
    int n = 0;
    for (int i = 0; i < *argc; i++) {
        const char *a = (*argv)[i], *eq = i > 0 && !strncmp(a, "--", 2) ? strchr(a, '=') : NULL;
        if (!eq) { out[n++] = (*argv)[i]; continue; }
        char *name = malloc((size_t)(eq - a) + 1);  /* --opt=value -> --opt value, as GNU tools take it */
        if (!name) cmdline_oom((size_t)(eq - a) + 1);
        memcpy(name, a, (size_t)(eq - a));
        name[eq - a] = '\0';
        out[n++] = name;
        out[n++] = (char *)(eq + 1);
    }
    out[n] = NULL;
    *argc = n;
    *argv = out; /* lives as long as the program: argv does */
}

const char *opt_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc)
        usage_error("option %s needs a value (see --help)", argv[*i]);
    *i += 1;
    return argv[*i];
}

long parse_long(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    long v;
    if (*s == '\0')
        usage_error("option %s: empty value, expected an integer in [%ld, %ld]", opt, lo, hi);
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno == ERANGE)
        usage_error("option %s: '%s' overflows, expected an integer in [%ld, %ld]", opt, s, lo, hi);
    if (*end != '\0' || end == s)
        usage_error("option %s: '%s' is not an integer, expected one in [%ld, %ld]", opt, s, lo, hi);
    if (v < lo || v > hi)
        usage_error("option %s: %ld is out of range, expected an integer in [%ld, %ld]", opt, v, lo, hi);
    return v;
}

double parse_double(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    double v;
    if (*s == '\0')
        usage_error("option %s: empty value, expected a number in [%g, %g]", opt, lo, hi);
    errno = 0;
    v = strtod(s, &end);
    if (*end != '\0' || end == s)
        usage_error("option %s: '%s' is not a number, expected one in [%g, %g]", opt, s, lo, hi);
    if (errno == ERANGE || !(v >= lo && v <= hi)) /* also rejects nan */
        usage_error("option %s: '%s' is out of range, expected a number in [%g, %g]", opt, s, lo, hi);
    return v;
}

size_t parse_size(const char *opt, const char *s)
{
    char *end;
    double v, mul = 1;
    if (*s == '\0')
        usage_error("option %s: empty value, expected a size like 8G, 512M, 64K", opt);
    errno = 0;
    v = strtod(s, &end);
    if (end == s)
        usage_error("option %s: '%s' is not a size, expected one like 8G, 512M, 64K", opt, s);
    switch (*end) {
    case 'K': case 'k': mul = 1e3; end++; break;
    case 'M': case 'm': mul = 1e6; end++; break;
    case 'G': case 'g': mul = 1e9; end++; break;
    case 'T': case 't': mul = 1e12; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0')
        usage_error("option %s: '%s' is not a size, expected one like 8G, 512M, 64K", opt, s);
    v *= mul;
    if (errno == ERANGE || !(v >= 1.0 && v < 1.8e19))
        usage_error("option %s: '%s' is out of range, expected a size from 1 byte up", opt, s);
    return (size_t)v;
}

int parse_choice(const char *opt, const char *s, const char *const *choices, int n)
{
    char allowed[256] = "";
    for (int c = 0; c < n; c++) {
        if (strcmp(s, choices[c]) == 0)
            return c;
        if (strlen(allowed) + strlen(choices[c]) + 2 < sizeof allowed) {
            if (c) strcat(allowed, "|");
            strcat(allowed, choices[c]);
        }
    }
    usage_error("option %s: '%s' is not allowed, expected %s", opt, s, allowed);
}

static const char *const dtype_names[DT_COUNT] = {"fp32", "fp16", "bf16", "fp8"};
const char *dtype_name(int dtype) { return dtype_names[dtype]; }
size_t dtype_size(int dtype) { return dtype == DT_FP32 ? 4 : dtype == DT_FP8 ? 1 : 2; }

void opts_init(Opts *o, const char *prog, unsigned accept, unsigned dtype_mask)
{
    memset(o, 0, sizeof *o);
    g_prog = prog;
    o->accept = accept;
    o->dtype_mask = dtype_mask ? dtype_mask : 1u << DT_FP32;
    o->B = 2; o->H = 8; o->N = 1024; o->D = 64;
    o->BR = 64; o->BC = 64;
    o->dtype = DT_FP32;
    o->device = DEV_AUTO;
    o->seed = 0;
    o->repeat = 5;
}

/* Sizes are bounded so that every product of them stays far inside long and
 * size_t; the product itself is checked again in opts_validate. */
#define MAX_DIM 1048576L

/* The per-block figure is the opt-in maximum (cudaDevAttrMaxSharedMemoryPerBlockOptin) as the CUDA
 * programming guide's table of compute capabilities gives it: 64 KB on Turing, 163 KB on the A100 (8.0), 99 KB
 * on 8.6, 8.9 and 12.0, 227 KB on Hopper and 10.0. */
const GpuProfile gpu_profiles[] = {
    {"t4", "Tesla T4 (Turing, Colab and Kaggle's free GPU)", 7, 5, 65536, 65536},
    {"rtx2080", "GeForce RTX 2080 (Turing)", 7, 5, 65536, 65536},
    {"a100", "A100 (Ampere)", 8, 0, 166912, 167936},
    {"rtx3060", "GeForce RTX 3060 (Ampere)", 8, 6, 101376, 102400},
    {"rtx4090", "GeForce RTX 4090 (Ada)", 8, 9, 101376, 102400},
    {"l4", "L4 (Ada)", 8, 9, 101376, 102400},
    {"h100", "H100 (Hopper)", 9, 0, 232448, 233472},
    {"b200", "B200 (Blackwell)", 10, 0, 232448, 233472},
    {"rtx5090", "GeForce RTX 5090 (Blackwell)", 12, 0, 101376, 102400},
};
const int n_gpu_profiles = (int)(sizeof gpu_profiles / sizeof gpu_profiles[0]);
const GpuProfile *g_gpu_as;

int opts_parse_common(Opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    unsigned acc = o->accept;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { o->help = 1; return 1; }
    if (acc & OPT_SHAPE) {
        if (!strcmp(a, "--batch")) { o->B = parse_long(a, opt_value(argc, argv, i), 1, MAX_DIM); o->given |= 1; return 1; }
        if (!strcmp(a, "--heads")) { o->H = parse_long(a, opt_value(argc, argv, i), 1, MAX_DIM); o->given |= 2; return 1; }
        if (!strcmp(a, "--seq")) { o->N = parse_long(a, opt_value(argc, argv, i), 1, MAX_DIM); o->given |= OPT_GIVEN_SEQ; return 1; }
        if (!strcmp(a, "--dim")) { o->D = parse_long(a, opt_value(argc, argv, i), 1, 1024); o->given |= OPT_GIVEN_DIM; return 1; }
    }
    if (acc & OPT_BLOCK) {
        if (!strcmp(a, "--br")) { o->BR = parse_long(a, opt_value(argc, argv, i), 1, 4096); return 1; }
        if (!strcmp(a, "--bc")) { o->BC = parse_long(a, opt_value(argc, argv, i), 1, 4096); return 1; }
    }
    if ((acc & OPT_DTYPE) && !strcmp(a, "--dtype")) {
        const char *v = opt_value(argc, argv, i);
        char allowed[64] = "";
        for (int d = 0; d < DT_COUNT; d++) {
            if (!(o->dtype_mask & (1u << d))) continue;
            if (!strcmp(v, dtype_names[d])) { o->dtype = d; o->given |= OPT_GIVEN_DTYPE; return 1; }
            if (allowed[0]) strcat(allowed, "|");
            strcat(allowed, dtype_names[d]);
        }
        usage_error("option --dtype: '%s' is not supported by this step, expected %s", v, allowed);
    }
    if ((acc & OPT_SEED) && !strcmp(a, "--seed")) {
        o->seed = (uint64_t)parse_long(a, opt_value(argc, argv, i), 0, 2147483647L);
        return 1;
    }
    if ((acc & OPT_CAUSAL) && !strcmp(a, "--causal")) { o->causal = 1; return 1; }
    if ((acc & OPT_CHECK) && !strcmp(a, "--check")) { o->check = 1; return 1; }
    if ((acc & OPT_KERNEL) && !strcmp(a, "--kernel")) { /* K, or K-M: kernels K to M, timed side by side */
        const char *v = opt_value(argc, argv, i), *dash = strchr(v, '-');
        char first[32];
        if (dash && dash != v && (size_t)(dash - v) < sizeof first) {
            memcpy(first, v, (size_t)(dash - v));
            first[dash - v] = '\0';
            o->kernel = parse_long(a, first, 1, 99);
            o->kernel_last = parse_long(a, dash + 1, o->kernel, 99);
        } else
            o->kernel = o->kernel_last = parse_long(a, v, 1, 99);
        return 1;
    }
    if ((acc & OPT_REPEAT) && !strcmp(a, "--repeat")) { o->repeat = parse_long(a, opt_value(argc, argv, i), 1, 10000); return 1; }
    if ((acc & OPT_CSV) && !strcmp(a, "--csv")) {
        o->csv = opt_value(argc, argv, i);
        if (!*o->csv) usage_error("option --csv: empty file name");
        return 1;
    }
    if (acc & OPT_NPY) {
        const char **dst = !strcmp(a, "--q") ? &o->qfile : !strcmp(a, "--k") ? &o->kfile
                         : !strcmp(a, "--v") ? &o->vfile : !strcmp(a, "--out") ? &o->outfile : NULL;
        if (dst) {
            *dst = opt_value(argc, argv, i);
            if (!**dst) usage_error("option %s: empty file name", a);
            return 1;
        }
    }
    if ((acc & OPT_GPU_AS) && !strcmp(a, "--gpu-as")) {
        const char *v = opt_value(argc, argv, i);
        char allowed[160] = "";
        for (int g = 0; g < n_gpu_profiles; g++) {
            if (!strcmp(v, gpu_profiles[g].name)) { g_gpu_as = &gpu_profiles[g]; return 1; }
            strcat(allowed, g ? "|" : "");
            strcat(allowed, gpu_profiles[g].name);
        }
        usage_error("option --gpu-as: unknown GPU '%s', expected %s", v, allowed);
    }
    if ((acc & OPT_DEVICE) && !strcmp(a, "--device")) {
        static const char *const devs[] = {"auto", "cpu", "gpu"};
        o->device = parse_choice(a, opt_value(argc, argv, i), devs, 3);
        return 1;
    }
    return 0;
}

void opts_gpu_grid(const Opts *o, long rows_per_block)
{
    /* The kernels' grids are one-dimensional: B*H*ceil(N / rows) blocks, and CUDA allows 2^31 - 1. */
    const long long blocks = (long long)o->B * o->H * ((o->N + rows_per_block - 1) / rows_per_block);
    if (blocks > 2147483647LL)
        usage_error("options --batch, --heads, --seq: B*H*ceil(N/%ld) = %lld blocks, more than a CUDA grid's 2^31 - 1",
                    rows_per_block, blocks);
}

void opts_given_agree(const Opts *o, const long shape[4], const char *files)
{
    static const char *const nm[] = {"--batch", "--heads", "--seq", "--dim"};
    const long want[4] = {o->B, o->H, o->N, o->D};
    for (int d = 0; d < 4; d++)
        if ((o->given & (1u << d)) && shape[d] != want[d])
            usage_error("option %s: %ld was given, but %s has %ld", nm[d], want[d], files, shape[d]);
}

void opts_validate(Opts *o, size_t elem_bytes)
{
    if (o->qfile || o->kfile || o->vfile) {
        long shp[4];
        if (!(o->qfile && o->kfile && o->vfile))
            usage_error("options --q, --k, --v go together: give all three .npy files");
        if (npy_shape("--q", o->qfile, shp) != 4)
            usage_error("option --q: %s must be 4-D [B, H, N, D]", o->qfile);
        opts_given_agree(o, shp, o->qfile);
        if (shp[0] < 1 || shp[0] > 65535 || shp[1] < 1 || shp[1] > 65535 || shp[2] < 1 || shp[2] > MAX_DIM || shp[3] < 1 || shp[3] > 1024)
            usage_error("option --q: %s has an unsupported shape [%ld, %ld, %ld, %ld]", o->qfile, shp[0], shp[1], shp[2], shp[3]);
        o->B = shp[0]; o->H = shp[1]; o->N = shp[2]; o->D = shp[3];
    }
    if ((o->accept & OPT_DTYPE) && !(o->dtype_mask & (1u << o->dtype)))
        usage_error("option --dtype: %s is not supported by this step", dtype_name(o->dtype));
    (void)size_or_die("B*H*N*D*sizeof(element)", (size_t)o->B, (size_t)o->H, (size_t)o->N, (size_t)o->D, elem_bytes);
}

void print_common_usage(const Opts *o)
{
    unsigned a = o->accept;
    if (a & OPT_SHAPE)
        printf("  --batch B --heads H --seq N --dim D   shape [B,H,N,D] (default %ld %ld %ld %ld)\n", o->B, o->H, o->N, o->D);
    if (a & OPT_BLOCK)
        printf("  --br BR --bc BC        row tile of Q, column tile of K/V (default %ld %ld)\n", o->BR, o->BC);
    if (a & OPT_DTYPE) {
        printf("  --dtype T              storage type:");
        for (int d = 0; d < DT_COUNT; d++)
            if (o->dtype_mask & (1u << d)) printf(" %s", dtype_names[d]);
        printf(" (default %s)\n", dtype_names[o->dtype]);
    }
    if (a & OPT_DEVICE) printf("  --device auto|cpu|gpu  where to run (default auto: gpu if present)\n");
    if (a & OPT_CAUSAL) printf("  --causal               causal mask (key index <= query index)\n");
    if (a & OPT_KERNEL) printf("  --kernel K             run only kernel K (default: all); K-M: kernels K to M\n");
    if (a & OPT_SEED) printf("  --seed S               RNG seed for Q, K, V (default %llu)\n", (unsigned long long)o->seed);
    if (a & OPT_REPEAT) printf("  --repeat R             timed repeats after warm-up; median reported (default %ld)\n", o->repeat);
    if (a & OPT_CSV) printf("  --csv FILE             write the results table as CSV\n");
    if (a & OPT_NPY) printf("  --q/--k/--v FILE.npy   load inputs (float32 or float16, [B,H,N,D]); --out FILE.npy saves O\n");
    if (a & OPT_CHECK) printf("  --check                run the self-test grid; exit 1 if anything fails\n");
    if (a & OPT_GPU_AS) {
        printf("  --gpu-as NAME          emulate a reader's GPU on this one: its compute capability and shared memory\n"
               "                         per block and SM decide what runs (correctness and kernel choice, not its speed):");
        for (int g = 0; g < n_gpu_profiles; g++) printf(" %s", gpu_profiles[g].name);
        printf("\n");
    }
    printf("  --help                 this text\n");
}

/* ------------------------------------------------------------------ sizes */

int size_mul(size_t a, size_t b, size_t *r)
{
    if (a != 0 && b > (size_t)-1 / a)
        return 0;
    *r = a * b;
    return 1;
}

size_t size_or_die(const char *what, size_t a, size_t b, size_t c, size_t d, size_t e)
{
    size_t r = a;
    if (!size_mul(r, b, &r) || !size_mul(r, c, &r) || !size_mul(r, d, &r) || !size_mul(r, e, &r))
        usage_error("size %s = %zu*%zu*%zu*%zu*%zu overflows size_t", what, a, b, c, d, e);
    return r;
}

const char *fmt_bytes(double b, char *buf, size_t n)
{
    if (b >= 1e9) snprintf(buf, n, "%.2f GB", b / 1e9);
    else if (b >= 1e6) snprintf(buf, n, "%.1f MB", b / 1e6);
    else if (b >= 1e3) snprintf(buf, n, "%.1f KB", b / 1e3);
    else snprintf(buf, n, "%.0f B", b);
    return buf;
}

/* -------------------------------------------------------------------- RNG */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void rng_seed(Rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rng_next(Rng *r)
{
    uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rotl(s[3], 45);
    return res;
}

double rng_uniform(Rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

double rng_normal(Rng *r)
{
    /* Box-Muller; 1 - u keeps the log's argument in (0, 1]. One value per
     * call (the second is thrown away) so the stream has no hidden state. */
    double u = 1.0 - rng_uniform(r), v = rng_uniform(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

void fill_normal(float *x, size_t n, Rng *r)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)rng_normal(r);
}

void make_qkv(float *q, float *k, float *v, size_t n, uint64_t seed)
{
    Rng r;
    rng_seed(&r, seed * 3 + 0); fill_normal(q, n, &r);
    rng_seed(&r, seed * 3 + 1); fill_normal(k, n, &r);
    rng_seed(&r, seed * 3 + 2); fill_normal(v, n, &r);
}

/* ----------------------------------------------------------- fp16 / bf16 */

uint16_t f32_to_f16(float f)
{
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xff, m = x & 0x7fffffu;
    if (e == 0xff) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0)); /* inf, nan */
    int ex = (int)e - 127 + 15;
    if (ex >= 31) return (uint16_t)(sign | 0x7c00u);                   /* overflow -> inf */
    if (ex <= 0) {                                                      /* subnormal or zero */
        if (ex < -10) return (uint16_t)sign;
        m |= 0x800000u;
        int shift = 14 - ex;
        uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)ex << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++; /* may carry into inf: correct */
    return (uint16_t)(sign | h);
}

float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu, x;
    if (e == 0x1f) x = sign | 0x7f800000u | (m << 13);
    else if (e == 0) {
        if (m == 0) x = sign;
        else { /* subnormal: normalise */
            e = 127 - 15 + 1;
            while (!(m & 0x400u)) { m <<= 1; e--; }
            x = sign | (e << 23) | ((m & 0x3ffu) << 13);
        }
    } else x = sign | ((e + 127 - 15) << 23) | (m << 13);
    float f; memcpy(&f, &x, 4);
    return f;
}

uint16_t f32_to_bf16(float f)
{
    uint32_t x; memcpy(&x, &f, 4);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu)) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1); /* round to nearest even */
    return (uint16_t)(x >> 16);
}

float bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16; float f; memcpy(&f, &x, 4);
    return f;
}

void round_to_dtype(float *x, size_t n, int dtype)
{
    if (dtype == DT_FP16) for (size_t i = 0; i < n; i++) x[i] = f16_to_f32(f32_to_f16(x[i]));
    if (dtype == DT_BF16) for (size_t i = 0; i < n; i++) x[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

float dot_f32(const float *a, const float *b, long D)
{
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, acc;
    long d = 0;
    for (; d + 8 <= D; d += 8)
        for (int u = 0; u < 8; u++) s[u] += a[d + u] * b[d + u];
    acc = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; d < D; d++) acc += a[d] * b[d];
    return acc;
}

/* ------------------------------------------------------ float64 reference */

/* One row, with an optional ALiBi slope (0: plain attention): s_j -= slope |i - j|. */
/* One query row qi against keys 0 .. jend-1, in double; i is the row's own index, for the bias only. */
static void ref_keys(const float *qi, const float *k, const float *v, long jend, long D, long i, double slope,
                     double *s, double *o)
{
    const double scale = 1.0 / sqrt((double)D);
    double m = -INFINITY, l = 0;
    for (long j = 0; j < jend; j++) {           /* s_j = q_i . k_j / sqrt(D) - slope |i - j| */
        double acc = 0;
        for (long d = 0; d < D; d++) acc += (double)qi[d] * k[j * D + d];
        s[j] = acc * scale - slope * (double)(i > j ? i - j : j - i);
        if (s[j] > m) m = s[j];
    }
    for (long j = 0; j < jend; j++) { s[j] = exp(s[j] - m); l += s[j]; } /* stable softmax */
    for (long d = 0; d < D; d++) o[d] = 0;
    for (long j = 0; j < jend; j++)
        for (long d = 0; d < D; d++) o[d] += s[j] * v[j * D + d];
    for (long d = 0; d < D; d++) o[d] /= l;
}

static void ref_row(const float *q, const float *k, const float *v, long N, long D, int causal, long i, double slope,
                    double *s, double *o)
{
    ref_keys(q + i * D, k, v, causal ? i + 1 : N, D, i, slope, s, o);
}

void ref_attention_keys(const float *q_row, const float *k, const float *v, long nkeys, long D, double *s, double *o)
{
    ref_keys(q_row, k, v, nkeys, D, 0, 0.0, s, o);
}

void ref_attention_row(const float *q, const float *k, const float *v, long N, long D,
                       int causal, long i, double *s, double *o)
{
    ref_row(q, k, v, N, D, causal, i, 0.0, s, o);
}

void ref_attention_row_bias(const float *q, const float *k, const float *v, long N, long D, int causal, long i,
                            double slope, double *s, double *o)
{
    ref_row(q, k, v, N, D, causal, i, slope, s, o);
}

void ref_attention(const float *q, const float *k, const float *v, long bh, long N, long D,
                   int causal, double *out)
{
    ref_attention_bias(q, k, v, bh, N, D, causal, NULL, out);
}

void ref_attention_bias(const float *q, const float *k, const float *v, long bh, long N, long D, int causal,
                        const float *slope, double *out)
{
    double *s = xmalloc((size_t)N * sizeof(double), "reference scores");
    for (long h = 0; h < bh; h++) {
        size_t off = (size_t)h * N * D;
        for (long i = 0; i < N; i++)
            ref_row(q + off, k + off, v + off, N, D, causal, i, slope ? slope[h] : 0.0, s, out + off + (size_t)i * D);
    }
    tfree(s);
}

double alibi_slope(long h, long H)
{
    long P = 1;
    while (P * 2 <= H) P *= 2;                  /* the power of 2 at or below H */
    if (h < P) return pow(2.0, -8.0 * (double)(h + 1) / (double)P);
    return pow(2.0, -8.0 * (double)(2 * (h - P) + 1) / (double)(2 * P)); /* every other slope of 2P heads */
}

void alibi_slopes(float *slope, long B, long H)
{
    for (long b = 0; b < B; b++)
        for (long h = 0; h < H; h++) slope[b * H + h] = (float)alibi_slope(h, H);
}

/* ------------------------------------------------ metrics and comparison */

int f32_is_finite(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4); /* the raw bits: exponent all ones = inf or NaN */
    return (u & 0x7f800000u) != 0x7f800000u;
}

static int f64_is_finite(double x)
{
    uint64_t u;
    memcpy(&u, &x, 8);
    return (u & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
}

Err compare(const float *out, const double *ref, size_t n, double atol, double rtol)
{
    Err e;
    double num = 0, den = 0;
    memset(&e, 0, sizeof e);
    e.n = n;
    for (size_t i = 0; i < n; i++) {
        int bad;
        double r = ref[i];
        if (!f32_is_finite(out[i])) {
            bad = f64_is_finite(r);     /* non-finite where the reference is finite */
            e.n_nonfinite += (size_t)bad;
            if (bad) { e.max_abs = INFINITY; e.max_rel = INFINITY; num = INFINITY; }
        } else {
            double d = fabs((double)out[i] - r), rel = d / (fabs(r) + 1e-8);
            bad = !(d <= atol + rtol * fabs(r)); /* written so that NaN is bad */
            if (d > e.max_abs) e.max_abs = d;
            if (rel > e.max_rel) e.max_rel = rel;
            num += d * d;
        }
        den += r * r;
        if (bad) {
            if (e.n_bad < 3) {
                e.bad_idx[e.n_bad] = i;
                e.bad_got[e.n_bad] = out[i];
                e.bad_ref[e.n_bad] = r;
            }
            e.n_bad++;
        }
    }
    e.rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    return e;
}

double tol_fp32(double naive_err)
{
    const double t = 2.0 * naive_err;
    return t > 1e-4 ? 1e-4 : t > 1e-5 ? t : 1e-5;   /* NaN or a failed naive: 1e-5; a broken naive: at most 1e-4 */
}

double tol_16bit(double naive_err) { const double t = 2.0 * naive_err; return t < 2e-2 ? t : 2e-2; } /* NaN: 2e-2 */

const char *fmt_err(const Err *e, char *buf, size_t n)
{
    snprintf(buf, n, "max abs %.2e, max rel %.2e, rel L2 %.2e", e->max_abs, e->max_rel, e->rel_l2);
    return buf;
}

/* -------------------------------------------------------------- reporting */

static int n_pass, n_fail, n_skip;

int report(int ok, const Err *e, const char *name, const char *fmt, ...)
{
    va_list ap;
    printf("%s %s: ", ok ? "PASS" : "FAIL", name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (!ok && e && e->n_bad) {
        printf(" [%zu of %zu bad, %zu non-finite; first:", e->n_bad, e->n, e->n_nonfinite);
        for (size_t i = 0; i < e->n_bad && i < 3; i++)
            printf(" (%zu expected %.6g got %.6g)", e->bad_idx[i], e->bad_ref[i], (double)e->bad_got[i]);
        printf("]");
        if (e->n_nonfinite) {
            Signature g;
            memset(&g, 0, sizeof g);
            g.multi = e;
            printf(" likely cause: %s", diagnose(&g));
        }
    }
    printf("\n");
    fflush(stdout);
    if (ok) n_pass++; else n_fail++;
    return ok;
}

void report_skip(const char *name, const char *fmt, ...)
{
    va_list ap;
    printf("SKIP %s: ", name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    n_skip++;
}

int report_failed(void) { return n_fail; }

int report_finish(void)
{
    printf("%s: %d passed, %d failed, %d skipped\n", g_prog, n_pass, n_fail, n_skip);
    fflush(stdout);
    return n_fail ? EXIT_FAIL : EXIT_OK;
}

void checker_selftest(void)
{
    enum { n = 64 };
    float out[n];
    double ref[n];
    Rng r;
    rng_seed(&r, 12345);
    for (int i = 0; i < n; i++) { ref[i] = rng_normal(&r); out[i] = (float)ref[i]; }
    Err e = compare(out, ref, n, 1e-6, 0);
    report(e.n_bad == 0, &e, "checker/clean", "identical data passes (%zu bad)", e.n_bad);

    const float nan = (float)NAN, inf = (float)INFINITY;
    const float planted[3] = {nan, inf, 0};
    const char *const what[3] = {"NaN", "inf", "one element off by 1e-3"};
    for (int t = 0; t < 3; t++) {
        char name[64];
        float keep = out[17];
        out[17] = t < 2 ? planted[t] : (float)(ref[17] + 1e-3);
        e = compare(out, ref, n, 1e-6, 0);
        snprintf(name, sizeof name, "checker/planted-%s", t == 0 ? "nan" : t == 1 ? "inf" : "error");
        report(e.n_bad == 1 && e.bad_idx[0] == 17, NULL, name,
               "a planted %s at index 17 is caught (%zu bad, first at %zu)", what[t], e.n_bad,
               e.n_bad ? e.bad_idx[0] : (size_t)0);
        out[17] = keep;
    }
}

/* -------------------------------------------------------------- diagnosis */

const char *diagnose(const Signature *g)
{
    if (g->neg_rows_known && g->neg_rows_broken && g->other_rows_ok)
        return "running max initialised to 0 instead of -inf";   /* e^(s - 0) underflows to 0 for s << 0: l = 0, o/l = 0/0 */
    if (g->multi && g->multi->n_nonfinite > 0)
        return "running-max subtraction missing (exp overflow)"; /* e^s overflows: inf, then inf/inf = NaN */
    if (g->causal_split && g->first_tile_err < 1e-4 && g->later_tiles_err > 1e-3)
        return "mask built from tile-relative indices";          /* right where i0 == j0, wrong below the diagonal */
    if (g->multi && g->single && g->multi->n_bad > 0 && g->single->n_bad == 0)
        return "running statistics not rescaled (alpha/beta)";   /* right with one tile, wrong with two or more */
    return NULL;
}

/* ----------------------------------------------------------------- timers */

double now_sec(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

double time_median(void (*fn)(void *), void *ctx, int warmup, int repeat)
{
    double t[1000];
    if (repeat > 1000) repeat = 1000;
    for (int w = 0; w < warmup; w++) fn(ctx);
    for (int r = 0; r < repeat; r++) {
        double t0 = now_sec();
        fn(ctx);
        t[r] = now_sec() - t0;
    }
    return median(t, repeat);
}

/* ---------------------------------------------------- tracked host memory */

/* Each block carries its size in a 16-byte header, so tfree knows what to
 * subtract and the payload stays 16-byte aligned. The counters are atomic:
 * step 06's training runs two models on two threads, and both allocate. */
typedef union { size_t size; max_align_t align; } Hdr;
static _Atomic size_t cur_bytes, peak_bytes;
static size_t limit_bytes;
static _Thread_local size_t refused_bytes; /* per thread: step 06's runs fail on their own threads */

size_t phys_mem_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : (size_t)8e9;
}

void mem_set_limit(size_t bytes) { limit_bytes = bytes; }
size_t mem_limit(void)
{
    /* Default: 80% of physical memory, so that a size that Linux would let
     * malloc promise (overcommit) and then kill us for is refused cleanly. */
    return limit_bytes ? limit_bytes : phys_mem_bytes() / 10 * 8;
}

size_t mem_refused(void) { return refused_bytes; }

const char *mem_limit_desc(char *buf, size_t n)
{
    char b1[32], b2[32];
    if (limit_bytes) snprintf(buf, n, "host limit %s (--mem-limit)", fmt_bytes((double)limit_bytes, b1, sizeof b1));
    else
        snprintf(buf, n, "host limit %s (80%% of this machine's %s of RAM)", fmt_bytes((double)mem_limit(), b1, sizeof b1),
                 fmt_bytes((double)phys_mem_bytes(), b2, sizeof b2));
    return buf;
}

void mem_oom_line(size_t bytes, const char *what)
{
    char b1[32], b2[32], lim[96]; /* one buffer per number: fmt_bytes returns its buffer */
    fprintf(stderr, "%s: out of host memory: asked for %zu bytes (%s) for %s, %s in use, %s\n", g_prog, bytes,
            fmt_bytes((double)bytes, b1, sizeof b1), what, fmt_bytes((double)mem_current(), b2, sizeof b2),
            mem_limit_desc(lim, sizeof lim));
}

void *tmalloc(size_t bytes)
{
    size_t total, cur = atomic_load(&cur_bytes), pk;
    if (bytes > (size_t)-1 - sizeof(Hdr)) { refused_bytes = bytes; return NULL; }
    total = bytes + sizeof(Hdr);
    do { /* reserve the bytes under the limit, or refuse */
        if (cur + bytes > mem_limit() || cur + bytes < cur) { refused_bytes = bytes; return NULL; }
    } while (!atomic_compare_exchange_weak(&cur_bytes, &cur, cur + bytes));
    Hdr *h = malloc(total);
    if (!h) { atomic_fetch_sub(&cur_bytes, bytes); refused_bytes = bytes; return NULL; }
    h->size = bytes;
    pk = atomic_load(&peak_bytes);
    while (cur + bytes > pk && !atomic_compare_exchange_weak(&peak_bytes, &pk, cur + bytes)) {}
    return h + 1;
}

void *xmalloc(size_t bytes, const char *what)
{
    void *p = tmalloc(bytes);
    if (!p) {
        mem_oom_line(bytes, what);
        exit(EXIT_FAIL);
    }
    return p;
}

void tfree(void *p)
{
    if (!p) return;
    Hdr *h = (Hdr *)p - 1;
    atomic_fetch_sub(&cur_bytes, h->size);
    free(h);
}

size_t mem_current(void) { return atomic_load(&cur_bytes); }
size_t mem_peak(void) { return atomic_load(&peak_bytes); }
void mem_reset_peak(void) { atomic_store(&peak_bytes, atomic_load(&cur_bytes)); }

size_t rss_peak_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

int rss_reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return (fclose(f) == 0) && ok;
}

/* ------------------------------------------------------------ .npy, CSV */

enum { NPY_F64 = 8 }; /* '<f8', read only where a caller allows it (npy_load_f64ok), never a DT_* of a step */

/* Parse the header of a version 1/2/3 .npy: dtype '<f4' or '<f2' (or '<f8' if allow_f64), C order,
 * shape tuple. Returns ndim, fills shape, *dt, *data_off; or -1 with *why. */
static int npy_header(FILE *f, long *shape, int *dt, long *data_off, const char **why, int allow_f64)
{
    unsigned char pre[10];
    char hdr[4096];
    size_t hlen;
    int ndim = 0;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) { *why = "not a .npy file"; return -1; }
    if (pre[6] == 1) { hlen = pre[8] | (size_t)pre[9] << 8; *data_off = 10; }
    else {
        unsigned char b[2];
        if (fread(b, 1, 2, f) != 2) { *why = "truncated header"; return -1; }
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)b[0] << 16 | (size_t)b[1] << 24;
        *data_off = 12;
    }
    if (hlen >= sizeof hdr || fread(hdr, 1, hlen, f) != hlen) { *why = "header too long or truncated"; return -1; }
    hdr[hlen] = '\0';
    *data_off += (long)hlen;
    if (strstr(hdr, "'<f4'")) *dt = DT_FP32;
    else if (strstr(hdr, "'<f2'")) *dt = DT_FP16;
    else if (allow_f64 && strstr(hdr, "'<f8'")) *dt = NPY_F64;
    else { *why = allow_f64 ? "dtype is not float32 ('<f4'), float16 ('<f2') or float64 ('<f8')"
                            : "dtype is not float32 ('<f4') or float16 ('<f2')"; return -1; }
    if (!strstr(hdr, "'fortran_order': False")) { *why = "not C order"; return -1; }
    char *p = strstr(hdr, "'shape':");
    if (!p || !(p = strchr(p, '('))) { *why = "no shape in header"; return -1; }
    p++;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || ndim >= 4) { *why = "shape is not 1 to 4 non-negative integers"; return -1; }
        shape[ndim++] = v;
        p = end;
    }
    if (ndim == 0) { *why = "0-D array"; return -1; }
    return ndim;
}

int npy_shape(const char *opt, const char *path, long *shape)
{
    const char *why = "";
    int dt;
    long off;
    FILE *f = fopen(path, "rb");
    if (!f) usage_error("option %s: cannot open %s: %s", opt, path, strerror(errno));
    int nd = npy_header(f, shape, &dt, &off, &why, 0);
    fclose(f);
    if (nd < 0) usage_error("option %s: %s: %s", opt, path, why);
    return nd;
}

static float *npy_read(const char *opt, const char *path, const long *want, int ndim, int allow_f64, int *was_f64)
{
    const char *why = "";
    long shape[4], off;
    int dt;
    size_t n = 1;
    FILE *f = fopen(path, "rb");
    if (!f) usage_error("option %s: cannot open %s: %s", opt, path, strerror(errno));
    int nd = npy_header(f, shape, &dt, &off, &why, allow_f64);
    if (nd < 0) { fclose(f); usage_error("option %s: %s: %s", opt, path, why); }
    int same = nd == ndim;
    for (int d = 0; d < nd && same; d++) same = shape[d] == want[d];
    if (!same) {
        fclose(f);
        usage_error("option %s: %s has shape [%ld, %ld, %ld, %ld] (%d-D), expected [%ld, %ld, %ld, %ld]", opt, path,
                    shape[0], nd > 1 ? shape[1] : 0, nd > 2 ? shape[2] : 0, nd > 3 ? shape[3] : 0, nd,
                    want[0], want[1], want[2], want[3]);
    }
    for (int d = 0; d < nd; d++) n *= (size_t)shape[d];
    float *x = xmalloc(n * sizeof(float), path);
    if (was_f64) *was_f64 = dt == NPY_F64;
    if (dt == DT_FP32) {
        if (fread(x, 4, n, f) != n) { fclose(f); usage_error("option %s: %s: data truncated", opt, path); }
    } else if (dt == NPY_F64) { /* one row of doubles at a time, each rounded to the nearest float */
        double row[512];
        for (size_t i = 0; i < n; i += 512) {
            const size_t c = n - i < 512 ? n - i : 512;
            if (fread(row, 8, c, f) != c) { fclose(f); usage_error("option %s: %s: data truncated", opt, path); }
            for (size_t j = 0; j < c; j++) /* past float's range: inf (a cast there is undefined in C) */
                x[i + j] = row[j] > FLT_MAX ? INFINITY : row[j] < -FLT_MAX ? -INFINITY : (float)row[j];
        }
    } else {
        const size_t esz = dtype_size(dt);
        uint16_t *h = xmalloc(n * esz, path);
        if (fread(h, 2, n, f) != n) { fclose(f); usage_error("option %s: %s: data truncated", opt, path); }
        for (size_t i = 0; i < n; i++) x[i] = f16_to_f32(h[i]);
        tfree(h);
    }
    fclose(f);
    return x;
}

float *npy_load(const char *opt, const char *path, const long *want, int ndim)
{
    return npy_read(opt, path, want, ndim, 0, NULL);
}

float *npy_load_f64ok(const char *opt, const char *path, const long *want, int ndim, int *was_f64)
{
    return npy_read(opt, path, want, ndim, 1, was_f64);
}

/* Open path and write a version 1 .npy header for dtype descr ("<f4", "<f2", "<f8") and shape; *n gets
 * the element count. NULL if the file cannot be opened. */
static FILE *npy_create(const char *path, const char *descr, const long *shape, int ndim, size_t *n)
{
    char hdr[256], sh[128] = "";
    *n = 1;
    for (int d = 0; d < ndim; d++) {
        char t[32];
        snprintf(t, sizeof t, "%ld,%s", shape[d], ndim == 1 ? "" : " ");
        strcat(sh, t);
        *n *= (size_t)shape[d];
    }
    int len = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, sh);
    int total = 10 + len + 1, pad = (64 - total % 64) % 64; /* header is padded to 64 bytes */
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    unsigned short hl = (unsigned short)(len + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xff, f); fputc(hl >> 8, f);
    fwrite(hdr, 1, (size_t)len, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    return f;
}

int npy_save_f64(const char *path, const double *x, const long *shape, int ndim)
{
    size_t n;
    FILE *f = npy_create(path, "<f8", shape, ndim, &n);
    if (!f) return -1;
    const size_t w = fwrite(x, 8, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

int npy_save(const char *path, const float *x, const long *shape, int ndim, int dtype)
{
    size_t n;
    FILE *f = npy_create(path, dtype == DT_FP16 ? "<f2" : "<f4", shape, ndim, &n);
    if (!f) return -1;
    size_t w = 0;
    if (dtype == DT_FP16)
        for (size_t i = 0; i < n; i++) { uint16_t h = f32_to_f16(x[i]); w += fwrite(&h, 2, 1, f); }
    else
        w = fwrite(x, 4, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

void finite_or_die(const char *opt, const char *path, const float *x, const long *shape)
{
    const size_t n = (size_t)shape[0] * shape[1] * shape[2] * shape[3];
    size_t nans = 0, infs = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (!f32_is_finite(x[i])) {
            if (!nans && !infs) first = i;
            if (x[i] != x[i]) nans++; else infs++;
        }
    if (nans || infs) /* NaN in gives NaN out: say so here, not as a failed comparison later */
        usage_error("option %s: %s holds %zu NaN and %zu inf values (the first at index %zu, [%zu, %zu, %zu, %zu]): "
                    "attention of them is NaN, and this step checks against a finite reference; give finite inputs",
                    opt, path, nans, infs, first, first / ((size_t)shape[1] * shape[2] * shape[3]),
                    first / ((size_t)shape[2] * shape[3]) % (size_t)shape[1], first / (size_t)shape[3] % (size_t)shape[2],
                    first % (size_t)shape[3]);
}

void inputs_load_or_make(Opts *o, float **q, float **k, float **v)
{
    size_t n = (size_t)o->B * o->H * o->N * o->D;
    if (o->qfile) {
        long shp[4] = {o->B, o->H, o->N, o->D};
        *q = npy_load("--q", o->qfile, shp, 4);
        *k = npy_load("--k", o->kfile, shp, 4);
        *v = npy_load("--v", o->vfile, shp, 4);
        finite_or_die("--q", o->qfile, *q, shp);
        finite_or_die("--k", o->kfile, *k, shp);
        finite_or_die("--v", o->vfile, *v, shp);
        return;
    }
    *q = xmalloc(n * sizeof(float), "Q");
    *k = xmalloc(n * sizeof(float), "K");
    *v = xmalloc(n * sizeof(float), "V");
    make_qkv(*q, *k, *v, n, o->seed);
}

FILE *csv_open(const char *path, const char *header)
{
    FILE *f = fopen(path, "w");
    if (!f) usage_error("option --csv: cannot open %s for writing: %s", path, strerror(errno));
    fprintf(f, "%s\n", header);
    return f;
}
