/* test_defer_gp_batch: the depot rule runs a grace period on the allocating thread only once
 * the depot holds the grace-period batch (defer_gp_batch_kb, src/defer.c section 4, REFILL).
 *
 * The defect this guards: by the 4/5 rule alone, an allocation miss worked on the grace
 * period of the depot's latent magazines as soon as they and the latent slabs held 4/5 of
 * the cache's objects, however few that was.  A cache of 4 KiB objects holds a few hundred,
 * so with a reader running the allocating thread ran a grace period (a membarrier and scans
 * that wait out the reader's sections, tens of microseconds) every few hundred deferrals
 * and spent most of its time in them, where batch free pays one synchronize per 4096.
 *
 * A reader holds one read-side section open throughout, so no grace period ends and every
 * miss that finds the depot's magazines unsafe goes through the rule.  Allocating and
 * deferring 4 KiB objects one at a time, the rule must not have the thread wait
 * (depot_gp_waits) before the depot holds the batch: 2 MiB, 512 such objects.  With the batch
 * off (0) the same run must wait before that (the old rule), which shows that the count can
 * move.  The grace periods cannot end, so nothing deferred may come back (repeats).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"
#include "prd_test.h"

#define OBJ_SIZE 4096
#define PAIRS 400   /* fewer than the batch's 512 objects of 4 KiB */

static atomic_int rd_in, rd_stop;

static void *reader(void *arg)
{
  (void)arg;
  prd_rcu_register_thread();
  prd_rcu_read_lock();
  atomic_store(&rd_in, 1);
  while (!atomic_load(&rd_stop))
    sched_yield();
  prd_rcu_read_unlock();
  prd_rcu_unregister_thread();
  return NULL;
}

static int ptr_cmp(const void *a, const void *b)
{
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* Allocates and defers PAIRS objects of a new cache; returns its depot_gp_waits. */
static uint64_t run(const char *name, long batch_kb)
{
  atomic_store(&prd__options.defer_gp_batch_kb, batch_kb);
  prd_cache_t *cp = prd_cache_create(name, OBJ_SIZE, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(cp != NULL);
  void **got = malloc(PAIRS * sizeof(void *));
  for (int i = 0; i < PAIRS; i++) {
    got[i] = prd_cache_alloc(cp, PRD_SLEEP);
    CHECK(got[i] != NULL);
    *(volatile long *)got[i] = i;
    prd_cache_free_deferred(cp, got[i]);
  }
  qsort(got, PAIRS, sizeof(void *), ptr_cmp);
  for (int i = 1; i < PAIRS; i++)
    CHECK(got[i] != got[i - 1]);   /* no grace period ended: no object came back */
  free(got);
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  CHECK_EQ(prd_cache_stats(cp, &st), 0);
  printf("  %s (defer_gp_batch_kb=%ld): %d pairs, depot_gp_waits %llu\n", name, batch_kb, PAIRS,
         (unsigned long long)st.depot_gp_waits);
  return st.depot_gp_waits;
}

static void test_no_wait_below_batch(void)
{
  atomic_store(&prd__options.defer_poll_us, 0);   /* the reader holds it: look once */
  pthread_t th;
  CHECK_EQ(pthread_create(&th, NULL, reader, NULL), 0);
  while (!atomic_load(&rd_in))
    sched_yield();
  CHECK_EQ(run("gpbatch", 2048), 0);
  CHECK(run("gpbatch-off", 0) > 0);
  atomic_store(&rd_stop, 1);
  CHECK_EQ(pthread_join(th, NULL), 0);
}

int main(void)
{
  RUN(test_no_wait_below_batch);
  return prd_test_done();
}
