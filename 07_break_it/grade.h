/* grade.h: step 07's grader (grade.c): input sets for a student's own tiled attention, and the diagnosis of
 * what the student wrote back. Any language that writes .npy can be graded. */
#ifndef GRADE_H
#define GRADE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Write the input sets (q_SET.npy, k_SET.npy, v_SET.npy) and README.txt into dir (made if missing, with
 * its parents); print: one line saying so. Returns 0, or exits 2 with one line if dir cannot be written. */
int grade_assignment(const char *dir, unsigned long long seed, int print);

enum { GRADE_MAX_SETS = 16 };

/* What grade_dir found. cause: the diagnosis, NULL if every graded set is right; why: its explanation
 * (a static buffer); missing: sets whose files are not there (not graded); unreadable: sets with a file
 * that is there but not a float32 .npy of the set's shape (not graded, failed); f64_files: outputs that
 * were float64 .npy; f64_run: a set graded right has every output the float nearest the float64 result (a
 * float64 run: float32 arithmetic leaves most outputs an ulp or more away). */
typedef struct {
    const char *cause, *why;
    int missing, unreadable, f64_files, f64_run;
    int sets, passed;              /* the input sets, and how many of them are right */
    const char *set_name[GRADE_MAX_SETS];   /* per set: its name, "passed", "failed" or "missing", the grader's line */
    const char *set_status[GRADE_MAX_SETS];
    char set_text[GRADE_MAX_SETS][640];
    char summary[1400];            /* the closing lines: notes and the diagnosis */
} GradeReport;

/* Read the sets and the student's out_SET.npy from dir, compare each with the float64 reference, print
 * (if print) one line per set (PASS, FAIL or MISSING), the notes and the diagnosis. A file that is there
 * but unreadable (not a .npy, truncated, another dtype or shape) fails its set with the reason as its
 * line (and, if print, one line on stderr naming it); the other sets are graded. Returns 0 (every set
 * there and right) or 1 (something missing, unreadable or wrong); 2 if dir cannot be opened (one line on
 * stderr, and rep says so: every set failed, not graded). rep (may be NULL) gets what was found. */
int grade_dir(const char *dir, int print, GradeReport *rep);

/* The results file an autograder reads (Gradescope's results.json and its kin): {"score", "max_score",
 * "output", "tests": [{"name", "score", "max_score", "status", "output"}, ...]}, one test per input set, a
 * point each. Written whole or not at all: into a new file beside path, then renamed over it. 0, or -1
 * after one line if it cannot be written (path as it was). */
int grade_json(const char *path, const GradeReport *r);
/* Can grade_json write path? Makes and removes a file beside it; path itself is not touched. 0, or -1 with
 * errno set. */
int grade_json_probe(const char *path);
/* 1 if text is one JSON value (objects, arrays, strings with their escapes, numbers, true, false, null) and
 * nothing after it: the check of grade_json's file. */
int json_valid(const char *text);

/* Where a score modifier went, if it went to a known wrong place: out (of inputs q, k, v [bh, N, D] with
 * ALiBi slopes [bh]) equals Break ALiBi-after-max or ALiBi-relative at tiles of 16..128. Returns the cause
 * and *tile, or NULL. */
const char *alibi_diagnosis(const float *q, const float *k, const float *v, const float *out, const float *slope,
                            long bh, long N, long D, double tol, long *tile);

/* The grader's own checks (PASS/FAIL lines): the repository's own breaks are written as a student would,
 * graded, and must get their own diagnosis; the intact forward must pass. */
void grade_checks(void);

#ifdef __cplusplus
}
#endif

#endif
