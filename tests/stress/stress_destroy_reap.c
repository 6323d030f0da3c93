/*
 * stress_destroy_reap.c: a cache with deferred buffers destroyed while other threads reap
 * every cache (prd_reap, malloc_trim's reap of everything: their depot reaps take latent
 * magazines out of the depot's lock), and an owner thread keeps deferring on a cache of its
 * own so grace periods keep running.  Each destroy must find every buffer back: a deferred
 * buffer that a reap put into the latent slabs after the destroy's drain is waited for
 * (cache.c, prd_cache_destroy), not reported as still allocated (which would end the child:
 * abort_on_error is on).  Windows widened with race_delay where the build has it.
 */
// prd-test-labels: stress
#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "prd_test.h"

#if defined(PRD_TSAN) || defined(PRD_ASAN)
#define CYCLES 300
#else
#define CYCLES 1000
#endif

static atomic_int stop;

static void *reaper(void *arg)
{
  (void)arg;
  while (!atomic_load(&stop)) {
    (void)prd__cache_trim();
    prd_reap();
  }
  return NULL;
}

static void *owner(void *arg)
{
  (void)arg;
  prd_cache_t *cp = prd_cache_create("owner", 96, 0, NULL, NULL, NULL, NULL, NULL, 0);
  if (cp == NULL)
    return NULL;
  while (!atomic_load(&stop)) {
    void *o[256];
    for (int i = 0; i < 256; i++)
      o[i] = prd_cache_alloc(cp, PRD_SLEEP);
    for (int i = 0; i < 256; i++) {
      if (i & 1)
        prd_cache_free_deferred(cp, o[i]);
      else
        prd_cache_free(cp, o[i]);
    }
  }
  prd_cache_destroy(cp);
  return NULL;
}

static int run(void)
{
  (void)prd_option_set("race_delay", "64");   /* absent from Release builds: then no widening */
  prd_rng_t rng = prd_rng_seeded("stress_destroy_reap");
  pthread_t r[2], w;
  for (int i = 0; i < 2; i++)
    if (pthread_create(&r[i], NULL, reaper, NULL) != 0)
      return 2;
  if (pthread_create(&w, NULL, owner, NULL) != 0)
    return 2;
  for (int k = 0; k < CYCLES; k++) {
    prd_cache_t *cp = prd_cache_create("scratch", 96, 0, NULL, NULL, NULL, NULL, NULL,
                                       PRD_CACHE_NODEBUG);
    if (cp == NULL)
      return 3;
    void *objs[64];
    int n = 8 + (int)(prd_rng_next(&rng) % 56);
    for (int i = 0; i < n; i++)
      objs[i] = prd_cache_alloc(cp, PRD_SLEEP);
    for (int i = 0; i < n; i++) {
      if (i & 1)
        prd_cache_free_deferred(cp, objs[i]);
      else
        prd_cache_free(cp, objs[i]);
    }
    prd_cache_destroy(cp);   /* a buffer not back is reported, and the child ends */
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(r[i], NULL);
  pthread_join(w, NULL);
  return 0;
}

static void test_destroy_while_reaping(void)
{
  CHECK_EQ(prd_test_bounded(run, "destroy_while_reaping", 120), 0);
}

int main(void)
{
  RUN(test_destroy_while_reaping);
  return prd_test_done();
}
