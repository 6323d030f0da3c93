/* test_gp_stats: the counters that say where the deferred path's time goes move when their
 * events happen (prd_rcu_stats, rcu.c section 10; the caches' inline waits and their refills
 * from and flushes to the slab layer, prudence.h).
 *
 * The defects they guard: the statistics had no grace-period counter at all (grace periods
 * per second, who waited for them and the membarriers behind them could only be counted from
 * outside the process), and the object-cache churns of Fig. 8 counted only Prudence's own
 * refills and flushes, so the call_rcu baseline (PRD_CACHE_OBLIVIOUS) always showed 0 while
 * its magazines were refilled from and flushed to the slab layer like any other. */
#include <pthread.h>
#include <string.h>

#include "internal.h"
#include "prd_test.h"

static prd_rcu_stats_t rcu_stats(void)
{
  prd_rcu_stats_t st;
  memset(&st, 0xff, sizeof(st));
  st.size = sizeof(st);
  CHECK_EQ(prd_rcu_stats(&st), 0);
  CHECK_EQ(st.version, PRD_RCU_STATS_VERSION);
  return st;
}

static prd_cache_stats_t cache_stats(prd_cache_t *cp)
{
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  CHECK_EQ(prd_cache_stats(cp, &st), 0);
  return st;
}

static void test_bad_input(void)
{
  CHECK_EQ(prd_rcu_stats(NULL), -1);
  prd_rcu_stats_t st;
  st.size = 4;   /* too small for the header */
  CHECK_EQ(prd_rcu_stats(&st), -1);
  /* an older caller's smaller struct: nothing written past its size */
  unsigned char buf[sizeof(prd_rcu_stats_t) + 8];
  memset(buf, 0xab, sizeof(buf));
  prd_rcu_stats_t *small = (prd_rcu_stats_t *)buf;
  small->size = offsetof(prd_rcu_stats_t, gp_expedited);
  CHECK_EQ(prd_rcu_stats(small), 0);
  CHECK_EQ(buf[offsetof(prd_rcu_stats_t, gp_expedited)], 0xab);
}

/* prd_synchronize_rcu: counted as a synchronize, and completes a grace period (inline: no
 * driver needed), with (W1)'s membarrier when the kernel gave us membarrier. */
static void test_synchronize(void)
{
  prd_rcu_stats_t a = rcu_stats();
  prd_synchronize_rcu();
  prd_rcu_stats_t b = rcu_stats();
  CHECK_EQ(b.gp_syncs, a.gp_syncs + 1);
  CHECK(b.gp_completed >= a.gp_completed + 1);
  CHECK(b.gp_ns > a.gp_ns);
  if (__atomic_load_n(&prd__rcu_reader_fences, __ATOMIC_RELAXED) == 0)
    CHECK(b.membarriers > a.membarriers);
  else
    CHECK_EQ(b.membarriers, a.membarriers);   /* fence mode (TSan, an old kernel) */
}

/* An asynchronous request that raises the requested state is counted once (a second request
 * for the same state is one load, not counted); a blocking wait is counted and served by the
 * driver thread. */
static void test_request_wait(void)
{
  prd_rcu_stats_t a = rcu_stats();
  prd_gp_t s = prd_rcu_get_state();
  prd_rcu_request_gp(s);
  prd_rcu_request_gp(s);
  prd_rcu_wait_state(s);
  CHECK(prd_rcu_poll_state(s));
  prd_rcu_stats_t b = rcu_stats();
  CHECK(b.gp_requests >= a.gp_requests + 1);
  CHECK(b.gp_requests <= a.gp_requests + 2);   /* the request and, at most, the wait's */
  CHECK(b.gp_blocking_waits <= a.gp_blocking_waits + 1);
  CHECK(b.gp_completed >= a.gp_completed + 1);
  CHECK(b.gp_by_driver >= a.gp_by_driver + 1);   /* the request started the driver */
  CHECK(b.gp_by_driver <= b.gp_completed);
  /* nothing asked, nothing counted */
  prd_rcu_stats_t c = rcu_stats();
  CHECK(prd_rcu_poll_state(s));
  prd_rcu_request_gp(s);
  prd_rcu_stats_t d = rcu_stats();
  CHECK_EQ(d.gp_requests, c.gp_requests);
  CHECK_EQ(d.gp_inline_waits, c.gp_inline_waits);
}

/* A Prudence deferral asks for its grace period, and a barrier (a blocking wait) sees at least
 * one completed; the cache's inline waits stay the sum of their three kinds. */
