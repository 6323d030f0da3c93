/* prd-bench decay: memory given back after a free-all, through plain malloc/free (so that
 * LD_PRELOAD picks the allocator; bench/compare-decay.sh runs it under glibc, jemalloc,
 * mimalloc and libprudence-malloc, interleaved).
 *
 *   prd-bench decay [--live MIB] [--mib MIB] [--wait-ms MS] [--json] [--smoke]
 *
 * A server's shape: two threads use the allocator (the second one only starts and waits, as
 * a server's idle workers do).  The main thread allocates --live MiB (default 32) that stay
 * live, then --mib MiB (default 256) of transient blocks, every block touched, sizes drawn
 * from eight classes between 32 B and 192 KiB with a fixed seed; then it frees every transient
 * block and sleeps, reading its RSS every 100 ms for --wait-ms (default 21000: twice
 * libprudence's default decay_ms, and a second).  It reports the RSS right after the
 * free-all, at the end of the wait, and the first time the RSS was at most 1.5 x the live
 * bytes (what malloc_usable_size counts) plus FLOOR_MIB (8 MiB: the program, its libraries
 * and an allocator's fixed structures), or -1.
 *
 * --json: {"bench":"decay","live_kb":L,"rss_peak_kb":P,"rss_free_kb":F,"rss_wait_kb":W,
 *          "goal_kb":G,"goal_ms":T}
 */
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define FLOOR_MIB 8
#define MAX_MIB (LONG_MAX >> 20)   /* --live, --mib: the bytes (MiB << 20) fit a long */
#define SAMPLE_MS 100

static const size_t decay_sizes[] = { 32, 100, 512, 640, 2000, 8192, 40000, 196608 };

static size_t pick_size(uint64_t *s)
{
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *s = x;
  return decay_sizes[x % (sizeof(decay_sizes) / sizeof(decay_sizes[0]))];
}

/* Mallocs `bytes` in blocks of the classes, touched; returns them (NULL-terminated) and the
 * usable bytes in *usable. */
static void **alloc_blocks(size_t bytes, uint64_t *seed, size_t *usable)
{
  size_t cap = 1024, n = 0, got = 0;
  void **v = malloc(cap * sizeof(void *));
  while (v != NULL && got < bytes) {
    if (n + 1 == cap) {
      void **nv = realloc(v, 2 * cap * sizeof(void *));
      if (nv == NULL)
        break;
      v = nv;
      cap *= 2;
    }
    size_t sz = pick_size(seed);
    char *p = malloc(sz);
    if (p == NULL)
      break;
    memset(p, 0x5a, sz);
    v[n++] = p;
    got += sz;
    *usable += malloc_usable_size(p);
  }
  if (v != NULL)
    v[n] = NULL;
  return v;
}

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER;
static bool idle_done;

static void *idle_worker(void *arg)
{
  (void)arg;
  pthread_setname_np(pthread_self(), "decay-idle");
  /* a worker that served some requests, then waits (enough blocks that every allocator
   * gives this thread its per-thread cache) */
  static void *some[4096];
  for (int r = 0; r < 4; r++) {
    for (int i = 0; i < 4096; i++)
      some[i] = malloc(64 + (size_t)(i % 8) * 64);
    for (int i = 0; i < 4096; i++)
      free(some[i]);
  }
  pthread_mutex_lock(&idle_lock);
  while (!idle_done)
    pthread_cond_wait(&idle_cv, &idle_lock);
  pthread_mutex_unlock(&idle_lock);
  return NULL;
}

static int bench_decay_main(int argc, char **argv)
{
  struct bench_common bc = { 0 };
  argc = bench_parse_common(argc, argv, &bc);
  long live_mib = 32, mib = 256, wait_ms = 21000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--live") == 0)
      live_mib = bench_arg_long(argv[0], "--live", argv[++i], 0, MAX_MIB);
    else if (strcmp(argv[i], "--mib") == 0)
      mib = bench_arg_long(argv[0], "--mib", argv[++i], 1, MAX_MIB);
    else if (strcmp(argv[i], "--wait-ms") == 0)
      wait_ms = bench_arg_long(argv[0], "--wait-ms", argv[++i], 0, LONG_MAX);
    else {
      fprintf(stderr, "prd-bench decay: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (bc.bc_smoke) {
    live_mib = 1;
    mib = 4;
    wait_ms = 200;
  }
  /* libprudence counts a thread named prd-* as one of its own (thread.c), and this program's
   * threads inherit "prd-bench": a server's threads are not named so */
  pthread_setname_np(pthread_self(), "decay-main");
  pthread_t t;
  if (pthread_create(&t, NULL, idle_worker, NULL) != 0) {
    fprintf(stderr, "prd-bench decay: pthread_create failed\n");
    return 1;
  }
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  size_t live_usable = 0, tmp_usable = 0;
  void **live = alloc_blocks((size_t)live_mib << 20, &seed, &live_usable);
  void **tmp = alloc_blocks((size_t)mib << 20, &seed, &tmp_usable);
  if (live == NULL || tmp == NULL) {
    fprintf(stderr, "prd-bench decay: out of memory\n");
    return 1;
  }
  long peak = bench_rss_kb();
  for (size_t i = 0; tmp[i] != NULL; i++)
    free(tmp[i]);
  free(tmp);
  long rss_free = bench_rss_kb();
  long goal = (long)(live_usable / 1024 * 3 / 2) + FLOOR_MIB * 1024;
  long goal_ms = rss_free <= goal ? 0 : -1, rss = rss_free;
  uint64_t t0 = bench_now_ns();
  for (long ms = 0; ms < wait_ms;) {
    usleep(SAMPLE_MS * 1000);
    ms = (long)((bench_now_ns() - t0) / 1000000);
    rss = bench_rss_kb();
    if (goal_ms < 0 && rss <= goal)
      goal_ms = ms;
  }
  pthread_mutex_lock(&idle_lock);
  idle_done = true;
  pthread_cond_signal(&idle_cv);
  pthread_mutex_unlock(&idle_lock);
  pthread_join(t, NULL);
  if (bc.bc_json)
    printf("{\"bench\":\"decay\",\"live_kb\":%zu,\"rss_peak_kb\":%ld,\"rss_free_kb\":%ld,"
           "\"rss_wait_kb\":%ld,\"goal_kb\":%ld,\"goal_ms\":%ld}\n", live_usable / 1024, peak,
           rss_free, rss, goal, goal_ms);
  else
    printf("decay: live %zu KiB; RSS peak %ld KiB, after the free-all %ld KiB, after %ld ms "
           "%ld KiB; goal (1.5 x live + %d MiB) %ld KiB %s\n", live_usable / 1024, peak,
           rss_free, wait_ms, rss, FLOOR_MIB, goal,
           goal_ms < 0 ? "not reached" : goal_ms == 0 ? "reached at once" : "reached");
  for (size_t i = 0; live[i] != NULL; i++)
    free(live[i]);
  free(live);
  return 0;
}

PRD_BENCH("decay", "RSS after a free-all and after the decay delay (LD_PRELOAD an allocator)",
          bench_decay_main)
