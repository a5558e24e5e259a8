/*
 * data.c: what step 06's GPT learns, with nothing to download.
 *
 * The generated corpus is text-like: pseudo-words over a 28-symbol alphabet
 * (space, '.', a-z) built from syllables, in sentences, in paragraphs that
 * each keep to one topic (a topic is a set of 24 words of its own; a fifth of the words are
 * 12 common ones that every topic uses). Two
 * things in it can only be predicted by looking back, which is what attention
 * is for:
 *   - the topic: the topics share no word, so which words come next depends
 *     on the words already seen in the paragraph, not on the current
 *     character alone;
 *   - repeats: after a word, now and then a span of the last two to four
 *     words is written again, letter for letter. After its first letters, a
 *     repeat is predictable by finding the span further back and copying it.
 * A model without attention sees only the current character (and its
 * position): the best it can do is the bigram statistics, and
 * corpus_bigram_floor measures that floor on the held-out split.
 *
 * --data FILE reads any UTF-8 text instead, one symbol per character.
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include "data.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

static const char ALPHABET[] = " .abcdefghijklmnopqrstuvwxyz";

// --- the generated corpus ------------------------------------------------------------------

enum { N_WORDS = 200, N_COMMON = 12, N_TOPICS = 6, TOPIC_WORDS = 24, WORD_MAX = 12 };

typedef struct { char *text; size_t n, cap; size_t word_start[8]; int n_words; } Out;

static void put(Out *o, char ch)
{
    if (o->n < o->cap) o->text[o->n++] = ch;
}

static void put_word(Out *o, const char *w)
{
    for (int i = 0; i < 7; i++) o->word_start[i] = o->word_start[i + 1]; // the last 8 word starts
    o->word_start[7] = o->n;
    if (o->n_words < 8) o->n_words++;
    for (; *w; w++) put(o, *w);
}

/* An index in [0, n) with probability proportional to 1 / (i + 1) (Zipf's law, as in real text). */
static int zipf(Rng *r, int n)
{
    double h = 0, u;
    for (int i = 0; i < n; i++) h += 1.0 / (i + 1);
    u = rng_uniform(r) * h;
    for (int i = 0; i < n; i++) {
        u -= 1.0 / (i + 1);
        if (u < 0) return i;
    }
    return n - 1;
}

void corpus_generate(Corpus *c, size_t n_chars, uint64_t seed)
{
    static const char CONS[] = "bcdfghjklmnprstvwz", VOW[] = "aeiou";
    char words[N_WORDS][WORD_MAX + 1];
    int topic[N_TOPICS][TOPIC_WORDS];
    Rng r;
    rng_seed(&r, seed ^ 0x5eedc0de);
    for (int w = 0; w < N_WORDS; w++) {            // words of 1 (the common ones) to 3 syllables
        int n = 0, syl = w < N_COMMON ? 1 : 1 + (int)(rng_uniform(&r) * 3);
        for (int s = 0; s < syl; s++) {
            words[w][n++] = CONS[rng_next(&r) % (sizeof CONS - 1)];
            words[w][n++] = VOW[rng_next(&r) % (sizeof VOW - 1)];
            if (rng_uniform(&r) < 0.3) words[w][n++] = CONS[rng_next(&r) % (sizeof CONS - 1)];
        }
        words[w][n] = '\0';
    }
    int pool[N_WORDS - N_COMMON];                  // each topic its own words: a shuffled deal of the others
    for (int i = 0; i < N_WORDS - N_COMMON; i++) pool[i] = N_COMMON + i;
    for (int i = N_WORDS - N_COMMON - 1; i > 0; i--) {
        const int j = (int)(rng_next(&r) % (uint64_t)(i + 1)), tmp = pool[i];
        pool[i] = pool[j];
        pool[j] = tmp;
    }
    for (int t = 0; t < N_TOPICS; t++)
        for (int i = 0; i < TOPIC_WORDS; i++) topic[t][i] = pool[t * TOPIC_WORDS + i];

    Out o;
    memset(&o, 0, sizeof o);
    o.cap = n_chars;
    o.text = xmalloc(n_chars, "generated text");
    while (o.n < o.cap) {                          // a paragraph: one topic, 30 to 80 words
        const int t = (int)(rng_next(&r) % N_TOPICS), nw = 30 + (int)(rng_next(&r) % 51);
        int in_sentence = 0, sentence_len = 4 + (int)(rng_next(&r) % 7);
        o.n_words = 0;
        for (int w = 0; w < nw && o.n < o.cap; w++) {
            const int common = rng_uniform(&r) < 0.2;
            put_word(&o, words[common ? zipf(&r, N_COMMON) : topic[t][zipf(&r, TOPIC_WORDS)]]);
            if (++in_sentence == sentence_len) {
                put(&o, '.');
                in_sentence = 0;
                sentence_len = 4 + (int)(rng_next(&r) % 7);
            }
            put(&o, ' ');
            if (o.n_words >= 4 && rng_uniform(&r) < 0.2) {  // a repeat of the last 2 to 4 words, letter for letter
                const int k = 2 + (int)(rng_next(&r) % 3);
                const size_t from = o.word_start[8 - k], to = o.n;
                for (size_t i = from; i < to; i++) put(&o, o.text[i]);
                o.n_words = 0;                     // no repeat of a repeat
            }
        }
    }
    memset(c, 0, sizeof *c);
    c->V = (int)strlen(ALPHABET);
    for (int i = 0; i < c->V; i++) c->symbol[i] = (unsigned char)ALPHABET[i];
    c->n_val = n_chars / 10;
    c->n_train = n_chars - c->n_val;
    c->train = xmalloc(n_chars * sizeof(int), "corpus");
    c->val = c->train + c->n_train;
    for (size_t i = 0; i < n_chars; i++) c->train[i] = (int)(strchr(ALPHABET, o.text[i]) - ALPHABET);
    tfree(o.text);
    snprintf(c->source, sizeof c->source, "generated from seed %llu", (unsigned long long)seed);
}

