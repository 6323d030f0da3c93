/* prd-bench slab: the slab layer alone (src/slab.c).
 *
 *   1. pair: alloc+free pair time per object size through prd_cache_alloc/prd_cache_free,
 *      beside glibc malloc/free of the same size (rounds interleaved, medians).
 *   2. object caching (seed 002 §5.1, "effect of object caching"): an object whose
 *      constructor initializes a mutex, a condition variable and a 256-byte table (a CRC-8
 *      lookup table it computes), allocated, used and freed through a cache, against malloc +
 *      the same initialization + use + destruction + free; the speedup is the ratio of the
 *      medians of interleaved rounds.  The same with a zero-filled table is reported beside
 *      it (not in the summary): what object caching saves is exactly what construction costs.
 *   3. worst case (seed 003 §4.3): in one fixed-size arena (256 MiB; 4 MiB with --smoke),
 *      allocate blocks of one size until the arena is exhausted, free them all, reap, and go
 *      on to the next size (16 ... 4096 B), each size with its own cache, all caches kept
 *      alive to the end.  Every size must get the arena back (nothing allocated after the
 *      reap) and reach about the same number of bytes: the fill ratio of a size is its bytes
 *      reached over the first size's.  The reap runs with the working set set to 0 ms (the
 *      default 15 s would keep the free slabs for 15 s: the benchmark has no reason to wait).
 *
 * --json: one object per measured point, then
 *   {"bench":"slab","summary":true,"object_caching_speedup":X,"worst_case_all_sizes_ok":B,
 *    "worst_case_min_fill_ratio":F}
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "internal.h"

#define ROUNDS_DEFAULT 7

static volatile uintptr_t bench_sink;   /* keeps the optimizer from dropping the work */

/* ---- 1. alloc+free pairs ------------------------------------------------------------------- */
static double pair_cache_ns(prd_cache_t *cp, int iters)
{
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < iters; i++) {
    void *p = prd_cache_alloc(cp, 0);
    bench_sink += (uintptr_t)p;
    prd_cache_free(cp, p);
  }
  return (double)(bench_now_ns() - t0) / iters;
}

static double pair_malloc_ns(size_t size, int iters)
{
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < iters; i++) {
    void *p = malloc(size);
    bench_sink += (uintptr_t)p;
    free(p);
  }
  return (double)(bench_now_ns() - t0) / iters;
}

static void bench_pairs(const struct bench_common *bc, int rounds)
{
  static const size_t sizes[] = { 16, 64, 256, 1024, 4096, 16384 };
  int iters = bc->bc_smoke ? 2000 : 1000000;
  if (!bc->bc_json)
    printf("alloc+free pairs (ns per pair, median of %d rounds)\n  %8s %10s %10s %8s\n", rounds,
           "size", "slab", "malloc", "ratio");
  for (size_t s = 0; s < PRD_ARRAY_SIZE(sizes); s++) {
    prd_cache_t *cp = prd_cache_create("bench_pair", sizes[s], 0, NULL, NULL, NULL, NULL, NULL,
                                       PRD_CACHE_NODEBUG);
    double vs[BENCH_ROUNDS_MAX], vm[BENCH_ROUNDS_MAX];
    bench_progress(bc, "slab", "pairs, one size after another", (int)s, (int)PRD_ARRAY_SIZE(sizes));
    for (int r = 0; r < rounds; r++) {
      if (r % 2 == 0) {
        vs[r] = pair_cache_ns(cp, iters);
        vm[r] = pair_malloc_ns(sizes[s], iters);
      } else {
        vm[r] = pair_malloc_ns(sizes[s], iters);
        vs[r] = pair_cache_ns(cp, iters);
      }
    }
    double ms = bench_median(vs, (size_t)rounds), mm = bench_median(vm, (size_t)rounds);
    if (bc->bc_json)
      printf("{\"bench\":\"slab\",\"test\":\"pair\",\"size\":%zu,\"slab_ns\":%.2f,"
             "\"malloc_ns\":%.2f}\n", sizes[s], ms, mm);
    else
      printf("  %8zu %10.1f %10.1f %8.2f\n", sizes[s], ms, mm, mm / ms);
    prd_cache_destroy(cp);
  }
}

/* ---- 2. object caching ---------------------------------------------------------------------- */
struct heavy {
  pthread_mutex_t h_lock;
  pthread_cond_t h_cv;
  uint32_t h_refcnt;
  uint8_t h_table[256];
};

/* The table: a CRC-8 (polynomial 0x07) lookup table, the classic 256-byte table an object
 * computes when it is set up; `heavy_plain` zero-fills it instead (the cheapest possible
 * initialization), reported beside it so the reader sees what construction costs. */
