/*
 * bench.h: what every benchmark of prd-bench shares.
 *
 * Each file bench/NAME.c registers its benchmarks with PRD_BENCH(name, help, fn); bench/main.c
 * dispatches `prd-bench NAME [args]`.  Common rules (see docs/benchmarks.md):
 *   - compare as ratios measured side by side in one run, interleaved, and quote medians;
 *   - --json prints one JSON object per line per measured point, then a summary object;
 *   - --smoke runs a tiny version (ctest's bench_smoke uses it so benchmarks do not rot);
 *   - runs longer than a few seconds report progress on stderr when it is a terminal
 *     (never in --json mode).
 */
#ifndef PRD_BENCH_H
#define PRD_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct prd_bench {
  const char *b_name;
  const char *b_help;
  int (*b_main)(int argc, char **argv);
  struct prd_bench *b_next;
};

void prd_bench_register(struct prd_bench *b);

#define PRD_BENCH(name, help, fn)                                                     \
  static struct prd_bench prd_bench_##fn = { name, help, fn, NULL };                  \
  __attribute__((constructor)) static void prd_bench_reg_##fn(void)                   \
  {                                                                                   \
    prd_bench_register(&prd_bench_##fn);                                              \
  }

/* The most --rounds: a benchmark keeps its per-round results in arrays of this size. */
#define BENCH_ROUNDS_MAX 64

/* Options every benchmark understands; bench_parse_common removes them from argv. */
struct bench_common {
  bool bc_json;     /* --json */
  bool bc_smoke;    /* --smoke: tiny sizes, just prove it runs */
  int bc_rounds;    /* --rounds N, 1..BENCH_ROUNDS_MAX (default set by the benchmark) */
};
/* Parses and removes --json, --smoke, --rounds N from argv (argv[0]: the benchmark's name);
 * returns the new argc; argv[argc] is NULL after it. */
int bench_parse_common(int argc, char **argv, struct bench_common *bc);

/* The value of a benchmark's numeric option, parsed strictly: bench_arg_long, all of value a
 * whole number (base 10) in [min, max]; bench_arg_positive, a finite number above 0 and at
 * most max.  A value that is missing (NULL: the option was the last argument) or bad is a
 * usage error: a message that names the benchmark, the option and the value, and exit
 * status 2. */
/* Whether s starts with a decimal digit (what every numeric argument must). */
bool bench_digits_first(const char *s);
long bench_arg_long(const char *bench, const char *opt, const char *value, long min, long max);
double bench_arg_positive(const char *bench, const char *opt, const char *value, double max);
/* The value of an option that takes a word or a list (a mode, a path): value, or, when it is
 * missing, the usage error that names the option and what it takes (want), exit status 2. */
const char *bench_arg_text(const char *bench, const char *opt, const char *value,
                           const char *want);

/* Monotonic nanoseconds. */
uint64_t bench_now_ns(void);
/* Median of n doubles (sorts them). */
double bench_median(double *v, size_t n);
/* Percentile p in [0,100] of n doubles (sorts them). */
double bench_percentile(double *v, size_t n, double p);
/* Progress on stderr when it is a terminal and not in JSON mode: "[name] what (i/n) 3.2s". */
void bench_progress(const struct bench_common *bc, const char *name, const char *what,
                    int i, int n);
/* Peak resident set size of this process in KiB (VmHWM). */
long bench_peak_rss_kb(void);
/* Current resident set size in KiB (VmRSS). */
long bench_rss_kb(void);

#endif
