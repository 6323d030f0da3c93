/*
 * test_slab_own.c: thread-owned slabs (src/slab.c section 10, magazine.c section 3 tier 4).
 *
 * The defect they guard: tier 4 of the magazine layer took buffers from the cache's shared
 * partial slabs, so two threads that grew a cache at the same time got alternate buffers of
 * one slab, and their blocks shared cache lines (false sharing between threads that share
 * nothing, seen by `prd-bench threads --sharing`).  Each thread now allocates from a slab of
 * its own, which it must give back when it exits, flushes or is reaped: a slab left owned by
 * a dead thread would strand its free buffers for good.
 *   - test_two_threads_*: two threads allocate in strict turns, one allocation each, from an
 *     object cache (tier 4 takes one buffer) and from malloc's classes (tier 4 takes a
 *     magazine's worth); no slab may hold blocks of both.
 *   - test_exit_releases: a thread takes a buffer (its slab becomes its own) and exits; the
 *     slab must be the cache's again, and the next thread's allocation must come from it, with
 *     no new slab.
 *   - test_hint_checked: the slab layer takes a hint only for its owner, and a stale one (its
 *     slab given back and destroyed) is refused without harm; a reap of everything takes
 *     every current slab back.
 *   - test_exit_torture: producer threads allocate and exit in waves while other threads free
 *     their blocks (into the slabs the producers own, or owned until a moment ago) and a third
 *     reaps all the time, with the race points widened (option race_delay, race.h); at the end
 *     no slab may be owned, no buffer handed out twice and the slab layer consistent.
 * The fork child's part is test_slab_own_fork.c (TSan needs its deadlock detector off there).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "internal.h"
#include "pagemap.h"
#include "prd_test.h"

/* The first buffer of the slab holding buf, by the page map: one value per slab. */
static uintptr_t slab_id(const void *buf)
{
  uintptr_t e = prd__pm_get(buf);
  return (e & PRD_PM_KIND_MASK) == PRD_PM_SLAB ? prd__pm_first_of(e, (uintptr_t)buf) : 0;
}

static uint64_t owned_slabs(prd_cache_t *cp)
{
  pthread_mutex_lock(cp->cache_lock);
  uint64_t n = cp->cache_nowned;
  pthread_mutex_unlock(cp->cache_lock);
  return n;
}

/* ---- two threads in turns ---------------------------------------------------------------- */
#define TURNS 700
static _Atomic int tt_turn;
static prd_cache_t *tt_cache;   /* NULL: prd_malloc(48) */
static void *tt_objs[2][TURNS];

static void *tt_thread(void *arg)
{
  int me = (int)(intptr_t)arg;
  for (int i = 0; i < TURNS; i++) {
    while (atomic_load_explicit(&tt_turn, memory_order_acquire) != me)
      sched_yield();
    tt_objs[me][i] = tt_cache != NULL ? prd_cache_alloc(tt_cache, 0) : prd_malloc(48);
    atomic_store_explicit(&tt_turn, 1 - me, memory_order_release);
  }
  return NULL;
}

static void tt_run(prd_cache_t *cp)
{
  tt_cache = cp;
  atomic_store(&tt_turn, 0);
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, tt_thread, (void *)(intptr_t)i);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  /* no slab holds blocks of both threads (so no line does either) */
  size_t shared = 0;
  for (int i = 0; i < TURNS; i++) {
    CHECK(tt_objs[0][i] != NULL && tt_objs[1][i] != NULL);
    uintptr_t s = slab_id(tt_objs[0][i]);
    CHECK(s != 0);
    for (int j = 0; j < TURNS; j++)
      if (slab_id(tt_objs[1][j]) == s) {
        shared++;
        break;
      }
  }
  CHECK_EQ(shared, 0);
  for (int me = 0; me < 2; me++)
    for (int i = 0; i < TURNS; i++) {
      if (cp != NULL)
        prd_cache_free(cp, tt_objs[me][i]);
      else
        prd_free(tt_objs[me][i]);
    }
}

