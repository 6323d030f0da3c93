/*
 * test_malloc_frag.c: the malloc classes' memory (src/slab.c sections 2 and 6): the packed
 * layout of the classes (the slab record in the slab, no bufctls, slabs of several pages
 * with at most 1/32 of each not buffers), free slabs of a class given back to the heap arena
 * at once for other classes, and a finished phase's depot emptied when the heap grows.
 */
// prd-test-labels: unit
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "internal.h"
#include "prd_test.h"

static prd_cache_stats_t stats_of(prd_cache_t *cp)
{
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  CHECK_EQ(prd_cache_stats(cp, &st), 0);
  return st;
}

static size_t heap_total(void)
{
  prd_vmem_stats_t vs = { .size = sizeof(vs) };
  CHECK_EQ(prd_vmem_stats(prd_heap_arena(), &vs), 0);
  return (size_t)vs.bytes_total;
}

/* Whether the classes run with buffer debugging (PRUDENCE_DEBUG): the large layout then. */
static bool debugging(void)
{
  return (prd__malloc_class_cache(640)->cache_flags & (PRD_CF_DEBUG | PRD_CF_NOMARK)) != 0;
}

/* Every class from 512 B that the packed layout fits (the ones near 512-700 B among them)
 * has the small layout in a power-of-two slab of at most 128 KiB, of which at most 1/32 is
 * not buffers (tail, prd_slab_t, bitmaps); the others keep one buffer per slab or so. */
static void test_packed_layout(void)
{
  if (debugging())
    return;
  size_t must[] = { 512, 640, 768, 1024, 1280, 2048, 3072 };
  for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++)
    CHECK_EQ(stats_of(prd__malloc_class_cache(must[i])).large_layout, 0);
  size_t s;
  for (unsigned i = 0; (s = prd__malloc_class_size(i)) != 0; i++) {
    prd_cache_stats_t st = stats_of(prd__malloc_class_cache(s));
    if (st.large_layout)
      continue;
    CHECK(PRD_ISP2(st.slab_size) && st.slab_size <= ((size_t)128 << 10));
    if (s >= 16)   /* the 8 B class: its bitmaps alone are 1/32 of a slab */
      CHECK((st.slab_size - st.bufs_per_slab * st.chunk_size) * 32 <= st.slab_size);
    if (s > 4096)
      continue;
    CHECK(st.slab_size <= ((size_t)64 << 10));
  }
  /* 640 B: 102 buffers in 64 KiB */
  prd_cache_stats_t st = stats_of(prd__malloc_class_cache(640));
  CHECK_EQ(st.slab_size, 65536);
  CHECK_EQ(st.bufs_per_slab, 102);
}

#define MIB ((size_t)1 << 20)

static void **fill(size_t size, size_t bytes, size_t *n)
{
  *n = bytes / size;
  void **v = malloc(*n * sizeof(void *));   /* the C library's: no class of ours */
  CHECK(v != NULL);
  for (size_t i = 0; v != NULL && i < *n; i++) {
    v[i] = prd_malloc(size);
    CHECK(v[i] != NULL);
  }
  return v;
}

static void drop(void **v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    prd_free(v[i]);
  free(v);
}

/* A class's slabs, once wholly free in the slab layer, are in the heap arena at once (a span
 * left wholly free goes back to the kernel, vmem.c section 7): another class's allocations
 * then take the heap no higher than the first class's peak.  Kept as the first class's free
 * slabs, they would stand beside the second class's. */
static void test_free_slabs_reused(void)
{
  if (debugging())
    return;
  size_t n2, n6;
  void **v2 = fill(2000, 16 * MIB, &n2);
  size_t peak = heap_total();
  prd_cache_t *c2 = prd__malloc_class_cache(2000);
  drop(v2, n2);
  prd__mag_depot_reap(c2, true);   /* the depot's rounds to the slabs, no slab reap */
  prd_cache_stats_t st = stats_of(c2);
  CHECK(st.slabs_free <= 2);
  void **v6 = fill(640, 12 * MIB, &n6);
  CHECK(heap_total() <= peak);
  drop(v6, n6);
}

/* A finished phase's memory in the depot of its class is emptied into the slabs when the
 * heap grows by another class and that depot stayed idle: most of it serves the next phase. */
static void test_phase_change(void)
{
  if (debugging())
    return;
  size_t n2, n6;
  void **v2 = fill(2000, 32 * MIB, &n2);
  drop(v2, n2);   /* into the thread's magazines and the depot: no reap of any kind */
  size_t before = heap_total();
  void **v6 = fill(640, 32 * MIB, &n6);
  size_t grew = heap_total() - before;
  CHECK(grew <= 12 * MIB);   /* two growth reaps' lag, 8 MiB, and a span of slack */
  drop(v6, n6);
}

/* The same while the first class is still being freed: a cache that evicts old values of
 * one size for new ones of another (redis with maxmemory) frees into the first class's depot
 * all through the second's growth.  Guards the growth reap's test of a finished phase, which
 * was a depot that moved no magazine at all: this one takes a full magazine at every few
 * frees, so it was never emptied and the heap grew by the whole second phase. */