void corpus_lag_copy(Corpus *c, size_t n_chars, int V, int lag, uint64_t seed)
{
    Rng r;
    rng_seed(&r, seed ^ 0x1a9c0b1e);
    memset(c, 0, sizeof *c);
    c->V = V;
    for (int i = 0; i < V; i++) c->symbol[i] = (uint32_t)('a' + i % 26);
    c->n_val = n_chars / 10;
    c->n_train = n_chars - c->n_val;
    c->train = xmalloc(n_chars * sizeof(int), "corpus");
    c->val = c->train + c->n_train;
    for (size_t i = 0; i < n_chars; i++)
        c->train[i] = i >= (size_t)lag && rng_uniform(&r) < 0.9 ? c->train[i - lag] : (int)(rng_next(&r) % (uint64_t)V);
    snprintf(c->source, sizeof c->source, "lag-%d copies of %d symbols, seed %llu", lag, V, (unsigned long long)seed);
}

// --- a text file -----------------------------------------------------------------------------

long utf8_next(const unsigned char *s, size_t n, size_t *i)
{
    const unsigned char b = s[*i];
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    long cp = len == 1 ? b : len == 2 ? b & 0x1f : len == 3 ? b & 0x0f : b & 0x07;
    if (!len || *i + len > n) return -1;
    for (int k = 1; k < len; k++) {
        if ((s[*i + k] & 0xc0) != 0x80) return -1;
        cp = cp << 6 | (s[*i + k] & 0x3f);
    }
    static const long min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -1; // overlong, out of range
    *i += len;
    return cp;
}

