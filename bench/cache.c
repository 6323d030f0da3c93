/* prd-bench cache: the CPU layer (src/magazine.c) against the slab layer alone and malloc.
 *
 *   prd-bench cache [--threads N] [--size S] [--mode all|mag|slab|malloc] [--iters N]
 *                   [--rounds R] [--json] [--smoke]
 *
 *   1. pairs: alloc+free pairs per second, every thread doing the same number of pairs, for
 *      1 thread and for every thread count up to the cores present (or N only), through the
 *      magazine layer (a cache with magazines: the hit path), the slab layer alone (the same
 *      cache with PRD_CACHE_NOMAGAZINE) and the process's malloc/free of the same size (so
 *      LD_PRELOAD of jemalloc, mimalloc or tcmalloc gives theirs: bench/compare-cache.sh).
 *      The modes run interleaved, round by round; each figure is the median of the rounds.
 *   2. depot visits: one thread runs the alternating pattern at the magazine boundary (loaded
 *      exactly full, one object held: free it, allocate it, free it ...) and bursts of 3M
 *      allocations then 3M frees (more than both magazines hold); visits = operations that
 *      were not magazine hits (statistics).  The two magazines guarantee at most one visit per
 *      M operations (seed 004).
 *
 * --json: one object per point, then
 *   {"bench":"cache","summary":true,"mag_vs_slab_1t":X,"mag_vs_malloc_1t":Y,"scaling":Z,
 *    "depot_visits_per_op":D}
 * (with --mode malloc or mag only, the point lines carry ns_per_pair for the compare script).
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "internal.h"

#define ROUNDS_DEFAULT 5
#define MAX_THREADS 256

enum mode { M_MAG, M_SLAB, M_MALLOC, M_N };
static const char *const mode_name[M_N] = { "mag", "slab", "malloc" };

struct job {
  enum mode j_mode;
  prd_cache_t *j_cp;
  size_t j_size;
  long j_iters;
  pthread_barrier_t *j_start;
  uintptr_t j_sink;
  uint64_t j_t0, j_t1;   /* each thread times itself: the main thread may run late */
};

static uint32_t ops_m;   /* M during the depot-visit patterns */

static void *pair_thread(void *arg)
{
  struct job *j = arg;
  uintptr_t sink = 0;
  pthread_barrier_wait(j->j_start);
  j->j_t0 = bench_now_ns();
  if (j->j_mode == M_MALLOC) {
    for (long i = 0; i < j->j_iters; i++) {
      void *p = malloc(j->j_size);
      sink += (uintptr_t)p;
      free(p);
    }
  } else {
    for (long i = 0; i < j->j_iters; i++) {
      void *p = prd_cache_alloc(j->j_cp, 0);
      sink += (uintptr_t)p;
      prd_cache_free(j->j_cp, p);
    }
  }
  j->j_t1 = bench_now_ns();
  j->j_sink = sink;
  return NULL;
}

/* Pairs per second of `threads` threads doing `iters` pairs each. */
static double run_pairs(enum mode m, prd_cache_t *cp, size_t size, int threads, long iters)
{
  pthread_t t[MAX_THREADS];
  struct job jobs[MAX_THREADS];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
  for (int i = 0; i < threads; i++) {
    jobs[i] = (struct job){ m, cp, size, iters, &start, 0, 0, 0 };
    pthread_create(&t[i], NULL, pair_thread, &jobs[i]);
  }
  pthread_barrier_wait(&start);
  uint64_t t0 = UINT64_MAX, t1 = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    t0 = PRD_MIN(t0, jobs[i].j_t0);
    t1 = PRD_MAX(t1, jobs[i].j_t1);
  }
  uint64_t ns = PRD_MAX(t1 - t0, (uint64_t)1);
  pthread_barrier_destroy(&start);
  return (double)threads * (double)iters / ((double)ns / 1e9);
}