static void test_phase_change_draining(void)
{
  if (debugging())
    return;
  size_t n2, n6 = (32 * MIB) / 640;
  void **v2 = fill(2000, 32 * MIB, &n2);
  void **v6 = malloc(n6 * sizeof(void *));
  CHECK(v6 != NULL);
  size_t before = heap_total(), freed = 0;
  for (size_t i = 0; v6 != NULL && i < n6; i++) {
    v6[i] = prd_malloc(640);
    CHECK(v6[i] != NULL);
    for (size_t want = (i + 1) * n2 / n6; freed < want; freed++)
      prd_free(v2[freed]);   /* the first class's blocks, as the second's arrive */
  }
  size_t grew = heap_total() - before;
  printf("# heap growth while one class drained and another grew by 32 MiB: %zu MiB\n",
         grew / MIB);
  CHECK(grew <= 16 * MIB);
  for (; freed < n2; freed++)
    prd_free(v2[freed]);
  free(v2);
  drop(v6, n6);
}

/* This thread's minor page faults so far. */
static long minor_faults(void)
{
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_minflt;
}

/* Two classes in turn, n blocks of each a turn, each block's first word written: the page
 * faults of the turns after the first six (the heap settled). */
static long alternate(size_t a, size_t b, size_t n)
{
  enum { TURNS = 16 };
  void **v = malloc(n * sizeof(void *));
  CHECK(v != NULL);
  long f0 = 0;
  for (int t = 0; v != NULL && t < TURNS; t++) {
    if (t == 6)
      f0 = minor_faults();
    size_t size = t % 2 == 0 ? a : b;
    for (size_t i = 0; i < n; i++) {
      v[i] = prd_malloc(size);
      CHECK(v[i] != NULL);
      if (v[i] != NULL)
        *(size_t *)v[i] = i;
    }
    for (size_t i = 0; i < n; i++)
      prd_free(v[i]);
  }
  free(v);
  long f = minor_faults() - f0;
  printf("# page faults over 10 turns of %zu B and %zu B blocks, %zu each: %ld\n", a, b, n, f);
  return f;
}

/* Two classes in turn, each allocated and then freed whole before the other grows: the
 * class that grows is allocating, not a finished phase, though its refills come from its
 * slabs and its depot moves nothing until it frees.  Guards the growth reap's test of a
 * draining depot when it counted only full magazines given: the growing class's own frees
 * were reaped as they came, its slabs purged, and every turn faulted the other's memory
 * back in (ten times the faults). */
static void test_alternating_classes(void)
{
  if (debugging())
    return;
  /* 1000 B x 100,000 is about 24,000 pages, refaulted at every turn of that class */
  CHECK(alternate(64, 1000, 100000) < 20000);
}

/* A class kept for its turns whose turns end: with decay off no pass ends the keep, so the
 * growth of other classes does, once it reaches twice what the class came back for.  Guards
 * a keep that only a decay pass ended: with decay_ms=0 a class that once alternated kept its
 * depot through any growth.  (Classes no test before uses: a class whose depot another test
 * left full takes its turns there, and nothing grows.) */
static void test_alternation_over(void)
{
  if (debugging())
    return;
  char decay[32];
  snprintf(decay, sizeof(decay), "%ld", prd_option_get("decay_ms"));
  CHECK_EQ(prd_option_set("decay_ms", "0"), 0);
  (void)alternate(1500, 6000, 4000);   /* the 6 KiB class kept, its 24 MB in its depot */
  prd_cache_t *cp = prd__malloc_class_cache(6000);
  prd_cache_stats_t st = stats_of(cp);
  uint64_t kept = st.depot_rounds * st.chunk_size;
  size_t n;
  void **v = fill(3000, 64 * MIB, &n);   /* 16 marks: more than twice what it came back for */
  st = stats_of(cp);
  uint64_t after = st.depot_rounds * st.chunk_size;
  printf("# 6 KiB class's depot: %llu KiB kept, %llu KiB after 64 MiB of another class\n",
         (unsigned long long)(kept >> 10), (unsigned long long)(after >> 10));
  CHECK(kept >= 16 * MIB);
  CHECK(after <= 4 * MIB);
  drop(v, n);
  CHECK_EQ(prd_option_set("decay_ms", decay), 0);
}

/* Two classes in turn whose phases differ in size: the smaller phase's growth reaps the larger
 * class's whole depot, which it cannot take, so the heap arena purges the rest, and the larger
 * class faults it back in at its next turn.  Such a class, back before the growth could use
 * what was reaped, keeps its depot from then on.  Guards the reap at every turn (1000 B and
 * 4000 B: 6,250 pages faulted a pair of turns), and blocks the heap's quantum caches serve
 * (20,000 B) counted as growth at every allocation though their magazines served them: the
 * 4096 B class reaped at every turn (12,000 faults a pair).  Counted over the turns after the
 * first six, each block's first word written. */
