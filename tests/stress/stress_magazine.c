/*
 * stress_magazine.c: the CPU layer under threads.
 *   producer/consumer: one thread allocates, others free (every free is a remote one), with
 *     prd_reap running concurrently (the handshake against running owners);
 *   churn: many short threads that allocate, free some, hand the rest over and exit (the TLS
 *     destructor flushes): the statistics show no object lost;
 *   fork: fork while other threads allocate; the child allocates and frees and exits 0.
 * Counts scale down under sanitizers.
 */
// prd-test-timeout: 600
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "internal.h"
#define PRD_TEST_FORKS_WITH_MANY_LOCKS   /* see prd_test.h: TSan holds at most 64 */
#include "prd_test.h"

#if defined(PRD_TSAN)
#define SCALE 20
#elif defined(PRD_ASAN)
#define SCALE 5
#else
#define SCALE 1
#endif

static prd_cache_stats_t stats(prd_cache_t *cp)
{
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  prd_cache_stats(cp, &st);
  return st;
}

/* ---- producer/consumer --------------------------------------------------------------------- */
#define RING 1024
static prd_cache_t *pc_cp;
static _Atomic(void *) pc_ring[RING];
static atomic_long pc_produced, pc_consumed;
static long pc_total;
static atomic_bool pc_done;

static void *producer(void *arg)
{
  (void)arg;
  for (long i = 0; i < pc_total; i++) {
    uint64_t *p = prd_cache_alloc(pc_cp, 0);
    CHECK(p != NULL);
    p[0] = (uint64_t)i;
    for (;;) {
      size_t slot = (size_t)i % RING;
      void *expect = NULL;
      if (atomic_compare_exchange_weak(&pc_ring[slot], &expect, p))
        break;
      sched_yield();
    }
    atomic_fetch_add(&pc_produced, 1);
  }
  return NULL;
}

static void *consumer(void *arg)
{
  size_t start = (size_t)(uintptr_t)arg;
  while (atomic_load(&pc_consumed) < pc_total) {
    bool got = false;
    for (size_t k = 0; k < RING; k++) {
      size_t slot = (start + k) % RING;
      void *p = atomic_exchange(&pc_ring[slot], NULL);
      if (p != NULL) {
        prd_cache_free(pc_cp, p);
        atomic_fetch_add(&pc_consumed, 1);
        got = true;
      }
    }
    if (!got)
      sched_yield();
  }
  return NULL;
}

static void *reaper(void *arg)
{
  (void)arg;
  while (!atomic_load(&pc_done)) {
    prd_reap();
    sched_yield();
  }
  return NULL;
}