static void test_deferral_barrier(void)
{
  prd_cache_t *cp = prd_cache_create("gpst", 256, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  CHECK(cp != NULL);
  prd_rcu_stats_t a = rcu_stats();
  void *p = prd_cache_alloc(cp, 0);
  CHECK(p != NULL);
  prd_cache_free_deferred(cp, p);
  prd_gp_t s = prd_rcu_get_state();
  prd_rcu_request_gp(s);
  prd_rcu_wait_state(s);
  prd_rcu_barrier();
  prd_rcu_stats_t b = rcu_stats();
  CHECK(b.gp_completed >= a.gp_completed + 1);
  CHECK(b.gp_requests >= a.gp_requests + 1);
  prd_cache_stats_t st = cache_stats(cp);
  CHECK_EQ(st.deferred_frees, 1);
  CHECK_EQ(st.gp_waits, st.latent_cap_waits + st.depot_gp_waits + st.oom_gp_waits);
  prd_cache_destroy(cp);
}

/* The allocator's bounded wait (rcu.c section 9) is counted as an inline wait when the state
 * is not reached at its first poll, and not at all when it is. */
static void test_inline_wait(void)
{
  prd_rcu_stats_t a = rcu_stats();
  CHECK(prd__rcu_poll_bounded(0, 1000000));   /* ended already */
  prd_rcu_stats_t b = rcu_stats();
  CHECK_EQ(b.gp_inline_waits, a.gp_inline_waits);
  prd_gp_t s = prd_rcu_get_state();
  CHECK(prd__rcu_poll_bounded(s, 1000000000));   /* no reader: it ends well within 1 s */
  prd_rcu_stats_t c = rcu_stats();
  CHECK_EQ(c.gp_inline_waits, b.gp_inline_waits + 1);
  CHECK_EQ(c.gp_inline_timeouts, b.gp_inline_timeouts);
  CHECK(c.gp_completed >= b.gp_completed + 1);
}

/* Fig. 8 for the call_rcu baseline: holding more objects than the magazines refills the
 * object cache from the slab layer, and a reap after the callbacks have freed them flushes
 * the magazines back to it; both counted, so its churns are not 0. */
#define OBL_N 4096
static void *obl[OBL_N];

static void test_oblivious_churns(void)
{
  prd_cache_t *cp = prd_cache_create("gpst_obl", 128, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_OBLIVIOUS | PRD_CACHE_NODEBUG);
  CHECK(cp != NULL);
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < OBL_N; i++) {
      obl[i] = prd_cache_alloc(cp, 0);
      CHECK(obl[i] != NULL);
    }
    for (int i = 0; i < OBL_N; i++)
      prd_cache_free_deferred(cp, obl[i]);
    prd_rcu_barrier();
    prd_reap();   /* the callbacks' magazines, parked in the worker thread, go back */
  }
  prd_cache_stats_t st = cache_stats(cp);
  CHECK_EQ(st.deferred_frees, 3 * OBL_N);
  CHECK_EQ(st.oc_churns, 0);   /* Prudence's own counters: none of its refills happened */
  CHECK(st.slab_refills > 0);
  CHECK(st.slab_flushes > 0);
  CHECK_EQ(st.slab_oc_churns, st.slab_refills < st.slab_flushes ? st.slab_refills
                                                                 : st.slab_flushes);
  CHECK(st.slab_oc_churns > 0);
  prd_cache_destroy(cp);
}

/* The JSON document carries the process's grace periods. */
static void test_json(void)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *ms = open_memstream(&buf, &len);
  CHECK(ms != NULL);
  CHECK_EQ(prd_stats_json(ms), 0);
  fclose(ms);
  CHECK_STR_CONTAINS(buf, "\"rcu\":{\"gp_requests\":");
  CHECK_STR_CONTAINS(buf, "\"gp_completed\":");
  CHECK_STR_CONTAINS(buf, "\"membarriers\":");
  CHECK_STR_CONTAINS(buf, "\"slab_oc_churns\":");
  free(buf);
  ms = open_memstream(&buf, &len);
  CHECK(ms != NULL);
  CHECK_EQ(prd_stats_print(ms, PRD_STATS_NOARENAS), 0);
  fclose(ms);
  CHECK_STR_CONTAINS(buf, "grace periods: ");
  free(buf);
}

int main(void)
{
  RUN(test_bad_input);
  RUN(test_synchronize);
  RUN(test_request_wait);
  RUN(test_deferral_barrier);
  RUN(test_inline_wait);
  RUN(test_oblivious_churns);
  RUN(test_json);
  return prd_test_done();
}