/* Operations that were not magazine hits, per operation, for one pattern. */
static double depot_visits(prd_cache_t *cp, bool bursts, long reps)
{
  prd_cache_stats_t s0 = PRD_CACHE_STATS_INIT, s1 = PRD_CACHE_STATS_INIT;
  prd_cache_stats(cp, &s0);
  ops_m = (uint32_t)s0.mag_size;
  uint32_t M = (uint32_t)s0.mag_size;
  uint32_t burst = 3 * M;   /* more than both magazines hold: the depot must be visited */
  void **objs = calloc((size_t)burst + 2, sizeof(void *));
  prd_thread_flush();
  /* hold one object, then make the loaded magazine exactly full */
  void *e = prd_cache_alloc(cp, 0);
  for (uint32_t i = 0; i < M; i++)
    objs[i] = prd_cache_alloc(cp, 0);
  for (uint32_t i = 0; i < M; i++)
    prd_cache_free(cp, objs[i]);
  prd_cache_stats(cp, &s0);
  uint64_t ops = 0;
  for (long r = 0; r < reps; r++) {
    if (!bursts) {
      prd_cache_free(cp, e);      /* free, alloc, free, alloc across the boundary */
      e = prd_cache_alloc(cp, 0);
      ops += 2;
    } else {
      for (uint32_t i = 0; i < burst; i++)
        objs[i] = prd_cache_alloc(cp, 0);
      for (uint32_t i = 0; i < burst; i++)
        prd_cache_free(cp, objs[i]);
      ops += 2 * (uint64_t)burst;
    }
  }
  prd_cache_free(cp, e);
  prd_cache_stats(cp, &s1);
  free(objs);
  uint64_t hits = (s1.mag_alloc_hits - s0.mag_alloc_hits) + (s1.mag_free_hits - s0.mag_free_hits);
  return ops ? (double)(ops - hits) / (double)ops : 0.0;
}