static bool heavy_plain;

static void heavy_init(struct heavy *h)
{
  pthread_mutex_init(&h->h_lock, NULL);
  pthread_cond_init(&h->h_cv, NULL);
  h->h_refcnt = 0;
  if (heavy_plain) {
    memset(h->h_table, 0, sizeof(h->h_table));
    return;
  }
  for (int i = 0; i < 256; i++) {
    uint8_t crc = (uint8_t)i;
    for (int b = 0; b < 8; b++)
      crc = (uint8_t)((crc & 0x80) ? (crc << 1) ^ 0x07 : crc << 1);
    h->h_table[i] = crc;
  }
}

static void heavy_fini(struct heavy *h)
{
  pthread_cond_destroy(&h->h_cv);
  pthread_mutex_destroy(&h->h_lock);
}

static int heavy_ctor(void *buf, void *priv, int flags)
{
  (void)priv;
  (void)flags;
  heavy_init(buf);
  return 0;
}

static void heavy_dtor(void *buf, void *priv)
{
  (void)priv;
  heavy_fini(buf);
}

/* Both sides use the object the same way: take the lock, bump the count, read the table. */
static void heavy_use(struct heavy *h, int i)
{
  pthread_mutex_lock(&h->h_lock);
  h->h_refcnt++;
  bench_sink += h->h_table[i & 0xff];
  h->h_refcnt--;
  pthread_mutex_unlock(&h->h_lock);
}

static double heavy_cache_ns(prd_cache_t *cp, int iters)
{
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < iters; i++) {
    struct heavy *h = prd_cache_alloc(cp, 0);
    heavy_use(h, i);
    prd_cache_free(cp, h);
  }
  return (double)(bench_now_ns() - t0) / iters;
}

static double heavy_malloc_ns(int iters)
{
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < iters; i++) {
    struct heavy *h = malloc(sizeof(*h));
    heavy_init(h);
    heavy_use(h, i);
    heavy_fini(h);
    free(h);
  }
  return (double)(bench_now_ns() - t0) / iters;
}

static double bench_object_caching(const struct bench_common *bc, int rounds, bool plain)
{
  heavy_plain = plain;
  const char *table = plain ? "zero-filled" : "crc8";
  int iters = bc->bc_smoke ? 2000 : 500000;
  prd_cache_t *cp = prd_cache_create("bench_heavy", sizeof(struct heavy), 0, heavy_ctor,
                                     heavy_dtor, NULL, NULL, NULL, PRD_CACHE_NODEBUG);
  double vc[BENCH_ROUNDS_MAX], vm[BENCH_ROUNDS_MAX];
  for (int r = 0; r < rounds; r++) {
    bench_progress(bc, "slab", plain ? "object caching, zero table" : "object caching", r, rounds);
    if (r % 2 == 0) {
      vc[r] = heavy_cache_ns(cp, iters);
      vm[r] = heavy_malloc_ns(iters);
    } else {
      vm[r] = heavy_malloc_ns(iters);
      vc[r] = heavy_cache_ns(cp, iters);
    }
  }
  double mc = bench_median(vc, (size_t)rounds), mm = bench_median(vm, (size_t)rounds);
  double speedup = mm / mc;
  if (bc->bc_json)
    printf("{\"bench\":\"slab\",\"test\":\"object_caching\",\"table\":\"%s\","
           "\"object_bytes\":%zu,\"cache_ns\":%.2f,\"malloc_init_ns\":%.2f,"
           "\"speedup\":%.3f}\n", table, sizeof(struct heavy), mc, mm, speedup);
  else
    printf("object caching (%zu-byte object: mutex, condvar, 256-byte %s table; ns per "
           "alloc+use+free)\n  cache %.1f   malloc+init+destroy+free %.1f   speedup %.2fx\n",
           sizeof(struct heavy), table, mc, mm, speedup);
  prd_cache_destroy(cp);
  return speedup;
}

