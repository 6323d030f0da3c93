/* prd-bench: the benchmark driver.  `prd-bench list` names every benchmark; `prd-bench all`
 * runs them in turn; `--smoke` runs each in its tiny mode (used by ctest). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static struct prd_bench *benches;

void prd_bench_register(struct prd_bench *b)
{
  /* keep them sorted by name so `list` and `all` are stable */
  struct prd_bench **pp = &benches;
  while (*pp && strcmp((*pp)->b_name, b->b_name) < 0)
    pp = &(*pp)->b_next;
  b->b_next = *pp;
  *pp = b;
}

int bench_parse_common(int argc, char **argv, struct bench_common *bc)
{
  int out = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0)
      bc->bc_json = true;
    else if (strcmp(argv[i], "--smoke") == 0)
      bc->bc_smoke = true;
    else if (strcmp(argv[i], "--rounds") == 0)
      bc->bc_rounds = (int)bench_arg_long(argv[0], "--rounds", argv[++i], 1, BENCH_ROUNDS_MAX);
    else
      argv[out++] = argv[i];
  }
  argv[out] = NULL;
  return out;
}

/* A bad value of a numeric option: the usage error, want saying what is taken. */
__attribute__((noreturn)) static void bench_arg_bad(const char *bench, const char *opt,
                                                    const char *value, const char *want)
{
  if (value == NULL)
    fprintf(stderr, "prd-bench %s: %s needs a value: %s\n", bench, opt, want);
  else
    fprintf(stderr, "prd-bench %s: %s '%s' is not %s\n", bench, opt, value, want);
  exit(2);
}

const char *bench_arg_text(const char *bench, const char *opt, const char *value,
                           const char *want)
{
  if (value == NULL)
    bench_arg_bad(bench, opt, NULL, want);
  return value;
}

bool bench_digits_first(const char *s)
{
  return s != NULL && *s >= '0' && *s <= '9';
}

long bench_arg_long(const char *bench, const char *opt, const char *value, long min, long max)
{
  char *end = (char *)value;   /* no number read: end == value, refused */
  long v = 0;
  if (bench_digits_first(value)) {   /* strtol alone takes blanks and a sign */
    errno = 0;
    v = strtol(value, &end, 10);
  }
  if (value == NULL || end == value || *end != '\0' || errno == ERANGE || v < min || v > max) {
    char want[96];
    if (max == LONG_MAX)
      snprintf(want, sizeof(want), "a whole number of at least %ld", min);
    else
      snprintf(want, sizeof(want), "a whole number from %ld to %ld", min, max);
    bench_arg_bad(bench, opt, value, want);
  }
  return v;
}

double bench_arg_positive(const char *bench, const char *opt, const char *value, double max)
{
  char *end = (char *)value;   /* no number read: end == value, refused */
  double v = 0;
  /* digits with at most one point: strtod alone takes blanks, signs, hex and exponents */
  if (bench_digits_first(value) && strspn(value, "0123456789.") == strlen(value) &&
      strchr(value, '.') == strrchr(value, '.'))
    v = strtod(value, &end);
  if (value == NULL || end == value || *end != '\0' || !isfinite(v) || !(v > 0) || v > max) {
    char want[96];
    snprintf(want, sizeof(want), "a number above 0 and at most %g", max);
    bench_arg_bad(bench, opt, value, want);
  }
  return v;
}

uint64_t bench_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bench_percentile(double *v, size_t n, double p)
{
  if (n == 0)
    return 0;
  qsort(v, n, sizeof(*v), cmp_double);
  double idx = p / 100.0 * (double)(n - 1);
  size_t lo = (size_t)idx;
  size_t hi = lo + 1 < n ? lo + 1 : lo;
  double frac = idx - (double)lo;
  return v[lo] * (1 - frac) + v[hi] * frac;
}

double bench_median(double *v, size_t n)
{
  return bench_percentile(v, n, 50);
}