static void test_two_threads_object_cache(void)
{
  prd_cache_t *cp = prd_cache_create("own_turns", 48, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  CHECK(cp != NULL);
  tt_run(cp);
  /* both threads exited: their slabs are the cache's again */
  CHECK_EQ(owned_slabs(cp), 0);
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_destroy(cp);
}

static void test_two_threads_malloc(void)
{
  tt_run(NULL);
}

/* ---- a thread's exit gives its slab back ---------------------------------------------------- */
static prd_cache_t *ex_cache;
static void *ex_buf;
static uint64_t ex_owned_before_exit;

static void *ex_thread(void *arg)
{
  (void)arg;
  ex_buf = prd_cache_alloc(ex_cache, 0);
  ex_owned_before_exit = owned_slabs(ex_cache);
  return NULL;
}

static void test_exit_releases(void)
{
  ex_cache = prd_cache_create("own_exit", 64, 0, NULL, NULL, NULL, NULL, NULL,
                              PRD_CACHE_NODEBUG);
  CHECK(ex_cache != NULL);
  pthread_t t;
  pthread_create(&t, NULL, ex_thread, NULL);
  pthread_join(t, NULL);
  void *first = ex_buf;
  CHECK(first != NULL);
  CHECK_EQ(ex_owned_before_exit, 1);   /* the thread's slab was its own while it ran */
  CHECK_EQ(owned_slabs(ex_cache), 0);  /* and is not after its exit */
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  CHECK_EQ(prd_cache_stats(ex_cache, &st), 0);
  uint64_t creates = st.slab_creates;
  CHECK_EQ(creates, 1);
  /* the next thread takes the same slab, whole: no new slab */
  pthread_create(&t, NULL, ex_thread, NULL);
  pthread_join(t, NULL);
  CHECK(ex_buf != NULL);
  CHECK(slab_id(ex_buf) == slab_id(first));
  CHECK_EQ(prd_cache_stats(ex_cache, &st), 0);
  CHECK_EQ(st.slab_creates, creates);
  CHECK_EQ(owned_slabs(ex_cache), 0);
  CHECK_EQ(prd__cache_check(ex_cache), 0);
  prd_cache_free(ex_cache, first);
  prd_cache_free(ex_cache, ex_buf);
  prd_cache_destroy(ex_cache);
}

/* ---- the slab layer's check of a hint ------------------------------------------------------ */
static void hint_checked(size_t size, bool large)
{
  prd_cache_t *cp = prd_cache_create("own_hint", size, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG | PRD_CACHE_NOMAGAZINE);
  CHECK(cp != NULL);
  CHECK(((cp->cache_flags & PRD_CF_HASH) != 0) == large);   /* the layout meant */
  int me, other;   /* two owners' tokens */
  void *b[4];
  void *mine = NULL;
  CHECK_EQ(prd__slab_alloc_own(cp, b, 2, 0, &me, &mine), 2);
  CHECK(mine != NULL && slab_id(mine) == slab_id(b[0]) && slab_id(b[1]) == slab_id(b[0]));
  /* another owner passing my slab as its hint does not get it */
  void *theirs = mine;
  CHECK_EQ(prd__slab_alloc_own(cp, b + 2, 1, 0, &other, &theirs), 1);
  CHECK(theirs != NULL && theirs != mine && slab_id(b[2]) != slab_id(b[0]));
  CHECK_EQ(owned_slabs(cp), 2);
  /* a plain allocation takes neither */
  b[3] = prd__slab_alloc(cp, 0);
  CHECK(b[3] != NULL && slab_id(b[3]) != slab_id(b[0]) && slab_id(b[3]) != slab_id(b[2]));
  CHECK_EQ(prd__cache_check(cp), 0);
  /* my slab given back, emptied and destroyed: the stale hint is refused, and the buffer
   * comes from a slab picked as for anyone, which becomes mine */
  prd__slab_disown(cp, &me, mine);
  CHECK_EQ(owned_slabs(cp), 1);
  prd__slab_free(cp, b[0]);
  prd__slab_free(cp, b[1]);
  prd__slab_reap(cp, true);   /* and a reap of everything takes the other's back too */
  CHECK_EQ(owned_slabs(cp), 0);
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  CHECK_EQ(prd_cache_stats(cp, &st), 0);
  CHECK_EQ(st.slab_destroys, 1);
  void *stale = mine;
  CHECK_EQ(prd__slab_alloc_own(cp, b, 1, 0, &me, &stale), 1);
  CHECK(stale != NULL && slab_id(b[0]) == slab_id(stale));
  CHECK_EQ(owned_slabs(cp), 1);
  CHECK_EQ(prd__cache_check(cp), 0);
  prd__slab_free(cp, b[0]);
  prd__slab_free(cp, b[2]);
  prd__slab_free(cp, b[3]);
  prd__slab_disown(cp, &me, stale);
  CHECK_EQ(owned_slabs(cp), 0);
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_destroy(cp);
}

static void test_hint_checked(void)
{
  hint_checked(64, false);     /* small layout: the prd_slab_t at the slab's end */
  hint_checked(1024, true);    /* large layout: found through the hash */
}

/* ---- threads exiting while others free into their slabs ------------------------------------- */
#define TX_SECONDS 2.0
#define TX_WAVE 3          /* producers alive at once */
#define TX_BATCH 300       /* blocks one producer allocates */
#define TX_POOL 4096
#define TX_LIVE 0x6f776e6564000000ull   /* word 1 of a block handed out: this | producer id */
#define TX_LIVE_MASK 0xffffffffff000000ull

static prd_cache_t *tx_cache;
static pthread_mutex_t tx_lock = PTHREAD_MUTEX_INITIALIZER;
static void *tx_pool[TX_POOL];
static bool tx_pool_malloc[TX_POOL];
static size_t tx_npool;
static _Atomic int tx_stop, tx_producers_done;
static _Atomic long tx_bad, tx_allocs, tx_reaps;

/* Marks a block handed out; a block whose mark says it is live already was handed out twice. */
static void tx_take(void *p, uint64_t id)
{
  uint64_t old = atomic_exchange_explicit((_Atomic uint64_t *)p + 1, TX_LIVE | id,
                                          memory_order_relaxed);
  if ((old & TX_LIVE_MASK) == TX_LIVE)
    atomic_fetch_add(&tx_bad, 1);
  atomic_fetch_add_explicit(&tx_allocs, 1, memory_order_relaxed);
}

static void tx_give(void *p, bool from_malloc)
{
  atomic_store_explicit((_Atomic uint64_t *)p + 1, 0, memory_order_relaxed);
  if (from_malloc)
    prd_free(p);
  else
    prd_cache_free(tx_cache, p);
}

static void *tx_producer(void *arg)
{
  uint64_t id = (uint64_t)(uintptr_t)arg & 0xffffff;
  void *mine[TX_BATCH];
  for (int i = 0; i < TX_BATCH; i++) {
    bool m = (i & 3) == 3;
    mine[i] = m ? prd_malloc(48) : prd_cache_alloc(tx_cache, 0);
    if (mine[i] == NULL)
      continue;
    tx_take(mine[i], id);
    if ((i & 1) == 0) {   /* half to the freers, while this thread still owns their slab */
      pthread_mutex_lock(&tx_lock);
      if (tx_npool < TX_POOL) {
        tx_pool_malloc[tx_npool] = m;
        tx_pool[tx_npool++] = mine[i];
        mine[i] = NULL;
      }
      pthread_mutex_unlock(&tx_lock);
    }
  }
  for (int i = 0; i < TX_BATCH; i += 2)   /* a quarter freed here */
    if (mine[i + 1] != NULL && (i & 2) == 0) {
      tx_give(mine[i + 1], ((i + 1) & 3) == 3);
      mine[i + 1] = NULL;
    }
  /* the rest goes to the freers too, to be freed after this thread has exited */
  pthread_mutex_lock(&tx_lock);
  for (int i = 0; i < TX_BATCH; i++)
    if (mine[i] != NULL) {
      if (tx_npool < TX_POOL) {
        tx_pool_malloc[tx_npool] = (i & 3) == 3;
        tx_pool[tx_npool++] = mine[i];
      } else {
        pthread_mutex_unlock(&tx_lock);
        tx_give(mine[i], (i & 3) == 3);
        pthread_mutex_lock(&tx_lock);
      }
    }
  pthread_mutex_unlock(&tx_lock);
  return NULL;
}

static void *tx_freer(void *arg)
{
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&tx_lock);
    void *p = NULL;
    bool m = false;
    if (tx_npool > 0) {
      tx_npool--;
      p = tx_pool[tx_npool];
      m = tx_pool_malloc[tx_npool];
    }
    pthread_mutex_unlock(&tx_lock);
    if (p != NULL) {
      tx_give(p, m);
      continue;
    }
    if (atomic_load(&tx_producers_done))
      return NULL;
    sched_yield();
  }
}