static void test_alternating_unequal(void)
{
  if (debugging())
    return;
  CHECK(alternate(1000, 4000, 10000) < 5000);
  CHECK(alternate(4000, 20000, 2000) < 5000);
}

/* Bytes of free slabs the library's own caches (magazines, slab structures) hold. */
static size_t internal_free_bytes(void)
{
  static prd__cache_snap_t snap[256];
  size_t n = prd__cache_snapshot(snap, 256), sum = 0;
  CHECK(n <= 256);
  for (size_t i = 0; i < n && i < 256; i++)
    if (snap[i].cs_internal)
      sum += (size_t)(snap[i].cs_stats.slabs_free * snap[i].cs_stats.slab_size);
  return sum;
}

/* A dropped phase of small blocks fills thousands of magazines; when the growth reap empties
 * the depot that holds them, the magazines' slabs go to the heap arena too.  Guards the
 * magazine caches keeping those free slabs (megabytes, a magazine per 143 blocks) until a
 * decay pass, so that a program's next phase, built on the heap the dropped one left, ran with
 * them resident. */
static void test_phase_change_magazines(void)
{
  if (debugging())
    return;
  size_t n1, n6;
  void **v1 = fill(32, 24 * MIB, &n1);   /* 786k blocks: about 5,500 magazines, 6 MiB */
  drop(v1, n1);
  void **v6 = fill(640, 32 * MIB, &n6);
  size_t left = internal_free_bytes();
  printf("# internal caches' free slabs after the next phase: %zu KiB\n", left >> 10);
  CHECK(left <= 2 * MIB);
  drop(v6, n6);
}

/* Guards: a thread's first refill of a malloc class from the slab layer took half a magazine
 * into a new magazine, and a thread that allocated a few blocks and exited handed both back
 * (the buffers to the slab layer, the magazine to the depot's empty list): a program whose
 * short threads come and go (a thread per request) made a magazine per thread and moved half a
 * magazine of buffers in and out of the slab layer per thread and class (prd-bench malloc
 * --workload threads: 115 MiB peak RSS against 3 MiB).  A thread's first refill of a class
 * takes the depot's empty magazine and a few buffers. */
#define CHURN_WAVE 4
#define CHURN_WAVES 100
#define CHURN_BLOCKS 4
static pthread_barrier_t churn_bar;

static void *churn_thread(void *arg)
{
  (void)arg;
  void *p[CHURN_BLOCKS];
  pthread_barrier_wait(&churn_bar);   /* the wave's threads overlap: none finds another's magazines */
  for (int i = 0; i < CHURN_BLOCKS; i++)
    p[i] = prd_malloc(200);
  for (int i = 0; i < CHURN_BLOCKS; i++)
    prd_free(p[i]);
  return NULL;
}

static void test_thread_churn(void)
{
  if (debugging())
    return;
  prd_cache_t *cp = prd__malloc_class_cache(200);
  prd_free(prd_malloc(200));   /* the class started */
  prd_cache_stats_t a = stats_of(cp);
  pthread_barrier_init(&churn_bar, NULL, CHURN_WAVE);
  for (int w = 0; w < CHURN_WAVES; w++) {
    pthread_t t[CHURN_WAVE];
    for (int i = 0; i < CHURN_WAVE; i++)
      CHECK_EQ(pthread_create(&t[i], NULL, churn_thread, NULL), 0);
    for (int i = 0; i < CHURN_WAVE; i++)
      pthread_join(t[i], NULL);
  }
  pthread_barrier_destroy(&churn_bar);
  prd_cache_stats_t b = stats_of(cp);
  uint64_t threads = CHURN_WAVE * CHURN_WAVES;
  uint64_t taken = b.mag_slab_allocs - a.mag_slab_allocs;   /* misses that reached the slab layer */
  uint64_t mags = b.depot_empty_mags + b.depot_full_mags;
  printf("  %llu threads: %llu misses to the slab layer (%.1f per thread), %llu magazines "
         "in the depot, magazine size %llu\n", (unsigned long long)threads,
         (unsigned long long)taken, (double)taken / (double)threads, (unsigned long long)mags,
         (unsigned long long)b.mag_size);
  /* a thread's first miss of the class goes to the slab layer once, not once per block */
  CHECK(taken <= threads * 2 * CHURN_BLOCKS);
  /* the depot keeps about a wave's magazines, not one per thread that ever ran */
  CHECK(mags <= 4 * CHURN_WAVE);
}

int main(void)
{
  prd_free(prd_malloc(1));   /* malloc started: every class made */
  RUN(test_packed_layout);
  RUN(test_free_slabs_reused);
  RUN(test_phase_change);
  RUN(test_phase_change_draining);
  RUN(test_alternating_classes);
  RUN(test_alternation_over);
  RUN(test_alternating_unequal);
  RUN(test_phase_change_magazines);
  RUN(test_thread_churn);
  return prd_test_done();
}