void bench_progress(const struct bench_common *bc, const char *name, const char *what,
                    int i, int n)
{
  static uint64_t t0;
  if (bc->bc_json || !isatty(STDERR_FILENO))
    return;
  if (t0 == 0)
    t0 = bench_now_ns();
  fprintf(stderr, "\r[%s] %s (%d/%d) %.1fs   ", name, what, i, n,
          (double)(bench_now_ns() - t0) / 1e9);
  if (i == n)
    fputc('\n', stderr);
  fflush(stderr);
}

static long status_kb(const char *key)
{
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL)
    return -1;
  char line[256];
  long v = -1;
  size_t klen = strlen(key);
  while (fgets(line, sizeof(line), f))
    if (strncmp(line, key, klen) == 0) {
      v = strtol(line + klen, NULL, 10);
      break;
    }
  fclose(f);
  return v;
}

long bench_peak_rss_kb(void) { return status_kb("VmHWM:"); }
long bench_rss_kb(void) { return status_kb("VmRSS:"); }

static void usage(void)
{
  fprintf(stderr, "usage: prd-bench NAME [--json] [--smoke] [--rounds N] [options]\n"
                  "       prd-bench all [--json] [--out DIR]   every benchmark\n"
                  "       prd-bench --smoke                    each one, tiny\n"
                  "benchmarks:\n");
  for (struct prd_bench *b = benches; b; b = b->b_next)
    fprintf(stderr, "  %-12s %s\n", b->b_name, b->b_help);
}

/* Runs one benchmark with its own copy of argv (benchmarks edit argv). */
static int run_one(struct prd_bench *b, int argc, char **argv)
{
  char **av = calloc((size_t)argc + 2, sizeof(*av));
  if (av == NULL)
    return 1;
  av[0] = (char *)b->b_name;
  for (int i = 1; i < argc; i++)
    av[i] = argv[i];
  int rc = b->b_main(argc, av);
  free(av);
  return rc;
}

int main(int argc, char **argv)
{
  if (argc >= 2 && strcmp(argv[1], "--smoke") == 0) {
    int rc = 0;
    char *av[] = { NULL, (char *)"--smoke", NULL };
    for (struct prd_bench *b = benches; b; b = b->b_next) {
      fprintf(stderr, "smoke: %s\n", b->b_name);
      fflush(stdout);
      int r = run_one(b, 2, av);
      if (r != 0) {
        fprintf(stderr, "smoke: %s failed (%d)\n", b->b_name, r);
        rc = 1;
      }
    }
    return rc;
  }
  if (argc < 2 || strcmp(argv[1], "list") == 0 || strcmp(argv[1], "--help") == 0) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "all") == 0) {
    const char *outdir = NULL;
    int n = 1;
    for (int i = 2; i < argc; i++) {
      if (strcmp(argv[i], "--out") == 0)
        outdir = bench_arg_text("all", "--out", argv[++i], "a directory");
      else
        argv[n++] = argv[i];
    }
    int rc = 0;
    for (struct prd_bench *b = benches; b; b = b->b_next) {
      fprintf(stderr, "== prd-bench %s\n", b->b_name);
      char path[1024];
      int saved = -1;
      if (outdir) {
        mkdir(outdir, 0777);
        snprintf(path, sizeof(path), "%s/%s.json", outdir, b->b_name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (fd < 0) {
          perror(path);
          return 1;
        }
        fflush(stdout);
        saved = dup(STDOUT_FILENO);
        dup2(fd, STDOUT_FILENO);
        close(fd);
      }
      if (run_one(b, n, argv) != 0)
        rc = 1;
      if (saved >= 0) {
        fflush(stdout);
        dup2(saved, STDOUT_FILENO);
        close(saved);
        fprintf(stderr, "   wrote %s\n", path);
      }
    }
    return rc;
  }
  for (struct prd_bench *b = benches; b; b = b->b_next)
    if (strcmp(b->b_name, argv[1]) == 0)
      return run_one(b, argc - 1, argv + 1);
  fprintf(stderr, "prd-bench: no benchmark named '%s'\n", argv[1]);
  usage();
  return 2;
}