static void *tx_reaper(void *arg)
{
  (void)arg;
  while (!atomic_load_explicit(&tx_stop, memory_order_relaxed)) {
    prd_reap();
    atomic_fetch_add_explicit(&tx_reaps, 1, memory_order_relaxed);
    sched_yield();
  }
  return NULL;
}

static double tx_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_exit_torture(void)
{
  prd_option_set("race_delay", "64");
  tx_cache = prd_cache_create("own_torture", 48, 0, NULL, NULL, NULL, NULL, NULL,
                              PRD_CACHE_NODEBUG);
  CHECK(tx_cache != NULL);
  pthread_t fr[2], rp;
  for (int i = 0; i < 2; i++)
    pthread_create(&fr[i], NULL, tx_freer, NULL);
  pthread_create(&rp, NULL, tx_reaper, NULL);
  double end = tx_now() + TX_SECONDS;
  uint64_t waves = 0, id = 1;
  while (tx_now() < end && atomic_load(&tx_bad) == 0) {
    pthread_t pr[TX_WAVE];
    for (int i = 0; i < TX_WAVE; i++)
      pthread_create(&pr[i], NULL, tx_producer, (void *)(uintptr_t)id++);
    for (int i = 0; i < TX_WAVE; i++)
      pthread_join(pr[i], NULL);
    waves++;
  }
  atomic_store(&tx_producers_done, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(fr[i], NULL);
  atomic_store(&tx_stop, 1);
  pthread_join(rp, NULL);
  prd_option_set("race_delay", "0");
  fprintf(stderr, "  waves %" PRIu64 ", blocks %ld, reaps %ld, handed out twice %ld\n", waves,
          atomic_load(&tx_allocs), atomic_load(&tx_reaps), atomic_load(&tx_bad));
  CHECK_EQ(atomic_load(&tx_bad), 0);
  CHECK(waves >= 2);
  /* every producer has exited: none of the cache's slabs may still be owned */
  CHECK_EQ(owned_slabs(tx_cache), 0);
  CHECK_EQ(prd__cache_check(tx_cache), 0);
  /* and everything comes back: a reap of everything (working sets too) leaves no buffer in
   * use and no slab */
  (void)prd__cache_trim();
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  CHECK_EQ(prd_cache_stats(tx_cache, &st), 0);
  CHECK_EQ(st.bufs_inuse, 0);
  CHECK_EQ(st.slabs_full + st.slabs_partial + st.slabs_free, 0);
  prd_cache_destroy(tx_cache);
}

int main(void)
{
  RUN(test_two_threads_object_cache);
  RUN(test_two_threads_malloc);
  RUN(test_exit_releases);
  RUN(test_hint_checked);
  RUN(test_exit_torture);
  return prd_test_done();
}
