/* data.h: the text step 06's --train learns (data.c): generated from the seed, or a file, character level. */
#ifndef DATA_H
#define DATA_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MAX_SYMBOLS = 256 };

typedef struct {
    int V;                          /* distinct symbols */
    uint32_t symbol[MAX_SYMBOLS];   /* id -> Unicode code point */
    int *train, *val;               /* the text as ids: the first 90% for training, the rest held out */
    size_t n_train, n_val;
    char source[160];               /* "generated from seed 0" or the file's name */
} Corpus;

/* The default corpus, the same for every seed-equal run on every machine:
 * pseudo-words in paragraphs of one topic each, with spans of the last few
 * words repeated (see data.c for why attention matters in it). */
void corpus_generate(Corpus *c, size_t n_chars, uint64_t seed);
/* A corpus whose every symbol (of V, uniform at random) is, with probability
 * 0.9, a copy of the symbol lag places back: the next symbol is told by one
 * far key and nothing else. The check of Break 2's training uses it. */
void corpus_lag_copy(Corpus *c, size_t n_chars, int V, int lag, uint64_t seed);
/* A UTF-8 text file, one symbol per code point. Bad input (missing, a
 * directory, empty, not UTF-8 text, more than 256 symbols, too short for
 * T + 1 characters in each split) exits 2 with one line naming the file. */
void corpus_load(Corpus *c, const char *path, int T);
void corpus_free(Corpus *c);

/* B windows of T + 1 symbols from the training split at random offsets:
 * x = the first T, y = the next symbol of each (x shifted by one). */
void corpus_batch(const Corpus *c, Rng *rng, int B, int T, int *x, int *y);
/* Validation batch k of nb: fixed windows spread evenly over the held-out split. */
void corpus_val_batch(const Corpus *c, int k, int nb, int B, int T, int *x, int *y);
/* The loss a model without attention cannot beat: the cross-entropy of the
 * held-out split under the next-symbol-given-this-symbol statistics of the
 * training split (bigram counts, add-0.1 smoothing), in nats. */
double corpus_bigram_floor(const Corpus *c);

/* UTF-8, for --data files and for --generate's prompt and text: the next code point of s[*i .. n)
 * (advancing *i), or -1 if the bytes there are not UTF-8; and code point cp written into buf (at most 4
 * bytes), returning the byte count. */
long utf8_next(const unsigned char *s, size_t n, size_t *i);
int utf8_put(uint32_t cp, char *buf);

#ifdef __cplusplus
}
#endif

#endif