int utf8_put(uint32_t cp, char *buf)
{
    if (cp < 0x80) { buf[0] = (char)cp; return 1; }
    if (cp < 0x800) { buf[0] = (char)(0xc0 | cp >> 6); buf[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        buf[0] = (char)(0xe0 | cp >> 12); buf[1] = (char)(0x80 | (cp >> 6 & 0x3f)); buf[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    buf[0] = (char)(0xf0 | cp >> 18); buf[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    buf[2] = (char)(0x80 | (cp >> 6 & 0x3f)); buf[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

void corpus_load(Corpus *c, const char *path, int T)
{
    struct stat st;
    if (stat(path, &st) != 0) usage_error("option --data: cannot open '%s': %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) usage_error("option --data: '%s' is a directory, expected a text file", path);
    if (!S_ISREG(st.st_mode)) usage_error("option --data: '%s' is not a regular file", path);
    if (st.st_size == 0) usage_error("option --data: '%s' is empty", path);
    FILE *f = fopen(path, "rb");
    if (!f) usage_error("option --data: cannot open '%s': %s", path, strerror(errno));
    const size_t n = (size_t)st.st_size;
    unsigned char *bytes = xmalloc(n, "--data file");
    if (fread(bytes, 1, n, f) != n) { fclose(f); tfree(bytes); usage_error("option --data: cannot read '%s'", path); }
    fclose(f);

    memset(c, 0, sizeof *c);
    short *id_of = xmalloc(0x110000 * sizeof(short), "symbol table"); // code point -> id
    int *text = xmalloc(n * sizeof(int), "corpus");                   // at most one symbol per byte
    size_t len = 0;
    for (size_t i = 0; i < 0x110000; i++) id_of[i] = -1;
    for (size_t i = 0; i < n;) {
        const size_t at = i;
        const long cp = utf8_next(bytes, n, &i);
        if (cp < 0 || cp == 0) {
            const unsigned bad = bytes[at];
            tfree(id_of); tfree(text); tfree(bytes); /* nothing left behind: a usage error is not a leak */
            usage_error("option --data: '%s' is not UTF-8 text (byte 0x%02x at offset %zu)", path, bad, at);
        }
        if (id_of[cp] < 0) {
            if (c->V == MAX_SYMBOLS) {
                tfree(id_of); tfree(text); tfree(bytes);
                usage_error("option --data: '%s' has more than %d distinct symbols (characters); this model's vocabulary "
                            "is at most %d", path, MAX_SYMBOLS, MAX_SYMBOLS);
            }
            id_of[cp] = (short)c->V;
            c->symbol[c->V++] = (uint32_t)cp;
        }
        text[len++] = id_of[cp];
    }
    tfree(id_of);
    tfree(bytes);
    /* Held out: the last 10%, and at least one window of T + 1 symbols; the rest trains. */
    c->n_val = len / 10 > (size_t)T + 1 ? len / 10 : (size_t)T + 1;
    if (len < 2 * ((size_t)T + 1)) {
        tfree(text);
        usage_error("option --data: '%s' has %zu characters, needs at least %d (T + 1 = %d for training and as many "
                    "held out; --seq sets T)", path, len, 2 * (T + 1), T + 1);
    }
    c->n_train = len - c->n_val;
    c->train = text;
    c->val = text + c->n_train;
    snprintf(c->source, sizeof c->source, "%s", path);
}

void corpus_free(Corpus *c)
{
    tfree(c->train);
    memset(c, 0, sizeof *c);
}

// --- batches and the floor -----------------------------------------------------------------

static void window(const int *text, size_t at, int T, int *x, int *y)
{
    for (int t = 0; t < T; t++) { x[t] = text[at + t]; y[t] = text[at + t + 1]; }
}

void corpus_batch(const Corpus *c, Rng *rng, int B, int T, int *x, int *y)
{
    for (int b = 0; b < B; b++)
        window(c->train, (size_t)(rng_uniform(rng) * (double)(c->n_train - T)), T, x + (size_t)b * T, y + (size_t)b * T);
}

void corpus_val_batch(const Corpus *c, int k, int nb, int B, int T, int *x, int *y)
{
    const size_t span = c->n_val - T - 1, windows = (size_t)nb * B;
    for (int b = 0; b < B; b++)
        window(c->val, span * ((size_t)k * B + b) / windows, T, x + (size_t)b * T, y + (size_t)b * T);
}

double corpus_bigram_floor(const Corpus *c)
{
    const int V = c->V;
    double *count = xmalloc((size_t)V * V * sizeof(double), "bigram counts"), loss = 0;
    for (size_t i = 0; i < (size_t)V * V; i++) count[i] = 0.1;
    for (size_t i = 0; i + 1 < c->n_train; i++) count[c->train[i] * V + c->train[i + 1]] += 1;
    for (size_t i = 0; i + 1 < c->n_val; i++) {
        const double *row = count + (size_t)c->val[i] * V;
        double sum = 0;
        for (int j = 0; j < V; j++) sum += row[j];
        loss -= log(row[c->val[i + 1]] / sum);       // -log p(next | this), the bigram model's loss
    }
    tfree(count);
    return loss / (double)(c->n_val - 1);
}