static int cache_bench_main(int argc, char **argv)
{
  prd_option_set("magazines", "1");
  struct bench_common bc = { .bc_rounds = ROUNDS_DEFAULT };
  argc = bench_parse_common(argc, argv, &bc);
  int only_threads = 0;
  size_t size = 64;
  long iters = 0;
  bool want[M_N] = { true, true, true };
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--threads") == 0) {
      only_threads = (int)bench_arg_long(argv[0], "--threads", argv[++i], 1, MAX_THREADS);
    } else if (strcmp(argv[i], "--size") == 0) {
      size = (size_t)bench_arg_long(argv[0], "--size", argv[++i], 1, 1 << 20);
    } else if (strcmp(argv[i], "--iters") == 0) {
      iters = bench_arg_long(argv[0], "--iters", argv[++i], 1, LONG_MAX);
    } else if (strcmp(argv[i], "--mode") == 0) {
      const char *m = bench_arg_text(argv[0], "--mode", argv[++i], "all, mag, slab or malloc");
      bool all = strcmp(m, "all") == 0;
      for (int k = 0; k < M_N; k++)
        want[k] = all || strcmp(m, mode_name[k]) == 0;
      if (!all && !want[0] && !want[1] && !want[2]) {
        fprintf(stderr, "prd-bench cache: unknown mode '%s'\n", m);
        return 2;
      }
    } else {
      fprintf(stderr, "prd-bench cache: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1)
    cores = 1;
  int rounds = bc.bc_smoke ? 2 : bc.bc_rounds;
  if (iters == 0)
    iters = bc.bc_smoke ? 20000 : 2000000;
  int tmin = only_threads ? only_threads : 1;
  int tmax = only_threads ? only_threads : (int)cores;

  prd_cache_t *cps[M_N] = { NULL, NULL, NULL };
  cps[M_MAG] = prd_cache_create("bench_mag", size, 0, NULL, NULL, NULL, NULL, NULL,
                                PRD_CACHE_NODEBUG);
  cps[M_SLAB] = prd_cache_create("bench_slab", size, 0, NULL, NULL, NULL, NULL, NULL,
                                 PRD_CACHE_NODEBUG | PRD_CACHE_NOMAGAZINE);
  if (cps[M_MAG] == NULL || cps[M_SLAB] == NULL)
    return 1;
  double med[M_N][MAX_THREADS + 1];
  memset(med, 0, sizeof(med));
  if (!bc.bc_json)
    printf("alloc+free pairs per second, %zu-byte objects, %ld pairs per thread, median of %d "
           "interleaved rounds\n%8s %14s %14s %14s\n", size, iters, rounds, "threads",
           "magazine", "slab alone", "malloc");
  for (int t = tmin; t <= tmax; t++) {
    double v[M_N][BENCH_ROUNDS_MAX];
    for (int r = 0; r < rounds + 1; r++) {
      bench_progress(&bc, "cache", "pairs", r, rounds + 1);
      for (int m = 0; m < M_N; m++)
        if (want[m]) {
          double x = run_pairs((enum mode)m, cps[m], size, t, iters);
          if (r > 0)   /* round 0 warms magazines, slabs and malloc's caches */
            v[m][r - 1] = x;
        }
    }
    for (int m = 0; m < M_N; m++)
      if (want[m])
        med[m][t] = bench_median(v[m], (size_t)rounds);
    if (bc.bc_json) {
      for (int m = 0; m < M_N; m++)
        if (want[m])
          printf("{\"bench\":\"cache\",\"mode\":\"%s\",\"threads\":%d,\"size\":%zu,"
                 "\"pairs_per_s\":%.0f,\"ns_per_pair\":%.3f}\n", mode_name[m], t, size,
                 med[m][t], 1e9 * t / med[m][t]);
    } else {
      printf("%8d %14.0f %14.0f %14.0f\n", t, med[M_MAG][t], med[M_SLAB][t], med[M_MALLOC][t]);
    }
  }
  double alt = depot_visits(cps[M_MAG], false, bc.bc_smoke ? 1000 : 200000);
  double burst = depot_visits(cps[M_MAG], true, bc.bc_smoke ? 100 : 20000);
  double visits = PRD_MAX(alt, burst);
  double m2s = med[M_SLAB][tmin] > 0 ? med[M_MAG][tmin] / med[M_SLAB][tmin] : 0;
  double m2m = med[M_MALLOC][tmin] > 0 ? med[M_MAG][tmin] / med[M_MALLOC][tmin] : 0;
  double scaling = med[M_MAG][tmin] > 0 ? med[M_MAG][tmax] / med[M_MAG][tmin] : 0;
  if (bc.bc_json) {
    printf("{\"bench\":\"cache\",\"pattern\":\"alternating\",\"depot_visits_per_op\":%.5f,"
           "\"mag_size\":%u}\n", alt, ops_m);
    printf("{\"bench\":\"cache\",\"pattern\":\"bursts\",\"depot_visits_per_op\":%.5f}\n", burst);
    printf("{\"bench\":\"cache\",\"summary\":true,\"mag_vs_slab_1t\":%.3f,\"mag_vs_malloc_1t\":"
           "%.3f,\"scaling\":%.3f,\"depot_visits_per_op\":%.5f}\n", m2s, m2m, scaling, visits);
  } else {
    printf("depot visits per operation: alternating at the boundary %.5f, bursts of 3M %.5f "
           "(M = %u: bound 1/M = %.5f)\n", alt, burst, ops_m, 1.0 / (double)ops_m);
    printf("summary: magazine vs slab alone (%d thread%s) %.2fx (goal >= 2), vs malloc %.2fx; "
           "scaling %d -> %d threads %.2fx\n", tmin, tmin == 1 ? "" : "s", m2s, m2m, tmin,
           tmax, scaling);
  }
  prd_cache_destroy(cps[M_MAG]);
  prd_cache_destroy(cps[M_SLAB]);
  return visits * (double)ops_m <= 1.0 + 1e-9 ? 0 : 1;
}

PRD_BENCH("cache", "CPU layer: magazine vs slab alone vs malloc pairs, scaling, depot visits",
          cache_bench_main)