static void test_producer_consumer(void)
{
  pc_cp = prd_cache_create("pc", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  pc_total = 400000 / SCALE;
  pthread_t p, c[3], r;
  pthread_create(&r, NULL, reaper, NULL);
  pthread_create(&p, NULL, producer, NULL);
  for (uintptr_t i = 0; i < 3; i++)
    pthread_create(&c[i], NULL, consumer, (void *)(i * 331));
  pthread_join(p, NULL);
  for (int i = 0; i < 3; i++)
    pthread_join(c[i], NULL);
  atomic_store(&pc_done, true);
  pthread_join(r, NULL);
  prd_cache_stats_t st = stats(pc_cp);
  CHECK_EQ(atomic_load(&pc_consumed), pc_total);
  CHECK_EQ(st.thread_cache_objs, 0);   /* every thread exited */
  CHECK_EQ(st.bufs_inuse, st.depot_rounds);
  CHECK_EQ(prd__cache_check(pc_cp), 0);
  prd_cache_destroy(pc_cp);
}

/* ---- thread churn -------------------------------------------------------------------------- */
static prd_cache_t *churn_cp;
static pthread_mutex_t churn_lock = PTHREAD_MUTEX_INITIALIZER;
static void *churn_kept[64];
static int churn_nkept;

static void *churner(void *arg)
{
  uintptr_t id = (uintptr_t)arg;
  void *objs[20];
  for (int i = 0; i < 20; i++)
    objs[i] = prd_cache_alloc(churn_cp, 0);
  for (int i = 1; i < 20; i++)
    prd_cache_free(churn_cp, objs[i]);
  /* hand one object to the next thread: frees by a thread other than the allocator */
  pthread_mutex_lock(&churn_lock);
  if (churn_nkept < 64 && (id & 1)) {
    churn_kept[churn_nkept++] = objs[0];
    objs[0] = NULL;
  } else if (churn_nkept > 0) {
    void *o = churn_kept[--churn_nkept];
    pthread_mutex_unlock(&churn_lock);
    prd_cache_free(churn_cp, o);
    pthread_mutex_lock(&churn_lock);
  }
  pthread_mutex_unlock(&churn_lock);
  if (objs[0] != NULL)
    prd_cache_free(churn_cp, objs[0]);
  return NULL;
}

static void test_thread_churn(void)
{
  churn_cp = prd_cache_create("churn", 96, 0, NULL, NULL, NULL, NULL, NULL, 0);
  int n = 10000 / SCALE;
  for (int i = 0; i < n; i += 4) {
    pthread_t t[4];
    for (int k = 0; k < 4; k++)
      pthread_create(&t[k], NULL, churner, (void *)(uintptr_t)(i + k));
    for (int k = 0; k < 4; k++)
      pthread_join(t[k], NULL);
  }
  prd_cache_stats_t st = stats(churn_cp);
  /* no object lost: what the slab layer handed out is held by the user or parked in the depot */
  CHECK_EQ(st.thread_cache_objs, 0);
  CHECK_EQ(st.bufs_inuse, (uint64_t)churn_nkept + st.depot_rounds);
  CHECK_EQ(st.mag_alloc_hits + st.depot_full_gets + st.mag_slab_allocs >= (uint64_t)n * 20, 1);
  CHECK_EQ(prd__cache_check(churn_cp), 0);
  while (churn_nkept > 0)
    prd_cache_free(churn_cp, churn_kept[--churn_nkept]);
  prd_cache_destroy(churn_cp);
}

/* ---- fork while other threads allocate -------------------------------------------------- */
static prd_cache_t *fork_cp;
static atomic_bool fork_stop;

static void *fork_worker(void *arg)
{
  (void)arg;
  void *objs[40];
  while (!atomic_load(&fork_stop)) {
    for (int i = 0; i < 40; i++)
      objs[i] = prd_cache_alloc(fork_cp, 0);
    for (int i = 0; i < 40; i++)
      prd_cache_free(fork_cp, objs[i]);
    void *v = prd_vmem_alloc(prd_heap_arena(), prd__os_page_size(), 0);
    prd_vmem_free(prd_heap_arena(), v, prd__os_page_size());
  }
  return NULL;
}

static void test_fork(void)
{
  fork_cp = prd_cache_create("fork", 128, 0, NULL, NULL, NULL, NULL, NULL, 0);
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, fork_worker, NULL);
  int forks = 1000 / SCALE, bad = 0;
  for (int f = 0; f < forks; f++) {
    void *mine = prd_cache_alloc(fork_cp, 0);
    pid_t pid = fork();
    if (pid == 0) {
      /* the child: this thread's caches work, the others' were taken over */
      void *objs[100];
      for (int i = 0; i < 100; i++)
        objs[i] = prd_cache_alloc(fork_cp, 0);
      for (int i = 0; i < 100; i++)
        prd_cache_free(fork_cp, objs[i]);
      prd_cache_free(fork_cp, mine);
      prd_cache_t *c2 = prd_cache_create("child", 32, 0, NULL, NULL, NULL, NULL, NULL, 0);
      void *x = prd_cache_alloc(c2, 0);
      prd_cache_free(c2, x);
      prd_cache_destroy(c2);
      /* the workers' objects in their hands at fork time stay allocated (they are gone) */
      prd_cache_stats_t st = stats(fork_cp);
      int rc = 0;
      if (st.thread_cache_objs + st.depot_rounds > st.bufs_inuse)
        rc = 3;
      prd_thread_flush();   /* the forking thread's caches work and flush */
      if (stats(fork_cp).thread_cache_objs != 0)   /* the other threads' were taken over */
        rc = 4;
      if (prd__cache_check(fork_cp) != 0)
        rc = 5;
      _exit(rc);
    }
    CHECK(pid > 0);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
      ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      if (bad++ == 0)
        fprintf(stderr, "  child status %#x\n", (unsigned)status);
    }
    prd_cache_free(fork_cp, mine);
  }
  atomic_store(&fork_stop, true);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  CHECK_EQ(bad, 0);
  prd_cache_destroy(fork_cp);
}

int main(void)
{
  /* intervals are driven by the tests of test_magazine; here the inline mode is exercised
   * with a short interval (a child never starts threads: TSan forbids it after fork) */
  prd_option_set("maint_thread", "0");
  prd_option_set("maint_interval", "50");
  RUN(test_producer_consumer);
  RUN(test_thread_churn);
  RUN(test_fork);
  return prd_test_done();
}