/* ---- 3. the worst case of seed 003 §4.3 ------------------------------------------------------ */
static bool bench_worst_case(const struct bench_common *bc, double *min_fill)
{
  size_t bytes = bc->bc_smoke ? (4u << 20) : (256u << 20);
  size_t page = prd__os_page_size();
  void *mem = prd__os_map(bytes);
  if (mem == NULL) {
    fprintf(stderr, "slab: cannot map the %zu-byte arena\n", bytes);
    return false;
  }
  prd_vmem_t *arena = prd_vmem_create("worst_case", mem, bytes, page, NULL, NULL, NULL, 0,
                                      PRD_VM_NOSLEEP);
  long ws = prd_option_get("slab_working_set");
  prd_option_set("slab_working_set", "0");
  size_t cap = bytes / 16 + 1;
  void **blocks = malloc(cap * sizeof(void *));
  prd_cache_t *caches[16];
  size_t ncaches = 0;
  bool ok = true;
  double first = 0;
  *min_fill = 1.0;
  if (!bc->bc_json)
    printf("worst case: fill a %zu MiB arena with one size, free all, reap, next size\n"
           "  %6s %10s %12s %6s %9s %9s %10s\n", bytes >> 20, "size", "blocks", "bytes", "fill",
           "alloc_ns", "free_ns", "left");
  for (size_t size = 16; size <= 4096; size *= 2) {
    bench_progress(bc, "slab", "worst case, one size after another", (int)ncaches, 9);
    prd_cache_t *cp = prd_cache_create("worst_case", size, 0, NULL, NULL, NULL, NULL, arena,
                                       PRD_CACHE_NODEBUG);
    caches[ncaches++] = cp;
    size_t n = 0;
    uint64_t t0 = bench_now_ns();
    while (n < cap) {
      void *p = prd_cache_alloc(cp, PRD_NOSLEEP);
      if (p == NULL)
        break;
      blocks[n++] = p;
    }
    uint64_t t1 = bench_now_ns();
    for (size_t i = 0; i < n; i++)
      prd_cache_free(cp, blocks[i]);
    uint64_t t2 = bench_now_ns();
    prd_cache_reap(cp);
    size_t left = prd_vmem_size(arena, PRD_VMEM_ALLOC);   /* must be 0: all came back */
    double reached = (double)n * (double)size;
    if (first == 0)
      first = reached;
    double fill = first > 0 ? reached / first : 0;
    if (fill < *min_fill)
      *min_fill = fill;
    if (n == 0 || left != 0)
      ok = false;
    double ans = n ? (double)(t1 - t0) / (double)n : 0, fns = n ? (double)(t2 - t1) / (double)n : 0;
    if (bc->bc_json)
      printf("{\"bench\":\"slab\",\"test\":\"worst_case\",\"arena_bytes\":%zu,\"size\":%zu,"
             "\"blocks\":%zu,\"bytes\":%.0f,\"fill_ratio\":%.4f,\"alloc_ns\":%.2f,"
             "\"free_ns\":%.2f,\"arena_left_after_reap\":%zu}\n",
             bytes, size, n, reached, fill, ans, fns, left);
    else
      printf("  %6zu %10zu %12.0f %6.3f %9.1f %9.1f %10zu\n", size, n, reached, fill, ans, fns,
             left);
  }
  for (size_t i = 0; i < ncaches; i++)
    prd_cache_destroy(caches[i]);
  char wsbuf[32];
  snprintf(wsbuf, sizeof(wsbuf), "%ld", ws);
  prd_option_set("slab_working_set", wsbuf);
  prd_vmem_destroy(arena);
  prd__os_unmap(mem, bytes);
  free(blocks);
  return ok;
}

static int slab_bench_main(int argc, char **argv)
{
  prd_option_set("magazines", "0");   /* the slab layer alone; prd-bench cache has both */
  struct bench_common bc = { .bc_rounds = ROUNDS_DEFAULT };
  argc = bench_parse_common(argc, argv, &bc);
  if (argc > 1) {
    fprintf(stderr, "prd-bench slab: unknown argument '%s'\n", argv[1]);
    return 2;
  }
  int rounds = bc.bc_smoke ? 3 : bc.bc_rounds;
  bench_pairs(&bc, rounds);
  double speedup = bench_object_caching(&bc, rounds, false);
  (void)bench_object_caching(&bc, rounds, true);
  double min_fill = 0;
  bool ok = bench_worst_case(&bc, &min_fill);
  if (bc.bc_json)
    printf("{\"bench\":\"slab\",\"summary\":true,\"object_caching_speedup\":%.3f,"
           "\"worst_case_all_sizes_ok\":%s,\"worst_case_min_fill_ratio\":%.4f}\n",
           speedup, ok ? "true" : "false", min_fill);
  else
    printf("summary: object caching speedup %.2fx; worst case: every size got the arena back: "
           "%s; smallest fill ratio %.4f (goal >= 0.95)\n", speedup, ok ? "yes" : "NO",
           min_fill);
  return ok ? 0 : 1;
}

PRD_BENCH("slab", "slab layer: alloc+free pairs, object caching, worst-case fill (003 4.3)",
          slab_bench_main)
