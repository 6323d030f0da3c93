/*
 * stress_purge.c: threads churn blocks of 5-8 pages (the heap arena's quantum caches) while
 * other threads purge those caches' free blocks (malloc_trim and prd_reap decommit every one,
 * slab.c section 6) and decay passes run.  A purge decommits a block it chose while it was
 * free; one that an allocation took between the purge's holds must be left alone, or the
 * program's data in it reads back as zeroes.  Every block carries its owner's stamp in the
 * first and last word of each of its pages, checked before it is freed.  Windows widened with
 * race_delay where the build has it.
 */
// prd-test-labels: stress
#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "prd_test.h"

#if defined(PRD_TSAN) || defined(PRD_ASAN)
#define OPS 20000
#else
#define OPS 200000
#endif
#define WORKERS 3
#define WINDOW 64
#define PAGE 4096

static atomic_int stop;
static atomic_long bad;

static void stamp(uint64_t *p, size_t size, uint64_t v, bool check)
{
  for (size_t off = 0; off < size; off += PAGE) {
    size_t last = (off + PAGE < size ? off + PAGE : size) / 8 - 1;
    if (check) {
      if (p[off / 8] != v || p[last] != v)
        atomic_fetch_add(&bad, 1);
    } else {
      p[off / 8] = v;
      p[last] = v;
    }
  }
}

static void *worker(void *arg)
{
  prd_rng_t rng = prd_rng_seeded((const char *)arg);
  uint64_t *slot[WINDOW] = { NULL };
  size_t size[WINDOW] = { 0 };
  uint64_t tag[WINDOW] = { 0 };
  for (long i = 0; i < OPS; i++) {
    unsigned k = (unsigned)(prd_rng_next(&rng) % WINDOW);
    if (slot[k] != NULL) {
      stamp(slot[k], size[k], tag[k], true);
      prd_free(slot[k]);
    }
    size[k] = 4 * PAGE + 1 + (size_t)(prd_rng_next(&rng) % (4 * PAGE - 1));   /* 5-8 pages */
    tag[k] = prd_rng_next(&rng) | 1;
    slot[k] = prd_malloc(size[k]);
    if (slot[k] == NULL) {
      atomic_fetch_add(&bad, 1);
      break;
    }
    stamp(slot[k], size[k], tag[k], false);
  }
  for (unsigned k = 0; k < WINDOW; k++)
    if (slot[k] != NULL) {
      stamp(slot[k], size[k], tag[k], true);
      prd_free(slot[k]);
    }
  return NULL;
}

static void *purger(void *arg)
{
  (void)arg;
  while (!atomic_load(&stop)) {
    (void)prd__cache_trim();
    prd_reap();
    prd__maint_tick();
  }
  return NULL;
}

static int run(void)
{
  (void)prd_option_set("race_delay", "64");   /* absent from Release builds: then no widening */
  if (prd_option_set("decay_ms", "20") != 0)   /* decay passes too, as often as they come */
    return 2;
  static const char *seeds[WORKERS] = { "stress_purge 0", "stress_purge 1", "stress_purge 2" };
  pthread_t w[WORKERS], p[2];
  for (int i = 0; i < 2; i++)
    if (pthread_create(&p[i], NULL, purger, NULL) != 0)
      return 3;
  for (int i = 0; i < WORKERS; i++)
    if (pthread_create(&w[i], NULL, worker, (void *)seeds[i]) != 0)
      return 3;
  for (int i = 0; i < WORKERS; i++)
    pthread_join(w[i], NULL);
  atomic_store(&stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(p[i], NULL);
  long b = atomic_load(&bad);
  printf("# blocks whose stamps were lost: %ld\n", b);
  return b == 0 ? 0 : 1;
}

static void test_purge_while_churning(void)
{
  CHECK_EQ(prd_test_bounded(run, "purge_while_churning", 120), 0);
}

int main(void)
{
  RUN(test_purge_while_churning);
  return prd_test_done();
}
